import Foundation
import Synchronization

/// Every task with its agents, as the store has them and (live) as the hosts say now:
/// what a status command, a watch loop or a cockpit shows.
public struct AgentBoard: Sendable {
    public struct Agent: Sendable {
        public var record: ConversationRecord
        /// What it is doing and where that was learned, asked of the host's status
        /// watcher (nil: not asked, or not running).
        public var status: AgentStatus?
        /// The last output of its session (tmux's window activity).
        public var lastActivity: Date?

        /// What it is doing (nil: not asked, or not running).
        public var activity: AgentActivity? { status?.activity }

        public init(record: ConversationRecord, status: AgentStatus? = nil, lastActivity: Date? = nil) {
            self.record = record
            self.status = status
            self.lastActivity = lastActivity
        }
    }

    public struct Row: Sendable {
        public var task: TaskRecord
        public var project: ProjectRecord?
        public var host: HostRecord?
        public var agents: [Agent]
        /// Files changed against the task's base (live, unarchived tasks only).
        public var filesChanged: Int?
        /// Why the host could not be asked (live only).
        public var hostError: AgentError?
        /// The branch's pull request, when `gh` on the host knows one (live only, read at
        /// most once a minute per project).
        public var pullRequest: PullRequestState?

        /// A row of a task and its agents.
        public init(task: TaskRecord, project: ProjectRecord?, host: HostRecord?, agents: [Agent],
                    filesChanged: Int? = nil, hostError: AgentError? = nil)
        {
            self.task = task
            self.project = project
            self.host = host
            self.agents = agents
            self.filesChanged = filesChanged
            self.hostError = hostError
        }
    }

    public var rows: [Row]

    /// A board of these rows.
    public init(rows: [Row]) { self.rows = rows }
}

extension AgentBoard.Row {
    /// Whether one of its agents waits for a question to be answered or has finished a
    /// turn nobody looked at.
    public var needsYou: Bool { agents.contains { $0.activity?.needsYou == true } }
}

extension AgentOrchestrator {
    /// The board: the records, and with `live` each host asked (all hosts at once, one
    /// connection each, one round trip to its status watcher) for its agents' status and
    /// its worktrees' changes, the rows whose agents need you first; agents found ended
    /// are recorded so. An unreachable host marks its rows with `hostError` and keeps them.
    /// - Parameters:
    ///   - projectID: only this project's tasks.
    ///   - taskIDs: only these tasks.
    /// - Throws: `storage` (the records); a host's failure is in its rows.
    public func board(projectID: ProjectID? = nil, taskIDs: Set<TaskID>? = nil, includeArchived: Bool = false,
                      live: Bool) async throws(AgentError) -> AgentBoard
    {
        try await board(projectID: projectID, taskIDs: taskIDs, includeArchived: includeArchived, live: live, countChanges: true)
    }

    /// `board`; with `countChanges` false, a live board leaves `filesChanged` unset (for a
    /// caller that counts them itself).
    func board(projectID: ProjectID? = nil, taskIDs: Set<TaskID>? = nil, includeArchived: Bool = false,
               live: Bool, countChanges: Bool) async throws(AgentError) -> AgentBoard
    {
        let store = store
        var rows: [AgentBoard.Row] = try await stored("reading the board") {
            let hosts = try await store.hosts()
            let projects = try await store.projects(hostID: nil)
            var rows: [AgentBoard.Row] = []
            for t in try await store.tasks(projectID: projectID) {
                if let taskIDs, !taskIDs.contains(t.id) { continue }
                if t.archivedAt != nil && !includeArchived { continue }
                let p = projects.first { $0.id == t.projectID }
                let h = hosts.first { $0.id == p?.hostID }
                let agents = try await store.conversations(taskID: t.id).map { AgentBoard.Agent(record: $0) }
                rows.append(AgentBoard.Row(task: t, project: p, host: h, agents: agents))
            }
            return rows
        }
        guard live else { return AgentBoard(rows: rows) }
        let byHost = Dictionary(grouping: rows.indices.filter { rows[$0].host != nil }, by: { rows[$0].host!.id })
        let results = await withTaskGroup(of: [(Int, AgentBoard.Row)].self) { group in
            for indices in byHost.values {
                let mine = indices.map { ($0, rows[$0]) }
                guard let host = mine.first?.1.host else { continue }
                group.addTask { await self.refresh(mine, on: host, countChanges: countChanges) }
            }
            var all: [(Int, AgentBoard.Row)] = []
            for await part in group { all += part }
            return all
        }
        for (i, row) in results { rows[i] = row }
        // what needs you first; otherwise the store's order
        let order = rows.indices.sorted { a, b in
            rows[a].needsYou != rows[b].needsYou ? rows[a].needsYou : a < b
        }
        return AgentBoard(rows: order.map { rows[$0] })
    }

