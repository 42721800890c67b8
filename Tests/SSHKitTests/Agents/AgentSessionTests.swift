import AgentSessions
import Foundation
import SSHKit
import ServerTransport
import Synchronization
import TerminalSupport
import Testing

/// Polls `body` every 100 ms until it returns a value, for at most `seconds` (a bound
/// that only catches a hang); nil when it never did.
func eventually<T>(_ seconds: Double = 20, _ body: () async throws -> T?) async rethrows -> T? {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if let v = try await body() { return v }
        try? await Task.sleep(for: .milliseconds(100))
    }
    return nil
}

/// Reads a terminal's output until `text` appears (or 20 s pass); everything read.
func read(_ terminal: AgentTerminal, until text: String, seconds: Double = 20) async -> String {
    let result = await finishes(within: .seconds(seconds)) {
        var all = ""
        for await chunk in terminal.output {
            all += String(decoding: chunk, as: UTF8.self)
            if all.contains(text) { break }
        }
        return all
    }
    return (try? result?.get()) ?? ""
}

/// Agents in tmux sessions on a real sshd: start, type, attach, detach, survive a
/// dropped connection, exit statuses, orphans, and the plain-terminal fallback.
@Suite("Agent sessions", .tags(.integration), .serialized)
struct AgentSessionTests {
    /// A server of its own: one test kills its per-connection processes.
    static let server: TestServer = {
        do { return try TestServer.start(name: "agents") } catch { fatalError("agents sshd: \(error)") }
    }()

    static func host(_ transport: SSHTransport, socket: String) -> AgentHost {
        AgentHost(transport: transport, tmuxSocket: socket, extraSearchPath: [FakeAgents.directory])
    }

    static func socketName() -> String { "sshkit-test-\(UInt32.random(in: 0...UInt32.max))" }

    /// A spec for a provider whose binary is one of the fakes.
    static func spec(_ provider: String = "claude", binary: String, suffix: String = "t\(UInt32.random(in: 0...UInt32.max))",
                     directory: String = "/tmp", prompt: String? = nil, environment: [String: String] = [:]) throws -> AgentSessionSpec
    {
        AgentSessionSpec(ptyID: AgentPTYID(providerID: provider, kind: .main, suffix: suffix),
                         provider: try AgentProvider.named(provider),
                         settings: AgentProviderSettings(binary: binary, environment: environment),
                         workingDirectory: directory, prompt: prompt, size: SSHTerminalSize(columns: 100, rows: 30),
                         statusHooks: false)
    }

    /// How the session ended (polled until it did, for at most 20 s), and the last states
    /// seen on the way, for the failure message.
    static func end(of session: AgentSession, on host: AgentHost) async -> (AgentProcessState?, [String]) {
        var seen: [String] = []
        let state = await eventually { () async -> AgentProcessState? in
            do {
                let s = try await host.state(of: session)
                seen.append("\(s)")
                return s == .running ? nil : s
            } catch {
                seen.append("\(error)")
                return nil
            }
        }
        return (state, Array(seen.suffix(3)))
    }

