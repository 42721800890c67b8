import Foundation
import SSHKit
import ServerTransport

/// How many attempts of one agent: `claude:2` in `--agents claude:2,codex:1`.
public struct AttemptAgents: Sendable, Hashable {
    public var providerID: String
    public var count: Int

    public init(providerID: String, count: Int) {
        self.providerID = providerID
        self.count = count
    }

    /// The most attempts one piece of work may have.
    public static let maximumTotal = 32

    /// Reads `claude:2,codex:1` (a count of 1 may be left out: `claude,codex:2`).
    /// - Throws: `invalidArgument` (an empty list, a count that is not a whole number from
    ///   1, more than `maximumTotal` in all, an agent named twice), `unknownProvider`.
    public static func parse(_ text: String) throws(AgentError) -> [AttemptAgents] {
        var out: [AttemptAgents] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let item = part.trimmingCharacters(in: .whitespaces)
            let pieces = item.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            guard let id = pieces.first, !id.isEmpty else {
                throw AgentError(.invalidArgument, "'\(text)' is not a list of agents like claude:2,codex:1")
            }
            var count = 1
            if pieces.count == 2 {
                guard let n = Int(pieces[1]), n >= 1 else {
                    throw AgentError(.invalidArgument, "'\(item)': the number of attempts is a whole number from 1")
                }
                count = n
            }
            let provider = try AgentProvider.named(id)
            guard !out.contains(where: { $0.providerID == provider.id }) else {
                throw AgentError(.invalidArgument, "\(provider.id) is named twice in '\(text)'")
            }
            out.append(AttemptAgents(providerID: provider.id, count: count))
        }
        let total = out.reduce(0) { $0 + $1.count }
        guard total <= maximumTotal else {
            throw AgentError(.invalidArgument, "\(total) attempts asked; at most \(maximumTotal)")
        }
        return out
    }
}

/// The attempts `createAttempts` started, and those it could not.
public struct AttemptLaunch: Sendable {
    /// An attempt that did not start, and why.
    public struct Failure: Sendable {
        public var label: String
        public var hostName: String
        public var error: AgentError
    }

    /// The id the attempts share (`TaskAttempt.group`).
    public var group: String
    /// The base every attempt started from: as named on the project's host, and its commit.
    public var baseRef: String
    public var baseCommit: String
    /// The attempts that run, in label order.
    public var started: [TaskRecord]
    public var failed: [Failure]
    /// What was done to make the hosts ready: a base fetched or sent, a clone made.
    public var notes: [String]
}

/// A check command's run in an attempt's worktree.
public struct AttemptCheck: Sendable, Equatable {
    public enum Outcome: Sendable, Equatable {
        case exited(SSHExitStatus)
        /// Stopped at the time limit.
        case timedOut
    }

    public var command: String
    public var outcome: Outcome
    /// From the start of the command to its end, as this machine timed it.
    public var duration: Duration
    /// The last lines it printed (standard output and error together).
    public var output: String

    /// Whether it exited with status 0.
    public var passed: Bool { outcome == .exited(.exited(0)) }

    public init(command: String, outcome: Outcome, duration: Duration, output: String) {
        self.command = command
        self.outcome = outcome
        self.duration = duration
        self.output = output
    }

