import Foundation
import SSHKit
import ServerTransport

/// The agent engine's one door. A front end makes it with a store and a way to reach each
/// host, then acts through its handles: `task(_:)`, `chat(_:)`, `host(_:)` and
/// `project(_:)`, each keyed by a typed id. It reads the records through `records` (which
/// also resolves what a user typed) and never writes them: the engine does every write. A
/// task is a worktree plus its main agent; chats add agents in the same worktree; resume,
/// stop, archive and delete act on the host and on the records together. Hosts are reached
/// through an internal connection monitor (one connection per host, at most
/// `policy.maxConnectedHosts` connected).
///
/// The records are written before and after each step on a host, so a failure leaves
/// the records saying what is on the host: a task whose agent could not start is
/// removed again with its fresh (empty) worktree; a conversation that was started is
/// recorded as running until it is stopped or found ended.
///
/// ```swift
/// let engine = AgentOrchestrator(store: store) { record in
///     SSHTransport(configuration: try configuration(for: record), serverID: record.serverID)
/// }
/// let (task, _, main, _) = try await engine.project(project.id).createTask(title: "Fix the flaky test",
///                                                                          providerID: "claude", prompt: "make it pass")
/// try await engine.chat(main.id).send("and add a test")
/// let diff = try await task.diff()
/// let board = try await engine.board(live: true)
/// await engine.close()
/// ```
public final class AgentOrchestrator: Sendable {
    /// The records: read by front ends through `records`, written only by the engine.
    let store: any AgentStore
    /// Who is told of each write to the records (`recordChanges`).
    let recordFeed = RecordChangeFeed()
    /// The connection monitor: internal, so every front end goes through the door.
    let connections: AgentConnections
    /// Makes the `AgentHost` of a host record. Its `serverID` must be `record.serverID`.
    /// Called once per host; the monitor keeps it.
    let makeHost: @Sendable (HostRecord) throws -> AgentHost
    /// Per provider id: binary, flags, environment.
    public let providerSettings: [String: AgentProviderSettings]
    /// Install the agents' status hooks (see `AgentSessionSpec.statusHooks`).
    public let statusHooks: Bool
    public let terminalSize: SSHTerminalSize
    /// Start agents on a plain terminal on a host without tmux (they then end with the
    /// connection). Off: such a host is refused with `tmuxUnavailable` before anything
    /// is made there.
    public let allowsPlainTerminal: Bool
    /// Directories looked in for agents on every host before the login PATH (hosts made
    /// by `makeTransport`, and `inspectNewHost`).
    public let searchPath: [String]
    /// What agents' screens look like in each state: the shipped rules, after the
    /// user's own when the caller adds them (`AgentScreenRules.followed(by:)`).
    public let screenRules: AgentScreenRules
    /// The tasks' ports forwarded here (`openPort`), closed with their task.
    let portForwards = TaskPortForwards()
    /// Each project's pull requests as `gh` last listed them, for a minute.
    let pullRequestCache = PullRequestCache()

    /// How long landing the work (commit, push, merge, opening a pull request) may run on
    /// a host by default: the repository's hooks and the network run in it.
    public static let defaultLandingTimeout: Duration = .seconds(600)

