import Foundation
import SSHKit
import ServerTransport

/// A host you act on: reaching it, what it has installed, its projects, what is on it that
/// no record names, and taking it out of the store.
public struct HostHandle: Sendable, Hashable {
    public let id: HostID
    let engine: AgentOrchestrator

    public static func == (a: Self, b: Self) -> Bool { a.id == b.id && a.engine === b.engine }
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    /// The host's record now.
    public func record() async throws(AgentError) -> HostRecord { try await engine.records.host(id) }

    /// Connects (when it is not connected): proof that it can be reached with the
    /// credentials and host key of its record.
    public func connect() async throws(AgentError) { try await engine.connect(to: try await record()) }

    /// Where its connection is now; nil for a host not used yet.
    public func connectionState() async throws(AgentError) -> AgentConnectionState? {
        await engine.connectionState(of: try await record())
    }

    /// Which agents are installed (reused for 5 minutes unless `refresh`).
    public func detectAgents(refresh: Bool = false) async throws(AgentError) -> AgentDetection {
        try await engine.detectAgents(on: try await record(), refresh: refresh)
    }

    /// The top level of the git checkout at `path` (and, given a `base`, that it names a
    /// commit there).
    public func checkoutTopLevel(path: String, base: String? = nil) async throws(AgentError) -> String {
        try await engine.checkoutTopLevel(on: try await record(), path: path, base: base)
    }

    /// What the host needs to run agents, in one round trip (tmux, git, the login shell
    /// and PATH, the agents and their logins, free space, the clock).
    public func checkup() async throws(AgentError) -> AgentHostCheckup { try await engine.checkup(try await record()) }

    /// Runs the provider's install command on the host, its output handed to `output` as it
    /// comes; returns its exit status (the host's detection is refreshed after it).
    public func installAgent(_ providerID: String, output: @escaping @Sendable ([UInt8]) -> Void)
        async throws(AgentError) -> SSHExitStatus
    {
        try await engine.installAgent(providerID, on: try await record(), output: output)
    }

    /// Runs an agent's own executable on the host (a name found on the host's search path,
    /// as agents are started, or a path), for the agent's own setup commands: its exit
    /// status (127 when it is not there) and output.
    public func runAgentCommand(_ binary: String, arguments: [String]) async throws(AgentError)
        -> (status: SSHExitStatus, output: String)
    {
        try await engine.runAgentCommand(binary, arguments, on: try await record())
    }

    /// Its projects.
    public func projects() async throws(AgentError) -> [ProjectRecord] { try await engine.records.projects(on: id) }

    /// Adds the git checkout at `path` as a project: its top level is recorded, under
    /// `name` (default: the checkout's folder name).
    /// - Throws: `notAGitRepository`, `invalidArgument` (a base that is no commit),
    ///   `nameTaken` (the host has a project of that name, or of that checkout).
    public func addProject(path: String, name: String? = nil, base: String? = nil) async throws(AgentError) -> ProjectRecord {
        let host = try await record()
        let top = try await engine.checkoutTopLevel(on: host, path: path, base: base)
        let projectName = name ?? (top as NSString).lastPathComponent
        let existing = try await projects()
        if existing.contains(where: { $0.name == projectName }) {
            throw AgentError(.nameTaken, "\(host.name) has a project named \(projectName) already; pick another with --name")
        }
        if let same = existing.first(where: { $0.path == top }) {
            throw AgentError(.nameTaken, "\(top) on \(host.name) is the project \(same.name) already")
        }
        let project = ProjectRecord(hostID: id, name: projectName, path: top, defaultBaseRef: base)
        try await engine.stored("saving the project") { try await engine.store.save(project) }
        return project
    }

    // MARK: orphans

    /// Sessions and worktrees on the host that no record names, and port claims held for
    /// nothing.
    public func findOrphans() async throws(AgentError) -> AgentOrphans { try await engine.findOrphans(on: try await record()) }

    /// Makes tasks and chats of orphaned worktrees and the sessions in them.
    public func adoptOrphans(_ found: AgentOrphans) async throws(AgentError) -> [AgentOrphanOutcome] {
        try await engine.adoptOrphans(found, on: try await record())
    }

    /// Stops orphaned sessions, removes orphaned worktrees (refusing to lose work unless
    /// `force`) and gives back the ports held for nothing.
    public func removeOrphans(_ found: AgentOrphans, force: Bool = false) async throws(AgentError) -> [AgentOrphanOutcome] {
        try await engine.removeOrphans(found, on: try await record(), force: force)
    }

    // MARK: out of the store

    /// Takes the host, its projects, their tasks and chats out of the store (with their
    /// session-map entries and open ports); nothing on the host is touched, its agents run
    /// on. A host with tasks is refused with `hasTasks` unless `force`.
    /// - Returns: how many projects and tasks went with it.
    @discardableResult
    public func remove(force: Bool = false) async throws(AgentError) -> (projects: Int, tasks: Int) {
        let host = try await record()
        let projects = try await projects()
        var tasks: [TaskRecord] = []
        for p in projects { tasks += try await engine.records.tasks(in: p.id) }
        if !tasks.isEmpty && !force {
            throw AgentError(.hasTasks, "\(host.name) has \(Wording.count(tasks.count, "task")); delete \(tasks.count == 1 ? "it" : "them") first (agent-sessions tasks delete) or pass --force")
        }
        try await engine.forget(tasks)
        try await engine.stored("removing the host") { try await engine.store.deleteHost(id: id) }
        await engine.connections.remove(host.serverID)
        return (projects.count, tasks.count)
    }
}
