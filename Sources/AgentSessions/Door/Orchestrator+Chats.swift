import Foundation
import SSHKit
import ServerTransport

/// Where an agent's scrollback was read.
public enum AgentScrollbackSource: Sendable, Hashable {
    /// The running agent's tmux history and screen.
    case live
    /// The pane of an ended agent that tmux keeps (remain-on-exit).
    case endedPane
    /// What the engine saved when the agent was stopped (the terminal log).
    case saved
}

/// An agent's scrollback, and the conversation as it is now.
public struct AgentScrollback: Sendable {
    public var text: String
    public var source: AgentScrollbackSource
    public var conversation: ConversationRecord
}

/// Working with an agent without attaching (typing, its screen, its scrollback, its
/// state) and with a task's changes.
extension AgentOrchestrator {
    /// The conversation with its task and host, and the session it names.
    func locate(_ conversationID: ChatID) async throws(AgentError)
        -> (conversation: ConversationRecord, task: TaskRecord, host: HostRecord, session: AgentSession)
    {
        let c = try await records.chat(conversationID)
        let (task, _, host) = try await context(task: c.taskID)
        return (c, task, host, session(of: c, in: task, host: host))
    }

    /// The conversation's session when its agent runs now (asked of the host; an ended
    /// agent is recorded as ended).
    /// - Throws: `taskArchived`, `sessionNotRunning` (its state is in the message), `notFound`,
    ///   `transport`.
    func runningSession(conversationID: ChatID) async throws(AgentError)
        -> (conversation: ConversationRecord, session: AgentSession)
    {
        let (c, _, session) = try await running(conversationID)
        return (c, session)
    }

    private func running(_ conversationID: ChatID) async throws(AgentError)
        -> (conversation: ConversationRecord, host: HostRecord, session: AgentSession)
    {
        try Self.refuseArchived(try await locate(conversationID).task)
        let c = try await refreshState(conversationID: conversationID)
        guard c.state == .running else {
            throw AgentError(.sessionNotRunning, "\(c.providerID) of task \(c.taskID.short) is not running (\(c.state))")
        }
        let (_, task, host, _) = try await locate(conversationID)
        return (c, host, session(of: c, in: task, host: host))
    }

    /// Types into a running agent without attaching: `text` (several lines as one
    /// bracketed paste, as a terminal pastes it), then Enter unless `pressEnter` is false.
    /// - Throws: as `runningSession`, `tmuxFailed`.
    func send(_ text: String, to conversationID: ChatID, pressEnter: Bool = true) async throws(AgentError) {
        let (_, host, session) = try await running(conversationID)
        try await onHost(host) { h in
            if pressEnter {
                try await h.sendLine(text, to: session)
            } else {
                try await h.send(Array(text.utf8), to: session)
            }
            try? await h.markSeen(session.ptyID)
        }
    }

    /// Queues `text` on the agent's host: the host's watcher pastes it, then Enter, when
    /// the agent is idle or done and the prompt sent before it started a turn, so a queue
    /// drains while this machine is asleep or offline. With `whenIdle` it goes at the
    /// next idle, ahead of the queue.
    /// - Throws: as `send`; `terminalUnsupported` for an agent that does not run in the
    ///   host's tmux (nothing there would send it); `invalidArgument` for empty text.
    @discardableResult
    func queue(_ text: String, for conversationID: ChatID, whenIdle: Bool = false) async throws(AgentError)
        -> AgentQueuedPrompt
    {
        let (_, host, session) = try await running(conversationID)
        guard session.survivesDisconnect else {
            throw AgentError(.terminalUnsupported, "\(session.ptyID) does not run in the host's tmux: nothing there would send a queued prompt")
        }
        return try await onHost(host) { h in
            let prompt = try await h.enqueue(text, for: session.ptyID, whenIdle: whenIdle)
            _ = try await h.watcherSnapshot(rules: screenRules) // the watcher drains the queue
            return prompt
        }
    }

