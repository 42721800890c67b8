import AgentSessions
import Foundation
import SSHKit
import ServerTransport
import Testing

/// Resume by the agent's own session id, never by "the latest one here": Claude's five
/// cases against a fake Claude that enforces its transcript rules on the host, and
/// Codex by the thread id in its state database.
@Suite("Agent resume", .tags(.integration), .serialized)
struct AgentResumeTests {
    static func mapFile() -> AgentSessionMapFile {
        let path = "/tmp/sshkit-session-map-\(getpid())-\(UInt32.random(in: 0...UInt32.max))/map.json"
        ServerRegistry.dirs.withLock { _ = $0.insert((path as NSString).deletingLastPathComponent) }
        return AgentSessionMapFile(path: path)
    }

    /// Starts `binary` as `provider` with `resume` in `dir`; waits for a line of the fake
    /// that says what it did, and stops it.
    static func run(_ host: AgentHost, _ id: AgentPTYID, binary: String, dir: String, resume: AgentLaunch.Resume,
                    expect marker: String) async throws -> String
    {
        let spec = AgentSessionSpec(ptyID: id, provider: try AgentProvider.named(id.providerID),
                                    settings: AgentProviderSettings(binary: binary), workingDirectory: dir, resume: resume)
        let session = try await host.startAgent(spec)
        let out = await eventually { () async -> String? in
            let s = (try? await host.recentOutput(of: session)) ?? ""
            return s.contains(marker) || s.contains("already in use") || s.contains("No conversation found") ? s : nil
        }
        try await host.stop(session)
        return out ?? ""
    }

    @Test func claudeInAllFiveCases() async throws {
        let t = SSHTransport(configuration: TestServer.shared.configuration())
        let host = AgentHost(transport: t, tmuxSocket: "sshkit-resume-\(UInt32.random(in: 0...UInt32.max))",
                             extraSearchPath: [FakeAgents.directory])
        let map = Self.mapFile()
        // a worktree-like path with '.' in it: Emdash's encoding (only / \ :) misses these
        let root = try await host.absolutePath("~/resume-\(UInt32.random(in: 0...UInt32.max))")
        let dir = root + "/.emdash/worktrees/fix-1"
        try await t.createDirectory(dir)
        defer {
            Task {
                _ = try? await t.runProcess("tmux", "-L", host.tmuxSocket, "kill-server")
                _ = try? await t.runProcess("/bin/rm", "-rf", root)
                await t.close()
            }
        }
        let main = AgentPTYID(providerID: "claude", kind: .main, suffix: "task-1")

        // 4. first main start: its own id, --session-id
        let first = try await host.claudeSessions.plan(ptyID: main, workingDirectory: dir, isResume: false, map: map)
        #expect(first.reason == .firstMainStart)
        #expect(first.resume == .exact(["--session-id", main.sessionUUID]))
        #expect(try await Self.run(host, main, binary: "fake-claude", dir: dir, resume: first.resume, expect: "NEW SESSION")
            .contains("NEW SESSION \(main.sessionUUID)"))
        #expect(try await host.claudeSessions.transcriptExists(sessionID: main.sessionUUID, workingDirectory: dir))