    /// An engine whose hosts are reached through the transport `makeTransport` gives
    /// for each host record (its address, key paths, jump host, host-key policy; its
    /// `serverID` must be `record.serverID`). Agents are looked for in `searchPath` on
    /// every host before the login PATH (`~/` is the host user's home). Landing the work
    /// (commit, push, merge, a pull request) may run `landingTimeout` on a host before it
    /// is stopped.
    public convenience init(store: any AgentStore, policy: AgentConnectionPolicy = AgentConnectionPolicy(),
                            providerSettings: [String: AgentProviderSettings] = [:], searchPath: [String] = [],
                            statusHooks: Bool = true, allowsPlainTerminal: Bool = false,
                            terminalSize: SSHTerminalSize = SSHTerminalSize(columns: 120, rows: 40),
                            screenRules: AgentScreenRules = .shipped,
                            landingTimeout: Duration = AgentOrchestrator.defaultLandingTimeout,
                            makeTransport: @escaping @Sendable (HostRecord) throws -> any ServerTransport)
    {
        self.init(store: store, connections: AgentConnections(policy: policy), providerSettings: providerSettings,
                  searchPath: searchPath, statusHooks: statusHooks, allowsPlainTerminal: allowsPlainTerminal,
                  terminalSize: terminalSize, screenRules: screenRules) { record in
            AgentHost(transport: try makeTransport(record), tmuxSocket: record.tmuxSocket, extraSearchPath: searchPath,
                      displayName: record.displayName, landingTimeout: landingTimeout)
        }
    }

    /// An engine over hosts its caller makes (a test's host with its own search path,
    /// an embedding program's own transport).
    public convenience init(store: any AgentStore, policy: AgentConnectionPolicy = AgentConnectionPolicy(),
                            providerSettings: [String: AgentProviderSettings] = [:], statusHooks: Bool = true,
                            allowsPlainTerminal: Bool = false,
                            terminalSize: SSHTerminalSize = SSHTerminalSize(columns: 120, rows: 40),
                            screenRules: AgentScreenRules = .shipped,
                            makeHost: @escaping @Sendable (HostRecord) throws -> AgentHost)
    {
        self.init(store: store, connections: AgentConnections(policy: policy), providerSettings: providerSettings,
                  searchPath: [], statusHooks: statusHooks, allowsPlainTerminal: allowsPlainTerminal,
                  terminalSize: terminalSize, screenRules: screenRules, makeHost: makeHost)
    }

    init(store: any AgentStore, connections: AgentConnections, providerSettings: [String: AgentProviderSettings],
         searchPath: [String], statusHooks: Bool, allowsPlainTerminal: Bool, terminalSize: SSHTerminalSize,
         screenRules: AgentScreenRules, makeHost: @escaping @Sendable (HostRecord) throws -> AgentHost)
    {
        self.screenRules = screenRules
        self.store = ObservedStore(inner: store, feed: recordFeed)
        self.connections = connections
        self.providerSettings = providerSettings
        self.searchPath = searchPath
        self.statusHooks = statusHooks
        self.allowsPlainTerminal = allowsPlainTerminal
        self.terminalSize = terminalSize
        self.makeHost = makeHost
    }

    /// Every provider of the registry with its settings applied: what detection looks
    /// for and what starts.
    public var providers: [AgentProvider] { AgentProvider.all.map { settings($0.id).applied(to: $0) } }

    /// Ends the engine: stops the health checks and reconnects, sends away calls waiting
    /// for a connection, ends the event streams, and drops every host's connection (the
    /// agents run on in tmux). Calls after it fail with `invalidArgument`.
    public func close() async {
        recordFeed.finish()
        await portForwards.closeAll()
        let hosts = await connections.hosts
        await connections.close()
        for host in hosts {
            await (host.transport as? any ConnectedTransport)?.disconnect()
        }
    }

    /// The hosts' connection states as events: the current state of each host first,
    /// then every change (connecting, connected, lost and retried, given up). Ends at
    /// `close`.
    public func connectionEvents() async -> AsyncStream<AgentConnectionEvent> { await connections.events() }

    /// Where the host's connection is now; nil for a host not used yet.
    func connectionState(of host: HostRecord) async -> AgentConnectionState? {
        await connections.state(of: host.serverID)
    }

    // MARK: records

    /// A store call, its failure as `storage` (a typed `AgentError` passes through).
    func stored<T>(_ what: String, _ body: () async throws -> T) async throws(AgentError) -> T {
        try await storeCall(what, body)
    }

    /// The task, its project and its host.
    func context(task id: TaskID) async throws(AgentError) -> (TaskRecord, ProjectRecord, HostRecord) {
        let task = try await records.task(id)
        let project = try await records.project(task.projectID)
        let host = try await records.host(project.hostID)
        return (task, project, host)
    }

