@testable import AgentSessions
import Foundation
import SSHKit
import ServerTransport
import Synchronization
import Testing

/// The status watcher's own program (`round.awk`, run by this machine's awk) over screens
/// of the real agents recorded in a tmux pane (Tests/Fixtures/agent-screens), round by
/// round as the watcher runs it on a host.
struct WatcherRounds {
    let dir: String
    var states = ""
    var seq = 0
    var events: [(session: String, state: String, source: String, rule: String, question: String)] = []

    init() throws {
        dir = try TestPaths.makeTemporaryDirectory("watcher-rounds")
        for d in ["screens", "seen", "status"] {
            try FileManager.default.createDirectory(atPath: dir + "/" + d, withIntermediateDirectories: true)
        }
        let script = AgentStatusWatcher.script
        let start = try #require(script.range(of: "cat > round.awk <<'SSHKIT_AWK'\n"))
        let end = try #require(script.range(of: "\nSSHKIT_AWK\n", range: start.upperBound..<script.endIndex))
        try String(script[start.upperBound..<end.lowerBound]).write(toFile: dir + "/round.awk", atomically: true, encoding: .utf8)
        try AgentScreenRules.shipped.hostText.write(toFile: dir + "/rules", atomically: true, encoding: .utf8)
    }

    /// The host's one look at a screen (`AgentStatusWatcher.lookScript`, for a terminal the
    /// watcher does not follow), run here with `rules`.
    static func look(_ screen: String, _ provider: String, rules: AgentScreenRules = .shipped) throws
        -> (activity: AgentActivity, rule: String, question: String?)?
    {
        let r = try TestServer.runCapturing("/bin/sh", ["-c", #"printf '%s' "$3" | /bin/sh -c "$4" sh "$1" "$2""#, "sh",
                                                        rules.hostText, provider, screen, AgentStatusWatcher.lookScript])
        #expect(r.status == 0 && r.err.isEmpty, "\(r.err)")
        return AgentHost.look(parsing: r.out)
    }

    /// One round: `screen` captured for `session` (nil: not captured this round). With
    /// `clients`, the list of clients comes first, as tmux 3.2 and later give it (a word
    /// per client attached to the session: `c11` a follower, `c00` a person), and
    /// `attached` is what tmux counts, followers included.
    mutating func round(_ session: String, screen: String?, title: String = "", now: Int, dead: Bool = false,
                        attached: Bool = false, clients: [String]? = nil, size: String = "120x40") throws -> String {
        if let screen { try screen.write(toFile: "\(dir)/screens/\(session)", atomically: true, encoding: .utf8) }
        let listed = clients.map { $0.map { ":c \(session) \($0)\n" }.joined() + ":c other-session c00\n" } ?? ""
        let count = clients?.count ?? (attached ? 1 : 0)
        // an ended pane whose status tmux did not record: "s" alone
        try (listed + "\(session) \(dead ? 1 : 0) \(dead ? "s" : "-") \(now) \(count) \(size) \(title)\n")
            .write(toFile: dir + "/panes", atomically: true, encoding: .utf8)
        try (screen == nil ? "" : session + "\n").write(toFile: dir + "/capture.list", atomically: true, encoding: .utf8)
        try states.write(toFile: dir + "/states", atomically: true, encoding: .utf8)
        let r = try TestServer.runCapturing("/usr/bin/awk", ["-v", "seq=\(seq)", "-v", "now=\(now)", "-v", "status=\(dir)/status",
                                                            "-v", "w=\(dir)", "-f", dir + "/round.awk", dir + "/rules",
                                                            dir + "/states", dir + "/panes", dir + "/capture.list"])
        #expect(r.status == 0, "\(r.err)")
        // the changes in round.events (a round with none leaves it empty), the states on
        // stdout after a line `H pending live seq limited` that carries the last number on
        let changes = String(decoding: FileManager.default.contents(atPath: dir + "/round.events") ?? Data(), as: UTF8.self)
        for line in changes.split(separator: "\n") {
            let f = line.split(separator: " ", maxSplits: 6, omittingEmptySubsequences: false).map(String.init)
            #expect(Int(f[0]) == seq + 1, "events are numbered one after another: \(line) after \(seq)")
            seq = Int(f[0]) ?? seq
            events.append((f[2], f[3], f[4], f[5], f.count > 6 ? f[6] : ""))
        }
        let kept = r.out.split(separator: "\n").map(String.init)
        let header = kept.first?.split(separator: " ") ?? []
        #expect(header.count == 5 && header[0] == "H" && Int(header[3]) == seq, "the states' first line: \(kept.first ?? "")")
        states = kept.joined(separator: "\n") + "\n"
        let mine = kept.first { $0.hasPrefix("S \(session) ") } ?? ""
        return mine.split(separator: " ").dropFirst(2).first.map(String.init) ?? "gone"
    }

    func hook(_ session: String, _ event: String, at time: Int) throws {
        let path = "\(dir)/status/\(session)"
        let old = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        try (old + "\(time) \(event)\n").write(toFile: path, atomically: true, encoding: .utf8)
    }

    func remove() { try? FileManager.default.removeItem(atPath: dir) }

    /// The captures of a recording: each with the pane title it had.
    static func recording(_ name: String) throws -> [(title: String, screen: String)] {
        let text = try String(contentsOfFile: TestServer.packageRoot + "/Tests/Fixtures/agent-screens/\(name).txt", encoding: .utf8)
        var all: [(String, String)] = []
        for part in text.components(separatedBy: "=== title: ").dropFirst() {
            let nl = part.firstIndex(of: "\n") ?? part.endIndex
            all.append((String(part[..<nl]), String(part[nl...])))
        }
        return all
    }
}

