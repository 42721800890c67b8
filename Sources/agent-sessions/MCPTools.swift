import AgentSessions
import Foundation
import MCP
import TerminalSupport

/// The tools: each a call on the engine's door, its result as JSON text.
struct MCPTools: Sendable {
    let context: Context
    /// The client's name, as it gave it when it began.
    let client = Named()
    /// The requests for the user's yes this server waits on.
    let asking = Asking()

    final class Asking: @unchecked Sendable {
        private let lock = NSLock()
        private var ids: Set<String> = []
        func add(_ id: String) { _ = lock.withLock { ids.insert(id) } }
        func remove(_ id: String) { _ = lock.withLock { ids.remove(id) } }
        var all: [String] { lock.withLock { Array(ids) } }
    }

    final class Named: @unchecked Sendable {
        private let lock = NSLock()
        private var name = "an MCP client"
        func set(_ n: String) { lock.withLock { name = n.isEmpty ? name : n } }
        func get() -> String { lock.withLock { name } }
    }
    var policy: MCPPolicy { context.config.mcp }
    var audit: MCPAudit { MCPAudit(storePath: context.storePath) }

    static func schema(_ properties: [String: (type: String, description: String)], required: [String] = []) -> Value {
        .object([
            "type": "object",
            "properties": .object(properties.mapValues { .object(["type": .string($0.type), "description": .string($0.description)]) }),
            "required": .array(required.map { .string($0) }),
        ])
    }

    static let taskArgument = (type: "string", description: "The task: its id or the start of it, its title, its worktree name, or WORK/LABEL for one of several attempts.")

    static let list: [Tool] = [
        Tool(name: "list_hosts", description: "The hosts agents run on, each with its projects (git checkouts).",
             inputSchema: schema([:]), annotations: .init(readOnlyHint: true)),
        Tool(name: "board", description: "Every task on every host: its agents' state (working, waiting for input with the question, done, idle, exited), branch, files changed; what needs the user first.",
             inputSchema: schema(["project": ("string", "Only this project's tasks (its name, or HOST/NAME)."),
                                  "archived": ("boolean", "Archived tasks too.")]),
             annotations: .init(readOnlyHint: true)),
        Tool(name: "start_task", description: "Starts an agent on a new task: a git worktree of the project on its host, a new branch, the agent in a tmux session there that survives disconnects. Returns the task.",
             inputSchema: schema(["project": ("string", "The project (its name, or HOST/NAME)."),
                                  "title": ("string", "The task's title (its branch and worktree are named after it)."),
                                  "agent": ("string", "The agent: claude, codex, gemini, vibe, kimi, hermes, … (agent-sessions agents list)."),
                                  "prompt": ("string", "What the agent is asked first."),
                                  "base": ("string", "The branch or commit to start from (default: the checkout's branch)."),
                                  "auto_approve": ("boolean", "Start the agent with its own flag that approves its actions without asking (claude's --dangerously-skip-permissions, kimi's --yolo, …); default false: it asks, and wait_for_task returns with its question.")],
                                 required: ["project", "title", "agent"])),
        Tool(name: "task_status", description: "A task's state now: each agent's state, where it came from (hook, screen, process) and the question it waits on.",
             inputSchema: schema(["task": taskArgument], required: ["task"]), annotations: .init(readOnlyHint: true)),
        Tool(name: "wait_for_task", description: "Waits until the task's agent needs input, is done with its turn, is idle or has exited, or the time is up (then the state as it is, with timedOut); once settled, with lastTurn, the screen it ended on. The agent goes on running either way, also when the wait is cut.",
             inputSchema: schema(["task": taskArgument,
                                  "timeout_seconds": ("integer", "At most this long: 0 to 3600 (default 300; 0 gives the state at once).")],
                                 required: ["task"]), annotations: .init(readOnlyHint: true)),
        Tool(name: "task_result", description: "What the task's agent last said and what it changed, for a lead that comes back later: the screen it ended its last turn with (kept on its host by the host's watcher, also after its session ended), its state now, and each file changed against the base.",
             inputSchema: schema(["task": taskArgument, "lines": ("integer", "How many of the screen's last lines (default 40).")],
                                 required: ["task"]), annotations: .init(readOnlyHint: true)),
        Tool(name: "task_output", description: "The last lines of the task's agent's terminal, as text.",
             inputSchema: schema(["task": taskArgument, "lines": ("integer", "How many of the last lines (default 60).")],
                                 required: ["task"]), annotations: .init(readOnlyHint: true)),
        Tool(name: "task_diff", description: "What the task changed against its base: each file with its lines added and removed, committed or not, new files included.",
             inputSchema: schema(["task": taskArgument], required: ["task"]), annotations: .init(readOnlyHint: true)),
        Tool(name: "send_to_task", description: "Types a line into the task's agent (Enter pressed after it, unless enter is false): an answer to its question, or a new prompt.",
             inputSchema: schema(["task": taskArgument, "text": ("string", "What to type."),
                                  "enter": ("boolean", "Press Enter after it (default true).")],
                                 required: ["task", "text"])),
        Tool(name: "land_task", description: "Lands the task's work: commits what is not committed (with message, or a message made from the title), then with push its branch is pushed to the project's remote, and with pull_request a pull request is opened (gh on the host, or the forge's page). The same refusals as the command: nothing to land, no remote.",
             inputSchema: schema(["task": taskArgument, "message": ("string", "The commit message."),
                                  "push": ("boolean", "Push the branch (default false)."),
                                  "pull_request": ("boolean", "Open a pull request, pushing first (default false).")],
                                 required: ["task"])),
        Tool(name: "stop_task", description: "Stops the task's agents (their tmux sessions end); the worktree and branch stay.",
             inputSchema: schema(["task": taskArgument], required: ["task"]), annotations: .init(destructiveHint: true)),
    ]

