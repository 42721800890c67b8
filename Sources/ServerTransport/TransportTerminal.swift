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

/// A transport that can join a program's terminal to a local descriptor inside its
/// connection, as `ssh -t` carries the terminal it runs in (`SSHTransport`): no task of
/// the caller's handles the bytes. See `SSHJoinedTerminal`.
public protocol TerminalJoiningTransport: TerminalTransport {
    /// Starts `executable` with `arguments` on a terminal of `terminal.size` joined to
    /// `fd` (a terminal or a stream socket; it stays the caller's, and its open file
    /// description becomes non-blocking: pass one of its own, such as a fresh
    /// `open("/dev/tty")`). Returns once it started.
    /// - Parameters:
    ///   - executable: the program, found on the `PATH` of the login.
    ///   - arguments: its arguments, each passed as one word.
    ///   - environment: variables set for it.
    ///   - terminal: the terminal's type, size and modes.
    ///   - fd: the local terminal or stream socket.
    ///   - detachByte: a byte that ends the join when read, or nil.
    /// - Throws: `hostUnreachable` and the other transport codes; `invalidArgument` for a
    ///   descriptor that is neither a terminal nor a socket.
    func startJoinedTerminal(_ executable: String, arguments: [String], environment: [String: String],
                             terminal: SSHTerminal, joining fd: Int32, detachByte: UInt8?)
        async throws(TransportError) -> TransportJoinedTerminal
}

/// A program whose terminal is joined to a local descriptor (see
/// `TerminalJoiningTransport`).
public final class TransportJoinedTerminal: Sendable {
    let joined: SSHJoinedTerminal

    init(joined: SSHJoinedTerminal, permit: SessionPermit) {
        self.joined = joined
        // the session counts until the channel closed, whoever waits or not
        Task.detached {
            _ = try? await joined.waitUntilEnded()
            permit.release()
        }
    }

    /// Tells the program its terminal's new size (it gets SIGWINCH).
    public func resize(to size: SSHTerminalSize) throws(TransportError) {
        do {
            try joined.resize(to: size)
        } catch {
            throw TransportError(error)
        }
    }

    /// Hangs the terminal up (never blocks, idempotent).
    public func cancel() {
        joined.cancel()
    }

    /// Waits for the end: detached, the program's exit, or the local side's end.
    /// - Throws: `hostUnreachable` when the connection was lost first; a cancellation
    ///   (`isCancellation`) when it was hung up, or at once when the waiting task is
    ///   cancelled (the terminal stays joined).
    public func waitUntilEnded() async throws(TransportError) -> SSHJoinedTerminal.End {
        do {
            return try await joined.waitUntilEnded()
        } catch {
            throw TransportError(error)
        }
    }
}
