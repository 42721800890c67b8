import AgentSessions
import ArgumentParser
import Foundation
import TerminalSupport

/// The engine's board as this command shows it.
extension AgentBoard.Agent {
    var stateText: String {
        switch record.state {
        case .running:
            guard let status else { return "running" }
            return status.text
        case .stopped: return "stopped"
        case .exited(let code): return "exited \(code)"
        case .signaled(let n): return "killed by signal \(n)"
        case .gone: return "lost"
        }
    }

    var json: JSONValue {
        var o: [String: JSONValue] = [
            "id": .id(record.id), "agent": .string(record.providerID), "session": .string(record.ptyID.description),
            "kind": .string(record.kind == .main ? "main" : "chat"), "state": .string(stateName),
            "lastActivity": lastActivity.map(JSONValue.date) ?? .null,
            "survivesDisconnect": .bool(record.survivesDisconnect),
        ]
        if case .exited(let code) = record.state { o["exitStatus"] = .int(Int(code)) }
        if case .exited(let code)? = activity, record.state == .running { o["exitStatus"] = .int(Int(code)) }
        o["source"] = status.map { .string($0.source.rawValue) } ?? .null
        o["rule"] = status?.rule.map(JSONValue.string) ?? .null
        o["question"] = status?.question.map(JSONValue.string) ?? .null
        o["limitedUntil"] = status?.limitedUntil.map(JSONValue.date) ?? .null
        o["since"] = status.map { .date($0.since) } ?? .null
        return .object(o)
    }

    /// The state as one word: `starting`, `working`, `waiting`, `done`, `idle`, `exited`,
    /// `stopped`, `lost`, or `running` when the host was not asked.
    var stateName: String {
        switch record.state {
        case .running: return status?.activity.name ?? "running"
        case .stopped: return "stopped"
        case .exited, .signaled: return "exited"
        case .gone: return "lost"
        }
    }
}

extension AgentStatus {
    /// `waiting for input (hook): Allow once?`, `idle (screen)`, `exited 3`.
    var text: String {
        var s: String
        switch activity {
        case .starting: s = "starting"
        case .working: s = "working"
        case .waitingForInput: s = limitText ?? "waiting for input"
        case .done: s = "done"
        case .idle: s = "idle"
        case .exited(let code): return "exited \(code)"
        case .stopped: return "stopped"
        case .lost: return "lost"
        }
        s += " (\(source.rawValue))"
        if let question, activity == .waitingForInput { s += ": " + question }
        return s
    }
}

extension AgentBoard.Row {
    var projectName: String { project?.name ?? "?" }
    var hostName: String { host?.name ?? "?" }
    /// Why the host could not be asked, in its first clause.
    var hostErrorText: String? { hostError.map { String(Failure($0).message.split(separator: ";")[0]) } }

    var json: JSONValue {
        .object(["id": .id(task.id), "title": .string(task.title), "host": .string(hostName), "project": .string(projectName),
                 "branch": .string(task.worktree.branch), "baseRef": .string(task.worktree.baseRef),
                 "worktree": .string(task.worktree.path), "createdAt": .date(task.createdAt),
                 "archived": .bool(task.archivedAt != nil),
                 "filesChanged": filesChanged.map(JSONValue.int) ?? .null,
                 "hostError": hostErrorText.map(JSONValue.string) ?? .null,
                 "pullRequest": pullRequest.map { .object(["url": .string($0.url), "state": .string($0.state.rawValue),
                                                          "draft": .bool($0.isDraft), "checks": .string($0.checks.rawValue)]) } ?? .null,
                 "attempt": task.attempt.map { .object(["group": .string($0.group), "label": .string($0.label),
                                                        "pickedAt": $0.pickedAt.map(JSONValue.date) ?? .null]) } ?? .null,
                 "agents": .array(agents.map(\.json))])
    }
}

extension AgentBoard {
    /// The version of the `--json` documents: 2 added `source`, `rule`, `question`,
    /// `since` and `exitStatus` to each agent, the states `waiting`, `done`, `lost` (one
    /// word each), and this envelope around the rows.
    static let schemaVersion = 2

    var json: JSONValue { .object(["schemaVersion": .int(Self.schemaVersion), "tasks": .array(rows.map(\.json))]) }

    /// The board as a table: one line per agent, the task's columns on its first line.
    func table(live: Bool) -> Table {
        // the pull requests' column only when gh on a host knows one
        let pulls = rows.contains { $0.pullRequest != nil }
        var table = Table(["ID", "HOST", "PROJECT", "TASK", "AGENT", "STATE", "BRANCH", "CHANGED", "ACTIVITY"] + (pulls ? ["PR"] : []))
        for row in rows {
            let changed = row.filesChanged.map { "\($0)" } ?? (live ? "?" : "-")
            let pr = pulls ? [row.pullRequest?.summary ?? "-"] : []
            if row.agents.isEmpty {
                table.add([short(row.task.id), row.hostName, row.projectName, row.task.displayTitle, "-", "no agent", row.task.worktree.branch, changed, "-"] + pr)
            }
            for (k, a) in row.agents.enumerated() {
                var state = a.stateText
                if let e = row.hostErrorText { state = "unknown (\(e))" }
                if row.task.archivedAt != nil { state += ", archived" }
                let activity = a.lastActivity.map { ago($0) } ?? "-"
                let agent = a.record.kind == .main ? a.record.providerID : a.record.providerID + " (chat)"
                if k == 0 {
                    table.add([short(row.task.id), row.hostName, row.projectName, row.task.displayTitle, agent, state, row.task.worktree.branch, changed, activity] + pr)
                } else {
                    table.add(["", "", "", "", agent, state, "", "", activity] + pr.map { _ in "" })
                }
            }
        }
        return table
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "status",
        abstract: "A board of every task on every host: agent, state, branch, files changed, last activity.",
        discussion: """
            Each host is asked once (all at once) through its status watcher, which follows the agents on the host: their hooks, their screens (by the screen rules) and their processes. What needs you (a question waiting, a turn done that nobody looked at) comes first. --explain TASK says, for each agent of the task, which source and which rule gave its state. On a terminal, --watch redraws the board as the hosts report changes; piped, it prints the board again after a blank line at each change. --json prints one JSON document ({"schemaVersion": 2, "tasks": [...]}).
            """)
    @OptionGroup var global: GlobalOptions
    @Option(help: "Only this project's tasks.") var project: String?
    @Flag(help: "Archived tasks too.") var all = false
    @Flag(help: "Redraw at each change until interrupted.") var watch = false
    @Option(help: "With --watch, also ask every host afresh (files changed, last activity) after this many seconds.")
    var interval: Double = 30
    @Option(help: "Which source and rule gave the state of this task's agents.") var explain: String?
    @Flag(help: "JSON, for scripts.") var json = false

