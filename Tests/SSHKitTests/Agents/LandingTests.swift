@testable import AgentSessions
import Foundation
import SSHKit
import ServerTransport
import Testing

/// Landing a task's work on the host: commit, push to a bare `origin`, pull requests with a
/// fake `gh` (which records its arguments) and without one, and merges that never leave a
/// half-done state: a fast-forward, a merge commit, a conflict, a dirty base checkout.
@Suite("Landing the work", .tags(.integration), .serialized)
struct LandingTests {
    let server = TestServer.shared

    /// A project with a bare `origin`, and a task's worktree in it.
    struct Project {
        let host: AgentHost
        let transport: SSHTransport
        let path: String
        let origin: String
        let ghDirectory: String
        let worktree: Worktree

        init(origin withOrigin: Bool = true) async throws {
            transport = SSHTransport(configuration: TestServer.shared.configuration())
            let gh = "/tmp/sshkit-gh-\(UInt32.random(in: 0...UInt32.max))"
            host = AgentHost(transport: transport, extraSearchPath: [gh])
            ghDirectory = gh
            path = try await WorktreeTests.makeRepository(host)
            origin = path + "-origin.git"
            try await Self.sh(host, """
                set -e
                mkdir -p "$3" && chmod 755 "$3"
                if [ "$4" = 1 ]; then git init -q --bare "$2" && git -C "$1" remote add origin "$2" && git -C "$1" push -q origin main; fi
                """, path, origin, gh, withOrigin ? "1" : "0")
            worktree = try await host.worktrees.create(projectPath: path, title: "land it")
        }