    /// The last 20 lines of `text`.
    static func tail(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).suffix(21).joined(separator: "\n")
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// One attempt as `compareAttempts` sees it.
public struct AttemptComparison: Sendable {
    public var task: TaskRecord
    public var label: String
    public var hostName: String
    /// The main agent, with its status now (nil status: the host could not be asked, or
    /// the agent does not run).
    public var agent: AgentBoard.Agent?
    /// The main agent's provider.
    public var providerID: String? { agent?.record.providerID }
    /// The main agent's status now.
    public var status: AgentStatus? { agent?.status }
    /// From the attempt's start to the end of its agent's last turn (or of its process),
    /// when it is done, idle or ended.
    public var timeToDone: Duration?
    /// Against the base: files changed, lines added and removed, committed or not, new
    /// files included (nil: the worktree could not be read).
    public var filesChanged: Int?
    public var linesAdded: Int?
    public var linesRemoved: Int?
    /// The check command's run, when one was given.
    public var check: AttemptCheck?
    /// What went wrong while asking (the host, git, the check).
    public var problem: AgentError?
}

/// A command's run in one attempt's worktree (`checkAttempts`).
public struct AttemptCheckRun: Sendable {
    public var task: TaskRecord
    public var label: String
    public var hostName: String
    /// How it ran; nil when it could not (`problem`).
    public var check: AttemptCheck?
    /// What went wrong: the host could not be asked, the worktree is gone.
    public var problem: AgentError?
}

/// What `pickAttempt` did.
public struct PickedAttempt: Sendable {
    /// The kept attempt: the work's task from now on.
    public var task: TaskRecord
    /// The labels of the other attempts archived or deleted.
    public var archived: [String]
    public var deleted: [String]
    /// What went wrong in a project's teardown (the others were archived or deleted all the same).
    public var notes: [String]
}

/// What becomes of the attempts not picked.
public enum AttemptDisposal: Sendable, Hashable {
    /// Stopped and archived; their worktrees and branches stay.
    case archive
    /// Deleted with their worktrees and branches (refused when one holds work that would be
    /// lost, unless forced).
    case delete
}

extension AgentOrchestrator {
    /// Starts several attempts at one piece of work: a task per attempt (its own worktree,
    /// branch and agent), every one from the same base commit, spread over `hostIDs` (the
    /// project's host when empty) and started at once.
    ///
    /// - The base is chosen on the project's host as `createTask` chooses it (fetched from
    ///   the project's remote first, unless the project says not to).
    /// - On each other host, the project of the same repository is the one whose origin is
    ///   the same (as forge and path) or, without origins, that shares a root commit. A
    ///   host without one gets a clone of the origin in the user's home, under the
    ///   checkout's folder name (`-2` … `-9` added when that exists), recorded as a project
    ///   of the same name, when `cloneWhereMissing`; else it is refused.
    /// - A host whose checkout lacks the base commit is sent it, as a git bundle that
    ///   carries only the commits it lacks, through this machine.
    /// - Attempts go to the hosts where their agent can start, each to the host with the
    ///   fewest so far (ties: the order of `hostIDs`); they are labelled by agent and
    ///   number (`claude-1`, `claude-2`, `codex-1`).
    ///
    /// Everything about the hosts is checked before any attempt is started; an attempt
    /// that fails to start is reported in the result, the others run on. When none starts,
    /// the first failure is thrown.
    /// - Throws: `invalidArgument`, `unknownProvider`, `notFound` (a project, a host, or a
    ///   host without the repository), `noRemote` (no origin to clone), `agentUnavailable`
    ///   (an agent no host can start), `tmuxUnavailable`, the base's and the transfer's
    ///   `gitFailed`, `transport`.
    func createAttempts(projectID: ProjectID, title: String, agents: [AttemptAgents], hostIDs: [HostID] = [],
                               prompt: String? = nil, autoApprove: Bool = false, baseRef: String? = nil,
                               cloneWhereMissing: Bool = false) async throws(AgentError) -> AttemptLaunch
    {
        let total = agents.reduce(0) { $0 + max(0, $1.count) }
        guard total >= 1, agents.allSatisfy({ $0.count >= 1 }) else {
            throw AgentError(.invalidArgument, "an attempt needs an agent and a count from 1")
        }
        guard total <= AttemptAgents.maximumTotal else {
            throw AgentError(.invalidArgument, "\(total) attempts asked; at most \(AttemptAgents.maximumTotal)")
        }
        var providers: [AgentProvider] = []
        for a in agents { providers.append(try AgentProvider.named(a.providerID)) }
        let project = try await records.project(projectID)
        let home = try await records.host(project.hostID)
        var hosts: [HostRecord] = []
        for id in hostIDs.isEmpty ? [home.id] : hostIDs where !hosts.contains(where: { $0.id == id }) {
            hosts.append(try await records.host(id))
        }

        // the base, on the project's host, and the project's identity there
        let wanted = baseRef ?? project.defaultBaseRef, fetch = project.fetchesBase ?? true
        // (the base and the identity asked at once)
        let (base, projectPath, identity) = try await onHost(home) { h in
            let path = try await h.absolutePath(project.path)
            async let identities = h.repositoryIdentities([path])
            let base = try await h.worktrees.resolveBase(projectPath: project.path, baseRef: wanted, fetchBase: fetch)
            let identity = try await identities[path] ?? AgentHost.RepositoryIdentity(origin: "", roots: [])
            return (base, base.top, identity)
        }
        var notes = base.notes

        // each host's project of the repository, with the base commit there
        var prepared: [(Int, Result<(ProjectRecord, [String]), AgentError>)] = []
        await withTaskGroup(of: (Int, Result<(ProjectRecord, [String]), AgentError>).self) { group in
            for (i, host) in hosts.enumerated() {
                group.addTask {
                    await (i, Self.outcome { () async throws(AgentError) -> (ProjectRecord, [String]) in
                        try await self.prepareForAttempts(host, project: project, home: home, projectPath: projectPath,
                                                          identity: identity, commit: base.commit, cloneWhereMissing: cloneWhereMissing)
                    })
                }
            }
            for await r in group { prepared.append(r) }
        }
        var projects: [ProjectRecord] = []
        for (_, r) in prepared.sorted(by: { $0.0 < $1.0 }) {
            switch r {
            case .success(let (p, said)):
                projects.append(p)
                notes += said
            case .failure(let e): throw e
            }
        }
        guard projects.count == hosts.count else { throw AgentError(.invalidArgument, "a host was not prepared") }

        // which host can start which agent, then each attempt to the least busy of those
        var checked: [(Int, Result<[AgentError?], AgentError>)] = []
        let wantedProviders = providers
        await withTaskGroup(of: (Int, Result<[AgentError?], AgentError>).self) { group in
            for (i, host) in hosts.enumerated() {
                group.addTask {
                    await (i, Self.outcome { () async throws(AgentError) -> [AgentError?] in
                        try await self.onHost(host) { h in
                            var refusals: [AgentError?] = []
                            for p in wantedProviders {
                                do throws(AgentError) {
                                    try await self.checkCanStart(p, on: h, named: host.name)
                                    refusals.append(nil)
                                } catch {
                                    refusals.append(error)
                                }
                            }
                            return refusals
                        }
                    })
                }
            }
            for await r in group { checked.append(r) }
        }
        var usable: [[Bool]] = Array(repeating: [], count: hosts.count)
        var refusals: [String: AgentError] = [:]
        for (i, r) in checked.sorted(by: { $0.0 < $1.0 }) {
            let each = try r.get()
            usable[i] = each.map { $0 == nil }
            for (k, e) in each.enumerated() where e != nil && refusals[providers[k].id] == nil { refusals[providers[k].id] = e }
        }
        var load = Array(repeating: 0, count: hosts.count)
        var plan: [(label: String, provider: AgentProvider, host: Int)] = []
        for (k, a) in agents.enumerated() {
            let candidates = hosts.indices.filter { usable[$0][k] }
            guard !candidates.isEmpty else {
                throw refusals[providers[k].id] ?? AgentError(.agentUnavailable, "no host can start \(providers[k].displayName)")
            }
            for n in 1 ... a.count {
                let i = candidates.min { load[$0] != load[$1] ? load[$0] < load[$1] : $0 < $1 }!
                load[i] += 1
                plan.append(("\(providers[k].id)-\(n)", providers[k], i))
            }
        }

        // every attempt at once (the hosts' connections and their MaxSessions bound it)
        let group = TaskID.make().rawValue, chosen = projects, targets = hosts
        var results: [(Int, Result<TaskRecord, AgentError>)] = []
        await withTaskGroup(of: (Int, Result<TaskRecord, AgentError>).self) { tasks in
            for (n, item) in plan.enumerated() {
                tasks.addTask {
                    await (n, Self.outcome { () async throws(AgentError) -> TaskRecord in
                        try await self.makeTask(project: chosen[item.host], on: targets[item.host], title: title,
                                                provider: item.provider, prompt: prompt, autoApprove: autoApprove,
                                                baseRef: base.commit, fetchBase: false, baseIsKnownCommit: true,
                                                attempt: TaskAttempt(group: group, label: item.label), baseName: base.ref).task
                    })
                }
            }
            for await r in tasks { results.append(r) }
        }
        results.sort { $0.0 < $1.0 }
        var launch = AttemptLaunch(group: group, baseRef: base.ref, baseCommit: base.commit, started: [], failed: [], notes: notes)
        for (n, r) in results {
            switch r {
            case .success(let t): launch.started.append(t)
            case .failure(let e): launch.failed.append(.init(label: plan[n].label, hostName: hosts[plan[n].host].name, error: e))
            }
        }
        if launch.started.isEmpty, let first = launch.failed.first { throw first.error }
        return launch
    }

