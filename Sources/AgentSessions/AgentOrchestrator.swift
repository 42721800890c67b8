import Foundation
import SSHKit
import ServerTransport

/// Tasks and their agents, end to end: a task is a worktree plus its main agent; chats
/// add agents in the same worktree; resume, stop, archive and delete act on the host and
/// on the records together. Hosts are reached through the connection monitor (one
/// connection per host, at most 10 connected), records kept by an `AgentStore`.
///
/// The records are written before and after each step on a host, so a failure leaves
/// the records saying what is on the host: a task whose agent could not start is
/// removed again with its fresh (empty) worktree; a conversation that was started is
/// recorded as running until it is stopped or found ended.
public final class AgentOrchestrator: Sendable {
    public let store: any AgentStore
    public let connections: AgentConnections
    /// Makes the `AgentHost` of a host record (its transport: address, key paths, jump
    /// host, host-key policy). Its `serverID` must be `record.serverID`. Called once per
    /// host; the monitor keeps it.
    public let makeHost: @Sendable (HostRecord) throws -> AgentHost
    /// Per provider id: binary, flags, environment.
    public let providerSettings: [String: AgentProviderSettings]
    /// Install the agents' status hooks (see `AgentSessionSpec.statusHooks`).
    public let statusHooks: Bool
    public let terminalSize: SSHTerminalSize

    public init(store: any AgentStore, connections: AgentConnections = AgentConnections(),
                providerSettings: [String: AgentProviderSettings] = [:], statusHooks: Bool = true,
                terminalSize: SSHTerminalSize = SSHTerminalSize(columns: 120, rows: 40),
                makeHost: @escaping @Sendable (HostRecord) throws -> AgentHost) {
        self.store = store
        self.connections = connections
        self.providerSettings = providerSettings
        self.statusHooks = statusHooks
        self.terminalSize = terminalSize
        self.makeHost = makeHost
    }

    // MARK: records

    /// A store call, its failure as `storage` (a typed `AgentError` passes through).
    private func stored<T>(_ what: String, _ body: () async throws -> T) async throws(AgentError) -> T {
        do {
            return try await body()
        } catch let e as AgentError {
            throw e
        } catch {
            throw AgentError(.storage, "the store failed while \(what): \(error)")
        }
    }

    private func record<T>(_ what: String, _ id: String, _ body: () async throws -> T?) async throws(AgentError) -> T {
        guard let r = try await stored("reading \(what) \(id)", body) else {
            throw AgentError(.notFound, "no \(what) \(id) in the store")
        }
        return r
    }

    /// The task, its project and its host.
    private func context(task id: String) async throws(AgentError) -> (TaskRecord, ProjectRecord, HostRecord) {
        let task = try await record("task", id) { try await store.task(id: id) }
        let project = try await record("project", task.projectID) { try await store.project(id: task.projectID) }
        let host = try await record("host", project.hostID) { try await store.host(id: project.hostID) }
        return (task, project, host)
    }

    /// Adds the host of `record` to the monitor on first use (made by `makeHost`, whose
    /// server id is checked); then `connections.withHost(record.serverID)` reaches it.
    public func register(_ record: HostRecord) async throws(AgentError) {
        if await connections.host(record.serverID) == nil {
            let host: AgentHost
            do {
                host = try makeHost(record)
            } catch {
                throw (error as? AgentError) ?? AgentError(.invalidArgument, "cannot make the host \(record.name): \(error)")
            }
            guard host.serverID == record.serverID else {
                throw AgentError(.invalidArgument, "makeHost gave \(host.serverID.rawValue) for the host record \(record.id)")
            }
            await connections.add(host)
        }
    }

    /// Runs `body` on the host of `record` (see `register`).
    private func onHost<R>(_ record: HostRecord, _ body: (AgentHost) async throws -> R) async throws(AgentError) -> R {
        try await register(record)
        do {
            return try await connections.withHost(record.serverID, body)
        } catch let e as AgentError {
            throw e
        } catch let e as TransportError {
            throw AgentError(e, while: "working on \(record.name)")
        } catch {
            throw AgentError(.storage, "the store failed while working on \(record.name): \(error)")
        }
    }

