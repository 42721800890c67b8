import Foundation
import SSHKit
import ServerTransport

/// A task's environment on its host: its own port, its setup's outcome, its teardown.
extension AgentHost {
    /// The ports tasks are given: `PORT` in their environment, one task each on a host.
    public static let taskPorts = 3100...3999

    /// Claims the first port of `taskPorts` that no task of this user on the host holds
    /// and nothing listens on (see `claimPortFunction`).
    /// - Returns: the port, or nil when all are taken.
    func claimPort(taskID: TaskID, worktree: String) async throws(AgentError) -> Int? {
        let r = try await run("/bin/sh", ["-c", Self.claimPortFunction + #"claim_port "$@""#, "sh", taskID.rawValue,
                                          "\(Self.taskPorts.lowerBound)", "\(Self.taskPorts.upperBound)", worktree, tmux.socket],
                              idempotent: false, what: "claiming a port for the task")
        return r.exitStatus == .exited(0) ? Int(r.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)) : nil
    }

    /// A shell function, `claim_port TASK LOW HIGH WORKTREE SOCKET`, that claims the first
    /// port from LOW to HIGH that no task of this user on the host holds and nothing
    /// listens on (a directory per port under the engine's cache, made atomically, so two
    /// engines never claim one port), prints it and exits 0; exit 3 when all are taken, 4
    /// when the lock could not be had. It ends its shell: call it in a subshell (`$(…)`)
    /// or last. The claim names the task, its worktree and the tmux server of its agents.
    /// A claim whose task's worktree and main agent's tmux session are both gone (its task
    /// was deleted without giving the port back: a lost store, a crash; or a claim of an
    /// earlier release, which named no worktree) is taken over, once it is older than the
    /// 15 minutes a worktree may take to be made (a claim made before its worktree exists
    /// must not be taken by a task made at the same time). Claims and releases go one at a
    /// time (`portsLock`); a claim of a port nobody holds needs no lock (`mkdir` decides).
    /// The old claims are listed once, and the tmux sessions at most once per server, so a
    /// host with many claims is scanned without a process per port, and the usual claim
    /// (the first free port) costs two processes.
    static let claimPortFunction = #"""
        claim_port() {
            d="$HOME/.cache/sshkit-agents/ports"; [ -d "$d" ] || mkdir -p "$d" || exit 1
        """# + claimIsLive + #"""
            # whether something listens on port $1: ss asks the kernel for the listening
            # sockets only; /proc/net/tcp lists every socket (slow with a large table)
            listening() {
                if l=$(ss -Hltn "sport = :$1" 2>/dev/null); then [ -n "$l" ]
                elif [ -r /proc/net/tcp ]; then
                    awk -v p="$1" 'BEGIN { h = sprintf(":%04X", p) } $4 == "0A" && substr($2, length($2) - 4) == h { f = 1 } END { exit !f }' \
                        /proc/net/tcp /proc/net/tcp6 2>/dev/null
                else false
                fi
            }
            held=" " old= locked= nl='
        '
            for c in "$d"/[0-9]*; do [ -d "$c" ] && held="$held${c##*/} "; done
            p=$2
            while [ "$p" -le "$3" ]; do
                case "$held" in
                *" $p "*)
                    # held: taken over only when older than a worktree takes to be made (the
                    # old ones listed once) and no longer live, under the lock; a claim whose
                    # worktree is there is passed over first, without a process
                    lw=; [ -f "$d/$p/worktree" ] && read -r lw < "$d/$p/worktree"
                    if [ -n "$lw" ] && [ -d "$lw" ]; then p=$((p + 1)); continue; fi
                    [ -n "$old" ] || old="$nl$(find "$d" -mindepth 1 -maxdepth 1 -mmin +15 2>/dev/null)$nl"
                    case "$old" in *"$nl$d/$p$nl"*) ;; *) p=$((p + 1)); continue ;; esac
                    if live "$d/$p" "$5"; then p=$((p + 1)); continue; fi
                    if [ -z "$locked" ]; then
        """# + portsLock + #"""
                        locked=1
                    fi
                    # looked at again under the lock: another claimer may have taken it over
                    # meanwhile (a fresh claim then)
                    if [ -z "$(find "$d/$p" -maxdepth 0 -mmin +15 2>/dev/null)" ] || live "$d/$p" "$5" || ! rm -rf "$d/$p"; then
                        p=$((p + 1)); continue
                    fi ;;
                esac
                if mkdir "$d/$p" 2>/dev/null; then
                    if listening "$p"; then
                        rmdir "$d/$p"   # something listens there already
                    else
                        printf '%s\n' "$1" > "$d/$p/task"; printf '%s\n' "$4" > "$d/$p/worktree"
                        printf '%s\n' "$5" > "$d/$p/tmux"; echo "$p"; exit 0
                    fi
                else
                    # claimed since the claims were listed (another task made at once): listed
                    # again, so the ports it and the others took are passed over without a mkdir
                    held=" "; for c in "$d"/[0-9]*; do [ -d "$c" ] && held="$held${c##*/} "; done
                fi
                p=$((p + 1))
            done
            exit 3
        }

        """#

    /// One takeover of the host's ports at a time: a takeover is a look, a removal and a
    /// claim, which two at once could both make of one port. `HostLock` at `$d/.lock`
    /// (neither it nor `$d/.lock.flock` is listed by the claims' `[0-9]*`).
    static let portsLock = HostLock.lines(at: "$d/.lock", tries: 400, failure: 4)

    /// A shell function, `live CLAIM SOCKET`: whether the claim's task still has its
    /// worktree or its main agent's tmux session (on the claim's own tmux server, else
    /// `SOCKET`). The sessions of a server are listed once per run.
    static let claimIsLive = #"""
        listed=
        live() {
            lw=; lt=; ls=$2
            [ -f "$1/worktree" ] && read -r lw < "$1/worktree"
            [ -n "$lw" ] && [ -d "$lw" ] && return 0
            [ -f "$1/task" ] && read -r lt < "$1/task"
            [ -f "$1/tmux" ] && read -r ls < "$1/tmux"
            [ -n "$lt" ] || return 1
            case "$listed" in
            "$ls "*) ;;
            *) listed="$ls $(tmux -L "$ls" -f /dev/null list-sessions -F '#{session_name}' 2>/dev/null | tr '\n' ' ')" ;;
            esac
            case " ${listed#* } " in *"-main-$lt "*) return 0 ;; esac
            return 1
        }

        """#

    /// The port claims on the host made for this tmux server's agents, or made by an
    /// earlier release (which did not say for which): each port with its task, its worktree
    /// (nil for a claim of an earlier release), whether it is still live (`claimIsLive`)
    /// and whether it is older than 15 minutes. Claims for other tmux servers (another
    /// store's, on the same user) are not listed.
    func portClaims() async throws(AgentError) -> [AgentPortClaim] {
        let script = #"""
            d="$HOME/.cache/sshkit-agents/ports"; [ -d "$d" ] || exit 0
            """# + Self.claimIsLive + #"""
            for c in "$d"/[0-9]*; do
                [ -d "$c" ] || continue
                t=; w=; s=; { read -r t < "$c/task"; read -r w < "$c/worktree"; read -r s < "$c/tmux"; } 2>/dev/null
                [ -z "$s" ] || [ "$s" = "$1" ] || continue
                l=0; live "$c" "$1" && l=1
                o=0; [ -n "$(find "$c" -maxdepth 0 -mmin +15 2>/dev/null)" ] && o=1
                printf '%s\t%s\t%s\t%s\t%s\n' "${c##*/}" "$l" "$o" "$t" "$w"
            done
            exit 0
            """#
        let r = try await run("/bin/sh", ["-c", script, "sh", tmux.socket], what: "listing the port claims")
        return r.stdoutString.split(separator: "\n").compactMap { line in
            let f = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard f.count == 5, let port = Int(f[0]) else { return nil }
            return AgentPortClaim(port: port, taskID: TaskID(f[3]), worktree: f[4].isEmpty ? nil : f[4], isLive: f[1] == "1",
                                  isOld: f[2] == "1")
        }
    }

    /// Gives a task's port back (only when that task holds it).
    func releasePort(_ port: Int, taskID: TaskID) async throws(AgentError) {
        let script = #"""
            d="$HOME/.cache/sshkit-agents/ports"; [ -d "$d" ] || exit 0
            """# + Self.portsLock + #"""
            [ "$(cat "$d/$1/task" 2>/dev/null)" = "$2" ] && rm -rf "$d/$1"; exit 0
            """#
        _ = try await run("/bin/sh", ["-c", script, "sh", "\(port)", taskID.rawValue], what: "releasing the task's port")
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
