import AgentSessions
import ArgumentParser
import Foundation
import TerminalSupport

/// The engine's board as this command shows it.
extension AgentBoard.Agent {
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

extension AgentBoard.Row {
    var projectName: String { project?.name ?? "?" }
    var hostName: String { host?.name ?? "?" }
    /// Why the host could not be asked, in its first clause.
    var hostErrorText: String? { hostError.map { String(Failure($0).message.split(separator: ";")[0]) } }

    var json: JSONValue {
        .object(["id": .string(task.id), "title": .string(task.title), "host": .string(hostName), "project": .string(projectName),
                 "branch": .string(task.worktree.branch), "baseRef": .string(task.worktree.baseRef),
                 "worktree": .string(task.worktree.path), "createdAt": .date(task.createdAt),
                 "archived": .bool(task.archivedAt != nil),
                 "filesChanged": filesChanged.map(JSONValue.int) ?? .null,
                 "hostError": hostErrorText.map(JSONValue.string) ?? .null,
                 "agents": .array(agents.map(\.json))])
    }
}

extension AgentBoard {
    var json: JSONValue { .array(rows.map(\.json)) }

    /// The board as a table: one line per agent, the task's columns on its first line.
    func table(live: Bool) -> Table {
        var table = Table(["ID", "HOST", "PROJECT", "TASK", "AGENT", "STATE", "BRANCH", "CHANGED", "ACTIVITY"])
        for row in rows {
            let changed = row.filesChanged.map { "\($0)" } ?? (live ? "?" : "-")
            if row.agents.isEmpty {
                table.add([short(row.task.id), row.hostName, row.projectName, row.task.title, "-", "no agent", row.task.worktree.branch, changed, "-"])
            }
            for (k, a) in row.agents.enumerated() {
                var state = a.stateText
                if let e = row.hostErrorText { state = "unknown (\(e))" }
                if row.task.archivedAt != nil { state += ", archived" }
                let activity = a.lastActivity.map { ago($0) } ?? "-"
                let agent = a.record.kind == .main ? a.record.providerID : a.record.providerID + " (chat)"
                if k == 0 {
                    table.add([short(row.task.id), row.hostName, row.projectName, row.task.title, agent, state, row.task.worktree.branch, changed, activity])
                } else {
                    table.add(["", "", "", "", agent, state, "", "", activity])
                }
            }
        }
        return table
    }
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
            let inferences = AgentBoard.Inferences()
            repeat {
                let board = try await context.orchestrator.board(projectID: projectID, includeArchived: all, live: true,
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