/// Status from the host's watcher: the agents' hooks, the screen rules, the process.
@Suite("Agent status: screen rules", .tags(.pure))
struct AgentScreenRuleTests {
    @Test func theShippedRulesParseAndAMalformedFileNamesItsLine() throws {
        #expect(AgentScreenRules.shipped.rules.count > 40)
        #expect(AgentScreenRules.shipped.rules.allSatisfy { $0.id.hasPrefix("shipped:") })
        let bad: [(String, String)] = [
            ("waiting  x", "line 1: a rule comes after an [agent] line"),
            ("[kimi]\n\nwaitin  x", "line 3: 'waitin' is no kind of rule"),
            ("[nosuch]", "line 1: no agent is called 'nosuch'"),
            ("[kimi]\nworking", "line 2: the working rule has no pattern"),
            ("[kimi]\nworking  (unclosed", "line 2: the pattern is not a POSIX extended regular expression"),
            ("[kimi]\nlines  0", "line 2: lines takes a number from 1 to 200"),
            ("[kimi]\nidle  a\tb", "line 2: a pattern cannot contain a tab"),
            ("[kimi", "line 1: a section is written [agent]"),
        ]
        for (text, message) in bad {
            do {
                _ = try AgentScreenRules.parse(text, origin: "user")
                Issue.record("\(text) parsed")
            } catch {
                #expect(error.code == .invalidArgument)
                #expect(error.message.hasPrefix("user screen rules, " + message), "\(error.message)")
            }
        }
        let user = try AgentScreenRules.parse("# mine\n[kimi]\nwaiting  ^Shall I\n[*]\nidle  ^\\$ $\n", origin: "user")
        #expect(user.rules.map(\.id) == ["user:3", "user:5"])
        let merged = user.followed(by: .shipped)
        #expect(merged.rules.first?.id == "user:3" && merged.rule(id: "user:5")?.provider == "*")
        #expect(try WatcherRounds.look("Shall I go on?", "kimi", rules: merged)?.rule == "user:3")
        #expect(try WatcherRounds.look("Shall I go on?", "kimi")?.rule != "user:3", "without the user's rules")
    }

    @Test func hookSettingsAndTheirCommands() throws {
        let id = AgentPTYID(providerID: "claude", kind: .main, suffix: "t1")
        let file = try #require(AgentProvider.StatusHooks.claudeSettings.file(for: id) { AgentHost.hookCommand(id, $0) })
        #expect(file.name == "claude-main-t1.json")
        let json = try JSONSerialization.jsonObject(with: Data(file.text.utf8)) as? [String: Any]
        let hooks = try #require(json?["hooks"] as? [String: [[String: Any]]])
        #expect(Set(hooks.keys) == ["SessionStart", "UserPromptSubmit", "PreToolUse", "Notification", "Stop"], "no SubagentStop")
        let stop = try #require((hooks["Stop"]?.first?["hooks"] as? [[String: String]])?.first)
        #expect(stop["type"] == "command")
        #expect(stop["command"]?.contains("status/claude-main-t1") == true)
        let codexID = AgentPTYID(providerID: "codex", kind: .main, suffix: "t2")
        #expect(AgentProvider.StatusHooks.codexNotify.file(for: codexID) { AgentHost.hookCommand(codexID, $0) } == nil)
        let handed = AgentProvider.StatusHooks.codexNotify.handOver(codexID, filePath: nil) { AgentHost.hookCommand(codexID, $0) }
        #expect(handed.arguments.count == 2 && handed.arguments[0] == "-c" && handed.environment.isEmpty)
        let codex = handed.arguments[1]
        #expect(codex.hasPrefix("notify=[\"sh\", \"-c\", \"mkdir -p \\\"$HOME/"))
        // the command appends its line and wakes the watcher of the agent's own tmux server,
        // prints nothing and succeeds, even with no watcher and no tmux
        let dir = try TestPaths.makeTemporaryDirectory("hook-home")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try TestServer.runCapturing("/bin/sh", ["-c", AgentHost.hookCommand(id, .stop)], env: ["HOME": dir, "PATH": "/usr/bin:/bin"])
        #expect(r.status == 0 && r.out.isEmpty && r.err.isEmpty, "\(r)")
        let line = try String(contentsOfFile: dir + "/.cache/sshkit-agents/status/claude-main-t1", encoding: .utf8)
        #expect(line.range(of: #"^[0-9]+ stop\n$"#, options: .regularExpression) != nil, "\(line)")
    }

