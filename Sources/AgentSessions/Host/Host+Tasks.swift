import Foundation
import ServerTransport

/// A new task on the host: its worktree and its agent, in one round trip.
extension AgentHost {
    /// Makes a task's worktree (see `AgentWorktrees.create`) and starts its agent there (see
    /// `startAgent`) in one remote command: the worktree script, then the launch script
    /// written and the tmux session started. `spec` is given the worktree's path as its
    /// directory and makes the session's spec. When the agent's start fails (or its typed
    /// prompt cannot be typed), its session and the new worktree (no work in it yet) are
    /// removed again before the error is thrown.
    ///
    /// A host without tmux, and an agent that takes its prompt from a file, take the two
    /// steps one after the other.
    /// - Throws: the errors of `AgentWorktrees.create` and of `startAgent`.
    func createWorktreeAndStart(projectPath: String, title: String, unixMilliseconds: Int64? = nil, baseRef: String?,
                                fetchBase: Bool = false,
                                spec makeSpec: (_ directory: String) async throws(AgentError) -> AgentSessionSpec)
        async throws(AgentError) -> (worktree: Worktree, session: AgentSession)
    {
        let planned = try await worktrees.plannedWorktree(projectPath: projectPath, title: title,
                                                          unixMilliseconds: unixMilliseconds)
        let spec = try await makeSpec(planned.path)
        let start = try await prepareStart(spec, directory: planned.path)
        guard start.hasTmux, start.launch.promptFile == nil else {
            let worktree = try await worktrees.create(planned, baseRef: baseRef, fetchBase: fetchBase)
            var moved = spec
            moved.workingDirectory = worktree.path
            do {
                return (worktree, try await startAgent(moved))
            } catch {
                await undo(nil, worktree)
                throw error
            }
        }
        let launchFile = AgentLauncher.fileName(spec.ptyID, nonce: start.nonce)
        let tmuxArgs = tmux.newSessionArguments(name: start.name, directory: planned.path, size: spec.size, argv: start.argv)
        let script = AgentWorktrees.createWorktreeScript + "\nshift 6\n" + AgentLauncher.writeThenRunScript
        let r: ProcessResult
        do {
            r = try await run("/bin/sh", ["-c", script, "sh"] + planned.arguments(baseRef: baseRef, fetchBase: fetchBase) + [launchFile, "tmux"] + tmuxArgs,
                              stdin: Array(start.script.utf8), timeout: AgentWorktrees.createTimeout, idempotent: false,
                              what: "adding the worktree and starting the agent")
        } catch {
            // cancelled, timed out or cut off midway: the worktree and the session may exist
            await undo(start.session, planned.expected)
            throw error
        }
        guard let worktree = planned.made(by: r) else { throw worktrees.worktreeFailure(r, project: planned.project) }
        guard r.exitStatus == .exited(0) else {
            await undo(nil, worktree)
            let detail = r.stderrString.trimmingCharacters(in: .whitespacesAndNewlines)
            if r.exitStatus == .exited(127) {
                throw AgentError(.tmuxUnavailable, "tmux is not installed on \(displayName)", detail: detail)
            }
            throw AgentError(.tmuxFailed, "tmux could not start the session \(start.name)", detail: detail)
        }
        if let typed = start.launch.typedInput {
            do {
                try await typeWhenReady(start.name, typed, readyWhenShowing: spec.provider.readyScreen)
            } catch {
                // the prompt never reached the agent (cancelled, or the host failed): the
                // task goes again, whole
                await undo(start.session, worktree)
                throw error
            }
        }
        return (worktree, start.session)
    }

    /// Stops the session and removes the fresh worktree (and its branch), even when the
    /// calling task was cancelled (the cleanup runs in a task of its own, which nothing
    /// cancels). What does not exist is skipped.
    private func undo(_ session: AgentSession?, _ worktree: Worktree) async {
        await Task { [self] in
            if let session { _ = try? await stop(session) }
            _ = try? await worktrees.remove(worktree, force: true)
        }.value
    }
}