    /// The prompts still queued for an agent, in the order they go.
    func queuedPrompts(of conversationID: ChatID) async throws(AgentError) -> [AgentQueuedPrompt] {
        let (_, _, host, session) = try await locate(conversationID)
        return try await onHost(host) { h in try await h.queuedPrompts(of: session.ptyID) }
    }

    /// An agent's queue and what holds its next prompt back (the host's watcher says).
    func promptQueue(of conversationID: ChatID) async throws(AgentError) -> AgentPromptQueue {
        let (_, _, host, session) = try await locate(conversationID)
        return try await onHost(host) { h in try await h.promptQueue(of: session.ptyID) }
    }

    /// Removes a queued prompt; false when it is no longer queued (it was sent).
    /// - Throws: `invalidArgument` for an id that no queue gives.
    func removeQueuedPrompt(_ id: String, of conversationID: ChatID) async throws(AgentError) -> Bool {
        let (_, _, host, session) = try await locate(conversationID)
        return try await onHost(host) { h in try await h.removeQueuedPrompt(id, of: session.ptyID) }
    }

    /// Empties an agent's queue; how many prompts it held.
    @discardableResult
    func clearQueue(of conversationID: ChatID) async throws(AgentError) -> Int {
        let (_, _, host, session) = try await locate(conversationID)
        return try await onHost(host) { h in try await h.clearQueue(of: session.ptyID) }
    }

    /// Sets whether a task's agents (its main agent and its chats) are sent "continue" once
    /// after a usage limit: `wait` after the reset time the agent's message names (nil: they
    /// are not; the default). The host's watcher reads the message (a screen rule of kind
    /// `limit`) and sends it, so it happens while this machine is asleep or offline.
    func continueAfterLimit(_ wait: Duration?, taskID: TaskID) async throws(AgentError) {
        let (task, _, host) = try await context(task: taskID)
        let conversations = try await stored("reading conversations") { try await store.conversations(taskID: task.id) }
        try await onHost(host) { h in
            for c in conversations { try await h.setContinueAfterLimit(wait, for: c.ptyID) }
            _ = try await h.watcherSnapshot(rules: screenRules)
        }
    }

    /// The last `lines` lines of a running agent's terminal (history and screen, with
    /// its escape sequences); the records are not asked to follow.
    func screen(of conversationID: ChatID, lines: Int = 2000) async throws(AgentError) -> String {
        let (_, _, host, session) = try await locate(conversationID)
        return try await onHost(host) { h in try await h.recentOutput(of: session, lines: lines) }
    }

    /// The screen the agent ended its last turn with (or its question, or its exit), as
    /// its host's watcher kept it; nil before its first.
    func lastTurn(of conversationID: ChatID) async throws(AgentError) -> AgentLastTurn? {
        let (c, _, host, _) = try await locate(conversationID)
        return try await onHost(host) { h in try await h.lastTurn(of: c.ptyID) }
    }

