@testable import AgentSessions
import Foundation
import SSHKit
import ServerTransport
import Synchronization
import Testing

/// Real coding agents from PyPI, not fakes: Mistral's `vibe` (mistral-vibe), `kimi`
/// (kimi-cli 1.51.0) and `hermes` (hermes-agent), installed by scripts/install-deps.sh
/// (scripts/agents/install-agents.sh) into /opt. Each runs on the fixture's sshd as its
/// test user, against a scripted OpenAI-compatible model server of the test's own on
/// 127.0.0.1 (scripts/agents/fake-model-server.py), so it does real work: its own write
/// tool writes a file in the task's worktree. Each agent gets a home of its own (HOME and
/// its own home variable), so the user's setup is never touched.
@Suite("Real agents", .tags(.integration), .serialized)
struct RealAgentTests {
    static let binaries = ["mistral": "/opt/sshkit-vibe/bin/vibe", "kimi": "/opt/sshkit-kimi/bin/kimi",
                           "hermes": "/opt/sshkit-hermes/bin/hermes"]

    /// The scripted model server: the first line it prints is its port.
    final class ModelServer: Sendable {
        let daemon: Daemon
        let port: Int
        let dir: String

        init() throws {
            dir = try TestPaths.makeTemporaryDirectory("model-server")
            let script = TestServer.packageRoot + "/scripts/agents/fake-model-server.py"
            daemon = try Daemon.spawn("/usr/bin/python3", [script, "0", "--idle", "900", "--log", dir + "/requests.jsonl"],
                                      log: dir + "/server.log")
            var found: Int?
            for _ in 0..<400 where found == nil {
                let text = (try? String(contentsOfFile: dir + "/server.log", encoding: .utf8)) ?? ""
                found = text.split(separator: "\n").first.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
                if found == nil {
                    guard daemon.isRunning else { break }
                    usleep(25_000)
                }
            }
            guard let found else {
                daemon.stop()
                throw FixtureError("the model server did not start: \((try? String(contentsOfFile: dir + "/server.log", encoding: .utf8)) ?? "")")
            }
            port = found
        }

        func stop() {
            daemon.stop()
            try? FileManager.default.removeItem(atPath: dir)
        }
    }

    /// A host with the real agents on its search path, a model server, an agent home on the
    /// host pointed at it, and an orchestrator with one project.
    struct Fixture {
        let server: ModelServer
        let transport: SSHTransport
        let agentHost: AgentHost
        let orchestrator: AgentOrchestrator
        let project: ProjectRecord
        let home: String
        let tmuxSocket: String

        init(_ provider: String) async throws {
            let binary = try #require(RealAgentTests.binaries[provider])
            try #require(FileManager.default.isExecutableFile(atPath: binary),
                         "\(binary) is missing: scripts/install-deps.sh installs the real agents (scripts/agents/install-agents.sh)")
            server = try ModelServer()
            let test = TestServer.shared
            tmuxSocket = "sshkit-real-\(UInt32.random(in: 0...UInt32.max))"
            let record = HostRecord(name: "real", address: test.host, port: test.port, user: test.user,
                                    authentication: .keyFiles([test.dir + "/client_ed25519"]), tmuxSocket: tmuxSocket)
            transport = SSHTransport(configuration: test.configuration(), serverID: record.serverID)
            agentHost = AgentHost(transport: transport, tmuxSocket: tmuxSocket,
                                  extraSearchPath: RealAgentTests.binaries.values.map { ($0 as NSString).deletingLastPathComponent }.sorted())
            home = try await agentHost.absolutePath("~/real-agents-\(UInt32.random(in: 0...UInt32.max))")
            try await transport.createDirectory(home)
            _ = try TestServer.run("/bin/bash", [TestServer.packageRoot + "/scripts/agents/configure-agents.sh", home,
                                                 "\(server.port)", test.user])
            let environment = ["HOME": home, "VIBE_HOME": home + "/.vibe", "KIMI_SHARE_DIR": home + "/.kimi",
                               "HERMES_HOME": home + "/.hermes", "KIMI_CLI_NO_AUTO_UPDATE": "1"]
            let store = InMemoryAgentStore()
            try await store.save(record)
            let path = try await WorktreeTests.makeRepository(agentHost)
            project = ProjectRecord(hostID: record.id, name: "repo", path: path)
            try await store.save(project)
            let made = agentHost
            orchestrator = AgentOrchestrator(store: store, providerSettings: [provider: AgentProviderSettings(environment: environment)],
                                             statusHooks: false) { _ in made }
        }

