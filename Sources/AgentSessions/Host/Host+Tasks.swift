import Foundation
import ServerTransport

/// A new task on the host: its worktree, its port and its agent, in one round trip.
extension AgentHost {
    /// What `createWorktreeAndStart` made.
    struct CreatedTask {
        var worktree: Worktree
        var session: AgentSession
        /// The task's own port, when one was asked for and one was free.
        var port: Int?
    }

    /// Makes a task's worktree (see `AgentWorktrees.create`), claims its port (see
    /// `claimPortFunction`; `PORT` in its agent's environment unless the settings set it)
    /// and starts its agent there (see `startAgent`), then makes sure the host's status
    /// watcher runs, all in one remote command. `spec` is given the worktree's path as its
    /// directory and makes the session's spec. When the agent's start fails (or its typed
    /// prompt cannot be typed), its session, the new worktree (no work in it yet) and the
    /// port are given back before the error is thrown.
    ///
    /// A host without tmux, and an agent that takes its prompt from a file, take the steps
    /// one after the other.
    /// - Parameters:
    ///   - baseIsKnownCommit: `baseRef` is a commit the repository has (the attempts'
    ///     base): taken without a look.
    ///   - portFor: the task a port is claimed for; nil for none.
    ///   - watcher: the screen rules the host's watcher follows the agent with; nil to
    ///     leave the watcher as it is.
    /// - Throws: the errors of `AgentWorktrees.create` and of `startAgent`.
    func createWorktreeAndStart(projectPath: String, title: String, unixMilliseconds: Int64? = nil, baseRef: String?,
                                fetchBase: Bool = false, baseIsKnownCommit: Bool = false, portFor taskID: TaskID? = nil,
                                watcher rules: AgentScreenRules? = nil,
                                spec makeSpec: (_ directory: String) async throws(AgentError) -> AgentSessionSpec)
        async throws(AgentError) -> CreatedTask
    {
        let planned = try await worktrees.plannedWorktree(projectPath: projectPath, title: title,
                                                          unixMilliseconds: unixMilliseconds)
        let spec = try await makeSpec(planned.path)
        let start = try await prepareStart(spec, directory: planned.path)
        guard start.hasTmux, start.launch.promptFile == nil else {
            return try await createThenStart(planned, spec: spec, baseRef: baseRef, fetchBase: fetchBase,
                                             baseIsKnownCommit: baseIsKnownCommit, portFor: taskID, watcher: rules)
        }
        let launchFile = AgentLauncher.fileName(spec.ptyID, nonce: start.nonce)
        let tmuxArgs = tmux.newSessionArguments(name: start.name, directory: planned.path, size: spec.size, argv: start.argv)
        let script = Self.claimPortFunction + Self.claimBesideTheAddScript + AgentWorktrees.createWorktreeScript
            + Self.startInWorktreeScript
        let watcherArguments = rules.map { rules in
            [AgentStatusWatcher.ensureScript, "\(AgentStatusWatcher.version)", AgentStatusWatcher.rulesDigest(rules),
             AgentStatusWatcher.scriptDigest]
        } ?? ["", "", "", ""]
        let arguments = planned.arguments(baseRef: baseRef, fetchBase: fetchBase, baseIsKnownCommit: baseIsKnownCommit)
            + [taskID?.rawValue ?? "", "\(Self.taskPorts.lowerBound)", "\(Self.taskPorts.upperBound)", tmux.socket, launchFile]
            + watcherArguments + ["tmux"] + tmuxArgs
        let r: ProcessResult
        do {
            r = try await run("/bin/sh", ["-c", script, "sh"] + arguments, stdin: Array(start.script.utf8),
                              timeout: AgentWorktrees.createTimeout, idempotent: false,
                              what: "adding the worktree and starting the agent")
        } catch {
            // cancelled, timed out or cut off midway: the worktree and the session may exist
            // (a port claimed meanwhile is taken over once its worktree is gone)
            await undo(start.session, planned.expected, port: nil, taskID: taskID)
            throw error
        }
        let lines = r.stdoutString.split(separator: "\n").map(String.init)
        let port = lines.first { $0.hasPrefix("port ") }.flatMap { Int($0.dropFirst(5)) }
        guard let worktree = planned.made(by: r) else {
            if let port, let taskID { _ = try? await releasePort(port, taskID: taskID) }
            throw worktrees.worktreeFailure(r, project: planned.project)
        }
        guard r.exitStatus == .exited(0) else {
            await undo(nil, worktree, port: port, taskID: taskID)
            let detail = r.stderrString.trimmingCharacters(in: .whitespacesAndNewlines)
            if r.exitStatus == .exited(127) {
                throw AgentError(.tmuxUnavailable, "tmux is not installed on \(displayName)", detail: detail)
            }
            throw AgentError(.tmuxFailed, "tmux could not start the session \(start.name)", detail: detail)
        }
        // the watcher's files are not on the host yet (its first use there, or a new
        // release): written, and the watcher started, in the usual way
        if let rules, !lines.contains("watcher running") && !lines.contains("watcher starting") {
            _ = try? await watcherSnapshot(rules: rules)
        }
        if let typed = start.launch.typedInput {
            do {
                try await typeWhenReady(start.name, typed, readyWhenShowing: spec.provider.readyScreen)
            } catch {
                // the prompt never reached the agent (cancelled, or the host failed): the
                // task goes again, whole
                await undo(start.session, worktree, port: port, taskID: taskID)
                throw error
            }
        }
        return CreatedTask(worktree: worktree, session: start.session, port: port)
    }