    /// The host's project of the repository (found, or cloned), with `commit` there (sent
    /// from the project's host when missing); and what was done.
    private func prepareForAttempts(_ host: HostRecord, project: ProjectRecord, home: HostRecord, projectPath: String,
                                    identity: AgentHost.RepositoryIdentity, commit: String, cloneWhereMissing: Bool)
        async throws(AgentError) -> (ProjectRecord, [String])
    {
        if host.id == home.id { return (project, []) }
        let store = store
        let candidates = try await stored("reading projects") { try await store.projects(hostID: host.id) }
        var notes: [String] = []
        // the host's projects of the repository, and whether they have the base, in one look
        var has = false
        var found: (ProjectRecord, String)? = try await onHost(host) { h in
            var paths: [(ProjectRecord, String)] = []
            for c in candidates { paths.append((c, try await h.absolutePath(c.path))) }
            let identities = try await h.repositoryIdentities(paths.map(\.1), commit: commit)
            let match = paths.first { identities[$0.1]?.isSameRepository(as: identity) == true }
            has = match.flatMap { identities[$0.1]?.hasCommit } ?? false
            return match
        }
        if found == nil {
            guard !identity.origin.isEmpty else {
                throw AgentError(.noRemote, "\(host.name) has no project of this repository, and the project has no origin to clone there")
            }
            guard cloneWhereMissing else {
                throw AgentError(.notFound, "\(host.name) has no project of this repository (origin \(identity.origin)); add one there, or have the origin cloned (--clone)")
            }
            let folder = (projectPath as NSString).lastPathComponent
            let path = try await onHost(host) { h in try await h.clone(identity.origin, folder: folder) }
            let made = ProjectRecord(hostID: host.id, name: project.name, path: path, defaultBaseRef: project.defaultBaseRef,
                                     setupCommand: project.setupCommand, teardownCommand: project.teardownCommand,
                                     fetchesBase: project.fetchesBase)
            try await stored("saving the cloned project") { try await store.save(made) }
            notes.append("cloned \(identity.origin) to \(path) on \(host.name)")
            found = (made, path)
        }
        let (target, path) = found!
        if has { return (target, notes) }
        if try await onHost(host, { h in try await h.hasCommit(commit, in: path) }) { return (target, notes) }
        try await sendCommit(commit, from: home, projectPath: projectPath, to: host, projectPath: path)
        notes.append("sent the base \(commit.prefix(10)) to \(host.name)")
        return (target, notes)
    }

