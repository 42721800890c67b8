import AgentSessions
import ArgumentParser
import Foundation

/// Landing a task's work: commit, push, pull request, merge (all run on the task's host).
extension Tasks {
    struct Commit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "commit",
            abstract: "Commit every change of the task's worktree (new files too).",
            discussion: "Nothing to commit is not an error: it says so and exits 0.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The task.") var task: String
        @Option(name: [.short, .long], help: "The commit message (default: the task's title).") var message: String?

        func run() async throws {
            try await Context.with(global) { context in
                let t = try await context.task(task)
                do {
                    let c = try await context.orchestrator.task(t.id).commit(message: message)
                    print("committed \(Wording.count(c.files, "file")) as \(c.commit.prefix(10)) on \(t.worktree.branch)")
                } catch let e as AgentError where e.code == .nothingToLand {
                    print("nothing to commit in task \(short(t.id)): its worktree has no changes")
                }
            }
        }
    }

    struct Push: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "push",
            abstract: "Push the task's branch to the project's remote and set its upstream.",
            discussion: "The branch's own remote, else origin, else the only remote. Commits only: uncommitted changes are not pushed (tasks commit first).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The task.") var task: String

        func run() async throws {
            try await Context.with(global) { context in
                let t = try await context.task(task)
                let p = try await context.orchestrator.task(t.id).push()
                print(p.wasUpToDate ? "\(p.branch) is up to date on \(p.remote) (\(p.remoteURL))"
                    : "pushed \(p.branch) (\(Wording.count(p.commits, "commit")) over its base) to \(p.remote) (\(p.remoteURL))")
                if p.uncommittedChanges > 0 {
                    print("note: \(Wording.count(p.uncommittedChanges, "uncommitted change")) \(p.uncommittedChanges == 1 ? "is" : "are") not in it: agent-sessions tasks commit \(short(t.id))")
                }
            }
        }
    }

    struct PR: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pr",
            abstract: "Push the task's branch and open its pull request (gh on the host), or print the page that opens one.",
            discussion: """
                With gh installed and logged in on the host, the pull request is created, or the open one is \
                found (its title and body set when given). Without it, the forge's compare page is printed \
                (GitHub, GitLab, Bitbucket, Gitea, Forgejo). The title defaults to the task's, the body to \
                its first prompt, the base to the branch the task was made from.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The task.") var task: String
        @Option(help: "The pull request's title.") var title: String?
        @Option(help: "Its body.") var body: String?
        @Option(help: "The branch to propose it into.") var base: String?

        func run() async throws {
            try await Context.with(global) { context in
                let t = try await context.task(task)
                let pr = try await context.orchestrator.task(t.id).openPullRequest(title: title, body: body, base: base)
                if !pr.push.wasUpToDate { print("pushed \(pr.push.branch) to \(pr.push.remote)") }
                switch pr.outcome {
                case .created: print("opened the pull request: \(pr.url)")
                case .updated: print("the pull request is open: \(pr.url)")
                case .compareURL: print("open the pull request here (gh is not on the host, or not logged in): \(pr.url)")
                }
            }
        }
    }

    struct Merge: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "merge",
            abstract: "Merge the task's branch into its base on the host: a fast-forward, else a merge commit.",
            discussion: """
                The merge is made apart from every checkout and lands only without conflicts; a conflict \
                lists its files and changes nothing (exit 6). The checkout that has the base branch checked \
                out follows it, and a merge is refused while that checkout has uncommitted changes (exit 3), \
                as it is while the task has uncommitted changes (tasks commit first).
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The task.") var task: String
        @Option(help: "The branch to merge into (default: the branch the task was made from).") var into: String?
        @Flag(help: "Only a fast-forward: refused when the base has moved.") var ffOnly = false
        @Flag(help: "A merge commit even when a fast-forward would do.") var noFF = false

        func run() async throws {
            try await Context.with(global) { context in
                if ffOnly && noFF { throw Failure.usage("give --ff-only or --no-ff, not both") }
                let t = try await context.task(task)
                let m = try await context.orchestrator.task(t.id).merge(into: into,
                                                                 mode: ffOnly ? .fastForwardOnly : noFF ? .mergeCommit : .auto)
                switch m.outcome {
                case .alreadyMerged: print("\(m.base) has every commit of \(t.worktree.branch) already; nothing changed")
                case .fastForward: print("merged \(t.worktree.branch) into \(m.base): a fast-forward to \(m.commit.prefix(10))")
                case .mergeCommit: print("merged \(t.worktree.branch) into \(m.base): merge commit \(m.commit.prefix(10))")
                }
                if let co = m.checkout, m.outcome != .alreadyMerged { print("the checkout \(co) is at \(m.base) now") }
            }
        }
    }
}

extension Tasks {
    struct Fetch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "fetch",
            abstract: "Bring the task's branch into the git repository here (or --into DIR), over the host's connection.",
            discussion: """
                The branch keeps its name and moves only forward (--force: to the task's commit whatever it \
                was). The repository must be a clone of the same project: the same origin, or a commit in \
                common; another is refused (exit 3) unless --force.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The task.") var task: String
        @Option(help: ArgumentHelp("The local repository (default: the current directory).", valueName: "dir")) var into: String?
        @Flag(help: "Fetch into a repository of another project, or over a branch that went elsewhere.") var force = false

        func run() async throws {
            try await Context.with(global) { context in
                let t = try await context.task(task)
                let f = try await context.orchestrator.task(t.id).fetch(into: into ?? FileManager.default.currentDirectoryPath,
                                                                 force: force)
                print("fetched \(f.branch) at \(f.commit.prefix(10)) into \(f.directory); see it: git switch \(f.branch)")
            }
        }
    }
}
