import AgentSessions
import AgentSessionsSQLite
import Foundation
import SSHKit
import ServerTransport
import Testing

/// The agent-sessions command run as a process, as a user runs it: against the fixture's
/// sshd, with the fake agents, a HOME of its own (store, known_hosts, settings, cache)
/// and a tmux server of its own on the host.
@Suite("agent-sessions command", .tags(.process), .serialized)
struct AgentSessionsToolTests {
    static var binary: String { TestServer.packageRoot + "/.build/debug/agent-sessions" }
    static var writer: String { TestServer.packageRoot + "/.build/debug/agent-store-writer" }

    /// One user of the tool: a HOME, a tmux server name on the host, a repository there.
    struct User {
        let home: String
        let socket = "as-test-\(UInt32.random(in: 0...UInt32.max))"
        let transport: SSHTransport
        let host: AgentHost
        let server = TestServer.shared

        init() throws {
            home = "/tmp/sshkit-as-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            try FileManager.default.createDirectory(atPath: home + "/.config/agent-sessions", withIntermediateDirectories: true)
            let settings = """
                {"searchPath": ["\(FakeAgents.directory)"],
                 "providers": {"amp": {"binary": "fake-tui"}, "gemini": {"binary": "fake-ticker"}}}
                """
            try settings.write(toFile: home + "/.config/agent-sessions/config.json", atomically: true, encoding: .utf8)
            transport = SSHTransport(configuration: TestServer.shared.configuration())
            host = AgentHost(transport: transport, tmuxSocket: socket)
        }

        var destination: String { "\(server.user)@\(server.host):\(server.port)" }

        /// Runs the tool (with `env` added to its environment); a run that takes over
        /// `timeout` seconds is killed (and fails the test).
        func run(_ args: [String], stdin: String? = nil, env: [String: String] = [:], timeout: Double = 60,
                 sourceLocation: SourceLocation = #_sourceLocation) throws
            -> (status: Int32, out: String, err: String)
        {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: AgentSessionsToolTests.binary)
            p.arguments = args
            p.environment = ["HOME": home, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"].merging(env) { $1 }
            let input = Pipe(), out = Pipe(), err = Pipe()
            p.standardInput = input
            p.standardOutput = out
            p.standardError = err
            try p.run()
            let watchdog = DispatchWorkItem { if p.isRunning { p.terminate() } }
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
            if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
            try input.fileHandleForWriting.close()
            let o = out.fileHandleForReading.readDataToEndOfFile()
            let e = err.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            watchdog.cancel()
            if p.terminationReason == .uncaughtSignal {
                Issue.record("agent-sessions \(args) did not end within \(Int(timeout)) s", sourceLocation: sourceLocation)
            }
            return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
        }

        /// The tool started in the background (stdout collected), for commands that run on.
        final class Running: @unchecked Sendable {
            let process: Process
            private let lock = NSLock()
            private var data = Data()

            init(_ process: Process, _ out: Pipe) {
                self.process = process
                out.fileHandleForReading.readabilityHandler = { [weak self] h in
                    let chunk = h.availableData
                    guard let self, !chunk.isEmpty else { return }
                    self.lock.withLock { self.data.append(chunk) }
                }
            }

            func output() -> String { lock.withLock { String(decoding: data, as: UTF8.self) } }

            /// Its exit status, or nil when it still runs after `seconds` (then it is stopped).
            func exit(within seconds: Double) async -> Int32? {
                let done = await eventually(seconds) { process.isRunning ? nil : true }
                if done == nil { stop() }
                return done == nil ? nil : process.terminationStatus
            }

            func stop() {
                if process.isRunning { process.interrupt() }
                process.waitUntilExit()
            }
        }

        /// With `errors`, standard error goes with standard output.
        func start(_ args: [String], errors: Bool = false) throws -> Running {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: AgentSessionsToolTests.binary)
            p.arguments = args
            p.environment = ["HOME": home, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"]
            let out = Pipe()
            p.standardOutput = out
            p.standardError = errors ? out : FileHandle.nullDevice
            p.standardInput = FileHandle.nullDevice
            let running = Running(p, out)
            try p.run()
            return running
        }

        /// Runs the tool and expects success; returns its output.
        @discardableResult
        func ok(_ args: [String], stdin: String? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
            let r = try run(args, stdin: stdin, sourceLocation: sourceLocation)
            #expect(r.status == 0, "agent-sessions \(args.joined(separator: " ")): \(r.err)", sourceLocation: sourceLocation)
            return r.out
        }

        /// Runs the tool and expects one line on stderr and `status`.
        @discardableResult
        func fails(_ args: [String], _ status: Int32, stdin: String? = nil, sourceLocation: SourceLocation = #_sourceLocation)
            throws -> String
        {
            let r = try run(args, stdin: stdin, sourceLocation: sourceLocation)
            #expect(r.status == status, "agent-sessions \(args.joined(separator: " ")) exited \(r.status): \(r.err)",
                    sourceLocation: sourceLocation)
            let lines = r.err.split(separator: "\n")
            #expect(lines.count == 1 && r.err.hasPrefix("agent-sessions: "), "one line: \(r.err)", sourceLocation: sourceLocation)
            return r.err
        }

        /// `hosts add fixture` through `port` (the sshd's own by default).
        func addHost(_ name: String = "fixture", port: Int? = nil) throws -> String {
            try ok(["hosts", "add", name, "\(server.user)@\(server.host):\(port ?? server.port)",
                    "--key", server.key("id_ed25519"), "--tmux-socket", socket])
        }

        func tearDown(_ paths: [String] = []) async {
            await endTmuxServer(socket, on: transport)
            await removeOnHost(paths, transport)
            await transport.close()
            try? FileManager.default.removeItem(atPath: home)
        }

        func store() throws -> SQLiteAgentStore {
            try SQLiteAgentStore(path: home + "/.local/share/agent-sessions/store.sqlite")
        }
    }

