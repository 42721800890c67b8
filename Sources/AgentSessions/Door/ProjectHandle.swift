import Foundation
import SSHKit
import ServerTransport

/// A project you act on: its settings, its tasks, starting work in it, taking it out of
/// the store.
public struct ProjectHandle: Sendable, Hashable {
    public let id: ProjectID
    let engine: AgentOrchestrator

    public static func == (a: Self, b: Self) -> Bool { a.id == b.id && a.engine === b.engine }
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    /// The project's record now.
    public func record() async throws(AgentError) -> ProjectRecord { try await engine.records.project(id) }

    /// Its tasks (archived ones too).
    public func tasks() async throws(AgentError) -> [TaskRecord] { try await engine.records.tasks(in: id) }

    /// Changes its settings: `change` gets the record and edits what it may (the base,
    /// the setup and teardown commands, whether the base is fetched); its id, host, name,
    /// checkout and creation time stay.
    @discardableResult
    public func update(_ change: (inout ProjectRecord) throws(AgentError) -> Void) async throws(AgentError) -> ProjectRecord {
        let old = try await record()
        var new = old
        try change(&new)
        new.id = old.id
        new.hostID = old.hostID
        new.path = old.path
        new.name = old.name
        new.createdAt = old.createdAt
        let saved = new
        try await engine.stored("saving the project") { try await engine.store.save(saved) }
        return saved
    }

    /// Starts a task: a worktree on its own branch and its main agent in it.
    /// - Throws: as `AgentOrchestrator.createTask`.
    @discardableResult
    public func createTask(title: String, providerID: String, prompt: String? = nil, autoApprove: Bool = false,
                           baseRef: String? = nil)
        async throws(AgentError) -> (task: TaskHandle, record: TaskRecord, conversation: ConversationRecord, session: AgentSession)
    {
        let (t, c, s) = try await engine.createTask(projectID: id, title: title, providerID: providerID, prompt: prompt,
                                                    autoApprove: autoApprove, baseRef: baseRef)
        return (TaskHandle(id: t.id, engine: engine), t, c, s)
    }

    /// Starts several attempts at one piece of work, spread over `hostIDs` (the project's
    /// host when empty); see `AgentOrchestrator.createAttempts`.
    public func createAttempts(title: String, agents: [AttemptAgents], hostIDs: [HostID] = [], prompt: String? = nil,
                               autoApprove: Bool = false, baseRef: String? = nil, cloneWhereMissing: Bool = false)
        async throws(AgentError) -> AttemptLaunch
    {
        try await engine.createAttempts(projectID: id, title: title, agents: agents, hostIDs: hostIDs, prompt: prompt,
                                        autoApprove: autoApprove, baseRef: baseRef, cloneWhereMissing: cloneWhereMissing)
    }

    /// Sends a local branch to the project's checkout on its host.
    public func sendLocalBranch(_ branch: String, from directory: String, force: Bool = false) async throws(AgentError) -> String {
        try await engine.sendLocalBranch(branch, from: directory, toProject: id, force: force)
    }

    /// Takes the project, its tasks and their chats out of the store (with their
    /// session-map entries and open ports); the checkout and the worktrees stay on the
    /// host. A project with tasks is refused with `hasTasks` unless `force`.
    /// - Returns: how many tasks went with it.
    @discardableResult
    public func remove(force: Bool = false) async throws(AgentError) -> Int {
        let project = try await record()
        let tasks = try await tasks()
        if !tasks.isEmpty && !force {
            throw AgentError(.hasTasks, "\(project.name) has \(Wording.count(tasks.count, "task")); delete \(tasks.count == 1 ? "it" : "them") first or pass --force")
        }
        try await engine.forget(tasks)
        try await engine.stored("removing the project") { try await engine.store.deleteProject(id: id) }
        return tasks.count
    }
}
