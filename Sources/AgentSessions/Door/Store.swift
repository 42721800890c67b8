import Foundation

/// Where the orchestration keeps its records and the session map. The command-line
/// tool implements it with SQLite; `InMemoryAgentStore` keeps everything in memory.
///
/// Rules every implementation keeps:
/// - `save` inserts or replaces by id, and refuses a record whose parent is missing
///   (`notFound`): a project needs its host, a task its project, a conversation its task.
/// - Deleting cascades: a host takes its projects, a project its tasks, a task its
///   conversations, a conversation its terminal logs.
/// - Each call is durable when it returns (a crash never loses an acknowledged write).
/// - Host names are unique: saving a second host under a name in use fails with
///   `invalidArgument`.
/// - Saving a record that exists updates it; its children stay.
/// - Lists are ordered by creation time, oldest first.
public protocol AgentStore: AgentSessionMapStore {
    func hosts() async throws -> [HostRecord]
    func host(id: HostID) async throws -> HostRecord?
    func save(_ host: HostRecord) async throws
    func deleteHost(id: HostID) async throws

    /// Every project, or a host's.
    func projects(hostID: HostID?) async throws -> [ProjectRecord]
    func project(id: ProjectID) async throws -> ProjectRecord?
    func save(_ project: ProjectRecord) async throws
    func deleteProject(id: ProjectID) async throws

    /// Every task, or a project's.
    func tasks(projectID: ProjectID?) async throws -> [TaskRecord]
    func task(id: TaskID) async throws -> TaskRecord?
    func save(_ task: TaskRecord) async throws
    func deleteTask(id: TaskID) async throws

    func conversations(taskID: TaskID) async throws -> [ConversationRecord]
    func conversation(id: ChatID) async throws -> ConversationRecord?
    func save(_ conversation: ConversationRecord) async throws
    func deleteConversation(id: ChatID) async throws

    func appendTerminalLog(_ log: TerminalLogRecord) async throws
    func terminalLogs(conversationID: ChatID) async throws -> [TerminalLogRecord]

    /// What is wrong with the store itself, the version of its layout, where it is.
    func check() async throws -> AgentStoreCheck
}

extension AgentStore {
    /// A store with nothing to check of itself (in memory).
    public func check() async throws -> AgentStoreCheck { AgentStoreCheck() }
}

/// A store call, its failure as `storage` (a typed `AgentError` passes through).
func storeCall<T>(_ what: String, _ body: () async throws -> T) async throws(AgentError) -> T {
    do {
        return try await body()
    } catch let e as AgentError {
        throw e
    } catch {
        throw AgentError(.storage, "the store failed while \(what): \(error)")
    }
}

/// An `AgentStore` in memory: for tests, and for programs that keep their records
/// elsewhere.
public actor InMemoryAgentStore: AgentStore {
    private var hostRecords: [HostID: HostRecord] = [:]
    private var projectRecords: [ProjectID: ProjectRecord] = [:]
    private var taskRecords: [TaskID: TaskRecord] = [:]
    private var conversationRecords: [ChatID: ConversationRecord] = [:]
    private var logs: [ChatID: [TerminalLogRecord]] = [:]
    private var map: [String: AgentSessionMapEntry] = [:]

    public init() {}

    private static func missing(_ what: String, _ id: some RecordIdentity) -> AgentError {
        AgentError(.notFound, "no \(what) \(id) in the store")
    }

    public func hosts() -> [HostRecord] { hostRecords.values.sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) } }
    public func host(id: HostID) -> HostRecord? { hostRecords[id] }
    public func save(_ host: HostRecord) throws {
        if hostRecords.values.contains(where: { $0.name == host.name && $0.id != host.id }) {
            throw AgentError(.invalidArgument, "a host named \(host.name) exists already")
        }
        hostRecords[host.id] = host
    }
    public func deleteHost(id: HostID) {
        for p in projectRecords.values where p.hostID == id { deleteProject(id: p.id) }
        hostRecords[id] = nil
    }

    public func projects(hostID: HostID?) -> [ProjectRecord] {
        projectRecords.values.filter { hostID == nil || $0.hostID == hostID }
            .sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
    }
    public func project(id: ProjectID) -> ProjectRecord? { projectRecords[id] }
    public func save(_ project: ProjectRecord) throws {
        guard hostRecords[project.hostID] != nil else { throw Self.missing("host", project.hostID) }
        projectRecords[project.id] = project
    }
    public func deleteProject(id: ProjectID) {
        for t in taskRecords.values where t.projectID == id { deleteTask(id: t.id) }
        projectRecords[id] = nil
    }

    public func tasks(projectID: ProjectID?) -> [TaskRecord] {
        taskRecords.values.filter { projectID == nil || $0.projectID == projectID }
            .sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
    }
    public func task(id: TaskID) -> TaskRecord? { taskRecords[id] }
    public func save(_ task: TaskRecord) throws {
        guard projectRecords[task.projectID] != nil else { throw Self.missing("project", task.projectID) }
        taskRecords[task.id] = task
    }
    public func deleteTask(id: TaskID) {
        for c in conversationRecords.values where c.taskID == id { deleteConversation(id: c.id) }
        taskRecords[id] = nil
    }

    public func conversations(taskID: TaskID) -> [ConversationRecord] {
        conversationRecords.values.filter { $0.taskID == taskID }.sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
    }
    public func conversation(id: ChatID) -> ConversationRecord? { conversationRecords[id] }
    public func save(_ conversation: ConversationRecord) throws {
        guard taskRecords[conversation.taskID] != nil else { throw Self.missing("task", conversation.taskID) }
        conversationRecords[conversation.id] = conversation
    }
    public func deleteConversation(id: ChatID) {
        conversationRecords[id] = nil
        logs[id] = nil
    }

    public func appendTerminalLog(_ log: TerminalLogRecord) throws {
        guard conversationRecords[log.conversationID] != nil else { throw Self.missing("conversation", log.conversationID) }
        logs[log.conversationID, default: []].append(log)
    }
    public func terminalLogs(conversationID: ChatID) -> [TerminalLogRecord] { logs[conversationID] ?? [] }

    // the session map
    public func entries() -> [String: AgentSessionMapEntry] { map }
    public func set(_ entry: AgentSessionMapEntry, for ptyID: String) { map[ptyID] = entry }
    public func remove(_ ptyID: String) { map[ptyID] = nil }
}
