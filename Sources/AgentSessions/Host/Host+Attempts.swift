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
        /// Whether the checkout has the commit asked about, when one was.
        var hasCommit: Bool?

        /// The same repository: the same origin (as forge and path), or a root commit in common.
        func isSameRepository(as other: RepositoryIdentity) -> Bool {
            if !origin.isEmpty, !other.origin.isEmpty, AgentOrchestrator.sameOrigin(origin, other.origin) { return true }
            return !roots.isDisjoint(with: other.roots)
        }
    }

    /// The identity of each checkout at `paths` (nil for a path that is not a checkout),
    /// and with `commit`, whether it has that commit, in one round trip.
    func repositoryIdentities(_ paths: [String], commit: String? = nil) async throws(AgentError) -> [String: RepositoryIdentity] {
        guard !paths.isEmpty else { return [:] }
        let script = #"""
            c=$1; shift
            for p in "$@"; do
                printf '\036%s\n' "$p"
                git -C "$p" rev-parse --git-dir >/dev/null 2>&1 </dev/null || { echo none; continue; }
                if [ -z "$c" ]; then echo repo
                elif git -C "$p" cat-file -e "$c^{commit}" 2>/dev/null </dev/null; then echo repo-has
                else echo repo-lacks
                fi
                git -C "$p" config --get remote.origin.url </dev/null || echo
                git -C "$p" rev-list --max-parents=0 --all 2>/dev/null </dev/null | head -n 50
            done
            """#
        let r = try await run("/bin/sh", ["-c", script, "sh", commit ?? ""] + paths, what: "reading the projects' origins")
        var out: [String: RepositoryIdentity] = [:]
        for part in r.stdoutString.split(separator: "\u{1E}") {
            let lines = part.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            guard lines.count >= 3, lines[1].hasPrefix("repo") else { continue }
            out[lines[0]] = RepositoryIdentity(origin: lines[2], roots: Set(lines.dropFirst(3).filter { $0.count >= 40 }),
                                               hasCommit: lines[1] == "repo" ? nil : lines[1] == "repo-has")
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

    /// What `compareWorktrees` found in one worktree.
    struct WorktreeLook: Sendable {
        /// Against the base: files, lines added, lines removed (nil: git could not say).
        var changes: (files: Int, linesAdded: Int, linesRemoved: Int)?
        /// What git said when it could not.
        var changesProblem: String?
        var check: AttemptCheck?
    }

    /// Each worktree's changes against its base (as `AgentWorktrees.changeSummary` counts
    /// them, with the same shell function; unless `counts` is false) and, with `check`, the
    /// check command run in it: all worktrees at once, in one remote process. The check runs with `sh -c` in the user's login environment (the
    /// login shell, then the engine's search path in front of PATH; `PORT` set to the
    /// worktree's port when given), its standard output and error together, each in a
    /// session of its own (`setsid`, where the host has it) so that its time limit ends
    /// all of it. Durations are timed on the host (to 10 ms where it has `/proc/uptime`).
    /// - Returns: one look per item, in order.
    func compareWorktrees(_ items: [(worktree: Worktree, port: Int?)], counts: Bool = true, check: String?, timeout: Duration,
                          loginShell shellPath: String) async throws(AgentError) -> [WorktreeLook]
    {
        guard !items.isEmpty else { return [] }
        let seconds = max(1, Int(timeout.components.seconds))
        let arguments = [check ?? "", "\(seconds)", counts ? "1" : ""] + items.flatMap { [$0.worktree.path, $0.worktree.baseCommit, $0.port.map(String.init) ?? ""] }
        let inner = AgentSearchPath.shellSnippet(extra: extraSearchPath) + "\n" + AgentWorktrees.countChangesFunction
            + Self.compareScript
        let r: ProcessResult
        do {
            if check != nil {
                try AgentShells.check(shellPath)
                let login = "exec /bin/sh -c \(SSHShellQuoting.quote(inner)) sh "
                    + arguments.map { SSHShellQuoting.quote($0) }.joined(separator: " ")
                r = try await run(shellPath, ["-l", "-c", login], timeout: timeout + .seconds(60), what: "comparing the attempts")
            } else {
                r = try await run("/bin/sh", ["-c", inner, "sh"] + arguments, timeout: .seconds(120), what: "comparing the attempts")
            }
        }
        guard r.exitStatus == .exited(0) else {
            throw AgentError(.gitFailed, "the attempts could not be compared on \(displayName)",
                             detail: r.stderrString.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        var looks = Array(repeating: WorktreeLook(), count: items.count)
        for part in r.stdoutString.split(separator: "\u{1E}", omittingEmptySubsequences: true) {
            let sections = part.split(separator: "\u{1D}", omittingEmptySubsequences: false).map(String.init)
            let head = sections[0].split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            guard let i = Int(head[0]), i >= 1, i <= items.count else { continue }
            if !counts {
                // not asked
            } else if let changes = AgentWorktrees.changeCounts(head.dropFirst().joined(separator: "\n")) {
                looks[i - 1].changes = changes
            } else {
                let why = head.dropFirst().joined(separator: "\n").trimmingCharacters(in: .whitespacesAndNewlines)
                looks[i - 1].changesProblem = why.isEmpty ? "git gave no count" : why
            }
            guard let check, sections.count >= 3 else { continue }
            let status = sections[1].trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ")
            guard status.count == 3, let code = Int32(status[1]), let centiseconds = Int64(status[2]) else { continue }
            let outcome: AttemptCheck.Outcome = status[0] == "timeout" ? .timedOut : .exited(.exited(code))
            looks[i - 1].check = AttemptCheck(command: check, outcome: outcome, duration: .milliseconds(max(0, centiseconds) * 10),
                                              output: AttemptCheck.tail(sections[2]))
        }
        return looks
    }

    /// Arguments: the check command ('' for none), its time limit in seconds, whether to
    /// count the changes ('1' or ''), then per worktree its path, base commit and port (''
    /// for none). Every worktree's count, and its check, run at once; then per worktree
    /// `RS <n>` (1-based), the five numbers of `countChangesFunction` (or what git said) on
    /// the lines after it, and with a check `GS`, `done|timeout <status> <centiseconds>`,
    /// `GS` and the output's last 21 lines. Its checks end with it (HUP, INT, TERM). Needs
    /// `countChangesFunction` defined first. Few processes: a check is its own command and
    /// the subshell that waits for it; one watch over the time limit, one `awk` for what
    /// is printed, the clock read by the shell itself.
    static let compareScript = #"""
        cmd=$1 limit=$2 counts=$3; shift 3
        t=$(mktemp -d "${TMPDIR:-/tmp}/sshkit-compare-XXXXXX") || exit 12
        pids= watch=
        # what still runs when the script is ended: the counts and the checks, each check's
        # session whole, and the watch over the time limit
        stop() {
            for f in "$t"/*.pid; do
                [ -f "$f" ] && [ ! -f "${f%.pid}.rc" ] && read -r p < "$f" && { kill -TERM "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; }
            done
            for p in $pids $watch; do kill -TERM "$p" 2>/dev/null; done
        }
        trap 'stop; rm -rf "$t"' EXIT
        trap 'exit 129' HUP INT TERM
        S=; command -v setsid >/dev/null 2>&1 && S=setsid
        # the time in hundredths of a second, in T
        now() { if read -r u _ < /proc/uptime 2>/dev/null; then c=${u#*.}; T="${u%%.*}${c%"${c#??}"}"; else T=$(( $(date +%s) * 100 )); fi; }
        check() {
            now; s=$T
            ( cd "$1" || exit 126; [ -n "$2" ] && { PORT=$2; export PORT; }; exec $S sh -c "$cmd" ) > "$t/$3.out" 2>&1 </dev/null & cp=$!
            echo "$cp" > "$t/$3.pid"
            wait $cp; st=$?
            now
            how=done; [ -f "$t/late" ] && how=timeout
            echo "$how $st $((T - s))" > "$t/$3.rc"
        }
        if [ -n "$cmd" ]; then
            # at the time limit, every check still running is ended whole
            ( trap 'kill $w 2>/dev/null; exit 0' TERM; sleep "$limit" & w=$!; wait $w
              : > "$t/late"
              for f in "$t"/*.pid; do
                  [ -f "${f%.pid}.rc" ] || { read -r p < "$f" && { kill -TERM "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; }; }
              done ) >/dev/null 2>&1 & watch=$!
        fi
        i=0
        while [ $# -ge 3 ]; do
            i=$((i + 1))
            [ -z "$counts" ] || { count "$1" "$2" > "$t/$i.sum" & pids="$pids $!"; }
            [ -z "$cmd" ] || { check "$1" "$3" "$i" & pids="$pids $!"; }
            shift 3
        done
        wait $pids
        pids=
        awk -v n="$i" -v t="$t" -v withcheck="${cmd:+1}" 'BEGIN {
            for (k = 1; k <= n; k++) {
                printf "\036%d\n", k
                f = t "/" k ".sum"; while ((getline l < f) > 0) print l; close(f)
                if (!withcheck) continue
                printf "\035"; f = t "/" k ".rc"; while ((getline l < f) > 0) print l; close(f)
                printf "\035"; f = t "/" k ".out"; m = 0
                while ((getline l < f) > 0) { m++; ring[m % 21] = l }
                close(f)
                for (j = (m > 21 ? m - 20 : 1); j <= m; j++) print ring[j % 21]
            }
        }'
        exit 0
        """#
}
