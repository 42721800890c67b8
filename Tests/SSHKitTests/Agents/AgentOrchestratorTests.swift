@testable import AgentSessions
import AgentSessionsSQLite
import Foundation
import SSHKit
import ServerTransport
import Testing

/// Tasks end to end on the fixture's sshd: a worktree and its main agent, a chat with
/// another agent, stop with the scrollback saved, resume by exact session (Claude) and
/// thread (Codex), archive, and delete refusing to lose work; failures leave no records
/// and no worktree behind. The agents are the fakes, the git and tmux are real.
@Suite("Agent orchestration", .tags(.integration), .serialized)
struct AgentOrchestratorTests {
    /// An orchestrator over a new in-memory store with one host (the shared sshd, its own
    /// tmux socket) and one project (a fresh repository).
    struct Fixture {
        let orchestrator: AgentOrchestrator
        let store: any AgentStore
        let storeDirectory: String?
        let host: HostRecord
        let project: ProjectRecord
        let transport: SSHTransport
        let agentHost: AgentHost

        /// - Parameter sqlite: records in an `SQLiteAgentStore` in a temporary directory,
        ///   else in memory.
        init(settings: [String: AgentProviderSettings] = [:], sqlite: Bool = false) async throws {
            let server = TestServer.shared
            host = HostRecord(name: "fixture", address: server.host, port: server.port, user: server.user,
                              authentication: .keyFiles([server.dir + "/client_ed25519"]),
                              tmuxSocket: "sshkit-orch-\(UInt32.random(in: 0...UInt32.max))")
            let transport = SSHTransport(configuration: server.configuration(), serverID: host.serverID)
            let agentHost = AgentHost(transport: transport, tmuxSocket: host.tmuxSocket, extraSearchPath: [FakeAgents.directory])
            self.transport = transport
            self.agentHost = agentHost
            if sqlite {
                let dir = "/tmp/sshkit-orch-store-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
                store = try SQLiteAgentStore(path: dir + "/store.sqlite")
                storeDirectory = dir
            } else {
                store = InMemoryAgentStore()
                storeDirectory = nil
            }
            try await store.save(host)
            let path = try await WorktreeTests.makeRepository(agentHost)
            project = ProjectRecord(hostID: host.id, name: "repo", path: path)
            try await store.save(project)
            var all = ["claude": AgentProviderSettings(binary: "fake-claude"),
                       "codex": AgentProviderSettings(binary: "fake-codex"),
                       "amp": AgentProviderSettings(binary: "fake-tui")]
            all.merge(settings) { $1 }
            let made = agentHost
            let store = store
            orchestrator = AgentOrchestrator(store: store, providerSettings: all, statusHooks: false) { record in
                guard record.id.rawValue == made.serverID.rawValue else { throw AgentError(.notFound, "no host \(record.id)") }
                return made
            }
        }

        func output(_ session: AgentSession, contains text: String) async -> String? {
            await eventually { () async -> String? in
                let s = (try? await agentHost.recentOutput(of: session)) ?? ""
                return s.contains(text) ? s : nil
            }
        }

        func tearDown() async {
            await orchestrator.connections.close()
            await endTmuxServer(host.tmuxSocket, on: transport)
            _ = try? await transport.runProcess("/bin/rm", "-rf", project.path)
            await transport.close()
            if let storeDirectory { try? FileManager.default.removeItem(atPath: storeDirectory) }
        }
    }

