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
        /// Set once the terminal ended: `.exited`, `.signaled`, or `.gone` when the
        /// connection was lost first.
        var end: AgentProcessState?
    }

    /// Signal numbers of Linux, for the names SSH reports.
    static let signalNumbers: [String: Int32] = [
        "HUP": 1, "INT": 2, "QUIT": 3, "ILL": 4, "ABRT": 6, "FPE": 8, "KILL": 9, "USR1": 10, "SEGV": 11,
        "USR2": 12, "PIPE": 13, "ALRM": 14, "TERM": 15,
    ]

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
        var result = AgentProcessState.gone
        switch try? await terminal.exitStatus() {
        case .exited(let code)?: result = .exited(code)
        case .signaled(let name, _)?: result = .signaled(Self.signalNumbers[name] ?? 0)
        default: break
        }
        let sub = state.withLock { s -> AsyncStream<[UInt8]>.Continuation? in
            s.end = result
            defer { s.subscriber = nil }
            return s.subscriber
        }
        sub?.finish()
    }

    var isRunning: Bool { state.withLock { $0.end == nil } }

    /// `.running` until the terminal ended.
    var processState: AgentProcessState { state.withLock { $0.end ?? .running } }

    /// The last bytes it printed (at most `scrollbackLimit`).
    func capture() -> [UInt8] { state.withLock { $0.scrollback } }

    /// The output from now on, for one attacher (a new one replaces the old, whose
    /// stream ends). Bounded: an attacher that stops reading loses the oldest chunks.
    func subscribe() -> AsyncStream<[UInt8]> {
        let (stream, continuation) = AsyncStream<[UInt8]>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        let old = state.withLock { s -> AsyncStream<[UInt8]>.Continuation? in
            defer { s.subscriber = s.end == nil ? continuation : nil }
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
