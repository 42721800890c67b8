import AgentSessions
import ArgumentParser
import CBuildInfo
import Foundation
import MCP
import TerminalSupport

/// `agent-sessions mcp`: the engine's door as Model Context Protocol tools over stdio, so
/// that an agent can start agents on the user's hosts, follow them and collect their work;
/// `mcp log`, what its clients did.
struct MCPCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mcp",
        abstract: "An MCP server on stdin and stdout: tools for agents to start, follow and stop agents on your hosts.",
        subcommands: [Serve.self, Log.self, Install.self, Requests.self, Allow.self, Deny.self], defaultSubcommand: Serve.self)

    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "serve",
            abstract: "Serve MCP on stdin and stdout (what `agent-sessions mcp` alone does).",
            discussion: """
                Add it to an agent's MCP servers as the command `agent-sessions mcp`. Its tools: list_hosts, board, \
                start_task, task_status, wait_for_task, task_output, task_diff, send_to_task, land_task, stop_task. A task is \
                named as on the command line (an id or its start, a title, a worktree name, WORK/LABEL). Results are \
                JSON, as --json prints them; a refusal or failure is a tool error with the command's one-line message. \
                The settings file's "mcp" says which hosts, projects and agents a client may use and how many tasks \
                it may have running at once; every call is written down (agent-sessions mcp log). Nothing but the \
                protocol is written to stdout.
                """)
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            // a client gone is a failed write (the server ends), not a signal
            signal(SIGPIPE, SIG_IGN)
            try await Context.with(global, agentsStartedHere: [MCPPolicy.workerVariable: "1"]) { context in
                let version = String(cString: sshkit_build_version_line())
                let server = Server(name: "agent-sessions", version: version,
                                    instructions: "Coding agents in git worktrees on the user's hosts, inside tmux: start a task, "
                                        + "wait for it to need input or be done, read its output and diff, send it a line, stop it.",
                                    capabilities: .init(resources: .init(subscribe: false, listChanged: false),
                                                        tools: .init(listChanged: false)))
                let tools = MCPTools(context: context)
                await server.withMethodHandler(ListTools.self) { _ in .init(tools: MCPTools.list) }
                await server.withMethodHandler(CallTool.self) { params in
                    // the client asked to be told how a long call goes: a progress notification each time
                    let progress: MCPTools.Progress? = params._meta?.progressToken.map { token in
                        { done, total, message in
                            try? await server.notify(ProgressNotification.message(
                                .init(progressToken: token, progress: done, total: total, message: message)))
                        }
                    }
                    return await tools.call(params.name, params.arguments ?? [:], progress: progress)
                }
                await server.withMethodHandler(ListResources.self) { _ in
                    .init(resources: try await tools.resources(), nextCursor: nil)
                }
                await server.withMethodHandler(ReadResource.self) { params in
                    .init(contents: [try await tools.read(params.uri)])
                }
                // the name set by the first initialize too: the handler below replaces the
                // SDK's only once the server runs, and a client may have begun by then
                try await server.start(transport: MCPStdio()) { client, _ in tools.client.set(client.name) }
                // every initialize answered, not only the first: a client may begin a new
                // session on a server it kept running (fastmcp, which Kimi uses, does)
                let capabilities = await server.capabilities
                await server.withMethodHandler(Initialize.self) { params in
                    tools.client.set(params.clientInfo.name)
                    let version = Version.supported.contains(params.protocolVersion) ? params.protocolVersion : Version.latest
                    return Initialize.Result(protocolVersion: version, capabilities: capabilities,
                                             serverInfo: .init(name: server.name, version: server.version),
                                             instructions: server.instructions)
                }
                await server.waitUntilCompleted()
                // the client is gone: what it asked the user for is taken back
                let requests = MCPRequests(storePath: context.storePath)
                for id in tools.asking.all { _ = try? requests.answer(id, .no, by: "client gone") }
            }
        }
    }

    struct Install: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "install",
            abstract: "Adds this MCP server to an agent's own MCP settings, on this machine or on a host (or takes it out).",
            discussion: """
                Runs the agent's own command for it, so the agent's settings are written as the agent writes them: \
                claude mcp add --scope user, codex mcp add, gemini mcp add --scope user, kimi mcp add, vibe mcp add. \
                The server is added as agent-sessions; one added before is replaced. Here its command is this \
                executable by its absolute path; with --host the agent's command runs on that host (found on its \
                search path, as agents are started) and the server's command is agent-sessions on the host's PATH, \
                for an agent-sessions installed there. --command names another.
                """)
        @OptionGroup var global: GlobalOptions
        @Option(name: .customLong("for"), help: "The agent: claude, codex, gemini, kimi or vibe.") var agent: String
        @Option(help: "On this host (its name in agent-sessions hosts), not this machine.") var host: String?
        @Flag(help: "Take the server out of the agent's settings.") var remove = false
        @Option(help: "The server's command (default: this executable; with --host, agent-sessions).") var command: String?
        @Option(help: "The agent's executable (default: found on PATH).") var binary: String?

        /// The agent's commands that add and remove a stdio server `name` running `server mcp`.
        static func commands(for agent: String, server: String, name: String = "agent-sessions")
            -> (add: [String], remove: [String])?
        {
            switch agent {
            case "claude": (["mcp", "add", "--scope", "user", name, "--", server, "mcp"], ["mcp", "remove", "--scope", "user", name])
            case "codex": (["mcp", "add", name, "--", server, "mcp"], ["mcp", "remove", name])
            case "gemini": (["mcp", "add", "--scope", "user", name, server, "mcp"], ["mcp", "remove", "--scope", "user", name])
            case "kimi": (["mcp", "add", "--transport", "stdio", name, "--", server, "mcp"], ["mcp", "remove", name])
            case "vibe": (["mcp", "add", name, "--transport", "stdio", "--command", server, "--arg", "mcp"], ["mcp", "remove", name])
            default: nil
            }
        }

        func run() async throws {
            if let host {
                try await Context.with(global) { context in
                    try await onHost(context, host)
                }
                return
            }
            try await running {
                let server = command ?? Service.binaryPath()
                guard let commands = Self.commands(for: agent, server: server) else {
                    throw Failure.usage("--for is claude, codex, gemini, kimi or vibe, not \(agent)")
                }
                let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
                let exe = binary ?? path.split(separator: ":").map { "\($0)/\(agent)" }
                    .first { FileManager.default.isExecutableFile(atPath: $0) }
                guard let exe else {
                    throw Failure(.failed, "\(agent) is not on PATH here; install it, or name it with --binary")
                }
                try Self.apply(commands, remove: remove, where: "") { try Self.execute(exe, $0) }
            }
        }

        private func onHost(_ context: Context, _ name: String) async throws {
            let server = command ?? "agent-sessions"
            guard let commands = Self.commands(for: agent, server: server) else {
                throw Failure.usage("--for is claude, codex, gemini, kimi or vibe, not \(agent)")
            }
            let handle = context.orchestrator.host(try await context.host(named: name).id)
            let exe = binary ?? agent
            var outcomes: [(Int32, String)] = []
            for args in [commands.remove, commands.add] {
                let r = try await handle.runAgentCommand(exe, arguments: args)
                let status: Int32 = if case .exited(let code) = r.status { code } else { -1 }
                if status == 127 && r.output.contains("not on the host's search path") {
                    throw Failure(.failed, "\(exe) is not on \(name)'s search path; install it there, or name it with --binary")
                }
                outcomes.append((status, Failure.oneLine(stripEscapes(r.output))))
                if remove { break }
            }
            var i = 0
            try Self.apply(commands, remove: remove, where: " on \(name)") { _ in
                defer { i += 1 }
                return outcomes[i]
            }
        }

        /// Takes the server out first, so that adding replaces one added before (taking out
        /// none fails: that is fine), then adds it; prints what was done.
        static func apply(_ commands: (add: [String], remove: [String]), remove: Bool, where place: String,
                          _ execute: ([String]) throws -> (status: Int32, output: String)) throws {
            let removed = try execute(commands.remove)
            if remove {
                guard removed.status == 0 else {
                    throw Failure(.failed, "\(commands.remove.joined(separator: " ")) failed\(place): \(removed.output)")
                }
                print("took agent-sessions out of the agent's MCP servers\(place)")
                return
            }
            let added = try execute(commands.add)
            guard added.status == 0 else {
                throw Failure(.failed, "\(commands.add.joined(separator: " ")) failed\(place): \(added.output)")
            }
            print("added agent-sessions to the agent's MCP servers\(place): \(commands.add.joined(separator: " "))")
        }

        /// Runs `exe args`, its output (standard output and error together, one line) and status.
        static func execute(_ exe: String, _ args: [String]) throws -> (status: Int32, output: String) {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: exe)
            p.arguments = args
            let out = Pipe()
            p.standardOutput = out
            p.standardError = out
            p.standardInput = FileHandle.nullDevice
            do {
                try p.run()
            } catch {
                throw Failure(.failed, "cannot run \(exe): \(error.localizedDescription)")
            }
            let watchdog = DispatchWorkItem { if p.isRunning { p.terminate() } }
            DispatchQueue.global().asyncAfter(deadline: .now() + 120, execute: watchdog)
            let data = out.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            watchdog.cancel()
            return (p.terminationStatus, Failure.oneLine(stripEscapes(String(decoding: data, as: UTF8.self))))
        }
    }

    struct Requests: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "requests",
            abstract: "The starts MCP clients asked for that wait for your yes (the settings' mcp.ask).",
            discussion: "Answer one with agent-sessions mcp allow ID or deny ID (or Y and N in the cockpit). --all lists the answered ones too.")
        @OptionGroup var global: GlobalOptions
        @Flag(help: "The answered and expired ones too.") var all = false
        @Flag(help: "JSON, for scripts.") var json = false

        func run() async throws {
            try await running {
                let requests = MCPRequests(storePath: Context.storePath(global))
                let now = Date()
                let shown = requests.all().filter { all || ($0.answer == nil && $0.request.expires > now) }
                if json {
                    printJSON(.array(shown.map { r, a in
                        .object(["id": .string(r.id), "at": .date(r.at), "expires": .date(r.expires), "client": .string(r.client),
                                 "host": .string(r.host), "project": .string(r.project), "title": .string(r.title),
                                 "agent": .string(r.agent), "prompt": r.prompt.map(JSONValue.string) ?? .null,
                                 "answer": .string(a?.outcome.rawValue ?? (r.expires > now ? "waiting" : "expired"))])
                    }))
                    return
                }
                if shown.isEmpty {
                    note(all ? "no MCP requests" : "no MCP request waits for an answer")
                    return
                }
                var table = Table(["ID", "ASKED", "BY", "START", "ANSWER"])
                for (r, a) in shown {
                    let answer = a.map { "\($0.outcome.rawValue) (\($0.by))" }
                        ?? (r.expires > now ? "waiting, \(Int(r.expires.timeIntervalSince(now))) s left" : "expired")
                    table.add([r.id, iso8601(r.at), r.client, TerminalWidth.truncate(r.what, to: 60), answer])
                }
                table.print()
            }
        }
    }

    struct Allow: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "allow", abstract: "Lets a start an MCP client asked for go ahead.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The request's id (or its start), as mcp requests lists it.") var id: String

        func run() async throws {
            try await running { try MCPCommand.answer(id, .yes, global: global) }
        }
    }

    struct Deny: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "deny", abstract: "Refuses a start an MCP client asked for.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The request's id (or its start), as mcp requests lists it.") var id: String

        func run() async throws {
            try await running { try MCPCommand.answer(id, .no, global: global) }
        }
    }

    /// Answers a request; an answer given before (or its time being up) is a refusal.
    static func answer(_ id: String, _ outcome: MCPAnswer.Outcome, global: GlobalOptions) throws {
        let (request, answer, made) = try MCPRequests(storePath: Context.storePath(global)).answer(id, outcome, by: "command")
        guard made else {
            throw Failure(.refused, "the request \(request.id) (\(request.what)) has its answer already: \(answer.outcome.rawValue)"
                + " (\(answer.by), \(iso8601(answer.at)))")
        }
        print(outcome == .yes ? "allowed: \(request.what) starts now" : "denied: \(request.what) is not started")
    }

    struct Log: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "log",
            abstract: "Every call MCP clients made: when, the tool, its arguments, the task, and how it went.")
        @OptionGroup var global: GlobalOptions
        @Option(name: [.customShort("n"), .customLong("lines")], help: "Only the last this many calls.") var lines: Int?
        @Flag(help: "JSON, for scripts: one object per call.") var json = false

        func run() async throws {
            try await running {
                let path = Context.storePath(global)
                var entries = try MCPAudit(storePath: path).entries()
                if let lines { entries = Array(entries.suffix(max(0, lines))) }
                if json {
                    printJSON(.array(entries.map { e in
                        .object(["at": .date(e.at), "tool": .string(e.tool), "ok": .bool(e.ok), "milliseconds": .int(e.milliseconds),
                                 "client": e.client.map(JSONValue.string) ?? .null,
                                 "task": e.task.map(JSONValue.string) ?? .null, "error": e.error.map(JSONValue.string) ?? .null,
                                 "arguments": .object(e.arguments.mapValues(JSONValue.string))])
                    }))
                    return
                }
                if entries.isEmpty {
                    note("no MCP calls yet")
                    return
                }
                var table = Table(["WHEN", "TOOL", "TASK", "ARGUMENTS", "OUTCOME"])
                for e in entries {
                    let arguments = e.arguments.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
                    table.add([iso8601(e.at), e.tool, e.task.map { String($0.prefix(8)) } ?? "-",
                               TerminalWidth.truncate(arguments.replacingOccurrences(of: "\n", with: " "), to: 60),
                               e.ok ? "ok (\(e.milliseconds) ms)" : "refused or failed: " + (e.error ?? "")])
                }
                table.print()
            }
        }
    }
}