    func validate() throws {
        guard interval >= 0.2 && interval <= 3600 else { throw ValidationError("--interval must be from 0.2 to 3600 seconds") }
        if explain != nil && watch { throw ValidationError("--explain and --watch do not go together") }
    }

    func run() async throws {
        try await Context.with(global) { context in
            if let explain {
                try await self.explain(explain, context)
                return
            }
            let projectID = try await context.optional(project) { try await context.project($0).id }
            var board = try await context.orchestrator.board(projectID: projectID, includeArchived: all, live: true)
            show(board, first: true)
            guard watch else { return }
            // the hosts' events drive the redraws; a full look now and then for the rest
            let updates = context.orchestrator.followStatus()
            var lastFull = ContinuousClock.now
            let ticker = AsyncStream<Void> { c in
                let t = Task {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .milliseconds(Int(interval * 1000)))
                        c.yield()
                    }
                }
                c.onTermination = { _ in t.cancel() }
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                let (merged, sink) = AsyncStream<AgentStatusUpdate?>.makeStream()
                group.addTask { for await u in updates { sink.yield(u) }; sink.finish() }
                group.addTask { for await _ in ticker { sink.yield(nil) } }
                for await update in merged {
                    switch update {
                    case .status(let e, _, _)?:
                        board.apply(e)
                    case .hostUnreachable(let host, let error)?:
                        board.markUnreachable(host.id, error)
                    case .hostConnected?:
                        continue
                    case nil:
                        guard ContinuousClock.now - lastFull >= .milliseconds(Int(interval * 1000)) else { continue }
                        board = try await context.orchestrator.board(projectID: projectID, includeArchived: all, live: true)
                        lastFull = .now
                    }
                    show(board, first: false)
                }
                group.cancelAll()
            }
        }
    }

    private func show(_ board: AgentBoard, first: Bool) {
        let onTerminal = isatty(1) == 1 && !json
        if json {
            printJSON(board.json)
        } else {
            var lines = board.rows.isEmpty ? ["no tasks; start one: agent-sessions tasks new <project> <title> --agent <agent>"]
                : board.table(live: true).lines(maxWidth: onTerminal ? LocalTerminal.size()?.columns : nil)
            if onTerminal && watch {
                lines.insert("agent-sessions status, \(iso8601(Date())) (Ctrl-C to quit)", at: 0)
                LocalTerminal.writeOut(Array(("\u{1B}[H\u{1B}[2J" + lines.joined(separator: "\r\n") + "\r\n").utf8))
            } else {
                if !first { print("") }
                for l in lines { print(l) }
            }
        }
        fflush(nil)
    }

    private func explain(_ taskRef: String, _ context: Context) async throws {
        let task = try await context.task(taskRef)
        let board = try await context.orchestrator.board(taskIDs: [task.id], includeArchived: true, live: true)
        guard let row = board.rows.first else { throw Failure(.notFound, "no task \(taskRef)") }
        if let e = row.hostErrorText { print("host \(row.hostName): unreachable (\(e))") }
        for a in row.agents {
            let agent = a.record.kind == .main ? a.record.providerID : a.record.providerID + " (chat)"
            print("\(agent) \(short(a.record.id)): \(a.stateText)")
            guard let s = a.status else {
                print("  from the record: the agent is \(a.record.state) (the host was not asked about it)")
                continue
            }
            print("  since \(iso8601(s.since))")
            switch s.source {
            case .hook:
                print("  source: the agent's hook, event '\(s.rule ?? "?")'")
            case .process:
                print("  source: the process (\(Self.processWords(s.rule)))")
            case .screen:
                if let id = s.rule, let rule = context.orchestrator.screenRules.rule(id: id) {
                    print("  source: the screen, rule \(id): [\(rule.provider)] \(rule.kind.rawValue) \(rule.pattern)")
                } else if s.rule == "quiet" {
                    print("  source: the screen, no rule matched: it \(s.activity == .working ? "changed in the last 3 s" : "has not changed for 3 s")")
                } else if s.rule == "activity" {
                    print("  source: the screen, no rule matched: a first look, by tmux's last output time")
                } else {
                    print("  source: the screen, rule \(s.rule ?? "?")")
                }
            }
            if let q = s.question { print("  question: \(q)") }
        }
    }

    private static func processWords(_ rule: String?) -> String {
        switch rule {
        case "pane-dead"?: "its program ended"
        case "stopped"?: "stopped by agent-sessions"
        case "gone"?: "its session is gone"
        default: "nothing shown yet"
        }
    }
}