    private func settings(_ providerID: String) -> AgentProviderSettings { providerSettings[providerID] ?? AgentProviderSettings() }

    /// What a conversation's session is (nothing is asked of the host).
    public func session(of conversation: ConversationRecord, in task: TaskRecord, host: HostRecord) -> AgentSession {
        let id = conversation.ptyID
        return AgentSession(ptyID: id, host: host.serverID,
                            container: conversation.survivesDisconnect ? .tmux(name: id.description) : .plainTerminal,
                            workingDirectory: task.worktree.path, arguments: conversation.arguments)
    }

    // MARK: tasks

    /// Creates a task: its worktree (see `AgentHost.createWorktree`), then its main agent
    /// started there with `prompt`. When the agent cannot start, the worktree (new, so
    /// holding no work) and the records are removed again and the error is thrown.
    /// - Throws: `notFound` (project), `unknownProvider`, the worktree's and the start's errors.
    @discardableResult
    public func createTask(projectID: String, title: String, providerID: String, prompt: String? = nil,
                           autoApprove: Bool = false, baseRef: String? = nil)
        async throws(AgentError) -> (task: TaskRecord, conversation: ConversationRecord, session: AgentSession)
    {
        let provider = try AgentProvider.named(providerID)
        let project = try await record("project", projectID) { try await store.project(id: projectID) }
        let hostRecord = try await record("host", project.hostID) { try await store.host(id: project.hostID) }
        let worktree = try await onHost(hostRecord) { host in
            try await host.createWorktree(projectPath: project.path, title: title, baseRef: baseRef ?? project.defaultBaseRef)
        }
        let task = TaskRecord(projectID: project.id, title: title, worktree: worktree)
        var conversation = ConversationRecord(taskID: task.id, providerID: provider.id, kind: .main, autoApprove: autoApprove)
        do {
            try await stored("saving the task") {
                try await store.save(task)
                try await store.save(conversation)
            }
            let session = try await start(&conversation, of: task, on: hostRecord, provider: provider, prompt: prompt, isResume: false)
            return (task, conversation, session)
        } catch {
            // nothing of the user's is in a worktree made a moment ago
            _ = try? await onHost(hostRecord) { host in try await host.removeWorktree(worktree, force: true) }
            _ = try? await stored("removing the task") { try await store.deleteTask(id: task.id) }
            _ = try? await stored("removing the session map entry") { try await store.remove(conversation.ptyID.description) }
            throw error
        }
    }

    /// Adds another agent to a task, in the same worktree.
    /// - Throws: `notFound`, `unknownProvider`, `invalidArgument` (an archived task), the start's errors.
    @discardableResult
    public func addChat(taskID: String, providerID: String, prompt: String? = nil, autoApprove: Bool = false)
        async throws(AgentError) -> (conversation: ConversationRecord, session: AgentSession)
    {
        let provider = try AgentProvider.named(providerID)
        let (task, _, hostRecord) = try await context(task: taskID)
        guard task.archivedAt == nil else { throw AgentError(.invalidArgument, "the task \(task.title) is archived") }
        var conversation = ConversationRecord(taskID: task.id, providerID: provider.id, kind: .chat, autoApprove: autoApprove)
        try await stored("saving the chat") { try await store.save(conversation) }
        do {
            let session = try await start(&conversation, of: task, on: hostRecord, provider: provider, prompt: prompt, isResume: false)
            return (conversation, session)
        } catch {
            _ = try? await stored("removing the chat") { try await store.deleteConversation(id: conversation.id) }
            throw error
        }
    }