    /// Every override of a provider's settings reaches the agent's command line, the
    /// resume arguments too: they were ignored for a provider whose registry entry has
    /// none, because fresh-or-resume was chosen from the entry before the settings were
    /// applied. A provider that cannot resume says so instead of "running".
    @Test func everySettingReachesTheCommandLineAndAResumeSaysHowItWent() async throws {
        let f = try await Fixture(settings: [
            "cursor": AgentProviderSettings(binary: "fake-tui", defaultArguments: ["--dflt"], autoApproveFlag: "--yes-do",
                                            resumeArguments: ["--again"], extraArguments: ["--extra"],
                                            environment: ["FOO": "from-settings"]),
            "codebuff": AgentProviderSettings(binary: "fake-tui"),
        ])
        defer { Task { await f.tearDown() } }
        let (_, task, main, session) = try await f.orchestrator.project(f.project.id).createTask(title: "settings",
                                                                       providerID: "cursor", prompt: "fix it", autoApprove: true)
        #expect(session.arguments == ["fake-tui", "--dflt", "--yes-do", "--extra", "fix it"])
        #expect(session.resumeMethod == .new)
        #expect(await f.output(session, contains: "ENV FOO=[from-settings]") != nil)
        try await f.orchestrator.chat(main.id).stop()
        let resumed = try await f.orchestrator.chat(main.id).resume()
        #expect(resumed.arguments == ["fake-tui", "--again", "--dflt", "--yes-do", "--extra"])
        #expect(resumed.resumeMethod == .newestInDirectory)

        // no resume of its own and none in the settings: a new conversation, said so
        let (_, chat, _) = try await f.orchestrator.task(task.id).addChat(providerID: "codebuff")
        try await f.orchestrator.chat(chat.id).stop()
        let anew = try await f.orchestrator.chat(chat.id).resume()
        #expect(anew.arguments == ["fake-tui"])
        #expect(anew.resumeMethod == .anew("this agent cannot resume"))
        #expect("\(anew.resumeMethod)" == "started anew: this agent cannot resume")
    }

