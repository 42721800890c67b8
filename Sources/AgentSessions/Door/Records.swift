import Foundation

/// The engine's records as front ends see them: read only. Every write (a host added,
/// a task made, a cascade of removals) goes through the engine's handles, which keep the
/// records and the hosts in step.
///
/// The `named` functions resolve what a user typed, the same way for every front end:
/// an id or a unique id prefix (4 characters or more), a name or title, a worktree name,
/// a title's slug. Several matches are `ambiguous` (the message says what to add), none
/// `notFound`.
public struct AgentRecords: Sendable {
    let store: any AgentStore

    init(store: any AgentStore) { self.store = store }

    private func read<T>(_ what: String, _ body: () async throws -> T) async throws(AgentError) -> T {
        try await storeCall("reading \(what)", body)
    }

    // MARK: by id

    public func hosts() async throws(AgentError) -> [HostRecord] { try await read("the hosts") { try await store.hosts() } }

    public func host(_ id: HostID) async throws(AgentError) -> HostRecord {
        guard let h = try await read("the host \(id)", { try await store.host(id: id) }) else {
            throw AgentError(.notFound, "no host \(id) in the store")
        }
        return h
    }

    /// Every project, or a host's.
    public func projects(on host: HostID? = nil) async throws(AgentError) -> [ProjectRecord] {
        try await read("the projects") { try await store.projects(hostID: host) }
    }

    public func project(_ id: ProjectID) async throws(AgentError) -> ProjectRecord {
        guard let p = try await read("the project \(id)", { try await store.project(id: id) }) else {
            throw AgentError(.notFound, "no project \(id) in the store")
        }
        return p
    }

    /// Every task, or a project's (archived ones too).
    public func tasks(in project: ProjectID? = nil) async throws(AgentError) -> [TaskRecord] {
        try await read("the tasks") { try await store.tasks(projectID: project) }
    }

    public func task(_ id: TaskID) async throws(AgentError) -> TaskRecord {
        guard let t = try await read("the task \(id)", { try await store.task(id: id) }) else {
            throw AgentError(.notFound, "no task \(id) in the store")
        }
        return t
    }

    /// A task's chats, its main agent first.
    public func chats(of task: TaskID) async throws(AgentError) -> [ConversationRecord] {
        try await read("the chats") { try await store.conversations(taskID: task) }
    }

    public func chat(_ id: ChatID) async throws(AgentError) -> ConversationRecord {
        guard let c = try await read("the chat \(id)", { try await store.conversation(id: id) }) else {
            throw AgentError(.notFound, "no chat \(id) in the store")
        }
        return c
    }

    /// The task's project and host.
    public func placeOf(_ task: TaskRecord) async throws(AgentError) -> (project: ProjectRecord, host: HostRecord) {
        let project: ProjectRecord
        do {
            project = try await self.project(task.projectID)
        } catch where error.code == .notFound {
            throw AgentError(.notFound, "the project of the task \(task.title) is gone from the store")
        }
        do {
            return (project, try await host(project.hostID))
        } catch where error.code == .notFound {
            throw AgentError(.notFound, "the host of the project \(project.name) is gone from the store")
        }
    }

    /// What is wrong with the store itself (empty when sound) and the version of its
    /// layout, as its kind checks them (`AgentStore.check`).
    public func check() async throws(AgentError) -> AgentStoreCheck { try await read("its state") { try await store.check() } }

    // MARK: what a user typed

    /// A host by name or id.
    public func host(named name: String) async throws(AgentError) -> HostRecord {
        let all = try await hosts()
        if let h = all.first(where: { $0.name == name }) ?? all.first(where: { $0.id.rawValue == name }) { return h }
        throw AgentError(.notFound, "no host named \(name); see agent-sessions hosts list")
    }

    /// A project by name (`name`, or `host/name` when two hosts have one of that name) or id.
    public func project(named ref: String) async throws(AgentError) -> ProjectRecord {
        let hosts = try await hosts()
        let all = try await projects()
        if let p = all.first(where: { $0.id.rawValue == ref }) { return p }
        var matches = all.filter { $0.name == ref }
        if matches.isEmpty, let slash = ref.firstIndex(of: "/") {
            let hostName = String(ref[..<slash]), name = String(ref[ref.index(after: slash)...])
            if let h = hosts.first(where: { $0.name == hostName }) {
                matches = all.filter { $0.hostID == h.id && $0.name == name }
            }
        }
        if matches.count == 1 { return matches[0] }
        if matches.isEmpty { throw AgentError(.notFound, "no project \(ref); see agent-sessions projects list") }
        throw AgentError(.ambiguous, "several hosts have a project named \(ref); say which, as host/\(ref)")
    }

