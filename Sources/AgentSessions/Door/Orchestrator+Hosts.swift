import Foundation
import ServerTransport

/// A session on the engine's tmux server, or a managed worktree, that no record names:
/// left by a store that was lost or copied from elsewhere, by Emdash on the same host,
/// or by a crash between a step on the host and its record.
public struct AgentOrphans: Sendable {
    public struct Session: Sendable, Hashable {
        public var session: AgentTmuxSession
        /// Where its agent was started (its pane's start directory).
        public var directory: String?
    }

    public struct Worktree: Sendable, Hashable {
        public var entry: WorktreeEntry
        public var project: ProjectRecord
    }

    /// A port claim that holds a port for nothing: its task is not in the store, or its
    /// task's worktree and main agent's tmux session are both gone.
    public struct PortClaim: Sendable, Hashable {
        public var claim: AgentPortClaim
        /// Why it is an orphan.
        public var reason: String
    }

    public var sessions: [Session] = []
    public var worktrees: [Worktree] = []
    public var portClaims: [PortClaim] = []

    public var isEmpty: Bool { sessions.isEmpty && worktrees.isEmpty && portClaims.isEmpty }
}

/// A task's claim of a port on its host (`AgentHost.taskPorts`), as the host holds it.
public struct AgentPortClaim: Sendable, Hashable {
    public var port: Int
    /// The task that claimed it.
    public var taskID: TaskID
    /// Where that task's worktree is (nil for a claim of an earlier release).
    public var worktree: String?
    /// Whether the task's worktree or its main agent's tmux session is there.
    public var isLive: Bool
    /// Whether the claim is older than the 15 minutes a new task's worktree may take.
    public var isOld: Bool
}

/// What adopting or removing orphans did with each.
public enum AgentOrphanOutcome: Sendable, Hashable {
    case adoptedWorktree(path: String, taskID: TaskID)
    case adoptedSession(name: String, taskID: TaskID, kind: AgentPTYID.Kind)
    /// Left as it is, and why.
    case leftWorktree(path: String, reason: String)
    case leftSession(name: String, reason: String)
    case stoppedSession(name: String)
    case removedWorktree(path: String, branch: String?)
    /// A port claim given back.
    case releasedPort(port: Int, taskID: TaskID)
    /// Not removed: it holds work that would be lost (remove with `force`).
    case keptWorktree(path: String, reason: String)
}

/// The hosts and projects: reaching a host, what it has installed, a project's
/// checkout, and what is on a host that no record names.
extension AgentOrchestrator {
    // MARK: hosts

    /// Connects to the host (when it is not connected) and returns: proof that it can be
    /// reached, with the credentials and host key of its record.
    func connect(to host: HostRecord) async throws(AgentError) {
        try await onHost(host) { _ in }
    }

    /// Which agents are installed on the host (every provider with its settings applied)
    /// and the facts a start depends on: one round trip, its answer reused for 5
    /// minutes unless `refresh`.
    func detectAgents(on host: HostRecord, refresh: Bool = false) async throws(AgentError) -> AgentDetection {
        let providers = providers
        return try await onHost(host) { h in try await h.detectAgents(providers, refresh: refresh) }
    }

    /// What a host not yet in the store has: connects through `transport` (a first
    /// connection, with the caller's host-key policy) and detects its agents. The
    /// engine keeps nothing of it; the caller closes the transport.
    public func inspectNewHost(_ record: HostRecord, through transport: any ServerTransport) async throws(AgentError)
        -> AgentDetection
    {
        if let connected = transport as? any ConnectedTransport {
            do throws(TransportError) {
                try await connected.connect()
            } catch {
                throw AgentError(error, while: "connecting to \(record.displayName)")
            }
        }
        let host = AgentHost(transport: transport, tmuxSocket: record.tmuxSocket, extraSearchPath: searchPath,
                             displayName: record.displayName)
        return try await host.detectAgents(providers, refresh: true)
    }

    // MARK: projects