    /// Starts a conversation's agent (fresh or resumed) and records it as running.
    private func start(_ conversation: inout ConversationRecord, of task: TaskRecord, on hostRecord: HostRecord,
                       provider: AgentProvider, prompt: String?, isResume: Bool) async throws(AgentError) -> AgentSession
    {
        let id = conversation.ptyID
        let directory = task.worktree.path
        let settings = settings(provider.id)
        let store = store
        let statusHooks = statusHooks
        let size = terminalSize
        let autoApprove = conversation.autoApprove
        let startedAt = Date()
        let previousStart = conversation.lastStartedAt
        // the settings count: a user's resumeArguments make a provider without any resumable
        let applied = settings.applied(to: provider)
        let sameAgent = try await stored("reading conversations") { try await store.conversations(taskID: task.id) }
            .filter { $0.providerID == provider.id }.count
        let session = try await onHost(hostRecord) { host in
            let plan = try await host.planResume(ptyID: id, provider: applied, workingDirectory: directory,
                                                 isResume: isResume, previousStart: previousStart,
                                                 onlyChatOfItsAgent: sameAgent <= 1, map: store,
                                                 environment: settings.environment)
            var session = try await host.startAgent(AgentSessionSpec(ptyID: id, provider: provider, settings: settings,
                                                                     workingDirectory: directory, prompt: isResume ? nil : prompt,
                                                                     autoApprove: autoApprove, resume: plan.resume, size: size,
                                                                     statusHooks: statusHooks))
            session.resumeMethod = plan.method
            return session
        }
        conversation.arguments = session.arguments
        conversation.survivesDisconnect = session.survivesDisconnect
        conversation.state = .running
        conversation.lastStartedAt = startedAt
        let saved = conversation
        try await stored("recording the started agent") { try await store.save(saved) }
        await connections.adjustLiveSessions(by: 1, on: hostRecord.serverID)
        if provider.sessionTracking == .codexThread && !isResume {
            // which thread Codex made, for an exact resume later; best effort, in the background
            Task { [self] in
                _ = try? await onHost(hostRecord) { host in
                    try await host.bindCodexThread(ptyID: id, workingDirectory: directory, startedAt: startedAt, map: store,
                                                   codexHome: settings.environment["CODEX_HOME"])
                }
            }
        }
        return session
    }

    /// Resumes a conversation: a session that still runs is returned as it is; an ended
    /// or vanished one is started again with its provider's resume (Claude's exact
    /// session, Codex's thread, else the generic flag).
    /// - Throws: `notFound`, `invalidArgument` (an archived task), the start's errors.
    public func resume(conversationID: String) async throws(AgentError) -> AgentSession {
        var conversation = try await record("conversation", conversationID) { try await store.conversation(id: conversationID) }
        let (task, _, hostRecord) = try await context(task: conversation.taskID)
        guard task.archivedAt == nil else { throw AgentError(.invalidArgument, "the task \(task.title) is archived") }
        let existing = session(of: conversation, in: task, host: hostRecord)
        let state = try await onHost(hostRecord) { host in try await host.state(of: existing) }
        if state == .running { return existing }
        if existing.survivesDisconnect {
            // an ended session kept by remain-on-exit goes, so the name is free
            try await onHost(hostRecord) { host in try await host.stop(existing) }
        }
        let provider = try AgentProvider.named(conversation.providerID)
        return try await start(&conversation, of: task, on: hostRecord, provider: provider, prompt: nil, isResume: true)
    }

    /// Resumes every conversation of a task (main first).
    public func resumeTask(taskID: String) async throws(AgentError) -> [AgentSession] {
        var sessions: [AgentSession] = []
        for c in try await stored("reading conversations", { try await store.conversations(taskID: taskID) }) {
            sessions.append(try await resume(conversationID: c.id))
        }
        return sessions
    }