    /// A task by id, unique id prefix (4 characters or more), exact title, worktree name,
    /// or the title's slug (`fix-the-flaky-test`, the worktree name without its time).
    /// One of several attempts is named `WORK/LABEL` (`fix-the-flaky-test/claude-2`); the
    /// work alone names its picked attempt. An archived task is named only when no live
    /// one matches.
    public func task(named ref: String) async throws(AgentError) -> TaskRecord {
        let all = try await tasks()
        if let t = all.first(where: { $0.id.rawValue == ref }) { return t }
        if let slash = ref.lastIndex(of: "/"), slash != ref.startIndex {
            let label = String(ref[ref.index(after: slash)...])
            let work = Self.matches(String(ref[..<slash]), in: all)
            let groups = Set(work.compactMap { $0.attempt?.group })
            if groups.count == 1, let t = all.first(where: { $0.attempt?.group == groups.first && $0.attempt?.label == label }) {
                return t
            }
        }
        var matches = Self.matches(ref, in: all).inAttemptOrder
        if matches.count > 1 { matches = matches.filter { $0.archivedAt == nil } }
        if matches.count > 1, let group = matches[0].attempt?.group, matches.allSatisfy({ $0.attempt?.group == group }) {
            if let picked = matches.first(where: { $0.attempt?.pickedAt != nil }) { return picked }
            let labels = matches.compactMap { $0.attempt?.label }
            throw AgentError(.ambiguous, "\(ref) names the \(labels.count) attempts of \"\(matches[0].title)\" (\(labels.joined(separator: ", "))); say which, as \(ref)/\(labels[0])")
        }
        if matches.count == 1 { return matches[0] }
        if matches.isEmpty { throw AgentError(.notFound, "no task \(ref); see agent-sessions tasks list") }
        throw AgentError(.ambiguous, "\(ref) names \(matches.count) tasks; give more of the id")
    }

    /// The attempts `ref` names, in their label order: a group's id (or prefix), one of its
    /// attempts, or a title that only its attempts have.
    /// - Throws: `notAnAttempt` when the task it names is a single task.
    public func attempts(named ref: String) async throws(AgentError) -> [TaskRecord] {
        let all = try await tasks()
        var matches = all.first(where: { $0.id.rawValue == ref }).map { [$0] } ?? Self.matches(ref, in: all)
        if matches.isEmpty, let slash = ref.lastIndex(of: "/") { matches = Self.matches(String(ref[..<slash]), in: all) }
        if matches.isEmpty { throw AgentError(.notFound, "no task \(ref); see agent-sessions tasks list") }
        let groups = Set(matches.compactMap { $0.attempt?.group })
        if groups.isEmpty {
            throw AgentError(.notAnAttempt, "the task \(matches[0].title) is not one of several attempts (tasks new --agents makes them)")
        }
        if groups.count > 1 { throw AgentError(.ambiguous, "\(ref) names tasks of \(groups.count) different works; give more of the id") }
        return all.filter { $0.attempt?.group == groups.first }.inAttemptOrder
    }

    /// A task's chat: the main one (`ref` nil), or one by id prefix, agent or number
    /// (1 is the main one).
    public func chat(of task: TaskRecord, named ref: String?) async throws(AgentError) -> ConversationRecord {
        let all = try await chats(of: task.id)
        guard let ref else {
            guard let main = all.first(where: { $0.kind == .main }) ?? all.first else {
                throw AgentError(.notFound, "the task \(task.title) has no agent")
            }
            return main
        }
        if let n = Int(ref), n >= 1, n <= all.count { return all[n - 1] }
        let byID = ref.count >= 4 ? all.filter { $0.id.rawValue.hasPrefix(ref.lowercased()) } : []
        if byID.count == 1 { return byID[0] }
        let byProvider = all.filter { $0.providerID == ref }
        if byProvider.count == 1 { return byProvider[0] }
        if byProvider.count > 1 { throw AgentError(.ambiguous, "the task has \(byProvider.count) \(ref) chats; give the chat's number or id") }
        throw AgentError(.notFound, "the task \(task.title) has no chat \(ref); see agent-sessions tasks show \(task.id.short)")
    }

    /// The tasks `ref` may name: by id prefix, by the id of a group of attempts (or its
    /// prefix), else by worktree name or title, else by the title's slug.
    private static func matches(_ ref: String, in all: [TaskRecord]) -> [TaskRecord] {
        let lower = ref.lowercased()
        var matches = ref.count >= 4
            ? all.filter { $0.id.rawValue.hasPrefix(lower) || $0.attempt?.group.hasPrefix(lower) == true } : []
        if matches.isEmpty { matches = all.filter { $0.worktree.name == ref || $0.title == ref } }
        if matches.isEmpty { matches = all.filter { AgentNaming.slug($0.title) == ref } }
        return matches
    }
}

/// What a store says of itself (`AgentRecords.check`).
public struct AgentStoreCheck: Sendable {
    /// What is wrong, one problem each (empty: sound).
    public var problems: [String]
    /// The version of the store's layout (its last migration), when it has one.
    public var schema: String?
    /// Where it is (a file), when it is somewhere.
    public var location: String?

    public init(problems: [String] = [], schema: String? = nil, location: String? = nil) {
        self.problems = problems
        self.schema = schema
        self.location = location
    }
}
