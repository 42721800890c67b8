import SSHKit

/// A transport that can run a program on a pseudo-terminal (`ssh -t`): what an
/// interactive program (an editor, `tmux attach`, a coding agent's TUI) needs.
/// `SSHTransport` and `LocalTransport` are; `OpenSSHTransport` and `MockTransport` run
/// processes on pipes only.
public protocol TerminalTransport: ServerTransport {
    /// Starts `executable` with `arguments` on a terminal of `terminal.size`; returns
    /// once it started. Its output (stdout and stderr merged, as on a terminal) streams
    /// on `output`; keystrokes go to `input`. Prefer `withTerminal`, which cancels (hangs
    /// up) it when its body ends.
    /// - Throws: `hostUnreachable` and the other transport codes; `other` when the
    ///   server refused the terminal.
    func startTerminal(_ executable: String, arguments: [String], environment: [String: String],
                       terminal: SSHTerminal) async throws(TransportError) -> TransportTerminal
}

extension TerminalTransport {
    /// Runs `body` with a started terminal and hangs it up when `body` ends.
    public func withTerminal<R>(_ executable: String, arguments: [String], environment: [String: String] = [:],
                                terminal: SSHTerminal = SSHTerminal(), _ body: (TransportTerminal) async throws -> R)
        async throws -> R
    {
        let t = try await startTerminal(executable, arguments: arguments, environment: environment, terminal: terminal)
        defer { t.cancel() }
        return try await body(t)
    }
}

/// A program running on a pseudo-terminal (see `TerminalTransport`).
public final class TransportTerminal: Sendable {
    /// What the program draws: bytes as a terminal would receive them. One reader at a time.
    public let output: ProcessOutput
    /// Keystrokes: bytes as a terminal would send them (`\r` for Enter, `ESC[A` for Up).
    /// `input.write` throws `other` when the program no longer reads (it ended).
    public let input: TransportInput
    let backend: any TerminalBackend

    init(backend: any TerminalBackend) {
        self.backend = backend
        output = ProcessOutput(backend: backend, stream: .stdout)
        input = TransportInput(backend: backend)
    }

    /// Tells the program its terminal's new size (it gets SIGWINCH).
    public func resize(to size: SSHTerminalSize) throws(TransportError) {
        try backend.resize(size)
    }

    /// Hangs the terminal up (never blocks; the program gets SIGHUP or TERM and its
    /// channel closes). Idempotent; `output` ends.
    public func cancel() {
        backend.cancel()
    }

    /// Waits for how the program ended.
    /// - Throws: `hostUnreachable` when the connection was lost first; a cancellation
    ///   (`isCancellation`) at once when the waiting task is cancelled (the program goes on).
    public func exitStatus() async throws(TransportError) -> SSHExitStatus {
        try await backend.exitStatus()
    }
}

/// A process backend with a terminal to resize.
protocol TerminalBackend: ProcessBackend {
    func resize(_ size: SSHTerminalSize) throws(TransportError)
}