    /// Where a conversation's agent is; the record follows (an ended agent is recorded
    /// with its exit status).
    public func refreshState(conversationID: String) async throws(AgentError) -> ConversationRecord {
        var conversation = try await record("conversation", conversationID) { try await store.conversation(id: conversationID) }
        guard conversation.state == .running else { return conversation }
        let (task, _, hostRecord) = try await context(task: conversation.taskID)
        let s = session(of: conversation, in: task, host: hostRecord)
        switch try await onHost(hostRecord, { host in try await host.state(of: s) }) {
        case .running: return conversation
        case .exited(let status): conversation.state = .exited(status)
        case .signaled(let signal): conversation.state = .signaled(signal)
        case .gone: conversation.state = .gone
        }
        let saved = conversation
        try await stored("recording the agent's end") { try await store.save(saved) }
        return conversation
    }

    /// Attaches to a conversation's agent (see `AgentConnections.attach`).
    public func attach(conversationID: String, size: SSHTerminalSize? = nil) async throws(AgentError) -> AgentTerminal {
        let conversation = try await record("conversation", conversationID) { try await store.conversation(id: conversationID) }
        let (task, _, hostRecord) = try await context(task: conversation.taskID)
        try await register(hostRecord)
        return try await connections.attach(session(of: conversation, in: task, host: hostRecord), size: size ?? terminalSize)
    }

    /// Stops a conversation's agent; its scrollback is saved in the terminal log first.
    public func stop(conversationID: String) async throws(AgentError) {
        var conversation = try await record("conversation", conversationID) { try await store.conversation(id: conversationID) }
        let (task, _, hostRecord) = try await context(task: conversation.taskID)
        let s = session(of: conversation, in: task, host: hostRecord)
        let scrollback = try await onHost(hostRecord) { host -> String? in
            let text = try? await host.recentOutput(of: s, lines: 10_000)
            try await host.stop(s)
            return text
        }
        if let scrollback, !scrollback.isEmpty {
            try await stored("saving the terminal log") {
                try await store.appendTerminalLog(TerminalLogRecord(conversationID: conversation.id, text: scrollback))
            }
        }
        let wasRunning = conversation.state == .running
        conversation.state = .stopped
        let saved = conversation
        try await stored("recording the stop") { try await store.save(saved) }
        if wasRunning {
            await connections.adjustLiveSessions(by: -1, on: hostRecord.serverID)
        }
    }

    /// Stops every agent of a task (its worktree stays).
    public func stopTask(taskID: String) async throws(AgentError) {
        for c in try await stored("reading conversations", { try await store.conversations(taskID: taskID) }) {
            try await stop(conversationID: c.id)
        }
    }

    /// Stops a task's agents and marks it archived; its worktree and branch stay.
    public func archiveTask(taskID: String) async throws(AgentError) {
        try await stopTask(taskID: taskID)
        var task = try await record("task", taskID) { try await store.task(id: taskID) }
        task.archivedAt = Date()
        let saved = task
        try await stored("archiving the task") { try await store.save(saved) }
    }

    /// Deletes a task: kills its agents (no orphaned sessions), removes its worktree and
    /// branch, then its records and session-map entries. Refused with
    /// `worktreeHasUnsavedWork`, before anything is touched, when the worktree holds
    /// uncommitted changes or unpushed commits, unless `force`.
    public func deleteTask(taskID: String, force: Bool = false) async throws(AgentError) {
        let (task, _, hostRecord) = try await context(task: taskID)
        let conversations = try await stored("reading conversations") { try await store.conversations(taskID: taskID) }
        let sessions = conversations.map { session(of: $0, in: task, host: hostRecord) }
        try await onHost(hostRecord) { host in
            if !force, let work = try await host.unsavedWork(task.worktree) {
                throw AgentError(.worktreeHasUnsavedWork, "the task \(task.title) has work that would be lost: \(work)")
            }
            for s in sessions { try await host.stop(s) }
            if try await host.transport.fileExists(task.worktree.path) {
                try await host.removeWorktree(task.worktree, force: force)
            }
        }
        try await stored("deleting the task") {
            for c in conversations { try await store.remove(c.ptyID.description) }
            try await store.deleteTask(id: taskID)
        }
        let running = conversations.filter { $0.state == .running }.count
        await connections.adjustLiveSessions(by: -running, on: hostRecord.serverID)
    }
}