    /// The top level of the git checkout at `path` on the host (absolute, or `~/...`),
    /// and, given a `base`, that it names a commit there.
    /// - Throws: `notAGitRepository` (no such path, not in a checkout), `invalidArgument`
    ///   (a relative path, a base that is no commit), `transport`.
    func checkoutTopLevel(on host: HostRecord, path: String, base: String? = nil) async throws(AgentError) -> String {
        try await onHost(host) { h in
            let absolute = try await h.absolutePath(path)
            guard try await h.transport.fileExists(absolute) else {
                throw AgentError(.notAGitRepository, "\(path) does not exist on \(host.name)")
            }
            let r = try await h.run("git", ["-C", absolute, "rev-parse", "--show-toplevel"], what: "reading the checkout")
            guard r.exitStatus == .exited(0) else {
                throw AgentError(.notAGitRepository, "\(path) on \(host.name) is not a git checkout (git init or git clone it first)")
            }
            let top = r.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)
            if let base {
                let b = try await h.run("git", ["-C", top, "rev-parse", "--verify", "--quiet", base + "^{commit}"],
                                        what: "checking the base")
                guard b.exitStatus == .exited(0) else {
                    throw AgentError(.invalidArgument, "\(base) is no commit in \(top) on \(host.name)")
                }
            }
            return top
        }
    }

    // MARK: orphans

    /// Sessions on the host's engine tmux server that no conversation names, and
    /// worktrees under its projects' `.emdash/worktrees/` that no task has.
    func findOrphans(on host: HostRecord) async throws(AgentError) -> AgentOrphans {
        let store = store
        let (projects, knownSessions, knownWorktrees, knownTasks) = try await stored("reading the records") {
            let projects = try await store.projects(hostID: host.id)
            var sessions = Set<String>(), worktrees = Set<String>(), tasks = Set<TaskID>()
            // the claims of every task in the store: a host may be in it under two names
            for p in try await store.projects(hostID: nil) {
                for t in try await store.tasks(projectID: p.id) {
                    tasks.insert(t.id)
                    guard p.hostID == host.id else { continue }
                    worktrees.insert(t.worktree.path)
                    for c in try await store.conversations(taskID: t.id) { sessions.insert(c.ptyID.description) }
                }
            }
            return (projects, sessions, worktrees, tasks)
        }
        return try await onHost(host) { h in
            var found = AgentOrphans()
            let directories = try await h.tmux.paneStartDirectories()
            for s in try await h.tmux.sessions() where !knownSessions.contains(s.name) {
                found.sessions.append(.init(session: s, directory: directories[s.name]))
            }
            for p in projects {
                for w in try await h.worktrees.list(projectPath: p.path) where w.isManaged && !knownWorktrees.contains(w.path) {
                    found.worktrees.append(.init(entry: w, project: p))
                }
            }
            // a fresh claim is left alone: its task may be being made
            for c in try await h.portClaims() where c.isOld {
                if !knownTasks.contains(c.taskID) {
                    found.portClaims.append(.init(claim: c, reason: "its task \(c.taskID.short) is not in the store"))
                } else if !c.isLive {
                    found.portClaims.append(.init(claim: c, reason: "its task's worktree and agent session are gone"))
                }
            }
            return found
        }
    }

    /// Records orphaned worktrees as tasks (a main agent's session in one gives the task
    /// its id) and the agent sessions running in them as their conversations. A worktree
    /// with a detached HEAD, and a session that is no agent in such a worktree, are left.
    func adoptOrphans(_ found: AgentOrphans, on host: HostRecord) async throws(AgentError) -> [AgentOrphanOutcome] {
        let store = store
        var outcomes: [AgentOrphanOutcome] = []
        var tasksByPath: [String: TaskRecord] = try await stored("reading the records") {
            var all: [String: TaskRecord] = [:]
            for p in try await store.projects(hostID: host.id) {
                for t in try await store.tasks(projectID: p.id) { all[t.worktree.path] = t }
            }
            return all
        }
        for orphan in found.worktrees {
            let w = orphan.entry, p = orphan.project
            guard let branch = w.branch else {
                outcomes.append(.leftWorktree(path: w.path, reason: "its HEAD is detached, so it is no task's branch"))
                continue
            }
            let main = found.sessions.first { $0.directory == w.path && $0.session.ptyID?.kind == .main }
            let base = try await baseOf(w.path, project: p, on: host)
            let name = (w.path as NSString).lastPathComponent
            let task = TaskRecord(id: main?.session.ptyID.map { TaskID($0.suffix) } ?? .make(), projectID: p.id, title: name,
                                  worktree: AgentSessions.Worktree(name: name, projectPath: p.path, path: w.path, branch: branch,
                                                                   baseRef: base.ref, baseCommit: base.commit))
            try await stored("saving the adopted task") { try await store.save(task) }
            tasksByPath[w.path] = task
            outcomes.append(.adoptedWorktree(path: w.path, taskID: task.id))
        }
        for orphan in found.sessions {
            let s = orphan.session
            guard let id = s.ptyID, let dir = orphan.directory, let task = tasksByPath[dir] else {
                outcomes.append(.leftSession(name: s.name, reason: "it is not an agent in a worktree of \(host.name)'s projects"))
                continue
            }
            let existing = try await stored("reading conversations") { try await store.conversations(taskID: task.id) }
            if id.kind == .main && (id.suffix != task.id.rawValue || existing.contains { $0.kind == .main }) {
                outcomes.append(.leftSession(name: s.name, reason: "the task \(task.id.short) has its main agent already"))
                continue
            }
            let c = ConversationRecord(id: id.kind == .chat ? ChatID(id.suffix) : .make(), taskID: task.id,
                                       providerID: id.providerID, kind: id.kind,
                                       state: s.isRunning ? .running : .exited(s.exitStatus ?? -1))
            guard c.ptyID == id else {
                outcomes.append(.leftSession(name: s.name, reason: "its name is not one this engine gives"))
                continue
            }
            try await stored("saving the adopted conversation") { try await store.save(c) }
            outcomes.append(.adoptedSession(name: s.name, taskID: task.id, kind: id.kind))
        }
        return outcomes
    }

    /// Stops orphaned sessions and removes orphaned worktrees with their branches; a
    /// worktree holding uncommitted or unpushed work is kept (`keptWorktree`) unless
    /// `force`.
    func removeOrphans(_ found: AgentOrphans, on host: HostRecord, force: Bool = false) async throws(AgentError)
        -> [AgentOrphanOutcome]
    {
        try await onHost(host) { h in
            var outcomes: [AgentOrphanOutcome] = []
            for s in found.sessions {
                // no task owns it: its files on the host go with it
                let files = AgentPTYID(parsing: s.session.name).map { AgentProvider.StatusHooks.files(of: $0) } ?? []
                try await h.tmux.stop(s.session.name, forget: true, removing: files)
                outcomes.append(.stoppedSession(name: s.session.name))
            }
            for orphan in found.worktrees {
                let w = orphan.entry, p = orphan.project
                let wt = AgentSessions.Worktree(name: (w.path as NSString).lastPathComponent, projectPath: p.path, path: w.path,
                                                branch: w.branch ?? "", baseRef: "", baseCommit: "")
                do {
                    try await h.worktrees.remove(wt, force: force, deleteBranch: w.branch != nil)
                    outcomes.append(.removedWorktree(path: w.path, branch: w.branch))
                } catch let e as AgentError where e.code == .worktreeHasUnsavedWork {
                    outcomes.append(.keptWorktree(path: w.path, reason: e.message))
                }
            }
            for c in found.portClaims {
                // only while that task still holds it
                try await h.releasePort(c.claim.port, taskID: c.claim.taskID)
                outcomes.append(.releasedPort(port: c.claim.port, taskID: c.claim.taskID))
            }
            return outcomes
        }
    }

    /// The ref an adopted worktree is compared with (the project's base, else the main
    /// checkout's branch) and where the worktree left it (their merge base).
    private func baseOf(_ path: String, project: ProjectRecord, on host: HostRecord) async throws(AgentError)
        -> (ref: String, commit: String)
    {
        let script = """
            ref=${3:-$(git -C "$2" symbolic-ref --short HEAD 2>/dev/null || echo HEAD)}
            commit=$(git -C "$1" merge-base HEAD "$ref" 2>/dev/null || git -C "$1" rev-parse HEAD)
            printf '%s\\n%s\\n' "$ref" "$commit"
            """
        let r = try await onHost(host) { h in
            try await h.run("/bin/sh", ["-c", script, "sh", path, project.path, project.defaultBaseRef ?? ""],
                            what: "finding the base of \(path)")
        }
        let f = r.stdoutString.split(separator: "\n").map(String.init)
        guard r.exitStatus == .exited(0), f.count == 2 else {
            throw AgentError(.gitFailed, "cannot find the base of \(path) on \(host.name)", detail: r.stderrString)
        }
        return (f[0], f[1])
    }
}
