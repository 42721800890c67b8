import Foundation
import SSHKit
import ServerTransport

/// A task's environment on its host: its own port, its setup's outcome, its teardown.
extension AgentHost {
    /// The ports tasks are given: `PORT` in their environment, one task each on a host.
    public static let taskPorts = 3100...3999

    /// Claims the first port of `taskPorts` that no task of this user on the host holds
    /// and nothing listens on (a directory per port under the engine's cache, made
    /// atomically, so two engines never claim one port). The claim names the task and its
    /// worktree: a claim whose worktree is gone (its task was deleted without giving the
    /// port back: a lost store, a crash) is taken over, once it is older than the 15
    /// minutes a worktree may take to be made (a task claims its port before its worktree
    /// exists, and tasks made at once must not take each other's). Claims and releases go
    /// one at a time on the host (`portsLock`). The held ports are listed once,
    /// so a host with many claims is scanned without a process per port.
    /// - Returns: the port, or nil when all are taken.
    func claimPort(taskID: String, worktree: String) async throws(AgentError) -> Int? {
        let script = #"""
            d="$HOME/.cache/sshkit-agents/ports"; mkdir -p "$d" || exit 1
            """# + Self.portsLock + #"""
            held=" $(cd "$d" && echo *) "
            p=$2
            while [ "$p" -le "$3" ]; do
                case "$held" in
                *" $p "*)
                    # held: taken over only when its worktree is gone and the claim is older
                    # than a worktree takes to be made (a fresh claim's worktree may be coming)
                    w=; [ -f "$d/$p/worktree" ] && read -r w < "$d/$p/worktree"
                    if [ -z "$w" ] || [ -d "$w" ] || [ -z "$(find "$d/$p" -maxdepth 0 -mmin +15 2>/dev/null)" ] \
                        || ! rm -rf "$d/$p"; then p=$((p + 1)); continue; fi ;;
                esac
                if mkdir "$d/$p" 2>/dev/null; then
                    h=$(printf '%04X' "$p")
                    if [ -r /proc/net/tcp ] && awk -v h=":$h" '$4 == "0A" && substr($2, length($2) - 4) == h { f = 1 } END { exit !f }' \
                        /proc/net/tcp /proc/net/tcp6 2>/dev/null; then
                        rmdir "$d/$p"   # something listens there already
                    else
                        printf '%s\n' "$1" > "$d/$p/task"; printf '%s\n' "$4" > "$d/$p/worktree"; echo "$p"; exit 0
                    fi
                fi
                p=$((p + 1))
            done
            exit 3
            """#
        let r = try await run("/bin/sh", ["-c", script, "sh", taskID, "\(Self.taskPorts.lowerBound)", "\(Self.taskPorts.upperBound)",
                                          worktree],
                              idempotent: false, what: "claiming a port for the task")
        return r.exitStatus == .exited(0) ? Int(r.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)) : nil
    }

    /// Records where the task holding `port` made its worktree, when it is not where the
    /// claim said.
    func movePortClaim(_ port: Int, taskID: String, worktree: String) async throws(AgentError) {
        let script = #"""
            f="$HOME/.cache/sshkit-agents/ports/$1"
            [ "$(cat "$f/task" 2>/dev/null)" = "$2" ] && printf '%s\n' "$3" > "$f/worktree"; exit 0
            """#
        _ = try await run("/bin/sh", ["-c", script, "sh", "\(port)", taskID, worktree], what: "recording the task's port")
    }

    /// One claim or release of the host's ports at a time: a takeover is a look, a removal
    /// and a claim, which two at once could both make of one port. A lock directory
    /// (`$d/.lock`, which `echo *` does not list); one left by a run that died is taken
    /// over after a minute.
    static let portsLock = AgentWorktrees.hostLock(at: "$d/.lock", tries: 400, failure: 4)

    /// Gives a task's port back (only when that task holds it).
    func releasePort(_ port: Int, taskID: String) async throws(AgentError) {
        let script = #"""
            d="$HOME/.cache/sshkit-agents/ports"; [ -d "$d" ] || exit 0
            """# + Self.portsLock + #"""
            [ "$(cat "$d/$1/task" 2>/dev/null)" = "$2" ] && rm -rf "$d/$1"; exit 0
            """#
        _ = try await run("/bin/sh", ["-c", script, "sh", "\(port)", taskID], what: "releasing the task's port")
    }

    /// How the setup of the agent's session went: "ok", "failed with exit status N",
    /// "timed out after N s"; nil while it runs or when there was none.
    public func setupOutcome(of session: AgentSession) async throws(AgentError) -> String? {
        let r = try await run("/bin/sh", ["-c", "cat \"$HOME/\(AgentLauncher.directory)/status/$1.setup\" 2>/dev/null", "sh",
                                          session.ptyID.description], what: "reading the setup's outcome")
        let text = r.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : text
    }

    /// Runs a project's teardown command in `directory` (with `PORT` when given), ended
    /// after `timeout`.
    /// - Returns: nil when it succeeded, else what went wrong (its last lines).
    func teardown(_ command: String, in directory: String, port: Int?, timeout: Duration = .seconds(120))
        async throws(AgentError) -> String?
    {
        let script = #"""
            cd "$1" 2>/dev/null || { echo "the worktree is gone"; exit 0; }
            [ -n "$3" ] && { PORT=$3; export PORT; }
            sh -c "$2" 2>&1
            """#
        let r: ProcessResult
        do {
            r = try await shell.transport.runProcess("/bin/sh", arguments: ["-c", script, "sh", directory, command, port.map(String.init) ?? ""],
                                                     stdin: [], environment: [:], timeout: timeout)
        } catch where error.code == .timedOut {
            return "the teardown did not finish in \(timeout)"
        } catch {
            throw AgentError(error, while: "running the teardown")
        }
        guard r.exitStatus != .exited(0) else { return nil }
        let last = r.stdoutString.split(separator: "\n").suffix(3).joined(separator: "; ")
        return "the teardown failed (\(r.exitStatus))" + (last.isEmpty ? "" : ": \(last)")
    }
}