        // 1. known session: the transcript exists now, so --resume (never --session-id)
        let known = try await host.claudeSessions.plan(ptyID: main, workingDirectory: dir, isResume: true, map: map)
        #expect(known.reason == .knownSession)
        #expect(known.resume == .exact(["--resume", main.sessionUUID]))
        #expect(try await Self.run(host, main, binary: "fake-claude", dir: dir, resume: known.resume, expect: "RESUMED")
            .contains("RESUMED \(main.sessionUUID)"))

        // 2. an additional chat: its own session from its conversation id
        let chat = AgentPTYID(providerID: "claude", kind: .chat, suffix: "conv-9")
        let additional = try await host.claudeSessions.plan(ptyID: chat, workingDirectory: dir, isResume: false, map: map)
        #expect(additional.reason == .additionalChat)
        #expect(additional.resume == .exact(["--session-id", chat.sessionUUID]))
        #expect(chat.sessionUUID != main.sessionUUID)
        #expect(try await Self.run(host, chat, binary: "fake-claude", dir: dir, resume: additional.resume, expect: "NEW SESSION")
            .contains("NEW SESSION \(chat.sessionUUID)"))

        // 3. a main chat that ran before the map knew it (its transcript has another id)
        //    becomes multi-chat: it adopts its own transcript, not the chat's, with --resume
        let legacyDir = dir + "-legacy"
        try await t.createDirectory(legacyDir)
        let legacyMain = AgentPTYID(providerID: "claude", kind: .main, suffix: "task-2")
        let legacyChat = AgentPTYID(providerID: "claude", kind: .chat, suffix: "conv-2")
        let projects = try await host.claudeSessions.projectDirectory(workingDirectory: legacyDir)
        let legacyID = "0b6c5e3e-9c1d-4c1e-8f3a-2d9b1c7e5a40"
        try await t.createDirectory(projects)
        try await t.writeTextFile("\(projects)/\(legacyID).jsonl", "{}\n")
        _ = try await host.claudeSessions.plan(ptyID: legacyChat, workingDirectory: legacyDir, isResume: false, map: map)
        _ = try await Self.run(host, legacyChat, binary: "fake-claude", dir: legacyDir,
                               resume: .exact(["--session-id", legacyChat.sessionUUID]), expect: "NEW SESSION")
        // the chat's transcript is the newest; it is claimed, so the main chat adopts its own
        let transition = try await host.claudeSessions.plan(ptyID: legacyMain, workingDirectory: legacyDir, isResume: true, map: map)
        #expect(transition.reason == .mainChatBecomingMultiChat)
        #expect(transition.resume == .exact(["--resume", legacyID]))
        #expect(try await Self.run(host, legacyMain, binary: "fake-claude", dir: legacyDir, resume: transition.resume,
                                   expect: "RESUMED").contains("RESUMED \(legacyID)"))

        // 5. a resume with nothing known, no other chat in its directory and no transcript
        //    of its own id: the generic flags
        let soloDir = dir + "-solo"
        try await t.createDirectory(soloDir)
        let other = AgentPTYID(providerID: "claude", kind: .main, suffix: "task-3")
        let generic = try await host.claudeSessions.plan(ptyID: other, workingDirectory: soloDir, isResume: true, map: map)
        #expect(generic.reason == .genericResume)
        #expect(generic.resume == .generic)
        #expect(try await Self.run(host, other, binary: "fake-claude", dir: soloDir, resume: generic.resume, expect: "CONTINUED")
            .contains("CONTINUED THE LATEST"))
        // ...but in a directory where other Claude chats of the task live, the main chat
        // never takes "the latest": with every transcript claimed, it gets its own id
        let crowded = try await host.claudeSessions.plan(ptyID: other, workingDirectory: dir, isResume: true, map: map)
        #expect(crowded.reason == .mainChatBecomingMultiChat)
        #expect(crowded.resume == .exact(["--session-id", other.sessionUUID]))

        // a recorded session of another directory is stale: dropped, and the tree runs again
        let moved = try await host.claudeSessions.plan(ptyID: main, workingDirectory: legacyDir, isResume: false, map: map)
        #expect(moved.reason == .firstMainStart)
        #expect(try await map.entries()[main.description]?.workingDirectory == legacyDir)

        // the map survives a new process (a new file object reads what was written)
        let reread = AgentSessionMapFile(path: await map.path)
        #expect(try await reread.entries() == map.entries())
        let mode = try FileManager.default.attributesOfItem(atPath: await map.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test func codexResumesByItsThreadID() async throws {
        let t = SSHTransport(configuration: TestServer.shared.configuration())
        let host = AgentHost(transport: t, tmuxSocket: "sshkit-codex-\(UInt32.random(in: 0...UInt32.max))",
                             extraSearchPath: [FakeAgents.directory])
        let map = Self.mapFile()
        let dir = try await host.absolutePath("~/codex-\(UInt32.random(in: 0...UInt32.max))")
        try await t.createDirectory(dir)
        defer {
            Task {
                _ = try? await t.runProcess("tmux", "-L", host.tmuxSocket, "kill-server")
                _ = try? await t.runProcess("/bin/rm", "-rf", dir)
                await t.close()
            }
        }
        let db = try await host.codexThreads.statePath()
        // decoys: an older thread of the same directory, a new one of another directory
        let old = Int(Date().timeIntervalSince1970) - 3600, now = Int(Date().timeIntervalSince1970)
        try await t.runProcess("/bin/sh", arguments: ["-c", """
            mkdir -p "$(dirname "$1")" && sqlite3 "$1" "CREATE TABLE IF NOT EXISTS threads (id TEXT PRIMARY KEY, cwd TEXT, created_at INTEGER, updated_at INTEGER, archived INTEGER DEFAULT 0);
            INSERT INTO threads VALUES ('old-$2', '$2', \(old), \(old), 0); INSERT INTO threads VALUES ('elsewhere-$2', '/elsewhere', \(now), \(now), 0);"
            """, "sh", db, dir], stdin: [], environment: [:], timeout: .seconds(20)).check()

        let id = AgentPTYID(providerID: "codex", kind: .main, suffix: "task-c")
        #expect(try await host.codexThreads.plan(ptyID: id, workingDirectory: dir, map: map) == .generic)
        let started = Date()
        let spec = AgentSessionSpec(ptyID: id, provider: try AgentProvider.named("codex"),
                                    settings: AgentProviderSettings(binary: "fake-codex"), workingDirectory: dir)
        let session = try await host.startAgent(spec)
        let thread = try await host.codexThreads.bind(ptyID: id, workingDirectory: dir, startedAt: started, map: map)
        let screen = try await host.recentOutput(of: session)
        let shown = screen.split(separator: "\n").first { $0.hasPrefix("STARTED ") }.map { String($0.dropFirst(8)) }
        #expect(thread != nil && thread == shown?.trimmingCharacters(in: .whitespaces), "\(screen)")
        try await host.stop(session)

        let resume = try await host.codexThreads.plan(ptyID: id, workingDirectory: dir, map: map)
        #expect(resume == .exact(["resume", thread ?? "?"]))
        let launch = try AgentLaunch.plan(try AgentProvider.named("codex"), name: id.description, prompt: nil,
                                          autoApprove: true, resume: resume)
        #expect(launch.arguments == ["codex", "resume", thread ?? "?", "--full-auto"])
        var again = spec
        again.resume = resume
        let resumed = try await host.startAgent(again)
        #expect(await eventually { try? await host.recentOutput(of: resumed).contains("RESUMED \(thread ?? "?")") ? true : nil } == true)
        try await host.stop(resumed)

        // an archived thread is not resumed by id
        try await t.runProcess("sqlite3", arguments: [db, "UPDATE threads SET archived = 1 WHERE id = '\(thread ?? "")'"],
                               stdin: [], environment: [:], timeout: .seconds(20)).check()
        #expect(try await host.codexThreads.plan(ptyID: id, workingDirectory: dir, map: map) == .generic)
        _ = try? await t.runProcess("/bin/rm", "-f", db)
    }
}

