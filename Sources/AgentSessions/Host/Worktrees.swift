import Foundation
import SSHKit
import ServerTransport

/// The tasks' git worktrees on a host, one per task (Emdash's layout). Every git call is
/// one process through the transport with each argument quoted by it; nothing is typed
/// into a shell.
public struct AgentWorktrees: Sendable {
    let shell: HostShell

    init(shell: HostShell) { self.shell = shell }

    private var displayName: String { shell.displayName }
    private var transport: any ServerTransport { shell.transport }
    private func absolutePath(_ path: String) async throws(AgentError) -> String { try await shell.absolutePath(path) }

    /// The branches tried, in order, when neither a base ref nor a current branch is given.
    static let defaultBaseBranches = ["main", "master", "develop", "trunk"]

    /// Creates the worktree of a new task: `<project>/.emdash/worktrees/<slug>-<ms>` on a
    /// new branch `emdash/<slug>-<ms>`.
    ///
    /// The base is `baseRef` when git verifies it, else the project's current branch,
    /// else the first of main, master, develop and trunk that exists, else `HEAD`.
    /// Before adding, stale worktree entries (folders deleted by hand) are pruned, and
    /// `.emdash/` is added to the project's `.git/info/exclude`.
    /// - Throws: `notAGitRepository`, `gitFailed`, `invalidArgument`, `transport`.
    public func create(projectPath: String, title: String, baseRef: String? = nil,
                               unixMilliseconds: Int64? = nil) async throws(AgentError) -> Worktree
    {
        try await create(try await plannedWorktree(projectPath: projectPath, title: title, unixMilliseconds: unixMilliseconds),
                         baseRef: baseRef)
    }

    /// Makes the worktree `planned` names.
    func create(_ planned: PlannedWorktree, baseRef: String?, fetchBase: Bool = false, baseIsKnownCommit: Bool = false)
        async throws(AgentError) -> Worktree
    {
        // one round trip: every step in one script, every value an argument of it
        let r = try await shell.run("/bin/sh", ["-c", Self.createWorktreeScript, "sh"]
                                + planned.arguments(baseRef: baseRef, fetchBase: fetchBase, baseIsKnownCommit: baseIsKnownCommit),
                                    timeout: Self.createTimeout, idempotent: false, what: "adding the worktree")
        guard let made = planned.made(by: r) else { throw worktreeFailure(r, project: planned.project) }
        return made
    }

    /// The base a new task of the project would start from, as `create` chooses it
    /// (fetched first with `fetchBase`), without making anything: its name, its commit,
    /// the notes (a failed fetch) and the checkout's top level.
    /// - Throws: as `create`.
    func resolveBase(projectPath: String, baseRef: String?, fetchBase: Bool) async throws(AgentError)
        -> (ref: String, commit: String, notes: [String], top: String)
    {
        var project = try await absolutePath(projectPath)
        if project.count > 1 && project.hasSuffix("/") { project.removeLast() }
        let asked = PlannedWorktree(project: project, name: "", path: "", branch: "")
        let r = try await shell.run("/bin/sh", ["-c", Self.createWorktreeScript, "sh"] + asked.arguments(baseRef: baseRef, fetchBase: fetchBase),
                                    timeout: .seconds(120), what: "reading the base")
        guard r.exitStatus == .exited(0), let base = asked.made(by: r) else { throw worktreeFailure(r, project: project) }
        let top = r.stdoutString.split(separator: "\n").first { $0.hasPrefix("top /") }.map { String($0.dropFirst(4)) }
        return (base.baseRef, base.baseCommit, base.notes, top ?? project)
    }

    /// How long adding a worktree may take: a checkout of a large repository is slow.
    static let createTimeout: Duration = .seconds(600)

    /// Where a new task's worktree goes, before it is made.
    struct PlannedWorktree {
        let project: String
        let name: String
        let path: String
        let branch: String

        /// The arguments of `createWorktreeScript` (six of them). `baseIsKnownCommit`: the
        /// base is a commit the caller knows the repository has (no look, no fetch).
        func arguments(baseRef: String?, fetchBase: Bool = false, baseIsKnownCommit: Bool = false) -> [String] {
            [project, baseRef ?? "", branch, path, AgentWorktrees.defaultBaseBranches.joined(separator: " "),
             baseIsKnownCommit && baseRef != nil ? "known" : fetchBase ? "1" : "0"]
        }

