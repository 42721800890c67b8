import AgentSessions
import ArgumentParser
import Foundation
import ServerTransport

struct Orphans: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "orphans",
        abstract: "Find agent sessions and worktrees on a host that the store does not know; adopt or remove them.",
        discussion: """
            Orphans are left by a store that was lost or copied from elsewhere, by Emdash on the same host, or by a crash between a step on the host and its record. --adopt makes tasks of orphaned worktrees (and conversations of the agent sessions running in them); --remove stops the sessions and removes the worktrees, refusing to lose uncommitted or unpushed work unless --force.

            Port claims are orphans too when they hold a port for nothing: their task is not in the store, or its worktree and its agent's tmux session are both gone (a claim younger than 15 minutes is left: its task may be being made). --remove gives them back. A new task takes over a claim whose worktree and session are gone by itself.
            """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The host's name.") var host: String
    @Flag(help: "Record orphaned worktrees as tasks, with the agents running in them.") var adopt = false
    @Flag(help: "Stop orphaned sessions and remove orphaned worktrees with their branches.") var remove = false
    @Flag(help: "With --remove: even if that loses uncommitted or unpushed work.") var force = false
    @Flag(help: "JSON, for scripts.") var json = false

    func validate() throws {
        if adopt && remove { throw ValidationError("give --adopt or --remove, not both") }
        if force && !remove { throw ValidationError("--force goes with --remove") }
    }

    func run() async throws {
        try await Context.with(global) { context in
            let h = try await context.host(named: host)
            let found = try await context.orchestrator.host(h.id).findOrphans()
            if json {
                printJSON(.object([
                    "sessions": .array(found.sessions.map { o in
                        .object(["name": .string(o.session.name), "agent": o.session.ptyID.map { .string($0.providerID) } ?? .null,
                                 "running": .bool(o.session.isRunning), "directory": o.directory.map(JSONValue.string) ?? .null])
                    }),
                    "worktrees": .array(found.worktrees.map { o in
                        .object(["path": .string(o.entry.path), "branch": o.entry.branch.map(JSONValue.string) ?? .null,
                                 "project": .string(o.project.name)])
                    }),
                    "ports": .array(found.portClaims.map { o in
                        .object(["port": .int(o.claim.port), "task": .id(o.claim.taskID),
                                 "worktree": o.claim.worktree.map(JSONValue.string) ?? .null, "reason": .string(o.reason)])
                    }),
                ]))
            } else if found.isEmpty {
                print("no orphans on \(h.name)")
            } else {
                var table = Table(["KIND", "NAME", "DETAIL"])
                for o in found.sessions {
                    table.add(["session", o.session.name, (o.session.isRunning ? "running" : "ended") + (o.directory.map { " in \($0)" } ?? "")])
                }
                for o in found.worktrees {
                    table.add(["worktree", o.entry.path, "branch \(o.entry.branch ?? "(detached)") of project \(o.project.name)"])
                }
                for o in found.portClaims {
                    table.add(["port", "\(o.claim.port)", "claimed by task \(short(o.claim.taskID)): \(o.reason)"])
                }
                table.print()
                if !adopt && !remove { note("agent-sessions orphans \(h.name) --adopt records them; --remove removes them") }
            }
            if adopt { Self.report(try await context.orchestrator.host(h.id).adoptOrphans(found)) }
            if remove {
                let outcomes = try await context.orchestrator.host(h.id).removeOrphans(found, force: force)
                Self.report(outcomes)
                let kept = outcomes.filter { if case .keptWorktree = $0 { true } else { false } }.count
                if kept > 0 {
                    throw Failure.refused("\(Wording.count(kept, "worktree")) \(kept == 1 ? "holds" : "hold") work that would be lost; adopt them (--adopt) or pass --force")
                }
            }
        }
    }

    /// One line per outcome: what was done on standard output, what was left on standard error.
    static func report(_ outcomes: [AgentOrphanOutcome]) {
        for o in outcomes {
            switch o {
            case .adoptedWorktree(let path, let taskID): print("adopted worktree \(path) as task \(short(taskID))")
            case .adoptedSession(let name, let taskID, let kind):
                print("adopted session \(name) as \(kind == .main ? "the main agent" : "a chat") of task \(short(taskID))")
            case .leftWorktree(let path, let reason): note("left \(path): \(reason)")
            case .leftSession(let name, let reason): note("left session \(name): \(reason) (--remove stops it)")
            case .stoppedSession(let name): print("stopped session \(name)")
            case .removedWorktree(let path, let branch): print("removed worktree \(path)" + (branch.map { " and its branch \($0)" } ?? ""))
            case .keptWorktree(let path, let reason): note("kept \(path): \(reason)")
            case .releasedPort(let port, let taskID): print("gave back port \(port) (claimed by task \(short(taskID)))")
            }
        }
    }
}
