import AgentSessions
import Foundation
import SSHKit
import Synchronization
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
        let id = String(task.id.short)

        #expect(try u.ok(["tasks", "commit", id]).contains("nothing to commit"))
        try await sh("echo x > \"$1/x.txt\"", task.worktree.path)
        #expect(try u.ok(["tasks", "commit", id, "-m", "add x"]).contains("committed 1 file as"))
        // no remote: what is missing, exit 1
        #expect(try u.fails(["tasks", "push", id], 1).contains("remote add origin"))
        try await sh("git init -q --bare \"$2\" && git -C \"$1\" remote add origin \"$2\"", repo, origin)
        #expect(try u.ok(["tasks", "push", id]).contains("pushed \(task.worktree.branch) (1 commit over its base) to origin"))
        #expect(try u.ok(["tasks", "push", id]).contains("up to date"))
        // no gh and no forge: pushed, no pull request, exit 1
        #expect(try u.fails(["tasks", "pr", id], 1).contains("not on a forge"))

        // the base's checkout changed: refused, exit 3; a conflict: exit 6, files named
        try await sh("echo local >> \"$1/a.txt\"", repo)
        #expect(try u.fails(["tasks", "merge", id], 3).contains("uncommitted changes"))
        try await sh("cd \"$1\" && git commit -q -am base", repo)
        try await sh("cd \"$1\" && echo task >> a.txt && git commit -q -am task", task.worktree.path)
        let conflict = try u.fails(["tasks", "merge", id], 6)
        #expect(conflict.contains("would conflict in 1 file;") && conflict.contains("a.txt"), "\(conflict)")
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
        let id = String(task.id.short)
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

    /// A task's environment: the base fetched from origin first, the files .worktreeinclude
    /// names copied on the host with their modes, the setup on the agent's screen (a
    /// failing one reported, the agent started anyway), a port per task, the teardown on
    /// delete; and .worktreeinclude lines that reach outside the project refused before
    /// anything is made.
    @Test func aTasksEnvironment() async throws {
        let u = try User()
        let repo = try await WorktreeTests.makeRepository(u.host)
        let origin = repo + "-origin.git"
        do { try await environment(u, repo, origin) } catch {
            await u.tearDown([repo, origin, repo + "-other"])
            throw error
        }
        await u.tearDown([repo, origin, repo + "-other"])
    }

    func environment(_ u: User, _ repo: String, _ origin: String) async throws {
        func sh(_ script: String, _ args: String...) async throws -> String {
            try await u.transport.runProcess("/bin/sh", arguments: ["-c", script, "sh"] + args, stdin: [], environment: [:],
                                             timeout: .seconds(30)).check(script).stdoutString
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        // origin is ahead of the checkout: another clone pushed to it
        let ahead = try await sh("""
            set -e
            git init -q --bare -b main "$2" && git -C "$1" remote add origin "$2" && git -C "$1" push -q -u origin main
            git clone -q "$2" "$1-other" && cd "$1-other" && git config user.email o@o && git config user.name o
            echo later > later.txt && git add later.txt && git commit -q -m later && git push -q origin main
            git rev-parse HEAD
            """, repo, origin)
        // files for the worktree: a secret (0600) and a key in a folder; a tracked file too
        _ = try await sh("""
            set -e
            cd "$1" && printf 'SECRET=1\n' > .env && chmod 600 .env && mkdir -p keys && echo k > keys/dev.key
            printf '# the files a task needs\n.env\nkeys/*.key\n' > .worktreeinclude
            """, repo)
        try u.addHost("near")
        try u.ok(["projects", "add", "near", repo, "--name", "app"])
        try u.ok(["projects", "set", "app", "--setup", "echo \"setup ran on $PORT\" > setup.txt; echo visible-setup-line",
                  "--teardown", "echo \"down $PORT\" > \"$HOME/teardown-$PORT.txt\""])
        #expect(try u.ok(["projects", "set", "app"]).contains("fetch base  on"))
        let out = try u.ok(["tasks", "new", "app", "Env one", "--agent", "amp"])
        #expect(out.contains("copied 2 files") && out.contains("PORT="), "\(out)")
        let one = try #require(try await u.store().tasks(projectID: nil).first { $0.title == "Env one" })
        #expect(one.worktree.baseRef == "origin/main" && one.worktree.baseCommit == ahead, "\(one.worktree)")
        #expect(try await sh("cat \"$1/.env\"; stat -c %a \"$1/.env\"; cat \"$1/keys/dev.key\"", one.worktree.path)
            == "SECRET=1\n600\nk")
        let port = try #require(one.port)
        #expect(AgentHost.taskPorts.contains(port))
        // the setup ran before the agent, on its screen, with the task's port
        let setupFile = await eventually(20) { () async -> String? in
            (try? await u.transport.readTextFile(one.worktree.path + "/setup.txt")).flatMap { $0.isEmpty ? nil : $0 }
        }
        #expect(setupFile == "setup ran on \(port)\n")
        let lastShown = Mutex("")
        let shown = await eventually(20) { () -> String? in
            let s = (try? u.ok(["tasks", "show", String(one.id.short)])) ?? ""
            lastShown.withLock { $0 = s }
            return s.contains("setup     ok") ? s : nil
        }
        #expect(shown?.contains("port      \(port)") == true, "\(lastShown.withLock { $0 })")
        let screen = try await sh("tmux -L \"$1\" capture-pane -p -t \"$2\"", u.socket, "=amp-main-\(one.id):")
        #expect(screen.contains("visible-setup-line") && screen.contains("READY>"), "\(screen)")

        // a failing setup: reported, the agent started anyway; another port
        try u.ok(["projects", "set", "app", "--setup", "exit 3"])
        try u.ok(["tasks", "new", "app", "Env two", "--agent", "amp"])
        let two = try #require(try await u.store().tasks(projectID: nil).first { $0.title == "Env two" })
        #expect(two.port != nil && two.port != port)
        // each poll runs the command line tool, which connects and asks the host: on a loaded
        // machine one poll took seconds, and 20 s once passed without the outcome
        let failed = await eventually(60) { () -> String? in
            let s = (try? u.ok(["tasks", "show", String(two.id.short)])) ?? ""
            lastShown.withLock { $0 = s }
            return s.contains("setup     failed with exit status 3") ? s : nil
        }
        #expect(failed?.contains("agent 1   amp (main): ") == true && failed?.contains("exited") == false,
                "\((failed ?? lastShown.withLock { $0 }).replacingOccurrences(of: "\n", with: " | "))")

        // the teardown on delete, with the task's port; the port free again
        _ = try await sh("cd \"$1\" && git add -A && git commit -q -m setup && git push -q origin HEAD", one.worktree.path)
        try u.ok(["tasks", "delete", String(one.id.short)])
        #expect(try await u.transport.readTextFile(try await u.host.absolutePath("~/teardown-\(port).txt")) == "down \(port)\n")
        // (a task of a suite running beside this one may have claimed the port since)
        _ = try await sh("rm -f \"$HOME/teardown-$1.txt\"; test \"$(cat \"$HOME/.cache/sshkit-agents/ports/$1/task\" 2>/dev/null)\" != \"$2\"",
                         "\(port)", one.id.rawValue)

        // lines that reach outside the project: refused, nothing made
        let worktrees = try await sh("git -C \"$1\" worktree list | wc -l", repo)
        for bad in ["../outside/.env", "/etc/hostname", "~/.ssh/id_ed25519"] {
            _ = try await sh("printf '%s\\n' \"$2\" > \"$1/.worktreeinclude\"", repo, bad)
            let e = try u.fails(["tasks", "new", "app", "Bad", "--agent", "amp"], 64)
            #expect(e.contains(".worktreeinclude"), "\(bad): \(e)")
        }
        _ = try await sh("cd \"$1\" && ln -s /etc/hostname leak.env && printf '*.env\\n' > .worktreeinclude", repo)
        #expect(try u.fails(["tasks", "new", "app", "Bad", "--agent", "amp"], 64).contains("symbolic link that leads out"))
        #expect(try await sh("git -C \"$1\" worktree list | wc -l", repo) == worktrees)
        #expect(try await u.store().tasks(projectID: nil).allSatisfy { $0.title != "Bad" })

        // an origin that cannot be reached: a note, the task starts from the checkout's base
        _ = try await sh("cd \"$1\" && rm -f leak.env .worktreeinclude && git remote set-url origin /nonexistent/repo.git", repo)
        let offline = try u.ok(["tasks", "new", "app", "Offline", "--agent", "amp"])
        #expect(offline.contains("could not fetch main from origin"), "\(offline)")
    }

    /// `open`: the dev server the agent started on the task's port, reached here over the
    /// host's connection, and the forward closed when the task is deleted.
    @Test func openReachesTheTasksDevServerUntilTheTaskGoes() async throws {
        let u = try User()
        let repo = try await WorktreeTests.makeRepository(u.host)
        do { try await open(u, repo) } catch {
            await u.tearDown([repo])
            throw error
        }
        await u.tearDown([repo])
    }

    func open(_ u: User, _ repo: String) async throws {
        try """
            {"searchPath": ["\(FakeAgents.directory)"], "providers": {"amp": {"binary": "fake-devserver"}}}
            """.write(toFile: u.home + "/.config/agent-sessions/config.json", atomically: true, encoding: .utf8)
        try u.addHost("near")
        try u.ok(["projects", "add", "near", repo, "--name", "app"])
        try u.ok(["tasks", "new", "app", "Serve", "--agent", "amp"])
        let task = try #require(try await u.store().tasks(projectID: nil).first)
        let port = try #require(task.port)
        try await u.transport.writeTextFile(task.worktree.path + "/index.html", "hello from the task\n")
        func get(_ url: String) -> String? {
            let r = try? TestServer.runCapturing("/usr/bin/python3", ["-c", "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())", url])
            return r?.status == 0 ? r?.out : nil
        }
        let running = try u.start(["open", String(task.id.short)], errors: true)
        defer { running.stop() }
        let line = await eventually(20) { running.output().contains("http://") ? running.output() : nil }
        let url = try #require(line?.split(separator: " ").first.map(String.init), "\(running.output())")
        #expect(url.hasPrefix("http://127.0.0.1:") && line?.contains(":\(port), the port of task") == true, "\(line ?? "")")
        let page = await eventually(20) { get(url) }
        #expect(page == "hello from the task\n")
        // the task deleted: the forward ends with it, and the command
        try u.ok(["tasks", "delete", String(task.id.short), "--force"])
        #expect(await running.exit(within: 20) == 0, "\(running.output())")
        #expect(running.output().contains("archived or deleted"))
        #expect(get(url) == nil, "the forward outlived its task")
        try u.fails(["open", "no-such-task"], 2)
    }

    /// `open` survives a dropped connection as `attach` does: it says the connection was
    /// lost, connects again, listens on the same port again and says it is back.
    @Test func openComesBackAfterTheConnectionDrops() async throws {
        let u = try User()
        let repo = try await WorktreeTests.makeRepository(u.host)
        let proxy = try FaultProxy(target: TestServer.shared.port)
        defer { proxy.stop() }
        do { try await reopen(u, repo, proxy) } catch {
            await u.tearDown([repo])
            throw error
        }
        await u.tearDown([repo])
    }

    func reopen(_ u: User, _ repo: String, _ proxy: FaultProxy) async throws {
        try """
            {"searchPath": ["\(FakeAgents.directory)"], "providers": {"amp": {"binary": "fake-devserver"}}}
            """.write(toFile: u.home + "/.config/agent-sessions/config.json", atomically: true, encoding: .utf8)
        try u.addHost("far", port: proxy.port)
        try u.ok(["projects", "add", "far", repo, "--name", "app"])
        try u.ok(["tasks", "new", "app", "Serve", "--agent", "amp"])
        let task = try #require(try await u.store().tasks(projectID: nil).first)
        try await u.transport.writeTextFile(task.worktree.path + "/index.html", "hello from the task\n")
        func get(_ url: String) -> String? {
            let r = try? TestServer.runCapturing("/usr/bin/python3", ["-c", "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())", url])
            return r?.status == 0 ? r?.out : nil
        }
        let running = try u.start(["open", String(task.id.short), "--reconnect-timeout", "60"], errors: true)
        defer { running.stop() }
        let line = await eventually(20) { running.output().contains("http://") ? running.output() : nil }
        let url = try #require(line?.split(separator: " ").first.map(String.init), "\(running.output())")
        #expect(await eventually(20) { get(url) } == "hello from the task\n")

        // every connection through the proxy is reset from its next byte on
        proxy.arm { f, _, _ in f.resetServerToClientAt = 0 }
        _ = get(url)
        let lost = await eventually(30) { running.output().contains("was lost") ? true : nil }
        #expect(lost == true, "\(running.output())")
        #expect(running.process.isRunning, "open ended with its connection: \(running.output())")
        proxy.arm { f, _, _ in f.resetServerToClientAt = nil }
        let back = await eventually(30) { running.output().contains("reconnected to far") ? true : nil }
        #expect(back == true, "\(running.output())")
        #expect(running.output().contains("\(url) is far:"), "the same local port: \(running.output())")
        #expect(await eventually(20) { get(url) } == "hello from the task\n", "\(running.output())")
        #expect(proxy.connections.load(ordering: .relaxed) >= 2)
        running.stop()
        #expect(running.process.terminationStatus == 0, "\(running.output())")
        #expect(get(url) == nil, "the forward outlived the command")
    }
}