    /// A running agent's visible screen (with its escape sequences), first as it is and
    /// then each time it changes (a loop on the host compares each screen with the last
    /// and sends only a changed one; see `AgentTmuxServer.followScreen`). The
    /// stream ends with the agent's session, after a failure (given as its last element),
    /// or when the consumer stops reading. With `size` (a preview's), the agent is laid
    /// out at that size while it is followed and nobody is attached to it, and given back
    /// its own size after (see `AgentTmuxServer.followScreen`).
    func followScreen(of conversationID: ChatID, size: SSHTerminalSize? = nil) -> AsyncStream<Result<String, AgentError>> {
        let (stream, continuation) = AsyncStream<Result<String, AgentError>>.makeStream(bufferingPolicy: .bufferingNewest(2))
        let task = Task {
            do throws(AgentError) {
                let (_, _, host, session) = try await locate(conversationID)
                try await onHost(host) { h in
                    try await h.followScreen(of: session, size: size) { text in continuation.yield(.success(text)) }
                }
            } catch where error.code != .cancelled {
                continuation.yield(.failure(error))
            } catch {}
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// Waits until the agent's screen shows `text`, seen as its output happens (see
    /// `AgentHost.waitForOutput`): false when the agent ended or `timeout` passed first.
    func waitForOutput(of conversationID: ChatID, containing text: String, timeout: Duration = .seconds(30))
        async throws(AgentError) -> Bool
    {
        let (_, _, host, session) = try await locate(conversationID)
        return try await onHost(host) { h in try await h.waitForOutput(of: session, containing: text, timeout: timeout) }
    }

    /// Where the conversation's agent is, asked of the host (the record is not changed;
    /// `refreshState` records an end).
    func processState(of conversationID: ChatID) async throws(AgentError) -> AgentProcessState {
        let (_, _, host, session) = try await locate(conversationID)
        return try await onHost(host) { h in try await h.state(of: session) }
    }

    /// An agent's scrollback: a running agent's whole tmux history; an ended one's pane
    /// when tmux kept it; else what was saved when it stopped (possibly empty).
    func scrollback(of conversationID: ChatID) async throws(AgentError) -> AgentScrollback {
        let c = try await refreshState(conversationID: conversationID)
        let (_, _, host, session) = try await locate(conversationID)
        if c.state == .running {
            let text = try await onHost(host) { h in
                let text = try await h.recentOutput(of: session, lines: AgentTmuxServer.historyLimit)
                try? await h.markSeen(session.ptyID)
                return text
            }
            return AgentScrollback(text: text, source: .live, conversation: c)
        }
        let paneKept: Bool
        switch c.state {
        case .exited, .signaled: paneKept = c.survivesDisconnect
        case .running, .stopped, .gone: paneKept = false
        }
        if paneKept, let kept = try? await onHost(host, { h -> String? in
            try await h.tmux.session(named: session.ptyID.description) != nil ? try await h.recentOutput(of: session) : nil
        }) {
            return AgentScrollback(text: kept, source: .endedPane, conversation: c)
        }
        let store = store
        let saved = try await stored("reading the terminal log") { try await store.terminalLogs(conversationID: c.id) }
        return AgentScrollback(text: saved.map(\.text).joined(separator: "\n"), source: .saved, conversation: c)
    }

    /// What the agent is doing now (working, waiting for input, done, idle, …), from the
    /// best source its provider offers, as the host's status watcher has it (started when
    /// it does not run, and its first look waited for: never a placeholder).
    func status(of conversationID: ChatID) async throws(AgentError) -> AgentStatus {
        let (_, _, host, session) = try await locate(conversationID)
        let rules = screenRules
        return try await onHost(host) { h in await h.status(of: session, rules: rules) }
    }

    /// Marks the agent's last turn as looked at: a `done` becomes `idle`. Reading its
    /// scrollback and sending to it do this themselves; attaching does it on the host.
    func markSeen(conversationID: ChatID) async throws(AgentError) {
        let (c, _, host, _) = try await locate(conversationID)
        try await onHost(host) { h in try await h.markSeen(c.ptyID) }
    }

    // MARK: a task's changes

    /// What the task changed against its base commit: committed, uncommitted and new files.
    func diff(taskID: TaskID) async throws(AgentError) -> WorktreeDiff {
        let (task, _, host) = try await context(task: taskID)
        return try await onHost(host) { h in try await h.worktrees.diff(task.worktree) }
    }

    /// One file's patch against the task's base (cut at `maxBytes`).
    func patch(taskID: TaskID, file: String, maxBytes: Int = 256 * 1024) async throws(AgentError) -> WorktreeFilePatch {
        let (task, _, host) = try await context(task: taskID)
        return try await onHost(host) { h in try await h.worktrees.patch(task.worktree, file: file, maxBytes: maxBytes) }
    }

    /// How many files the task changed against its base, new files included, in one
    /// round trip.
    func changedFileCount(taskID: TaskID) async throws(AgentError) -> Int {
        let (task, _, host) = try await context(task: taskID)
        return try await onHost(host) { h in try await h.worktrees.changedFileCount(task.worktree) }
    }
}
