import Foundation
import Synchronization

/// Every task with its agents, as the store has them and (live) as the hosts say now:
/// what a status command, a watch loop or a cockpit shows.
public struct AgentBoard: Sendable {
    public struct Agent: Sendable {
        public var record: ConversationRecord
        /// What it is doing, asked of the host (nil: not asked, not running, or not yet
        /// known: a first look at a screen cannot tell working from idle).
        public var activity: AgentActivity?
        /// The last output of its session (tmux's session activity).
        public var lastActivity: Date?

        public init(record: ConversationRecord, activity: AgentActivity? = nil, lastActivity: Date? = nil) {
            self.record = record
            self.activity = activity
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
    }

    public var rows: [Row]

    /// Screen inferences per conversation, kept between the rounds of a watch (a screen
    /// that stopped changing tells an idle agent from a working one only over time).
    public final class Inferences: Sendable {
        private let all = Mutex<[String: AgentScreenInference]>([:])

        public init() {}

        func take(_ id: String) -> AgentScreenInference { all.withLock { $0[id] } ?? AgentScreenInference() }
        func keep(_ inference: AgentScreenInference, for id: String) { all.withLock { $0[id] = inference } }
    }
}

extension AgentOrchestrator {
    /// The board: the records, and with `live` each host asked (all hosts at once, one
    /// connection each) for its agents' state and activity and its worktrees' changes;
    /// agents found ended are recorded so. An unreachable host marks its rows with
    /// `hostError` and keeps them.
    /// - Parameters:
    ///   - projectID: only this project's tasks.
    ///   - taskIDs: only these tasks.
    ///   - inferences: carried between the rounds of a watch.
    /// - Throws: `storage` (the records); a host's failure is in its rows.
    public func board(projectID: String? = nil, taskIDs: Set<String>? = nil, includeArchived: Bool = false,
                      live: Bool, inferences: AgentBoard.Inferences = AgentBoard.Inferences()) async throws(AgentError)
        -> AgentBoard
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
                group.addTask { await self.refresh(mine, on: host, inferences) }
            }
            var all: [(Int, AgentBoard.Row)] = []
            for await part in group { all += part }
            return all
        }
        for (i, row) in results { rows[i] = row }
        return AgentBoard(rows: rows)
    }

    /// One host's rows, asked of the host; an unreachable host marks its rows.
    private func refresh(_ rows: [(Int, AgentBoard.Row)], on host: HostRecord,
                         _ inferences: AgentBoard.Inferences) async -> [(Int, AgentBoard.Row)] {
        do throws(AgentError) {
            let sessions = try await onHost(host) { h in try await h.tmux.sessions() }
            let activity = Dictionary(sessions.map { ($0.name, $0.lastActivity) }, uniquingKeysWith: { a, _ in a })
            let refreshed = await withTaskGroup(of: Result<(Int, AgentBoard.Row), AgentError>.self) { group in
                for (i, row) in rows {
                    group.addTask {
                        do throws(AgentError) {
                            return .success((i, try await self.refresh(row, on: host, activity: activity, inferences)))
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

    private func refresh(_ row: AgentBoard.Row, on host: HostRecord, activity: [String: Date],
                         _ inferences: AgentBoard.Inferences) async throws(AgentError) -> AgentBoard.Row
    {
        var row = row
        for (j, a) in row.agents.enumerated() where a.record.state == .running {
            let c = a.record
            row.agents[j].lastActivity = activity[c.ptyID.description]
            var inference = inferences.take(c.id)
            let status = try await status(of: c.id, inference: &inference)
            inferences.keep(inference, for: c.id)
            switch status.activity {
            case .exited, .lost:
                // ended: the record says how (one more look, only now)
                row.agents[j].record = try await refreshState(conversationID: c.id)
            default:
                // a first look at a screen cannot tell working from idle yet
                let unsure = status.source == .screen && status.activity == .starting
                row.agents[j].activity = unsure ? nil : status.activity
            }
        }
        if row.task.archivedAt == nil {
            row.filesChanged = try? await onHost(host) { h in try await h.worktrees.changedFileCount(row.task.worktree) }
        }
        return row
    }
}
