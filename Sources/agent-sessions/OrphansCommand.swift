import AgentSessions
import ArgumentParser
import Foundation
import ServerTransport

struct Orphans: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Find agent sessions and worktrees on a host that the store does not know; adopt or remove them.",
        discussion: """
            Orphans are left by a store that was lost or copied from elsewhere, by Emdash on the same host, or by a crash between a step on the host and its record. --adopt makes tasks of orphaned worktrees (and conversations of the agent sessions running in them); --remove stops the sessions and removes the worktrees, refusing to lose uncommitted or unpushed work unless --force.
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

    struct Found {
        var sessions: [(session: AgentTmuxSession, directory: String?)] = []
        var worktrees: [(entry: WorktreeEntry, project: ProjectRecord)] = []
    }

    func run() async throws {
        try await Context.with(global) { context in
            let h = try await context.host(named: host)
            let found = try await Self.find(h, context)
            if json {
                printJSON(.object([
                    "sessions": .array(found.sessions.map { s, dir in
                        .object(["name": .string(s.name), "agent": s.ptyID.map { .string($0.providerID) } ?? .null,
                                 "running": .bool(s.isRunning), "directory": dir.map(JSONValue.string) ?? .null])
                    }),
                    "worktrees": .array(found.worktrees.map { w, p in
                        .object(["path": .string(w.path), "branch": w.branch.map(JSONValue.string) ?? .null, "project": .string(p.name)])
                    }),
                ]))
            } else if found.sessions.isEmpty && found.worktrees.isEmpty {
                print("no orphans on \(h.name)")
            } else {
                var table = Table(["KIND", "NAME", "DETAIL"])
                for (s, dir) in found.sessions {
                    table.add(["session", s.name, (s.isRunning ? "running" : "ended") + (dir.map { " in \($0)" } ?? "")])
                }
                for (w, p) in found.worktrees {
                    table.add(["worktree", w.path, "branch \(w.branch ?? "(detached)") of project \(p.name)"])
                }
                table.print()
                if !adopt && !remove { note("agent-sessions orphans \(h.name) --adopt records them; --remove removes them") }
            }
            if adopt { try await Self.adopt(found, on: h, context) }
            if remove { try await Self.remove(found, on: h, force: force, context) }
        }
    }

    /// Sessions on the engine's tmux server that no conversation names, and worktrees under
    /// the projects' `.emdash/worktrees/` that no task has.
    static func find(_ h: HostRecord, _ context: Context) async throws -> Found {
        let projects = try await context.store.projects(hostID: h.id)
        var knownSessions = Set<String>(), knownWorktrees = Set<String>()
        for p in projects {
            for t in try await context.store.tasks(projectID: p.id) {
                knownWorktrees.insert(t.worktree.path)
                for c in try await context.store.conversations(taskID: t.id) { knownSessions.insert(c.ptyID.description) }
            }
        }
        return try await context.onHost(h) { host in
            var found = Found()
            let directories = try await paneDirectories(host)
            for s in try await host.listTmuxSessions() where !knownSessions.contains(s.name) {
                found.sessions.append((s, directories[s.name]))
            }
            for p in projects {
                for w in try await host.listWorktrees(projectPath: p.path) where w.isManaged && !knownWorktrees.contains(w.path) {
                    found.worktrees.append((w, p))
                }
            }
            return found
        }
    }

    /// Each session's working directory (where its agent was started).
    static func paneDirectories(_ host: AgentHost) async throws -> [String: String] {
        let r = try await host.transport.runProcess("tmux", "-L", host.tmuxSocket, "-f", "/dev/null", "list-panes", "-a",
                                                    "-F", "#{pane_start_path} #{session_name}")
        var all: [String: String] = [:]
        guard r.exitStatus == .exited(0) else { return all }
        for line in r.stdoutString.split(separator: "\n") {
            // the name last (it has no spaces: PTY ids never do); the path may
            guard let space = line.lastIndex(of: " ") else { continue }
            all[String(line[line.index(after: space)...])] = String(line[..<space])
        }
        return all
    }

    static func adopt(_ found: Found, on h: HostRecord, _ context: Context) async throws {
        var tasksByPath: [String: TaskRecord] = [:]
        for p in try await context.store.projects(hostID: h.id) {
            for t in try await context.store.tasks(projectID: p.id) { tasksByPath[t.worktree.path] = t }
        }
        for (w, p) in found.worktrees {
            guard let branch = w.branch else {
                note("left \(w.path): its HEAD is detached, so it is no task's branch")
                continue
            }
            // a main agent's session in it names the task (its PTY id ends with the task id)
            let main = found.sessions.first { $0.directory == w.path && $0.session.ptyID?.kind == .main }
            let base = try await baseOf(w.path, project: p, h, context)
            let name = (w.path as NSString).lastPathComponent
            let task = TaskRecord(id: main?.session.ptyID?.suffix ?? AgentIDs.make(), projectID: p.id, title: name,
                                  worktree: Worktree(name: name, projectPath: p.path, path: w.path, branch: branch,
                                                     baseRef: base.ref, baseCommit: base.commit))
            try await context.store.save(task)
            tasksByPath[w.path] = task
            print("adopted worktree \(w.path) as task \(short(task.id))")
        }
        for (s, dir) in found.sessions {
            guard let id = s.ptyID, let dir, let task = tasksByPath[dir] else {
                note("left session \(s.name): it is not an agent in a worktree of \(h.name)'s projects (--remove stops it)")
                continue
            }
            let existing = try await context.store.conversations(taskID: task.id)
            if id.kind == .main && (id.suffix != task.id || existing.contains { $0.kind == .main }) {
                note("left session \(s.name): the task \(short(task.id)) has its main agent already")
                continue
            }
            let c = ConversationRecord(id: id.kind == .chat ? id.suffix : AgentIDs.make(), taskID: task.id,
                                       providerID: id.providerID, kind: id.kind,
                                       state: s.isRunning ? .running : .exited(s.exitStatus ?? -1))
            guard c.ptyID == id else {
                note("left session \(s.name): its name is not one this tool gives")
                continue
            }
            try await context.store.save(c)
            print("adopted session \(s.name) as \(id.kind == .main ? "the main agent" : "a chat") of task \(short(task.id))")
        }
    }

    /// The ref an adopted worktree is compared with (the project's base, else the main
    /// checkout's branch) and where the worktree left it (their merge base).
    static func baseOf(_ path: String, project: ProjectRecord, _ h: HostRecord, _ context: Context) async throws
        -> (ref: String, commit: String)
    {
        let script = """
            ref=${3:-$(git -C "$2" symbolic-ref --short HEAD 2>/dev/null || echo HEAD)}
            commit=$(git -C "$1" merge-base HEAD "$ref" 2>/dev/null || git -C "$1" rev-parse HEAD)
            printf '%s\\n%s\\n' "$ref" "$commit"
            """
        let r = try await context.onHost(h) { host in
            try await host.transport.runProcess("/bin/sh", "-c", script, "sh", path, project.path, project.defaultBaseRef ?? "")
        }
        let f = r.stdoutString.split(separator: "\n").map(String.init)
        guard r.exitStatus == .exited(0), f.count == 2 else {
            throw Failure(.failed, "cannot find the base of \(path) on \(h.name): \(r.stderrString)")
        }
        return (f[0], f[1])
    }

    static func remove(_ found: Found, on h: HostRecord, force: Bool, _ context: Context) async throws {
        var refused: [String] = []
        try await context.onHost(h) { host in
            for (s, _) in found.sessions {
                try await host.killTmuxSession(s.name)
                print("stopped session \(s.name)")
            }
            for (w, p) in found.worktrees {
                let wt = Worktree(name: (w.path as NSString).lastPathComponent, projectPath: p.path, path: w.path,
                                  branch: w.branch ?? "", baseRef: "", baseCommit: "")
                do {
                    try await host.removeWorktree(wt, force: force, deleteBranch: w.branch != nil)
                    print("removed worktree \(w.path)" + (w.branch.map { " and its branch \($0)" } ?? ""))
                } catch let e as AgentError where e.code == .worktreeHasUnsavedWork {
                    refused.append(w.path)
                    note("kept \(w.path): \(e.message)")
                }
            }
        }
        if !refused.isEmpty {
            throw Failure.refused("\(refused.count) worktree(s) hold work that would be lost; adopt them (--adopt) or pass --force")
        }
    }
}
