/// An interactive shell (or a command) on a pseudo-terminal, like `ssh -t host`.
///
/// The terminal merges the program's stdout and stderr into `output`; keystrokes go to
/// `input`. `cancel()` hangs the terminal up, which ends the shell and the programs it
/// started in the foreground.
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
    public var output: SSHByteStream { SSHByteStream(channel: channel, kind: .merged) }

    /// Keystrokes: bytes written to the terminal (a PTY echoes them unless the
    /// program turned echo off). `input.finish()` sends EOF on the channel; with a
    /// terminal, a shell usually ignores it: `input.write("\u{4}")` (Ctrl-D at an empty
    /// prompt) or `exit` ends it.
    public var input: SSHByteWriter { SSHByteWriter(channel: channel) }

    /// Tells the remote terminal its new size (the program gets SIGWINCH).
    public func resize(to size: SSHTerminalSize) throws(SSHError) {
        try channel.resize(size)
    }

    /// Sends a signal to the shell process. With a terminal, typing the interrupt
    /// character (`input.write("\u{3}")`) usually does what users expect instead: it
    /// reaches the foreground program.
    public func send(_ signal: SSHSignal) throws(SSHError) {
        try channel.signal(signal.name)
    }

    /// Waits until the shell exits: its status or signal. A cancel of the waiting task
    /// throws `cancelled` at once; the shell goes on.
    public func exitStatus() async throws(SSHError) -> SSHExitStatus {
        try await channel.exitStatus()
    }

    /// Hangs up (never blocks, idempotent): the channel closes; readers and
    /// `exitStatus()` end with `cancelled`.
    public func cancel() {
        channel.cancel()
    }
}
