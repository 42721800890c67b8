import SSHKit
import ServerTransport

/// An agent's terminal attached to this program: its screen as bytes, keystrokes,
/// resizes. Detaching leaves the agent running.
///
/// For a tmux session this is `tmux attach` on a PTY channel of the host's shared
/// connection: tmux redraws the whole screen on attach and on every resize. When the
/// connection drops, `output` ends; the agent keeps running and `attach` again (the
/// transport reconnects) plus `missedOutput` bring the caller back.
public final class AgentTerminal: Sendable {
    public let session: AgentSession
    private let backend: Backend

    enum Backend: Sendable {
        case attached(TransportTerminal)
        case plain(PlainAgentSession)
    }

    init(session: AgentSession, backend: Backend) {
        self.session = session
        self.backend = backend
        switch backend {
        case .attached(let t):
            let box = IteratorBox(t.output.makeAsyncIterator())
            output = AsyncStream(unfolding: { await box.next() })
        case .plain(let p):
            output = p.subscribe()
        }
    }

    /// The screen's bytes as a terminal receives them; ends on detach, when the agent's
    /// session ends, or when the connection drops.
    public let output: AsyncStream<[UInt8]>

    /// Keystrokes, as a terminal sends them.
    /// - Throws: `sessionNotRunning` when the terminal ended.
    public func write(_ bytes: [UInt8]) async throws(AgentError) {
        do {
            switch backend {
            case .attached(let t): try await t.write(bytes)
            case .plain(let p): try await p.terminal.write(bytes)
            }
        } catch {
            throw AgentError(.sessionNotRunning, "the terminal of \(session.ptyID) no longer takes input", transport: error)
        }
    }

    /// The caller's terminal changed size; the agent's follows.
    public func resize(to size: SSHTerminalSize) throws(AgentError) {
        do {
            switch backend {
            case .attached(let t): try t.resize(to: size)
            case .plain(let p): try p.terminal.resize(to: size)
            }
        } catch {
            throw AgentError(.sessionNotRunning, "cannot resize the terminal of \(session.ptyID)", transport: error)
        }
    }

    /// Stops showing the agent here; the agent runs on. Idempotent.
    public func detach() {
        switch backend {
        case .attached(let t): t.hangUp()
        case .plain(let p): p.unsubscribe()
        }
    }
}

/// One reader's iterator, moved into the unfolding closure.
/// Safe because: the stream built on it has one consumer, which calls `next` serially.
private final class IteratorBox: @unchecked Sendable {
    var iterator: ProcessOutput.AsyncIterator
    init(_ iterator: ProcessOutput.AsyncIterator) { self.iterator = iterator }
    func next() async -> [UInt8]? { await iterator.next() }
}
