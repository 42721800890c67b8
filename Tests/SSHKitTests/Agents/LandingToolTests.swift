import AgentSessions
import Foundation
import SSHKit
import Testing

/// Landing the work with the command, as a user runs it: one-line messages and the
/// documented exit statuses for each refusal.
@Suite("agent-sessions: landing the work", .tags(.process), .serialized)
struct LandingToolTests {
    typealias User = AgentSessionsToolTests.User

    @Test func commitPushPullRequestAndMergeFromTheCommandLine() async throws {
        let u = try User()
        let repo = try await WorktreeTests.makeRepository(u.host)
        let origin = repo + "-origin.git"
        do { try await landing(u, repo, origin) } catch {
            await u.tearDown([repo, origin])
            throw error
        }
        await u.tearDown([repo, origin])
    }

    func landing(_ u: User, _ repo: String, _ origin: String) async throws {
        func sh(_ script: String, _ args: String...) async throws {
            _ = try await u.transport.runProcess("/bin/sh", arguments: ["-c", script, "sh"] + args, stdin: [], environment: [:],
                                                 timeout: .seconds(30)).check(script)
        }
        try u.addHost("near")
        try u.ok(["projects", "add", "near", repo, "--name", "app"])
        try u.ok(["tasks", "new", "app", "Land me", "--agent", "amp", "--prompt", "make x"])
        let task = try #require(try await u.store().tasks(projectID: nil).first)
        #expect(task.prompt == "make x")
        let id = String(task.id.prefix(8))

        #expect(try u.ok(["tasks", "commit", id]).contains("nothing to commit"))
        try await sh("echo x > \"$1/x.txt\"", task.worktree.path)
        #expect(try u.ok(["tasks", "commit", id, "-m", "add x"]).contains("committed 1 file(s)"))
        // no remote: what is missing, exit 1
        #expect(try u.fails(["tasks", "push", id], 1).contains("remote add origin"))
        try await sh("git init -q --bare \"$2\" && git -C \"$1\" remote add origin \"$2\"", repo, origin)
        #expect(try u.ok(["tasks", "push", id]).contains("pushed \(task.worktree.branch) (1 commit(s) over its base) to origin"))
        #expect(try u.ok(["tasks", "push", id]).contains("up to date"))
        // no gh and no forge: pushed, no pull request, exit 1
        #expect(try u.fails(["tasks", "pr", id], 1).contains("not on a forge"))

        // the base's checkout changed: refused, exit 3; a conflict: exit 6, files named
        try await sh("echo local >> \"$1/a.txt\"", repo)
        #expect(try u.fails(["tasks", "merge", id], 3).contains("uncommitted changes"))
        try await sh("cd \"$1\" && git commit -q -am base", repo)
        try await sh("cd \"$1\" && echo task >> a.txt && git commit -q -am task", task.worktree.path)
        let conflict = try u.fails(["tasks", "merge", id], 6)
        #expect(conflict.contains("would conflict in 1 file(s)") && conflict.contains("a.txt"), "\(conflict)")
        try u.fails(["tasks", "merge", id, "--ff-only", "--no-ff"], 64)
        // the task's change undone: a merge commit, and the delete no longer refuses
        try await sh("cd \"$1\" && git revert --no-edit HEAD >/dev/null", task.worktree.path)
        #expect(try u.ok(["tasks", "merge", id]).contains("merge commit"))
        #expect(try u.ok(["tasks", "delete", id]).contains("deleted task"))
    }

    /// A task's branch fetched into a local clone over the host's connection (its commit
    /// the host's), refused for a repository of another project, and a local branch sent
    /// to the host as a new task's base.
    @Test func fetchIntoALocalCloneAndStartFromALocalBranch() async throws {
        let u = try User()
        let repo = try await WorktreeTests.makeRepository(u.host)
        let local = "/tmp/sshkit-local-\(UInt32.random(in: 0...UInt32.max))"
        let other = local + "-other"
        do { try await fetching(u, repo, local, other) } catch {
            await u.tearDown([repo])
            try? FileManager.default.removeItem(atPath: local)
            try? FileManager.default.removeItem(atPath: other)
            throw error
        }
        await u.tearDown([repo])
        try? FileManager.default.removeItem(atPath: local)
        try? FileManager.default.removeItem(atPath: other)
    }

