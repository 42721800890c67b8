import Foundation
import SSHKit
import ServerTransport

/// What a host does for attempts spread over several hosts: which of its checkouts is a
/// clone of a repository, whether a commit is there, the commits sent from one host to
/// another as a git bundle, a clone made, a check command run in a worktree.
extension AgentHost {
    /// A checkout's identity: its origin's URL (empty when it has none) and its root
    /// commits (at most 50).
    struct RepositoryIdentity: Sendable, Hashable {
        var origin: String
        var roots: Set<String>

        /// The same repository: the same origin (as forge and path), or a root commit in common.
        func isSameRepository(as other: RepositoryIdentity) -> Bool {
            if !origin.isEmpty, !other.origin.isEmpty, AgentOrchestrator.sameOrigin(origin, other.origin) { return true }
            return !roots.isDisjoint(with: other.roots)
        }
    }

    /// The identity of each checkout at `paths` (nil for a path that is not a checkout),
    /// in one round trip.
    func repositoryIdentities(_ paths: [String]) async throws(AgentError) -> [String: RepositoryIdentity] {
        guard !paths.isEmpty else { return [:] }
        let script = #"""
            for p in "$@"; do
                printf '\036%s\n' "$p"
                git -C "$p" rev-parse --git-dir >/dev/null 2>&1 </dev/null || { echo none; continue; }
                echo repo
                git -C "$p" config --get remote.origin.url </dev/null || echo
                git -C "$p" rev-list --max-parents=0 --all 2>/dev/null </dev/null | head -n 50
            done
            """#
        let r = try await run("/bin/sh", ["-c", script, "sh"] + paths, what: "reading the projects' origins")
        var out: [String: RepositoryIdentity] = [:]
        for part in r.stdoutString.split(separator: "\u{1E}") {
            let lines = part.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            guard lines.count >= 3, lines[1] == "repo" else { continue }
            out[lines[0]] = RepositoryIdentity(origin: lines[2], roots: Set(lines.dropFirst(3).filter { $0.count >= 40 }))
        }
        return out
    }

    /// Whether the checkout at `projectPath` has the commit.
    func hasCommit(_ commit: String, in projectPath: String) async throws(AgentError) -> Bool {
        let r = try await run("git", ["-C", projectPath, "cat-file", "-e", commit + "^{commit}"], what: "looking for the base commit")
        return r.exitStatus == .exited(0)
    }

    /// The commits of the checkout's branches and remote-tracking branches (at most
    /// 1000): what a bundle sent to it need not carry.
    func branchTips(in projectPath: String) async throws(AgentError) -> [String] {
        let r = try await run("/bin/sh", ["-c", #"git -C "$1" for-each-ref --format='%(objectname)' refs/heads refs/remotes | sort -u | head -n 1000"#,
                                          "sh", projectPath], what: "listing the branches")
        return r.stdoutString.split(separator: "\n").map(String.init).filter { $0.count >= 40 }
    }

    /// Writes a git bundle of `commit` (without what `known` already holds) to its
    /// standard output; the process is the caller's to read and end.
    func startBundle(of commit: String, in projectPath: String, known: [String]) async throws(AgentError) -> TransportProcess {
        // a bundle names refs, not commits: a ref of its own for the time of the bundle
        let script = #"""
            p=$1 sha=$2 ref=refs/sshkit/send/$2-$3
            git -C "$p" update-ref "$ref" "$sha" </dev/null || exit 12
            trap 'git -C "$p" update-ref -d "$ref" </dev/null' EXIT
            known=$(git -C "$p" cat-file --batch-check | awk '$2 == "commit" { print "^" $1 }')
            printf '%s\n%s\n' "$ref" "$known" | grep . | git -C "$p" bundle create -q - --stdin
            """#
        do {
            let process = try await transport.startProcess("/bin/sh", arguments: ["-c", script, "sh", projectPath, commit,
                                                                                  String(UInt32.random(in: 0 ... .max), radix: 16)],
                                                           environment: [:])
            try await process.input.write(Array((known.joined(separator: "\n") + "\n").utf8))
            process.input.finish()
            return process
        } catch {
            throw AgentError(error, while: "bundling the base on \(displayName)")
        }
    }

    /// Reads a bundle on its standard input into the checkout's objects (fetched to
    /// `FETCH_HEAD`, no branch moved); the process is the caller's to feed and end.
    func startUnbundle(into projectPath: String) async throws(AgentError) -> TransportProcess {
        let script = #"""
            p=$1
            tmp=$(mktemp "${TMPDIR:-/tmp}/sshkit-base-XXXXXX") || exit 12
            trap 'rm -f "$tmp"' EXIT
            cat >"$tmp" || exit 12
            ref=$(git -C "$p" bundle list-heads "$tmp" </dev/null | awk 'NR == 1 { print $2 }')
            [ -n "$ref" ] || { echo "not a bundle" >&2; exit 12; }
            git -C "$p" fetch -q --no-tags --no-write-fetch-head "$tmp" "$ref" </dev/null
            """#
        do {
            return try await transport.startProcess("/bin/sh", arguments: ["-c", script, "sh", projectPath], environment: [:])
        } catch {
            throw AgentError(error, while: "receiving the base on \(displayName)")
        }
    }

    /// Clones `origin` into the user's home as `folder` (or `folder-2`, … `folder-9` when
    /// that exists), in the login environment's git so the user's credentials for the
    /// origin are used; returns the clone's absolute path.
    func clone(_ origin: String, folder: String) async throws(AgentError) -> String {
        let home = try await shell.absolutePath("~")
        let script = #"""
            target=$2/$3 n=1
            while [ -e "$target" ]; do
                n=$((n + 1)); [ $n -le 9 ] || { echo "$2/$3 and $2/$3-2 to -9 exist already" >&2; exit 17; }
                target=$2/$3-$n
            done
            GIT_TERMINAL_PROMPT=0 git clone -q -- "$1" "$target" </dev/null >&2 || exit 12
            printf '%s\n' "$target"
            """#
        let r = try await run("/bin/sh", ["-c", script, "sh", origin, home, folder], timeout: .seconds(1800), idempotent: false,
                              what: "cloning \(origin)")
        let path = r.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)
        guard r.exitStatus == .exited(0), path.hasPrefix("/") else {
            throw AgentError(.gitFailed, "cannot clone \(origin) into the home of \(displayName)",
                             detail: r.stderrString.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        return path
    }

    /// Runs `command` with `sh -c` in `directory` in the user's login environment (the
    /// login shell, then the engine's search path in front of PATH; `PORT` set when
    /// given), its standard output and error together, for at most `timeout`.
    func runCheck(_ command: String, in directory: String, port: Int?, timeout: Duration, loginShell shellPath: String)
        async throws(AgentError) -> AttemptCheck
    {
        try AgentShells.check(shellPath)
        let inner = AgentSearchPath.shellSnippet(extra: extraSearchPath) + "\n"
            + #"cd "$1" || exit 126; [ -n "$2" ] && { PORT=$2; export PORT; }; exec sh -c "$3" 2>&1"#
        let login = "exec /bin/sh -c \(SSHShellQuoting.quote(inner)) sh \(SSHShellQuoting.quote(directory)) "
            + "\(SSHShellQuoting.quote(port.map(String.init) ?? "")) \(SSHShellQuoting.quote(command))"
        let started = ContinuousClock.now
        do {
            let r = try await transport.runProcess(shellPath, arguments: ["-l", "-c", login], stdin: [], environment: [:],
                                                   timeout: timeout)
            return AttemptCheck(command: command, outcome: .exited(r.exitStatus), duration: ContinuousClock.now - started,
                                output: AttemptCheck.tail(r.stdoutString))
        } catch where error.code == .timedOut {
            let partial: String
            if case .timedOut(_, let stdout, _) = error.context { partial = String(decoding: stdout, as: UTF8.self) } else { partial = "" }
            return AttemptCheck(command: command, outcome: .timedOut, duration: ContinuousClock.now - started,
                                output: AttemptCheck.tail(partial))
        } catch {
            throw AgentError(error, while: "running the check on \(displayName)")
        }
    }
}
