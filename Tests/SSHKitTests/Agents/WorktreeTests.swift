@testable import AgentSessions
import Foundation
import ServerTransport
import Testing

/// Git worktrees over the SSH transport against the fixture's sshd (git runs as the
/// test user on the "host").
@Suite("Agent worktrees", .tags(.integration), .serialized)
struct WorktreeTests {
    let server = TestServer.shared

    /// A fresh repository with one commit on `main` in the test user's home.
    static func makeRepository(_ host: AgentHost, branch: String = "main") async throws -> String {
        let dir = "~/wt-\(UInt32.random(in: 0...UInt32.max))"
        let path = try await host.absolutePath(dir)
        let script = """
            set -e
            mkdir -p "$1" && cd "$1"
            git init -q -b "$2" .
            git config user.email test@example.com && git config user.name Test
            printf 'one\\ntwo\\n' > a.txt && git add a.txt && git commit -q -m first
            """
        try await host.transport.runProcess("/bin/sh", arguments: ["-c", script, "sh", path, branch], stdin: [],
                                            environment: [:], timeout: .seconds(30)).check("making a repository")
        return path
    }

    static func sh(_ host: AgentHost, _ script: String, _ args: String...) async throws -> ProcessResult {
        try await host.transport.runProcess("/bin/sh", arguments: ["-c", script, "sh"] + args, stdin: [],
                                            environment: [:], timeout: .seconds(30)).check(script)
    }

    @Test func createListStatusDiffAndRemove() async throws {
        let t = SSHTransport(configuration: server.configuration())
        defer { Task { await t.close() } }
        let host = AgentHost(transport: t)
        let project = try await Self.makeRepository(host)

        let wt = try await host.worktrees.create(projectPath: project, title: "Fix the flaky test!", unixMilliseconds: 1_700_000_000_000)
        #expect(wt.name == "fix-the-flaky-test-1700000000000")
        #expect(wt.path == project + "/.emdash/worktrees/fix-the-flaky-test-1700000000000")
        #expect(wt.branch == "emdash/fix-the-flaky-test-1700000000000")
        #expect(wt.baseRef == "main")
        #expect(wt.baseCommit.count == 40)
        #expect(try await t.readTextFile(wt.path + "/a.txt") == "one\ntwo\n")

        // .emdash/ is excluded in the main checkout, once
        let exclude = try await t.readTextFile(project + "/.git/info/exclude")
        #expect(exclude.components(separatedBy: "\n").filter { $0 == ".emdash/" }.count == 1)
        let second = try await host.worktrees.create(projectPath: project, title: "second", unixMilliseconds: 1_700_000_000_001)
        #expect(try await t.readTextFile(project + "/.git/info/exclude").components(separatedBy: "\n").filter { $0 == ".emdash/" }.count == 1)
        #expect(try await Self.sh(host, "cd \"$1\" && git status --porcelain", project).stdoutString == "")

        let list = try await host.worktrees.list(projectPath: project)
        #expect(list.count == 3)
        #expect(list[0].path == project && !list[0].isManaged && list[0].branch == "main")
        #expect(list.contains { $0.path == wt.path && $0.isManaged && $0.branch == wt.branch })

        // the agent's work: a change, a new file, a commit
        _ = try await Self.sh(host, """
            cd "$1" && printf 'one\\nTWO\\nthree\\n' > a.txt && git -c user.email=a@b -c user.name=A commit -qam change \
            && printf 'x\\ny\\n' > new.txt && printf 'more\\n' >> a.txt
            """, wt.path)
        let status = try await host.worktrees.status(wt.path)
        #expect(Set(status.map(\.path)) == ["a.txt", "new.txt"])
        #expect(status.first { $0.path == "new.txt" }?.isUntracked == true)

        let diff = try await host.worktrees.diff(wt)
        let a = try #require(diff.files.first { $0.path == "a.txt" })
        #expect(a.added == 3 && a.removed == 1)
        let n = try #require(diff.files.first { $0.path == "new.txt" })
        #expect(n.isUntracked && n.added == 2)
        // the same counted in one go: a.txt (+3 -1) and new.txt (+2, not yet known to git)
        let summary = try await host.worktrees.changeSummary(wt)
        #expect(summary.files == 2 && summary.linesAdded == 5 && summary.linesRemoved == 1, "\(summary)")
        #expect(try await host.worktrees.changedFileCounts([wt, second]) == [wt.path: 2, second.path: 0])
        // a base git does not know: what git said, as a typed error
        var unknownBase = wt
        unknownBase.baseCommit = String(repeating: "0", count: 40)
        let bad = await #expect(throws: AgentError.self) { _ = try await host.worktrees.changeSummary(unknownBase) }
        #expect(bad?.code == .gitFailed && bad?.detail?.isEmpty == false, "\(String(describing: bad))")

        let patch = try await host.worktrees.patch(wt, file: "a.txt")
        #expect(patch.patch.contains("-two") && patch.patch.contains("+TWO") && patch.patch.contains("+more"))
        #expect(!patch.isTruncated)
        let newPatch = try await host.worktrees.patch(wt, file: "new.txt")
        #expect(newPatch.patch.contains("+x") && newPatch.patch.contains("+y"))
        let cut = try await host.worktrees.patch(wt, file: "a.txt", maxBytes: 40)
        #expect(cut.isTruncated && cut.patch.utf8.count == 40)

        // dirty work is refused, named, and left in place
        let refused = await #expect(throws: AgentError.self) { try await host.worktrees.remove(wt) }
        #expect(refused?.code == .worktreeHasUnsavedWork)
        #expect(refused?.message.contains("uncommitted") == true, "\(String(describing: refused))")
        #expect(try await t.fileExists(wt.path + "/new.txt"))

        // committed but on no other branch: still refused
        _ = try await Self.sh(host, "cd \"$1\" && git add -A && git -c user.email=a@b -c user.name=A commit -qm more", wt.path)
        let unpushed = await #expect(throws: AgentError.self) { try await host.worktrees.remove(wt) }
        #expect(unpushed?.code == .worktreeHasUnsavedWork)
        #expect(unpushed?.message.contains("exist nowhere else") == true, "\(String(describing: unpushed))")

        // merged into main: nothing to lose, removed with its branch
        _ = try await Self.sh(host, "cd \"$1\" && git merge -q --ff-only \"$2\"", project, wt.branch)
        try await host.worktrees.remove(wt)
        #expect(try await !t.fileExists(wt.path))
        let branches = try await Self.sh(host, "cd \"$1\" && git branch --list 'emdash/*'", project).stdoutString
        #expect(!branches.contains(wt.branch) && branches.contains(second.branch))

        // forced removal of a dirty worktree keeps its branch unless told otherwise
        _ = try await Self.sh(host, "echo dirty > \"$1/d.txt\"", second.path)
        try await host.worktrees.remove(second, force: true, deleteBranch: false)
        #expect(try await !t.fileExists(second.path))
        #expect(try await Self.sh(host, "cd \"$1\" && git branch --list 'emdash/*'", project).stdoutString.contains(second.branch))
        _ = try await Self.sh(host, "rm -rf \"$1\"", project)
    }