    /// Continuing after a usage limit: a provider's setting reaches the new task's agent and
    /// its new chats; the task's own setting turns it off and on for all of them, and a
    /// resume keeps what the task says; a wait out of range is refused.
    @Test func continueAfterALimitFromTheProviderAndThenTheTask() async throws {
        let f = try await Fixture(settings: [
            "cursor": AgentProviderSettings(binary: "fake-tui", continueAfterLimit: .seconds(90)),
            "codebuff": AgentProviderSettings(binary: "fake-tui"),
        ])
        defer { Task { await f.tearDown() } }
        let (_, task, main, _) = try await f.orchestrator.project(f.project.id).createTask(title: "limits",
                                                                 providerID: "cursor", prompt: "go")
        #expect(try await f.agentHost.continueAfterLimit(of: main.ptyID) == .seconds(90))
        let (_, chat, _) = try await f.orchestrator.task(task.id).addChat(providerID: "codebuff")
        #expect(try await f.agentHost.continueAfterLimit(of: chat.ptyID) == nil, "codebuff's setting is off")
        try await f.orchestrator.continueAfterLimit(.seconds(5), taskID: task.id)
        #expect(try await f.agentHost.continueAfterLimit(of: main.ptyID) == .seconds(5))
        #expect(try await f.agentHost.continueAfterLimit(of: chat.ptyID) == .seconds(5))
        try await f.orchestrator.task(task.id).continueAfterLimit(nil)
        #expect(try await f.agentHost.continueAfterLimit(of: main.ptyID) == nil)
        try await f.orchestrator.chat(main.id).stop()
        _ = try await f.orchestrator.chat(main.id).resume()
        #expect(try await f.agentHost.continueAfterLimit(of: main.ptyID) == nil, "a resume keeps the task's setting")
        #expect(throws: AgentError.self) {
            try AgentProviderSettings(continueAfterLimit: .seconds(-1)).validate()
        }
    }

    /// Two agents started on one host at once count two live sessions (the count was read,
    /// then set after an await, so concurrent starts could count one).
    @Test func concurrentStartsOnOneHostCountEveryLiveSession() async throws {
        let f = try await Fixture(settings: ["cursor": AgentProviderSettings(binary: "fake-tui")])
        defer { Task { await f.tearDown() } }
        let (_, task, _, _) = try await f.orchestrator.project(f.project.id).createTask(title: "count", providerID: "cursor")
        #expect(await f.orchestrator.connections.liveSessions(on: f.host.serverID) == 1)
        let orchestrator = f.orchestrator
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask { _ = try await orchestrator.task(task.id).addChat(providerID: "cursor") }
            }
            try await group.waitForAll()
        }
        #expect(await f.orchestrator.connections.liveSessions(on: f.host.serverID) == 5)
        for c in try await f.store.conversations(taskID: task.id) { try await f.orchestrator.chat(c.id).stop() }
        #expect(await f.orchestrator.connections.liveSessions(on: f.host.serverID) == 0)
    }

    @Test(arguments: ["memory", "sqlite"])
    func aTaskIsAWorktreeWithItsAgentAndChatsResumeTheirOwnConversations(_ store: String) async throws {
        let f = try await Fixture(sqlite: store == "sqlite")
        defer { Task { await f.tearDown() } }
        let (_, task, main, session) = try await f.orchestrator.project(f.project.id).createTask(title: "Fix the flaky test",
                                                                       providerID: "claude", prompt: "fix it")
        #expect(task.worktree.path.hasPrefix(f.project.path + "/.emdash/worktrees/fix-the-flaky-test-"))
        #expect(task.worktree.branch.hasPrefix("emdash/fix-the-flaky-test-"))
        #expect(main.kind == .main && main.state == .running && main.ptyID.description == "claude-main-\(task.id)")
        #expect(session.workingDirectory == task.worktree.path && session.survivesDisconnect)
        let uuid = main.ptyID.sessionUUID
        #expect(session.arguments.contains("--session-id") && session.arguments.contains(uuid))
        #expect(await f.output(session, contains: "NEW SESSION \(uuid)") != nil)
        #expect(try await f.store.tasks(projectID: f.project.id) == [task])
        #expect(await f.orchestrator.connections.liveSessions(on: f.host.serverID) == 1)

        // a chat with Codex in the same worktree; the thread it made is bound in the background
        let (_, chat, chatSession) = try await f.orchestrator.task(task.id).addChat(providerID: "codex")
        #expect(chat.kind == .chat && chat.ptyID.description == "codex-chat-\(chat.id)")
        #expect(chatSession.workingDirectory == task.worktree.path)
        let started = try #require(await f.output(chatSession, contains: "STARTED thread-"))
        let thread = try #require(started.split(separator: "\n").first { $0.hasPrefix("STARTED ") }?.dropFirst(8))
        let bound = await eventually { () async -> AgentSessionMapEntry? in try? await f.store.entries()[chat.ptyID.description] }
        #expect(bound?.target == String(thread) && bound?.strategy == .codexThreadID)

        // resuming a running agent changes nothing
        let before = try await f.agentHost.tmux.session(named: session.tmuxName!)
        #expect(try await f.orchestrator.chat(main.id).resume() == session)
        #expect(try await f.agentHost.tmux.session(named: session.tmuxName!)?.created == before?.created)

        // stop: the scrollback is kept in the terminal log; resume picks the exact conversation
        try await f.orchestrator.chat(main.id).stop()
        #expect(try await f.store.conversation(id: main.id)?.state == .stopped)
        let logs = try await f.store.terminalLogs(conversationID: main.id)
        #expect(logs.first?.text.contains("NEW SESSION \(uuid)") == true, "\(logs.map { $0.text.prefix(300) })")
        #expect(try await f.agentHost.state(of: session) == .gone)
        let resumed = try await f.orchestrator.chat(main.id).resume()
        #expect(resumed.arguments.contains("--resume") && resumed.arguments.contains(uuid))
        #expect(await f.output(resumed, contains: "RESUMED \(uuid)") != nil)
        #expect(try await f.store.conversation(id: main.id)?.state == .running)

        try await f.orchestrator.chat(chat.id).stop()
        let chatAgain = try await f.orchestrator.chat(chat.id).resume()
        #expect(Array(chatAgain.arguments.prefix(3)) == ["fake-codex", "resume", String(thread)])
        #expect(await f.output(chatAgain, contains: "RESUMED \(thread)") != nil)

        // the agent's work is not thrown away by a delete
        _ = try await WorktreeTests.sh(f.agentHost, "echo work > \"$1\"/new.txt", task.worktree.path)
        await #expect(throws: AgentError.self) { try await f.orchestrator.task(task.id).delete() }
        do {
            try await f.orchestrator.task(task.id).delete()
        } catch {
            #expect(error.code == .worktreeHasUnsavedWork)
        }
        #expect(try await f.agentHost.state(of: resumed) == .running, "a refused delete touches nothing")
        #expect(try await f.transport.fileExists(task.worktree.path + "/new.txt"))

        // forced: no session, worktree, branch, record or map entry is left
        try await f.orchestrator.task(task.id).delete(force: true)
        #expect(try await f.agentHost.tmux.sessions().isEmpty)
        #expect(!(try await f.transport.fileExists(task.worktree.path)))
        let branches = try await WorktreeTests.sh(f.agentHost, "cd \"$1\" && git branch --list 'emdash/*'", f.project.path)
        #expect(branches.stdoutString.isEmpty)
        #expect(try await f.store.tasks(projectID: nil).isEmpty)
        #expect(try await f.store.conversation(id: chat.id) == nil)
        #expect(try await f.store.terminalLogs(conversationID: main.id).isEmpty)
        #expect(try await f.store.entries().isEmpty)
        #expect(await f.orchestrator.connections.liveSessions(on: f.host.serverID) == 0)
    }

    @Test func anAgentThatCannotStartLeavesNoTaskAndNoWorktree() async throws {
        let f = try await Fixture(settings: ["amp": AgentProviderSettings(binary: "fake-tui", environment: ["1BAD": "x"])])
        defer { Task { await f.tearDown() } }
        do {
            try await f.orchestrator.project(f.project.id).createTask(title: "doomed", providerID: "amp")
            Issue.record("an invalid environment name started an agent")
        } catch {
            #expect(error.code == .invalidEnvironmentName)
        }
        #expect(try await f.store.tasks(projectID: nil).isEmpty)
        #expect(try await f.agentHost.worktrees.list(projectPath: f.project.path).count == 1, "only the main checkout")

        await #expect(throws: AgentError.self) {
            try await f.orchestrator.project(f.project.id).createTask(title: "x", providerID: "no-such-agent")
        }
        // a project that is not a git checkout (with an agent whose settings are valid: an
        // invalid one is refused first, before anything runs on the host)
        let notGit = ProjectRecord(hostID: f.host.id, name: "tmp", path: "/tmp")
        try await f.store.save(notGit)
        do {
            try await f.orchestrator.project(notGit.id).createTask(title: "x", providerID: "claude")
            Issue.record("a task was made in a directory that is not a checkout")
        } catch {
            #expect(error.code == .notAGitRepository)
        }
        do {
            try await f.orchestrator.createTask(projectID: "missing", title: "x", providerID: "amp")
        } catch {
            #expect(error.code == .notFound)
        }
        #expect(try await f.store.tasks(projectID: nil).isEmpty)
    }

    /// The engine checks that the host can start the agent before it makes anything there,
    /// for any caller of `createTask`, `addChat` and `resumeTask`, not only the command.
    @Test func anAgentMissingOnTheHostIsRefusedBeforeAnythingIsMade() async throws {
        let f = try await Fixture(settings: ["amp": AgentProviderSettings(binary: "no-such-agent-binary")])
        defer { Task { await f.tearDown() } }
        do {
            try await f.orchestrator.project(f.project.id).createTask(title: "never made", providerID: "amp")
            Issue.record("a task was made for an agent the host does not have")
        } catch {
            #expect(error.code == .agentUnavailable)
            #expect(error.message.contains("no-such-agent-binary"), "\(error.message)")
            #expect(error.message.contains(f.host.name), "the host as its user named it: \(error.message)")
        }
        #expect(try await f.store.tasks(projectID: nil).isEmpty)
        #expect(try await f.agentHost.worktrees.list(projectPath: f.project.path).count == 1, "no worktree was made")
        try await f.orchestrator.checkCanStart(providerID: "claude", on: f.host)

        // a task whose chat agent is missing: neither the chat nor a resume of the task starts anything
        let (_, task, main, _) = try await f.orchestrator.project(f.project.id).createTask(title: "has claude", providerID: "claude")
        await #expect(throws: AgentError.self) { try await f.orchestrator.task(task.id).addChat(providerID: "amp") }
        #expect(try await f.store.conversations(taskID: task.id).map(\.id) == [main.id], "the refused chat left no record")
        try await f.orchestrator.chat(main.id).stop()
        let resumed = try await f.orchestrator.task(task.id).resume()
        #expect(resumed.map(\.conversation.id) == [main.id])
        #expect(try await f.orchestrator.chat(main.id).processState() == .running)
    }

    /// A create cancelled while the agent's prompt waits to be typed leaves nothing: no
    /// session, no worktree, no record.
    @Test func aCreateCancelledBeforeItsPromptIsTypedLeavesNothing() async throws {
        let f = try await Fixture()
        defer { Task { await f.tearDown() } }
        let orchestrator = f.orchestrator, project = f.project
        let creating = Task {
            try await orchestrator.project(project.id).createTask(title: "cancelled", providerID: "amp", prompt: "never typed")
        }
        // the agent runs: the create is past its round trip and waits to type the prompt
        let started = await eventually { () async -> Bool? in
            let all = (try? await f.agentHost.tmux.sessions()) ?? []
            return all.contains { $0.ptyID?.providerID == "amp" } ? true : nil
        }
        #expect(started == true)
        creating.cancel()
        let outcome = await creating.result
        #expect((try? outcome.get()) == nil, "the cancelled create returned a task")
        #expect(try await f.store.tasks(projectID: nil).isEmpty)
        #expect(try await f.agentHost.worktrees.list(projectPath: f.project.path).count == 1, "only the main checkout")
        let left = try await f.agentHost.tmux.sessions().filter { $0.ptyID?.providerID == "amp" }
        #expect(left.isEmpty, "\(left.map(\.name))")
    }

    @Test func anArchivedTaskKeepsItsWorktreeAndTakesNoChat() async throws {
        let f = try await Fixture()
        defer { Task { await f.tearDown() } }
        let (_, task, main, session) = try await f.orchestrator.project(f.project.id).createTask(title: "typed prompt",
                                                                       providerID: "amp", prompt: "hello there")
        // amp's prompt is typed into its TUI once the screen settles
        #expect(await f.output(session, contains: "got: hello there") != nil)
        // attached through the monitor: the screen, and keys typed here
        let terminal = try await f.orchestrator.chat(main.id).attach()
        try await terminal.input.write(Array("from here\r".utf8))
        #expect(await read(terminal, until: "got: from here").contains("got: from here"))
        terminal.cancel()
        do {
            _ = try await f.orchestrator.attach(conversationID: "no-such-conversation")
            Issue.record("attached to a conversation that does not exist")
        } catch {
            #expect(error.code == .notFound)
        }
        try await f.orchestrator.task(task.id).archive()
        #expect(try await f.store.task(id: task.id)?.archivedAt != nil)
        #expect(try await f.store.conversation(id: main.id)?.state == .stopped)
        #expect(try await f.transport.fileExists(task.worktree.path))
        do {
            try await f.orchestrator.task(task.id).addChat(providerID: "claude")
            Issue.record("an archived task took a chat")
        } catch {
            #expect(error.code == .taskArchived)
        }
        // one rule, one code: no input, no resume, no queue, no port
        for (what, call) in [("send", { () async throws(AgentError) in try await f.orchestrator.chat(main.id).send("more") }),
                             ("queue", { () async throws(AgentError) in _ = try await f.orchestrator.chat(main.id).queue("more") }),
                             ("resume", { () async throws(AgentError) in _ = try await f.orchestrator.chat(main.id).resume() }),
                             ("resumeTask", { () async throws(AgentError) in _ = try await f.orchestrator.task(task.id).resume() }),
                             ("openPort", { () async throws(AgentError) in _ = try await f.orchestrator.task(task.id).openPort() })]
            as [(String, () async throws(AgentError) -> Void)]
        {
            do throws(AgentError) {
                try await call()
                Issue.record("an archived task took \(what)")
            } catch {
                #expect(error.code == .taskArchived, "\(what): \(error)")
            }
        }
        try await f.orchestrator.task(task.id).delete()
        #expect(!(try await f.transport.fileExists(task.worktree.path)), "an archived task without work deletes")
    }

    /// The door's writes and its resolver, as every front end gets them: what a user typed is
    /// resolved once (an id prefix, a slug; two tasks of one title are ambiguous); a project
    /// of a name or checkout the host has is refused; a project or host with tasks is kept
    /// unless forced, and a forced removal takes the tasks' records, their session-map
    /// entries and the host's connection with it, leaving the agents running on the host.
    @Test func theEngineResolvesWhatWasTypedAndCascadesRemovals() async throws {
        let f = try await Fixture()
        defer { Task { await f.tearDown() } }
        let engine = f.orchestrator
        let changes = engine.recordChanges()
        let (handle, t, main, session) = try await engine.project(f.project.id).createTask(title: "Fix the flaky test",
                                                                                          providerID: "amp")
        #expect(handle == engine.task(t.id) && handle.id == t.id)
        #expect(try await engine.records.task(named: t.id.short).id == t.id)
        #expect(try await engine.records.task(named: "fix-the-flaky-test").id == t.id)
        #expect(try await engine.records.chat(of: t, named: nil).id == main.id)
        #expect(try await handle.main().id == main.id)
        let (_, second, _, _) = try await engine.project(f.project.id).createTask(title: "Fix the flaky test", providerID: "amp")
        for (typed, code) in [("Fix the flaky test", AgentError.Code.ambiguous), ("no-such-task", .notFound)] {
            do throws(AgentError) {
                _ = try await engine.records.task(named: typed)
                Issue.record("\(typed) named one task")
            } catch {
                #expect(error.code == code, "\(typed): \(error)")
            }
        }
        do throws(AgentError) {
            _ = try await engine.host(f.host.id).addProject(path: f.project.path, name: "again")
            Issue.record("the checkout was added twice")
        } catch {
            #expect(error.code == .nameTaken, "\(error)")
        }
        try await f.store.set(AgentSessionMapEntry(providerID: "amp", workingDirectory: t.worktree.path, target: "x",
                                                    strategy: .recordedSessionID), for: main.ptyID.description)
        for (what, removal) in [("project", { () async throws(AgentError) in _ = try await engine.project(f.project.id).remove() }),
                                ("host", { () async throws(AgentError) in _ = try await engine.host(f.host.id).remove() })]
            as [(String, () async throws(AgentError) -> Void)]
        {
            do throws(AgentError) {
                try await removal()
                Issue.record("a \(what) with tasks was removed unforced")
            } catch {
                #expect(error.code == .hasTasks, "\(what): \(error)")
            }
        }
        #expect(try await engine.records.tasks().count == 2, "a refused removal removed nothing")
        let (projects, tasks) = try await engine.host(f.host.id).remove(force: true)
        #expect(projects == 1 && tasks == 2)
        #expect(try await engine.records.hosts().isEmpty)
        #expect(try await engine.records.tasks().isEmpty)
        #expect(try await f.store.entries()[main.ptyID.description] == nil, "the session map forgot the removed tasks")
        #expect(await engine.connections.host(f.host.serverID) == nil, "the monitor dropped the host")
        // every write was told, in order, up to the host's removal
        var told: [AgentRecordChange] = []
        for await c in changes {
            told.append(c)
            if c == .host(f.host.id, removed: true) { break }
        }
        #expect(told.first == .task(t.id, removed: false) && told.contains(.chat(main.id, removed: false)), "\(told)")
        #expect(told.contains(.task(second.id, removed: false)) && told.last == .host(f.host.id, removed: true))
        #expect(!told.contains(.host(f.host.id, removed: false)), "the refused removals told nothing")
        #expect(try await f.agentHost.state(of: session) == .running, "the agents run on, on the host")
        do throws(AgentError) {
            _ = try await engine.task(second.id).diff()
            Issue.record("a removed task was found")
        } catch {
            #expect(error.code == .notFound)
        }
    }

    /// Deleting a task leaves nothing of its sessions on the host: its hooks' settings go
    /// with the stop, its status files, screens and results once the watcher has told the
    /// end (a stop that is no deletion keeps them, for whoever asks later).
    @Test func deletingATaskLeavesNoFilesOfItsSessionsOnTheHost() async throws {
        let f = try await Fixture()
        defer { Task { await f.tearDown() } }
        let (_, task, main, _) = try await f.orchestrator.project(f.project.id).createTask(title: "forgotten", providerID: "amp")
        let (_, kept, keptMain, _) = try await f.orchestrator.project(f.project.id).createTask(title: "kept", providerID: "amp")
        let watch = "\(AgentLauncher.directory)/watch/tmux-\(f.host.tmuxSocket)"
        /// The files under the agents' directory that name `pty`, one a line.
        func files(_ pty: AgentPTYID) async -> String {
            let r = try? await f.transport.runProcess("/bin/sh", "-c", #"cd "$HOME/$1" && find . -name "*$2*" | sort"#,
                                                      "sh", AgentLauncher.directory, pty.description)
            return r?.stdoutString ?? "?"
        }
        // the watcher knows both sessions; the deleted one has a hooks' settings file too
        _ = try await f.agentHost.watcherSnapshot(rules: .shipped)
        let known = await eventually { () async -> Bool? in
            let r = try? await f.transport.runProcess("/bin/sh", "-c", #"cat "$HOME/$1""#, "sh", "\(watch)/states")
            let states = r?.stdoutString ?? ""
            return states.contains(main.ptyID.description) && states.contains(keptMain.ptyID.description) ? true : nil
        }
        #expect(known == true, "the watcher lists both sessions")
        _ = try await f.transport.runProcess("/bin/sh", "-c", #"mkdir -p "$HOME/$1/hooks" && echo '{}' > "$HOME/$1/hooks/$2.json""#,
                                             "sh", AgentLauncher.directory, main.ptyID.description)
        let before = await files(main.ptyID)
        #expect(before.contains("hooks/\(main.ptyID).json") && before.contains("screens/"), "before: \(before)")

        try await f.orchestrator.task(task.id).delete()
        try await f.orchestrator.task(kept.id).stop()
        let left = await eventually { () async -> String? in
            let now = await files(main.ptyID)
            return now.isEmpty ? now : nil
        }
        var after = ""
        if left == nil { after = await files(main.ptyID) }
        #expect(left == "", "left on the host: \(after)")
        // the stopped task's session is told as stopped and keeps its status files
        let stopped = await eventually { () async -> String? in
            let r = try? await f.transport.runProcess("/bin/sh", "-c", #"cat "$HOME/$1""#, "sh", "\(watch)/events")
            let line = r?.stdoutString.split(separator: "\n").last { $0.contains(" \(keptMain.ptyID) stopped ") }
            return line.map(String.init)
        }
        #expect(stopped != nil, "the kept task's stop was told")
        let keptFiles = await files(keptMain.ptyID)
        #expect(keptFiles.contains("status/\(keptMain.ptyID).stopped") && keptFiles.contains("screens/"),
                "a stop that is no deletion keeps the files: \(keptFiles)")
    }

    @Test func anAgentThatEndsIsRecordedWithItsStatus() async throws {
        let f = try await Fixture(settings: ["amp": AgentProviderSettings(binary: "fake-exit")])
        defer { Task { await f.tearDown() } }
        let (_, task, main, _) = try await f.orchestrator.project(f.project.id).createTask(title: "ends", providerID: "amp")
        let ended = await eventually { () async -> ConversationRecord? in
            let c = try? await f.orchestrator.chat(main.id).refresh()
            return c?.state == .running ? nil : c
        }
        #expect(ended?.state == .exited(7))
        try await f.orchestrator.task(task.id).delete()
    }

    /// `findOrphans` lists the port claims that hold a port for nothing (of this host's
    /// tmux server, older than 15 minutes): a task the store does not know, a task whose
    /// worktree and session are gone; `removeOrphans` gives them back and nothing else.
    @Test func portClaimsForNothingAreOrphansAndAreGivenBack() async throws {
        let f = try await Fixture()
        do {
            let known = TaskRecord(projectID: f.project.id, title: "known",
                                   worktree: Worktree(name: "w", projectPath: f.project.path, path: "/nonexistent/w-\(UUID())",
                                                      branch: "emdash/w", baseRef: "main", baseCommit: "0"))
            try await f.store.save(known)
            let unknown = TaskID("unknown-\(UUID())"), live = TaskRecord(projectID: f.project.id, title: "live", worktree: known.worktree)
            try await f.store.save(live)
            let stranger = try #require(try await f.agentHost.claimPort(taskID: unknown, worktree: "/tmp"))
            let gone = try #require(try await f.agentHost.claimPort(taskID: known.id, worktree: known.worktree.path))
            let kept = try #require(try await f.agentHost.claimPort(taskID: live.id, worktree: "/tmp"))
            let fresh = try #require(try await f.agentHost.claimPort(taskID: TaskID("fresh-\(UUID())"), worktree: "/nonexistent"))
            let otherServer = AgentHost(transport: f.transport, tmuxSocket: "another-\(UUID().uuidString.prefix(8))")
            let others = TaskID("others-\(UUID())")
            let other = try #require(try await otherServer.claimPort(taskID: others, worktree: "/nonexistent"))
            for p in [stranger, gone, kept, other] {
                _ = try await f.transport.runProcess("/bin/sh", "-c", #"touch -d '20 minutes ago' "$HOME/.cache/sshkit-agents/ports/$1""#,
                                                     "sh", "\(p)")
            }
            let found = try await f.orchestrator.host(f.host.id).findOrphans()
            // (claims of an earlier release, which name no tmux server, may be listed too)
            let listed = Dictionary(uniqueKeysWithValues: found.portClaims.map { ($0.claim.port, $0.reason) })
            #expect(listed[stranger]?.contains("is not in the store") == true, "\(listed)")
            #expect(listed[gone]?.contains("worktree and agent session are gone") == true, "\(listed)")
            #expect(listed[kept] == nil && listed[fresh] == nil && listed[other] == nil, "\(listed)")
            var ours = found
            ours.portClaims = found.portClaims.filter { [stranger, gone].contains($0.claim.port) }
            let outcomes = try await f.orchestrator.host(f.host.id).removeOrphans(ours)
            #expect(Set(outcomes) == [.releasedPort(port: stranger, taskID: unknown), .releasedPort(port: gone, taskID: known.id)])
            let left = try await f.agentHost.portClaims().map(\.port)
            #expect(!left.contains(stranger) && !left.contains(gone) && left.contains(kept) && left.contains(fresh), "\(left)")
            #expect(try await otherServer.portClaims().contains { $0.port == other }, "another tmux server's claim is left")
            #expect(try await f.orchestrator.host(f.host.id).findOrphans().portClaims.allSatisfy { ![stranger, gone, kept].contains($0.claim.port) })
            try await f.agentHost.releasePort(kept, taskID: live.id)
            for c in try await f.agentHost.portClaims() where c.taskID.rawValue.hasPrefix("fresh-") { try await f.agentHost.releasePort(c.port, taskID: c.taskID) }
            try await otherServer.releasePort(other, taskID: others)
        } catch {
            await f.tearDown()
            throw error
        }
        await f.tearDown()
    }

    @Test func theStoreRefusesOrphansAndCascadesDeletes() async throws {
        let store = InMemoryAgentStore()
        let host = HostRecord(name: "h", address: "127.0.0.1", user: "u")
        let project = ProjectRecord(hostID: host.id, name: "p", path: "/src/p")
        await #expect(throws: AgentError.self) { try await store.save(project) }
        try await store.save(host)
        await #expect(throws: AgentError.self) { try await store.save(HostRecord(name: host.name, address: "b", user: "u")) }
        try await store.save(project)
        let wt = Worktree(name: "t-1", projectPath: "/src/p", path: "/src/p/.emdash/worktrees/t-1", branch: "emdash/t-1",
                          baseRef: "main", baseCommit: String(repeating: "a", count: 40))
        let task = TaskRecord(projectID: project.id, title: "t", worktree: wt)
        try await store.save(task)
        let conversation = ConversationRecord(taskID: task.id, providerID: "claude", kind: .main)
        try await store.save(conversation)
        try await store.appendTerminalLog(TerminalLogRecord(conversationID: conversation.id, text: "log"))
        await #expect(throws: AgentError.self) {
            try await store.appendTerminalLog(TerminalLogRecord(conversationID: "nope", text: "x"))
        }
        #expect(await store.conversations(taskID: task.id) == [conversation])
        await store.deleteHost(id: host.id)
        #expect(await store.projects(hostID: nil).isEmpty)
        #expect(await store.tasks(projectID: nil).isEmpty)
        #expect(await store.conversation(id: conversation.id) == nil)
        #expect(await store.terminalLogs(conversationID: conversation.id).isEmpty)
        // no secret can be stored: authentication names a key file or the agent, never a key
        let encoded = String(decoding: try JSONEncoder().encode(HostRecord(name: "k", address: "a", user: "u",
                                                                           authentication: .keyFiles(["~/.ssh/id_ed25519"]))),
                             as: UTF8.self)
        #expect(encoded.contains("id_ed25519") && !encoded.contains("PRIVATE KEY"))
    }
}