    /// One host's rows, asked of the host (its watcher, and the changes of all its
    /// worktrees in one more round trip beside it); an unreachable host marks its rows.
    private func refresh(_ rows: [(Int, AgentBoard.Row)], on host: HostRecord, countChanges: Bool) async -> [(Int, AgentBoard.Row)] {
        let rules = screenRules
        let counted = countChanges ? rows.map(\.1.task).filter { $0.archivedAt == nil }.map(\.worktree) : []
        do throws(AgentError) {
            let (snapshot, counts) = try await onHost(host) { h in
                async let counts: [String: Int] = counted.isEmpty ? [:] : (try? await h.worktrees.changedFileCounts(counted)) ?? [:]
                return (try await h.watcherSnapshot(rules: rules), await counts)
            }
            // the projects' pull requests, one gh call per project (at most once a minute)
            var pulls: [ProjectID: [String: PullRequestState]] = [:]
            for project in Set(rows.compactMap { $0.1.project }) {
                if let known = pullRequestCache.get(project.id) {
                    pulls[project.id] = known
                } else if let read = try? await onHost(host, { h in
                    try await h.worktrees.pullRequests(projectPath: project.path, searchPath: h.extraSearchPath)
                }) {
                    pullRequestCache.set(project.id, read)
                    pulls[project.id] = read
                } else {
                    pullRequestCache.set(project.id, [:])
                }
            }
            let pullsNow = pulls
            let refreshed = await withTaskGroup(of: Result<(Int, AgentBoard.Row), AgentError>.self) { group in
                for (i, row) in rows {
                    group.addTask {
                        do throws(AgentError) {
                            var row = try await self.refresh(row, on: host, snapshot)
                            if row.task.archivedAt == nil { row.filesChanged = counts[row.task.worktree.path] }
                            row.pullRequest = row.project.flatMap { pullsNow[$0.id]?[row.task.worktree.branch] }
                            return .success((i, row))
                        } catch {
                            return .failure(error)
                        }
                    }
                }
                var all: [Result<(Int, AgentBoard.Row), AgentError>] = []
                for await r in group { all.append(r) }
                return all
            }
            var all: [(Int, AgentBoard.Row)] = []
            for r in refreshed { all.append(try r.get()) }
            return all
        } catch {
            return rows.map { i, row in
                var row = row
                row.hostError = error
                return (i, row)
            }
        }
    }

    private func refresh(_ row: AgentBoard.Row, on host: HostRecord, _ snapshot: AgentWatcherSnapshot) async throws(AgentError)
        -> AgentBoard.Row
    {
        var row = row
        for (j, a) in row.agents.enumerated() where a.record.state == .running {
            let c = a.record
            let name = c.ptyID.description
            let session = snapshot.sessions.first { $0.name == name }
            row.agents[j].lastActivity = session?.lastActivity
            if !c.survivesDisconnect {
                // a plain terminal: no watcher follows it, a look of its own
                row.agents[j].status = try await status(of: c.id)
                if case .exited? = row.agents[j].activity { row.agents[j].record = try await refreshState(conversationID: c.id) }
            } else if session == nil || session?.isRunning == false {
                // ended: the record says how (one more look, only now)
                row.agents[j].record = try await refreshState(conversationID: c.id)
            } else if let status = snapshot.states[name] {
                row.agents[j].status = status
            } else {
                // the watcher has not looked at it yet (it started a moment ago)
                row.agents[j].status = AgentStatus(activity: .starting, source: .process, since: Date())
            }
        }
        return row
    }
}

extension AgentBoard {
    /// A status event applied to the agent whose session it names (a state the process
    /// ended in is recorded in its record too); its host answered, so its error goes.
    public mutating func apply(_ e: AgentStatusEvent) {
        for i in rows.indices {
            for j in rows[i].agents.indices where rows[i].agents[j].record.ptyID.description == e.session {
                rows[i].agents[j].status = e.status
                rows[i].hostError = nil
                switch e.status.activity {
                case .exited(let code): rows[i].agents[j].record.state = .exited(code)
                case .stopped: rows[i].agents[j].record.state = .stopped
                case .lost: rows[i].agents[j].record.state = .gone
                default: break
                }
            }
        }
    }

    /// The rows of a host that could not be asked, marked with why (and kept).
    public mutating func markUnreachable(_ hostID: HostID, _ error: AgentError) {
        for i in rows.indices where rows[i].host?.id == hostID { rows[i].hostError = error }
    }
}
