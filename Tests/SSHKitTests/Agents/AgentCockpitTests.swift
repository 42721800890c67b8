import AgentCockpit
import AgentSessions
import Foundation
import SSHKit
import Testing

/// The cockpit run as a user runs it: `agent-sessions` alone in a local tmux pane (keys
/// typed with send-keys, the screen read with capture-pane), against the fixture's sshd
/// as two hosts (one of them through a proxy that can cut it off), with fake agents.
@Suite("agent-sessions cockpit", .tags(.process, .paced), .serialized)
struct AgentCockpitTests {
    typealias User = AgentSessionsToolTests.User

    @Test func theCockpitFromStartToKill() async throws {
        let u = try User()
        let repo = try await WorktreeTests.makeRepository(u.host)
        do { try await cockpit(u, repo) } catch { await u.tearDown([repo]); throw error }
        await u.tearDown([repo])
    }

    func cockpit(_ u: User, _ repo: String) async throws {
        let proxy = try FaultProxy(target: TestServer.shared.port)
        defer { proxy.stop() }
        let tmux = ShellExampleTests.Tmux(socket: u.home + "/tmux.sock")
        defer { tmux.kill() }
        try u.addHost("near")
        try u.addHost("far", port: proxy.port)
        try u.ok(["projects", "add", "near", repo, "--name", "app"])
        try u.ok(["projects", "add", "far", repo, "--name", "web"])
        try u.ok(["tasks", "new", "app", "Ask me", "--agent", "amp"])
        try u.ok(["tasks", "new", "web", "Far away", "--agent", "amp"])
        let tasks = try await u.store().tasks(projectID: nil)
        let askMe = try #require(tasks.first { $0.title == "Ask me" })
        // not on a terminal: the board, as status prints it
        let piped = try u.ok([])
        #expect(piped.contains("HOST") && piped.contains("Ask me") && piped.contains("Far away"), "\(piped)")

        let cockpit = ["HOME=\(u.home)", "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "TERM=xterm-256color",
                       AgentSessionsToolTests.binary].map { "'\($0)'" }.joined(separator: " ")
        try tmux.start(width: 120, height: 30,
                       command: "env -i \(cockpit); echo cockpit-ended=$?; stty -a > '\(u.home)/stty'; sleep 300",
                       log: u.home + "/tmux.log")
        func keys(_ k: String...) throws { _ = try tmux.run(["send-keys", "-t", tmux.session] + k) }
        func line(containing text: String) throws -> String? { try Self.line(tmux, containing: text) }

        // the list: both hosts, grouped; the selected agent's screen beside it
        try await tmux.waitFor("2 tasks")
        try await tmux.waitFor("near / app")
        try await tmux.waitFor("far / web")
        try await tmux.waitFor("│READY>")
        #expect(try tmux.screen().split(separator: "\n")[1].contains(" preview  diff  log "))
        // the preview follows the selection
        func tabBar() throws -> String? { try tmux.screen().split(separator: "\n").first { $0.contains("preview  diff  log") }.map(String.init) }
        let firstTitle = try #require(try tabBar())
        try keys("j")
        try await eventuallyTrue { try tmux.screen().split(separator: "\n").first { $0.contains("preview  diff  log") }.map(String.init) != firstTitle }

        // a question: waiting, first in the list; answered from the cockpit
        try keys("Home")
        try await eventuallyTrue { try Self.line(tmux, containing: "Ask me")?.contains("▌") == true }
        try keys("s")
        try await tmux.waitFor("send:")
        try keys("-l", "Continue? (y/n)")
        try keys("Enter")
        try await tmux.waitFor("1 needs you")
        try await tmux.waitFor("needs you")
        let screen = try tmux.screen()
        #expect(try line(containing: "Ask me")?.contains("◆") == true, "\(screen)")
        try keys("Home", "a")
        try await tmux.waitFor("got: Continue? (y/n) ›")
        try keys("-l", "yes")
        try keys("Enter")
        try await tmux.waitFor("│got: yes")

        // attach full screen, and back with the detach key
        // (the line that names the detach key is drawn over by the agent's screen at once)
        try keys("Enter")
        try await eventuallyTrue {
            let screen = (try? tmux.screen()) ?? ""
            return !screen.contains("preview  diff  log") && screen.hasPrefix("ARGS:")
        }
        // every key reaches the agent: the cockpit's own reader of the terminal is paused
        // while the connection's worker carries it (two readers would split the keys)
        for word in ["first-key-line", "second-key-line", "third-key-line"] {
            try keys("-l", word)
            try keys("Enter")
            try await tmux.waitFor("got: \(word)")
        }
        try keys("C-]")
        try await tmux.waitFor("detached from amp of Ask me")
        try await tmux.waitFor("preview  diff  log")

        // the far host cut off: its rows kept and marked, the keys still answered
        proxy.arm { f, _, _ in f.resetServerToClientAt = 0 }
        try keys("g")
        // (the header may say so first, from the host's status stream, before the board
        // read marks its rows)
        try await eventuallyTrue(seconds: 45) {
            ((try? tmux.screen()) ?? "").contains("far / web · unreachable") && (try? Self.line(tmux, containing: "Far away"))??.contains("unknown") == true
        }
        try keys("/")
        try keys("-l", "ask")
        try await tmux.waitFor("filter: ask")
        #expect(try !tmux.screen().contains("Far away"))
        try keys("Escape")
        try await tmux.waitFor("Far away")
        proxy.arm { f, _, _ in f.resetServerToClientAt = nil }

        // a phone's size and back
        _ = try tmux.run(["resize-window", "-t", tmux.session, "-x", "60", "-y", "20"])
        try await eventuallyTrue { ((try? tmux.screen()) ?? "").split(separator: "\n").contains { $0.hasPrefix(" preview  diff  log ") } }
        #expect(try tmux.screen().split(separator: "\n").allSatisfy { $0.count <= 60 })
        _ = try tmux.run(["resize-window", "-t", tmux.session, "-x", "120", "-y", "30"])
        try await eventuallyTrue { ((try? tmux.screen()) ?? "").contains("│READY>") || ((try? tmux.screen()) ?? "").contains("│got: yes") }

        // a new task from the form: the agent chosen by its first letter, an empty title refused
        try keys("n")
        try await tmux.waitFor("a new task")
        try keys("Tab", "a", "Tab")  // from the title: the agent, then the prompt
        try keys("-l", "say hi")
        try keys("Enter")
        try await tmux.waitFor("the task needs a title")
        try keys("-l", "From the form")
        try keys("Tab", "Tab", "Enter")
        try await tmux.waitFor("started From the form")
        try await eventuallyTrue { try Self.line(tmux, containing: "From the form")?.contains("amp") == true }
        #expect(try await u.store().tasks(projectID: nil).contains { $0.title == "From the form" })

        // delete: refused for work not pushed, then forced on the second yes
        _ = try await u.transport.runProcess("/bin/sh", "-c", "echo draft > \"$1/draft.txt\"", "sh", askMe.worktree.path)
        try keys("Home")
        try await eventuallyTrue { try Self.line(tmux, containing: "Ask me")?.contains("▌") == true }
        // committed from the cockpit: the work is a commit that is not pushed
        try keys("C")
        try await tmux.waitFor("committed 1 file as")
        try keys("P")
        try await tmux.waitFor("no remote to push to")
        try keys("D")
        try await tmux.waitFor("Delete \"Ask me\"")
        try keys("y")
        try await tmux.waitFor("has work not pushed")
        try keys("y")
        try await tmux.waitFor("deleted Ask me")
        try await eventuallyTrue { try tmux.screen().split(separator: "\n").allSatisfy { !$0.contains("Ask me") || $0.hasPrefix("deleted") } }
        #expect(try await u.store().tasks(projectID: nil).map(\.title).sorted() == ["Far away", "From the form"])

        // killed: the terminal as it was (the main screen, cooked mode)
        _ = try TestServer.runCapturing("/usr/bin/pkill", ["-TERM", "-f", "^\(AgentSessionsToolTests.binary)$"])
        try await tmux.waitFor("cockpit-ended=143")
        #expect(try tmux.run(["display", "-p", "-t", tmux.session, "#{alternate_on}"]).hasPrefix("0"))
        // the pane's shell writes it after printing the status
        let sttyFile = u.home + "/stty"
        try await eventuallyTrue { ((try? String(contentsOfFile: sttyFile, encoding: .utf8)) ?? "").contains("icanon") }
        let stty = try String(contentsOfFile: sttyFile, encoding: .utf8)
        #expect(stty.contains(" icanon") && stty.contains(" echo ") && !stty.contains("-icanon"), "\(stty)")
    }