/// Bad input around the engine's edges: typed errors, nothing overwritten.
@Suite("Agent bad input", .tags(.integration))
struct AgentBadInputTests {
    @Test func aCorruptSessionMapIsATypedErrorAndIsNotOverwritten() async throws {
        let dir = "/tmp/sshkit-bad-map-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        ServerRegistry.dirs.withLock { _ = $0.insert(dir) }
        FileManager.default.createFile(atPath: dir + "/map.json", contents: Data("{not json".utf8))
        let map = AgentSessionMapFile(path: dir + "/map.json")
        await #expect(throws: AgentError.self) { _ = try await map.entries() }
        await #expect(throws: AgentError.self) {
            try await map.set(AgentSessionMapEntry(providerID: "claude", workingDirectory: "/x", target: "y",
                                                   strategy: .claudeSessionID), for: "claude-main-1")
        }
        #expect(FileManager.default.contents(atPath: dir + "/map.json") == Data("{not json".utf8))
        #expect(AgentSessionMapFile(path: "~/m.json").path == NSHomeDirectory() + "/m.json")
        // a map where no file can be written: a typed error, nothing half-written
        let blocked = AgentSessionMapFile(path: dir + "/map.json/inside/map.json")
        do {
            try await blocked.set(AgentSessionMapEntry(providerID: "claude", workingDirectory: "/x", target: "y",
                                                       strategy: .claudeSessionID), for: "claude-main-1")
            Issue.record("a session map was written under a file")
        } catch let e as AgentError {
            #expect(e.code == .storage)
        }
    }

    @Test func aFileNameWithANulByteIsRefused() async throws {
        let host = AgentHost(transport: LocalTransport())
        let wt = Worktree(name: "x", projectPath: "/tmp", path: "/tmp", branch: "emdash/x", baseRef: "HEAD", baseCommit: "HEAD")
        let e = await #expect(throws: AgentError.self) { _ = try await host.worktrees.patch(wt, file: "a\u{0}b") }
        #expect(e?.code == .invalidArgument)
    }

    @Test func anAgentOnTheLocalHostAttachesOnALocalTerminal() async throws {
        // this machine as the host: tmux on a private socket, attach on a local PTY
        let host = AgentHost(transport: LocalTransport(), tmuxSocket: "sshkit-local-\(UInt32.random(in: 0...UInt32.max))",
                             extraSearchPath: [FakeAgents.directory])
        defer { Task { _ = try? await LocalTransport().runProcess("tmux", "-L", host.tmuxSocket, "kill-server") } }
        let session = try await host.startAgent(AgentSessionSpec(
            ptyID: AgentPTYID(providerID: "claude", kind: .main, suffix: "local1"), provider: try AgentProvider.named("claude"),
            settings: AgentProviderSettings(binary: "fake-tui"), workingDirectory: "/tmp", statusHooks: false))
        let terminal = try await host.attach(session, size: SSHTerminalSize(columns: 90, rows: 30))
        #expect(await read(terminal, until: "READY>").contains("READY>"))
        try await terminal.input.write(Array("local keys\r".utf8))
        #expect(await read(terminal, until: "got: local keys").contains("got: local keys"))
        try terminal.resize(to: SSHTerminalSize(columns: 100, rows: 35))
        terminal.cancel()
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await host.state(of: session) == .running, "detaching left the agent running")

        // a transport that opens no terminal: sessions work, attach is a typed error
        let blind = AgentHost(transport: CountingTransport(LocalTransport()), tmuxSocket: host.tmuxSocket)
        let e = await #expect(throws: AgentError.self) { _ = try await blind.attach(session) }
        #expect(e?.code == .terminalUnsupported)
        #expect(try await blind.recentOutput(of: session).contains("got: local keys"))
        try await host.stop(session)
    }
}
