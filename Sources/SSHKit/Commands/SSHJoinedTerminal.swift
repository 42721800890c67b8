#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A remote program on a pseudo-terminal whose other end is a local file descriptor:
/// what `ssh -t host cmd` does with the terminal it runs in.
///
/// The connection's worker thread carries the bytes itself, both ways: what is read
/// from the descriptor goes to the program, and what the program draws is written to
/// the descriptor, with no hand-over to a task of yours (a keystroke's echo costs what
/// it costs in `ssh`). Start one with `SSHConnection.startJoinedTerminal` or
/// `withJoinedTerminal`. A detach byte, when given, ends the join when it is read: the
/// bytes before it reach the program, the channel closes (the program gets its
/// terminal's hang-up, as when `ssh` ends) and `waitUntilEnded()` returns `.detached`.
public final class SSHJoinedTerminal: Sendable {
    /// How a joined terminal ended.
    public enum End: Sendable, Equatable {
        /// The detach byte was read.
        case detached
        /// The program's channel closed; how the program ended (`unknown` when the
        /// server did not say).
        case exited(SSHExitStatus)
        /// The local side ended: the terminal hung up, or the socket's peer went away.
        case terminalClosed
    }

    let bridge: CoreBridge
    let outcome: ResultWaiter<End>

    init(bridge: CoreBridge, outcome: ResultWaiter<End>) {
        self.bridge = bridge
        self.outcome = outcome
    }

    /// Tells the program its terminal's new size (it gets SIGWINCH).
    /// - Throws: `invalidArgument` for a size out of range; `channelClosed` once it ended.
    public func resize(to size: SSHTerminalSize) throws(SSHError) {
        try bridge.resize(size)
    }

    /// Hangs the terminal up (never blocks, idempotent): the channel closes and
    /// `waitUntilEnded()` throws `cancelled`.
    public func cancel() {
        bridge.cancel()
    }

    /// Waits for the end: detached, the program's exit, or the local side's end.
    /// - Throws: what ended it otherwise (`connectionLost`, `cancelled`...); a cancel of
    ///   the waiting task throws `cancelled` at once and the terminal stays joined.
    public func waitUntilEnded() async throws(SSHError) -> End {
        try await outcome.wait().get()
    }
}

extension SSHConnection {
    /// Starts `command` (the login shell when nil) on a pseudo-terminal joined to `fd`,
    /// a terminal or a stream socket (see `SSHJoinedTerminal`); returns once it runs.
    ///
    /// `fd` stays yours: a duplicate is joined and closed when the terminal ends. It
    /// shares `fd`'s open file description, which becomes non-blocking: pass a
    /// descriptor of its own (`open("/dev/tty", O_RDWR)`), not standard input.
    /// - Parameters:
    ///   - command: the command line, or nil for the login shell.
    ///   - terminal: the terminal's type, size and modes.
    ///   - fd: the local terminal or stream socket.
    ///   - detachByte: a byte that ends the join when read (`0x1D` for Ctrl-]), or nil for
    ///     none.
    ///   - options: environment, buffer limit and timeout, as for `startCommand`.
    /// - Throws: `invalidArgument` for a bad command, terminal or descriptor (a pipe is
    ///   refused: a write to one without a reader raises SIGPIPE); `channelOpenFailed`
    ///   and the rest as `startCommand`.
    public func startJoinedTerminal(
        _ command: String?, terminal: SSHTerminal = SSHTerminal(), joining fd: Int32, detachByte: UInt8? = nil,
        options: SSHChannelOptions = SSHChannelOptions()
    ) async throws(SSHError) -> SSHJoinedTerminal {
        if command?.utf8.contains(0) == true { throw SSHError(.invalidArgument, "command contains a NUL byte") }
        let request = try Self.channelRequest(command: command, options: options, terminal: terminal)
        let own = fcntl(fd, F_DUPFD_CLOEXEC, 3)
        guard own >= 0 else {
            var e = SSHError(.invalidArgument, "cannot join descriptor \(fd)")
            e.systemErrno = errno
            throw e
        }
        let opened = OpenWaiter()
        let outcome = ResultWaiter<SSHJoinedTerminal.End>()
        let bridge = try CoreBridge.startTerminal(
            on: core, request, fd: own, detachByte: detachByte,
            handlers: BridgeHandlers(
                opened: { _ in opened.resume(.success(())) },
                failed: { _, error in opened.resume(.failure(error)) },
                ended: { r in
                    opened.resume(.failure(SSHError(.channelClosed, "the terminal ended as it opened")))
                    outcome.resume(r)
                }))
        if case .failure(let e) = await bridge.waitUntilOpen(opened) { throw e }
        logger.trace("joined terminal started", metadata: ["shell": "\(command == nil)"])
        return SSHJoinedTerminal(bridge: bridge, outcome: outcome)
    }

    /// Runs `body` with a joined terminal and hangs it up when `body` ends.
    public func withJoinedTerminal<R>(
        _ command: String?, terminal: SSHTerminal = SSHTerminal(), joining fd: Int32, detachByte: UInt8? = nil,
        options: SSHChannelOptions = SSHChannelOptions(), _ body: (SSHJoinedTerminal) async throws -> R
    ) async throws -> R {
        let t = try await startJoinedTerminal(command, terminal: terminal, joining: fd, detachByte: detachByte,
                                              options: options)
        defer { t.cancel() }
        return try await body(t)
    }
}
