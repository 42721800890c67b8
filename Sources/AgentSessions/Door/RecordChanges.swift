import Foundation
import Synchronization

/// A write the engine made to its records, as `AgentOrchestrator.recordChanges()` tells it:
/// a front end reads what changed through `records` (or the board) when it is told. A
/// removal takes the records under it along (a host its projects, tasks and chats); only the
/// removed record is told.
public enum AgentRecordChange: Sendable, Hashable {
    case host(HostID, removed: Bool)
    case project(ProjectID, removed: Bool)
    case task(TaskID, removed: Bool)
    case chat(ChatID, removed: Bool)
}

/// The subscribers of an engine's record changes.
final class RecordChangeFeed: Sendable {
    private let subscribers = Mutex<(next: UInt64, all: [UInt64: AsyncStream<AgentRecordChange>.Continuation], closed: Bool)>(
        (0, [:], false))

    func stream() -> AsyncStream<AgentRecordChange> {
        let (stream, continuation) = AsyncStream<AgentRecordChange>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        let key = subscribers.withLock { s -> UInt64? in
            guard !s.closed else { return nil }
            s.next += 1
            s.all[s.next] = continuation
            return s.next
        }
        guard let key else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in _ = self?.subscribers.withLock { $0.all.removeValue(forKey: key) } }
        return stream
    }

    func emit(_ change: AgentRecordChange) {
        for c in subscribers.withLock({ Array($0.all.values) }) { c.yield(change) }
    }

    func finish() {
        let all = subscribers.withLock { s -> [AsyncStream<AgentRecordChange>.Continuation] in
            s.closed = true
            defer { s.all = [:] }
            return Array(s.all.values)
        }
        for c in all { c.finish() }
    }
}

/// The engine's store: each write goes to the store given, then is told to the feed once it
/// succeeded.
struct ObservedStore: AgentStore {
    let inner: any AgentStore
    let feed: RecordChangeFeed

    func hosts() async throws -> [HostRecord] { try await inner.hosts() }
    func host(id: HostID) async throws -> HostRecord? { try await inner.host(id: id) }
    func save(_ host: HostRecord) async throws {
        try await inner.save(host)
        feed.emit(.host(host.id, removed: false))
    }
    func deleteHost(id: HostID) async throws {
        try await inner.deleteHost(id: id)
        feed.emit(.host(id, removed: true))
    }

    func projects(hostID: HostID?) async throws -> [ProjectRecord] { try await inner.projects(hostID: hostID) }
    func project(id: ProjectID) async throws -> ProjectRecord? { try await inner.project(id: id) }
    func save(_ project: ProjectRecord) async throws {
        try await inner.save(project)
        feed.emit(.project(project.id, removed: false))
    }
    func deleteProject(id: ProjectID) async throws {
        try await inner.deleteProject(id: id)
        feed.emit(.project(id, removed: true))
    }

    func tasks(projectID: ProjectID?) async throws -> [TaskRecord] { try await inner.tasks(projectID: projectID) }
    func task(id: TaskID) async throws -> TaskRecord? { try await inner.task(id: id) }
    func save(_ task: TaskRecord) async throws {
        try await inner.save(task)
        feed.emit(.task(task.id, removed: false))
    }
    func deleteTask(id: TaskID) async throws {
        try await inner.deleteTask(id: id)
        feed.emit(.task(id, removed: true))
    }

    func conversations(taskID: TaskID) async throws -> [ConversationRecord] { try await inner.conversations(taskID: taskID) }
    func conversation(id: ChatID) async throws -> ConversationRecord? { try await inner.conversation(id: id) }
    func save(_ conversation: ConversationRecord) async throws {
        try await inner.save(conversation)
        feed.emit(.chat(conversation.id, removed: false))
    }
    func deleteConversation(id: ChatID) async throws {
        try await inner.deleteConversation(id: id)
        feed.emit(.chat(id, removed: true))
    }

    func appendTerminalLog(_ log: TerminalLogRecord) async throws { try await inner.appendTerminalLog(log) }
    func terminalLogs(conversationID: ChatID) async throws -> [TerminalLogRecord] {
        try await inner.terminalLogs(conversationID: conversationID)
    }
    func check() async throws -> AgentStoreCheck { try await inner.check() }

    func entries() async throws -> [String: AgentSessionMapEntry] { try await inner.entries() }
    func set(_ entry: AgentSessionMapEntry, for ptyID: String) async throws { try await inner.set(entry, for: ptyID) }
    func remove(_ ptyID: String) async throws { try await inner.remove(ptyID) }
}

extension AgentOrchestrator {
    /// Every write the engine makes to its records from now on, until `close`: a task made,
    /// archived or deleted, a chat started or stopped, a host or project added or removed.
    /// With the board (`board(live:)`) and the hosts' status (`followStatus`), what a front
    /// end needs to keep its view live.
    public func recordChanges() -> AsyncStream<AgentRecordChange> { recordFeed.stream() }
}
