import ServerTransport
import Synchronization

/// An agent on a plain PTY channel, for hosts without tmux: it lives exactly as long as
/// the connection. Its output is read all the time into a bounded scrollback (what an
/// attacher missed) and passed to the current attacher.
final class PlainAgentSession: Sendable {
    /// Scrollback kept for `capture` (bytes).
    static let scrollbackLimit = 1 << 20

    private struct State {
        var scrollback: [UInt8] = []
        var subscriber: AsyncStream<[UInt8]>.Continuation?
        var exitStatus: SSHExitStatusResult?
    }

    enum SSHExitStatusResult: Sendable {
        case exited(Int32)
        case lost
    }

    let terminal: TransportTerminal
    private let state = Mutex(State())

    init(terminal: TransportTerminal) {
        self.terminal = terminal
        Task { [self] in await pump() }
    }

    private func pump() async {
        for await chunk in terminal.output {
            state.withLock { s in
                s.scrollback += chunk
                if s.scrollback.count > Self.scrollbackLimit {
                    s.scrollback.removeFirst(s.scrollback.count - Self.scrollbackLimit)
                }
                s.subscriber?.yield(chunk)
            }
        }
        var result = SSHExitStatusResult.lost
        if let status = try? await terminal.wait(), case .exited(let code) = status { result = .exited(code) }
        let sub = state.withLock { s -> AsyncStream<[UInt8]>.Continuation? in
            s.exitStatus = result
            defer { s.subscriber = nil }
            return s.subscriber
        }
        sub?.finish()
    }

    var isRunning: Bool { state.withLock { $0.exitStatus == nil } }

    var exitCode: Int32? {
        state.withLock { s in
            if case .exited(let c)? = s.exitStatus { return c }
            return nil
        }
    }

    /// The last bytes it printed (at most `scrollbackLimit`).
    func capture() -> [UInt8] { state.withLock { $0.scrollback } }

    /// The output from now on, for one attacher (a new one replaces the old, whose
    /// stream ends). Bounded: an attacher that stops reading loses the oldest chunks.
    func subscribe() -> AsyncStream<[UInt8]> {
        let (stream, continuation) = AsyncStream<[UInt8]>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        let old = state.withLock { s -> AsyncStream<[UInt8]>.Continuation? in
            defer { s.subscriber = s.exitStatus == nil ? continuation : nil }
            return s.subscriber
        }
        old?.finish()
        if !isRunning { continuation.finish() }
        return stream
    }

    func unsubscribe() {
        state.withLock { s -> AsyncStream<[UInt8]>.Continuation? in
            defer { s.subscriber = nil }
            return s.subscriber
        }?.finish()
    }
}