    /// Every capture of the real agents' recorded screens reads as the state it shows, in
    /// the watcher's rounds and in the host's one look (for plain terminals) alike, one classifier.
    @Test(arguments: [
        ("vibe-idle-x5", "mistral", "idle"), ("vibe-working-x8", "mistral", "working"),
        ("vibe-waiting", "mistral", "waiting"), ("vibe-done", "mistral", "idle"), ("vibe-done-x5", "mistral", "idle"),
        ("kimi-idle-x5", "kimi", "idle"), ("kimi-working-x8", "kimi", "working"), ("kimi-waiting", "kimi", "waiting"),
        ("kimi-waiting-write", "kimi", "waiting"), ("kimi-done", "kimi", "idle"), ("kimi-done-x5", "kimi", "idle"),
        ("hermes-idle-x5", "hermes", "idle"), ("hermes-working-x8", "hermes", "working"),
        ("hermes-waiting", "hermes", "waiting"), ("hermes-done", "hermes", "idle"), ("hermes-done-x5", "hermes", "idle"),
    ])
    func recordedScreensReadAsTheirState(_ name: String, _ provider: String, _ expected: String) throws {
        var w = try WatcherRounds()
        defer { w.remove() }
        let session = "\(provider)-main-t1"
        for (i, capture) in try WatcherRounds.recording(name).enumerated() {
            // each capture is looked at alone: a fresh watcher's first look
            w.states = ""
            let state = try w.round(session, screen: capture.screen, title: capture.title, now: 1000 + i)
            #expect(state == expected, "\(name) capture \(i + 1): \(state); \(w.events.last.map { "\($0)" } ?? "")")
            let look = try WatcherRounds.look(capture.screen, provider)
            if capture.title.isEmpty || expected != "working" || provider != "mistral" {
                #expect(look?.activity.name == expected, "\(name) capture \(i + 1), the engine's look: \(String(describing: look))")
            }
        }
    }

    @Test func theQuestionIsTheLineTheRulesName() throws {
        var w = try WatcherRounds()
        defer { w.remove() }
        for (name, provider, question) in [("kimi-waiting", "kimi", "Shell is requesting approval to run command:"),
                                          ("vibe-waiting", "mistral", "Permission for the file_system.bash tool"),
                                          ("hermes-waiting", "hermes", "Dangerous Command")] {
            w.states = ""
            let capture = try #require(try WatcherRounds.recording(name).first)
            _ = try w.round("\(provider)-main-q", screen: capture.screen, title: capture.title, now: 2000)
            let e = try #require(w.events.last)
            #expect(e.state == "waiting" && e.source == "screen" && e.rule.hasPrefix("shipped:"))
            #expect(e.question.contains(question), "\(e.question)")
        }
    }

    /// An idle agent whose logo, spinner or clock redraws is idle in every round of a
    /// watcher that follows it: after a turn, and from a first look.
    @Test(arguments: ["vibe-idle-x5", "kimi-idle-x5", "hermes-idle-x5", "vibe-done-x5", "hermes-done-x5", "kimi-done-x5"])
    func aRedrawingIdleScreenIsIdleInEveryRound(_ name: String) throws {
        var w = try WatcherRounds()
        defer { w.remove() }
        let provider = name.hasPrefix("vibe") ? "mistral" : String(name.prefix { $0 != "-" })
        let session = "\(provider)-main-r"
        let captures = try WatcherRounds.recording(name)
        for round in 0..<12 {
            let c = captures[round % captures.count]
            let state = try w.round(session, screen: c.screen, title: c.title, now: 3000 + round)
            #expect(state == "idle", "round \(round): \(state)")
        }
        #expect(w.events.map(\.state) == ["idle"], "\(w.events)")
    }

    /// The sources combined: a hook's state, a question on the screen over an older
    /// hook event, a newer hook event over a question still on the screen, done until
    /// someone looks, the process's end.
    @Test func sourcesCombineAndDoneLastsUntilSomeoneLooks() throws {
        var w = try WatcherRounds()
        defer { w.remove() }
        let s = "kimi-main-c"
        let idle = try #require(try WatcherRounds.recording("kimi-idle-x5").first).screen
        let asking = try #require(try WatcherRounds.recording("kimi-waiting").first).screen
        let working = try #require(try WatcherRounds.recording("kimi-working-x8").first).screen
        try w.hook(s, "start", at: 100)
        #expect(try w.round(s, screen: idle, now: 100) == "idle")
        try w.hook(s, "prompt", at: 101)
        #expect(try w.round(s, screen: working, now: 101) == "working")
        try w.hook(s, "tool", at: 102)
        // the dialog, seen twice (a new screen class counts once it holds), over the
        // older hook event that said working
        #expect(try w.round(s, screen: asking, now: 102) == "working")
        #expect(try w.round(s, screen: asking, now: 103) == "waiting")
        #expect(w.events.last?.source == "screen")
        // answered: the next hook event is newer than the question still drawn
        try w.hook(s, "tool", at: 104)
        #expect(try w.round(s, screen: asking, now: 104) == "working")
        try w.hook(s, "stop", at: 106)
        #expect(try w.round(s, screen: idle, now: 106) == "done")
        #expect(try w.round(s, screen: nil, now: 110) == "done", "done holds while nobody looks")
        try "111\n".write(toFile: "\(w.dir)/seen/\(s)", atomically: true, encoding: .utf8)
        #expect(try w.round(s, screen: nil, now: 111) == "idle")
        try w.hook(s, "prompt", at: 112)
        try w.hook(s, "stop", at: 113)
        #expect(try w.round(s, screen: idle, now: 112) == "idle", "the stop came before the watcher saw the work")
        try w.hook(s, "prompt", at: 114)
        #expect(try w.round(s, screen: working, now: 114) == "working")
        try w.hook(s, "stop", at: 115)
        #expect(try w.round(s, screen: idle, now: 115, attached: true) == "idle", "someone attached saw it")
        #expect(try w.round(s, screen: nil, now: 116, dead: true) == "exited:0")
        #expect(w.events.map(\.state) == ["idle", "working", "waiting", "working", "done", "idle", "working", "idle", "exited:0"])
        #expect(w.events.map(\.source) == ["hook", "hook", "screen", "hook", "hook", "hook", "hook", "hook", "process"])
        // the session goes: lost, or stopped with the engine's mark
        _ = try w.round("kimi-main-other", screen: idle, now: 117)
        #expect(w.events.last?.session == "kimi-main-other")
        #expect(!w.states.contains("S kimi-main-c "))
    }