    @Test func addingAHostRecordsItsKeyOnFirstUseAndRefusesAnother() async throws {
        #expect(FileManager.default.isExecutableFile(atPath: Self.binary), "build the package first (swift build)")
        let u = try User()
        defer { Task { await u.tearDown() } }
        let added = try u.addHost()
        #expect(added.contains("recorded the host key of [127.0.0.1]:\(u.server.port)"), "\(added)")
        let presented = [u.server.fingerprintEd25519, u.server.fingerprintECDSA, u.server.fingerprintRSA]
        #expect(presented.contains { added.contains($0) }, "the fingerprint is shown: \(added)")
        let knownHosts = try String(contentsOfFile: u.home + "/.ssh/known_hosts", encoding: .utf8)
        #expect(knownHosts.hasPrefix("|1|"), "hashed, like HashKnownHosts yes")
        var st = stat()
        #expect(stat(u.home + "/.ssh", &st) == 0 && st.st_mode & 0o777 == 0o700)
        // a second host at the same address: the key is known now, nothing more recorded
        let again = try u.addHost("fixture-2")
        #expect(!again.contains("recorded"), "\(again)")
        #expect(try String(contentsOfFile: u.home + "/.ssh/known_hosts", encoding: .utf8) == knownHosts)
        let list = try u.ok(["hosts", "list"])
        #expect(list.split(separator: "\n").filter { $0.contains("ok (") }.count == 2, "\(list)")
        #expect(try u.ok(["hosts", "test", "fixture"]).contains("tmux 3"))

        // known_hosts has another key for the address now: refused, as ssh refuses it
        let other = try String(contentsOfFile: u.server.key("id_ed25519.pub"), encoding: .utf8)
            .split(separator: " ").prefix(2).joined(separator: " ")
        try "[127.0.0.1]:\(u.server.port) \(other)\n".write(toFile: u.home + "/.ssh/known_hosts", atomically: true, encoding: .utf8)
        let changed = try u.fails(["hosts", "add", "impostor", u.destination, "--key", u.server.key("id_ed25519")], 4)
        #expect(changed.contains("impostor") || changed.contains("not the one"), "\(changed)")
        let listed = try u.run(["hosts", "list"])
        #expect(listed.out.contains("failed"), "the known host with the changed key fails its check: \(listed.out)")
        // a pinned fingerprint that is not the server's
        try u.fails(["hosts", "add", "pinned", u.destination, "--key", u.server.key("id_ed25519"),
                     "--fingerprint", "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"], 4)
        // the right one, pinned: known_hosts is not consulted
        try u.ok(["hosts", "add", "pinned", u.destination, "--key", u.server.key("id_ed25519"),
                  "--fingerprint", u.server.fingerprintEd25519])
        #expect(try await u.store().hosts().map(\.name).sorted() == ["fixture", "fixture-2", "pinned"])
        #expect(try u.ok(["hosts", "remove", "fixture-2"]).contains("removed"))
    }

