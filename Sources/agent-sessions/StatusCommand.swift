import AgentSessions
import ArgumentParser
import Foundation
import Synchronization
import TerminalSupport

/// Every task with its agents, as the store has them and (live) as the hosts say now.
struct Board {
    struct Agent {
        var record: ConversationRecord
        /// What it is doing, asked of the host (nil: not asked or not running).
        var activity: AgentActivity?
        /// The last output of its session (tmux's session activity).
        var lastActivity: Date?

        var stateText: String {
            switch record.state {
            case .running:
                switch activity {
                case .starting?: return "starting"
                case .working?: return "working"
                case .waitingForInput?: return "waiting for input"
                case .idle?: return "idle"
                case .exited(let code)?: return "exited \(code)"
                case .lost?: return "gone"
                case nil: return "running"
                }
            case .stopped: return "stopped"
            case .exited(let code): return "exited \(code)"
            case .signaled(let n): return "killed by signal \(n)"
            case .gone: return "gone"
            }
        }

        var json: JSONValue {
            .object(["id": .string(record.id), "agent": .string(record.providerID),
                     "kind": .string(record.kind == .main ? "main" : "chat"), "state": .string(stateText),
                     "lastActivity": lastActivity.map(JSONValue.date) ?? .null,
                     "survivesDisconnect": .bool(record.survivesDisconnect)])
        }
    }

    struct Row {
        var task: TaskRecord
        var project: String
        var host: String
        var conversations: [Agent]
        var filesChanged: Int?
        /// Why the host could not be asked (live only).
        var hostError: String?

        var json: JSONValue {
            .object(["id": .string(task.id), "title": .string(task.title), "host": .string(host), "project": .string(project),
                     "branch": .string(task.worktree.branch), "baseRef": .string(task.worktree.baseRef),
                     "worktree": .string(task.worktree.path), "createdAt": .date(task.createdAt),
                     "archived": .bool(task.archivedAt != nil),
                     "filesChanged": filesChanged.map(JSONValue.int) ?? .null,
                     "hostError": hostError.map(JSONValue.string) ?? .null,
                     "agents": .array(conversations.map(\.json))])
        }
    }

    var rows: [Row]

    var json: JSONValue { .array(rows.map(\.json)) }

    /// Reads the records; with `live`, asks each host (all hosts at once) for its agents'
    /// state and activity and the worktrees' changes, recording agents found ended.
    static func gather(_ context: Context, projectID: String? = nil, taskIDs: Set<String>? = nil,
                       includeArchived: Bool, live: Bool, inferences: Inferences = Inferences()) async throws -> Board
    {
        let hosts = try await context.store.hosts()
        let projects = try await context.store.projects(hostID: nil)
        var rows: [Row] = []
        for t in try await context.store.tasks(projectID: projectID) {
            if let taskIDs, !taskIDs.contains(t.id) { continue }
            if t.archivedAt != nil && !includeArchived { continue }
            let p = projects.first { $0.id == t.projectID }
            let h = hosts.first { $0.id == p?.hostID }
            let agents = try await context.store.conversations(taskID: t.id).map { Agent(record: $0) }
            rows.append(Row(task: t, project: p?.name ?? "?", host: h?.name ?? "?", conversations: agents))
        }
        guard live else { return Board(rows: rows) }
        let byHost = Dictionary(grouping: rows.indices, by: { rows[$0].host })
        let results = await withTaskGroup(of: [(Int, Row)].self) { group in
            for (name, indices) in byHost {
                guard let record = hosts.first(where: { $0.name == name }) else { continue }
                let mine = indices.map { ($0, rows[$0]) }
                group.addTask { await refresh(mine, on: record, context, inferences) }
            }
            var all: [(Int, Row)] = []
            for await part in group { all += part }
            return all
        }
        for (i, row) in results { rows[i] = row }
        return Board(rows: rows)
    }

    /// One host's rows, asked of the host; an unreachable host marks its rows.
    private static func refresh(_ rows: [(Int, Row)], on record: HostRecord, _ context: Context,
                                _ inferences: Inferences) async -> [(Int, Row)] {
        do {
            let sessions = try await context.onHost(record) { host in try await host.listTmuxSessions() }
            let activity = Dictionary(sessions.map { ($0.name, $0.lastActivity) }, uniquingKeysWith: { a, _ in a })
            return try await withThrowingTaskGroup(of: (Int, Row).self) { group in
                for (i, row) in rows {
                    group.addTask {
                        var row = row
                        for (j, a) in row.conversations.enumerated() where a.record.state == .running {
                            let c = a.record
                            row.conversations[j].lastActivity = activity[c.ptyID.description]
                            let session = context.orchestrator.session(of: c, in: row.task, host: record)
                            let status = try await context.onHost(record) { host in
                                var inference = inferences.take(c.id)
                                let status = await host.status(of: session, inference: &inference)
                                inferences.keep(inference, for: c.id)
                                return status
                            }
                            switch status.activity {
                            case .exited, .lost:
                                // ended: the record says how (one more look, only now)
                                row.conversations[j].record = try await context.orchestrator.refreshState(conversationID: c.id)
                            default:
                                // a first look at a screen cannot tell working from idle yet
                                let unsure = status.source == .screen && status.activity == .starting
                                row.conversations[j].activity = unsure ? nil : status.activity
                            }
                        }
                        if row.task.archivedAt == nil {
                            row.filesChanged = try? await context.onHost(record) { host in
                                try await changedFiles(row.task.worktree, on: host)
                            }
                        }
                        return (i, row)
                    }
                }
                var all: [(Int, Row)] = []
                for try await r in group { all.append(r) }
                return all
            }
        } catch {
            let why = String(Failure.from(error).message.split(separator: ";")[0])
            return rows.map { i, row in
                var row = row
                row.hostError = why
                return (i, row)
            }
        }
    }