    /// Sends `commit` (and what it needs that the target lacks) from one host's checkout
    /// to another's, as a git bundle streamed through this machine.
    func sendCommit(_ commit: String, from source: HostRecord, projectPath: String, to target: HostRecord,
                    projectPath targetPath: String) async throws(AgentError)
    {
        let known = try await onHost(target) { h in try await h.branchTips(in: targetPath) }
        let bundle = try await onHost(source) { h in try await h.startBundle(of: commit, in: projectPath, known: known) }
        defer { bundle.cancel() }
        let unbundle: TransportProcess
        do {
            unbundle = try await onHost(target) { h in try await h.startUnbundle(into: targetPath) }
        }
        defer { unbundle.cancel() }
        async let bundleErrors = Self.collect(bundle.stderr)
        async let unbundleErrors = Self.collect(unbundle.stderr)
        do {
            for await chunk in bundle.stdout { try await unbundle.input.write(chunk) }
        } catch {}
        unbundle.input.finish()
        let made: SSHExitStatus, taken: SSHExitStatus
        do {
            made = try await bundle.exitStatus()
            taken = try await unbundle.exitStatus()
        } catch {
            throw AgentError(error, while: "sending the base from \(source.name) to \(target.name)")
        }
        let (said, heard) = await (bundleErrors, unbundleErrors)
        guard made == .exited(0), taken == .exited(0) else {
            throw AgentError(.gitFailed, "cannot send the base \(commit.prefix(10)) from \(source.name) to \(target.name)",
                             detail: Self.lastLines(said + "\n" + heard))
        }
    }