    @Test func badInputIsOneLineAndADocumentedExitStatus() async throws {
        let u = try User()
        let repo = try await WorktreeTests.makeRepository(u.host)
        defer { Task { await u.tearDown([repo]) } }
        try u.addHost()
        try u.ok(["projects", "add", "fixture", repo, "--name", "repo"])
        try u.fails(["tasks", "show", "no-such-task"], 2)
        try u.fails(["agents", "nowhere"], 2)
        try u.fails(["projects", "add", "nowhere", "/tmp"], 2)
        let notRepo = try u.fails(["projects", "add", "fixture", "/etc"], 1)
        #expect(notRepo.contains("not a git checkout"), "\(notRepo)")
        let missing = try u.fails(["projects", "add", "fixture", "/no/such/checkout"], 1)
        #expect(missing.contains("/no/such/checkout does not exist on fixture"), "\(missing)")
        let noFile = try u.fails(["tasks", "new", "repo", "t", "--agent", "amp", "--prompt-file", u.home + "/missing.txt"], 64)
        #expect(noFile.contains("missing.txt: No such file or directory"), "\(noFile)")
        let dirFile = try u.fails(["tasks", "new", "repo", "t", "--agent", "amp", "--prompt-file", u.home], 64)
        #expect(dirFile.contains("Is a directory"), "\(dirFile)")
        let noAgent = try u.fails(["tasks", "new", "repo", "t", "--agent", "no-such-agent"], 64)
        #expect(noAgent.contains("known agents"), "\(noAgent)")
        let notInstalled = try u.fails(["tasks", "new", "repo", "t", "--agent", "codex"], 1)
        #expect(notInstalled.contains("not installed"), "\(notInstalled)")
        try u.fails(["hosts", "add", "fixture", u.destination, "--key", u.server.key("id_ed25519")], 3)
        // without a user it is a name of the ssh configuration, which has no such host
        let unknownName = try u.fails(["hosts", "add", "x", "no-such-name", "--key", u.server.key("id_ed25519")], 4)
        #expect(unknownName.contains("no-such-name is not a Host of the ssh configuration")
                    && unknownName.contains("does not resolve"), "\(unknownName)")
        try u.fails(["hosts", "add", "x", u.destination + "0000", "--key", u.server.key("id_ed25519")], 64)
        try u.fails(["hosts", "add", "x", u.destination, "--key", u.home + "/no-key"], 64)
        let unreachable = try u.fails(["hosts", "add", "down", "\(u.server.user)@127.0.0.1:1", "--key", u.server.key("id_ed25519")], 4)
        // the host as the user named it, what was being done, and the cause once
        #expect(unreachable.contains("connecting to down (\(u.server.user)@127.0.0.1:1): connection refused;"), "\(unreachable)")
        #expect(!unreachable.lowercased().contains("refused: connection refused") && !unreachable.contains("detecting agents"),
                "\(unreachable)")
        try "{ not json".write(toFile: u.home + "/.config/agent-sessions/config.json", atomically: true, encoding: .utf8)
        try u.fails(["hosts", "list", "--offline"], 5)
        // nothing was made on the host by the refused commands
        #expect(try await u.host.worktrees.list(projectPath: repo).count == 1)
        #expect(try await u.host.tmux.sessions().isEmpty)
    }

    /// The prompt queue from the command line: a queued prompt reaches the agent once it
    /// is idle, the queue can be listed, and the bad cases are refused with their status.
    @Test func aQueuedPromptFromTheCommandLine() async throws {
        let u = try User()
        let repo = try await WorktreeTests.makeRepository(u.host)
        defer { Task { await u.tearDown([repo]) } }
        try u.addHost()
        try u.ok(["projects", "add", "fixture", repo, "--name", "repo"])
        try u.ok(["tasks", "new", "repo", "Queue things", "--agent", "amp"])
        let task = try #require(try await u.store().tasks(projectID: nil).first)
        let id = String(task.id.short)

        try u.fails(["send", "--queue", "--when-idle", id, "both"], 64)
        try u.fails(["send", "--queue", "--no-enter", id, "half"], 64)
        let queued = try u.run(["send", "--queue", id, "queued line"])
        #expect(queued.status == 0 && queued.err.contains("queued b-"), "\(queued.err)")
        let log = await eventually(30) { () -> String? in
            let out = (try? u.ok(["log", id])) ?? ""
            return out.contains("got: queued line") ? out : nil
        }
        #expect(log != nil, "the host sent the queued prompt once the agent was idle")
        let listed = try u.ok(["queue", "list", id, "--json"])
        #expect((try? JSONSerialization.jsonObject(with: Data(listed.utf8)) as? [Any])?.isEmpty == true, "\(listed)")
        try u.fails(["queue", "rm", id, "b-0000000000000-0000"], 2)
        try u.fails(["queue", "rm", id, "../pid"], 64)
        #expect(try u.run(["queue", "clear", id]).err.contains("removed 0 queued prompts"))

        // an agent that has exited takes no queued prompt
        try u.ok(["send", id, "quit"])
        _ = await eventually(20) { () -> Bool? in
            ((try? u.ok(["status", "--json"])) ?? "").contains("exited") ? true : nil
        }
        let refused = try u.fails(["send", "--queue", id, "too late"], 1)
        #expect(refused.contains("is not running"), "\(refused)")
    }

    @Test func aTaskFromStartToDelete() async throws {
        let u = try User()
        let repo = try await WorktreeTests.makeRepository(u.host)
        defer { Task { await u.tearDown([repo]) } }
        try u.addHost()
        try u.ok(["projects", "add", "fixture", repo, "--name", "repo"])
        #expect(try u.ok(["agents", "fixture"]).contains("fake-tui"))
        // the prompt from standard input
        let started = try u.ok(["tasks", "new", "repo", "Fix the flaky test", "--agent", "amp", "--prompt-file", "-"],
                               stdin: "first line\nsecond line\n")
        #expect(started.contains("started task"), "\(started)")
        let tasks = try await u.store().tasks(projectID: nil)
        let task = try #require(tasks.first)
        let id = String(task.id.short)
        #expect(task.worktree.branch.hasPrefix("emdash/fix-the-flaky-test-"))

        // typed without attaching, read back from its scrollback
        try u.ok(["send", id, "hello agent"])
        let log = await eventually { () -> String? in
            let out = (try? u.ok(["log", id])) ?? ""
            return out.contains("got: hello agent") ? out : nil
        }
        #expect(log != nil, "the agent answered what send typed")
        #expect(log?.contains("\u{1B}") == false, "escape sequences are stripped unless --raw")

        // the board: plain lines when piped, JSON for scripts
        _ = try await WorktreeTests.sh(u.host, "printf 'x\\n' >> \"$1/a.txt\"; printf 'new\\n' > \"$1/b.txt\"", task.worktree.path)
        let plain = try u.ok(["status"])
        #expect(plain.contains("Fix the flaky test") && plain.contains(task.worktree.branch) && !plain.contains("\u{1B}"), "\(plain)")
        let json = try u.ok(["status", "--json"])
        let document = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(document["schemaVersion"] as? Int == 2)
        let rows = try #require(document["tasks"] as? [[String: Any]])
        #expect(rows.count == 1)
        #expect(rows.first?["filesChanged"] as? Int == 2, "\(json)")
        let agents = rows.first?["agents"] as? [[String: Any]]
        #expect(agents?.first?["agent"] as? String == "amp")
        // never a placeholder: the host's watcher has looked at the screen
        #expect(["starting", "working", "idle", "done", "waiting"].contains(agents?.first?["state"] as? String ?? ""), "\(json)")
        #expect(["screen", "process"].contains(agents?.first?["source"] as? String ?? ""), "\(json)")

        let stat = try u.ok(["diff", id, "--stat"])
        #expect(stat.contains("a.txt") && stat.contains("b.txt") && stat.contains(" 2 files changed, 2 insertions(+)"), "\(stat)")
        #expect(try u.ok(["diff", id, "--file", "a.txt"]).contains("+x"))

        // a chat with another agent in the same worktree
        try u.ok(["chats", "add", id, "--agent", "gemini"])
        let shown = try u.ok(["tasks", "show", id])
        #expect(shown.contains("agent 2   gemini (chat"), "\(shown)")
        try u.ok(["tasks", "stop", id, "--chat", "gemini"])
        #expect(try u.ok(["log", id, "--chat", "2"]).contains("tick"), "a stopped chat's scrollback was kept")

        // log --follow prints what comes, and ends when the agent does
        let follow = try u.start(["log", id, "--follow"])
        try await Task.sleep(for: .milliseconds(700))
        try u.ok(["send", id, "followed line"])
        let seen = await eventually { follow.output().contains("got: followed line") ? true : nil }
        #expect(seen == true, "log --follow printed the new line: \(follow.output())")
        try u.ok(["send", id, "quit"])
        #expect(await follow.exit(within: 20) == 0, "log --follow ended with the agent: \(follow.output())")
        #expect(follow.output().contains("bye"))

        // status --watch, piped: a plain board per round until interrupted
        let watch = try u.start(["status", "--watch", "--interval", "0.3"])
        let rounds = await eventually { () -> Int? in
            let n = watch.output().components(separatedBy: "ID  ").count - 1
            return n >= 3 ? n : nil
        }
        watch.stop()
        #expect(rounds != nil && !watch.output().contains("\u{1B}"), "three plain rounds: \(watch.output())")
        #expect(watch.output().contains("exited 0"), "the board saw the agent end: \(watch.output())")

        // delete refuses to lose the uncommitted work, then --force
        let refused = try u.fails(["tasks", "delete", id], 3)
        #expect(refused.contains("--force"), "\(refused)")
        #expect(try await u.transport.fileExists(task.worktree.path), "nothing was removed")
        try u.ok(["tasks", "delete", id, "--force"])
        #expect(try await !u.transport.fileExists(task.worktree.path))
        #expect(try await u.host.tmux.sessions().isEmpty, "no session left behind")
        #expect(try await u.store().tasks(projectID: nil).isEmpty)
        #expect(try u.ok(["orphans", "fixture"]).contains("no orphans"))
    }

    /// `service install watch` writes a systemd user unit that runs this binary's `watch`
    /// with the store and settings given (written whole, the same again on a second
    /// install); `remove` takes it away, also where no user manager runs.
    @Test func watchAsAUserService() throws {
        let u = try User()
        defer { try? FileManager.default.removeItem(atPath: u.home) }
        let unitPath = u.home + "/.config/systemd/user/agent-sessions-watch.service"
        let installed = try u.ok(["service", "install", "watch", "--no-start", "--store", u.home + "/my store.sqlite"])
        #expect(installed.contains("wrote \(unitPath)"), "\(installed)")
        let unit = try String(contentsOfFile: unitPath, encoding: .utf8)
        let exec = unit.split(separator: "\n").first { $0.hasPrefix("ExecStart=") }.map(String.init) ?? ""
        // the binary itself (its path with links resolved: .build/debug is one)
        let binary = URL(fileURLWithPath: AgentSessionsToolTests.binary).resolvingSymlinksInPath().path
        #expect(exec == "ExecStart=\(binary) watch --store \"\(u.home)/my store.sqlite\"", "\(unit)")
        #expect(unit.contains("Restart=on-failure") && unit.contains("WantedBy=default.target"))
        // systemd itself reads the unit: no unknown key, a binary that exists, a target it knows
        let verified = try TestServer.runCapturing("/usr/bin/systemd-analyze", ["verify", "--user", "--man=no", unitPath],
                                                   env: ["HOME": u.home, "PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": u.home])
        #expect(verified.status == 0 && verified.err.isEmpty, "systemd-analyze verify: \(verified)")
        try u.ok(["service", "install", "watch", "--no-start", "--store", u.home + "/my store.sqlite"])
        #expect(try String(contentsOfFile: unitPath, encoding: .utf8) == unit)
        #expect(!FileManager.default.fileExists(atPath: unitPath + ".tmp"))
        #expect(try u.fails(["service", "install", "cockpit", "--no-start"], 64).contains("no service is called cockpit (watch, serve)"))
        // the page's server as a service too, beside watch
        let servePath = u.home + "/.config/systemd/user/agent-sessions-serve.service"
        #expect(try u.ok(["service", "install", "serve", "--no-start"]).contains("wrote \(servePath)"))
        let serveUnit = try String(contentsOfFile: servePath, encoding: .utf8)
        #expect(serveUnit.contains("ExecStart=\(binary) serve\n") && serveUnit.contains("Description=agent-sessions serve: the board"),
                "\(serveUnit)")
        let serveVerified = try TestServer.runCapturing("/usr/bin/systemd-analyze", ["verify", "--user", "--man=no", servePath],
                                                        env: ["HOME": u.home, "PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": u.home])
        #expect(serveVerified.status == 0 && serveVerified.err.isEmpty, "systemd-analyze verify: \(serveVerified)")
        #expect(try u.run(["service", "remove", "serve"]).status == 0)
        #expect(!FileManager.default.fileExists(atPath: servePath))
        // no user manager in the test's environment: said, and the unit is removed all the same
        let removed = try u.run(["service", "remove", "watch"])
        #expect(removed.status == 0 && removed.out.contains("removed \(unitPath)"), "\(removed)")
        #expect(!FileManager.default.fileExists(atPath: unitPath))
        #expect(try u.fails(["service", "remove", "watch"], 2).contains("is not installed"))
    }

    @Test func archivedTasksResumeAndOrphansAreAdoptedOrRemoved() async throws {
        let u = try User()
        let repo = try await WorktreeTests.makeRepository(u.host)
        defer { Task { await u.tearDown([repo]) } }
        try u.addHost()
        try u.ok(["projects", "add", "fixture", repo, "--name", "repo"])
        try u.ok(["tasks", "new", "repo", "One", "--agent", "amp"])
        try u.ok(["tasks", "new", "repo", "Two", "--agent", "amp", "--prompt", "go"])
        try u.ok(["tasks", "stop", "One"])
        try u.ok(["tasks", "resume", "One"])
        #expect(try await u.host.tmux.sessions().filter(\.isRunning).count == 2)
        try u.ok(["tasks", "archive", "Two"])
        #expect(try await u.host.tmux.sessions().count == 1, "archiving stopped its agent")
        #expect(!(try u.ok(["tasks", "list"])).contains("Two"))
        #expect(try u.ok(["tasks", "list", "--all"]).contains("Two"))
        // an archived task takes no input, whichever way it is asked: one rule, one answer
        let refusals = [try u.fails(["send", "Two", "more"], 3), try u.fails(["send", "Two", "--queue", "more"], 3),
                        try u.fails(["send", "Two", "--when-idle", "more"], 3), try u.fails(["tasks", "resume", "Two"], 3),
                        try u.fails(["chats", "add", "Two", "--agent", "amp"], 3), try u.fails(["open", "Two"], 3)]
        for r in refusals {
            #expect(r.hasPrefix("agent-sessions: the task Two is archived; its branch emdash/two-") && r.contains("start a new task to go on"),
                    "\(r)")
        }

        // a second store (another laptop) sees the first one's work as orphans
        let other = ["--store", u.home + "/other.sqlite"]
        try u.ok(["hosts", "add", "fixture", u.destination, "--key", u.server.key("id_ed25519"), "--tmux-socket", u.socket] + other)
        try u.ok(["projects", "add", "fixture", repo] + other)
        let found = try u.ok(["orphans", "fixture"] + other)
        #expect(found.split(separator: "\n").filter { $0.hasPrefix("worktree") }.count == 2, "\(found)")
        #expect(found.split(separator: "\n").filter { $0.hasPrefix("session") }.count == 1, "\(found)")
        let adopted = try u.ok(["orphans", "fixture", "--adopt"] + other)
        #expect(adopted.contains("adopted session"), "\(adopted)")
        let one = try #require(try await u.store().tasks(projectID: nil).first { $0.title == "One" })
        let theirs = try SQLiteAgentStore(path: u.home + "/other.sqlite")
        #expect(try await theirs.task(id: one.id) != nil, "the task kept its id: its agent's session names it")
        #expect(try await theirs.conversations(taskID: one.id).first?.state == .running)
        #expect(try u.ok(["orphans", "fixture"] + other).contains("no orphans"))
        #expect(try u.ok(["log", String(one.id.short)] + other).contains("READY>"), "the adopted agent is reachable")

        // removing orphans: the first store forgets its tasks; --remove cleans the host
        for t in try await u.store().tasks(projectID: nil) { try await u.store().deleteTask(id: t.id) }
        try u.ok(["orphans", "fixture", "--remove", "--force"])
        #expect(try await u.host.tmux.sessions().isEmpty)
        #expect(try await u.host.worktrees.list(projectPath: repo).count == 1, "only the main checkout is left")
    }

    /// attach in a real terminal (tmux here, driven by send-keys): typing, resize, the
    /// connection reset under it (it says so, reconnects, reattaches), both detach keys,
    /// and the local terminal restored after.
    @Test func attachTypesResizesSurvivesADropAndDetaches() async throws {
        let u = try User()
        let repo = try await WorktreeTests.makeRepository(u.host)
        let proxy = try FaultProxy(target: TestServer.shared.port)
        defer { proxy.stop() }
        // one local tmux server per attach (a new server on a socket just killed can race its end)
        let first = ShellExampleTests.Tmux(socket: u.home + "/tmux1.sock")
        let second = ShellExampleTests.Tmux(socket: u.home + "/tmux2.sock")
        defer { first.kill(); second.kill() }
        var tmux = first
        defer { Task { await u.tearDown([repo]) } }
        try u.addHost(port: proxy.port)
        try u.ok(["projects", "add", "fixture", repo, "--name", "repo"])
        try u.ok(["tasks", "new", "repo", "Attach me", "--agent", "amp"])
        let task = try #require(try await u.store().tasks(projectID: nil).first)
        let id = String(task.id.short)
        let session = "amp-main-" + task.id.rawValue

        let tool = ["env", "-i", "HOME=\(u.home)", "PATH=/usr/local/bin:/usr/bin:/bin", "TERM=xterm-256color", Self.binary,
                    "attach", id, "--reconnect-timeout", "60"].map { "'\($0)'" }.joined(separator: " ")
        // (the settings first: the status file appearing means both are written)
        func attach(_ n: Int, in tmux: ShellExampleTests.Tmux) throws {
            try tmux.start(width: 100, height: 30,
                           command: "\(tool); s=$?; stty -a > \(u.home)/stty\(n); echo status=$s > \(u.home)/status\(n); sleep 30",
                           log: u.home + "/tmux.log")
        }
        func finished(_ n: Int) async -> String {
            await eventually { () -> String? in
                let s = (try? String(contentsOfFile: u.home + "/status\(n)", encoding: .utf8)) ?? ""
                return s.isEmpty ? nil : s
            } ?? "never finished"
        }
        func remoteWindow() async -> String {
            let r = try? await u.transport.runProcess("tmux", "-L", u.socket, "display-message", "-p", "-t", "=\(session):",
                                                      "#{window_width}x#{window_height}")
            return r?.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        }

        try attach(1, in: tmux)
        try await tmux.waitFor("READY>")
        _ = try tmux.run(["send-keys", "-t", tmux.session, "typed-one", "Enter"])
        try await tmux.waitFor("got: typed-one")
        #expect(await eventually { await remoteWindow() == "100x30" ? true : nil } == true)
        _ = try tmux.run(["resize-window", "-t", tmux.session, "-x", "120", "-y", "40"])
        #expect(await eventually { await remoteWindow() == "120x40" ? true : nil } == true, "the agent's window follows")

        // every connection through the proxy is reset from its next byte on
        proxy.arm { f, _, _ in f.resetServerToClientAt = 0 }
        _ = try tmux.run(["send-keys", "-t", tmux.session, "typed-two", "Enter"])
        try await tmux.waitFor("was lost; reconnecting")
        proxy.arm { f, _, _ in f.resetServerToClientAt = nil }
        // reattached: tmux redraws the screen, with what the agent printed meanwhile
        try await tmux.waitFor("got: typed-two")
        _ = try tmux.run(["send-keys", "-t", tmux.session, "typed-three", "Enter"])
        try await tmux.waitFor("got: typed-three")
        #expect(proxy.connections.load(ordering: .relaxed) >= 2)

        _ = try tmux.run(["send-keys", "-t", tmux.session, "C-]"])
        #expect(await finished(1) == "status=0\n")
        try await tmux.waitFor("dropped 1 time and")
        let stty = (try? String(contentsOfFile: u.home + "/stty1", encoding: .utf8)) ?? ""
        let flags = Set(stty.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == ";" }).map(String.init))
        #expect(flags.contains("icanon") && flags.contains("echo") && flags.contains("isig"), "the terminal is restored: \(stty)")
        #expect(try await u.host.tmux.session(named: session)?.isRunning == true, "detaching left the agent running")

        // tmux's own detach key works too (send-keys bypasses the local tmux's bindings)
        tmux.kill()
        tmux = second
        try attach(2, in: tmux)
        try await tmux.waitFor("got: typed-three")
        _ = try tmux.run(["send-keys", "-t", tmux.session, "C-b", "d"])
        #expect(await finished(2) == "status=0\n")
        try await tmux.waitFor("keeps running")
        #expect(try await u.host.tmux.session(named: session)?.isRunning == true)
    }

    /// The store under two writers at once and a writer killed mid-write: every change a
    /// writer acknowledged (printed after the call returned) is there, the file is sound.
    @Test func theStoreKeepsEveryAcknowledgedWriteAcrossConcurrentWritersAndAKill() async throws {
        #expect(FileManager.default.isExecutableFile(atPath: Self.writer), "build the package first (swift build)")
        let dir = "/tmp/sshkit-as-store-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/store.sqlite"
        _ = try SQLiteAgentStore(path: path)

        func start(_ prefix: String, _ count: Int) throws -> (Process, Pipe) {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: Self.writer)
            p.arguments = [path, prefix, "\(count)"]
            let out = Pipe()
            p.standardOutput = out
            try p.run()
            return (p, out)
        }
        // two at once, to the end
        let (a, aOut) = try start("a", 150)
        let (b, bOut) = try start("b", 150)
        let aAcks = String(decoding: aOut.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n")
        let bAcks = String(decoding: bOut.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n")
        a.waitUntilExit()
        b.waitUntilExit()
        #expect(a.terminationStatus == 0 && b.terminationStatus == 0)
        #expect(aAcks.count == 150 && bAcks.count == 150)

        // one killed while it writes as fast as it can
        let (k, kOut) = try start("k", 100_000)
        var acked: [Substring] = []
        var buffer = Data()
        while acked.count < 200 {
            let chunk = kOut.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            buffer.append(chunk)
            acked = String(decoding: buffer, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: true)
        }
        kill(k.processIdentifier, SIGKILL)
        k.waitUntilExit()
        buffer.append(kOut.fileHandleForReading.readDataToEndOfFile())
        let text = String(decoding: buffer, as: UTF8.self)
        // the last line may be cut by the kill: only whole lines were acknowledged
        acked = text.split(separator: "\n", omittingEmptySubsequences: true)
        if !text.hasSuffix("\n") { acked.removeLast() }
        #expect(acked.count >= 200)

        let store = try SQLiteAgentStore(path: path)
        #expect(try await store.integrityProblems().isEmpty)
        let names = Set(try await store.hosts().map(\.name))
        let missing = (aAcks + bAcks + acked).map(String.init).filter { !names.contains($0) }
        #expect(missing.isEmpty, "acknowledged but lost: \(missing.prefix(5))")
        // each acknowledged host has its whole tree (one transaction per writer step)
        for name in (aAcks.suffix(3) + acked.suffix(3)).map(String.init) {
            let h = try #require(try await store.hosts().first { $0.name == name })
            let p = try #require(try await store.projects(hostID: h.id).first)
            let t = try #require(try await store.tasks(projectID: p.id).first)
            #expect(try await store.conversations(taskID: t.id).count == 1)
        }
        // and the tool reads it
        let check = try TestServer.runCapturing(Self.binary, ["store", "check", "--store", path])
        #expect(check.status == 0 && check.out.hasPrefix("ok:"), "\(check)")
    }
}
