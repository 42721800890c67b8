import AgentSessions
import ArgumentParser
import Foundation

/// The prompt of a new agent: an argument, a file, or standard input (`--prompt-file -`).
struct PromptOptions: ParsableArguments {
    @Option(help: "The agent's first prompt.") var prompt: String?
    @Option(help: ArgumentHelp("Read the first prompt from a file ('-': standard input).", valueName: "path"))
    var promptFile: String?
    @Flag(help: "Start the agent with its auto-approve flag (it acts without asking).") var autoApprove = false

    func text() throws -> String? {
        if prompt != nil && promptFile != nil { throw Failure.usage("give --prompt or --prompt-file, not both") }
        guard let promptFile else { return prompt }
        let data: Data
        if promptFile == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            // the reason in the words of the system (no such file, permission denied, a directory)
            let fd = open(promptFile, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                throw Failure.usage("cannot read the prompt file \(promptFile): \(String(cString: strerror(errno)))")
            }
            let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
            var info = stat()
            if fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR {
                throw Failure.usage("cannot read the prompt file \(promptFile): \(String(cString: strerror(EISDIR)))")
            }
            do {
                data = try handle.readToEnd() ?? Data()
            } catch {
                throw Failure.usage("cannot read the prompt file \(promptFile): \(error.localizedDescription)")
            }
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw Failure.usage("the prompt file \(promptFile) is not UTF-8 text")
        }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return trimmed.isEmpty ? nil : trimmed
    }
}