    /// What `body` returned or threw.
    static func outcome<T>(_ body: () async throws(AgentError) -> T) async -> Result<T, AgentError> {
        do throws(AgentError) {
            return .success(try await body())
        } catch {
            return .failure(error)
        }
    }

    private static func collect(_ stream: ProcessOutput) async -> String {
        var text = ""
        for await chunk in stream { text += String(decoding: chunk, as: UTF8.self) }
        return text
    }

    /// The attempts of the work `taskID` is one of, in label order.
    /// - Throws: `notFound` (no such task), `notAnAttempt` (a single task).
    func attempts(of taskID: TaskID) async throws(AgentError) -> [TaskRecord] {
        let task = try await records.task(taskID)
        guard let group = task.attempt?.group else {
            throw AgentError(.notAnAttempt, "the task \(task.title) is not one of several attempts")
        }
        return try await records.tasks().filter { $0.attempt?.group == group }.inAttemptOrder
    }

    /// The attempts side by side: each one's state, time to done, files and lines changed
    /// and, with `check`, the command's exit status and time, run in every attempt's
    /// worktree at once (`sh -c` in the user's login environment, `PORT` set to the
    /// task's port; each in a session of its own, ended whole at `checkTimeout`). Each
    /// host's attempts are one remote process (`AgentHost.compareWorktrees`), the hosts at
    /// once, beside the hosts' watchers asked for the states. A host that cannot be asked
    /// marks its attempts with `problem`.
    /// - Throws: as `attempts(of:)`, `invalidArgument` (an empty check), `storage`.
    func compareAttempts(of taskID: TaskID, check: String? = nil, checkTimeout: Duration = .seconds(600))
        async throws(AgentError) -> [AttemptComparison]
    {
        if let check, check.trimmingCharacters(in: .whitespaces).isEmpty {
            throw AgentError(.invalidArgument, "the check command is empty")
        }
        let tasks = try await attempts(of: taskID)
        // each host's attempts looked at in one remote process (their changes, the check in
        // every worktree at once), beside the board (the hosts' watchers)
        var byHost: [HostID: (host: HostRecord, tasks: [TaskRecord])] = [:]
        for t in tasks {
            guard let (_, _, host) = try? await context(task: t.id) else { continue }
            byHost[host.id, default: (host, [])].tasks.append(t)
        }
        let groups = Array(byHost.values)
        async let looked = lookAtAttempts(groups, check: check, checkTimeout: checkTimeout)
        let board = try await board(taskIDs: Set(tasks.map(\.id)), includeArchived: true, live: true, countChanges: false)
        let looks = await looked
        let rows = tasks.compactMap { t in board.rows.first { $0.task.id == t.id } }
        return rows.map { row in
            let main = row.agents.first { $0.record.kind == .main } ?? row.agents.first
            var c = AttemptComparison(task: row.task, label: row.task.attempt?.label ?? "", hostName: row.host?.name ?? "?",
                                      agent: main)
            if let status = main?.status {
                switch status.activity {
                case .done, .idle, .exited: c.timeToDone = .seconds(max(0, status.since.timeIntervalSince(row.task.createdAt)))
                default: break
                }
            }
            guard row.host != nil else {
                c.problem = AgentError(.notFound, "the host of \(c.label) is gone from the store")
                return c
            }
            if let e = row.hostError {
                c.problem = e
                return c
            }
            switch looks[row.task.id] {
            case .success(let look)?:
                if let changes = look.changes {
                    (c.filesChanged, c.linesAdded, c.linesRemoved) = (changes.files, changes.linesAdded, changes.linesRemoved)
                } else {
                    c.problem = AgentError(.gitFailed, "cannot count the changes of \(row.task.worktree.path)", detail: look.changesProblem ?? "")
                }
                c.check = look.check
                if check != nil, look.check == nil, c.problem == nil {
                    c.problem = AgentError(.transport, "the check in \(row.task.worktree.path) gave no result")
                }
            case .failure(let e)?: c.problem = e
            case nil: c.problem = AgentError(.notFound, "the project of \(c.label) is gone from the store")
            }
            return c
        }
    }

