/// Landing a task's work (see `AgentWorktrees`' commit, push, pull request and merge).
extension AgentOrchestrator {
    /// Commits every change of the task's worktree; the message defaults to the task's title.
    /// - Throws: `nothingToLand`, `gitFailed`, `notFound`, `transport`.
    func commitTask(taskID: TaskID, message: String? = nil) async throws(AgentError) -> WorktreeCommit {
        let (task, _, host) = try await context(task: taskID)
        return try await onHost(host) { h in try await h.worktrees.commit(task.worktree, message: message ?? task.title) }
    }

    /// Pushes the task's branch to the project's remote, setting its upstream.
    /// - Throws: `nothingToLand`, `noRemote`, `gitFailed`, `notFound`, `transport`.
    func pushTask(taskID: TaskID) async throws(AgentError) -> WorktreePush {
        let (task, _, host) = try await context(task: taskID)
        return try await onHost(host) { h in try await h.worktrees.push(task.worktree) }
    }

    /// Pushes the task's branch and opens its pull request (`gh` on the host), or finds the
    /// open one; without `gh`, the forge's page that opens one. The title defaults to the
    /// task's, the body to its first prompt; an open pull request's title and body are set
    /// only when given. The base defaults to the branch the task was made from.
    /// - Throws: as `pushTask`; `noForge`.
    func openPullRequest(taskID: TaskID, title: String? = nil, body: String? = nil, base: String? = nil)
        async throws(AgentError) -> WorktreePullRequest
    {
        let (task, project, host) = try await context(task: taskID)
        pullRequestCache.forget(project.id)
        return try await onHost(host) { h in
            let into: String?
            if let base { into = base } else { into = try await h.worktrees.baseBranch(of: task.worktree) }
            return try await h.worktrees.pullRequest(task.worktree, title: title ?? task.title,
                                                     body: body ?? task.prompt ?? "", base: into,
                                                     update: title != nil || body != nil, searchPath: h.extraSearchPath)
        }
    }

    /// How the project's setup went in the conversation's session: "ok", "failed with
    /// exit status N", "timed out after N s"; nil while it runs or when it had none.
    func setupOutcome(conversationID: ChatID) async throws(AgentError) -> String? {
        let (_, _, host, session) = try await locate(conversationID)
        return try await onHost(host) { h in try await h.setupOutcome(of: session) }
    }

    /// The state of the task's pull request, as `gh` on the host reports it (nil when it
    /// has none, or the host has no `gh` that is logged in).
    func pullRequestState(taskID: TaskID) async throws(AgentError) -> PullRequestState? {
        let (task, _, host) = try await context(task: taskID)
        return try await onHost(host) { h in try await h.worktrees.pullRequestState(task.worktree, searchPath: h.extraSearchPath) }
    }

    /// Merges the task's branch into `base` (default: the branch it was made from) on the
    /// host, never leaving a half-done merge and never touching a checkout with
    /// uncommitted changes (see `AgentWorktrees.merge`).
    /// - Throws: `checkoutHasChanges`, `mergeConflict`, `invalidArgument` (no base branch:
    ///   the task was made from a commit; give `base`), `gitFailed`, `notFound`, `transport`.
    func mergeTask(taskID: TaskID, into base: String? = nil, mode: WorktreeMerge.Mode = .auto)
        async throws(AgentError) -> WorktreeMerge
    {
        let (task, _, host) = try await context(task: taskID)
        return try await onHost(host) { h in
            let into: String
            if let base {
                into = base
            } else if let found = try await h.worktrees.baseBranch(of: task.worktree) {
                into = found
            } else {
                throw AgentError(.invalidArgument,
                                 "the task was made from \(task.worktree.baseRef), not a branch: say which branch to merge into")
            }
            return try await h.worktrees.merge(task.worktree, into: into, mode: mode,
                                               message: "Merge \(task.worktree.branch): \(task.title)")
        }
    }
}