    /// A real agent (Mistral's `vibe`, against the test's own model server) run from the
    /// cockpit: started from the form, its approval dialog shown as a question that needs
    /// you, answered from the cockpit, its work followed in the preview as it happens, the
    /// file it wrote in the diff tab, and a second turn sent without attaching.
    @Test func aRealAgentFromTheCockpit() async throws {
        let vibe = try #require(RealAgentTests.binaries["mistral"])
        try #require(FileManager.default.isExecutableFile(atPath: vibe), "\(vibe) is missing: run scripts/install-deps.sh")
        let u = try User()
        let model = try RealAgentTests.ModelServer()
        let repo = try await WorktreeTests.makeRepository(u.host)
        let agentHome = try await u.host.absolutePath("~/cockpit-vibe-\(UInt32.random(in: 0...UInt32.max))")
        func tearDown() async {
            // what runs in the panes' sessions ends with them (an agent may outlive its session)
            _ = try? await u.transport.runProcess("/bin/sh", "-c", """
                for p in $(tmux -L "$1" list-panes -a -F '#{pane_pid}' 2>/dev/null); do pkill -KILL -s "$p"; done; exit 0
                """, "sh", u.socket)
            await endProcesses(home: agentHome, on: u.transport)
            await u.tearDown([repo, agentHome])
            model.stop()
        }
        do {
            try await u.transport.createDirectory(agentHome)
            _ = try TestServer.run("/bin/bash", [TestServer.packageRoot + "/scripts/agents/configure-agents.sh", agentHome,
                                                 "\(model.port)", TestServer.shared.user])
            let settings = """
                {"searchPath": ["\(FakeAgents.directory)", "\((vibe as NSString).deletingLastPathComponent)"],
                 "providers": {"amp": {"binary": "fake-tui"},
                               "mistral": {"environment": {"HOME": "\(agentHome)", "VIBE_HOME": "\(agentHome)/.vibe"}}}}
                """
            try settings.write(toFile: u.home + "/.config/agent-sessions/config.json", atomically: true, encoding: .utf8)
            try await realAgent(u, repo)
        } catch {
            await tearDown()
            throw error
        }
        await tearDown()
    }