    @Test func theBaseFallsBackFromTheRefToTheBranchToMainToHead() async throws {
        let t = SSHTransport(configuration: server.configuration())
        defer { Task { await t.close() } }
        let host = AgentHost(transport: t)
        let project = try await Self.makeRepository(host, branch: "develop")
        _ = try await Self.sh(host, "cd \"$1\" && git branch feature && git tag v1", project)
        #expect(try await host.worktrees.create(projectPath: project, title: "a", baseRef: "v1").baseRef == "v1")
        // a ref that does not verify (or looks like an option) falls back to the current branch
        #expect(try await host.worktrees.create(projectPath: project, title: "b", baseRef: "nope").baseRef == "develop")
        #expect(try await host.worktrees.create(projectPath: project, title: "c", baseRef: "--orphan").baseRef == "develop")
        // detached HEAD: the first of main/master/develop/trunk that exists
        _ = try await Self.sh(host, "cd \"$1\" && git checkout -q --detach", project)
        #expect(try await host.worktrees.create(projectPath: project, title: "d").baseRef == "develop")
        _ = try await Self.sh(host, "cd \"$1\" && git branch -m develop other", project)
        #expect(try await host.worktrees.create(projectPath: project, title: "e").baseRef == "HEAD")
        _ = try await Self.sh(host, "rm -rf \"$1\"", project)
    }

    @Test func aStaleWorktreeEntryIsPrunedBeforeTheNextAdd() async throws {
        let t = SSHTransport(configuration: server.configuration())
        defer { Task { await t.close() } }
        let host = AgentHost(transport: t)
        let project = try await Self.makeRepository(host)
        let wt = try await host.worktrees.create(projectPath: project, title: "gone", unixMilliseconds: 1)
        // the folder deleted by hand leaves .git/worktrees/<name> behind
        _ = try await Self.sh(host, "rm -rf \"$1\"", wt.path)
        #expect(try await host.worktrees.list(projectPath: project).first { $0.path == wt.path }?.isPrunable == true)
        // git refuses to add at the same path until the entry is pruned; the engine prunes
        _ = try await Self.sh(host, "cd \"$1\" && git branch -m \"$2\" old", project, wt.branch)
        let again = try await host.worktrees.create(projectPath: project, title: "gone", unixMilliseconds: 1)
        #expect(again.path == wt.path)
        #expect(try await host.worktrees.list(projectPath: project).filter { $0.path == wt.path }.count == 1)
        // removing a worktree whose folder is gone works too (the entry is pruned)
        _ = try await Self.sh(host, "rm -rf \"$1\"", again.path)
        try await host.worktrees.remove(again, force: true)
        #expect(try await host.worktrees.list(projectPath: project).count == 1)
        _ = try await Self.sh(host, "rm -rf \"$1\"", project)
    }