        /// The contents of `path` on the host once they are `expected` (the agent wrote
        /// them; a file is seen empty for a moment after its creation), else the last seen.
        func file(_ path: String, is expected: String = "hello from the model\n", seconds: Double = 90) async -> String? {
            let last = Mutex<String?>(nil)
            return await eventually(seconds) { () async -> String? in
                let text = try? await transport.readTextFile(path)
                last.withLock { $0 = text }
                return text == expected ? text : nil
            } ?? last.withLock { $0 }
        }

        func screen(_ session: AgentSession, shows text: String, seconds: Double = 60) async -> String? {
            await eventually(seconds) { () async -> String? in
                let s = (try? await agentHost.recentOutput(of: session, lines: 200)) ?? ""
                return s.contains(text) ? s : nil
            }
        }

        func run(_ script: String) async throws -> String {
            try await transport.runProcess("/bin/sh", "-c", script).stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func tearDown() async {
            await orchestrator.connections.close()
            // an agent may outlive its tmux session for seconds (Hermes does): what runs in
            // the panes' sessions is ended too, and nothing of another test's
            let stop = """
                panes=$(tmux -L "$1" list-panes -a -F '#{pane_pid}' 2>/dev/null)
                for p in $panes; do pkill -TERM -s "$p"; done
                tmux -L "$1" kill-server 2>/dev/null
                sleep 1
                for p in $panes; do pkill -KILL -s "$p"; done
                exit 0
                """
            _ = try? await transport.runProcess("/bin/sh", "-c", stop, "sh", tmuxSocket)
            await endTmuxServer(tmuxSocket, on: transport)
            await endProcesses(home: home, on: transport)
            await removeOnHost([project.path, home], transport)
            await transport.close()
            server.stop()
        }
    }

