import AgentSessions
import Foundation
import SSHKit
import Testing

/// `agent-sessions watch` and `events`, run as a user runs them, against the fixture's
/// sshd (through a proxy that can drop the connection), with the fake agents, a local
/// HTTP server as the webhook and ntfy server, and a tmux pane as the terminal.
@Suite("agent-sessions watch", .tags(.process, .paced), .serialized)
struct AgentWatchTests {
    typealias User = AgentSessionsToolTests.User

    /// The recorded webhook events: (session, state) in order.
    static func webhookEvents(_ r: HTTPRecorder, path: String = "/hook") -> [(String, String)] {
        r.requests().filter { $0.path == path }.compactMap { req in
            guard let o = try? JSONSerialization.jsonObject(with: Data(req.body.utf8)) as? [String: Any],
                  let s = o["session"] as? String, let st = o["state"] as? String else { return nil }
            return (s, st)
        }
    }

    @Test func watchSendsEachTransitionOnceAcrossADropAndARestart() async throws {
        let u = try User()
        let repo = try await WorktreeTests.makeRepository(u.host)
        do { try await watch(u, repo) } catch { await u.tearDown([repo]); throw error }
        await u.tearDown([repo])
    }

    func watch(_ u: User, _ repo: String) async throws {
        let recorder = try HTTPRecorder()
        defer { recorder.stop() }
        let proxy = try FaultProxy(target: TestServer.shared.port)
        defer { proxy.stop() }
        let tmux = ShellExampleTests.Tmux(socket: u.home + "/tmux.sock")
        defer { tmux.kill() }
        let commandLog = u.home + "/command.log"
        // the desktop channel's notify-send: a stand-in that records its arguments
        let bin = u.home + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        try "#!/bin/sh\nprintf '%s|' \"$@\" >> \(u.home)/desktop.log; echo >> \(u.home)/desktop.log\n"
            .write(toFile: bin + "/notify-send", atomically: true, encoding: .utf8)
        chmod(bin + "/notify-send", 0o755)
        let settings = """
            {"searchPath": ["\(FakeAgents.directory)"],
             "providers": {"amp": {"binary": "fake-tui"}},
             "notifications": {"hold": 1, "channels": [
                {"type": "terminal"},
                {"type": "desktop"},
                {"type": "webhook", "url": "\(recorder.url)/hook", "headers": {"X-Test": "yes"}},
                {"type": "ntfy", "url": "\(recorder.url)/topic", "token": "tk"},
                {"type": "webhook", "name": "down", "url": "\(recorder.url)/down"},
                {"type": "command", "command": ["/bin/sh", "-c", "printf '%s %s\\\\n' \\"$AGENT_SESSIONS_STATE\\" \\"$AGENT_SESSIONS_QUESTION\\" >> \(commandLog)"]}
             ]}}
            """
        try settings.write(toFile: u.home + "/.config/agent-sessions/config.json", atomically: true, encoding: .utf8)
        try u.addHost(port: proxy.port)
        try u.ok(["projects", "add", "fixture", repo, "--name", "repo"])
        try u.ok(["tasks", "new", "repo", "Watch me", "--agent", "amp"])
        let first = try #require(try await u.store().tasks(projectID: nil).first)
        let s1 = "amp-main-" + first.id.rawValue

        // the terminal channel sees TMUX, as in any tmux pane; the pane's shell outlives a
        // Ctrl-C of the watch
        let watch = "env -i \"TMUX=$TMUX\" " + ["HOME=\(u.home)", "PATH=\(bin):/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
                                                 "TERM=xterm-256color", AgentSessionsToolTests.binary, "watch"]
            .map { "'\($0)'" }.joined(separator: " ")
        let command = "trap true INT; \(watch); echo watch-ended=$?; \(watch); echo watch-ended=$?; sleep 300"
        // (a stopped watch ends with 0)
        try tmux.start(width: 160, height: 40, command: command, log: u.home + "/tmux.log")
        _ = try tmux.run(["pipe-pane", "-t", tmux.session, "-o", "cat >> '\(u.home)/pane.raw'"])
        try await tmux.waitFor("sending to terminal, desktop, webhook, ntfy, down, command")

        // a question: sent once it held for a second, to every channel
        try u.ok(["send", String(first.id.short), "Continue? (y/n)"])
        let asked = await eventually(30) { Self.webhookEvents(recorder).contains { $0 == (s1, "waiting") } ? true : nil }
        #expect(asked == true, "\(recorder.requests())")
        let hook = try #require(recorder.requests().first { $0.path == "/hook" })
        #expect(hook.headers["X-Test"] == "yes" && hook.headers["Content-Type"] == "application/json")
        let event = try #require(try JSONSerialization.jsonObject(with: Data(hook.body.utf8)) as? [String: Any])
        #expect(event["schemaVersion"] as? Int == 1 && event["host"] as? String == "fixture" && event["agent"] as? String == "amp")
        #expect(event["question"] as? String == "got: Continue? (y/n)" && event["source"] as? String == "screen", "\(event)")
        #expect((event["task"] as? [String: Any])?["title"] as? String == "Watch me")

        // the connection drops while the agent ends: the end is sent once, after
        proxy.arm { f, _, _ in f.resetServerToClientAt = 0 }
        try await Task.sleep(for: .seconds(1))
        _ = try await u.transport.runProcess("tmux", "-L", u.socket, "send-keys", "-t", "=\(s1):", "exit 5", "Enter")
        try await Task.sleep(for: .seconds(3))
        proxy.arm { f, _, _ in f.resetServerToClientAt = nil }
        let ended = await eventually(40) { Self.webhookEvents(recorder).contains { $0 == (s1, "exited") } ? true : nil }
        #expect(ended == true, "\(Self.webhookEvents(recorder))")

        // watch stopped, and started again while another agent comes to a question
        _ = try tmux.run(["send-keys", "-t", tmux.session, "C-c"])
        try await tmux.waitFor("watch-ended=")
        try u.ok(["tasks", "new", "repo", "Second", "--agent", "amp"])
        let second = try #require(try await u.store().tasks(projectID: nil).first { $0.title == "Second" })
        let s2 = "amp-main-" + second.id.rawValue
        try u.ok(["send", String(second.id.short), "Proceed? [y/N]"])
        try await Task.sleep(for: .seconds(4))
        let resent = await eventually(40) { Self.webhookEvents(recorder).contains { $0 == (s2, "waiting") } ? true : nil }
        #expect(resent == true, "\(Self.webhookEvents(recorder))\n\((try? tmux.screen()) ?? "")")
        try await Task.sleep(for: .seconds(3))

        // each transition once, on each channel that works; the one that is down held up nothing
        let sent = Self.webhookEvents(recorder)
        let hostLog = try? await u.transport.runProcess("/bin/sh", "-c", "cat \"$HOME/.cache/sshkit-agents/watch/tmux-$1/events\"", "sh", u.socket)
        #expect(sent.map { "\($0.0) \($0.1)" } == ["\(s1) waiting", "\(s1) exited", "\(s2) waiting"],
                "\(sent)\n\(hostLog?.stdoutString ?? "")\n\((try? tmux.screen()) ?? "")")
        let topic = recorder.requests().filter { $0.path == "/topic" }
        #expect(topic.count == 3 && topic.first?.headers["Authorization"] == "Bearer tk" && topic.first?.headers["Priority"] == "4",
                "\(topic)")
        #expect(topic.first?.body == "amp is waiting for input: got: Continue? (y/n)")
        let commands = (try? String(contentsOfFile: commandLog, encoding: .utf8)) ?? ""
        #expect(commands == "waiting got: Continue? (y/n)\nexited \nwaiting got: Proceed? [y/N]\n", "\(commands)")
        let desktop = (try? String(contentsOfFile: u.home + "/desktop.log", encoding: .utf8)) ?? ""
        #expect(desktop.split(separator: "\n").count == 3
                && desktop.hasPrefix("--app-name=agent-sessions|--urgency=critical|fixture · repo · Watch me|amp is waiting for input"),
                "\(desktop)")
        // the terminal: OSC 9 and OSC 777 through tmux's passthrough, and the bell
        let raw = (try? String(contentsOfFile: u.home + "/pane.raw", encoding: .utf8)) ?? ""
        #expect(raw.contains("\u{1B}Ptmux;\u{1B}\u{1B}]9;fixture · repo · Watch me: amp is waiting for input"), "\(raw.debugDescription.prefix(600))")
        #expect(raw.contains("\u{1B}\u{1B}]777;notify;fixture · repo · Watch me;amp exited (status 5)"))
        _ = try tmux.run(["send-keys", "-t", tmux.session, "C-c"])
    }

    @Test func eventsPrintsEveryTransitionAsJSONLines() async throws {
        let u = try User()
        let repo = try await WorktreeTests.makeRepository(u.host)
        do { try await events(u, repo) } catch { await u.tearDown([repo]); throw error }
        await u.tearDown([repo])
    }

    func events(_ u: User, _ repo: String) async throws {
        try u.addHost()
        try u.ok(["projects", "add", "fixture", repo, "--name", "repo"])
        try u.ok(["tasks", "new", "repo", "Events", "--agent", "amp"])
        let task = try #require(try await u.store().tasks(projectID: nil).first)
        let events = try u.start(["events", "--json", "--from-start"], errors: true)
        defer { events.stop() }
        try u.ok(["send", String(task.id.short), "Shall I? (y/n)"])
        let lines = await eventually(30) { () -> [[String: Any]]? in
            let all = events.output().split(separator: "\n").filter { $0.hasPrefix("{") }.compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
            return all.contains { $0["state"] as? String == "waiting" } ? all : nil
        }
        let all = try #require(lines, "\(events.output())")
        #expect(all.allSatisfy { $0["schemaVersion"] as? Int == 1 && $0["session"] as? String == "amp-main-" + task.id.rawValue })
        let sequences = all.compactMap { $0["sequence"] as? Int }
        #expect(sequences == sequences.sorted() && Set(sequences).count == sequences.count)
        #expect(all.first?["state"] as? String == "starting" || all.first?["state"] as? String == "working"
                || all.first?["state"] as? String == "idle", "\(all)")
        #expect(all.last?["question"] as? String == "got: Shall I? (y/n)")
    }

    /// The user's screen rules come first; a malformed file is named with its line, and the
    /// shipped rules still apply.
    @Test func theUsersScreenRulesAndAMalformedFile() async throws {
        let u = try User()
        let repo = try await WorktreeTests.makeRepository(u.host)
        do { try await rules(u, repo) } catch { await u.tearDown([repo]); throw error }
        await u.tearDown([repo])
    }

    func rules(_ u: User, _ repo: String) async throws {
        let rulesFile = u.home + "/.config/agent-sessions/screen-rules"
        try "# mine\n[amp]\nwaitin  x\n".write(toFile: rulesFile, atomically: true, encoding: .utf8)
        try u.addHost()
        try u.ok(["projects", "add", "fixture", repo, "--name", "repo"])
        try u.ok(["tasks", "new", "repo", "Rules", "--agent", "amp"])
        let task = try #require(try await u.store().tasks(projectID: nil).first)
        let id = String(task.id.short)
        try u.ok(["send", id, "Shall I? (y/n)"])
        let bad = await eventually(30) { () -> (status: Int32, out: String, err: String)? in
            let r = try? u.run(["status"])
            return r.map { $0.out.contains("waiting for input (screen): got: Shall I? (y/n)") ? $0 : nil } ?? nil
        }
        let r = try #require(bad)
        #expect(r.status == 0)
        #expect(r.err.contains("screen-rules: user screen rules, line 3: 'waitin' is no kind of rule"), "\(r.err)")
        #expect(r.err.contains("using the shipped screen rules only"))

        // a rule of the user's own, before the shipped ones, named by --explain
        try "[amp]\nwaiting  ^got: Deploy now\nquestion  ^got: (.*)$\n".write(toFile: rulesFile, atomically: true, encoding: .utf8)
        try u.ok(["send", id, "Deploy now"])
        let explained = await eventually(30) { () -> String? in
            let out = (try? u.ok(["status", "--explain", id])) ?? ""
            return out.contains("rule user:2") ? out : nil
        }
        #expect(explained?.contains("source: the screen, rule user:2: [amp] waiting ^got: Deploy now") == true, "\(explained ?? "")")
        #expect(explained?.contains("question: got: Deploy now") == true)
    }
}