    /// Adds at once in one repository (a cockpit's and a script's, say): each waits for the
    /// repository's lock, so no prune removes an entry another add is writing.
    @Test func worktreesAddedAtOnceInOneRepositoryAllWork() async throws {
        let t = SSHTransport(configuration: server.configuration())
        defer { Task { await t.close() } }
        let host = AgentHost(transport: t)
        let project = try await Self.makeRepository(host)
        let made = try await withThrowingTaskGroup(of: Worktree.self) { g in
            for i in 0..<8 { g.addTask { try await host.worktrees.create(projectPath: project, title: "at once \(i)") } }
            return try await g.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(made.map(\.path)).count == 8)
        #expect(try await host.worktrees.list(projectPath: project).count == 9)
        // the git processes did not keep the lock's descriptor: nothing holds it now
        #expect(try await Self.sh(host, "f=\"$1/.git/sshkit-worktree.lock.flock\"; [ ! -e \"$f\" ] || flock -n \"$f\" true && echo free",
                                  project).stdoutString == "free\n")
        _ = try await Self.sh(host, "rm -rf \"$1\"", project)
    }

    /// The host's lock, with util-linux's `flock` and without it (a lock directory): one
    /// holder at a time; a holder killed outright does not keep it (the kernel lets go of
    /// a `flock`; a lock directory is taken over once a minute old); a holder that stays
    /// past the tries is a failure of its own.
    @Test(arguments: ["/usr/bin/flock", "/nonexistent/flock"])
    func theHostLockHasOneHolderAndOutlivesNone(flock: String) async throws {
        let t = SSHTransport(configuration: server.configuration())
        defer { Task { await t.close() } }
        let host = AgentHost(transport: t)
        let dir = try await Self.sh(host, "mktemp -d").stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)
        let lock = HostLock.lines(at: "$1/lock", tries: 40, failure: 14, flock: flock)
        // four at once, each in for 0.1 s: never two in
        let held = lock + #"""
            echo "in $2" >> "$1/log"; sleep 0.1; echo "out $2" >> "$1/log"
            eval "$unlock"
            echo "after $2" >> "$1/log"
            """#
        try await withThrowingTaskGroup(of: Void.self) { g in
            for i in 0..<4 { g.addTask { _ = try await Self.sh(host, held, dir, "\(i)") } }
            try await g.waitForAll()
        }
        let log = try await Self.sh(host, "grep -v after \"$1/log\"", dir).stdoutString.split(separator: "\n")
        #expect(log.count == 8)
        for k in stride(from: 0, to: log.count - 1, by: 2) {
            #expect(log[k].hasPrefix("in ") && log[k + 1] == "out " + log[k].dropFirst(3))
        }
        // a holder killed outright (no trap runs)
        let holder = try await host.transport.startProcess("/bin/sh", arguments: ["-c", lock + "echo held $$; exec sleep 60", "sh", dir],
                                                           environment: [:])
        var heard = ""
        for await chunk in holder.stdout {
            heard += String(decoding: chunk, as: UTF8.self)
            if heard.contains("\n") { break }
        }
        let pid = heard.split(separator: " ").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
        #expect(heard.hasPrefix("held") && Int(pid) != nil)
        // while it holds: the tries run out
        let waited = try await host.transport.runProcess("/bin/sh", arguments: ["-c", lock + "echo in", "sh", dir], stdin: [],
                                                         environment: [:], timeout: .seconds(30))
        #expect(waited.exitStatus == .exited(14) && waited.stdoutString.isEmpty)
        _ = try await Self.sh(host, "kill -KILL \"$1\"", pid)
        holder.cancel()
        if !flock.hasPrefix("/usr") {
            // the directory it left, made a minute old
            _ = try await Self.sh(host, "touch -d '-2 minutes' \"$1/lock\"", dir)
        }
        let after = try await Self.sh(host, lock + "echo in", dir)
        #expect(after.stdoutString == "in\n")
        #expect(try await Self.sh(host, "test -d \"$1/lock\" && echo left || echo gone", dir).stdoutString == "gone\n")
        _ = try await Self.sh(host, "rm -rf \"$1\"", dir)
    }

    @Test func aPathThatIsNotARepositoryIsATypedError() async throws {
        let t = SSHTransport(configuration: server.configuration())
        defer { Task { await t.close() } }
        let host = AgentHost(transport: t)
        let e1 = await #expect(throws: AgentError.self) { _ = try await host.worktrees.create(projectPath: "/tmp", title: "x") }
        #expect(e1?.code == .notAGitRepository)
        let e2 = await #expect(throws: AgentError.self) { _ = try await host.worktrees.create(projectPath: "~/no/such/dir", title: "x") }
        #expect(e2?.code == .notAGitRepository)
        let e3 = await #expect(throws: AgentError.self) { _ = try await host.worktrees.create(projectPath: "relative/path", title: "x") }
        #expect(e3?.code == .invalidArgument)
        let e4 = await #expect(throws: AgentError.self) { _ = try await host.worktrees.list(projectPath: "/") }
        #expect(e4?.code == .notAGitRepository)
    }
}
