/// An interactive shell (or a command) on a pseudo-terminal, like `ssh -t host`.
///
/// The terminal merges the program's stdout and stderr into `output`. Closing or
/// cancelling the shell hangs the terminal up, which ends the shell and the
/// programs it started in the foreground.
public final class SSHShell: Sendable {
    let channel: StreamChannel
    /// The terminal as requested; `resize` does not change this value.
    public let terminal: SSHTerminal

    init(channel: StreamChannel, terminal: SSHTerminal) {
        self.channel = channel
        self.terminal = terminal
    }

    /// What the terminal shows, as chunks of bytes (escape sequences included).
    /// Ends when the shell's channel closes; throws what ended it otherwise.
    public var output: SSHOutputStream { SSHOutputStream(channel: channel, kind: .merged) }

    /// Keystrokes: bytes written to the terminal (a PTY echoes them unless the
    /// program turned echo off).
    public var input: SSHInputWriter { SSHInputWriter(channel: channel) }

    /// Writes to the terminal; see `input`.
    public func write(_ string: String) async throws(SSHError) {
        try await input.write(string)
    }

    /// Tells the remote terminal its new size (the program gets SIGWINCH).
    public func resize(to size: SSHTerminalSize) throws(SSHError) {
        try channel.resize(size)
    }

    /// Sends a signal to the shell process. With a terminal, typing the interrupt
    /// character (`write("\u{3}")`) usually does what users expect instead: it
    /// reaches the foreground program.
    public func send(_ signal: SSHSignal) throws(SSHError) {
        try channel.signal(signal.name)
    }

    /// Sends EOF on the channel. With a terminal, a shell usually ignores it;
    /// `write("\u{4}")` (Ctrl-D at an empty prompt) or `exit` ends it.
    public func sendEOF() throws(SSHError) {
        try channel.finishInput()
    }

    /// Waits until the shell exits: its status or signal. A cancel of the waiting task
    /// throws `cancelled` at once; the shell goes on.
    public func exitStatus() async throws(SSHError) -> SSHExitStatus {
        try await channel.exitStatus()
    }

    /// Hangs up (never blocks): the channel closes and readers end with `cancelled`.
    public func close() {
        channel.cancel()
    }
}