    /// The steps of `createWorktreeAndStart` one after the other: for a host without tmux,
    /// and for an agent whose prompt is written to a file first.
    private func createThenStart(_ planned: AgentWorktrees.PlannedWorktree, spec: AgentSessionSpec, baseRef: String?,
                                 fetchBase: Bool, baseIsKnownCommit: Bool, portFor taskID: TaskID?, watcher rules: AgentScreenRules?)
        async throws(AgentError) -> CreatedTask
    {
        let worktree = try await worktrees.create(planned, baseRef: baseRef, fetchBase: fetchBase, baseIsKnownCommit: baseIsKnownCommit)
        var port: Int?
        do {
            if let taskID { port = try await claimPort(taskID: taskID, worktree: worktree.path) }
            var moved = spec
            moved.workingDirectory = worktree.path
            if let port, moved.settings.environment["PORT"] == nil { moved.settings.environment["PORT"] = String(port) }
            let session = try await startAgent(moved)
            if let rules, session.survivesDisconnect { _ = try? await watcherSnapshot(rules: rules) }
            return CreatedTask(worktree: worktree, session: session, port: port)
        } catch {
            await undo(nil, worktree, port: port, taskID: taskID)
            throw error
        }
    }

    /// What `createWorktreeAndStart` runs before `createWorktreeScript` (with
    /// `claimPortFunction` defined): the port claimed in the background, beside the
    /// worktree's add (which ports listen is slow to read on some kernels), printing
    /// `port N`. It keeps the channel's output open, so the channel ends after it even
    /// when the add fails, and the port it printed is given back.
    static let claimBesideTheAddScript = #"""
        claimer=
        if [ -n "$7" ]; then
            ( port=$(claim_port "$7" "$8" "$9" "$4" "${10}") && printf 'port %s\n' "$port" ) </dev/null & claimer=$!
        fi

        """#

    /// What `createWorktreeAndStart` runs after `createWorktreeScript` (with
    /// `claimBesideTheAddScript` before it): the port's claim waited for, the launch script written (from
    /// standard input; `PORT` on its first line) and the command run; then, when the
    /// command succeeded, the status watcher made sure of: left alone when it runs at this
    /// version with these rules, else started (or an older one replaced) by its ensure
    /// script in the background, beside the agent's start. Arguments after the worktree's
    /// six: the task (empty: no port), the ports' range, the tmux socket, the launch file's
    /// name, the watcher's ensure script (empty: leave the watcher), its version, the
    /// rules' digest and the script's digest, then the command. Prints
    /// `watcher running|starting|missing` (missing: its files must be written first);
    /// exits with the command's status. Only the launch file's write and the command
    /// start processes.
    static let startInWorktreeScript = #"""

        shift 6
        task=$1 lo=$2 hi=$3 sock=$4 launch=$5 ensure=$6 wv=$7 wsum=$8 wh=$9; shift 9
        port=
        if [ -n "$claimer" ] && wait "$claimer"; then
            for c in "$HOME/.cache/sshkit-agents/ports"/[0-9]*; do
                t=; [ -f "$c/task" ] && read -r t < "$c/task"
                [ "$t" = "$task" ] && { port=${c##*/}; break; }
            done
        fi
        f="$HOME/.cache/sshkit-agents/$launch"
        umask 077 && { [ -d "${f%/*}" ] || mkdir -p "${f%/*}"; } && { [ -z "$port" ] || printf 'PORT=%s; export PORT\n' "$port"; cat; } > "$f" || exit 1
        """# + "\n" + AgentLauncher.runOnceMoreWhenTmuxExited + "\n" + #"""
        if [ $s != 0 ]; then rm -f -- "$f"; exit $s; fi
        if [ -n "$ensure" ]; then
            W="$HOME/.cache/sshkit-agents/watch/tmux-$sock" pid= rv= rh= sum=
            [ -f "$W/pid" ] && read -r pid < "$W/pid"
            [ -f "$W/version" ] && read -r rv rh < "$W/version"
            [ -f "$W/rules.sum" ] && read -r sum < "$W/rules.sum"
            if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ "$rv" = "$wv" ] && [ "$rh" = "$wh" ] && [ "$sum" = "$wsum" ]; then
                echo 'watcher running'
            elif [ -f "$W/../watcher-$wv-$wh.sh" ] && [ "$sum" = "$wsum" ]; then
                ( sh -c "$ensure" sh "$wv" "$sock" "$wsum" '' "$wh" quiet ) </dev/null >/dev/null 2>&1 &
                echo 'watcher starting'
            else
                echo 'watcher missing'
            fi
        fi
        exit 0
        """#

    /// Stops the session, removes the fresh worktree (and its branch) and gives the port
    /// back, even when the calling task was cancelled (the cleanup runs in a task of its
    /// own, which nothing cancels). What does not exist is skipped.
    private func undo(_ session: AgentSession?, _ worktree: Worktree, port: Int?, taskID: TaskID?) async {
        await Task { [self] in
            if let session { _ = try? await stop(session) }
            _ = try? await worktrees.remove(worktree, force: true)
            if let port, let taskID { _ = try? await releasePort(port, taskID: taskID) }
        }.value
    }
}