    /// A screen's follower (the cockpit's preview: a tmux client, read-only, its size
    /// ignored) is not someone who looked: a turn that ends while only followers are
    /// attached is done, and stays done, until a person attaches.
    @Test func aFollowerIsNotSomeoneWhoLooked() throws {
        var w = try WatcherRounds()
        defer { w.remove() }
        let s = "kimi-main-f"
        let idle = try #require(try WatcherRounds.recording("kimi-idle-x5").first).screen
        let working = try #require(try WatcherRounds.recording("kimi-working-x8").first).screen
        try w.hook(s, "start", at: 100)
        #expect(try w.round(s, screen: idle, now: 100, clients: []) == "idle")
        try w.hook(s, "prompt", at: 101)
        #expect(try w.round(s, screen: working, now: 101, clients: ["c11"]) == "working")
        try w.hook(s, "stop", at: 102)
        #expect(try w.round(s, screen: idle, now: 102, clients: ["c11", "c11"]) == "done", "two followers: nobody looked")
        #expect(try w.round(s, screen: nil, now: 103, clients: ["c11"]) == "done")
        // a person attaches (a read-only client that sizes the window is one too)
        #expect(try w.round(s, screen: nil, now: 104, clients: ["c11", "c10"]) == "idle")
        try w.hook(s, "prompt", at: 105)
        #expect(try w.round(s, screen: working, now: 105, clients: []) == "working")
        try w.hook(s, "stop", at: 106)
        #expect(try w.round(s, screen: idle, now: 106, clients: ["c00"]) == "idle", "someone attached saw it")
    }

    /// An agent with no screen rules is known to work by its screen changing. Resizing its
    /// window (a preview laying it out at the pane's size, a client attaching at another
    /// size) makes it redraw; for 2 s after the change that redraw is no work: it stays
    /// idle, no turn is made up, and nothing is "done". A change after that is work again.
    @Test func aRedrawAfterAResizeIsNoWork() throws {
        var w = try WatcherRounds()
        defer { w.remove() }
        let s = "amp-main-r"
        #expect(try w.round(s, screen: "> ready\n", now: 100) == "working", "a new screen: working until it holds")
        #expect(try w.round(s, screen: "> ready\n", now: 104) == "idle")
        // laid out at 64x20: the agent draws its screen again, in two rounds
        #expect(try w.round(s, screen: "> rea\n", now: 105, size: "64x20") == "idle")
        #expect(try w.round(s, screen: "> ready\n  (64 columns)\n", now: 106, size: "64x20") == "idle")
        #expect(try w.round(s, screen: "> ready\n  (64 columns)\n", now: 110, size: "64x20") == "idle")
        // and given back its own size
        #expect(try w.round(s, screen: "> ready\n", now: 111) == "idle")
        #expect(try w.round(s, screen: nil, now: 115) == "idle")
        #expect(!w.events.contains { $0.state == "done" }, "\(w.events)")
        // a change that is not a redraw is work, and its end is done
        #expect(try w.round(s, screen: "> ready\nwrote a.txt\n", now: 120) == "working")
        #expect(try w.round(s, screen: "> ready\nwrote a.txt\n", now: 124) == "done")
    }

    /// No agent has a hook for "the question was answered": a question the screen showed
    /// with or after the hook that said waiting, and shows no longer, reads as working
    /// (then as the screen's idle once that holds); a waiting hook whose question the
    /// screen never showed (Claude's "waiting for your input") holds.
    @Test func aQuestionThatLeftTheScreenWasAnswered() throws {
        var w = try WatcherRounds()
        defer { w.remove() }
        let s = "claude-main-a"
        let asking = "Edit src/main.swift\nDo you want to make this edit to main.swift?\n❯ 1. Yes\n  2. No, and tell Claude what to do differently\n"
        let running = "⏺ Update(src/main.swift)\n  ⎿  Updated src/main.swift with 2 additions\n"
        let idle = "> \n  ? for shortcuts\n"
        try w.hook(s, "start", at: 100)
        #expect(try w.round(s, screen: idle, now: 100) == "idle")
        try w.hook(s, "prompt", at: 101)
        try w.hook(s, "tool", at: 101)
        #expect(try w.round(s, screen: running, now: 101) == "working")
        // the hook first, its dialog drawn a moment later
        try w.hook(s, "notification", at: 102)
        #expect(try w.round(s, screen: running, now: 102) == "waiting")
        #expect(w.events.last?.source == "hook")
        #expect(try w.round(s, screen: asking, now: 103) == "waiting")
        #expect(try w.round(s, screen: asking, now: 104) == "waiting")
        // answered: the dialog gone (seen twice), no hook yet
        #expect(try w.round(s, screen: running, now: 105) == "waiting", "one look at a new screen is not enough")
        #expect(try w.round(s, screen: running + "  ⎿  Running…\n", now: 106) == "working")
        #expect(w.events.last.map { [$0.source, $0.rule] } == ["screen", "answered"])
        try w.hook(s, "stop", at: 110)
        #expect(try w.round(s, screen: idle, now: 110) == "done")

        // the dialog drawn before its hook: the same
        try w.hook(s, "prompt", at: 120)
        #expect(try w.round(s, screen: running, now: 120) == "working")
        #expect(try w.round(s, screen: asking, now: 121) == "working")
        #expect(try w.round(s, screen: asking, now: 122) == "waiting")
        try w.hook(s, "notification", at: 123)
        #expect(try w.round(s, screen: asking, now: 123) == "waiting")
        _ = try w.round(s, screen: idle, now: 124)
        #expect(try w.round(s, screen: idle, now: 125) == "working", "a refusal back at the prompt: working until its idle holds")
        #expect(try w.round(s, screen: nil, now: 131) == "done", "the idle rule held 5 s: the turn ended")

        // a waiting hook whose question never showed holds, whatever the screen does
        try "140\n".write(toFile: "\(w.dir)/seen/\(s)", atomically: true, encoding: .utf8)
        try w.hook(s, "prompt", at: 140)
        #expect(try w.round(s, screen: running, now: 140) == "working")
        try w.hook(s, "notification", at: 141)
        #expect(try w.round(s, screen: running, now: 141) == "waiting")
        #expect(try w.round(s, screen: idle, now: 142) == "waiting")
        #expect(try w.round(s, screen: idle, now: 150) == "waiting")
    }
}