    /// Tells the client how a long call goes: done so far, of what total, and a line.
    typealias Progress = @Sendable (Double, Double?, String) async -> Void

    /// Runs a tool, and writes it down in the audit log; an engine error (or a refusal of
    /// the MCP settings) is a tool error with the command's message.
    func call(_ name: String, _ arguments: [String: Value], progress: Progress? = nil) async -> CallTool.Result {
        let start = ContinuousClock.now
        var entry = MCPAudit.Entry(at: Date(), tool: name, arguments: arguments.mapValues(Self.describe), ok: true,
                                   task: nil, error: nil, milliseconds: 0, client: client.get())
        defer {
            entry.milliseconds = Int((ContinuousClock.now - start) / .milliseconds(1))
            audit.record(entry)
        }
        do {
            let (value, task) = try await run(name, arguments, progress: progress)
            entry.task = task?.rawValue
            return .init(content: [.text(text: Self.text(value), annotations: nil, _meta: nil)], isError: false)
        } catch {
            let message = Failure.from(error).message
            entry.ok = false
            entry.error = message
            return .init(content: [.text(text: message, annotations: nil, _meta: nil)], isError: true)
        }
    }

    /// An argument as the audit log keeps it.
    static func describe(_ v: Value) -> String {
        switch v {
        case .string(let s): s
        case .int(let i): "\(i)"
        case .bool(let b): "\(b)"
        case .double(let d): "\(d)"
        case .null: "null"
        default: "\(v)"
        }
    }