    /// Adds the host of `record` to the monitor on first use (made by `makeHost`, whose
    /// server id is checked); then `connections.withHost(record.serverID)` reaches it.
    func register(_ record: HostRecord) async throws(AgentError) {
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
    func onHost<R>(_ record: HostRecord, _ body: (AgentHost) async throws -> R) async throws(AgentError) -> R {
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

    func settings(_ providerID: String) -> AgentProviderSettings { providerSettings[providerID] ?? AgentProviderSettings() }

    /// What a conversation's session is (nothing is asked of the host).
    func session(of conversation: ConversationRecord, in task: TaskRecord, host: HostRecord) -> AgentSession {
        let id = conversation.ptyID
        return AgentSession(ptyID: id, host: host.serverID,
                            container: conversation.survivesDisconnect ? .tmux(name: id.description) : .plainTerminal,
                            workingDirectory: task.worktree.path, arguments: conversation.arguments)
    }

    // MARK: tasks

    /// Checks, before anything is made on the host, that it can start the agent: the
    /// agent is installed and usable there, and tmux is there to keep it running after
    /// the connection ends (unless `allowsPlainTerminal`). One round trip, its answer
    /// reused for 5 minutes; `createTask`, `addChat` and `resume` check it themselves.
    /// - Throws: `unknownProvider`, `tmuxUnavailable`, `agentUnavailable`, `notFound`,
    ///   `transport`.
    public func checkCanStart(providerID: String, on host: HostRecord) async throws(AgentError) {
        let provider = try AgentProvider.named(providerID)
        try await onHost(host) { h in try await checkCanStart(provider, on: h, named: host.name) }
    }

    func checkCanStart(_ provider: AgentProvider, on host: AgentHost, named name: String) async throws(AgentError) {
        let applied = settings(provider.id).applied(to: provider)
        let detection = try await host.detectAgents(providers)
        if detection.tmuxVersion == nil && !allowsPlainTerminal {
            throw AgentError(.tmuxUnavailable, "\(name) has no tmux (agents run in tmux so they outlive the connection)")
        }
        guard detection.installed[provider.id] != nil else {
            throw AgentError(.agentUnavailable, "\(applied.binary) (\(provider.displayName)) is not installed on \(name): \(provider.installHint)")
        }
        if let why = detection.unusable[provider.id] {
            throw AgentError(.agentUnavailable, "\(provider.displayName) on \(name) is installed but not usable: \(why)")
        }
    }

    /// Creates a task: checks that the host can start the agent (`checkCanStart`), then
    /// makes its worktree (see `AgentWorktrees.create`) and starts its main agent there
    /// with `prompt` in one round trip, then records both. When the agent cannot start,
    /// the worktree (new, so holding no work) is removed again and the error is thrown;
    /// nothing is recorded.
    /// - Throws: `notFound` (project), `unknownProvider`, the check's, the worktree's and
    ///   the start's errors.
    @discardableResult
    func createTask(projectID: ProjectID, title: String, providerID: String, prompt: String? = nil,
                           autoApprove: Bool = false, baseRef: String? = nil)
        async throws(AgentError) -> (task: TaskRecord, conversation: ConversationRecord, session: AgentSession)
    {
        let provider = try AgentProvider.named(providerID)
        let project = try await records.project(projectID)
        let hostRecord = try await records.host(project.hostID)
        return try await makeTask(project: project, on: hostRecord, title: title, provider: provider, prompt: prompt,
                                  autoApprove: autoApprove, baseRef: baseRef ?? project.defaultBaseRef,
                                  fetchBase: project.fetchesBase ?? true)
    }

    /// What `createTask` does once the project and host are read; for an attempt
    /// (`attempt` set) the worktree is named after `title` and the attempt's label, and
    /// the record says `baseName` as the base (the base is given as a commit).
    func makeTask(project: ProjectRecord, on hostRecord: HostRecord, title: String, provider: AgentProvider, prompt: String?,
                  autoApprove: Bool, baseRef: String?, fetchBase: Bool, baseIsKnownCommit: Bool = false, attempt: TaskAttempt? = nil,
                  baseName: String? = nil)
        async throws(AgentError) -> (task: TaskRecord, conversation: ConversationRecord, session: AgentSession)
    {
        let store = store
        let taskID = TaskID.make()
        let worktreeTitle = attempt.map { "\(title) \($0.label)" } ?? title
        var conversation = ConversationRecord(taskID: taskID, providerID: provider.id, kind: .main, autoApprove: autoApprove)
        let settings = settings(provider.id)
        let applied = settings.applied(to: provider)
        let size = terminalSize, statusHooks = statusHooks, ptyID = conversation.ptyID, rules = screenRules
        let startedAt = Date()
        let made: AgentHost.CreatedTask
        do {
            made = try await onHost(hostRecord) { host in
                try await checkCanStart(provider, on: host, named: hostRecord.name)
                // the task's own port (in its agents' and its setup's environment unless
                // set), claimed once the worktree is made, and the host's status watcher,
                // which follows the new agent from its first screen: all in the one round trip
                let made = try await host.createWorktreeAndStart(projectPath: project.path, title: worktreeTitle, baseRef: baseRef,
                                                                 fetchBase: fetchBase, baseIsKnownCommit: baseIsKnownCommit, portFor: taskID,
                                                                 watcher: rules) { directory throws(AgentError) in
                    let plan: AgentResumePlan
                    do {
                        plan = try await host.planResume(ptyID: ptyID, provider: applied, workingDirectory: directory, isResume: false,
                                                         previousStart: nil, onlyChatOfItsAgent: true, map: store,
                                                         environment: settings.environment)
                    } catch {
                        throw (error as? AgentError) ?? AgentError(.storage, "the session map failed: \(error)")
                    }
                    return AgentSessionSpec(ptyID: ptyID, provider: provider, settings: settings, workingDirectory: directory,
                                            prompt: prompt, autoApprove: autoApprove, resume: plan.resume, size: size,
                                            statusHooks: statusHooks, setupCommand: project.setupCommand)
                }
                // the provider's setting for a usage limit
                if made.session.survivesDisconnect, let wait = settings.continueAfterLimit {
                    try? await host.setContinueAfterLimit(wait, for: ptyID)
                }
                return made
            }
        } catch {
            // what planning recorded for this terminal (Claude's session id) goes with it
            _ = try? await stored("removing the session map entry") { try await store.remove(ptyID.description) }
            throw error
        }
        var (worktree, session, port) = (made.worktree, made.session, made.port)
        if let baseName { worktree.baseRef = baseName }
        let task = TaskRecord(id: taskID, projectID: project.id, title: title, worktree: worktree, prompt: prompt, port: port,
                              attempt: attempt)
        conversation.arguments = session.arguments
        conversation.survivesDisconnect = session.survivesDisconnect
        conversation.state = .running
        conversation.lastStartedAt = startedAt
        let saved = conversation
        do {
            try await AgentTrace.phase("saving the records") { () async throws(AgentError) in
                try await stored("saving the task") {
                    try await store.save(task)
                    try await store.save(saved)
                }
            }
        } catch {
            // the records could not say what is on the host: it goes again
            _ = try? await onHost(hostRecord) { host in
                try await host.stop(session)
                try await host.worktrees.remove(worktree, force: true)
                if let port { try await host.releasePort(port, taskID: taskID) }
            }
            _ = try? await stored("removing the task") { try await store.deleteTask(id: taskID) }
            _ = try? await stored("removing the session map entry") { try await store.remove(ptyID.description) }
            throw error
        }
        await connections.adjustLiveSessions(by: 1, on: hostRecord.serverID)
        if provider.sessionTracking == .codexThread {
            bindCodexThread(ptyID, in: worktree.path, startedAt: startedAt, on: hostRecord)
        }
        return (task, conversation, session)
    }

    /// Adds another agent to a task, in the same worktree.
    /// - Throws: `notFound`, `unknownProvider`, `taskArchived`, the
    ///   check's and the start's errors.
    @discardableResult
    func addChat(taskID: TaskID, providerID: String, prompt: String? = nil, autoApprove: Bool = false)
        async throws(AgentError) -> (conversation: ConversationRecord, session: AgentSession)
    {
        let provider = try AgentProvider.named(providerID)
        let (task, _, hostRecord) = try await context(task: taskID)
        try Self.refuseArchived(task)
        let conversation = ConversationRecord(taskID: task.id, providerID: provider.id, kind: .chat, autoApprove: autoApprove)
        let sameAgent = try await stored("reading conversations") { try await store.conversations(taskID: task.id) }
            .filter { $0.providerID == provider.id }.count
        try await stored("saving the chat") { try await store.save(conversation) }
        do {
            return try await onHost(hostRecord) { host in
                try await checkCanStart(provider, on: host, named: hostRecord.name)
                var started = conversation
                let session = try await start(&started, of: task, on: hostRecord, host: host, provider: provider, prompt: prompt,
                                              isResume: false, onlyChatOfItsAgent: sameAgent == 0)
                return (started, session)
            }
        } catch {
            _ = try? await stored("removing the chat") { try await store.deleteConversation(id: conversation.id) }
            throw error
        }
    }

    /// Starts a conversation's agent (fresh or resumed) on the leased host and records it
    /// as running.
    private func start(_ conversation: inout ConversationRecord, of task: TaskRecord, on hostRecord: HostRecord,
                       host: AgentHost, provider: AgentProvider, prompt: String?, isResume: Bool,
                       onlyChatOfItsAgent: Bool) async throws -> AgentSession
    {
        let id = conversation.ptyID
        let directory = task.worktree.path
        let settings = settings(provider.id)
        let store = store
        let startedAt = Date()
        // the settings count: a user's resumeArguments make a provider without any resumable
        let applied = settings.applied(to: provider)
        let plan = try await host.planResume(ptyID: id, provider: applied, workingDirectory: directory,
                                             isResume: isResume, previousStart: conversation.lastStartedAt,
                                             onlyChatOfItsAgent: onlyChatOfItsAgent, map: store,
                                             environment: settings.environment)
        var session = try await host.startAgent(AgentSessionSpec(ptyID: id, provider: provider, settings: settings,
                                                                 workingDirectory: directory, prompt: isResume ? nil : prompt,
                                                                 autoApprove: conversation.autoApprove, resume: plan.resume,
                                                                 size: terminalSize, statusHooks: statusHooks))
        session.resumeMethod = plan.method
        // a new chat takes its provider's setting for a usage limit; a resumed agent keeps its task's
        if session.survivesDisconnect, !isResume, let wait = settings.continueAfterLimit {
            try? await host.setContinueAfterLimit(wait, for: id)
        }
        if session.survivesDisconnect { _ = try? await host.watcherSnapshot(rules: screenRules) }
        conversation.arguments = session.arguments
        conversation.survivesDisconnect = session.survivesDisconnect
        conversation.state = .running
        conversation.lastStartedAt = startedAt
        let saved = conversation
        try await stored("recording the started agent") { try await store.save(saved) }
        await connections.adjustLiveSessions(by: 1, on: hostRecord.serverID)
        if provider.sessionTracking == .codexThread && !isResume {
            bindCodexThread(id, in: directory, startedAt: startedAt, on: hostRecord)
        }
        return session
    }

    /// Finds which thread Codex made, for an exact resume later; best effort, in the background.
    private func bindCodexThread(_ id: AgentPTYID, in directory: String, startedAt: Date, on hostRecord: HostRecord) {
        let store = store, codexHome = settings(id.providerID).environment["CODEX_HOME"]
        Task { [self] in
            _ = try? await onHost(hostRecord) { host in
                try await host.codexThreads.bind(ptyID: id, workingDirectory: directory, startedAt: startedAt, map: store,
                                               codexHome: codexHome)
            }
        }
    }

    /// The one rule for an archived task: it takes no input, no new agent, no resume.
    /// - Throws: `taskArchived`.
    static func refuseArchived(_ task: TaskRecord) throws(AgentError) {
        guard task.archivedAt == nil else {
            throw AgentError(.taskArchived, "the task \(task.title) is archived; its branch \(task.worktree.branch) stays, start a new task to go on")
        }
    }

    /// Resumes a conversation: a session that still runs is returned as it is; an ended
    /// or vanished one is started again (after `checkCanStart`) with its provider's
    /// resume (an exact one where the provider's sessions can be found, else its
    /// generic flag, else anew).
    /// - Throws: `notFound`, `taskArchived`, the check's and the
    ///   start's errors.
    func resume(conversationID: ChatID) async throws(AgentError) -> AgentSession {
        let conversation = try await records.chat(conversationID)
        let (task, _, hostRecord) = try await context(task: conversation.taskID)
        try Self.refuseArchived(task)
        let provider = try AgentProvider.named(conversation.providerID)
        let existing = session(of: conversation, in: task, host: hostRecord)
        let sameAgent = try await stored("reading conversations") { try await store.conversations(taskID: task.id) }
            .filter { $0.providerID == provider.id }.count
        return try await onHost(hostRecord) { host in
            if try await host.state(of: existing) == .running { return existing }
            try await checkCanStart(provider, on: host, named: hostRecord.name)
            if existing.survivesDisconnect {
                // an ended session kept by remain-on-exit goes, so the name is free
                try await host.stop(existing)
            }
            var restarted = conversation
            return try await start(&restarted, of: task, on: hostRecord, host: host, provider: provider, prompt: nil,
                                   isResume: true, onlyChatOfItsAgent: sameAgent <= 1)
        }
    }

    /// Resumes every conversation of a task (main first), after checking that the host
    /// can start each of their agents, so a missing agent refuses the whole before any
    /// is started.
    /// - Throws: as `resume` and `checkCanStart`.
    @discardableResult
    func resumeTask(taskID: TaskID) async throws(AgentError)
        -> [(conversation: ConversationRecord, session: AgentSession)]
    {
        let (task, _, hostRecord) = try await context(task: taskID)
        try Self.refuseArchived(task)
        let conversations = try await stored("reading conversations") { try await store.conversations(taskID: taskID) }
        var providers: [AgentProvider] = []
        for id in Set(conversations.map(\.providerID)).sorted() { providers.append(try AgentProvider.named(id)) }
        let checked = providers
        try await onHost(hostRecord) { host in
            for p in checked { try await checkCanStart(p, on: host, named: hostRecord.name) }
        }
        var resumed: [(conversation: ConversationRecord, session: AgentSession)] = []
        for c in conversations {
            resumed.append((c, try await resume(conversationID: c.id)))
        }
        return resumed
    }

    /// Where a conversation's agent is; the record follows (an ended agent is recorded
    /// with its exit status).
    func refreshState(conversationID: ChatID) async throws(AgentError) -> ConversationRecord {
        var conversation = try await records.chat(conversationID)
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
    func attach(conversationID: ChatID, size: SSHTerminalSize? = nil) async throws(AgentError) -> AgentTerminal {
        let conversation = try await records.chat(conversationID)
        let (task, _, hostRecord) = try await context(task: conversation.taskID)
        try await register(hostRecord)
        return try await connections.attach(session(of: conversation, in: task, host: hostRecord), size: size ?? terminalSize)
    }

    /// Attaches the local terminal `fd` to a conversation's agent, its bytes carried by
    /// the host connection's worker (see `AgentHost.attach(_:joining:size:term:detachByte:)`).
    /// - Throws: `terminalUnsupported` where only `attach(conversationID:size:)` works (a
    ///   plain session, a transport that joins no terminal); as that call otherwise.
    func attach(conversationID: ChatID, joining fd: Int32, size: SSHTerminalSize? = nil,
                       detachByte: UInt8?) async throws(AgentError) -> AgentJoinedTerminal
    {
        let conversation = try await records.chat(conversationID)
        let (task, _, hostRecord) = try await context(task: conversation.taskID)
        try await register(hostRecord)
        return try await connections.attach(session(of: conversation, in: task, host: hostRecord), joining: fd,
                                            size: size ?? terminalSize, detachByte: detachByte)
    }

    /// Stops a conversation's agent; its scrollback is saved in the terminal log first.
    func stop(conversationID: ChatID) async throws(AgentError) {
        var conversation = try await records.chat(conversationID)
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
    func stop(taskID: TaskID) async throws(AgentError) {
        _ = try await records.task(taskID) // a task that is not there is notFound, not stopped
        for c in try await stored("reading conversations", { try await store.conversations(taskID: taskID) }) {
            try await stop(conversationID: c.id)
        }
    }

    /// Stops a task's agents and marks it archived; its worktree and branch stay.
    /// - Returns: what went wrong with the project's teardown command, if it failed (the
    ///   task is archived all the same).
    @discardableResult
    func archiveTask(taskID: TaskID) async throws(AgentError) -> String? {
        try await stop(taskID: taskID)
        await portForwards.close(taskID)
        let (found, project, hostRecord) = try await context(task: taskID)
        var task = found
        let note = try await onHost(hostRecord) { host in try await tearDown(task, project, on: host) }
        task.archivedAt = Date()
        task.port = nil
        let saved = task
        try await stored("archiving the task") { try await store.save(saved) }
        return note
    }

    /// The project's teardown in the task's worktree, then its port given back.
    func tearDown(_ task: TaskRecord, _ project: ProjectRecord, on host: AgentHost) async throws(AgentError) -> String? {
        var note: String?
        if let command = project.teardownCommand, !command.isEmpty {
            note = try await host.teardown(command, in: task.worktree.path, port: task.port)
        }
        if let port = task.port { try await host.releasePort(port, taskID: task.id) }
        return note
    }

    /// Deletes a task: kills its agents (no orphaned sessions), removes its worktree and
    /// branch, then its records and session-map entries. Refused with
    /// `worktreeHasUnsavedWork`, before anything is touched, when the worktree holds
    /// uncommitted changes or unpushed commits, unless `force`.
    /// - Returns: what went wrong with the project's teardown command, if it failed (the
    ///   task is deleted all the same).
    @discardableResult
    func deleteTask(taskID: TaskID, force: Bool = false) async throws(AgentError) -> String? {
        let (task, project, hostRecord) = try await context(task: taskID)
        let conversations = try await stored("reading conversations") { try await store.conversations(taskID: taskID) }
        let sessions = conversations.map { session(of: $0, in: task, host: hostRecord) }
        let note = try await onHost(hostRecord) { host in
            if !force, let work = try await host.worktrees.unsavedWork(task.worktree) {
                throw AgentError(.worktreeHasUnsavedWork, "the task \(task.title) has work that would be lost: \(work)")
            }
            await portForwards.close(taskID)
            for s in sessions { try await host.stop(s, forget: true) }
            let note = task.archivedAt == nil ? try await tearDown(task, project, on: host) : nil
            if try await host.transport.fileExists(task.worktree.path) {
                try await host.worktrees.remove(task.worktree, force: force)
            }
            return note
        }
        try await stored("deleting the task") {
            for c in conversations { try await store.remove(c.ptyID.description) }
            try await store.deleteTask(id: taskID)
        }
        let running = conversations.filter { $0.state == .running }.count
        await connections.adjustLiveSessions(by: -running, on: hostRecord.serverID)
        return note
    }
}
