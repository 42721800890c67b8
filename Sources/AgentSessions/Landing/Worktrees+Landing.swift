// Landing a task's work: commit, push, pull request, merge. Each runs on the host with the
// host's git (and `gh` where it is there), as one script per operation whose arguments are
// passed as arguments (nothing of the user's text is ever part of a command line).
import Foundation
import ServerTransport

/// A commit made in a task's worktree.
public struct WorktreeCommit: Sendable, Hashable {
    /// The new commit.
    public var commit: String
    /// How many files it changed.
    public var files: Int
}

/// A task's branch pushed to the project's remote.
public struct WorktreePush: Sendable, Hashable {
    /// The remote pushed to (`origin`, …) and its URL.
    public var remote: String
    /// The remote's URL as the project's configuration writes it.
    public var remoteURL: String
    /// The branch pushed (the task's).
    public var branch: String
    /// The commits of the branch over the task's base.
    public var commits: Int
    /// The remote had the branch as it is already.
    public var wasUpToDate: Bool
    /// Changes in the worktree that are not committed, so not pushed.
    public var uncommittedChanges: Int
}

/// A pull request for a task's branch, or where to open one.
public struct WorktreePullRequest: Sendable, Hashable {
    /// What was done.
    public enum Outcome: String, Sendable, Hashable {
        /// `gh` made it.
        case created
        /// `gh` found it open already (its title and body updated when given).
        case updated
        /// No `gh` (or not logged in): the forge's page that opens one.
        case compareURL
    }

    /// Made, found, or only its page.
    public var outcome: Outcome
    /// The pull request's page, or the forge's page that opens one.
    public var url: String
    /// The push that came first.
    public var push: WorktreePush
}

/// A pull request's state as `gh` reports it.
public struct PullRequestState: Sendable, Hashable, Codable {
    /// Open, merged, or closed without a merge.
    public enum State: String, Sendable, Hashable, Codable { case open, merged, closed }
    /// The checks of its head commit taken together: failing when one failed, pending
    /// when one has not finished, passing when all passed, none when it has none.
    public enum Checks: String, Sendable, Hashable, Codable { case none, pending, passing, failing }

    /// The pull request's page.
    public var url: String
    /// Open, merged or closed.
    public var state: State
    /// A draft (not ready for review).
    public var isDraft: Bool
    /// Its checks, taken together.
    public var checks: Checks

    /// A pull request's state as given.
    public init(url: String, state: State, isDraft: Bool, checks: Checks) {
        self.url = url
        self.state = state
        self.isDraft = isDraft
        self.checks = checks
    }

    /// "open, checks passing", "merged", "draft, checks failing".
    public var summary: String {
        var s = isDraft && state == .open ? "draft" : state.rawValue
        if state == .open && checks != .none { s += ", checks \(checks.rawValue)" }
        return s
    }
}

/// A task's branch merged into its base.
public struct WorktreeMerge: Sendable, Hashable {
    /// What the merge did.
    public enum Outcome: String, Sendable, Hashable {
        /// The base moved forward to the branch.
        case fastForward
        /// A merge commit joins them.
        case mergeCommit
        /// The base had every commit of the branch already; nothing changed.
        case alreadyMerged
    }

    /// How a merge may be done.
    public enum Mode: String, Sendable, Hashable, CaseIterable {
        /// A fast-forward when the base has not moved, else a merge commit.
        case auto
        /// A fast-forward only; refused when the base moved.
        case fastForwardOnly
        /// Always a merge commit.
        case mergeCommit
    }

    /// A fast-forward, a merge commit, or nothing to do.
    public var outcome: Outcome
    /// The branch merged into.
    public var base: String
    /// The base's commit now.
    public var commit: String
    /// The checkout whose files followed (the base branch's checkout), if any.
    public var checkout: String?
}

