@testable import AgentSessions
import AgentSessionsSQLite
import Foundation
import SSHKit
import ServerTransport
import Testing

/// Several attempts at one task, through `agent-sessions`, against the test sshd: two
/// host records on it, each with its own tmux server and its own checkout of one
/// repository.
@Suite("agent-sessions: attempts", .tags(.process), .serialized)
struct AttemptTests {
    typealias User = AgentSessionsToolTests.User

    /// A repository with an origin (a bare clone), a clone of that origin elsewhere, and
    /// then a commit in the first that the origin and the clone lack.
    static func repositories(_ u: User) async throws -> (primary: String, origin: String, clone: String, base: String) {
        let primary = try await WorktreeTests.makeRepository(u.host)
        let origin = primary + "-origin.git", clone = primary + "-clone"
        let script = """
            set -e
            git clone -q --bare "$1" "$2"
            git -C "$1" remote add origin "$2" && git -C "$1" fetch -q origin && git -C "$1" branch -q -u origin/main main
            git clone -q "$2" "$3"
            cd "$1" && printf 'three\\n' >> a.txt && git commit -q -am 'not pushed' && git rev-parse HEAD
            """
        let r = try await WorktreeTests.sh(u.host, script, primary, origin, clone)
        return (primary, origin, clone, r.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
    }

    @Test func attemptsFromOneBaseOnTwoHostsAreComparedWithACheckAndOneIsPicked() async throws {
        let u = try User()
        let (primary, origin, clone, base) = try await Self.repositories(u)
        defer {
            Task {
                _ = try? await u.transport.runProcess("tmux", "-L", u.socket + "-b", "kill-server")
                await u.tearDown([primary, origin, clone])
            }
        }
        try u.addHost("a")
        try u.ok(["hosts", "add", "b", u.destination, "--key", u.server.key("id_ed25519"), "--tmux-socket", u.socket + "-b"])
        try u.ok(["projects", "add", "a", primary, "--name", "repo"])
        try u.ok(["projects", "add", "b", clone, "--name", "repo"])
        // the clone lacks the base: it is sent there
        #expect(try await !u.host.hasCommit(base, in: clone))

        let started = try u.ok(["tasks", "new", "a/repo", "Fix it", "--agents", "amp:2,gemini", "--hosts", "a,b", "--prompt", "go"])
        #expect(started.contains("started 3 attempts") && started.contains("from main (\(base.prefix(10)))"), "\(started)")
        #expect(started.contains("sent the base \(base.prefix(10)) to b"), "\(started)")
        #expect(try await u.host.hasCommit(base, in: clone))

        let store = try u.store()
        let tasks = try await store.tasks(projectID: nil)
        #expect(tasks.count == 3)
        let group = try #require(tasks.first?.attempt?.group)
        #expect(tasks.allSatisfy { $0.attempt?.group == group && $0.worktree.baseCommit == base && $0.worktree.baseRef == "main" })
        #expect(Set(tasks.compactMap(\.port)).count == 3, "each attempt has its own port: \(tasks.map(\.port))")
        let hostOf = try await Dictionary(uniqueKeysWithValues: tasks.asyncMap { t in
            (t.attempt!.label, try await store.host(id: try await store.project(id: t.projectID)!.hostID)!.name)
        })
        // each to the host with the fewest so far, ties to the first named
        #expect(hostOf == ["amp-1": "a", "amp-2": "b", "gemini-1": "a"], "\(hostOf)")
        for t in tasks {
            let head = try await WorktreeTests.sh(u.host, #"git -C "$1" rev-parse HEAD"#, t.worktree.path)
            #expect(head.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines) == base, "\(t.attempt!.label) starts from the base")
            #expect(t.worktree.projectPath == (hostOf[t.attempt!.label] == "b" ? clone : primary))
        }
        let second = try #require(tasks.first { $0.attempt?.label == "amp-2" })
        let third = try #require(tasks.first { $0.attempt?.label == "gemini-1" })
        // the board says which attempt a row is
        let board = try u.ok(["tasks", "list"])
        #expect(board.contains("Fix it [amp-2]") && board.contains("Fix it [gemini-1]"), "\(board)")

        // the title names three tasks: which one must be said; WORK/LABEL names one
        let ambiguous = try u.fails(["tasks", "show", "Fix it"], 64)
        #expect(ambiguous.contains("amp-1, amp-2, gemini-1") && ambiguous.contains("Fix it/amp-1"), "\(ambiguous)")
        #expect(try json(try u.ok(["tasks", "show", "fix-it/amp-2", "--json"]))["id"] as? String == second.id.rawValue)

        // a check that passes where the attempt made the file, fails elsewhere
        _ = try await WorktreeTests.sh(u.host, #"printf 'a\nb\n' > "$1/ok""#, second.worktree.path)
        let compared = try json(try u.ok(["tasks", "compare", String(group.prefix(8)), "--check", "test -f ok && echo found || { echo missing; exit 3; }", "--json"]))
        let rows = try #require(compared["attempts"] as? [[String: Any]])
        #expect(rows.map { $0["label"] as? String } == ["amp-1", "amp-2", "gemini-1"])
        for row in rows {
            let check = try #require(row["check"] as? [String: Any])
            let mine = row["label"] as? String == "amp-2"
            #expect(check["passed"] as? Bool == mine, "\(row)")
            #expect(check["exitCode"] as? Int == (mine ? 0 : 3), "\(row)")
            #expect((check["output"] as? String) == (mine ? "found" : "missing"), "\(row)")
            #expect(row["filesChanged"] as? Int == (mine ? 1 : 0) && row["linesAdded"] as? Int == (mine ? 2 : 0), "\(row)")
        }
        let table = try u.ok(["tasks", "compare", "Fix it", "--check", "test -f ok"])
        #expect(table.contains("passed in") && table.contains("failed (exit 1) in"), "\(table)")
        // a check past its time limit is ended whole (its own children too), what it printed
        // kept; the others run to their end beside it
        let marker = "31.\(UInt16.random(in: 100...999))"
        let slow = try json(try u.ok(["tasks", "compare", "Fix it", "--check-timeout", "1", "--json", "--check",
                                      "echo started; if [ -f ok ]; then sleep \(marker); fi; echo ended"]))
        for row in try #require(slow["attempts"] as? [[String: Any]]) {
            let check = try #require(row["check"] as? [String: Any])
            let mine = row["label"] as? String == "amp-2"
            #expect(check["timedOut"] as? Bool == mine, "\(row)")
            #expect((check["output"] as? String) == (mine ? "started" : "started\nended"), "\(row)")
        }
        let left = try await WorktreeTests.sh(u.host, #"pgrep -f "sleep $1" || true"#, marker)
        #expect(left.stdoutString.isEmpty, "the timed-out check's children are gone: \(left.stdoutString)")

        // the check alone (the cockpit's), through the engine: the same runs, and its limit
        let engine = AgentOrchestrator(store: store, searchPath: [], statusHooks: false) { record in
            SSHTransport(configuration: u.server.configuration(), serverID: record.serverID)
        }
        let runs = try await engine.task(third.id).checkAttempts("test -f ok && echo found || { echo missing; exit 3; }")
        #expect(runs.map(\.label) == ["amp-1", "amp-2", "gemini-1"])
        for r in runs {
            let mine = r.label == "amp-2"
            #expect(r.problem == nil && r.check?.passed == mine && r.check?.output == (mine ? "found" : "missing"), "\(r)")
            #expect(r.check?.outcome == .exited(.exited(mine ? 0 : 3)) && r.hostName == hostOf[r.label], "\(r)")
        }
        let marker2 = "32.\(UInt16.random(in: 100...999))"
        let cut = try await engine.task(third.id).checkAttempts("echo started; if [ -f ok ]; then sleep \(marker2); fi; echo ended",
                                                                timeout: .seconds(1))
        for r in cut {
            let mine = r.label == "amp-2"
            #expect((r.check?.outcome == .timedOut) == mine && r.check?.output == (mine ? "started" : "started\nended"), "\(r)")
        }
        let left2 = try await WorktreeTests.sh(u.host, #"pgrep -f "sleep $1" || true"#, marker2)
        #expect(left2.stdoutString.isEmpty, "the timed-out check's children are gone: \(left2.stdoutString)")
        let scratch = try await WorktreeTests.sh(u.host, #"ls -d "${TMPDIR:-/tmp}"/sshkit-compare-* 2>/dev/null || true"#)
        #expect(scratch.stdoutString.isEmpty, "a check's files were left: \(scratch.stdoutString)")
        await #expect(throws: AgentError.self) { try await engine.task(third.id).checkAttempts("  ") }
        await engine.close()

        // pick: an attempt that does not exist; deleting the others refused while one holds
        // work, with nothing done; then the others archived, their branches kept
        let none = try u.fails(["tasks", "pick", String(group.prefix(8)), "claude-9"], 2)
        #expect(none.contains("amp-1, amp-2, gemini-1"), "\(none)")
        _ = try await WorktreeTests.sh(u.host, #"echo draft > "$1/notes.txt""#, third.worktree.path)
        let refused = try u.fails(["tasks", "pick", String(group.prefix(8)), "amp-2", "--delete-others"], 3)
        #expect(refused.contains("gemini-1: 1 uncommitted change: notes.txt") && refused.contains("nothing was done"), "\(refused)")
        #expect(try await store.tasks(projectID: nil).allSatisfy { $0.archivedAt == nil && $0.attempt?.pickedAt == nil })
        let picked = try u.ok(["tasks", "pick", "fix-it", "amp-2"])
        #expect(picked.contains("picked amp-2") && picked.contains("archived amp-1, gemini-1"), "\(picked)")
        let after = try await store.tasks(projectID: nil)
        #expect(after.filter { $0.archivedAt != nil }.compactMap { $0.attempt?.label }.sorted() == ["amp-1", "gemini-1"])
        #expect(after.first { $0.id == second.id }?.attempt?.pickedAt != nil)
        #expect(FileManager.default.fileExists(atPath: third.worktree.path + "/notes.txt"), "an archived attempt keeps its work")
        // the work's name is the picked attempt now, which lands like any task
        #expect(try json(try u.ok(["tasks", "show", "Fix it", "--json"]))["id"] as? String == second.id.rawValue)
        let again = try u.fails(["tasks", "pick", String(group.prefix(8)), "amp-1"], 64)
        #expect(again.contains("amp-2 was picked already"), "\(again)")
        // the agents' servers go now, not when the process happens to end
        _ = try? await u.transport.runProcess("tmux", "-L", u.socket + "-b", "kill-server")
        _ = try? await u.transport.runProcess("tmux", "-L", u.socket, "kill-server")
    }

    @Test func badAttemptsAreRefusedBeforeAnythingIsMade() async throws {
        let u = try User()
        let (primary, origin, clone, _) = try await Self.repositories(u)
        let lonely = try await WorktreeTests.makeRepository(u.host)
        // the clone goes into the home under the checkout's folder name, which is taken here
        let cloned = primary + "-2"
        defer {
            Task {
                _ = try? await u.transport.runProcess("tmux", "-L", u.socket + "-b", "kill-server")
                await u.tearDown([primary, origin, clone, lonely, cloned])
            }
        }
        try u.addHost("a")
        try u.ok(["hosts", "add", "b", u.destination, "--key", u.server.key("id_ed25519"), "--tmux-socket", u.socket + "-b"])
        try u.ok(["projects", "add", "a", primary, "--name", "repo"])
        try u.ok(["projects", "add", "a", lonely, "--name", "lonely"])
        for bad in ["claude:0", "nosuch:2", "claude:x", "amp:1,amp:2", ",", "amp:40"] {
            try u.fails(["tasks", "new", "repo", "t", "--agents", bad], 64)
        }
        try u.fails(["tasks", "new", "repo", "t", "--agents", "amp", "--agent", "amp"], 64)
        try u.fails(["tasks", "new", "repo", "t", "--agent", "amp", "--hosts", "a"], 64)
        try u.fails(["tasks", "new", "repo", "t", "--agents", "amp", "--hosts", "a,nowhere"], 2)
        // no checkout of the repository on b: refused, or cloned when asked
        let missing = try u.fails(["tasks", "new", "repo", "t", "--agents", "amp:2", "--hosts", "a,b"], 2)
        #expect(missing.contains("b has no project of this repository") && missing.contains("--clone"), "\(missing)")
        let noOrigin = try u.fails(["tasks", "new", "lonely", "t", "--agents", "amp:2", "--hosts", "a,b", "--clone"], 1)
        #expect(noOrigin.contains("no origin to clone"), "\(noOrigin)")
        // nothing was made by the refusals
        #expect(try await u.store().tasks(projectID: nil).isEmpty)
        let worktrees = try await WorktreeTests.sh(u.host, #"git -C "$1" worktree list | wc -l"#, primary)
        #expect(worktrees.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines) == "1")

        let made = try u.ok(["tasks", "new", "repo", "t", "--agents", "amp:2", "--hosts", "a,b", "--clone"])
        #expect(made.contains("cloned \(origin) to \(cloned) on b"), "\(made)")
        #expect(made.contains("sent the base"), "the clone of the origin lacks the commit not pushed: \(made)")
        let projects = try await u.store().projects(hostID: nil)
        #expect(projects.filter { $0.name == "repo" }.count == 2, "the clone is a project of b")
        // a task that is not an attempt has nothing to compare
        try u.ok(["tasks", "new", "lonely", "single", "--agent", "amp"])
        let single = try u.fails(["tasks", "compare", "single"], 3)
        #expect(single.contains("not one of several attempts"), "\(single)")
        try u.fails(["tasks", "compare", "t", "--check", " "], 64)
        _ = try? await u.transport.runProcess("tmux", "-L", u.socket + "-b", "kill-server")
        _ = try? await u.transport.runProcess("tmux", "-L", u.socket, "kill-server")
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        for e in self { out.append(try await transform(e)) }
        return out
    }
}