    /// `command` run in every attempt's worktree at once, as `compareAttempts` runs its
    /// check, and nothing else asked: one remote process per host, the hosts at once.
    /// - Throws: as `attempts(of:)`, `invalidArgument` (an empty command).
    func checkAttempts(of taskID: TaskID, command: String, timeout: Duration = .seconds(600))
        async throws(AgentError) -> [AttemptCheckRun]
    {
        guard !command.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw AgentError(.invalidArgument, "the check command is empty")
        }
        let tasks = try await attempts(of: taskID)
        var byHost: [HostID: (host: HostRecord, tasks: [TaskRecord])] = [:]
        var hostNames: [TaskID: String] = [:]
        for t in tasks {
            guard let (_, _, host) = try? await context(task: t.id) else { continue }
            byHost[host.id, default: (host, [])].tasks.append(t)
            hostNames[t.id] = host.name
        }
        let looks = await lookAtAttempts(Array(byHost.values), counts: false, check: command, checkTimeout: timeout)
        return tasks.map { t in
            var run = AttemptCheckRun(task: t, label: t.attempt?.label ?? "", hostName: hostNames[t.id] ?? "?")
            switch looks[t.id] {
            case .success(let look)?:
                run.check = look.check
                if look.check == nil { run.problem = AgentError(.transport, "the check in \(t.worktree.path) gave no result") }
            case .failure(let e)?: run.problem = e
            case nil: run.problem = AgentError(.notFound, "the project or host of \(run.label) is gone from the store")
            }
            return run
        }
    }

    /// Each host's attempts in one remote process (`AgentHost.compareWorktrees`), the hosts
    /// at once; a host that fails fails its attempts.
    private func lookAtAttempts(_ groups: [(host: HostRecord, tasks: [TaskRecord])], counts: Bool = true, check: String?,
                                checkTimeout: Duration) async
        -> [TaskID: Result<AgentHost.WorktreeLook, AgentError>]
    {
        let providers = providers
        return await withTaskGroup(of: [TaskID: Result<AgentHost.WorktreeLook, AgentError>].self) { group in
            for (host, tasks) in groups {
                group.addTask {
                    do throws(AgentError) {
                        let looks = try await self.onHost(host) { h in
                            let shell = check == nil ? "" : try await h.detectAgents(providers).loginShell
                            return try await h.compareWorktrees(tasks.map { ($0.worktree, $0.port) }, counts: counts, check: check,
                                                                timeout: checkTimeout, loginShell: shell)
                        }
                        return Dictionary(uniqueKeysWithValues: zip(tasks.map(\.id), looks.map { .success($0) }))
                    } catch {
                        return Dictionary(uniqueKeysWithValues: tasks.map { ($0.id, .failure(error)) })
                    }
                }
            }
            var all: [TaskID: Result<AgentHost.WorktreeLook, AgentError>] = [:]
            for await part in group { all.merge(part) { a, _ in a } }
            return all
        }
    }

