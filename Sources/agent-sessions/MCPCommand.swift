import AgentSessions
import ArgumentParser
import CBuildInfo
import Foundation
import MCP

/// `agent-sessions mcp`: the engine's door as Model Context Protocol tools over stdio, so
/// that an agent can start agents on the user's hosts, follow them and collect their work.
struct MCPServe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mcp",
        abstract: "An MCP server on stdin and stdout: tools for agents to start, follow and stop agents on your hosts.",
        discussion: """
            Add it to an agent's MCP servers as the command `agent-sessions mcp`. Its tools: list_hosts, board, \
            start_task, task_status, wait_for_task, task_output, task_diff, send_to_task, stop_task. A task is \
            named as on the command line (an id or its start, a title, a worktree name, WORK/LABEL). Results are \
            JSON, as --json prints them; a refusal or failure is a tool error with the command's one-line message. \
            Nothing but the protocol is written to stdout.
            """)
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await Context.with(global) { context in
            let version = String(cString: sshkit_build_version_line())
            let server = Server(name: "agent-sessions", version: version,
                                instructions: "Coding agents in git worktrees on the user's hosts, inside tmux: start a task, "
                                    + "wait for it to need input or be done, read its output and diff, send it a line, stop it.",
                                capabilities: .init(tools: .init(listChanged: false)))
            let tools = MCPTools(context: context)
            await server.withMethodHandler(ListTools.self) { _ in .init(tools: MCPTools.list) }
            await server.withMethodHandler(CallTool.self) { params in await tools.call(params.name, params.arguments ?? [:]) }
            try await server.start(transport: StdioTransport())
            await server.waitUntilCompleted()
        }
    }
}

/// The tools: each a call on the engine's door, its result as JSON text.
struct MCPTools: Sendable {
    let context: Context

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
                                  "base": ("string", "The branch or commit to start from (default: the checkout's branch).")],
                                 required: ["project", "title", "agent"])),
        Tool(name: "task_status", description: "A task's state now: each agent's state, where it came from (hook, screen, process) and the question it waits on.",
             inputSchema: schema(["task": taskArgument], required: ["task"]), annotations: .init(readOnlyHint: true)),
        Tool(name: "wait_for_task", description: "Waits until the task's agent needs input, is done with its turn, is idle or has exited, or the time is up (then the state as it is, with timedOut). The agent goes on running either way.",
             inputSchema: schema(["task": taskArgument,
                                  "timeout_seconds": ("integer", "At most this long (default 300, at most 3600).")],
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
        Tool(name: "stop_task", description: "Stops the task's agents (their tmux sessions end); the worktree and branch stay.",
             inputSchema: schema(["task": taskArgument], required: ["task"]), annotations: .init(destructiveHint: true)),
    ]

    /// Runs a tool; an engine error is a tool error with the command's message.
    func call(_ name: String, _ arguments: [String: Value]) async -> CallTool.Result {
        do {
            let value = try await run(name, arguments)
            return .init(content: [.text(text: Self.text(value), annotations: nil, _meta: nil)], isError: false)
        } catch {
            return .init(content: [.text(text: Failure.from(error).message, annotations: nil, _meta: nil)], isError: true)
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

    private func run(_ name: String, _ a: [String: Value]) async throws -> JSONValue {
        let engine = context.orchestrator
        switch name {
        case "list_hosts":
            let hosts = try await context.records.hosts()
            let projects = try await context.records.projects()
            return .object(["hosts": .array(hosts.map { h in
                .object(["name": .string(h.name), "address": .string(h.address), "user": .string(h.user), "port": .int(h.port),
                         "projects": .array(projects.filter { $0.hostID == h.id }.map {
                             .object(["name": .string($0.name), "path": .string($0.path)])
                         })])
            })])
        case "board":
            let project = try await context.optional(a["project"]?.stringValue) { try await context.project($0) }
            return try await engine.board(projectID: project?.id, includeArchived: a["archived"]?.boolValue ?? false, live: true).json
        case "start_task":
            let project = try await context.project(try string(a, "project"))
            let agent = try string(a, "agent")
            let (_, task, _, _) = try await engine.project(project.id).createTask(
                title: try string(a, "title"), providerID: agent, prompt: a["prompt"]?.stringValue, baseRef: a["base"]?.stringValue)
            return try await row(task.id)
        case "task_status":
            return try await row(try await context.task(try string(a, "task")).id)
        case "wait_for_task":
            let task = try await context.task(try string(a, "task"))
            let limit = Double(min(3600, max(1, a["timeout_seconds"]?.intValue ?? 300)))
            let main = try await engine.task(task.id).main()
            let start = Date()
            while true {
                let activity = try await Self.activity(of: main)
                let settled = ["waiting", "done", "idle", "exited", "stopped", "lost"].contains(activity)
                if settled || Date().timeIntervalSince(start) >= limit {
                    guard case .object(var o) = try await row(task.id) else { return .null }
                    o["timedOut"] = .bool(!settled)
                    return .object(o)
                }
                try await Task.sleep(for: .seconds(1))
            }
        case "task_output":
            let task = try await context.task(try string(a, "task"))
            let lines = min(2000, max(1, a["lines"]?.intValue ?? 60))
            let screen = try await engine.task(task.id).main().screen(lines: lines)
            var shown = stripEscapes(screen).split(separator: "\n", omittingEmptySubsequences: false).map {
                String($0.reversed().drop { $0 == " " }.reversed())
            }
            while shown.last?.isEmpty == true { shown.removeLast() }
            return .object(["task": .id(task.id), "output": .string(shown.suffix(lines).joined(separator: "\n"))])
        case "task_diff":
            let task = try await context.task(try string(a, "task"))
            let diff = try await engine.task(task.id).diff()
            return .object(["task": .id(task.id), "baseRef": .string(task.worktree.baseRef), "files": .array(diff.files.map {
                .object(["path": .string($0.path), "added": $0.added.map(JSONValue.int) ?? .null,
                         "removed": $0.removed.map(JSONValue.int) ?? .null, "new": .bool($0.isUntracked)])
            })])
        case "send_to_task":
            let task = try await context.task(try string(a, "task"))
            guard let text = a["text"]?.stringValue else { throw Failure.usage("text is required (a string)") }
            try await engine.task(task.id).main().send(text, pressEnter: a["enter"]?.boolValue ?? true)
            return .object(["task": .id(task.id), "sent": .bool(true)])
        case "stop_task":
            let task = try await context.task(try string(a, "task"))
            try await engine.task(task.id).stop()
            return try await row(task.id)
        default:
            throw Failure.usage("no tool \(name); the tools are \(Self.list.map(\.name).joined(separator: ", "))")
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

    /// The task's row of the board, with every host asked.
    private func row(_ id: TaskID) async throws -> JSONValue {
        let board = try await context.orchestrator.board(taskIDs: [id], includeArchived: true, live: true)
        guard let row = board.rows.first else { throw Failure(.notFound, "no task \(id.rawValue)") }
        return row.json
    }
}