    /// Each entry checked against the installed CLI: its version arguments print a
    /// version, its help names the auto-approve flag and the resume flag the engine uses.
    @Test(arguments: ["mistral", "kimi", "hermes"])
    func theRegistryEntryMatchesTheInstalledCLI(_ id: String) async throws {
        let binary = try #require(Self.binaries[id])
        try #require(FileManager.default.isExecutableFile(atPath: binary), "\(binary) is missing: run scripts/install-deps.sh")
        let p = try AgentProvider.named(id)
        #expect(URL(fileURLWithPath: binary).lastPathComponent == p.binary)
        let version = try TestServer.runCapturing(binary, p.versionArguments, env: ["HOME": "/tmp", "PATH": "/usr/bin:/bin"])
        #expect(version.status == 0 && version.out.range(of: #"[0-9]+\.[0-9]+\.[0-9]+"#, options: .regularExpression) != nil,
                "\(p.versionArguments): \(version.out) \(version.err)")
        let help = try TestServer.runCapturing(binary, ["--help"], env: ["HOME": "/tmp", "PATH": "/usr/bin:/bin", "COLUMNS": "200"])
        let text = help.out + help.err
        if let flag = p.autoApproveFlag { #expect(text.contains(flag), "\(id) --help does not name \(flag)") }
        switch p.sessionTracking {
        case .chosenSessionID(let flag, _), .recordedSession(let flag, _):
            #expect(text.contains(flag), "\(id) --help does not name \(flag)")
        default:
            Issue.record("\(id) should resume by its own session id")
        }
        for flag in p.resumeArguments where flag.hasPrefix("-") { #expect(text.contains(flag)) }
    }

    /// Vibe takes its prompt as an argument, writes the file with its own tool, and a
    /// resume names the session Vibe recorded for the worktree (not "the newest").
    @Test func vibeDoesTheWorkAndResumesItsOwnSession() async throws {
        let f = try await Fixture("mistral")
        do { try await vibe(f) } catch { await f.tearDown(); throw error }
        await f.tearDown()
    }

    func vibe(_ f: Fixture) async throws {
        let (_, task, main, session) = try await f.orchestrator.project(f.project.id).createTask(title: "vibe",
                                                                       providerID: "mistral", prompt: "file: hello.txt",
                                                                       autoApprove: true)
        #expect(session.arguments == ["vibe", "--auto-approve", "file: hello.txt"])
        let wrote = await f.file(task.worktree.path + "/hello.txt")
        let shown = wrote == nil ? ((try? await f.agentHost.recentOutput(of: session, lines: 40)) ?? "") : ""
        #expect(wrote == "hello from the model\n", "\(shown)")
        #expect(await f.screen(session, shows: "done: wrote hello.txt") != nil)
        let id = try await f.run("grep -l '\"working_directory\": \"\(task.worktree.path)\"' \(f.home)/.vibe/logs/session/unified/*/meta.json"
            + " | head -n 1 | xargs dirname | xargs basename")
        #expect(!id.isEmpty, "Vibe recorded no session for the worktree")

        try await f.orchestrator.chat(main.id).stop()
        let resumed = try await f.orchestrator.chat(main.id).resume()
        #expect(resumed.resumeMethod == .exact(id))
        #expect(resumed.arguments == ["vibe", "--resume", id, "--auto-approve"])
        // the resumed agent goes on working in that conversation
        #expect(await f.screen(resumed, shows: "done: wrote hello.txt") != nil, "the resumed screen shows no earlier turn")
        try await f.agentHost.sendLine("file: second.txt", to: resumed)
        #expect(await f.file(task.worktree.path + "/second.txt") == "hello from the model\n")
        try await f.orchestrator.chat(main.id).stop()
    }

    /// Kimi's prompt is typed (its `-c` is a one-shot run that exits after the answer), so
    /// it stays up for the next one; its session is the one the engine named with
    /// `--session`, created by the first start and resumed by the next.
    @Test func kimiStaysUpAfterItsAnswerAndResumesTheSessionItWasGiven() async throws {
        let f = try await Fixture("kimi")
        do { try await kimi(f) } catch { await f.tearDown(); throw error }
        await f.tearDown()
    }

    func kimi(_ f: Fixture) async throws {
        let (_, task, main, session) = try await f.orchestrator.project(f.project.id).createTask(title: "kimi",
                                                                       providerID: "kimi", prompt: "file: hello.txt",
                                                                       autoApprove: true)
        let uuid = main.ptyID.sessionUUID
        #expect(session.arguments == ["kimi", "--session", uuid, "--yolo"])
        let wrote = await f.file(task.worktree.path + "/hello.txt")
        let shown = wrote == nil ? ((try? await f.agentHost.recentOutput(of: session, lines: 40)) ?? "") : ""
        #expect(wrote == "hello from the model\n", "\(shown)")
        #expect(await f.screen(session, shows: "done: wrote hello.txt") != nil)
        try await Task.sleep(for: .seconds(3))
        #expect(try await f.agentHost.state(of: session) == .running, "Kimi ended after its first answer")

        try await f.orchestrator.chat(main.id).stop()
        let resumed = try await f.orchestrator.chat(main.id).resume()
        #expect(resumed.resumeMethod == .exact(uuid))
        #expect(resumed.arguments == ["kimi", "--session", uuid, "--yolo"])
        #expect(await f.screen(resumed, shows: uuid) != nil)
        #expect(await f.screen(resumed, shows: "── input") != nil)
        try await Task.sleep(for: .seconds(1))
        try await f.agentHost.sendLine("file: second.txt", to: resumed)
        #expect(await f.file(task.worktree.path + "/second.txt") == "hello from the model\n")
        // attached, its frame comes as line art, not `qqqq` (the host's login has no UTF-8
        // locale; the attach tells tmux the terminal is UTF-8)
        let terminal = try await f.agentHost.attach(resumed, size: SSHTerminalSize(columns: 120, rows: 40))
        let attached = await read(terminal, until: "── input")
        terminal.cancel()
        #expect(attached.contains("── input") && !attached.contains("qqqq"), "\(attached.suffix(400))")
        try await f.orchestrator.chat(main.id).stop()
    }

    /// Hermes's prompt is typed; its `--continue` would take the user's newest session in
    /// any directory, so a resume names the session Hermes recorded for this worktree.
    @Test func hermesDoesTheWorkAndResumesItsOwnSession() async throws {
        let f = try await Fixture("hermes")
        do { try await hermes(f) } catch { await f.tearDown(); throw error }
        await f.tearDown()
    }

    func hermes(_ f: Fixture) async throws {
        let (_, task, main, session) = try await f.orchestrator.project(f.project.id).createTask(title: "hermes",
                                                                       providerID: "hermes", prompt: "file: hello.txt",
                                                                       autoApprove: true)
        #expect(session.arguments == ["hermes", "--yolo"])
        let wrote = await f.file(task.worktree.path + "/hello.txt", seconds: 120)
        let shown = wrote == nil ? ((try? await f.agentHost.recentOutput(of: session, lines: 40)) ?? "") : ""
        #expect(wrote == "hello from the model\n", "\(shown)")
        let id = await eventually(30) { () async -> String? in
            let r = (try? await f.run("sqlite3 -readonly \(f.home)/.hermes/state.db \"select id from sessions where cwd = '\(task.worktree.path)'\"")) ?? ""
            return r.isEmpty ? nil : r
        }
        let recorded = try #require(id, "Hermes recorded no session for the worktree")

        try await f.orchestrator.chat(main.id).stop()
        let resumed = try await f.orchestrator.chat(main.id).resume()
        #expect(resumed.resumeMethod == .exact(recorded))
        #expect(resumed.arguments == ["hermes", "--resume", recorded, "--yolo"])
        try await f.orchestrator.chat(main.id).stop()
    }

    /// Prompts queued behind turns that end at once (Vibe has no hooks, and its idle rule
    /// matches before and after a quick answer, so such a turn is never seen working) all
    /// reach the agent: the model server is asked with each, in order.
    @Test func vibesQueueGoesOnAfterQuickTurns() async throws {
        let f = try await Fixture("mistral")
        do { try await quickTurns(f) } catch { await f.tearDown(); throw error }
        await f.tearDown()
    }

    func quickTurns(_ f: Fixture) async throws {
        let (_, _, main, session) = try await f.orchestrator.project(f.project.id).createTask(title: "quick", providerID: "mistral",
                                                                    prompt: "say: quick-turn-zero", autoApprove: true)
        #expect(await f.screen(session, shows: "quick-turn-zero") != nil)
        for n in ["one", "two", "three"] { _ = try await f.orchestrator.queue("say: quick-turn-\(n)", for: main.id) }
        func asked() -> [String] {
            let log = (try? String(contentsOfFile: f.server.dir + "/requests.jsonl", encoding: .utf8)) ?? ""
            var seen: [String] = []
            for n in ["zero", "one", "two", "three"] where log.contains("say: quick-turn-\(n)") { seen.append(n) }
            return seen
        }
        let all = await eventually(90) { () -> [String]? in asked().count == 4 ? asked() : nil }
        let queue = try? await f.orchestrator.chat(main.id).promptQueue()
        let screen = (try? await f.orchestrator.chat(main.id).screen(lines: 40)) ?? ""
        #expect(all == ["zero", "one", "two", "three"], "asked: \(asked()); queue: \(String(describing: queue))\n\(screen)")
        #expect(await f.screen(session, shows: "quick-turn-three", seconds: 30) != nil)
        #expect(try await f.orchestrator.chat(main.id).promptQueue().prompts.isEmpty)
    }

    /// The states of a real agent as the host's watcher reports them, over the events
    /// channel: it works, asks for approval (the question seen as waiting for input, with
    /// its text), is answered, works, finishes (done, and a redrawing idle screen never
    /// reads as working), and exits.
    @Test(arguments: [("mistral", "run: echo hi > ran.txt", "Permission for the"),
                      ("kimi", "run: echo hi > ran.txt", "is requesting approval to"),
                      ("hermes", "run: rm -rf junk", "Dangerous Command")])
    func theWatcherFollowsARealAgentThroughApproval(_ provider: String, _ prompt: String, _ question: String) async throws {
        let f = try await Fixture(provider)
        do { try await statuses(f, provider, prompt, question) } catch { await f.tearDown(); throw error }
        await f.tearDown()
    }

    func statuses(_ f: Fixture, _ provider: String, _ prompt: String, _ question: String) async throws {
        let hostRecord = try #require(try await f.orchestrator.store.hosts().first)
        final class Seen: Sendable {
            let events = Mutex<[AgentStatusEvent]>([])
            func withLock<R>(_ body: (inout [AgentStatusEvent]) -> R) -> R { events.withLock { body(&$0) } }
        }
        let seen = Seen()
        let updates = f.orchestrator.followStatus(hosts: [hostRecord], newOnly: false)
        let follower = Task {
            for await u in updates {
                if case .status(let e, _, _) = u { seen.withLock { $0.append(e) } }
            }
        }
        defer { follower.cancel() }
        let (_, task, main, _) = try await f.orchestrator.project(f.project.id).createTask(title: provider, providerID: provider,
                                                                 prompt: prompt, autoApprove: false)
        if provider == "hermes" { _ = try await f.run("mkdir -p '\(task.worktree.path)/junk'") }
        func activities() -> [AgentActivity] {
            seen.withLock { $0.filter { $0.session == main.ptyID.description }.map(\.status.activity) }
        }
        func until(_ want: AgentActivity, seconds: Double = 90) async -> AgentStatusEvent? {
            await eventually(seconds) { () -> AgentStatusEvent? in
                seen.withLock { $0.last { $0.session == main.ptyID.description && $0.status.activity == want } }
            }
        }
        let asking = await until(.waitingForInput)
        let screen = (try? await f.orchestrator.chat(main.id).screen(lines: 40)) ?? ""
        #expect(asking?.status.question?.contains(question) == true, "\(activities()) \(String(describing: asking))\n\(screen)")
        // the dialog's first choice (allow once) is the selected one
        try await f.orchestrator.chat(main.id).send("")
        let done = await until(.done)
        let after = (try? await f.orchestrator.chat(main.id).screen(lines: 40)) ?? ""
        #expect(done != nil, "\(activities())\n\(after)")
        // an idle agent whose screen redraws (Vibe's logo) stays done, then idle, never working
        var rounds: [AgentActivity] = []
        for _ in 0..<8 {
            rounds.append(try await f.orchestrator.chat(main.id).status().activity)
            try await Task.sleep(for: .seconds(1))
        }
        #expect(rounds.allSatisfy { $0 == .done }, "\(rounds)")
        try await f.orchestrator.chat(main.id).markSeen()
        #expect(await eventually(10) { try? await f.orchestrator.chat(main.id).status().activity == .idle ? true : nil } == true)
        try await f.orchestrator.chat(main.id).send("/exit")
        let exited = await eventually(60) { () -> AgentActivity? in
            activities().last.flatMap { if case .exited = $0 { return $0 } else { return nil } }
        }
        #expect(exited == .exited(0), "\(activities())")
        // in order: a question, done (the work after the answer may be over before the
        // watcher's next look), idle once looked at, the end
        var order: [AgentActivity] = []
        for a in activities() where order.last != a { order.append(a) }
        let wanted: [AgentActivity] = [.waitingForInput, .done, .idle, .exited(0)]
        var i = 0
        for a in order where i < wanted.count && a == wanted[i] { i += 1 }
        #expect(i == wanted.count, "\(order)")
        _ = task
    }

    /// kimi-cli 1.52 and later is a stub: with arguments it prints a notice, with none it
    /// downloads and runs another installer. Detection says so and no start runs it.
    @Test func kimisDeprecationStubIsRefusedAndNeverRun() async throws {
        let t = SSHTransport(configuration: TestServer.shared.configuration())
        let stubDir = try await AgentHost(transport: t).absolutePath("~/kimi-stub-\(UInt32.random(in: 0...UInt32.max))")
        let host = AgentHost(transport: t, tmuxSocket: "sshkit-stub-\(UInt32.random(in: 0...UInt32.max))", extraSearchPath: [stubDir])
        do { try await stub(t, host, stubDir) } catch {
            await endTmuxServer(host.tmuxSocket, on: t)
            await removeOnHost([stubDir], t)
            await t.close()
            throw error
        }
        // awaited, not left to a task: the last test's tasks do not outlive the test process
        await endTmuxServer(host.tmuxSocket, on: t)
        await removeOnHost([stubDir], t)
        await t.close()
    }

    func stub(_ t: SSHTransport, _ host: AgentHost, _ stubDir: String) async throws {
        try await t.createDirectory(stubDir)
        try await t.writeTextFile(stubDir + "/kimi", """
            #!/bin/sh
            if [ $# -eq 0 ]; then touch "\(stubDir)/RAN-THE-INSTALLER"; exit 0; fi
            echo "kimi, version 1.52.0"
            echo "kimi-cli is no longer maintained. Please use the new Kimi Code CLI."
            """)
        _ = try await t.runProcess("/bin/chmod", "755", stubDir + "/kimi")
        let detected = try await host.detectAgents(refresh: true)
        #expect(detected.installed["kimi"] == stubDir + "/kimi")
        #expect(detected.unusable["kimi"]?.contains("deprecation stub") == true)

        let spec = AgentSessionSpec(ptyID: AgentPTYID(providerID: "kimi", kind: .main, suffix: "stub\(UInt32.random(in: 0...UInt32.max))"),
                                    provider: try AgentProvider.named("kimi"), workingDirectory: stubDir,
                                    resume: .exact(["--session", "x"]), statusHooks: false)
        let session = try await host.startAgent(spec)
        let ended = await eventually(20) { () async -> AgentProcessState? in
            let s = try? await host.state(of: session)
            if case .exited? = s { return s }
            return nil
        }
        #expect(ended == .exited(126), "\(String(describing: ended))")
        let screen = (try? await host.recentOutput(of: session)) ?? ""
        #expect(screen.contains("not started: this kimi is kimi-cli's deprecation stub"), "\(screen)")
        #expect(try await t.fileExists(stubDir + "/RAN-THE-INSTALLER") == false)
    }
}
