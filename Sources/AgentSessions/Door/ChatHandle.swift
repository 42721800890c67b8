import Foundation
import SSHKit

/// One agent of a task (its main agent or an added chat) you act on: typing, its queue,
/// its screen and scrollback, its status, attaching, stopping and resuming it.
public struct ChatHandle: Sendable, Hashable {
    public let id: ChatID
    let engine: AgentOrchestrator

    public static func == (a: Self, b: Self) -> Bool { a.id == b.id && a.engine === b.engine }
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    /// The chat's record now.
    public func record() async throws(AgentError) -> ConversationRecord { try await engine.records.chat(id) }

    /// The task it belongs to.
    public func task() async throws(AgentError) -> TaskHandle {
        TaskHandle(id: try await record().taskID, engine: engine)
    }

    /// Its record after asking the host whether it still runs (an ended agent is
    /// recorded as ended).
    @discardableResult
    public func refresh() async throws(AgentError) -> ConversationRecord {
        try await engine.refreshState(conversationID: id)
    }

    /// Its session when its agent runs now.
    /// - Throws: `taskArchived`, `sessionNotRunning`, `notFound`, `transport`.
    public func runningSession() async throws(AgentError) -> (conversation: ConversationRecord, session: AgentSession) {
        try await engine.runningSession(conversationID: id)
    }

    /// What its session is (nothing is asked of the host).
    public func session() async throws(AgentError) -> AgentSession {
        let (c, task, host, _) = try await engine.locate(id)
        return engine.session(of: c, in: task, host: host)
    }

    // MARK: input

    /// Types `text` into the running agent, then Enter unless `pressEnter` is false.
    /// - Throws: `taskArchived`, `sessionNotRunning`, `tmuxFailed`.
    public func send(_ text: String, pressEnter: Bool = true) async throws(AgentError) {
        try await engine.send(text, to: id, pressEnter: pressEnter)
    }

    /// Queues `text` on the host, sent when the agent is idle or done.
    @discardableResult
    public func queue(_ text: String, whenIdle: Bool = false) async throws(AgentError) -> AgentQueuedPrompt {
        try await engine.queue(text, for: id, whenIdle: whenIdle)
    }

    /// The queue: its prompts in the order they go, and what holds the next one.
    public func promptQueue() async throws(AgentError) -> AgentPromptQueue { try await engine.promptQueue(of: id) }

    /// The prompts still queued, in the order they go.
    public func queuedPrompts() async throws(AgentError) -> [AgentQueuedPrompt] { try await engine.queuedPrompts(of: id) }

    /// Takes one queued prompt out (false: it was sent or removed already).
    public func removeQueuedPrompt(_ promptID: String) async throws(AgentError) -> Bool {
        try await engine.removeQueuedPrompt(promptID, of: id)
    }

    /// Empties the queue; returns how many prompts were in it.
    @discardableResult
    public func clearQueue() async throws(AgentError) -> Int { try await engine.clearQueue(of: id) }

    // MARK: output

    /// Its screen and the lines above it (at most `lines`).
    public func screen(lines: Int = 2000) async throws(AgentError) -> String { try await engine.screen(of: id, lines: lines) }

    /// Its screen each time it changes (laid out at `size` while nobody is attached).
    public func followScreen(size: SSHTerminalSize? = nil) -> AsyncStream<Result<String, AgentError>> {
        engine.followScreen(of: id, size: size)
    }

    /// Waits until its screen shows `text`; false when `timeout` passed first.
    public func waitForOutput(containing text: String, timeout: Duration = .seconds(30)) async throws(AgentError) -> Bool {
        try await engine.waitForOutput(of: id, containing: text, timeout: timeout)
    }

    /// The screen it ended its last turn with (or asked its question with, or exited
    /// with), kept on its host by the host's watcher, so it is there after the agent's
    /// session ended and for whoever asks later; nil before its first.
    public func lastTurn() async throws(AgentError) -> AgentLastTurn? { try await engine.lastTurn(of: id) }

    /// Its scrollback: live from the host, or the log saved when it stopped.
    public func scrollback() async throws(AgentError) -> AgentScrollback { try await engine.scrollback(of: id) }

    // MARK: state

    /// What its process is doing (running, exited and how).
    public func processState() async throws(AgentError) -> AgentProcessState { try await engine.processState(of: id) }

    /// What it is doing and where that was learned.
    public func status() async throws(AgentError) -> AgentStatus { try await engine.status(of: id) }

    /// Marks a finished turn as seen.
    public func markSeen() async throws(AgentError) { try await engine.markSeen(conversationID: id) }

    /// How the setup of its session went ("ok", "failed with exit status N", …); nil while
    /// it runs or when there was none.
    public func setupOutcome() async throws(AgentError) -> String? { try await engine.setupOutcome(conversationID: id) }

    // MARK: its life

    /// Starts it again when it does not run (its provider's resume), else returns its session.
    /// - Throws: `taskArchived`, and the start's errors.
    @discardableResult
    public func resume() async throws(AgentError) -> AgentSession { try await engine.resume(conversationID: id) }

    /// Stops it; its scrollback is saved in the terminal log first.
    public func stop() async throws(AgentError) { try await engine.stop(conversationID: id) }

    /// Attaches a terminal of the caller's to its session.
    public func attach(size: SSHTerminalSize? = nil) async throws(AgentError) -> AgentTerminal {
        try await engine.attach(conversationID: id, size: size)
    }

    /// Joins its session to the local terminal `fd` until `detachByte` is typed or it ends.
    public func attach(joining fd: Int32, size: SSHTerminalSize? = nil, detachByte: UInt8?)
        async throws(AgentError) -> AgentJoinedTerminal
    {
        try await engine.attach(conversationID: id, joining: fd, size: size, detachByte: detachByte)
    }
}