    func realAgent(_ u: User, _ repo: String) async throws {
        let tmux = ShellExampleTests.Tmux(socket: u.home + "/tmux.sock")
        defer { tmux.kill() }
        try u.addHost("near")
        try u.ok(["projects", "add", "near", repo, "--name", "app"])
        let cockpit = ["HOME=\(u.home)", "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "TERM=xterm-256color",
                       AgentSessionsToolTests.binary].map { "'\($0)'" }.joined(separator: " ")
        // 120×30: the pane (27 rows) is shorter than the agent's own window (40 rows), and
        // Vibe lays its conversation out at the top of its window and its input box at the
        // bottom: the preview lays the agent out at the pane's size to show its answer
        try tmux.start(width: 120, height: 30, command: "env -i \(cockpit); sleep 300", log: u.home + "/tmux.log")
        func keys(_ k: String...) throws { _ = try tmux.run(["send-keys", "-t", tmux.session] + k) }
        try await tmux.waitFor("no tasks")

        // started from the form: vibe chosen by its first letter, once detection found it
        try keys("n")
        try await tmux.waitFor("a new task")
        try keys("-l", "Real work")
        try keys("Tab")
        try await eventuallyTrue(seconds: 30) {
            _ = try tmux.run(["send-keys", "-t", tmux.session, "m"])
            return try tmux.screen().contains("‹ mistral ›")
        }
        try keys("Tab")
        try keys("-l", "run: echo hi > ran.txt")
        try keys("Enter")
        try await eventuallyTrue(seconds: 60) { ((try? tmux.screen()) ?? "").contains("started Real work") }

        // its tool asks for approval: a question that needs you, the dialog in the preview
        try await eventuallyTrue(seconds: 90) { ((try? tmux.screen()) ?? "").contains("1 needs you") }
        try await eventuallyTrue(seconds: 30) { ((try? tmux.screen()) ?? "").contains("Permission for the") }
        // the answer field, on the status line (the preview shows the dialog's text too)
        try await eventuallyTrue(seconds: 30) {
            func field() -> Bool {
                let lines = ((try? tmux.screen()) ?? "").split(separator: "\n").filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
                return lines.last?.hasPrefix("Permission for the") == true
            }
            if field() { return true }
            _ = try tmux.run(["send-keys", "-t", tmux.session, "a"])
            usleep(1_000_000) // (a key pressed again into an open field would be typed into it)
            return field()
        }
        try keys("Enter")  // the dialog's first choice: allow once
        let task = try #require(try await u.store().tasks(projectID: nil).first { $0.title == "Real work" })
        let ran = await eventually(90) { () async -> String? in
            (try? await u.transport.readTextFile(task.worktree.path + "/ran.txt")) == "hi\n" ? "hi" : nil
        }
        #expect(ran != nil, "\((try? tmux.screen()) ?? "")")
        // the agent's answer shows in the preview as it happens, laid out at the pane's size
        try await eventuallyTrue(seconds: 60) { ((try? tmux.screen()) ?? "").contains("done: ran") }
        let main = try #require(try await u.store().conversations(taskID: task.id).first)
        func agentWindow() async -> String {
            let r = try? await u.transport.runProcess("tmux", "-L", u.socket, "display-message", "-p", "-t", "=\(main.ptyID):",
                                                      "#{window_width}x#{window_height}")
            return r?.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        }
        let preview = CockpitView.previewSize(columns: 120, rows: 30)
        let previewed = await agentWindow()
        #expect(previewed == "\(preview.columns)x\(preview.rows)", "\(previewed)")

        // the diff tab: the file the agent made
        try keys("Tab")
        try await eventuallyTrue(seconds: 30) { ((try? tmux.screen()) ?? "").contains("ran.txt") }
        try keys("Tab", "Tab")  // the log, then the preview again

        // a second turn, sent without attaching
        try keys("s")
        try await tmux.waitFor("send:")
        try keys("-l", "file: hello.txt")
        try keys("Enter")
        let wrote = await eventually(90) { () async -> String? in
            (try? await u.transport.readTextFile(task.worktree.path + "/hello.txt")) == "hello from the model\n" ? "yes" : nil
        }
        #expect(wrote != nil, "\((try? tmux.screen()) ?? "")")
        try keys("q")
        // the agent is given back its own size once nobody previews it
        let given = await eventually { () async -> String? in
            let w = await agentWindow()
            return w == "120x40" ? w : nil
        }
        let last = await agentWindow()
        #expect(given == "120x40", "\(last)")
    }