        /// Installs the fake gh: it logs each call's arguments, is logged in unless
        /// `logged-out` exists, creates one pull request and shows it while open.
        func installGH() async throws {
            let script = #"""
                #!/bin/sh
                dir=$(dirname "$0")
                for a in "$@"; do printf '[%s]' "$a"; done >> "$dir/gh.log"; echo >> "$dir/gh.log"
                case "$1 $2" in
                    "auth status") [ -e "$dir/logged-out" ] && exit 1; exit 0 ;;
                    "pr view")
                        [ -e "$dir/pr-open" ] || { echo "no pull requests found for branch \"$3\"" >&2; exit 1; }
                        case "$*" in *statusCheckRollup*) cat "$dir/view.json"; exit 0 ;; esac
                        cat "$dir/pr-open"; exit 0 ;;
                    "pr create") echo "https://github.com/me/app/pull/7" > "$dir/pr-open"
                        echo "Creating pull request for $4 into main"; echo "https://github.com/me/app/pull/7"; exit 0 ;;
                    "pr edit") exit 0 ;;
                    "pr list") if [ -e "$dir/view.json" ]; then printf '['; cat "$dir/view.json"; printf ']'; else echo '[]'; fi; exit 0 ;;
                esac
                exit 2
                """#
            try await transport.writeTextFile(ghDirectory + "/gh", script)
            try await Self.sh(host, "chmod 755 \"$1/gh\"", ghDirectory)
        }

        func ghLog() async throws -> [String] {
            ((try? await transport.readTextFile(ghDirectory + "/gh.log")) ?? "").split(separator: "\n").map(String.init)
        }

        func git(_ dir: String, _ args: String...) async throws -> String {
            try await transport.runProcess("git", arguments: ["-C", dir] + args, stdin: [], environment: [:], timeout: .seconds(30))
                .stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        @discardableResult
        static func sh(_ host: AgentHost, _ script: String, _ args: String...) async throws -> ProcessResult {
            try await host.transport.runProcess("/bin/sh", arguments: ["-c", script, "sh"] + args, stdin: [],
                                                environment: [:], timeout: .seconds(30)).check(script)
        }

        func sh(_ script: String, _ args: String...) async throws {
            _ = try await transport.runProcess("/bin/sh", arguments: ["-c", script, "sh"] + args, stdin: [],
                                               environment: [:], timeout: .seconds(30)).check(script)
        }

        func tearDown() async {
            _ = try? await transport.runProcess("/bin/rm", "-rf", path, origin, ghDirectory)
            await transport.close()
        }
    }

    func with(origin: Bool = true, _ body: (Project) async throws -> Void) async throws {
        let p = try await Project(origin: origin)
        do { try await body(p) } catch {
            await p.tearDown()
            throw error
        }
        await p.tearDown()
    }

    @Test func commitThenPushToTheProjectsRemote() async throws {
        try await with { p in
            let w = p.worktree
            // nothing yet: nothing to commit, nothing to push
            await #expect { try await p.host.worktrees.commit(w, message: "x") } throws: { ($0 as? AgentError)?.code == .nothingToLand }
            await #expect { try await p.host.worktrees.push(w) } throws: { ($0 as? AgentError)?.code == .nothingToLand }
            await #expect { try await p.host.worktrees.commit(w, message: "  ") } throws: { ($0 as? AgentError)?.code == .invalidArgument }
            try await p.sh("cd \"$1\" && echo new > new.txt && echo changed >> a.txt", w.path)
            let c = try await p.host.worktrees.commit(w, message: "the agent's work\n\nwith a body; $(touch /tmp/never)")
            #expect(c.files == 2)
            #expect(try await p.git(w.path, "log", "-1", "--format=%B") == "the agent's work\n\nwith a body; $(touch /tmp/never)")
            #expect(try await p.git(w.path, "status", "--porcelain").isEmpty)
            // one more change, not committed: the push says it left it out
            try await p.sh("echo draft > \"$1/draft.txt\"", w.path)
            let pushed = try await p.host.worktrees.push(w)
            #expect(pushed.remote == "origin" && pushed.remoteURL == p.origin && pushed.commits == 1 && !pushed.wasUpToDate)
            #expect(pushed.uncommittedChanges == 1)
            #expect(try await p.git(p.origin, "rev-parse", "refs/heads/" + w.branch) == c.commit)
            #expect(try await p.git(p.path, "config", "branch.\(w.branch).remote") == "origin")
            #expect(try await p.host.worktrees.push(w).wasUpToDate)
            // pushed: nothing of the branch would be lost by a delete but the draft
            #expect(try await p.host.worktrees.unsavedWork(w)?.contains("uncommitted") == true)
        }
    }

    @Test func pushWithoutARemoteSaysWhatIsMissing() async throws {
        try await with(origin: false) { p in
            try await p.sh("echo x > \"$1/x.txt\"", p.worktree.path)
            _ = try await p.host.worktrees.commit(p.worktree, message: "x")
            await #expect { try await p.host.worktrees.push(p.worktree) } throws: { e in
                guard let e = e as? AgentError else { return false }
                return e.code == .noRemote && e.message.contains("remote add origin")
            }
            await #expect {
                try await p.host.worktrees.pullRequest(p.worktree, title: "t", body: "b", base: "main", update: false, searchPath: [])
            } throws: { ($0 as? AgentError)?.code == .noRemote }
        }
    }

    @Test func pullRequestsWithGHAndWithout() async throws {
        try await with { p in
            let w = p.worktree
            try await p.sh("echo x > \"$1/x.txt\"", w.path)
            _ = try await p.host.worktrees.commit(w, message: "x")
            // no gh, and origin a path: pushed, but no forge to open one on
            await #expect {
                try await p.host.worktrees.pullRequest(w, title: "t", body: "b", base: "main", update: false, searchPath: [p.ghDirectory])
            } throws: { ($0 as? AgentError)?.code == .noForge }
            #expect(try await p.git(p.origin, "rev-parse", "refs/heads/" + w.branch).count == 40)
            // a GitHub origin that pushes to the bare one: the compare page
            try await p.sh("git -C \"$1\" remote set-url origin git@github.com:me/app.git && git -C \"$1\" remote set-url --push origin \"$2\"",
                           p.path, p.origin)
            let page = try await p.host.worktrees.pullRequest(w, title: "t", body: "b", base: "main", update: false,
                                                               searchPath: [p.ghDirectory])
            #expect(page.outcome == .compareURL)
            #expect(page.url == "https://github.com/me/app/compare/main...\(w.branch)?expand=1")
            // gh logged in: created with the title and body given as they are, then found open
            try await p.installGH()
            let title = "Fix it; $(rm -rf ~) \"quoted\""
            let made = try await p.host.worktrees.pullRequest(w, title: title, body: "line 1\nline 2", base: "main", update: false,
                                                               searchPath: [p.ghDirectory])
            #expect(made.outcome == .created && made.url == "https://github.com/me/app/pull/7")
            let log = try await p.ghLog()
            #expect(log.contains("[pr][create][--head][\(w.branch)][--base][main][--title][\(title)][--body][line 1"), "\(log)")
            let again = try await p.host.worktrees.pullRequest(w, title: "New title", body: "b", base: "main", update: true,
                                                                searchPath: [p.ghDirectory])
            #expect(again.outcome == .updated && again.url == "https://github.com/me/app/pull/7")
            #expect(try await p.ghLog().last == "[pr][edit][\(w.branch)][--title][New title][--body][b]")
            // its state, checks included
            try await p.transport.writeTextFile(p.ghDirectory + "/view.json", """
                {"url": "https://github.com/me/app/pull/7", "state": "OPEN", "isDraft": false, "headRefName": "\(w.branch)",
                 "statusCheckRollup": [{"__typename": "CheckRun", "status": "COMPLETED", "conclusion": "SUCCESS"},
                                       {"__typename": "StatusContext", "state": "FAILURE"}]}
                """)
            let state = try #require(try await p.host.worktrees.pullRequestState(w, searchPath: [p.ghDirectory]))
            #expect(state.summary == "open, checks failing" && state.url.hasSuffix("/pull/7"))
            // the board's way: every pull request of the project by branch, in one call
            let listed = try #require(try await p.host.worktrees.pullRequests(projectPath: p.path, searchPath: [p.ghDirectory]))
            #expect(listed[w.branch]?.summary == "open, checks failing", "\(listed)")
            #expect(try await p.host.worktrees.pullRequests(projectPath: p.path, searchPath: []) == nil, "no gh: no list")
            // logged out: the compare page again
            try await p.sh("touch \"$1/logged-out\"", p.ghDirectory)
            #expect(try await p.host.worktrees.pullRequest(w, title: "t", body: "b", base: nil, update: false,
                                                           searchPath: [p.ghDirectory]).url
                == "https://github.com/me/app/compare/\(w.branch)?expand=1")
        }
    }

    @Test func compareURLsOfTheForges() {
        let b = "emdash/fix-1"
        #expect(AgentWorktrees.compareURL(remote: "https://github.com/me/app.git", branch: b, base: "main")
            == "https://github.com/me/app/compare/main...emdash/fix-1?expand=1")
        #expect(AgentWorktrees.compareURL(remote: "ssh://git@gitlab.example.com:2222/group/sub/app.git", branch: b, base: "dev")
            == "https://gitlab.example.com/group/sub/app/-/merge_requests/new?merge_request%5Bsource_branch%5D=emdash/fix-1&merge_request%5Btarget_branch%5D=dev")
        #expect(AgentWorktrees.compareURL(remote: "git@bitbucket.org:me/app.git", branch: b, base: nil)
            == "https://bitbucket.org/me/app/pull-requests/new?source=emdash/fix-1")
        #expect(AgentWorktrees.compareURL(remote: "https://codeberg.org/me/app", branch: "a b&c", base: "main")
            == "https://codeberg.org/me/app/compare/main...a%20b&c")
        #expect(AgentWorktrees.compareURL(remote: "/srv/git/app.git", branch: b, base: "main") == nil)
        #expect(AgentWorktrees.compareURL(remote: "./relative/app", branch: b, base: "main") == nil)
        #expect(AgentWorktrees.compareURL(remote: "git@example.com:me/app.git", branch: b, base: "main") == nil)
        #expect(AgentWorktrees.compareURL(remote: "file:///srv/app.git", branch: b, base: "main") == nil)
    }

    @Test func mergesNeverLeaveAHalfDoneState() async throws {
        try await with { p in
            let w = p.worktree
            let base = try await p.host.worktrees.baseBranch(of: w)
            #expect(base == "main")
            // uncommitted work in the task: refused, it would be left out
            try await p.sh("echo x > \"$1/x.txt\"", w.path)
            await #expect { try await p.host.worktrees.merge(w, into: "main", mode: .auto, message: "m") } throws: {
                ($0 as? AgentError)?.code == .checkoutHasChanges
            }
            _ = try await p.host.worktrees.commit(w, message: "x")
            // the base's checkout with a change to a tracked file: refused, nothing moves
            let mainBefore = try await p.git(p.path, "rev-parse", "main")
            try await p.sh("echo local >> \"$1/a.txt\"", p.path)
            await #expect { try await p.host.worktrees.merge(w, into: "main", mode: .auto, message: "m") } throws: {
                ($0 as? AgentError)?.code == .checkoutHasChanges
            }
            #expect(try await p.git(p.path, "rev-parse", "main") == mainBefore)
            try await p.sh("git -C \"$1\" checkout -q -- a.txt", p.path)
            // a fast-forward: the checkout's files follow
            let ff = try await p.host.worktrees.merge(w, into: "main", mode: .auto, message: "m")
            #expect(ff.outcome == .fastForward && ff.checkout == p.path)
            #expect(try await p.git(p.path, "rev-parse", "main") == (try await p.git(w.path, "rev-parse", "HEAD")))
            #expect(try await p.transport.readTextFile(p.path + "/x.txt") == "x\n")
            #expect(try await p.git(p.path, "status", "--porcelain").isEmpty)
            #expect(try await p.host.worktrees.merge(w, into: "main", mode: .auto, message: "m").outcome == .alreadyMerged)

            // the base moved on without conflict: a merge commit, both parents
            try await p.sh("cd \"$1\" && echo y > y.txt && git add y.txt && git commit -q -m y", w.path)
            try await p.sh("cd \"$1\" && echo z > z.txt && git add z.txt && git commit -q -m z", p.path)
            await #expect { try await p.host.worktrees.merge(w, into: "main", mode: .fastForwardOnly, message: "m") } throws: {
                ($0 as? AgentError)?.code == .invalidArgument
            }
            let merged = try await p.host.worktrees.merge(w, into: "main", mode: .auto, message: "Merge the task")
            #expect(merged.outcome == .mergeCommit)
            #expect(try await p.git(p.path, "rev-list", "--parents", "-n", "1", "main").split(separator: " ").count == 3)
            #expect(try await p.git(p.path, "log", "-1", "--format=%s", "main") == "Merge the task")
            #expect(try await p.transport.readTextFile(p.path + "/y.txt") == "y\n")
            #expect(try await p.git(p.path, "status", "--porcelain").isEmpty)

            // both changed one line: a conflict, its file named, nothing changed anywhere
            try await p.sh("cd \"$1\" && echo task > a.txt && git commit -q -am task", w.path)
            try await p.sh("cd \"$1\" && echo base > a.txt && git commit -q -am base", p.path)
            let before = try await p.git(p.path, "rev-parse", "main")
            let taskBefore = try await p.git(w.path, "rev-parse", "HEAD")
            await #expect { try await p.host.worktrees.merge(w, into: "main", mode: .auto, message: "m") } throws: { e in
                guard let e = e as? AgentError else { return false }
                return e.code == .mergeConflict && e.detail == "a.txt"
            }
            #expect(try await p.git(p.path, "rev-parse", "main") == before)
            #expect(try await p.git(w.path, "rev-parse", "HEAD") == taskBefore)
            #expect(try await p.git(p.path, "status", "--porcelain").isEmpty)
            #expect(try await p.transport.readTextFile(p.path + "/a.txt") == "base\n")
            #expect(try await p.git(p.path, "worktree", "list", "--porcelain").components(separatedBy: "worktree ").count == 3,
                    "a temporary worktree was left")
        }
    }

    /// A git without `merge-tree --write-tree` (older than 2.38) merges in a worktree of
    /// its own: the same outcomes, and the temporary worktree gone after each.
    @Test func anOlderGitMergesInAWorktreeOfItsOwn() async throws {
        try await with { p in
            let w = p.worktree
            // a git that has no merge-tree --write-tree
            let wrapper = p.ghDirectory + "/old-git"
            try await p.sh("""
                mkdir -p "$1" && cat > "$1/git" <<'EOF'
                #!/bin/sh
                for a in "$@"; do [ "$a" = merge-tree ] && { echo "usage: git merge-tree <base-tree> <b1> <b2>" >&2; exit 129; }; done
                exec /usr/bin/git "$@"
                EOF
                chmod 755 "$1/git"
                """, wrapper)
            func merge() async throws -> ProcessResult {
                try await p.transport.runProcess("/usr/bin/env", arguments: [
                    "PATH=\(wrapper):/usr/bin:/bin", "/bin/sh", "-c", AgentWorktrees.mergeScript, "sh",
                    p.path, "main", w.branch, "auto", "Merge the task",
                ], stdin: [], environment: [:], timeout: .seconds(60))
            }
            func worktrees() async throws -> Int {
                try await p.git(p.path, "worktree", "list", "--porcelain").components(separatedBy: "worktree ").count - 1
            }
            // both moved on, apart: a merge commit
            try await p.sh("cd \"$1\" && echo y > y.txt && git add y.txt && git commit -q -m y", w.path)
            try await p.sh("cd \"$1\" && echo z > z.txt && git add z.txt && git commit -q -m z", p.path)
            let r = try await merge()
            #expect(r.exitStatus == .exited(0) && r.stdoutString.contains("merge "), "\(r.stdoutString) \(r.stderrString)")
            #expect(try await p.git(p.path, "rev-list", "--parents", "-n", "1", "main").split(separator: " ").count == 3)
            #expect(try await p.transport.readTextFile(p.path + "/y.txt") == "y\n")
            #expect(try await worktrees() == 2, "the temporary worktree was left")
            // a conflict: named, nothing changed, no merge left half-done
            try await p.sh("cd \"$1\" && echo task > a.txt && git commit -q -am task", w.path)
            try await p.sh("cd \"$1\" && echo base > a.txt && git commit -q -am base", p.path)
            let before = try await p.git(p.path, "rev-parse", "main")
            let c = try await merge()
            #expect(c.exitStatus == .exited(20) && c.stdoutString.contains("conflict a.txt"), "\(c.stdoutString) \(c.stderrString)")
            #expect(try await p.git(p.path, "rev-parse", "main") == before)
            #expect(try await p.git(p.path, "status", "--porcelain").isEmpty)
            #expect(try await worktrees() == 2, "the temporary worktree was left")
        }
    }

    /// A fetch whose host cannot be reached (past the project check, with force) fails
    /// with the engine's error within a bound, the local git it started ended.
    @Test func aFetchFromAHostThatCannotBeReachedFails() async throws {
        let local = try TestPaths.makeTemporaryDirectory("fetch-dead")
        defer { try? FileManager.default.removeItem(atPath: local) }
        _ = try TestServer.runCapturing("/usr/bin/git", ["init", "-q", local])
        let store = InMemoryAgentStore()
        // a port nothing listens on
        let closed = closedPort()
        let host = HostRecord(name: "dead", address: "127.0.0.1", port: closed, user: "nobody", authentication: .keyFiles([]))
        try await store.save(host)
        let project = ProjectRecord(hostID: host.id, name: "app", path: "/nonexistent/app")
        try await store.save(project)
        let task = TaskRecord(projectID: project.id, title: "t", worktree: Worktree(
            name: "t", projectPath: "/nonexistent/app", path: "/nonexistent/app/.emdash/worktrees/t", branch: "emdash/t",
            baseRef: "main", baseCommit: String(repeating: "0", count: 40)))
        try await store.save(task)
        let engine = AgentOrchestrator(store: store, searchPath: [], statusHooks: false) { record in
            SSHTransport(configuration: SSHConfiguration(host: "127.0.0.1", port: closed, user: "nobody",
                                                         authentication: .password("x"), hostKeyPolicy: .insecureAcceptAnyHostKey),
                         serverID: record.serverID)
        }
        let start = ContinuousClock.now
        await #expect(throws: AgentError.self) { try await engine.task(task.id).fetch(into: local, force: true) }
        #expect(ContinuousClock.now - start < .seconds(60), "the fetch hung")
        let left = try TestServer.runCapturing("/usr/bin/pgrep", ["-f", "fetch --no-tags --no-write-fetch-head sshkit:/project"])
        #expect(left.out.isEmpty, "a local git was left: \(left.out)")
        await engine.close()
    }
}
