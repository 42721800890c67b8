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
    func host(id: String) async throws -> HostRecord?
    func save(_ host: HostRecord) async throws
    func deleteHost(id: String) async throws

    /// Every project, or a host's.
    func projects(hostID: String?) async throws -> [ProjectRecord]
    func project(id: String) async throws -> ProjectRecord?
    func save(_ project: ProjectRecord) async throws
    func deleteProject(id: String) async throws

    /// Every task, or a project's.
    func tasks(projectID: String?) async throws -> [TaskRecord]
    func task(id: String) async throws -> TaskRecord?
    func save(_ task: TaskRecord) async throws
    func deleteTask(id: String) async throws

    func conversations(taskID: String) async throws -> [ConversationRecord]
    func conversation(id: String) async throws -> ConversationRecord?
    func save(_ conversation: ConversationRecord) async throws
    func deleteConversation(id: String) async throws

    func appendTerminalLog(_ log: TerminalLogRecord) async throws
    func terminalLogs(conversationID: String) async throws -> [TerminalLogRecord]
}

/// An `AgentStore` in memory: for tests, and for programs that keep their records
/// elsewhere.
public actor InMemoryAgentStore: AgentStore {
    private var hostRecords: [String: HostRecord] = [:]
    private var projectRecords: [String: ProjectRecord] = [:]
    private var taskRecords: [String: TaskRecord] = [:]
    private var conversationRecords: [String: ConversationRecord] = [:]
    private var logs: [String: [TerminalLogRecord]] = [:]
    private var map: [String: AgentSessionMapEntry] = [:]

    public init() {}

    private static func missing(_ what: String, _ id: String) -> AgentError {
        AgentError(.notFound, "no \(what) \(id) in the store")
    }

    public func hosts() -> [HostRecord] { hostRecords.values.sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) } }
    public func host(id: String) -> HostRecord? { hostRecords[id] }
    public func save(_ host: HostRecord) throws {
        if hostRecords.values.contains(where: { $0.name == host.name && $0.id != host.id }) {
            throw AgentError(.invalidArgument, "a host named \(host.name) exists already")
        }
        hostRecords[host.id] = host
    }
    public func deleteHost(id: String) {
        for p in projectRecords.values where p.hostID == id { deleteProject(id: p.id) }
        hostRecords[id] = nil
    }

    public func projects(hostID: String?) -> [ProjectRecord] {
        projectRecords.values.filter { hostID == nil || $0.hostID == hostID }
            .sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
    }
    public func project(id: String) -> ProjectRecord? { projectRecords[id] }
    public func save(_ project: ProjectRecord) throws {
        guard hostRecords[project.hostID] != nil else { throw Self.missing("host", project.hostID) }
        projectRecords[project.id] = project
    }
    public func deleteProject(id: String) {
        for t in taskRecords.values where t.projectID == id { deleteTask(id: t.id) }
        projectRecords[id] = nil
    }

    public func tasks(projectID: String?) -> [TaskRecord] {
        taskRecords.values.filter { projectID == nil || $0.projectID == projectID }
            .sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
    }
    public func task(id: String) -> TaskRecord? { taskRecords[id] }
    public func save(_ task: TaskRecord) throws {
        guard projectRecords[task.projectID] != nil else { throw Self.missing("project", task.projectID) }
        taskRecords[task.id] = task
    }
    public func deleteTask(id: String) {
        for c in conversationRecords.values where c.taskID == id { deleteConversation(id: c.id) }
        taskRecords[id] = nil
    }

    public func conversations(taskID: String) -> [ConversationRecord] {
        conversationRecords.values.filter { $0.taskID == taskID }.sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
    }
    public func conversation(id: String) -> ConversationRecord? { conversationRecords[id] }
    public func save(_ conversation: ConversationRecord) throws {
        guard taskRecords[conversation.taskID] != nil else { throw Self.missing("task", conversation.taskID) }
        conversationRecords[conversation.id] = conversation
    }
    public func deleteConversation(id: String) {
        conversationRecords[id] = nil
        logs[id] = nil
    }

    public func appendTerminalLog(_ log: TerminalLogRecord) throws {
        guard conversationRecords[log.conversationID] != nil else { throw Self.missing("conversation", log.conversationID) }
        logs[log.conversationID, default: []].append(log)
    }
    public func terminalLogs(conversationID: String) -> [TerminalLogRecord] { logs[conversationID] ?? [] }

    // the session map
    public func entries() -> [String: AgentSessionMapEntry] { map }
    public func set(_ entry: AgentSessionMapEntry, for ptyID: String) { map[ptyID] = entry }
    public func remove(_ ptyID: String) { map[ptyID] = nil }
}