    /// Attempts in the cockpit: listed together under their work, each with its label and
    /// host; `=` runs a check typed in the field in every attempt, the compare tab shows
    /// where it passed; `K` keeps the selected attempt after a yes and archives the other.
    @Test func attemptsAreComparedAndOneIsKeptFromTheCockpit() async throws {
        let u = try User()
        let repo = try await WorktreeTests.makeRepository(u.host)
        do { try await attempts(u, repo) } catch { await u.tearDown([repo]); throw error }
        await u.tearDown([repo])
    }

    func attempts(_ u: User, _ repo: String) async throws {
        let tmux = ShellExampleTests.Tmux(socket: u.home + "/tmux.sock")
        defer { tmux.kill() }
        try u.addHost("near")
        try u.ok(["projects", "add", "near", repo, "--name", "app"])
        try u.ok(["tasks", "new", "app", "Race", "--agents", "amp:2"])
        let store = try u.store()
        let second = try #require(try await store.tasks(projectID: nil).first { $0.attempt?.label == "amp-2" })
        _ = try await WorktreeTests.sh(u.host, #"echo made > "$1/ok""#, second.worktree.path)

        let cockpit = ["HOME=\(u.home)", "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "TERM=xterm-256color",
                       AgentSessionsToolTests.binary].map { "'\($0)'" }.joined(separator: " ")
        try tmux.start(width: 120, height: 30, command: "env -i \(cockpit); echo cockpit-ended=$?; sleep 300",
                       log: u.home + "/tmux.log")
        func keys(_ k: String...) throws { _ = try tmux.run(["send-keys", "-t", tmux.session] + k) }
        try await tmux.waitFor("attempts · Race · \(second.attempt!.group.prefix(8))")
        try await tmux.waitFor("amp-1 @ near")
        try await tmux.waitFor("amp-2 @ near")
        // to the second attempt; its pane has a compare tab
        for _ in 0..<4 where try Self.line(tmux, containing: "amp-2 @ near")?.contains("▌") != true {
            try keys("j")
            try await Task.sleep(for: .milliseconds(200))
        }
        let shown = (try? tmux.screen()) ?? ""
        #expect(try Self.line(tmux, containing: "amp-2 @ near")?.contains("▌") == true, "\(shown)")
        try await tmux.waitFor(" preview  diff  log  compare ")
        try keys("=")
        try await tmux.waitFor("check in every attempt:")
        try keys("-l", "test -f ok")
        try keys("Enter")
        try await tmux.waitFor("test -f ok: passed in 1 of 2 attempts")
        try await tmux.waitFor("2 attempts at \"Race\" from main")
        try await eventuallyTrue {
            let screen = try tmux.screen()
            return screen.contains("✕ exit 1") && screen.contains("✓ ")
        }
        try keys("K")
        try await tmux.waitFor("Keep amp-2 and archive the other attempts")
        try keys("y")
        try await tmux.waitFor("kept amp-2; archived amp-1")
        let after = try await store.tasks(projectID: nil)
        #expect(after.first { $0.attempt?.label == "amp-2" }?.attempt?.pickedAt != nil)
        #expect(after.first { $0.attempt?.label == "amp-1" }?.archivedAt != nil)
        try keys("q")
        try await tmux.waitFor("cockpit-ended=0")
    }

    /// The list's line with `text` (the pane's tab bar, which names the selected task, left out).
    static func line(_ tmux: ShellExampleTests.Tmux, containing text: String) throws -> String? {
        try tmux.screen().split(separator: "\n").first { $0.contains(text) && !$0.contains("preview  diff  log") }.map(String.init)
    }

    /// Bounded wait for `condition` (a test of the screen), recorded as a failure at the end.
    func eventuallyTrue(seconds: Double = 20, sourceLocation: SourceLocation = #_sourceLocation,
                        _ condition: @escaping @Sendable () throws -> Bool) async throws
    {
        let ok = await eventually(seconds) { ((try? condition()) ?? false) ? true : nil }
        #expect(ok == true, "never came true", sourceLocation: sourceLocation)
    }
}