    static func text(_ value: JSONValue) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: value.any, options: [.sortedKeys, .withoutEscapingSlashes]))
            ?? Data("null".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    private func string(_ arguments: [String: Value], _ key: String) throws -> String {
        guard let s = arguments[key]?.stringValue, !s.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw Failure.usage("\(key) is required (a string)")
        }
        return s
    }

    /// A task the client named, refused when the MCP settings do not allow its project.
    private func task(_ a: [String: Value]) async throws -> TaskRecord {
        let task = try await context.task(try string(a, "task"))
        let (project, host) = try await context.records.placeOf(task)
        try policy.check(project: project, on: host)
        return task
    }

    /// The tool's result, and the task it was about.
    private func run(_ name: String, _ a: [String: Value], progress: Progress?) async throws -> (JSONValue, TaskID?) {
        let engine = context.orchestrator
        switch name {
        case "list_hosts":
            let hosts = try await context.records.hosts().filter(policy.allows(host:))
            let projects = try await context.records.projects()
            return (.object(["hosts": .array(hosts.map { h in
                .object(["name": .string(h.name), "address": .string(h.address), "user": .string(h.user), "port": .int(h.port),
                         "projects": .array(projects.filter { $0.hostID == h.id && policy.allows(project: $0, on: h) }.map {
                             .object(["name": .string($0.name), "path": .string($0.path)])
                         })])
            })]), nil)
        case "board":
            let project = try await context.optional(a["project"]?.stringValue) { try await context.project($0) }
            var board = try await engine.board(projectID: project?.id, includeArchived: a["archived"]?.boolValue ?? false, live: true)
            board.rows.removeAll { row in
                guard let host = row.host, let project = row.project else { return true }
                return !policy.allows(project: project, on: host)
            }
            return (board.json, nil)
        case "start_task":
            try policy.checkNotAWorker(environment: context.environment)
            let project = try await context.project(try string(a, "project"))
            let host = try await context.records.host(project.hostID)
            try policy.check(project: project, on: host)
            let agent = try string(a, "agent")
            try policy.check(agent: agent)
            _ = try AgentProvider.named(agent)
            let title = try string(a, "title")
            let autoApprove = a["auto_approve"]?.boolValue ?? false
            try await checkRunning()
            if policy.ask {
                let now = Date()
                let request = MCPRequest(id: String(format: "%08x", UInt32.random(in: 0...UInt32.max)), at: now,
                                         expires: now.addingTimeInterval(Double(policy.askSeconds)), client: client.get(),
                                         host: host.name, project: project.name, title: title, agent: agent,
                                         prompt: a["prompt"]?.stringValue, autoApprove: autoApprove)
                asking.add(request.id)
                defer { asking.remove(request.id) }
                let answer = try await MCPRequests(storePath: context.storePath)
                    .ask(request, channels: context.config.notifications.channels, progress: progress)
                switch answer.outcome {
                case .yes: break
                case .no: throw Failure(.refused, "the user did not allow starting \(request.what) (request \(request.id))")
                case .expired:
                    throw Failure(.refused, "the user did not answer within \(policy.askSeconds) s, so \(request.what) was not started "
                        + "(request \(request.id); mcp.askSeconds in the settings file)")
                }
                // the others started meanwhile count too
                try await checkRunning()
            }
            let (_, task, _, _) = try await engine.project(project.id).createTask(
                title: title, providerID: agent, prompt: a["prompt"]?.stringValue, autoApprove: autoApprove,
                baseRef: a["base"]?.stringValue)
            // as the store has it: the agent has just started
            return (try await row(task.id, live: false), task.id)
        case "task_status":
            let task = try await task(a)
            return (try await row(task.id), task.id)
        case "wait_for_task":
            let task = try await task(a)
            let seconds = a["timeout_seconds"].map { $0.intValue ?? -1 } ?? 300
            guard (0...3600).contains(seconds) else { throw Failure.usage("timeout_seconds is a whole number of seconds, 0 to 3600") }
            return (try await wait(for: task, seconds: Double(seconds), progress: progress), task.id)
        case "task_result":
            let task = try await task(a)
            let lines = min(2000, max(1, a["lines"]?.intValue ?? 40))
            let handle = engine.task(task.id)
            let main = try await handle.main()
            guard case .object(var o) = try await row(task.id) else { return (.null, task.id) }
            o["lastTurn"] = Self.json(try await main.lastTurn(), lines: lines)
            let diff = try await handle.diff()
            o["files"] = .array(diff.files.map {
                .object(["path": .string($0.path), "added": $0.added.map(JSONValue.int) ?? .null,
                         "removed": $0.removed.map(JSONValue.int) ?? .null, "new": .bool($0.isUntracked)])
            })
            return (.object(o), task.id)
        case "task_output":
            let task = try await task(a)
            let lines = min(2000, max(1, a["lines"]?.intValue ?? 60))
            let screen = try await engine.task(task.id).main().screen(lines: lines)
            var shown = stripEscapes(screen).split(separator: "\n", omittingEmptySubsequences: false).map {
                String($0.reversed().drop { $0 == " " }.reversed())
            }
            while shown.last?.isEmpty == true { shown.removeLast() }
            return (.object(["task": .id(task.id), "output": .string(shown.suffix(lines).joined(separator: "\n"))]), task.id)
        case "task_diff":
            let task = try await task(a)
            let diff = try await engine.task(task.id).diff()
            return (.object(["task": .id(task.id), "baseRef": .string(task.worktree.baseRef), "files": .array(diff.files.map {
                .object(["path": .string($0.path), "added": $0.added.map(JSONValue.int) ?? .null,
                         "removed": $0.removed.map(JSONValue.int) ?? .null, "new": .bool($0.isUntracked)])
            })]), task.id)
        case "send_to_task":
            let task = try await task(a)
            guard let text = a["text"]?.stringValue else { throw Failure.usage("text is required (a string)") }
            try await engine.task(task.id).main().send(text, pressEnter: a["enter"]?.boolValue ?? true)
            return (.object(["task": .id(task.id), "sent": .bool(true)]), task.id)
        case "land_task":
            let task = try await task(a)
            let handle = engine.task(task.id)
            var done: [String: JSONValue] = ["task": .id(task.id)]
            let wantsPush = a["push"]?.boolValue ?? false, wantsPullRequest = a["pull_request"]?.boolValue ?? false
            // all committed already: the push or pull request goes on
            let c = try await Self.commit(handle, message: a["message"]?.stringValue, nothingIsFine: wantsPush || wantsPullRequest)
            done["commit"] = c.map { .object(["commit": .string($0.commit), "files": .int($0.files)]) } ?? .null
            if wantsPullRequest {
                let pr = try await handle.openPullRequest(title: task.title)
                done["pullRequest"] = .object(["outcome": .string(pr.outcome.rawValue), "url": .string(pr.url)])
                done["push"] = .object(["remote": .string(pr.push.remote), "branch": .string(pr.push.branch),
                                        "commits": .int(pr.push.commits)])
            } else if wantsPush {
                let p = try await handle.push()
                done["push"] = .object(["remote": .string(p.remote), "branch": .string(p.branch), "commits": .int(p.commits)])
            }
            return (.object(done), task.id)
        case "stop_task":
            let task = try await task(a)
            try await engine.task(task.id).stop()
            return (try await row(task.id), task.id)
        default:
            throw Failure.usage("no tool \(name); the tools are \(Self.list.map(\.name).joined(separator: ", "))")
        }
    }

    // MARK: resources

    /// Each allowed task's log (its agent's scrollback) and diff, as resources.
    func resources() async throws -> [Resource] {
        var out: [Resource] = []
        for task in try await context.records.tasks() where task.archivedAt == nil {
            guard let (project, host) = try? await context.records.placeOf(task), policy.allows(project: project, on: host) else {
                continue
            }
            out.append(Resource(name: "\(task.title): log", uri: "agent-sessions://tasks/\(task.id.rawValue)/log",
                                description: "The terminal of the agent of \(task.title) on \(host.name), as text", mimeType: "text/plain"))
            out.append(Resource(name: "\(task.title): diff", uri: "agent-sessions://tasks/\(task.id.rawValue)/diff",
                                description: "What \(task.title) changed against \(task.worktree.baseRef), as a patch",
                                mimeType: "text/x-diff"))
        }
        return out
    }

    /// A task's log or diff (`agent-sessions://tasks/ID/log` or `/diff`).
    func read(_ uri: String) async throws -> Resource.Content {
        let prefix = "agent-sessions://tasks/"
        let parts = uri.hasPrefix(prefix) ? uri.dropFirst(prefix.count).split(separator: "/").map(String.init) : []
        guard parts.count == 2, parts[1] == "log" || parts[1] == "diff" else {
            throw MCPError.invalidParams("no resource \(uri); a task's are agent-sessions://tasks/ID/log and /diff")
        }
        do {
            let task = try await self.task(["task": .string(parts[0])])
            let handle = context.orchestrator.task(task.id)
            if parts[1] == "log" {
                let text = try await handle.main().scrollback().text
                return .text(stripEscapes(text), uri: uri, mimeType: "text/plain")
            }
            var patch = ""
            for file in try await handle.diff().files {
                let p = try await handle.patch(file: file.path, maxBytes: 64 * 1024)
                patch += p.patch + (p.patch.hasSuffix("\n") || p.patch.isEmpty ? "" : "\n")
                if p.isTruncated { patch += "… (\(file.path): cut at 64 KB)\n" }
            }
            return .text(patch, uri: uri, mimeType: "text/x-diff")
        } catch let e as MCPError {
            throw e
        } catch {
            throw MCPError.invalidParams(Failure.from(error).message)
        }
    }

    /// Refuses a start while `maxRunning` tasks started through MCP have an agent running.
    private func checkRunning() async throws {
        let started = Set(try audit.startedTasks().map { TaskID($0) })
        guard !started.isEmpty || policy.maxRunning == 0 else { return }
        // the store first: a task it records as ended does not run; the hosts are asked only
        // when the store's count reaches the limit (an agent may have ended since)
        func running(live: Bool) async throws -> [AgentBoard.Row] {
            try await context.orchestrator.board(taskIDs: started, live: live).rows.filter {
                $0.agents.contains { $0.record.state == .running }
            }
        }
        guard try await running(live: false).count >= policy.maxRunning else { return }
        let running = try await running(live: true)
        guard running.count >= policy.maxRunning else { return }
        let names = running.map { "\(short($0.task.id)) \($0.task.title)" }.joined(separator: ", ")
        throw Failure(.refused, "\(running.count) of the tasks started through MCP run already, and the MCP settings allow "
            + "\(policy.maxRunning) at once (mcp.maxRunning)" + (names.isEmpty ? "" : ": \(names)"))
    }

    /// Commits what is not committed; nil when everything was, and that is fine.
    private static func commit(_ handle: TaskHandle, message: String?, nothingIsFine: Bool)
        async throws(AgentError) -> WorktreeCommit?
    {
        do {
            return try await handle.commit(message: message)
        } catch {
            if nothingIsFine && error.code == .nothingToLand { return nil }
            throw error
        }
    }

    /// The agent's state in one word; `exited` once its session is gone.
    private static func activity(of chat: ChatHandle) async throws(AgentError) -> String {
        do {
            return try await chat.status().activity.name
        } catch {
            if error.code == .sessionNotRunning { return "exited" }
            throw error
        }
    }

    /// The last turn as the tools give it: how it ended, when, the screen's last `lines` lines.
    static func json(_ turn: AgentLastTurn?, lines: Int) -> JSONValue {
        guard let turn else { return .null }
        let name = turn.activity.name
        return .object(["state": .string(name), "at": .date(turn.at),
                        "screen": .string(turn.screen.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines)
                            .joined(separator: "\n"))])
    }

    /// Waits until the task's main agent has settled (waiting, done, idle, exited, …) or
    /// `seconds` passed: the host's events are followed, and the state asked again at each
    /// event of the agent's (and every 5 s, should the events fail); `progress` is told at
    /// each change and every 10 s.
    private func wait(for task: TaskRecord, seconds: Double, progress: Progress?) async throws -> JSONValue {
        let engine = context.orchestrator
        let main = try await engine.task(task.id).main()
        let (_, host) = try await context.records.placeOf(task)
        let events = Counter()
        let follower = Task {
            for await update in engine.followStatus(hosts: [host]) {
                switch update {
                case .status(_, _, let c) where c?.id == main.id: events.add()
                case .hostConnected: events.add()
                default: break
                }
            }
        }
        defer { follower.cancel() }
        let start = Date()
        var asked: (count: Int, at: Date)?
        var told: (activity: String, at: Date)?
        var activity = ""
        while true {
            let count = events.value
            if asked == nil || asked!.count != count || Date().timeIntervalSince(asked!.at) >= 5 {
                asked = (count, Date())
                activity = try await Self.activity(of: main)
            }
            let settled = ["waiting", "done", "idle", "exited", "stopped", "lost"].contains(activity)
            if settled || Date().timeIntervalSince(start) >= seconds {
                guard case .object(var o) = try await row(task.id) else { return .null }
                o["timedOut"] = .bool(!settled)
                if settled { o["lastTurn"] = Self.json(try? await main.lastTurn(), lines: 40) }
                return .object(o)
            }
            // told at each change of state, and every 10 s meanwhile
            if let progress, told == nil || told!.activity != activity || Date().timeIntervalSince(told!.at) >= 10 {
                let waited = Date().timeIntervalSince(start)
                await progress(waited.rounded(), seconds, "\(task.title): \(activity) after \(Int(waited)) s")
                told = (activity, Date())
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var n = 0
        func add() { lock.withLock { n += 1 } }
        var value: Int { lock.withLock { n } }
    }

    /// The task's row of the board, with every host asked (or, not `live`, as the store has it).
    private func row(_ id: TaskID, live: Bool = true) async throws -> JSONValue {
        let board = try await context.orchestrator.board(taskIDs: [id], includeArchived: true, live: live)
        guard let row = board.rows.first else { throw Failure(.notFound, "no task \(id.rawValue)") }
        return row.json
    }
}