/// The watcher on a real host (the fixture's sshd), with fake agents.
@Suite("Agent status: the watcher", .tags(.integration, .paced), .serialized)
struct AgentStatusTests {
    struct Host {
        let transport: SSHTransport
        let host: AgentHost
        init(socket: String = "sshkit-status-\(UInt32.random(in: 0...UInt32.max))") {
            transport = SSHTransport(configuration: TestServer.shared.configuration())
            host = AgentHost(transport: transport, tmuxSocket: socket, extraSearchPath: [FakeAgents.directory])
        }

        func start(_ provider: String, _ binary: String) async throws -> AgentSession {
            let id = AgentPTYID(providerID: provider, kind: .main, suffix: "s\(UInt32.random(in: 0...UInt32.max))")
            return try await host.startAgent(AgentSessionSpec(ptyID: id, provider: try AgentProvider.named(provider),
                                                              settings: AgentProviderSettings(binary: binary), workingDirectory: "/tmp"))
        }

        func awaitStatus(_ session: AgentSession, _ want: AgentActivity, seconds: Double = 20) async -> AgentStatus? {
            await eventually(seconds) { () async -> AgentStatus? in
                let s = await host.status(of: session)
                return s.activity == want ? s : nil
            }
        }

        func close() async {
            _ = try? await transport.runProcess("tmux", "-L", host.tmuxSocket, "kill-server")
            _ = try? await transport.runProcess("/bin/sh", "-c", "rm -rf \"$HOME/.cache/sshkit-agents/watch/tmux-$1\"", "sh", host.tmuxSocket)
            await transport.close()
        }
    }

    @Test func claudeHooksDriveTheStatusAndDoneLastsUntilSeen() async throws {
        let h = Host()
        do {
            let session = try await h.start("claude", "fake-hooked")
            #expect(session.arguments.contains("--settings"))
            let started = await h.awaitStatus(session, .idle)
            #expect(started?.source == .hook && started?.rule == "start")
            try await h.host.sendLine("work", to: session)
            #expect(await h.awaitStatus(session, .working)?.source == .hook)
            try await h.host.sendLine("ask", to: session)
            let asking = await h.awaitStatus(session, .waitingForInput)
            #expect(asking?.isInferred == false || asking?.question == "Allow this? (y/n)", "\(String(describing: asking))")
            // answered: it works again, and its turn ends with nobody looking
            try await h.host.sendLine("work", to: session)
            #expect(await h.awaitStatus(session, .working)?.source == .hook)
            try await h.host.sendLine("done", to: session)
            let done = await h.awaitStatus(session, .done)
            #expect(done?.source == .hook && done?.rule == "stop")
            try await h.host.markSeen(session.ptyID)
            let seen = await h.awaitStatus(session, .idle)
            let files = try? await h.transport.runProcess("/bin/sh", "-c", "cd $HOME/.cache/sshkit-agents/watch/tmux-\(h.host.tmuxSocket) && cat states seen/* events")
            #expect(seen?.source == .hook, "\(files?.stdoutString ?? "")")
            try await h.host.sendLine("quit", to: session)
            let exited = await h.awaitStatus(session, .exited(3))
            #expect(exited?.source == .process)
            try await h.host.stop(session)
            #expect(await h.host.status(of: session).activity == .lost, "a session that is not there")
        } catch {
            await h.close()
            throw error
        }
        await h.close()
    }