extension AgentWorktrees {
    /// Commits every change of the worktree (new files included, as `git add -A`) with
    /// `message`.
    /// - Throws: `nothingToLand` when nothing changed; `gitFailed` (a hook refused, no
    ///   identity: what git said is the detail); `transport`.
    public func commit(_ worktree: Worktree, message: String) async throws(AgentError) -> WorktreeCommit {
        guard !message.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw AgentError(.invalidArgument, "the commit message is empty")
        }
        let script = """
            wt=$1 msg=$2
            n=$(git -C "$wt" status --porcelain | wc -l) || exit 41
            [ "$n" -gt 0 ] || exit 42
            git -C "$wt" add -A || exit 43
            git -C "$wt" commit -q -m "$msg" 1>&2 || exit 44
            printf 'commit %s\\nfiles %s\\n' "$(git -C "$wt" rev-parse HEAD)" "$(git -C "$wt" diff-tree --no-commit-id --name-only -r --root HEAD | wc -l)"
            """
        let r = try await shell.run("/bin/sh", ["-c", script, "sh", worktree.path, message], timeout: shell.landingTimeout,
                                    idempotent: false, what: "committing in \(worktree.path)")
        let out = Self.fields(r.stdoutString)
        switch r.exitStatus {
        case .exited(0):
            guard let c = out["commit"] else { throw AgentError(.gitFailed, "git printed no commit", detail: r.stderrString) }
            return WorktreeCommit(commit: c, files: Int(out["files"] ?? "") ?? 0)
        case .exited(42):
            throw AgentError(.nothingToLand, "nothing to commit: the worktree has no changes")
        case .exited(44):
            let e = r.stderrString
            try checkIdentity(e, for: "to commit with")
            throw AgentError(.gitFailed, "git could not commit in \(worktree.path)", detail: Self.trim(e))
        default:
            throw AgentError(.gitFailed, "git could not commit in \(worktree.path) (\(r.exitStatus))", detail: Self.trim(r.stderrString))
        }
    }

    /// Pushes the task's branch to the project's remote and sets it as the branch's
    /// upstream: the branch's own remote when it has one, else `origin`, else the only
    /// remote. Commits only: uncommitted changes are counted, not pushed.
    /// - Throws: `nothingToLand` when the branch has no commit over its base; `noRemote`;
    ///   `gitFailed` (rejected, no credentials on the host); `transport`.
    public func push(_ worktree: Worktree) async throws(AgentError) -> WorktreePush {
        let script = Self.remoteScript + """
            n=$(git -C "$wt" rev-list --count "$base..refs/heads/$branch") || exit 41
            [ "$n" -gt 0 ] || exit 42
            printf 'remote %s\\nurl %s\\ncommits %s\\nuncommitted %s\\n' "$r" "$(git -C "$wt" config --get "remote.$r.url")" "$n" \\
                "$(git -C "$wt" status --porcelain | wc -l)"
            GIT_TERMINAL_PROMPT=0 git -C "$wt" push --porcelain --set-upstream "$r" "refs/heads/$branch:refs/heads/$branch" || exit 43
            """
        let r = try await shell.run("/bin/sh", ["-c", script, "sh", worktree.path, worktree.branch, worktree.baseCommit],
                                    timeout: shell.landingTimeout, idempotent: false, what: "pushing \(worktree.branch)")
        let out = Self.fields(r.stdoutString)
        switch r.exitStatus {
        case .exited(0):
            return WorktreePush(remote: out["remote"] ?? "", remoteURL: out["url"] ?? "", branch: worktree.branch,
                                commits: Int(out["commits"] ?? "") ?? 0,
                                wasUpToDate: r.stdoutString.split(separator: "\n").contains { $0.hasPrefix("=\t") },
                                uncommittedChanges: Int(out["uncommitted"] ?? "") ?? 0)
        case .exited(40):
            throw noRemote(worktree)
        case .exited(42):
            throw AgentError(.nothingToLand, "nothing to push: \(worktree.branch) has no commit over its base (commit first)")
        case .exited(43):
            throw AgentError(.gitFailed, "git could not push \(worktree.branch) to \(out["remote"] ?? "the remote")",
                             detail: Self.trim(r.stderrString))
        default:
            throw AgentError(.gitFailed, "git failed pushing \(worktree.branch) (\(r.exitStatus))", detail: Self.trim(r.stderrString))
        }
    }

    /// Pushes the branch, then opens its pull request with `gh` on the host (or finds the
    /// open one, and sets its title and body when `update`); without a `gh` that is logged
    /// in, gives the forge's page that opens one (GitHub, GitLab, Bitbucket, Gitea and
    /// Forgejo).
    /// - Parameters:
    ///   - base: the branch to propose it into (nil: the remote's default).
    ///   - searchPath: directories looked in for `gh` before the login's PATH.
    /// - Throws: as `push`; `noForge` when neither works; `gitFailed` when `gh` failed.
    public func pullRequest(_ worktree: Worktree, title: String, body: String, base: String?, update: Bool,
                            searchPath: [String]) async throws(AgentError) -> WorktreePullRequest
    {
        let pushed: WorktreePush
        do {
            pushed = try await push(worktree)
        } catch where error.code == .nothingToLand {
            throw AgentError(.nothingToLand, "no pull request: \(worktree.branch) has no commit over its base (commit first)")
        }
        let script = """
            \(Self.ghEnvironment("$6"))
            cd "$1" || exit 41
            command -v gh >/dev/null 2>&1 || exit 50
            gh auth status >/dev/null 2>&1 || exit 51
            if url=$(gh pr view "$2" --json url,state --jq 'select(.state == "OPEN") | .url' 2>/dev/null) && [ -n "$url" ]; then
                if [ "$7" = 1 ]; then gh pr edit "$2" --title "$4" --body "$5" >/dev/null || exit 52; fi
                printf 'updated %s\\n' "$url"
            else
                if [ -n "$3" ]; then set -- "$2" --base "$3" --title "$4" --body "$5"; else set -- "$2" --title "$4" --body "$5"; fi
                out=$(gh pr create --head "$@") || exit 52
                printf 'created %s\\n' "$(printf '%s\\n' "$out" | grep -E '^https?://' | tail -n 1)"
            fi
            """
        let r = try await shell.run("/bin/sh", ["-c", script, "sh", worktree.path, worktree.branch, base ?? "", title, body,
                                                searchPath.joined(separator: ":"), update ? "1" : "0"],
                                    timeout: shell.landingTimeout, idempotent: false, what: "opening a pull request")
        let out = Self.fields(r.stdoutString)
        switch r.exitStatus {
        case .exited(0):
            if let url = out["created"], !url.isEmpty { return WorktreePullRequest(outcome: .created, url: url, push: pushed) }
            if let url = out["updated"], !url.isEmpty { return WorktreePullRequest(outcome: .updated, url: url, push: pushed) }
            throw AgentError(.gitFailed, "gh printed no pull request URL", detail: Self.trim(r.stdoutString + r.stderrString))
        case .exited(50), .exited(51):
            guard let url = Self.compareURL(remote: pushed.remoteURL, branch: worktree.branch, base: base) else {
                let why = r.exitStatus == .exited(50) ? "gh is not installed on \(shell.displayName)"
                    : "gh on \(shell.displayName) is not logged in (gh auth login)"
                throw AgentError(.noForge, "pushed, but no pull request: \(why), and \(pushed.remoteURL) is not on a forge this tool knows")
            }
            return WorktreePullRequest(outcome: .compareURL, url: url, push: pushed)
        default:
            throw AgentError(.gitFailed, "gh could not open the pull request", detail: Self.trim(r.stderrString))
        }
    }

    /// The state of the branch's pull request as `gh` on the host reports it; nil when
    /// there is none, or no `gh` that is logged in.
    public func pullRequestState(_ worktree: Worktree, searchPath: [String]) async throws(AgentError) -> PullRequestState? {
        let script = """
            \(Self.ghEnvironment("$3"))
            cd "$1" || exit 41
            command -v gh >/dev/null 2>&1 || exit 50
            exec gh pr view "$2" --json url,state,isDraft,statusCheckRollup
            """
        let r = try await shell.run("/bin/sh", ["-c", script, "sh", worktree.path, worktree.branch, searchPath.joined(separator: ":")],
                                    timeout: .seconds(60), what: "asking for the pull request")
        guard r.exitStatus == .exited(0) else { return nil }
        return Self.pullRequestState(json: r.stdout)
    }

    /// The pull requests of a project by branch, as `gh pr list` on the host reports them
    /// (the newest 100, of every state; an open one wins over a closed one of the same
    /// branch); nil when the host has no `gh` that is logged in, or it failed.
    public func pullRequests(projectPath: String, searchPath: [String]) async throws(AgentError) -> [String: PullRequestState]? {
        let script = """
            \(Self.ghEnvironment("$2"))
            cd "$1" || exit 41
            command -v gh >/dev/null 2>&1 || exit 50
            exec gh pr list --state all --limit 100 --json headRefName,url,state,isDraft,statusCheckRollup
            """
        let r = try await shell.run("/bin/sh", ["-c", script, "sh", projectPath, searchPath.joined(separator: ":")],
                                    timeout: .seconds(60), what: "listing the pull requests")
        guard r.exitStatus == .exited(0),
              let list = try? JSONSerialization.jsonObject(with: Data(r.stdout)) as? [[String: Any]]
        else { return nil }
        var byBranch: [String: PullRequestState] = [:]
        for item in list {
            guard let branch = item["headRefName"] as? String,
                  let data = try? JSONSerialization.data(withJSONObject: item),
                  let state = Self.pullRequestState(json: Array(data))
            else { continue }
            if let have = byBranch[branch], have.state == .open { continue }
            byBranch[branch] = state
        }
        return byBranch
    }

    /// Merges the task's branch into `base` on the host, without a half-done state: the
    /// merge is made apart from every checkout (`git merge-tree`; with a git older than
    /// 2.38, in a temporary worktree of its own), and only a merge without conflicts moves
    /// the base: through the checkout that has the base branch checked out (a fast-forward
    /// there, so its files follow), refused when that checkout has uncommitted changes to
    /// tracked files; else the branch alone, only if it did not move meanwhile.
    /// - Throws: `checkoutHasChanges` (the task's worktree has uncommitted changes, which
    ///   would not be merged, or the base's checkout has), `mergeConflict` (the files are
    ///   the detail), `invalidArgument` (no such base branch, or a fast-forward only when
    ///   the base moved), `gitFailed`, `transport`. Nothing is changed when it throws.
    public func merge(_ worktree: Worktree, into base: String, mode: WorktreeMerge.Mode, message: String)
        async throws(AgentError) -> WorktreeMerge
    {
        let changes = try await status(worktree.path)
        if !changes.isEmpty {
            throw AgentError(.checkoutHasChanges,
                             "the task has \(Wording.count(changes.count, "uncommitted change")), which a merge would leave out: commit them first")
        }
        let modeWord = switch mode {
        case .auto: "auto"
        case .fastForwardOnly: "ff"
        case .mergeCommit: "merge"
        }
        let r = try await shell.run("/bin/sh", ["-c", Self.mergeScript, "sh", worktree.projectPath, base, worktree.branch, modeWord, message],
                                    timeout: shell.landingTimeout, idempotent: false, what: "merging \(worktree.branch) into \(base)")
        let out = r.stdoutString
        let conflicts = out.split(separator: "\n").filter { $0.hasPrefix("conflict ") }.map { String($0.dropFirst(9)) }
        let fields = Self.fields(out)
        let checkout = fields["checkout"].flatMap { $0.isEmpty ? nil : $0 }
        switch r.exitStatus {
        case .exited(0):
            if let c = fields["already"] { return WorktreeMerge(outcome: .alreadyMerged, base: base, commit: c, checkout: checkout) }
            if let c = fields["fast-forward"] { return WorktreeMerge(outcome: .fastForward, base: base, commit: c, checkout: checkout) }
            if let c = fields["merge"] { return WorktreeMerge(outcome: .mergeCommit, base: base, commit: c, checkout: checkout) }
            throw AgentError(.gitFailed, "the merge printed no outcome", detail: Self.trim(out + r.stderrString))
        case .exited(20):
            throw AgentError(.mergeConflict, "merging \(worktree.branch) into \(base) would conflict in \(Wording.count(conflicts.count, "file")); nothing was changed",
                             detail: conflicts.joined(separator: ", "))
        case .exited(21):
            throw AgentError(.checkoutHasChanges,
                             "\(checkout ?? "the checkout of \(base)") has \(base) checked out with uncommitted changes; nothing was changed (commit or stash them there first)")
        case .exited(22):
            throw AgentError(.checkoutHasChanges,
                             "\(checkout ?? "the checkout of \(base)") could not move to the merge (its files or its branch changed meanwhile); nothing was changed",
                             detail: Self.trim(r.stderrString))
        case .exited(23):
            throw AgentError(.gitFailed, "\(base) moved while the merge was made; nothing was changed (merge again)",
                             detail: Self.trim(r.stderrString))
        case .exited(24):
            throw AgentError(.invalidArgument, "\(base) has commits that \(worktree.branch) lacks, so it cannot fast-forward; nothing was changed")
        case .exited(30):
            throw AgentError(.invalidArgument, "no branch \(base) in \(worktree.projectPath)")
        case .exited(31):
            throw AgentError(.invalidArgument, "the task's branch \(worktree.branch) is gone from \(worktree.projectPath)")
        case .exited(25):
            let e = r.stderrString
            try checkIdentity(e, for: "for the merge commit")
            throw AgentError(.gitFailed, "git could not make the merge commit", detail: Self.trim(e))
        default:
            throw AgentError(.gitFailed, "git failed merging \(worktree.branch) into \(base) (\(r.exitStatus))",
                             detail: Self.trim(r.stderrString))
        }
    }

    /// The branch a task's work goes back into: its base when that is a branch of the
    /// project (`origin/main` is taken as `main` when the project has one), else nil.
    public func baseBranch(of worktree: Worktree) async throws(AgentError) -> String? {
        var candidates = [worktree.baseRef]
        if let slash = worktree.baseRef.firstIndex(of: "/") { candidates.append(String(worktree.baseRef[worktree.baseRef.index(after: slash)...])) }
        for c in candidates where !c.isEmpty && c != "HEAD" {
            let r = try await git(worktree.projectPath, ["rev-parse", "--verify", "--quiet", "refs/heads/" + c], what: "looking up the base")
            if r.exitStatus == .exited(0) { return c }
        }
        return nil
    }

    // MARK: helpers

    /// The start of a script that runs `gh`: the search path given (`dirs`, a shell word)
    /// and where `gh` is usually installed before the login's PATH, and no prompt, no
    /// update notice, no colour.
    static func ghEnvironment(_ dirs: String) -> String {
        """
        PATH="\(dirs):$HOME/.local/bin:$HOME/bin:/usr/local/bin:/opt/homebrew/bin:/home/linuxbrew/.linuxbrew/bin:$PATH"
        export GH_PROMPT_DISABLED=1 GH_NO_UPDATE_NOTIFIER=1 NO_COLOR=1
        """
    }

    /// The merge on the host. Arguments: the project, the base branch, the task's branch,
    /// `auto`, `ff` or `merge`, the merge commit's message. Prints `checkout <path>` (the
    /// base's checkout, or empty), then `already|fast-forward|merge <commit>`; exit 20 a
    /// conflict (`conflict <file>` lines), 21 the base's checkout has changes, 22 it could
    /// not move, 23 the base moved meanwhile, 24 no fast-forward, 25 no merge commit, 26 no
    /// temporary worktree, 30 no base branch, 31 no task branch.
    static let mergeScript = """
        proj=$1 base=$2 branch=$3 mode=$4 msg=$5
        g() { git -C "$proj" "$@"; }
        old=$(g rev-parse --verify -q "refs/heads/$base^{commit}") || exit 30
        tip=$(g rev-parse --verify -q "refs/heads/$branch^{commit}") || exit 31
        co=$(g worktree list --porcelain | awk -v want="branch refs/heads/$base" '
            /^worktree / { p = substr($0, 10) } $0 == want { print p; exit }')
        printf 'checkout %s\\n' "$co"
        [ -n "$co" ] && [ -n "$(git -C "$co" status --porcelain --untracked-files=no)" ] && exit 21
        if g merge-base --is-ancestor "$tip" "$old"; then printf 'already %s\\n' "$old"; exit 0; fi
        if [ "$mode" != merge ] && g merge-base --is-ancestor "$old" "$tip"; then
            kind=fast-forward new=$tip
        else
            [ "$mode" = ff ] && exit 24
            kind=merge
            out=$(g merge-tree --write-tree --name-only --no-messages "$old" "$tip" 2>/dev/null); s=$?
            if [ $s -eq 0 ]; then
                new=$(g commit-tree "$(printf '%s\\n' "$out" | head -n 1)" -p "$old" -p "$tip" -m "$msg") || exit 25
            elif [ $s -eq 1 ]; then
                printf '%s\\n' "$out" | tail -n +2 | sed 's/^/conflict /'; exit 20
            else
                # a git without merge-tree --write-tree: the merge in a worktree of its own
                tmp="$(g rev-parse --git-common-dir)/sshkit-merge-$$"
                case $tmp in /*) ;; *) tmp="$proj/$tmp" ;; esac
                g worktree add -q --detach "$tmp" "$old" >/dev/null 2>&1 || exit 26
                if git -C "$tmp" merge -q --no-ff --no-edit -m "$msg" "$tip" >/dev/null; then
                    new=$(git -C "$tmp" rev-parse HEAD)
                    g worktree remove --force "$tmp"
                else
                    files=$(git -C "$tmp" diff --name-only --diff-filter=U)
                    git -C "$tmp" merge --abort >/dev/null 2>&1
                    g worktree remove --force "$tmp"
                    [ -n "$files" ] || exit 25
                    printf '%s\\n' "$files" | sed 's/^/conflict /'; exit 20
                fi
            fi
        fi
        if [ -n "$co" ]; then
            git -C "$co" merge -q --ff-only "$new" 1>&2 || exit 22
        else
            g update-ref -m "agent-sessions: merge $branch" "refs/heads/$base" "$new" "$old" || exit 23
        fi
        printf '%s %s\\n' "$kind" "$new"
        """

    /// Sets `wt`, `branch`, `base` from the arguments and `r` to the remote to push to
    /// (exit 40 when there is none).
    static let remoteScript = """
        wt=$1 branch=$2 base=$3
        r=$(git -C "$wt" config "branch.$branch.remote" 2>/dev/null)
        if [ -z "$r" ]; then
            remotes=$(git -C "$wt" remote) || exit 41
            if printf '%s\\n' "$remotes" | grep -qx origin; then r=origin
            elif [ -n "$remotes" ] && [ "$(printf '%s\\n' "$remotes" | wc -l)" -eq 1 ]; then r=$remotes
            else exit 40; fi
        fi

        """

    func noRemote(_ worktree: Worktree) -> AgentError {
        AgentError(.noRemote, "the project has no remote to push to: add one on \(shell.displayName) (git -C \(worktree.projectPath) remote add origin URL)")
    }

    /// `key value` lines as a dictionary (the first of each key).
    static func fields(_ text: String) -> [String: String] {
        var d: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
            guard let k = parts.first, d[String(k)] == nil else { continue }
            d[String(k)] = parts.count > 1 ? String(parts[1]) : ""
        }
        return d
    }

    static func trim(_ s: String) -> String { s.trimmingCharacters(in: .whitespacesAndNewlines) }

    /// The forge's page that opens a pull (merge) request for `branch`, from the remote's
    /// URL (`git@host:owner/repo.git`, `ssh://git@host/owner/repo`, `https://host/owner/repo.git`);
    /// nil for a path or a host that is not a known forge.
    public static func compareURL(remote: String, branch: String, base: String?) -> String? {
        guard let (host, path) = forgeLocation(remote) else { return nil }
        let h = host.lowercased()
        func q(_ s: String) -> String {
            var allowed = CharacterSet.urlQueryAllowed
            allowed.remove(charactersIn: "&=+?#[]")
            return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
        }
        func p(_ s: String) -> String { s.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? s }
        let repo = "https://\(host)/\(path)"
        if h.contains("gitlab") {
            var url = "\(repo)/-/merge_requests/new?merge_request%5Bsource_branch%5D=\(q(branch))"
            if let base { url += "&merge_request%5Btarget_branch%5D=\(q(base))" }
            return url
        }
        if h.contains("bitbucket") {
            return "\(repo)/pull-requests/new?source=\(q(branch))" + (base.map { "&dest=\(q($0))" } ?? "")
        }
        if h.contains("github") {
            return "\(repo)/compare/\(base.map { p($0) + "..." } ?? "")\(p(branch))?expand=1"
        }
        if h == "codeberg.org" || h.contains("gitea") || h.contains("forgejo") {
            return "\(repo)/compare/\(base.map { p($0) + "..." } ?? "")\(p(branch))"
        }
        return nil
    }

    /// The host and `owner/repo` path of a remote URL, `.git` removed.
    static func forgeLocation(_ remote: String) -> (host: String, path: String)? {
        var rest: Substring
        let host: Substring
        if let scheme = remote.range(of: "://") {
            guard ["https", "http", "ssh", "git"].contains(remote[..<scheme.lowerBound].lowercased()) else { return nil }
            rest = remote[scheme.upperBound...]
            if let at = rest.firstIndex(of: "@"), at < (rest.firstIndex(of: "/") ?? rest.endIndex) { rest = rest[rest.index(after: at)...] }
            guard let slash = rest.firstIndex(of: "/") else { return nil }
            host = rest[..<slash].split(separator: ":").first ?? ""
            rest = rest[rest.index(after: slash)...]
        } else {
            // scp-like: [user@]host:path (a path with a slash before the colon is a local path)
            guard let colon = remote.firstIndex(of: ":"), !remote[..<colon].contains("/") else { return nil }
            var h = remote[..<colon]
            if let at = h.firstIndex(of: "@") { h = h[h.index(after: at)...] }
            host = h
            rest = remote[remote.index(after: colon)...]
        }
        var path = String(rest).trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        if path.hasSuffix(".git") { path.removeLast(4) }
        guard !host.isEmpty, path.split(separator: "/").count >= 2 else { return nil }
        return (String(host), path)
    }

    /// `gh pr view --json url,state,isDraft,statusCheckRollup` read: the checks failing
    /// when one failed, pending when one has not finished, passing when all passed.
    static func pullRequestState(json: [UInt8]) -> PullRequestState? {
        guard let o = try? JSONSerialization.jsonObject(with: Data(json)) as? [String: Any],
              let url = o["url"] as? String, let state = o["state"] as? String
        else { return nil }
        let s: PullRequestState.State = switch state.uppercased() {
        case "MERGED": .merged
        case "CLOSED": .closed
        default: .open
        }
        var checks = PullRequestState.Checks.none
        let rollup = o["statusCheckRollup"] as? [[String: Any]] ?? []
        if !rollup.isEmpty {
            // a check run has status and conclusion; a commit status has state
            let results = rollup.map { c -> String in
                if let status = c["status"] as? String, status.uppercased() != "COMPLETED" { return "PENDING" }
                return ((c["conclusion"] as? String) ?? (c["state"] as? String) ?? "PENDING").uppercased()
            }
            if results.contains(where: { ["FAILURE", "ERROR", "TIMED_OUT", "CANCELLED", "ACTION_REQUIRED", "STARTUP_FAILURE"].contains($0) }) {
                checks = .failing
            } else if results.contains(where: { ["PENDING", "EXPECTED", "QUEUED", "IN_PROGRESS", ""].contains($0) }) {
                checks = .pending
            } else {
                checks = .passing
            }
        }
        return PullRequestState(url: url, state: s, isDraft: o["isDraft"] as? Bool ?? false, checks: checks)
    }

    /// git's refusal for want of `user.name`/`user.email`, as what to do on the host.
    private func checkIdentity(_ stderr: String, for what: String) throws(AgentError) {
        if stderr.contains("Please tell me who you are") || stderr.contains("identity unknown") {
            throw AgentError(.gitFailed, "git on \(shell.displayName) has no identity \(what): set user.name and user.email there (git config --global)",
                             detail: Self.trim(stderr))
        }
    }
}
