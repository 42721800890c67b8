import Foundation
import SSHKit

/// A task you act on: its agents, its changes, landing its work, its port, its attempts.
/// A handle holds the task's id and the engine, nothing else; each call reads the task's
/// records afresh, so a handle kept for a while acts on the task as it is now. The task's
/// own rules (an archived task takes no input, work that would be lost is kept unless
/// forced) are kept by the engine behind each call.
///
/// ```swift
/// let task = engine.task(record.id)
/// try await task.main().send("and add a test")
/// let diff = try await task.diff()
/// try await task.commit(message: "Fix the flaky test")
/// ```
public struct TaskHandle: Sendable, Hashable {
    public let id: TaskID
    let engine: AgentOrchestrator

    public static func == (a: Self, b: Self) -> Bool { a.id == b.id && a.engine === b.engine }
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    /// The task's record now.
    /// - Throws: `notFound`, `storage`.
    public func record() async throws(AgentError) -> TaskRecord { try await engine.records.task(id) }

    /// Its agents: the main one first, then the chats added to it.
    public func chats() async throws(AgentError) -> [ChatHandle] {
        try await engine.records.chats(of: id).map { ChatHandle(id: $0.id, engine: engine) }
    }

    /// Its main agent.
    /// - Throws: `notFound` when it has none.
    public func main() async throws(AgentError) -> ChatHandle {
        let record = try await record()
        return ChatHandle(id: try await engine.records.chat(of: record, named: nil).id, engine: engine)
    }

    // MARK: its agents

    /// Adds a chat: another agent (or the same) in the task's worktree.
    /// - Throws: `taskArchived`, and as `AgentOrchestrator.createTask`.
    @discardableResult
    public func addChat(providerID: String, prompt: String? = nil, autoApprove: Bool = false)
        async throws(AgentError) -> (chat: ChatHandle, conversation: ConversationRecord, session: AgentSession)
    {
        let (c, s) = try await engine.addChat(taskID: id, providerID: providerID, prompt: prompt, autoApprove: autoApprove)
        return (ChatHandle(id: c.id, engine: engine), c, s)
    }

    /// Starts every agent of the task that does not run (each as `ChatHandle.resume`).
    /// - Throws: `taskArchived`, and as `ChatHandle.resume`.
    @discardableResult
    public func resume() async throws(AgentError) -> [(conversation: ConversationRecord, session: AgentSession)] {
        try await engine.resumeTask(taskID: id)
    }

    /// Stops every agent of the task; its worktree stays.
    public func stop() async throws(AgentError) { try await engine.stop(taskID: id) }

    /// Stops its agents and marks it archived; its worktree and branch stay.
    /// - Returns: what went wrong with the project's teardown command, if it failed.
    @discardableResult
    public func archive() async throws(AgentError) -> String? { try await engine.archiveTask(taskID: id) }

    /// Kills its agents, removes its worktree and branch, then its records. Refused with
    /// `worktreeHasUnsavedWork` before anything is touched unless `force`.
    /// - Returns: what went wrong with the project's teardown command, if it failed.
    @discardableResult
    public func delete(force: Bool = false) async throws(AgentError) -> String? {
        try await engine.deleteTask(taskID: id, force: force)
    }

    /// Tells an agent that stopped at its usage limit to go on, now or after `wait`.
    public func continueAfterLimit(_ wait: Duration?) async throws(AgentError) {
        try await engine.continueAfterLimit(wait, taskID: id)
    }

    // MARK: its changes

    /// What changed against the task's base, per file.
    public func diff() async throws(AgentError) -> WorktreeDiff { try await engine.diff(taskID: id) }

    /// One file's patch against the base (at most `maxBytes`).
    public func patch(file: String, maxBytes: Int = 256 * 1024) async throws(AgentError) -> WorktreeFilePatch {
        try await engine.patch(taskID: id, file: file, maxBytes: maxBytes)
    }

    /// How many files changed against the base.
    public func changedFileCount() async throws(AgentError) -> Int { try await engine.changedFileCount(taskID: id) }

    // MARK: landing its work

    /// Commits everything in the worktree (message: the task's title when nil).
    public func commit(message: String? = nil) async throws(AgentError) -> WorktreeCommit {
        try await engine.commitTask(taskID: id, message: message)
    }

    /// Pushes the task's branch to the project's remote.
    public func push() async throws(AgentError) -> WorktreePush { try await engine.pushTask(taskID: id) }

    /// Opens a pull request for the branch (pushed first when it is not).
    public func openPullRequest(title: String? = nil, body: String? = nil, base: String? = nil)
        async throws(AgentError) -> WorktreePullRequest
    {
        try await engine.openPullRequest(taskID: id, title: title, body: body, base: base)
    }

    /// The branch's pull request as `gh` on the host knows it, nil without one.
    public func pullRequestState() async throws(AgentError) -> PullRequestState? {
        try await engine.pullRequestState(taskID: id)
    }

    /// Merges the branch into `base` (the task's base when nil) on the host.
    public func merge(into base: String? = nil, mode: WorktreeMerge.Mode = .auto) async throws(AgentError) -> WorktreeMerge {
        try await engine.mergeTask(taskID: id, into: base, mode: mode)
    }

    /// Brings the task's branch into a local clone at `directory`.
    public func fetch(into directory: String, force: Bool = false) async throws(AgentError) -> TaskFetch {
        try await engine.fetchTask(taskID: id, into: directory, force: force)
    }

    // MARK: its port

    /// Forwards the task's port to this machine (`localPort`, or the same number when free).
    public func openPort(localPort: Int? = nil) async throws(AgentError) -> TaskPortForward {
        try await engine.openPort(taskID: id, localPort: localPort)
    }

    /// What happens to the open forward: lost with its connection, restored, closed.
    public func portEvents() -> AsyncStream<TaskPortEvent> { engine.portEvents(taskID: id) }

    /// Closes the forward, if any.
    public func closePort() async { await engine.closePort(taskID: id) }

    // MARK: its attempts

    /// The attempts of the work this task is one of, in their label order.
    /// - Throws: `notAnAttempt` for a single task.
    public func attempts() async throws(AgentError) -> [TaskRecord] { try await engine.attempts(of: id) }

    /// The attempts side by side: their state, their changes, and `check` run in each.
    public func compareAttempts(check: String? = nil, checkTimeout: Duration = .seconds(600))
        async throws(AgentError) -> [AttemptComparison]
    {
        try await engine.compareAttempts(of: id, check: check, checkTimeout: checkTimeout)
    }

    /// `command` run in every attempt's worktree at once (`sh -c` in the user's login
    /// environment, `PORT` set to the attempt's port, each ended whole at `timeout`), and
    /// nothing else asked: one remote process per host, the hosts at once. For the state and
    /// the changes beside it, `compareAttempts(check:)`.
    public func checkAttempts(_ command: String, timeout: Duration = .seconds(600)) async throws(AgentError) -> [AttemptCheckRun] {
        try await engine.checkAttempts(of: id, command: command, timeout: timeout)
    }

    /// Picks one attempt (by label or id prefix) as the work's result; the others are
    /// archived or deleted.
    @discardableResult
    public func pickAttempt(_ attempt: String, others: AttemptDisposal = .archive, force: Bool = false)
        async throws(AgentError) -> PickedAttempt
    {
        try await engine.pickAttempt(attempt, of: id, others: others, force: force)
    }
}