    /// A queue of three prompts drains on the host while no client is connected: each goes
    /// when the turn of the one before has ended (its Stop hook), once, in order; a
    /// when-idle prompt goes ahead of the queue; a prompt can be removed before it goes.
    @Test func aQueueDrainsOnTheHostWhileNobodyIsConnected() async throws {
        let h = Host()
        var current = h
        do {
            let session = try await h.start("claude", "fake-turns")
            #expect(await h.awaitStatus(session, .idle)?.rule == "start")
            func turns(_ host: Host) async -> [String] {
                let text = (try? await host.host.screenText(session)) ?? ""
                return text.split(separator: "\n").filter { $0.hasPrefix("turn ") }.map(String.init)
            }
            // queued while the agent works, so that nothing goes before the list is read
            try await h.host.sendLine("warm up", to: session)
            #expect(await h.awaitStatus(session, .working) != nil)
            for text in ["first prompt", "second prompt", "third prompt"] {
                _ = try await h.host.enqueue(text, for: session.ptyID, whenIdle: false)
            }
            let gone = try await h.host.enqueue("never sent", for: session.ptyID, whenIdle: false)
            let queued = try await h.host.queuedPrompts(of: session.ptyID)
            #expect(queued.map(\.text) == ["first prompt", "second prompt", "third prompt", "never sent"])
            #expect(try await h.host.removeQueuedPrompt(gone.id, of: session.ptyID))
            #expect(try await h.host.removeQueuedPrompt(gone.id, of: session.ptyID) == false)
            await #expect(throws: AgentError.self) { try await h.host.removeQueuedPrompt("../pid", of: session.ptyID) }
            // nobody connected while the queue drains (four turns of 1.5 s)
            await h.transport.close()
            try await Task.sleep(for: .seconds(9))
            let again = Host(socket: h.host.tmuxSocket)
            current = again
            let drained = await eventually(20) { () async -> [String]? in
                let t = await turns(again)
                return t.count >= 4 ? t : nil
            }
            let screen = (try? await again.host.screenText(session)) ?? ""
            #expect(drained == ["turn 1: warm up", "turn 2: first prompt", "turn 3: second prompt", "turn 4: third prompt"],
                    "\(screen)")
            #expect(try await again.host.queuedPrompts(of: session.ptyID).isEmpty)
            // a prompt for the next idle goes ahead of the ones queued before it
            #expect(await again.awaitStatus(session, .done) != nil)
            try await again.host.sendLine("busy now", to: session)
            #expect(await again.awaitStatus(session, .working) != nil)
            _ = try await again.host.enqueue("after the queue", for: session.ptyID, whenIdle: false)
            _ = try await again.host.enqueue("at the next idle", for: session.ptyID, whenIdle: true)
            let order = await eventually(20) { () async -> [String]? in
                let t = await turns(again)
                return t.count >= 7 ? t : nil
            }
            #expect(order?.suffix(3) == ["turn 5: busy now", "turn 6: at the next idle", "turn 7: after the queue"],
                    "\(String(describing: order))")
            #expect(try await again.host.clearQueue(of: session.ptyID) == 0)
        } catch {
            await current.close()
            throw error
        }
        await current.close()
    }

    /// An agent without hooks whose turns end before the watcher's next look (its idle
    /// rule matches before and after each answer, so it is never seen working): each
    /// queued prompt still goes, once its answer changed the screen and the screen was
    /// still for a moment. While one cannot go, the queue says why.
    @Test func aQueueGoesOnAfterTurnsTooQuickToBeSeen() async throws {
        let h = Host()
        do {
            let session = try await h.start("mistral", "fake-quick")
            #expect(await h.awaitStatus(session, .idle) != nil)
            func answers() async -> [String] {
                let text = (try? await h.host.screenText(session)) ?? ""
                return text.split(separator: "\n").filter { $0.hasPrefix("answer ") }.map(String.init)
            }
            for text in ["one", "two", "three"] { _ = try await h.host.enqueue(text, for: session.ptyID, whenIdle: false) }
            let held = await eventually(20) { () async -> AgentPromptQueue? in
                let q = try? await h.host.promptQueue(of: session.ptyID)
                if case .turnNotSeen? = q?.hold { return q }
                return nil
            }
            #expect(held?.prompts.count == 2, "while the first one's turn is not seen, the queue says so: \(String(describing: held))")
            #expect(held?.hold?.description.contains("has not been seen to start a turn") == true)
            let drained = await eventually(40) { () async -> [String]? in
                let a = await answers()
                return a.count >= 3 ? a : nil
            }
            let shown = await answers()
            let left = try? await h.host.promptQueue(of: session.ptyID)
            #expect(drained == ["answer 1: one", "answer 2: two", "answer 3: three"], "\(shown); the queue: \(String(describing: left))")
            #expect(try await h.host.promptQueue(of: session.ptyID) == AgentPromptQueue(prompts: [], hold: nil))
            // an agent that is not running holds its queue, and says so
            _ = try await h.transport.runProcess("tmux", "-L", h.host.tmuxSocket, "kill-session", "-t", "=\(session.ptyID)")
            _ = try await h.host.enqueue("four", for: session.ptyID, whenIdle: false)
            let ended = await eventually(20) { () async -> AgentQueueHold? in
                let q = try? await h.host.promptQueue(of: session.ptyID)
                if case .agentNotRunning? = q?.hold { return q?.hold }
                if case .watcherNotRunning? = q?.hold { return q?.hold }
                return nil
            }
            let last = try? await h.host.promptQueue(of: session.ptyID)
            #expect(ended != nil, "\(String(describing: last))")
        } catch {
            await h.close()
            throw error
        }
        await h.close()
    }

    /// A task set to continue after a usage limit is sent "continue" once, after the reset
    /// its message names and the wait; a message whose time cannot be read sends nothing.
    @Test func aUsageLimitIsWaitedOutThenContinuedOnce() async throws {
        let h = Host()
        do {
            let session = try await h.start("claude", "fake-turns")
            #expect(await h.awaitStatus(session, .idle)?.rule == "start")
            #expect(try await h.host.continueAfterLimit(of: session.ptyID) == nil)
            try await h.host.setContinueAfterLimit(.seconds(1), for: session.ptyID)
            #expect(try await h.host.continueAfterLimit(of: session.ptyID) == .seconds(1))
            _ = try await h.host.watcherSnapshot(rules: .shipped)
            func sent() async -> [Substring] {
                let r = try? await h.transport.runProcess("/bin/sh", "-c", "cat \"$HOME/$1/queue/sent.log\" 2>/dev/null",
                                                          "sh", AgentStatusWatcher.directory(socket: h.host.tmuxSocket))
                return (r?.stdoutString ?? "").split(separator: "\n").filter { $0.hasSuffix(" continue") }
            }
            // a reset 3 s ahead, then a second: "continue" once
            try await h.host.sendLine("limit", to: session)
            let limited = await eventually(20) { () async -> AgentStatus? in
                let s = await h.host.status(of: session)
                return s.question?.contains("limit reached|") == true ? s : nil
            }
            #expect(limited?.activity == .waitingForInput)
            let reset = limited?.question.flatMap { Int($0.split(separator: "|").last ?? "") } ?? 0
            #expect(reset > 0, "\(String(describing: limited))")
            // the board's "limited until": the reset the host read
            let until = await eventually(10) { () async -> Date? in await h.host.status(of: session).limitedUntil }
            #expect(until.map { Int($0.timeIntervalSince1970) } == reset, "\(String(describing: until)) against \(reset)")
            let continued = await eventually(30) { () async -> String? in
                let text = (try? await h.host.screenText(session)) ?? ""
                return text.contains("turn 1: continue") ? text : nil
            }
            #expect(continued != nil, "the host typed continue")
            let lines = await sent()
            #expect(lines.count == 1, "\(lines)")
            let at = lines.first.flatMap { Int($0.split(separator: " ")[0]) } ?? 0
            #expect(at >= reset + 1, "sent at \(at), the reset at \(reset) and a second's wait")
            #expect(await h.awaitStatus(session, .done) != nil)
            // a limit whose time cannot be read: waiting for the user, nothing more is sent
            try await h.host.sendLine("limit-no-time", to: session)
            let vague = await eventually(20) { () async -> AgentStatus? in
                let s = await h.host.status(of: session)
                return s.question?.contains("resets whenever") == true ? s : nil
            }
            #expect(vague?.activity == .waitingForInput && vague?.limitedUntil == nil, "\(String(describing: vague))")
            try await Task.sleep(for: .seconds(3))
            #expect(await sent().count == 1, "continue is sent once, and not for a time it cannot read")
        } catch {
            await h.close()
            throw error
        }
        await h.close()
    }

    /// Gemini CLI and Qwen Code (a settings file named by an environment variable) and
    /// OpenCode (a plugin listed in its configuration variable), with fakes that run the
    /// hooks as each documents: the hooks drive the state, and a sub-agent's end is not the
    /// session's.
    @Test(arguments: [("gemini", "fake-hooked"), ("qwen", "fake-hooked"), ("opencode", "fake-opencode")])
    func environmentHooksDriveTheStatus(_ provider: String, _ binary: String) async throws {
        let h = Host()
        do {
            let session = try await h.start(provider, binary)
            let ready = try await h.host.waitForOutput(of: session, containing: "ready \(provider == "opencode" ? "opencode 1" : provider)",
                                                       timeout: .seconds(20))
            let first = try await h.host.tmux.capture(session.ptyID.description)
            #expect(ready, "the hooks were found: \(first)")
            if provider != "opencode" {  // OpenCode's start is the screen's to tell
                let started = await h.awaitStatus(session, .idle)
                #expect(started?.source == .hook && started?.rule == "start")
            }
            try await h.host.sendLine("work", to: session)
            #expect(await h.awaitStatus(session, .working)?.source == .hook)
            if provider == "opencode" {
                try await h.host.sendLine("sub", to: session)
                #expect(try await h.host.waitForOutput(of: session, containing: "a sub-agent finished", timeout: .seconds(10)))
                try await Task.sleep(for: .seconds(2))
                let still = await h.host.status(of: session)
                #expect(still.activity == .working && still.source == .hook, "\(still)")
            }
            try await h.host.sendLine("ask", to: session)
            // the hook says waiting; the question it drew (a rule of every agent's) is then
            // the screen's, with its text
            let asking = await h.awaitStatus(session, .waitingForInput)
            #expect(asking?.source == .hook || asking?.question == "Allow this? (y/n)", "\(String(describing: asking))")
            try await h.host.sendLine("work", to: session)
            #expect(await h.awaitStatus(session, .working)?.source == .hook)
            try await h.host.sendLine("done", to: session)
            let done = await h.awaitStatus(session, .done)
            #expect(done?.source == .hook && done?.rule == "stop", "\(String(describing: done))")
            let screen = try await h.host.tmux.capture(session.ptyID.description)
            #expect(!screen.contains("HOOK FAILED") && !screen.contains("BAD HOOK"), "\(screen)")
        } catch {
            await h.close()
            throw error
        }
        await h.close()
    }

    /// The variables that install hooks are the engine's only while the user has not set
    /// them: in the provider's settings (left out of the launch) or in the login (the
    /// script keeps the login's value).
    @Test func aHookVariableOfTheUsersIsKept() throws {
        let provider = try AgentProvider.named("gemini")
        let env = ["GEMINI_CLI_SYSTEM_DEFAULTS_PATH": "/home/u/.cache/sshkit-agents/hooks/x.gemini.json"]
        let ours = try AgentLaunch.plan(provider, name: "gemini-main-x", prompt: nil, autoApprove: false, resume: .fresh,
                                        hookEnvironment: env)
        #expect(ours.hookEnvironment == env)
        let theirs = try AgentLaunch.plan(provider, settings: AgentProviderSettings(environment: ["GEMINI_CLI_SYSTEM_DEFAULTS_PATH": "/etc/mine.json"]),
                                          name: "gemini-main-x", prompt: nil, autoApprove: false, resume: .fresh, hookEnvironment: env)
        #expect(theirs.hookEnvironment.isEmpty && theirs.environment["GEMINI_CLI_SYSTEM_DEFAULTS_PATH"] == "/etc/mine.json")
        let script = AgentLauncher.script(ours, ptyID: AgentPTYID(providerID: "gemini", kind: .main, suffix: "x"), provider: provider,
                                          workingDirectory: "/tmp", extraSearchPath: [])
        let line = try #require(script.split(separator: "\n").first { $0.contains("GEMINI_CLI_SYSTEM_DEFAULTS_PATH") })
        let probe = String(line) + "\nprintf '%s' \"$GEMINI_CLI_SYSTEM_DEFAULTS_PATH\""
        let unset = try TestServer.runCapturing("/bin/sh", ["-c", probe], env: ["PATH": "/usr/bin:/bin"])
        #expect(unset.out == env["GEMINI_CLI_SYSTEM_DEFAULTS_PATH"])
        let set = try TestServer.runCapturing("/bin/sh", ["-c", probe], env: ["PATH": "/usr/bin:/bin", "GEMINI_CLI_SYSTEM_DEFAULTS_PATH": ""])
        #expect(set.out == "", "set, even empty, is the user's")
    }

    @Test func withoutHooksTheScreenRulesSayWhatItDoes() async throws {
        let h = Host()
        do {
            let session = try await h.start("amp", "fake-tui")
            #expect(session.arguments == ["fake-tui"], "amp has no hooks")
            let idle = await h.awaitStatus(session, .idle)
            #expect(idle?.source == .screen && idle?.rule.map { ["quiet", "activity"].contains($0) } == true)
            try await h.host.sendLine("Shall I go on? (y/n)", to: session)
            let asking = await h.awaitStatus(session, .waitingForInput)
            #expect(asking?.source == .screen && asking?.question == "got: Shall I go on? (y/n)", "\(String(describing: asking))")
            #expect(AgentScreenRules.shipped.rule(id: asking?.rule ?? "")?.provider == "*")
            try await h.host.sendLine("exit 4", to: session)
            #expect(await h.awaitStatus(session, .exited(4))?.source == .process)
        } catch {
            await h.close()
            throw error
        }
        await h.close()
    }

    /// The events of a host read on from a cursor: none lost, none twice, across a
    /// dropped channel and a watcher replaced by a newer version; a stop is `stopped`, a
    /// session killed behind the engine's back `lost`.
    @Test func eventsAreReadOnFromACursorAcrossANewWatcher() async throws {
        let h = Host()
        do {
            let a = try await h.start("amp", "fake-tui")
            let b = try await h.start("amp", "fake-tui")
            _ = await h.awaitStatus(a, .idle)
            _ = await h.awaitStatus(b, .idle)
            func read(after cursor: AgentEventCursor?, until: @escaping @Sendable ([AgentStatusEvent]) -> Bool)
                async throws -> (AgentEventCursor?, [AgentStatusEvent])
            {
                let lines = try await h.host.statusEvents(after: cursor)
                let r = await finishes(within: .seconds(30)) { () async -> (AgentEventCursor?, [AgentStatusEvent]) in
                    var start: AgentEventCursor?
                    var all: [AgentStatusEvent] = []
                    do {
                        for try await line in lines {
                            switch line {
                            case .start(let c): start = c
                            case .event(let e): all.append(e)
                            }
                            if until(all) { break }
                        }
                    } catch {}
                    return (start, all)
                }
                return try #require(try r?.get())
            }
            let (start, first) = try await read(after: nil) { all in all.contains { $0.session == b.ptyID.description } }
            #expect(start?.sequence == 0)
            #expect(first.map(\.cursor.sequence) == Array(1...first.count), "numbered from 1, in order")
            let cursor = try #require(first.last?.cursor)

            // a newer watcher takes over (the running one says it is older)
            _ = try await h.transport.runProcess("/bin/sh", "-c", "echo 0 > \"$HOME/.cache/sshkit-agents/watch/tmux-\(h.host.tmuxSocket)/version\"")
            _ = try await h.host.watcherSnapshot(rules: .shipped)
            try await h.host.sendLine("Continue? [y/N]", to: a)
            try await h.host.stop(b)
            let (again, more) = try await read(after: cursor) { all in
                all.contains { $0.session == b.ptyID.description && $0.status.activity == .stopped }
                    && all.contains { $0.status.activity == .waitingForInput }
            }
            #expect(again == cursor)
            #expect(more.map(\.cursor.sequence) == Array((cursor.sequence + 1)...(cursor.sequence + more.count)), "\(more)")
            #expect(more.filter { $0.session == a.ptyID.description }.map(\.status.activity).last == .waitingForInput,
                    "\(more.map { ($0.session, $0.status.activity, $0.status.rule ?? "") })")
            let pid = try await h.transport.runProcess("/bin/sh", "-c", "cat \"$HOME/.cache/sshkit-agents/watch/tmux-\(h.host.tmuxSocket)/version\"")
            #expect(pid.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)
                    == "\(AgentStatusWatcher.version) \(AgentStatusWatcher.scriptDigest)")

            // killed behind the engine's back: lost
            let last = try #require(more.last?.cursor)
            _ = try await h.transport.runProcess("tmux", "-L", h.host.tmuxSocket, "kill-session", "-t", "=" + a.ptyID.description)
            let (_, gone) = try await read(after: last) { all in all.contains { $0.status.activity == .lost } }
            #expect(gone.map(\.status.activity) == [.lost] && gone.first?.session == a.ptyID.description)
            // the watcher ends with the last agent (after its grace period)
        } catch {
            await h.close()
            throw error
        }
        await h.close()
    }
}