struct Tasks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "tasks",
        abstract: "Start, list, show, stop, resume, archive and delete tasks; land their work (commit, push, pr, merge).",
        subcommands: [New.self, List.self, Show.self, Stop.self, Resume.self, Archive.self, Delete.self,
                      Commit.self, Push.self, PR.self, Merge.self, Fetch.self, ContinueAfterLimit.self,
                      Attempts.Compare.self, Attempts.Pick.self])

    struct New: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "new",
            abstract: "Start a task: a new worktree and branch of the project, with an agent working in it.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The project (name, or host/name).") var project: String
        @Argument(help: "What the task is; names its branch.") var title: String
        @Option(help: "The agent (claude, codex, gemini, ...; see agent-sessions agents <host>).") var agent: String?
        @Option(help: ArgumentHelp("Several attempts at the task, each in its own worktree from the same base: agents and counts.",
                                   valueName: "claude:2,codex:1"))
        var agents: String?
        @Option(help: ArgumentHelp("With --agents: spread the attempts over these hosts (default: the project's).", valueName: "a,b"))
        var hosts: String?
        @Flag(help: "With --hosts: clone the project's origin on a host that has no checkout of it.") var clone = false
        @Option(help: "The ref to branch from (default: the project's base, else its current branch).") var base: String?
        @Option(help: ArgumentHelp("Send this local branch to the host first and branch from it.", valueName: "branch"))
        var fromLocal: String?
        @Option(help: ArgumentHelp("The local repository of --from-local (default: the current directory).", valueName: "dir"))
        var fromDir: String?
        @Flag(help: "With --from-local: send it even to a repository of another project, or over a branch that went elsewhere.")
        var force = false
        @OptionGroup var prompt: PromptOptions

        func run() async throws {
            try await Context.with(global) { context in
                let text = try prompt.text()
                guard !title.trimmingCharacters(in: .whitespaces).isEmpty else { throw Failure.usage("the title is empty") }
                if fromLocal != nil && base != nil { throw Failure.usage("give --base or --from-local, not both") }
                if fromLocal == nil && (fromDir != nil || force) { throw Failure.usage("--from-dir and --force go with --from-local") }
                if (agent == nil) == (agents == nil) { throw Failure.usage("give --agent, or --agents for several attempts") }
                if agents == nil && (hosts != nil || clone) { throw Failure.usage("--hosts and --clone go with --agents") }
                if hosts == nil && clone { throw Failure.usage("--clone goes with --hosts") }
                let counts = try agents.map { text throws(AgentError) in try AttemptAgents.parse(text) }
                let p = try await context.project(project)
                let h = try await context.host(of: p)
                var hostIDs: [HostID] = []
                for name in (hosts ?? "").split(separator: ",", omittingEmptySubsequences: false) where hosts != nil {
                    let trimmed = name.trimmingCharacters(in: .whitespaces)
                    guard !trimmed.isEmpty else { throw Failure.usage("--hosts '\(hosts!)' names an empty host") }
                    hostIDs.append(try await context.host(named: trimmed).id)
                }
                var baseRef = base
                if let fromLocal {
                    let commit = try await context.orchestrator.project(p.id).sendLocalBranch(
                        fromLocal, from: fromDir ?? FileManager.default.currentDirectoryPath, force: force)
                    print("sent \(fromLocal) at \(commit.prefix(10)) to \(h.name)")
                    baseRef = fromLocal
                }
                if let counts {
                    let launch = try await context.orchestrator.project(p.id).createAttempts(
                        title: title, agents: counts, hostIDs: hostIDs, prompt: text,
                        autoApprove: prompt.autoApprove, baseRef: baseRef, cloneWhereMissing: clone)
                    try await Attempts.report(launch, title: title, context: context)
                    return
                }
                guard let agent else { return }
                let (_, task, _, _) = try await context.orchestrator.project(p.id).createTask(
                    title: title, providerID: agent, prompt: text, autoApprove: prompt.autoApprove, baseRef: baseRef)
                print("started task \(short(task.id)) \"\(task.title)\" on \(h.name)")
                print("  branch \(task.worktree.branch) from \(task.worktree.baseRef), worktree \(task.worktree.path)")
                for note in task.worktree.notes { print("  \(note)") }
                if let port = task.port { print("  PORT=\(port) is the task's own port on \(h.name) (agent-sessions open \(short(task.id)))") }
                if p.setupCommand != nil { print("  the project's setup runs first, on the agent's screen") }
                print("  \(agent) is running; watch it: agent-sessions attach \(short(task.id))")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list",
            abstract: "List tasks as the store records them (agent-sessions status asks the hosts).")
        @OptionGroup var global: GlobalOptions
        @Option(help: "Only this project's tasks.") var project: String?
        @Flag(help: "Archived tasks too.") var all = false
        @Flag(help: "JSON, for scripts.") var json = false

        func run() async throws {
            try await Context.with(global) { context in
                let projectID = try await context.optional(project) { try await context.project($0).id }
                let board = try await context.orchestrator.board(projectID: projectID, includeArchived: all, live: false)
                if json {
                    printJSON(board.json)
                } else if board.rows.isEmpty {
                    print(all ? "no tasks" : "no tasks (--all shows archived ones)")
                } else {
                    for line in board.table(live: false).lines() { print(line) }
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "Show a task: its worktree, its agents and their state now.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The task (id, title or worktree name).") var task: String
        @Flag(help: "JSON, for scripts.") var json = false

        func run() async throws {
            try await Context.with(global) { context in
                let t = try await context.task(task)
                let board = try await context.orchestrator.board(taskIDs: [t.id], includeArchived: true, live: true)
                guard let row = board.rows.first else { throw Failure.notFound("no task \(task)") }
                if json {
                    printJSON(row.json)
                    return
                }
                print("task      \(t.id)")
                print("title     \(t.title)")
                print("project   \(row.projectName) on \(row.hostName)")
                print("worktree  \(t.worktree.path)")
                print("branch    \(t.worktree.branch) from \(t.worktree.baseRef) (\(t.worktree.baseCommit.prefix(10)))")
                print("created   \(iso8601(t.createdAt))" + (t.archivedAt.map { ", archived \(iso8601($0))" } ?? ""))
                if let port = t.port { print("port      \(port) (PORT on the host; agent-sessions open \(short(t.id)) forwards it here)") }
                if row.hostErrorText == nil, let main = row.agents.first,
                   let setup = try? await context.orchestrator.chat(main.record.id).setupOutcome() {
                    print("setup     \(setup)")
                }
                if let changed = row.filesChanged { print("changes   \(Wording.count(changed, "file")) changed against the base (agent-sessions diff \(short(t.id)) --stat)") }
                if let error = row.hostErrorText { print("host      unreachable: \(error)") }
                if row.hostErrorText == nil, let pr = try? await context.orchestrator.task(t.id).pullRequestState() {
                    print("pull req  \(pr.summary): \(pr.url)")
                }
                for (i, c) in row.agents.enumerated() {
                    print("agent \(i + 1)   \(c.record.providerID) (\(c.record.kind == .main ? "main" : "chat \(short(c.record.id))")): \(c.stateText)"
                          + (c.lastActivity.map { ", last activity \(ago($0))" } ?? ""))
                }
            }
        }
    }

    struct ContinueAfterLimit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "continue",
            abstract: "Have the host type 'continue' once after an agent's usage limit resets (off by default).",
            discussion: """
                The host reads the reset time from the agent's message (Claude's "resets 3pm (Europe/Paris)", Codex's "try again at 3:05 PM" or "in 2 hours", Gemini's "resets at 3:05 PM PST"; GNU date on the host reads it) and types continue --wait seconds after it, once, while nobody needs to be connected. --off turns it off.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The task.") var task: String
        @Option(help: "Seconds to wait after the reset (the clocks may differ).") var wait: Int = 60
        @Flag(help: "Do not continue after a limit.") var off = false

        func validate() throws {
            if wait < 0 || wait > 86_400 { throw ValidationError("--wait is 0 to 86400 seconds") }
        }

        func run() async throws {
            try await Context.with(global) { context in
                let t = try await context.task(task)
                try await context.orchestrator.task(t.id).continueAfterLimit(off ? nil : .seconds(wait))
                print(off ? "task \(short(t.id)) waits out a usage limit for you"
                          : "task \(short(t.id)) continues \(wait) s after a usage limit resets")
            }
        }
    }

    struct Stop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "stop",
            abstract: "Stop a task's agents (or one chat); their scrollback is kept in the store, the worktree stays.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The task.") var task: String
        @Option(help: "Only this chat (its number in tasks show, its id or its agent).") var chat: String?

        func run() async throws {
            try await Context.with(global) { context in
                let t = try await context.task(task)
                if let chat {
                    let c = try await context.conversation(of: t, chat)
                    try await context.orchestrator.chat(c.id).stop()
                    print("stopped \(c.providerID) of task \(short(t.id))")
                } else {
                    try await context.orchestrator.task(t.id).stop()
                    print("stopped the agents of task \(short(t.id))")
                }
            }
        }
    }

    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "resume",
            abstract: "Resume a task's agents (or one chat) that ended or were stopped, in their own conversations.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The task.") var task: String
        @Option(help: "Only this chat (its number in tasks show, its id or its agent).") var chat: String?

        func run() async throws {
            try await Context.with(global) { context in
                let t = try await context.task(task)
                let resumed: [(conversation: ConversationRecord, session: AgentSession)]
                if let chat {
                    let c = try await context.conversation(of: t, chat)
                    resumed = [(c, try await context.orchestrator.chat(c.id).resume())]
                } else {
                    resumed = try await context.orchestrator.task(t.id).resume()
                }
                for (c, session) in resumed {
                    print("\(c.providerID) of task \(short(t.id)) \(session.resumeMethod == .new ? "is running" : "\(session.resumeMethod)")")
                }
            }
        }
    }

    struct Archive: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "archive",
            abstract: "Stop a task's agents and archive it; its worktree and branch stay on the host.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The task.") var task: String

        func run() async throws {
            try await Context.with(global) { context in
                let t = try await context.task(task)
                let note = try await context.orchestrator.task(t.id).archive()
                print("archived task \(short(t.id)); its branch \(t.worktree.branch) stays")
                if let note { print("note: \(note)") }
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "delete",
            abstract: "Delete a task: stop its agents, remove its worktree and branch, forget it.",
            discussion: "Refused when the worktree has uncommitted changes or unpushed commits, unless --force.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The task.") var task: String
        @Flag(help: "Delete even if that loses uncommitted or unpushed work.") var force = false

        func run() async throws {
            try await Context.with(global) { context in
                let t = try await context.task(task)
                let note = try await context.orchestrator.task(t.id).delete(force: force)
                print("deleted task \(short(t.id)) with its worktree and branch \(t.worktree.branch)")
                if let note { print("note: \(note)") }
            }
        }
    }
}

struct Chats: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "chats",
        abstract: "Add more agents to a task, working in the same worktree.", subcommands: [Add.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "add", abstract: "Start another agent in a task's worktree.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The task.") var task: String
        @Option(help: "The agent.") var agent: String
        @OptionGroup var prompt: PromptOptions

        func run() async throws {
            try await Context.with(global) { context in
                let text = try prompt.text()
                let t = try await context.task(task)
                let (_, c, _) = try await context.orchestrator.task(t.id).addChat(providerID: agent, prompt: text,
                                                                    autoApprove: prompt.autoApprove)
                let n = try await context.records.chats(of: t.id).firstIndex { $0.id == c.id }.map { $0 + 1 } ?? 0
                print("started \(agent) as chat \(n) of task \(short(t.id)); attach: agent-sessions attach \(short(t.id)) --chat \(n)")
            }
        }
    }
}
