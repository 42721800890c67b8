import SSHKit
import ServerTransport
import Synchronization

/// An agent's terminal attached to this program: its screen as bytes, keystrokes,
/// resizes. Cancelling the attach (tmux's detach) leaves the agent running.
///
/// For a tmux session this is `tmux attach` on a PTY channel of the host's shared
/// connection: tmux redraws the whole screen on attach and on every resize. When the
/// connection drops, `output` ends; the agent keeps running, and `attach` again (the
/// transport reconnects) brings the caller back: tmux redraws the screen, and what
/// scrolled past meanwhile is in `AgentHost.recentOutput(of:lines:)`.
public final class AgentTerminal: Sendable {
    public let session: AgentSession
    private let backend: Backend

    enum Backend: Sendable {
        case attached(TransportTerminal)
        case plain(PlainAgentSession)
    }

    private let end = EndSignal()

    init(session: AgentSession, backend: Backend) {
        self.session = session
        self.backend = backend
        let end = end
        switch backend {
        case .attached(let t):
            let box = IteratorBox(t.output.makeAsyncIterator())
            output = AsyncStream(unfolding: {
                let chunk = await box.next()
                if chunk == nil { end.fire() }
                return chunk
            })
        case .plain(let p):
            let box = StreamIteratorBox(p.subscribe().makeAsyncIterator())
            output = AsyncStream(unfolding: {
                let chunk = await box.next()
                if chunk == nil { end.fire() }
                return chunk
            })
        }
    }

    /// Runs `action` once, when the terminal ends: detached, or its output ended (at
    /// once when that happened already).
    func whenEnded(_ action: @escaping @Sendable () -> Void) {
        end.add(action)
    }

    /// The screen's bytes as a terminal receives them; ends on detach, when the agent's
    /// session ends, or when the connection drops.
    public let output: AsyncStream<[UInt8]>

    /// Keystrokes go in through `input.write(_:)`.
    public var input: AgentTerminalInput { AgentTerminalInput(terminal: self) }

    func sendKeys(_ bytes: [UInt8]) async throws(AgentError) {
        do {
            switch backend {
            case .attached(let t): try await t.input.write(bytes)
            case .plain(let p): try await p.terminal.input.write(bytes)
            }
        } catch {
            throw AgentError(.sessionNotRunning, "the terminal of \(session.ptyID) no longer takes input", cause: error)
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
            throw AgentError(.sessionNotRunning, "cannot resize the terminal of \(session.ptyID)", cause: error)
        }
    }

    /// Ends this attach now (tmux's detach): never blocks, idempotent; `output` ends, and
    /// the agent runs on.
    public func cancel() {
        switch backend {
        case .attached(let t): t.cancel()
        case .plain(let p): p.unsubscribe()
        }
        end.fire()
    }
}

/// An agent's terminal joined to a local one: the host connection's worker carries the
/// keystrokes and the screen between the local descriptor and the agent's `tmux attach`,
/// as `ssh -t` does, with no task of this program in the way (see
/// `AgentHost.attach(_:joining:size:term:detachByte:)`). Detaching leaves the agent
/// running.
public final class AgentJoinedTerminal: Sendable {
    /// How a joined terminal ended.
    public enum End: Sendable, Equatable {
        /// The detach byte was typed.
        case detached
        /// `tmux attach` ended: tmux's own detach (Ctrl-B d), or the agent's session
        /// ended; `AgentHost.state(of:)` tells which.
        case attachEnded(SSHExitStatus)
        /// The local terminal hung up.
        case terminalClosed
    }

    public let session: AgentSession
    private let joined: TransportJoinedTerminal
    private let end = EndSignal()

    init(session: AgentSession, joined: TransportJoinedTerminal) {
        self.session = session
        self.joined = joined
        let end = end
        Task.detached {
            _ = try? await joined.waitUntilEnded()
            end.fire()
        }
    }

    /// Runs `action` once, when the terminal ended (at once when it has).
    func whenEnded(_ action: @escaping @Sendable () -> Void) {
        end.add(action)
    }

    /// The local terminal changed size; the agent's follows.
    public func resize(to size: SSHTerminalSize) throws(AgentError) {
        do {
            try joined.resize(to: size)
        } catch {
            throw AgentError(.sessionNotRunning, "cannot resize the terminal of \(session.ptyID)", cause: error)
        }
    }

    /// Ends this attach now (never blocks, idempotent); the agent runs on.
    public func cancel() {
        joined.cancel()
    }

    /// Waits for the end: detached, `tmux attach` ended, or the local terminal's end.
    /// - Throws: `transport` when the connection was lost (the agent runs on; attach
    ///   again); `cancelled` after `cancel()` or when the waiting task is cancelled.
    public func waitUntilEnded() async throws(AgentError) -> End {
        do {
            switch try await joined.waitUntilEnded() {
            case .detached: return .detached
            case .exited(let status): return .attachEnded(status)
            case .terminalClosed: return .terminalClosed
            }
        } catch {
            throw AgentError(error, while: "attached to \(session.ptyID)")
        }
    }
}

/// What an attached agent reads: keystrokes, as a terminal sends them.
public struct AgentTerminalInput: Sendable {
    let terminal: AgentTerminal

    /// Returns once the bytes were handed to the terminal.
    /// - Throws: `sessionNotRunning` when the terminal ended.
    public func write(_ bytes: [UInt8]) async throws(AgentError) {
        try await terminal.sendKeys(bytes)
    }
}

/// One reader's iterator, moved into the unfolding closure.
/// Safe because: the stream built on it has one consumer, which calls `next` serially.
private final class IteratorBox: @unchecked Sendable {
    var iterator: ProcessOutput.AsyncIterator
    init(_ iterator: ProcessOutput.AsyncIterator) { self.iterator = iterator }
    func next() async -> [UInt8]? { await iterator.next() }
}

/// The same for a plain session's stream.
private final class StreamIteratorBox: @unchecked Sendable {
    var iterator: AsyncStream<[UInt8]>.Iterator
    init(_ iterator: AsyncStream<[UInt8]>.Iterator) { self.iterator = iterator }
    func next() async -> [UInt8]? { await iterator.next() }
}

/// Actions to run once, when something ended.
final class EndSignal: Sendable {
    private let state = Mutex<(fired: Bool, actions: [@Sendable () -> Void])>((false, []))

    func add(_ action: @escaping @Sendable () -> Void) {
        let now = state.withLock { s -> Bool in
            if s.fired { return true }
            s.actions.append(action)
            return false
        }
        if now { action() }
    }

    func fire() {
        let actions = state.withLock { s -> [@Sendable () -> Void] in
            if s.fired { return [] }
            s.fired = true
            defer { s.actions = [] }
            return s.actions
        }
        for a in actions { a() }
    }
}