        /// The worktree as it will be, before git says its base (for removing what a failed
        /// or cancelled add may have left).
        var expected: Worktree {
            Worktree(name: name, projectPath: project, path: path, branch: branch, baseRef: "", baseCommit: "")
        }

        /// The worktree, when the script's `base` and `commit` lines say it was made; its
        /// `note` lines are its notes (the base's fetch failed, files copied). Other lines
        /// (what a script around it prints) are passed over.
        func made(by r: ProcessResult) -> Worktree? {
            let out = r.stdoutString.split(separator: "\n").map(String.init)
            guard let base = out.firstIndex(where: { $0.hasPrefix("base ") }), base + 1 < out.count,
                  out[base + 1].hasPrefix("commit "), out[base + 1].count >= 47
            else { return nil }
            var made = Worktree(name: name, projectPath: project, path: path, branch: branch,
                                baseRef: String(out[base].dropFirst(5)), baseCommit: String(out[base + 1].dropFirst(7)))
            made.notes = out[(base + 2)...].filter { $0.hasPrefix("note ") }.map { String($0.dropFirst(5)) }
            return made
        }
    }

    func plannedWorktree(projectPath: String, title: String, unixMilliseconds: Int64? = nil) async throws(AgentError)
        -> PlannedWorktree
    {
        var project = try await absolutePath(projectPath)
        if project.count > 1 && project.hasSuffix("/") { project.removeLast() }
        let ms = unixMilliseconds ?? Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
        let name = AgentNaming.worktreeName(title: title, unixMilliseconds: ms)
        return PlannedWorktree(project: project, name: name, path: AgentNaming.worktreePath(projectPath: project, name: name),
                               branch: AgentNaming.branchName(name))
    }

    /// Why `createWorktreeScript` made no worktree, from its exit status.
    func worktreeFailure(_ r: ProcessResult, project: String) -> AgentError {
        let detail = r.stderrString.trimmingCharacters(in: .whitespacesAndNewlines)
        switch r.exitStatus {
        case .exited(127): return AgentError(.notAGitRepository, "git is not installed on \(displayName)", detail: detail)
        case .exited(10): return AgentError(.notAGitRepository, "\(project) is not a git repository on \(displayName)", detail: detail)
        case .exited(11): return AgentError(.gitFailed, "\(project) has no commit to start a worktree from", detail: detail)
        case .exited(13): return AgentError(.gitFailed, "cannot add .emdash/ to the info/exclude of \(project)", detail: detail)
        case .exited(14): return AgentError(.gitFailed, "another worktree of \(project) was being added for over a minute", detail: detail)
        case .exited(15):
            return AgentError(.invalidArgument, "refusing the project's .worktreeinclude, nothing was made: \(detail.split(separator: "\n").last.map(String.init) ?? detail)")
        case .exited(0): return AgentError(.gitFailed, "unexpected output while adding the worktree: \(r.stdoutString.prefix(200))")
        default: return AgentError(.gitFailed, "git failed while adding the worktree", detail: detail)
        }
    }