    /// Stops the private tmux server of a test.
    /// Whether, within a few seconds, no loop of the host's watching (`marker`: a word of its
    /// script, which is in its command line with the tmux socket) runs on the host.
    static func nothingLeft(_ marker: String, _ host: AgentHost, _ t: SSHTransport) async -> Bool {
        await eventually(10) { () async -> Bool? in
            let r = try? await t.runProcess("/bin/sh", "-c", "pgrep -f -- \"$1.* sh $2 \" | wc -l", "sh", marker, host.tmuxSocket)
            return r?.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines) == "0" ? true : nil
        } == true
    }

    /// The host's tmux server survives its sessions being made and closed while screens
    /// are followed and outputs waited for, over and over (tmux crashes its server when a
    /// control-mode client that is still identifying itself is told of such a change; the
    /// watching here uses none).
    @Test func theTmuxServerSurvivesSessionsComingAndGoingWhileScreensAreWatched() async throws {
        let t = SSHTransport(configuration: Self.server.configuration())
        let host = Self.host(t, socket: Self.socketName())
        defer { Task { await Self.killServer(host); await t.close() } }
        let keeper = try await host.startAgent(try Self.spec(binary: "fake-ticker"))
        let name = try #require(keeper.tmuxName)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                // sessions made and closed, and clients attaching and detaching
                for i in 0..<40 {
                    _ = try await t.runProcess("/bin/sh", "-c", #"tmux -L "$1" -f /dev/null new-session -d -s "churn-$2" sleep 60 \; kill-session -t "=churn-$2""#,
                                               "sh", host.tmuxSocket, "\(i)")
                }
            }
            for _ in 0..<3 {
                group.addTask {
                    for _ in 0..<8 {
                        let follow = Task { try await host.tmux.followScreen(of: name) { _ in } }
                        _ = try await host.waitForOutput(of: keeper, containing: "tick", timeout: .seconds(10))
                        try await Task.sleep(for: .milliseconds(Int.random(in: 5...40)))
                        follow.cancel()
                        _ = await follow.result
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try await host.tmux.session(named: name) != nil, "the tmux server (and its agent) is gone")
        #expect(await Self.nothingLeft("sshkit-screen", host, t))
        #expect(await Self.nothingLeft("sshkit-pane-dead", host, t))
        try await host.stop(keeper)
    }

    static func killServer(_ host: AgentHost) async {
        await endTmuxServer(host.tmuxSocket, on: host.transport)
    }

    @Test func anAgentStartsInItsDirectoryWithItsArgumentsAndEnvironment() async throws {
        let t = SSHTransport(configuration: Self.server.configuration())
        let host = Self.host(t, socket: Self.socketName())
        defer { Task { await Self.killServer(host); await t.close() } }
        let dir = try await host.absolutePath("~")
        let spec = try Self.spec(binary: "fake-tui", directory: "~", prompt: "fix it", environment: ["FOO": "a b'c"])
        let session = try await host.startAgent(spec)
        #expect(session.survivesDisconnect)
        #expect(session.tmuxName == spec.ptyID.description)
        #expect(session.workingDirectory == dir)
        #expect(session.arguments == ["fake-tui", "fix it"])

        let screen = try await eventually { () async throws -> String? in
            let s = try await host.recentOutput(of: session)
            return s.contains("READY>") ? s : nil
        }
        let text = try #require(screen)
        #expect(text.contains("ARGS: [fix it]"))
        #expect(text.contains("ENV FOO=[a b'c]"))
        #expect(text.contains("CWD \(dir)"))
        #expect(try await host.state(of: session) == .running)
        // the launch script removed itself (it held the environment)
        #expect(try await host.transport.listDirectory("~/.cache/sshkit-agents").filter { $0.name.contains(spec.ptyID.description) }.isEmpty)

        // typed without attaching
        try await host.sendLine("hello there", to: session)
        #expect(await eventually { try? await host.recentOutput(of: session).contains("got: hello there") ? true : nil } == true)

        // listed with its PTY id; starting again does not start a second agent
        let listed = try await host.tmux.sessions()
        #expect(listed.map(\.name) == [session.tmuxName])
        #expect(listed.first?.ptyID == spec.ptyID)
        _ = try await host.startAgent(spec)
        #expect(try await host.tmux.sessions().count == 1)
        #expect(try await host.recentOutput(of: session).components(separatedBy: "ARGS:").count == 2)
        #expect(try await host.transport.listDirectory("~/.cache/sshkit-agents").filter { $0.name.contains(spec.ptyID.description) }.isEmpty,
                "the refused second start removed its launch script")

        try await host.stop(session)
        #expect(try await host.state(of: session) == .gone)
        #expect(try await host.tmux.sessions().isEmpty)
        try await host.stop(session)  // stopping twice is fine
    }

    @Test func theExitStatusIsKept() async throws {
        let t = SSHTransport(configuration: Self.server.configuration())
        let host = Self.host(t, socket: Self.socketName())
        defer { Task { await Self.killServer(host); await t.close() } }
        let session = try await host.startAgent(try Self.spec(binary: "fake-exit"))
        let (state, seen) = await Self.end(of: session, on: host)
        let screen = (try? await host.recentOutput(of: session)) ?? ""
        #expect(state == .exited(7), "\(seen) \(screen)")
        #expect(try await host.recentOutput(of: session).contains("exiting with 7"))
        // the session stays (remain-on-exit) so its screen and status can be read
        #expect(try await host.tmux.sessions().map(\.name) == [session.tmuxName])
        try await host.stop(session)
    }

    @Test func aMissingAgentSaysWhichAndHowToInstallIt() async throws {
        let t = SSHTransport(configuration: Self.server.configuration())
        let host = Self.host(t, socket: Self.socketName())
        defer { Task { await Self.killServer(host); await t.close() } }
        let session = try await host.startAgent(try Self.spec("gemini", binary: "no-such-agent-here"))
        let (state, seen) = await Self.end(of: session, on: host)
        #expect(state == .exited(127), "\(seen)")
        let out = try await host.recentOutput(of: session)
        #expect(out.contains("Gemini is not installed on this host ('no-such-agent-here' is not on PATH)"))
        // the command `agents install` runs
        #expect(out.contains(#"Install it with: npm install -g --prefix "$HOME/.local" @google/gemini-cli"#), "\(out)")
        try await host.stop(session)
    }

    @Test func aTypedPromptArrivesOnceTheAgentIsReadyInBracketedPaste() async throws {
        let t = SSHTransport(configuration: Self.server.configuration())
        let host = Self.host(t, socket: Self.socketName())
        defer { Task { await Self.killServer(host); await t.close() } }
        let session = try await host.startAgent(try Self.spec("amp", binary: "fake-tui", prompt: "line one\nline two"))
        #expect(session.arguments == ["fake-tui"])
        let out = await eventually { () async -> String? in
            let s = (try? await host.recentOutput(of: session)) ?? ""
            return s.contains("PASTE-END") ? s : nil
        }
        let text = try #require(out)
        #expect(text.contains("PASTE-START"))
        #expect(text.contains("line one") && text.contains("line two"))
        #expect(!text.contains("ARGS: [line one"))
        try await host.stop(session)
    }

    @Test func aLongPromptIsReadFromAFileInTheWorktree() async throws {
        let t = SSHTransport(configuration: Self.server.configuration())
        let host = Self.host(t, socket: Self.socketName())
        defer { Task { await Self.killServer(host); await t.close() } }
        let dir = "~/long-prompt-\(UInt32.random(in: 0...UInt32.max))"
        try await t.createDirectory(dir)
        let prompt = String(repeating: "do the thing; ", count: 2000)
        let spec = try Self.spec(binary: "fake-tui", directory: dir, prompt: prompt)
        let session = try await host.startAgent(spec)
        let file = "\(dir)/.emdash/prompts/\(spec.ptyID).md"
        #expect(try await t.readTextFile(file) == prompt)
        let out = await eventually { () async -> String? in
            let s = (try? await host.recentOutput(of: session)) ?? ""
            return s.contains("READY>") ? s : nil
        }
        #expect(out?.contains("ARGS: [Read the task description in the file .emdash/prompts/\(spec.ptyID).md") == true,
                "\(out ?? "")")
        try await host.stop(session)
        _ = try await t.runProcess("/bin/rm", "-rf", String(dir.dropFirst(2)))
    }

    @Test func attachTypeDetachAndReattach() async throws {
        let t = SSHTransport(configuration: Self.server.configuration())
        let host = Self.host(t, socket: Self.socketName())
        defer { Task { await Self.killServer(host); await t.close() } }
        let session = try await host.startAgent(try Self.spec(binary: "fake-tui"))
        let terminal = try await host.attach(session, size: SSHTerminalSize(columns: 90, rows: 20))
        #expect(await read(terminal, until: "READY>").contains("READY>"))
        try await terminal.input.write(Array("abc\r".utf8))
        #expect(await read(terminal, until: "got: abc").contains("got: abc"))
        try terminal.resize(to: SSHTerminalSize(columns: 70, rows: 15))
        terminal.cancel()
        // the agent runs on; a new attach redraws its screen
        #expect(try await host.state(of: session) == .running)
        let again = try await host.attach(session)
        #expect(await read(again, until: "got: abc").contains("got: abc"))
        try await again.input.write(Array("second\r".utf8))
        #expect(await read(again, until: "got: second").contains("got: second"))
        again.cancel()
        try await host.stop(session)

        let gone = await #expect(throws: AgentError.self) { _ = try await host.attach(session) }
        #expect(gone?.code == .sessionNotRunning)
    }

    /// The test server's logins have no UTF-8 locale (no `LANG`, as with an sshd without
    /// PAM or `AcceptEnv`), so a `tmux attach` client guessed ASCII and drew line art as
    /// `qqqq` and other characters as `_`. The attach says the terminal is UTF-8 (`-u`).
    @Test func anAttachedScreenKeepsItsLineArtWithoutAUTF8Locale() async throws {
        let t = SSHTransport(configuration: Self.server.configuration())
        let host = Self.host(t, socket: Self.socketName())
        defer { Task { await Self.killServer(host); await t.close() } }
        let locale = try await t.runProcess("/bin/sh", "-c", "echo \"[${LANG:-}${LC_ALL:-}${LC_CTYPE:-}]\"")
        #expect(locale.stdoutString == "[]\n", "the test login has a locale: \(locale.stdoutString)")
        let session = try await host.startAgent(try Self.spec(binary: "fake-tui"))
        let terminal = try await host.attach(session, size: SSHTerminalSize(columns: 90, rows: 20))
        #expect(await read(terminal, until: "READY>").contains("READY>"))
        try await terminal.input.write(Array("box\r".utf8))
        let screen = await read(terminal, until: "END")
        #expect(screen.contains("BOX ┌─┐ ⠿ END"), "\(screen.suffix(300))")
        terminal.cancel()
        try await host.stop(session)
    }

    /// The board's "last activity" read tmux's `session_activity`, which moves only when a
    /// client attaches or types: an agent that printed for an hour, never attached, showed
    /// its start. It is the window's activity now, which follows the output.
    @Test func lastActivityFollowsTheOutputOfAnAgentNobodyAttachedTo() async throws {
        let t = SSHTransport(configuration: Self.server.configuration())
        let host = Self.host(t, socket: Self.socketName())
        defer { Task { await Self.killServer(host); await t.close() } }
        let session = try await host.startAgent(try Self.spec(binary: "fake-ticker"))
        let name = try #require(session.tmuxName)
        try await Task.sleep(for: .milliseconds(2600))
        let seen = try #require(try await host.tmux.session(named: name))
        #expect(seen.lastActivity.timeIntervalSince(seen.created) >= 1.5,
                "created \(seen.created), last activity \(seen.lastActivity)")
        try await host.stop(session)
    }

    /// The first output of an agent, looked for on the host: what was on the screen
    /// before, output to come, a text that never shows (false at the deadline), and
    /// nothing of the wait left running on the host either way.
    @Test func outputIsSeenAsItHappensAndTheWatcherLeavesNothing() async throws {
        let t = SSHTransport(configuration: Self.server.configuration())
        let host = Self.host(t, socket: Self.socketName())
        defer { Task { await Self.killServer(host); await t.close() } }
        let session = try await host.startAgent(try Self.spec(binary: "fake-ticker"))
        #expect(try await host.waitForOutput(of: session, containing: "tick 1", timeout: .seconds(20)))
        // printed later, while the client watches
        #expect(try await host.waitForOutput(of: session, containing: "tick 25", timeout: .seconds(20)))
        #expect(try await host.recentOutput(of: session, lines: 100).contains("tick 25"))
        let start = ContinuousClock.now
        #expect(try await !host.waitForOutput(of: session, containing: "never printed", timeout: .milliseconds(700)))
        #expect(ContinuousClock.now - start < .seconds(10), "the deadline holds")
        let clients = await eventually { () async -> String? in
            let r = try? await t.runProcess("tmux", "-L", host.tmuxSocket, "list-clients")
            return r?.stdoutString.isEmpty == true ? "" : nil
        }
        #expect(clients != nil, "a control-mode client was left attached")
        // a session that is not there: false, at once
        // an agent that prints once, at once, watched from right after its start: the screen
        // is asked only once the client is attached, so the line is never lost between them
        for _ in 0..<15 {
            let once = try await host.startAgent(try Self.spec(binary: "fake-tui"))
            #expect(try await host.waitForOutput(of: once, containing: "READY>", timeout: .seconds(20)))
            try await host.stop(once)
        }
        // an agent that ends without printing the text: false once it ended, not at the deadline
        let ending = try await host.startAgent(try Self.spec(binary: "fake-exit"))
        let waited = ContinuousClock.now
        #expect(try await !host.waitForOutput(of: ending, containing: "never printed", timeout: .seconds(60)))
        #expect(ContinuousClock.now - waited < .seconds(30), "the wait ended with the agent")
        try await host.stop(ending)
        // text drawn with an escape sequence inside it: found on the screen
        let drawn = try await host.startAgent(try Self.spec(binary: "fake-drawn"))
        #expect(try await host.waitForOutput(of: drawn, containing: "ready now", timeout: .seconds(20)))
        try await host.stop(drawn)
        let gone = try await host.startAgent(try Self.spec(binary: "fake-ticker"))
        try await host.stop(gone)
        let asked = ContinuousClock.now
        #expect(try await !host.waitForOutput(of: gone, containing: "x", timeout: .seconds(20)))
        #expect(ContinuousClock.now - asked < .seconds(15), "a missing session is no wait")
        #expect(await Self.nothingLeft("sshkit-pane-dead", host, t), "a wait's loop was left running on the host")
        try await host.stop(session)
    }

    /// Following a screen: the screen as it is at once, then each change (the ticks in
    /// order, each screen newer than the one before), no resize of the agent's window, an
    /// agent that prints without a pause costing at most a screen per spacing, the end of
    /// the session ending the follow, a missing session an error at once, and nothing of
    /// it left running on the host.
    @Test func aScreenIsFollowedAsItChangesAndTheFollowerLeavesNothing() async throws {
        let t = SSHTransport(configuration: Self.server.configuration())
        let host = Self.host(t, socket: Self.socketName())
        defer { Task { await Self.killServer(host); await t.close() } }
        let session = try await host.startAgent(try Self.spec(binary: "fake-ticker"))
        let name = try #require(session.tmuxName)
        let size = { () async throws -> String in
            try await t.runProcess("tmux", "-L", host.tmuxSocket, "display-message", "-p", "-t", "=\(name):",
                                   "#{window_width}x#{window_height}").stdoutString
        }
        let before = try await size()
        let screens = Mutex<[String]>([])
        let follower = Task {
            try await host.followScreen(of: session) { text in screens.withLock { $0.append(text) } }
        }
        let seen = await eventually { screens.withLock { $0.last?.contains("tick 30") == true ? $0 : nil } }
        let got = try #require(seen, "\(screens.withLock { $0.last ?? "no screen" })")
        #expect(got.count >= 5, "\(got.count) screens for 30 ticks")
        // each screen's last tick is at least the one before's
        let lastTick = { (s: String) -> Int in
            s.split(separator: "\n").compactMap { $0.hasPrefix("tick ") ? Int($0.dropFirst(5)) : nil }.max() ?? 0
        }
        #expect(zip(got, got.dropFirst()).allSatisfy { lastTick($0) <= lastTick($1) })
        #expect(try await size() == before, "the follower resized the window")
        follower.cancel()
        #expect(await Self.nothingLeft("sshkit-screen", host, t), "the follow's loop was left running on the host")
        try await host.stop(session)

        // without a pause: a screen per spacing at most
        let flood = try await host.startAgent(try Self.spec(binary: "fake-flood"))
        let count = Mutex(0)
        let start = ContinuousClock.now
        let flooded = Task {
            try await host.tmux.followScreen(of: try #require(flood.tmuxName), spacing: .milliseconds(100)) { _ in
                count.withLock { $0 += 1 }
            }
        }
        try await Task.sleep(for: .seconds(2))
        flooded.cancel()
        let elapsed = ContinuousClock.now - start
        let n = count.withLock { $0 }
        #expect(n >= 2 && Double(n) <= elapsed / .milliseconds(100) + 3, "\(n) screens in \(elapsed)")
        try await host.stop(flood)

        // the session ends while followed: the follow ends, without an error
        let ending = try await host.startAgent(try Self.spec(binary: "fake-tui"))
        let outcome = Mutex<String?>(nil)
        let shown = Mutex(false)
        let ended = Task {
            do {
                try await host.followScreen(of: ending) { text in if text.contains("READY>") { shown.withLock { $0 = true } } }
                outcome.withLock { $0 = "ended" }
            } catch {
                outcome.withLock { $0 = "failed: \(error)" }
            }
        }
        #expect(await eventually { shown.withLock { $0 } ? true : nil } == true, "the follow showed no screen")
        try await host.stop(ending)
        #expect(await eventually { outcome.withLock { $0 } } == "ended", "the follow outlived its session, or failed")
        ended.cancel()

        // a session that is not there
        await #expect(throws: AgentError.self) { try await host.followScreen(of: ending) { _ in } }
    }

    /// A screen followed at a size (the cockpit's preview): the agent is laid out at that
    /// size while followed, and given back its own after, with its window sized by the
    /// next client that attaches again; while someone is attached, their terminal drives
    /// the size and the follow leaves the window as it is.
    @Test func aScreenFollowedAtASizeLaysTheAgentOutAtItAndGivesItBack() async throws {
        let t = SSHTransport(configuration: Self.server.configuration())
        let host = Self.host(t, socket: Self.socketName())
        defer { Task { await Self.killServer(host); await t.close() } }
        let session = try await host.startAgent(try Self.spec(binary: "fake-tui"))
        let name = try #require(session.tmuxName)
        let windowNow = { () async throws -> String in
            try await t.runProcess("tmux", "-L", host.tmuxSocket, "display-message", "-p", "-t", "=\(name):",
                                   "#{window_width}x#{window_height} #{window-size}").stdoutString
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        // the window once it is `want` (a prefix), else the last seen
        func window(becomes want: String) async -> String {
            let last = Mutex("")
            return await eventually { () async -> String? in
                let w = (try? await windowNow()) ?? ""
                last.withLock { $0 = w }
                return w.hasPrefix(want) ? w : nil
            } ?? last.withLock { $0 }
        }
        let before = try await windowNow()
        #expect(before.hasPrefix("100x30 "), "\(before)")
        let screens = Mutex<[String]>([])
        var follower = Task {
            try await host.followScreen(of: session, size: SSHTerminalSize(columns: 64, rows: 20)) { text in
                screens.withLock { $0.append(text) }
            }
        }
        let previewed = await window(becomes: "64x20 ")
        #expect(previewed.hasPrefix("64x20 "), "laid out at the preview's size: \(previewed)")
        // what it draws comes at that size
        try await host.sendLine("hello", to: session)
        let shown = await eventually { screens.withLock { $0.last?.contains("got: hello") == true ? $0.last : nil } }
        #expect(shown.map { $0.split(separator: "\n", omittingEmptySubsequences: false).count <= 20 } == true, "\(shown ?? "")")
        // tmux itself tells: a client on the host, read-only and ignoring its size
        let clients = { () async throws -> String in
            try await t.runProcess("tmux", "-L", host.tmuxSocket, "list-clients", "-F", "#{client_session} #{client_flags}")
                .stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let following = try await clients()
        #expect(following.hasPrefix(name + " ") && following.contains("ignore-size") && following.contains("read-only"),
                "\(following)")
        // the screen kept here is the pane's: line art and braille too
        try await host.sendLine("box", to: session)
        let boxed = await eventually { screens.withLock { $0.last?.contains("END") == true ? $0.last : nil } }
        let pane = try await t.runProcess("tmux", "-L", host.tmuxSocket, "capture-pane", "-p", "-t", "=\(name):").stdoutString
        let trimmed = { (text: String) -> [String] in
            var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map {
                String($0.reversed().drop { $0 == " " }.reversed())
            }
            while lines.last?.isEmpty == true { lines.removeLast() }
            return lines
        }
        let kept = ANSIText.lines(boxed ?? "").map { $0.map(\.text).joined() }
        #expect(trimmed(kept.joined(separator: "\n")) == trimmed(pane), "kept:\n\(kept.joined(separator: "\n"))\npane:\n\(pane)")
        #expect(kept.contains { $0.contains("BOX ┌─┐ ⠿ END") })
        follower.cancel()
        let back = await window(becomes: before)
        #expect(back == before, "given back its own size, window-size unset: \(back)")
        #expect(await Self.nothingLeft("sshkit-screen", host, t), "the follow's loop was left running on the host")
        #expect(await eventually { (try? await clients())?.isEmpty == true ? true : nil } == true, "the follower's client was left")

        // someone attached at 90 columns: the follow leaves the window to them
        let attached = try await host.attach(session, size: SSHTerminalSize(columns: 90, rows: 25))
        let sized = await window(becomes: "90x")
        #expect(sized.hasPrefix("90x"), "the attached client sizes the window: \(sized)")
        follower = Task { try await host.followScreen(of: session, size: SSHTerminalSize(columns: 64, rows: 20)) { _ in } }
        try await Task.sleep(for: .seconds(1))
        let whileAttached = try await windowNow()
        #expect(whileAttached.hasPrefix("90x"), "the follow resized a window someone is attached to: \(whileAttached)")
        follower.cancel()
        #expect(await Self.nothingLeft("sshkit-screen", host, t))
        #expect(try await windowNow() == whileAttached)
        attached.cancel()
        try await host.stop(session)
    }

    @Test func anAgentKeepsRunningThroughADroppedConnection() async throws {
        let t = SSHTransport(configuration: Self.server.configuration())
        let host = Self.host(t, socket: Self.socketName())
        defer { Task { await Self.killServer(host); await t.close() } }
        let session = try await host.startAgent(try Self.spec(binary: "fake-ticker"))
        let terminal = try await host.attach(session)
        let before = await read(terminal, until: "tick 5")
        #expect(before.contains("tick 5"))

        // the server side of the connection dies: sshd's processes for it and what they
        // run (the tmux client); the tmux server is not below them (it daemonized)
        for pid in Self.server.sessionProcessTree() { kill(pid, SIGKILL) }
        let ended = await finishes(within: .seconds(20)) {
            for await _ in terminal.output {}
        }
        #expect(ended != nil, "the attached output did not end when the connection dropped")
        try await Task.sleep(for: .seconds(1))

        // reconnect (the transport does it on the next call), the agent is still there,
        // and what it printed meanwhile is in its history
        #expect(try await host.state(of: session) == .running)
        #expect(await t.connectionsMade == 2)
        let history = try await host.recentOutput(of: session)
        let ticks = history.components(separatedBy: "\n").compactMap { line -> Int? in
            line.hasPrefix("tick ") ? Int(line.dropFirst(5).trimmingCharacters(in: .whitespaces)) : nil
        }
        #expect((ticks.max() ?? 0) >= 15, "ticks seen: \(ticks.suffix(5))")
        #expect(ticks == Array(1...(ticks.max() ?? 0)), "the history has every tick, in order")
        let back = try await host.attach(session)
        #expect(await read(back, until: "tick").contains("tick"))
        back.cancel()
        try await host.stop(session)
    }

    @Test func anotherProgramSeesTheSessionsAsOrphans() async throws {
        let socket = Self.socketName()
        let t1 = SSHTransport(configuration: Self.server.configuration())
        let first = Self.host(t1, socket: socket)
        let s1 = try await first.startAgent(try Self.spec(binary: "fake-tui", suffix: "orphan-1"))
        let s2 = try await first.startAgent(try Self.spec("codex", binary: "fake-tui", suffix: "orphan-2"))
        await t1.close()

        let t2 = SSHTransport(configuration: Self.server.configuration())
        let second = Self.host(t2, socket: socket)
        defer { Task { await Self.killServer(second); await t2.close() } }
        let found = try await second.tmux.sessions()
        #expect(Set(found.compactMap(\.ptyID)) == [s1.ptyID, s2.ptyID])
        for s in found { try await second.tmux.stop(s.name) }
        #expect(try await second.tmux.sessions().isEmpty)
        // the user's own tmux server (default socket) is never listed or touched
        let other = try await second.transport.runProcess("tmux", "-L", "default", "has-session", "-t", "=orphan-1")
        #expect(other.exitStatus != .exited(0))
    }

    @Test func badIDsAndEnvironmentNamesFailBeforeAnythingRuns() async throws {
        let t = SSHTransport(configuration: Self.server.configuration())
        defer { Task { await t.close() } }
        let host = Self.host(t, socket: Self.socketName())
        var spec = try Self.spec(binary: "fake-tui", suffix: "bad;id")
        let e1 = await #expect(throws: AgentError.self) { _ = try await host.startAgent(spec) }
        #expect(e1?.code == .invalidArgument)
        spec = try Self.spec(binary: "fake-tui", environment: ["BAD-NAME": "x"])
        let e2 = await #expect(throws: AgentError.self) { _ = try await host.startAgent(spec) }
        #expect(e2?.code == .invalidEnvironmentName)
        #expect(await t.connectionsMade == 0, "nothing was sent to the host")
    }
}