    func fetching(_ u: User, _ repo: String, _ local: String, _ other: String) async throws {
        func sh(_ script: String, _ args: String...) async throws {
            _ = try await u.transport.runProcess("/bin/sh", arguments: ["-c", script, "sh"] + args, stdin: [], environment: [:],
                                                 timeout: .seconds(30)).check(script)
        }
        func here(_ script: String) throws -> String {
            let r = try TestServer.runCapturing("/bin/sh", ["-c", script])
            #expect(r.status == 0, "\(script): \(r.err)")
            return r.out.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        try u.addHost("near")
        try u.ok(["projects", "add", "near", repo, "--name", "app"])
        try u.ok(["tasks", "new", "app", "Bring me home", "--agent", "amp"])
        let task = try #require(try await u.store().tasks(projectID: nil).first)
        let id = String(task.id.prefix(8))
        try await sh("cd \"$1\" && echo work > work.txt && git add work.txt && git commit -q -m work", task.worktree.path)
        let hostCommit = try await u.transport.runProcess("git", "-C", repo, "rev-parse", "refs/heads/" + task.worktree.branch)
            .stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)
        // a local clone (of the same commits, by a bundle: the host's files are another
        // user's) and a repository of another project
        let bundle = "/tmp/sshkit-bundle-\(UInt32.random(in: 0...UInt32.max))"
        try await sh("git -C \"$1\" bundle create -q \"$2\" main && chmod 644 \"$2\"", repo, bundle)
        _ = try here("git clone -q '\(bundle)' '\(local)' && rm -f '\(bundle)' && git init -q '\(other)'"
            + " && cd '\(other)' && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m other")
        #expect(try u.ok(["tasks", "fetch", id, "--into", local]).contains("fetched \(task.worktree.branch)"))
        #expect(try here("git -C '\(local)' rev-parse 'refs/heads/\(task.worktree.branch)'") == hostCommit)
        #expect(try here("git -C '\(local)' show '\(task.worktree.branch):work.txt'") == "work")
        // again, nothing new: fine
        try u.ok(["tasks", "fetch", id, "--into", local])
        #expect(try u.fails(["tasks", "fetch", id, "--into", other], 3).contains("not a clone of the project"))
        #expect(try u.fails(["tasks", "fetch", id, "--into", "/nonexistent-dir"], 1).contains("not a git repository"))
        try u.ok(["tasks", "fetch", id, "--into", other, "--force"])
        #expect(try here("git -C '\(other)' rev-parse 'refs/heads/\(task.worktree.branch)'") == hostCommit)

        // a local branch as a new task's base
        let localCommit = try here("cd '\(local)' && git checkout -q -b feature && echo f > f.txt && git add f.txt"
            + " && git -c user.email=a@b -c user.name=a commit -q -m feature && git rev-parse HEAD")
        let out = try u.ok(["tasks", "new", "app", "From my laptop", "--agent", "amp", "--from-local", "feature", "--from-dir", local])
        #expect(out.contains("sent feature"), "\(out)")
        let started = try #require(try await u.store().tasks(projectID: nil).first { $0.title == "From my laptop" })
        #expect(started.worktree.baseCommit == localCommit && started.worktree.baseRef == "feature")
        #expect(try await u.transport.readTextFile(started.worktree.path + "/f.txt") == "f\n")
        try u.fails(["tasks", "new", "app", "x", "--agent", "amp", "--from-local", "no-such-branch", "--from-dir", local], 64)
    }
}