    /// Arguments: project, requested base ('' for none), branch, worktree path, the
    /// default base branches (one argument, separated by spaces), `1` to fetch the base
    /// from the project's remote first (`known`: the requested base is a commit the
    /// repository has, taken without a look). Prints `base <ref>` and `commit <sha>`, then
    /// `note <text>` lines; exit 10 not a repository, 11 no commit, 12 `worktree add`
    /// failed, 13 the exclude file, 14 another add held the repository's lock for a
    /// minute, 15 a `.worktreeinclude` line or file that reaches outside the project (the
    /// reason on stderr; nothing made), 127 no git.
    ///
    /// The fetch: a base that is a local branch is fetched from the branch's remote (else
    /// `origin`), a remote-tracking base from its remote; the worktree starts from what was
    /// fetched when the local branch is behind it (never when the local branch has
    /// commits of its own). A failed fetch (offline, no credentials, 30 s) is a note.
    ///
    /// `.worktreeinclude` (the convention of Claude Code and agent-deck: gitignore
    /// patterns, relative to the project): the untracked files of the project that match
    /// are copied into the new worktree with their modes. A line with a `..` part, a
    /// line naming an absolute path of the host, or a match that is a symbolic link
    /// leading out of the project refuses the whole task before anything is made. It reads
    /// nothing from its standard input (the launch script that may follow it in one round
    /// trip comes there). One git call when the base is the current branch of a usual
    /// checkout (its own `.git` folder, the branch's ref a loose file): the add, under the
    /// repository's lock (`HostLock`), given back once the add is done. Else the
    /// checkout's facts (top level, common directory, HEAD's commit and branch) come from
    /// one `rev-parse` first; the fetch's look at the configuration is a call when the
    /// configuration names a remote; a prune only when an entry's folder is gone. Every
    /// other step is the shell's own, so the script costs few processes on the host.
    static let createWorktreeScript = #"""
        p=$1 requested=$2 branch=$3 path=$4 defaults=$5 fetch=$6
        head= current= top= common=
        # the usual checkout (its own .git folder, on a branch with a loose ref) is read by
        # the shell itself; any other asks git
        if [ -d "$p/.git/refs" ] && [ -f "$p/.git/HEAD" ] && read -r h < "$p/.git/HEAD"; then
            case $h in
            'ref: refs/heads/'*)
                b=${h#ref: refs/heads/} r=
                [ -f "$p/.git/refs/heads/$b" ] && read -r r < "$p/.git/refs/heads/$b"
                case $r in
                *[!0-9a-f]*|'') ;;
                *) [ ${#r} -ge 40 ] && top=$p common=$p/.git head=$r current=$b ;;
                esac ;;
            esac
        fi
        if [ -z "$top" ]; then
            if facts=$(git -C "$p" rev-parse --show-toplevel --git-common-dir 'HEAD^{commit}' --abbrev-ref HEAD 2>/dev/null </dev/null); then :
            else
                s=$?; [ $s = 127 ] && exit 127
                # no commit yet, or no checkout at all
                facts=$(git -C "$p" rev-parse --show-toplevel --git-common-dir </dev/null) || exit 10
            fi
            { read -r top; read -r common; read -r head; read -r current; } <<EOF
        $facts
        EOF
        fi
        verify() { case $1 in ''|-*) return 1 ;; esac; git -C "$p" rev-parse --verify --quiet "$1^{commit}" </dev/null; }
        base= sha=
        # a commit the caller knows is here (the attempts' base, just read or sent) is
        # taken without a look
        if [ "$fetch" = known ] && [ -n "$requested" ]; then base=$requested sha=$requested fetch=0
        elif sha=$(verify "$requested"); then base=$requested
        elif [ -n "$head" ] && [ -n "$current" ] && [ "$current" != HEAD ]; then base=$current sha=$head
        else
            for candidate in $defaults HEAD; do
                if sha=$(verify "$candidate"); then base=$candidate; break; fi
            done
        fi
        [ -n "$base" ] || exit 11
        case $common in /*) ;; *) common=$p/$common ;; esac
        # the files .worktreeinclude names, checked before anything is made
        include=$top/.worktreeinclude copies=
        if [ -f "$include" ]; then
            while IFS= read -r line || [ -n "$line" ]; do
                case $line in ''|'#'*) continue ;; esac
                case "/$line/" in */../*) echo ".worktreeinclude: '$line' reaches outside the project (..)" >&2; exit 15 ;; esac
                case $line in
                    '~'*) echo ".worktreeinclude: '$line' is a path outside the project" >&2; exit 15 ;;
                    /*) plain=${line%%[*?[]*}; if [ -e "$plain" ] && [ ! -e "$top$plain" ]; then
                            echo ".worktreeinclude: '$line' is an absolute path of the host, outside the project" >&2; exit 15
                        fi ;;
                esac
            done < "$include"
            copies=$(git -C "$top" ls-files --others --ignored --exclude-from="$include" </dev/null | grep -v '^\.emdash/') || copies=
            if [ -n "$copies" ]; then
                while IFS= read -r f; do
                    if [ -L "$top/$f" ]; then
                        target=$(readlink -f "$top/$f" 2>/dev/null) || target=
                        case $target in
                            "$top"/*) ;;
                            *) echo ".worktreeinclude: $f is a symbolic link that leads out of the project" >&2; exit 15 ;;
                        esac
                    fi
                done <<EOF
        $copies
        EOF
            fi
        fi
        notes= nl='
        '
        # a checkout whose configuration names no remote (read by the shell itself) has
        # nothing to fetch from
        if [ "$fetch" = 1 ]; then
            fetch=
            [ -f "$common/config" ] && while read -r l; do
                case $l in '[remote '*|'[Remote '*|'[include'*) fetch=1; break ;; esac
            done < "$common/config"
        fi
        if [ "$fetch" = 1 ]; then
            remote= rbranch=
            if [ "$base" = "$current" ] || git -C "$p" rev-parse --verify --quiet "refs/heads/$base" >/dev/null </dev/null; then
                # the branch's remote, else origin, from one read of the configuration
                origin=
                while read -r key value; do
                    case $key in
                        "branch.$base.remote") remote=$value ;;
                        remote.origin.url|remote.origin.fetch) origin=origin ;;
                    esac
                done <<EOF
        $(git -C "$p" config --get-regexp '^(branch\..*\.remote|remote\.origin\.(url|fetch))$' </dev/null)
        EOF
                [ -n "$remote" ] || remote=$origin
                rbranch=$base
            elif git -C "$p" rev-parse --verify --quiet "refs/remotes/$base" >/dev/null </dev/null; then
                remote=${base%%/*} rbranch=${base#*/}
            fi
            if [ -n "$remote" ] && [ "$remote" != . ]; then
                GIT_TERMINAL_PROMPT=0 git -C "$p" fetch -q "$remote" "+refs/heads/$rbranch:refs/remotes/$remote/$rbranch" \
                    </dev/null >/dev/null 2>"$common/sshkit-fetch.err" & fp=$!
                # a watchdog that takes its sleep with it when stopped, and holds no output open
                ( trap 'kill $s 2>/dev/null; exit 0' TERM; sleep 30 & s=$!; wait $s; kill -TERM $fp 2>/dev/null ) >/dev/null 2>&1 & wp=$!
                if wait $fp; then
                    kill $wp 2>/dev/null
                    fetched=$(git -C "$p" rev-parse --verify --quiet "refs/remotes/$remote/$rbranch^{commit}" </dev/null)
                    if [ -n "$fetched" ] && [ "$fetched" != "$sha" ]; then
                        if git -C "$p" merge-base --is-ancestor "$sha" "$fetched" </dev/null; then
                            base=$remote/$rbranch sha=$fetched
                        else
                            notes="${notes}note $base has commits that $remote/$rbranch lacks: the task starts from $base$nl"
                        fi
                    fi
                else
                    kill $wp 2>/dev/null
                    why=$(head -n 1 "$common/sshkit-fetch.err" 2>/dev/null)
                    notes="${notes}note could not fetch $rbranch from $remote (${why:-no answer in 30 s}): the task starts from $base as it was$nl"
                fi
                rm -f "$common/sshkit-fetch.err"
            fi
        fi
        # no path: only the base is asked for (the attempts of one piece of work share it)
        if [ -z "$path" ]; then
            printf 'base %s\ncommit %s\ntop %s\n' "$base" "$sha" "$top"
            [ -z "$notes" ] || printf '%s' "$notes"
            exit 0
        fi
        # one worktree change at a time in a repository: an add reads the entries of the
        # others (one being written fails it), and a prune beside an add removes the entry
        # that add is writing; the lock is given back once the add is done
        """# + HostLock.lines(at: "$common/sshkit-worktree.lock", tries: 1500, failure: 14) + #"""
        # entries whose folders were deleted by hand are pruned; seen without a process (an
        # entry whose gitdir names a file that is gone)
        for e in "$common"/worktrees/*; do
            [ -f "$e/gitdir" ] && [ ! -f "$e/locked" ] || continue
            g=; read -r g < "$e/gitdir" && [ -n "$g" ] && [ ! -e "$g" ] || continue
            git -C "$p" worktree prune </dev/null 9>&- || exit 12
            break
        done
        exclude=$common/info/exclude excluded=
        if [ -f "$exclude" ]; then
            while read -r l || [ -n "$l" ]; do
                case $l in .emdash|.emdash/|/.emdash|/.emdash/) excluded=1; break ;; esac
            done < "$exclude"
        fi
        if [ -z "$excluded" ]; then
            mkdir -p "$common/info" || exit 13
            if [ -s "$exclude" ] && [ -n "$(tail -c 1 "$exclude")" ]; then printf '\n' >> "$exclude" || exit 13; fi
            printf '.emdash/\n' >> "$exclude" || exit 13
        fi
        git -C "$p" worktree add -q -b "$branch" "$path" "$sha" >&2 </dev/null 9>&- || { s=$?; [ $s = 127 ] && exit 127; exit 12; }
        eval "$unlock"
        n=0
        if [ -n "$copies" ]; then
            while IFS= read -r f; do
                [ -n "$f" ] || continue
                # a file the checkout has already (tracked on the branch) is left as it is
                [ -e "$path/$f" ] && continue
                mkdir -p "$path/$(dirname "$f")" && cp -p "$top/$f" "$path/$f" && n=$((n + 1))
            done <<EOF
        $copies
        EOF
        fi
        printf 'base %s\ncommit %s\n' "$base" "$sha"
        [ $n = 0 ] || { [ $n = 1 ] && printf 'note copied 1 file that .worktreeinclude names\n' || printf 'note copied %s files that .worktreeinclude names\n' "$n"; }
        [ -z "$notes" ] || printf '%s' "$notes"
        """#

    /// The project's worktrees (its main checkout first), from `git worktree list --porcelain`.
    public func list(projectPath: String) async throws(AgentError) -> [WorktreeEntry] {
        let project = try await checkout(projectPath)
        let out = try await git(project, ["worktree", "list", "--porcelain"], what: "listing worktrees").requireSuccess()
        return Self.parseWorktreeList(out.stdoutString)
    }

    /// The uncommitted changes of a worktree, untracked files included (ignored files not).
    public func status(_ worktreePath: String) async throws(AgentError) -> [WorktreeChange] {
        let path = try await absolutePath(worktreePath)
        let out = try await git(path, ["status", "--porcelain=v1", "-z", "--untracked-files=all"], what: "reading the status")
            .requireSuccess()
        return Self.parseStatus(out.stdout)
    }

    /// How many files the worktree changed against its base commit, committed or not,
    /// new files included (what `diff` lists), in one round trip.
    public func changedFileCount(_ worktree: Worktree) async throws(AgentError) -> Int {
        let script = #"cd "$1" && { git diff --name-only "$2" -- && git ls-files --others --exclude-standard; } | sort -u | wc -l"#
        let r = try await shell.run("/bin/sh", ["-c", script, "sh", worktree.path, worktree.baseCommit], what: "counting the changes")
        guard r.exitStatus == .exited(0), let n = Int(r.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw AgentError(.gitFailed, "cannot count the changes of \(worktree.path)", detail: r.stderrString)
        }
        return n
    }

    /// `changedFileCount` of each worktree, all of them at once in one round trip; a
    /// worktree git could not read is left out.
    /// - Returns: the counts by worktree path.
    public func changedFileCounts(_ worktrees: [Worktree]) async throws(AgentError) -> [String: Int] {
        guard !worktrees.isEmpty else { return [:] }
        let script = #"""
            i=0
            while [ $# -ge 2 ]; do
                i=$((i + 1))
                ( n=$(cd "$1" 2>/dev/null && { git diff --name-only "$2" -- && git ls-files --others --exclude-standard; } </dev/null | sort -u | wc -l) &&
                    printf '%s %s\n' "$i" "$n" ) 2>/dev/null &
                shift 2
            done
            wait
            """#
        let r = try await shell.run("/bin/sh", ["-c", script, "sh"] + worktrees.flatMap { [$0.path, $0.baseCommit] },
                                    what: "counting the changes")
        var counts: [String: Int] = [:]
        for line in r.stdoutString.split(separator: "\n") {
            let f = line.split(separator: " ")
            guard f.count == 2, let i = Int(f[0]), let n = Int(f[1]), i >= 1, i <= worktrees.count else { continue }
            counts[worktrees[i - 1].path] = n
        }
        return counts
    }

    /// How much the worktree changed against its base commit, committed or not, new
    /// files included (their lines counted as added), in one round trip.
    public func changeSummary(_ worktree: Worktree) async throws(AgentError)
        -> (files: Int, linesAdded: Int, linesRemoved: Int)
    {
        let r = try await shell.run("/bin/sh", ["-c", Self.countChangesFunction + #"count "$1" "$2""#, "sh", worktree.path,
                                                worktree.baseCommit], what: "counting the changes")
        guard r.exitStatus == .exited(0), let summary = Self.changeCounts(r.stdoutString) else {
            throw AgentError(.gitFailed, "cannot count the changes of \(worktree.path)",
                             detail: r.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        return summary
    }

    /// A shell function, `count WORKTREE BASE`, that prints the worktree's changes against
    /// BASE as five numbers: files, lines added and removed in `git diff --numstat`, then the
    /// lines and the number of the files git does not know yet (one per line); or, when git
    /// cannot say, what it said. Three processes, however many files changed.
    static let countChangesFunction = #"""
        count() {
            cd "$1" 2>/dev/null || { echo "the worktree is gone"; return; }
            { git diff --numstat "$2" -- </dev/null || echo 'error'; echo '--'; git ls-files --others --exclude-standard </dev/null; } 2>&1 |
                awk 'p == 0 && $0 == "--" { p = 1; next }
                     p == 0 && $0 == "error" { bad = 1; next }
                     p == 0 && NF >= 3 && $1 ~ /^[0-9-]+$/ { if ($1 != "-") a += $1; if ($2 != "-") r += $2; n++; next }
                     p == 0 { msg = msg $0 "\n"; next }
                     { u++; while ((getline l < $0) > 0) c++; close($0) }
                     END { if (bad) { printf "%s", msg; exit } printf "%d %d %d\n%d\n%d\n", n, a, r, c, u }'
        }

        """#

    /// The files, lines added and lines removed from what `countChangesFunction` printed
    /// (new files counted as changed files, their lines as added); nil when it printed
    /// what git said instead.
    static func changeCounts(_ printed: String) -> (files: Int, linesAdded: Int, linesRemoved: Int)? {
        let numbers = printed.split(whereSeparator: { $0 == " " || $0 == "\n" }).map { Int($0) }
        guard numbers.count == 5, numbers.allSatisfy({ $0 != nil }) else { return nil }
        let n = numbers.map { $0! }
        return (n[0] + n[4], n[1] + n[3], n[2])
    }

    /// What the worktree changed against its base commit, committed or not, with the
    /// files git does not know yet.
    public func diff(_ worktree: Worktree) async throws(AgentError) -> WorktreeDiff {
        let out = try await git(worktree.path, ["diff", "--numstat", "-z", worktree.baseCommit, "--"], what: "computing the diff")
            .requireSuccess()
        var files = Self.parseNumstat(out.stdout)
        for change in try await status(worktree.path) where change.isUntracked {
            let r = try await shell.run("/bin/sh", ["-c", "wc -l < \"$1\"", "sh", worktree.path + "/" + change.path],
                                  what: "counting lines")
            let lines = Int(r.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines))
            files.append(.init(path: change.path, added: lines, removed: lines.map { _ in 0 }, isUntracked: true))
        }
        return WorktreeDiff(files: files)
    }

    /// One file's patch against the base, at most `maxBytes` of it (cut on the host, so a
    /// huge generated file does not cross the network).
    public func patch(_ worktree: Worktree, file: String, maxBytes: Int = 256 * 1024)
        async throws(AgentError) -> WorktreeFilePatch
    {
        precondition(maxBytes > 0, "maxBytes must be positive")
        if file.utf8.contains(0) { throw AgentError(.invalidArgument, "the file name contains a NUL byte") }
        // untracked files: diff against /dev/null; git exits 1 when there is a difference
        let script = """
            if git -C "$1" ls-files --error-unmatch -- "$3" >/dev/null 2>&1 || ! [ -e "$1/$3" ]; then
                git -C "$1" diff "$2" -- "$3"
            else
                git -C "$1" diff --no-index -- /dev/null "$3"
            fi | head -c "$4"
            """
        let limit = maxBytes + 1
        let r = try await shell.run("/bin/sh", ["-c", script, "sh", worktree.path, worktree.baseCommit, file, "\(limit)"],
                              what: "reading the patch of \(file)")
        var bytes = r.stdout
        let truncated = bytes.count > maxBytes
        if truncated { bytes = Array(bytes.prefix(maxBytes)) }
        return WorktreeFilePatch(path: file, patch: String(decoding: bytes, as: UTF8.self), isTruncated: truncated)
    }

    /// Why removing this worktree would lose work, or nil when it would not: changes not
    /// committed, or commits on its branch that no other branch, tag or remote has.
    public func unsavedWork(_ worktree: Worktree) async throws(AgentError) -> String? {
        guard try await isDirectory(worktree.path) else {
            return try await unpushedCommits(worktree).map { "\(Wording.count($0, "commit")) on \(worktree.branch) \($0 == 1 ? "exists" : "exist") nowhere else" }
        }
        let changes = try await status(worktree.path)
        if !changes.isEmpty {
            let names = changes.prefix(5).map(\.path).joined(separator: ", ")
            return "\(Wording.count(changes.count, "uncommitted change")): \(names)\(changes.count > 5 ? ", …" : "")"
        }
        if let n = try await unpushedCommits(worktree) { return "\(Wording.count(n, "commit")) on \(worktree.branch) \(n == 1 ? "exists" : "exist") nowhere else" }
        return nil
    }

    /// Removes a worktree. Refuses, with `worktreeHasUnsavedWork`, when it has
    /// uncommitted changes or commits found nowhere else, unless `force`. The branch is
    /// deleted too when `deleteBranch` (and it has no unique commits, or `force`).
    /// A worktree whose folder is already gone is pruned.
    public func remove(_ worktree: Worktree, force: Bool = false, deleteBranch: Bool = true) async throws(AgentError) {
        if !force, let why = try await unsavedWork(worktree) {
            throw AgentError(.worktreeHasUnsavedWork,
                             "refusing to remove \(worktree.path): \(why); commit or push it, or pass force")
        }
        if try await isDirectory(worktree.path) {
            var args = ["worktree", "remove"]
            if force { args.append("--force") }
            try await git(worktree.projectPath, args + [worktree.path], idempotent: false, what: "removing the worktree").requireSuccess()
        }
        _ = try await git(worktree.projectPath, ["worktree", "prune"], what: "pruning worktrees")
        if deleteBranch {
            let exists = try await git(worktree.projectPath, ["rev-parse", "--verify", "--quiet", "refs/heads/" + worktree.branch],
                                       what: "looking up the branch")
            if exists.exitStatus == .exited(0) {
                try await git(worktree.projectPath, ["branch", "-D", worktree.branch], what: "deleting the branch")
                    .requireSuccess()
            }
        }
    }

    // MARK: helpers

    /// `git -C <dir> <args>`.
    func git(_ dir: String, _ args: [String], idempotent: Bool = true, what: String) async throws(AgentError) -> GitResult {
        GitResult(result: try await shell.run("git", ["-C", dir] + args, idempotent: idempotent, what: what), what: what)
    }

    /// The absolute path of a git checkout's top level.
    /// - Throws: `notAGitRepository`.
    func checkout(_ projectPath: String) async throws(AgentError) -> String {
        let path = try await absolutePath(projectPath)
        let r = try await shell.run("git", ["-C", path, "rev-parse", "--show-toplevel"], what: "checking the project")
        if r.exitStatus == .exited(127) {
            throw AgentError(.notAGitRepository, "git is not installed on \(displayName)", detail: r.stderrString)
        }
        guard r.exitStatus == .exited(0) else {
            throw AgentError(.notAGitRepository, "\(path) is not a git repository on \(displayName)",
                             detail: r.stderrString.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        return path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
    }

    private func isDirectory(_ path: String) async throws(AgentError) -> Bool {
        do {
            return try await transport.stat(path).kind == .directory
        } catch where error.isNoSuchFile {
            return false
        } catch {
            throw AgentError(error, while: "looking at \(path)")
        }
    }

    /// How many commits of the worktree's branch are on no other branch, tag or remote.
    private func unpushedCommits(_ worktree: Worktree) async throws(AgentError) -> Int? {
        let exists = try await git(worktree.projectPath, ["rev-parse", "--verify", "--quiet", "refs/heads/" + worktree.branch],
                                   what: "looking up the branch")
        guard exists.result.exitStatus == .exited(0) else { return nil }
        let r = try await git(worktree.projectPath, [
            "rev-list", "--count", "refs/heads/" + worktree.branch, "--not",
            "--exclude=" + worktree.branch, "--branches", "--tags", "--remotes",
        ], what: "counting unpushed commits").requireSuccess()
        let n = Int(r.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        return n > 0 ? n : nil
    }

    // MARK: parsers

    static func parseWorktreeList(_ text: String) -> [WorktreeEntry] {
        var entries: [WorktreeEntry] = []
        for block in text.components(separatedBy: "\n\n") where !block.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
            var e = WorktreeEntry(path: "", head: nil, branch: nil, isBare: false, isLocked: false, isPrunable: false,
                                  isManaged: false)
            for line in block.split(separator: "\n") {
                let (key, value) = line.firstIndex(of: " ").map { (String(line[..<$0]), String(line[line.index(after: $0)...])) }
                    ?? (String(line), "")
                switch key {
                case "worktree": e.path = value
                case "HEAD": e.head = value
                case "branch": e.branch = value.hasPrefix("refs/heads/") ? String(value.dropFirst(11)) : value
                case "bare": e.isBare = true
                case "locked": e.isLocked = true
                case "prunable": e.isPrunable = true
                default: break
                }
            }
            e.isManaged = e.path.contains("/.emdash/worktrees/")
            if !e.path.isEmpty { entries.append(e) }
        }
        return entries
    }

    static func parseStatus(_ bytes: [UInt8]) -> [WorktreeChange] {
        let fields = bytes.split(separator: 0, omittingEmptySubsequences: true).map { String(decoding: $0, as: UTF8.self) }
        var changes: [WorktreeChange] = []
        var i = 0
        while i < fields.count {
            let f = fields[i]
            i += 1
            guard f.utf8.count > 3 else { continue }
            let status = String(f.prefix(2))
            let path = String(f.dropFirst(3))
            var original: String?
            if status.contains("R") || status.contains("C"), i < fields.count {
                original = fields[i]
                i += 1
            }
            changes.append(WorktreeChange(status: status, path: path, originalPath: original))
        }
        return changes
    }

    /// `git diff --numstat -z`: `added\tremoved\tpath\0`, or for a rename
    /// `added\tremoved\t\0old\0new\0`; `-` counts for binary files.
    static func parseNumstat(_ bytes: [UInt8]) -> [WorktreeDiff.FileStat] {
        let fields = bytes.split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        var files: [WorktreeDiff.FileStat] = []
        var i = 0
        while i < fields.count {
            let parts = fields[i].split(separator: "\t", maxSplits: 2, omittingEmptySubsequences: false)
            i += 1
            guard parts.count == 3 else { continue }
            var path = String(parts[2])
            if path.isEmpty, i + 1 < fields.count {
                path = fields[i + 1]
                i += 2
            }
            files.append(.init(path: path, added: Int(parts[0]), removed: Int(parts[1]), isUntracked: false))
        }
        return files
    }
}

/// A git command's result, with the check that turns a failure into `gitFailed`.
struct GitResult {
    let result: ProcessResult
    let what: String
    var exitStatus: SSHExitStatus { result.exitStatus }
    var stdout: [UInt8] { result.stdout }
    var stdoutString: String { result.stdoutString }

    @discardableResult
    func requireSuccess() throws(AgentError) -> ProcessResult {
        if result.exitStatus == .exited(0) { return result }
        throw AgentError(.gitFailed, "git failed \(what) (\(result.exitStatus))",
                         detail: result.stderrString.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