    /// Keeps one attempt as the work's result: it is marked picked (its branch is the one
    /// to push, open a pull request for or merge), and the others are archived (their
    /// agents stopped, worktrees and branches kept) or, with `.delete`, deleted. Deleting
    /// is refused, before anything is touched, when another attempt holds work that
    /// would be lost (uncommitted changes, commits not pushed), unless `force`.
    /// - Parameters:
    ///   - attempt: the attempt's label (`claude-2`) or its task's id (or a unique prefix
    ///     of 4 characters or more).
    /// - Throws: as `attempts(of:)`; `notFound` (no such attempt), `invalidArgument`
    ///   (another attempt was picked already), `worktreeHasUnsavedWork`, the archive's and
    ///   the delete's errors.
    @discardableResult
    func pickAttempt(_ attempt: String, of taskID: TaskID, others: AttemptDisposal = .archive, force: Bool = false)
        async throws(AgentError) -> PickedAttempt
    {
        let all = try await attempts(of: taskID)
        let byLabel = all.filter { $0.attempt?.label == attempt }
        let byID = attempt.count >= 4 ? all.filter { $0.id.rawValue.hasPrefix(attempt.lowercased()) } : []
        guard var chosen = byLabel.first ?? (byID.count == 1 ? byID.first : nil) else {
            let labels = all.compactMap { $0.attempt?.label }.joined(separator: ", ")
            throw AgentError(.notFound, "no attempt \(attempt) of \(all.first?.title ?? taskID.rawValue); its attempts are \(labels)")
        }
        if let other = all.first(where: { $0.attempt?.pickedAt != nil && $0.id != chosen.id }) {
            throw AgentError(.invalidArgument, "\(other.attempt!.label) was picked already")
        }
        guard chosen.archivedAt == nil else {
            throw AgentError(.taskArchived, "the attempt \(chosen.attempt!.label) is archived")
        }
        let rest = all.filter { $0.id != chosen.id }
        if others == .delete && !force {
            var lost: [String] = []
            for t in rest {
                let (_, _, hostRecord) = try await context(task: t.id)
                let work = try await onHost(hostRecord) { h -> String? in
                    guard try await h.transport.fileExists(t.worktree.path) else { return nil }
                    return try await h.worktrees.unsavedWork(t.worktree)
                }
                if let work { lost.append("\(t.attempt!.label): \(work)") }
            }
            if !lost.isEmpty {
                throw AgentError(.worktreeHasUnsavedWork,
                                 "the other attempts have work that would be lost (nothing was done): " + lost.joined(separator: "; "))
            }
        }
        var picked = PickedAttempt(task: chosen, archived: [], deleted: [], notes: [])
        for t in rest {
            let label = t.attempt!.label
            switch others {
            case .archive:
                guard t.archivedAt == nil else { continue }
                if let note = try await archiveTask(taskID: t.id) { picked.notes.append("\(label): \(note)") }
                picked.archived.append(label)
            case .delete:
                if let note = try await deleteTask(taskID: t.id, force: force) { picked.notes.append("\(label): \(note)") }
                picked.deleted.append(label)
            }
        }
        chosen.attempt!.pickedAt = Date()
        let saved = chosen
        try await stored("recording the pick") { try await store.save(saved) }
        picked.task = chosen
        return picked
    }
}