    /// The board as a table: one line per agent, the task's columns on its first line.
    func table(live: Bool) -> Table {
        var table = Table(["ID", "HOST", "PROJECT", "TASK", "AGENT", "STATE", "BRANCH", "CHANGED", "ACTIVITY"])
        for row in rows {
            let changed = row.filesChanged.map { "\($0)" } ?? (live ? "?" : "-")
            if row.conversations.isEmpty {
                table.add([short(row.task.id), row.host, row.project, row.task.title, "-", "no agent", row.task.worktree.branch, changed, "-"])
            }
            for (k, a) in row.conversations.enumerated() {
                var state = a.stateText
                if let e = row.hostError { state = "unknown (\(e))" }
                if row.task.archivedAt != nil { state += ", archived" }
                let activity = a.lastActivity.map { ago($0) } ?? "-"
                let agent = a.record.kind == .main ? a.record.providerID : a.record.providerID + " (chat)"
                if k == 0 {
                    table.add([short(row.task.id), row.host, row.project, row.task.title, agent, state, row.task.worktree.branch, changed, activity])
                } else {
                    table.add(["", "", "", "", agent, state, "", "", activity])
                }
            }
        }
        return table
    }
}

/// How many files the worktree changed against its base commit, committed or not, new
/// files included (what `diff --stat` lists), in one round trip.
func changedFiles(_ worktree: Worktree, on host: AgentHost) async throws -> Int {
    let script = #"cd "$1" && { git diff --name-only "$2" -- && git ls-files --others --exclude-standard; } | sort -u | wc -l"#
    let r = try await host.transport.runProcess("/bin/sh", "-c", script, "sh", worktree.path, worktree.baseCommit)
    guard r.exitStatus == .exited(0), let n = Int(r.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)) else {
        throw Failure(.failed, "cannot count the changes of \(worktree.path): \(r.stderrString)")
    }
    return n
}

/// Screen inferences per conversation, kept between the rounds of `status --watch` (a
/// screen that stopped changing tells an idle agent from a working one only over time).
final class Inferences: Sendable {
    private let all = Mutex<[String: AgentScreenInference]>([:])

    func take(_ id: String) -> AgentScreenInference { all.withLock { $0[id] } ?? AgentScreenInference() }
    func keep(_ inference: AgentScreenInference, for id: String) { all.withLock { $0[id] = inference } }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A board of every task on every host: agent, state, branch, files changed, last activity.",
        discussion: """
            The hosts are asked now (all at once). On a terminal, --watch redraws the board in place; piped, it prints plain lines (each round after a blank line). --json prints one JSON array.
            """)
    @OptionGroup var global: GlobalOptions
    @Option(help: "Only this project's tasks.") var project: String?
    @Flag(help: "Archived tasks too.") var all = false
    @Flag(help: "Refresh until interrupted.") var watch = false
    @Option(help: "Seconds between refreshes with --watch.") var interval: Double = 2
    @Flag(help: "JSON, for scripts.") var json = false

    func validate() throws {
        guard interval >= 0.2 && interval <= 3600 else { throw ValidationError("--interval must be from 0.2 to 3600 seconds") }
    }

    func run() async throws {
        try await Context.with(global) { context in
            let projectID = try await context.optional(project) { try await context.project($0).id }
            let onTerminal = isatty(1) == 1 && !json
            var first = true
            let inferences = Inferences()
            repeat {
                let board = try await Board.gather(context, projectID: projectID, includeArchived: all, live: true,
                                                   inferences: inferences)
                if json {
                    printJSON(board.json)
                } else {
                    var lines = board.rows.isEmpty ? ["no tasks; start one: agent-sessions tasks new <project> <title> --agent <agent>"]
                        : board.table(live: true).lines(maxWidth: onTerminal ? LocalTerminal.size()?.columns : nil)
                    if onTerminal && watch {
                        lines.insert("agent-sessions status, \(iso8601(Date())), every \(interval) s (Ctrl-C to quit)", at: 0)
                        LocalTerminal.writeOut(Array(("\u{1B}[H\u{1B}[2J" + lines.joined(separator: "\r\n") + "\r\n").utf8))
                    } else {
                        if !first { print("") }
                        for l in lines { print(l) }
                    }
                }
                fflush(nil)
                first = false
                if watch { try await Task.sleep(for: .milliseconds(Int(interval * 1000))) }
            } while watch
        }
    }
}
