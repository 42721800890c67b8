import AgentSessions
import ArgumentParser
import Foundation
import ServerTransport

struct Projects: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "projects",
        abstract: "Add, list, set up and remove projects: git checkouts on a host.",
        subcommands: [Add.self, List.self, Set.self, Remove.self])

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "set",
            abstract: "Set how a project's tasks start and end: the base, a setup and a teardown command, fetching the base.",
            discussion: """
                The setup command runs in each new task's worktree before its agent, inside the agent's tmux \
                session (its output on the agent's screen; attach to watch it), for at most --setup-timeout \
                seconds; a failure is shown there and in tasks show, and the agent starts anyway. The teardown \
                command runs in the worktree when the task is archived or deleted. Both see PORT, the task's \
                own port on the host. An empty value removes a setting.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The project (name, or host/name).") var project: String
        @Option(help: "The ref new tasks start from.") var base: String?
        @Option(help: ArgumentHelp("A shell command run in each new task's worktree before its agent.", valueName: "command"))
        var setup: String?
        @Option(help: ArgumentHelp("A shell command run in a task's worktree before it is archived or deleted.", valueName: "command"))
        var teardown: String?
        @Option(help: ArgumentHelp("Fetch the base from the project's remote before each new worktree (default: on).",
                                   valueName: "on|off"))
        var fetchBase: String?

        func run() async throws {
            try await Context.with(global) { context in
                var p = try await context.project(project)
                if base == nil && setup == nil && teardown == nil && fetchBase == nil {
                    print("base        \(p.defaultBaseRef ?? "(the checkout's current branch)")")
                    print("setup       \(p.setupCommand ?? "(none)")")
                    print("teardown    \(p.teardownCommand ?? "(none)")")
                    print("fetch base  \(p.fetchesBase == false ? "off" : "on")")
                    return
                }
                var fetches: Bool?
                if let fetchBase {
                    switch fetchBase {
                    case "on": fetches = true
                    case "off": fetches = false
                    default: throw Failure.usage("--fetch-base takes on or off, not \(fetchBase)")
                    }
                }
                let (base, setup, teardown) = (base, setup, teardown)
                p = try await context.orchestrator.project(p.id).update { p in
                    if let base { p.defaultBaseRef = base.isEmpty ? nil : base }
                    if let setup { p.setupCommand = setup.isEmpty ? nil : setup }
                    if let teardown { p.teardownCommand = teardown.isEmpty ? nil : teardown }
                    if let fetches { p.fetchesBase = fetches }
                }
                print("updated project \(p.name)")
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "add",
            abstract: "Add a git checkout on a host as a project.",
            discussion: "The path is checked on the host: it must be inside a git checkout (its top level is recorded).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The host's name.") var host: String
        @Argument(help: "The checkout's path on the host (absolute, or ~/...).") var path: String
        @Option(help: "The project's name (default: the checkout's directory name).") var name: String?
        @Option(help: "The ref new tasks start from (default: the checkout's current branch).") var base: String?

        func run() async throws {
            try await Context.with(global) { context in
                let h = try await context.host(named: host)
                let record = try await context.orchestrator.host(h.id).addProject(path: path, name: name, base: base)
                let (projectName, top) = (record.name, record.path)
                print("added project \(projectName): \(h.name):\(top)")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the projects.")
        @OptionGroup var global: GlobalOptions
        @Option(help: "Only this host's projects.") var host: String?
        @Flag(help: "JSON, for scripts.") var json = false

        func run() async throws {
            try await Context.with(global) { context in
                let hosts = try await context.records.hosts()
                let hostID = try await context.optional(host) { try await context.host(named: $0).id }
                let projects = try await context.records.projects(on: hostID)
                var counts: [ProjectID: Int] = [:]
                for p in projects { counts[p.id] = try await context.records.tasks(in: p.id).filter { $0.archivedAt == nil }.count }
                let hostName = { (id: HostID) in hosts.first { $0.id == id }?.name ?? "?" }
                if json {
                    printJSON(.array(projects.map { p in
                        .object(["name": .string(p.name), "host": .string(hostName(p.hostID)), "path": .string(p.path),
                                 "base": p.defaultBaseRef.map(JSONValue.string) ?? .null, "tasks": .int(counts[p.id] ?? 0)])
                    }))
                    return
                }
                if projects.isEmpty {
                    print("no projects yet; add one: agent-sessions projects add <host> <path of a git checkout>")
                    return
                }
                var table = Table(["NAME", "HOST", "PATH", "BASE", "TASKS"])
                for p in projects {
                    table.add([p.name, hostName(p.hostID), p.path, p.defaultBaseRef ?? "(current branch)", "\(counts[p.id] ?? 0)"])
                }
                table.print()
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "remove",
            abstract: "Remove a project from the store (the checkout stays on the host).",
            discussion: "A project with tasks is refused unless --force.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The project (name, or host/name).") var project: String
        @Flag(help: "Remove it even though it has tasks (their agents and worktrees stay on the host).") var force = false

        func run() async throws {
            try await Context.with(global) { context in
                let p = try await context.project(project)
                try await context.orchestrator.project(p.id).remove(force: force)
                print("removed project \(p.name)")
            }
        }
    }
}