/// A hook that runs past the landing limit: the command says the commit ran too long (exit 1),
/// not that the host is unreachable (exit 4); the hook is stopped, git leaves no lock behind,
/// and the commit goes through once the hook is gone.
@Suite("agent-sessions: landing past its limit", .tags(.process))
struct LandingLimitTests {
    typealias User = AgentSessionsToolTests.User

    @Test func aHookPastTheLandingLimitIsATimeoutNotAnUnreachableHost() async throws {
        let u = try User()
        let repo = try await WorktreeTests.makeRepository(u.host)
        do { try await pastTheLimit(u, repo) } catch {
            await u.tearDown([repo])
            throw error
        }
        await u.tearDown([repo])
    }

    func pastTheLimit(_ u: User, _ repo: String) async throws {
        func sh(_ script: String, _ args: String...) async throws -> String {
            try await u.transport.runProcess("/bin/sh", arguments: ["-c", script, "sh"] + args, stdin: [], environment: [:],
                                             timeout: .seconds(30)).check(script).stdoutString
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let settings = """
            {"searchPath": ["\(FakeAgents.directory)"], "providers": {"amp": {"binary": "fake-tui"}}, "landingSeconds": 2}
            """
        try settings.write(toFile: u.home + "/.config/agent-sessions/config.json", atomically: true, encoding: .utf8)
        try u.addHost()
        try u.ok(["projects", "add", "fixture", repo, "--name", "app"])
        try u.ok(["tasks", "new", "app", "Slow hook", "--agent", "amp"])
        let task = try #require(try await u.store().tasks(projectID: nil).first)
        let id = String(task.id.short)
        // a pre-commit hook that takes a minute (a test suite, say), telling where it runs
        let pidFile = repo + "-hook.pid"
        _ = try await sh("""
            printf '#!/bin/sh\\necho $$ > "%s"\\nexec sleep 60\\n' "$2" > "$1/.git/hooks/pre-commit"
            chmod +x "$1/.git/hooks/pre-commit"
            echo change > "$3/change.txt"
            """, repo, pidFile, task.worktree.path)

        let slow = try u.fails(["tasks", "commit", id, "-m", "change"], 1)
        #expect(slow.contains("ran longer than") && !slow.contains("reachable"), "\(slow)")
        // the hook is stopped with the commit, and git's lock is gone with it
        let pid = try await sh("cat \"$1\"", pidFile)
        var alive = true
        for _ in 0..<50 where alive {
            alive = try await sh("kill -0 \"$1\" 2>/dev/null && echo alive || echo gone", pid) == "alive"
            if alive { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(!alive, "the hook (pid \(pid)) still runs after the commit was stopped")
        #expect(try await sh("""
            d=$(git -C "$1" rev-parse --git-dir); [ -e "$d/index.lock" ] && echo locked || echo free
            """, task.worktree.path) == "free")

        // without the hook, the same commit goes through: nothing was left half done
        _ = try await sh("rm -f \"$1/.git/hooks/pre-commit\" \"$2\"", repo, pidFile)
        #expect(try u.ok(["tasks", "commit", id, "-m", "change"]).contains("committed 1 file as"))
        // a limit out of range is the settings file's error (exit 5)
        try settings.replacingOccurrences(of: "\"landingSeconds\": 2", with: "\"landingSeconds\": 0")
            .write(toFile: u.home + "/.config/agent-sessions/config.json", atomically: true, encoding: .utf8)
        #expect(try u.fails(["tasks", "list"], 5).contains("landingSeconds is from 1 to 86400"))
    }
}
