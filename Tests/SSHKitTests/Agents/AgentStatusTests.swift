@testable import AgentSessions
import Foundation
import SSHKit
import ServerTransport
import Testing

/// Status from the agents' hooks first, from the screen second (labelled as inferred),
/// from the process when it ended.
@Suite("Agent status", .tags(.integration), .serialized)
struct AgentStatusTests {
    @Test func screenInferenceIsDebounced() {
        var i = AgentScreenInference(quietPeriod: 3)
        let t0 = Date(timeIntervalSince1970: 1000)
        #expect(i.observe(screen: "", at: t0) == nil)
        #expect(i.observe(screen: "  \n", at: t0 + 1) == .starting)
        #expect(i.observe(screen: "building...", at: t0 + 2) == .starting, "one sighting is not enough")
        #expect(i.observe(screen: "building... 40%", at: t0 + 3) == .working)
        #expect(i.observe(screen: "building... 40%", at: t0 + 5) == .working)
        #expect(i.observe(screen: "building... 40%", at: t0 + 7) == .working, "quiet for 4 s: idle is a candidate")
        #expect(i.observe(screen: "building... 40%", at: t0 + 8) == .idle)
        #expect(i.observe(screen: "Edit main.swift?\n(y/n)", at: t0 + 9) == .idle)
        #expect(i.observe(screen: "Edit main.swift?\n(y/n)", at: t0 + 10) == .waitingForInput)
    }

    @Test func hookEventsAndTheirFormats() throws {
        #expect(AgentHookEvent.last(in: "10 start\n12 prompt\n15 notification\n")?.0 == .notification)
        #expect(AgentHookEvent.last(in: "10 start\n12 prompt\ngarbage\n")?.0 == .prompt)
        #expect(AgentHookEvent.last(in: "") == nil)
        let id = AgentPTYID(providerID: "claude", kind: .main, suffix: "t1")
        let json = try JSONSerialization.jsonObject(with: Data(AgentHost.claudeHookSettings(id).utf8)) as? [String: Any]
        let hooks = try #require(json?["hooks"] as? [String: [[String: Any]]])
        #expect(Set(hooks.keys) == ["SessionStart", "UserPromptSubmit", "PreToolUse", "Notification", "Stop"])
        let stop = try #require((hooks["Stop"]?.first?["hooks"] as? [[String: String]])?.first)
        #expect(stop["type"] == "command")
        #expect(stop["command"]?.contains("status/claude-main-t1") == true)
        let codex = AgentHost.codexNotifyOverride(AgentPTYID(providerID: "codex", kind: .main, suffix: "t2"))
        #expect(codex.hasPrefix("notify=[\"sh\", \"-c\", \"mkdir -p \\\"$HOME/"))
        #expect(codex.hasSuffix(" stop\\\\n' \\\"$(date +%s)\\\" >> \\\"$HOME/.cache/sshkit-agents/status/codex-main-t2\\\"\", \"sh\"]"))
    }

    @Test func claudeHooksDriveTheStatus() async throws {
        let t = SSHTransport(configuration: TestServer.shared.configuration())
        let host = AgentHost(transport: t, tmuxSocket: "sshkit-status-\(UInt32.random(in: 0...UInt32.max))",
                             extraSearchPath: [FakeAgents.directory])
        defer { Task { _ = try? await t.runProcess("tmux", "-L", host.tmuxSocket, "kill-server"); await t.close() } }
        let id = AgentPTYID(providerID: "claude", kind: .main, suffix: "hooked-\(UInt32.random(in: 0...UInt32.max))")
        let session = try await host.startAgent(AgentSessionSpec(
            ptyID: id, provider: try AgentProvider.named("claude"), settings: AgentProviderSettings(binary: "fake-hooked"),
            workingDirectory: "/tmp"))
        #expect(session.arguments.contains("--settings"))
        var inference = AgentScreenInference()
        func awaitStatus(_ want: AgentActivity) async -> AgentStatus? {
            await eventually { () async -> AgentStatus? in
                let s = await host.status(of: session, inference: &inference)
                return s.activity == want ? s : nil
            }
        }
        let started = await awaitStatus(.idle)
        #expect(started?.source == .hook)
        try await host.sendLine("work", to: session)
        #expect(await awaitStatus(.working)?.source == .hook)
        try await host.sendLine("ask", to: session)
        let asking = await awaitStatus(.waitingForInput)
        #expect(asking?.source == .hook && asking?.isInferred == false)
        try await host.sendLine("done", to: session)
        #expect(await awaitStatus(.idle)?.source == .hook)
        try await host.sendLine("quit", to: session)
        #expect(await awaitStatus(.exited(3))?.source == .process)
        try await host.stop(session)
        #expect(await host.status(of: session, inference: &inference).activity == .lost)
    }

    @Test func withoutHooksTheStatusIsInferredFromTheScreen() async throws {
        let t = SSHTransport(configuration: TestServer.shared.configuration())
        let host = AgentHost(transport: t, tmuxSocket: "sshkit-status-\(UInt32.random(in: 0...UInt32.max))",
                             extraSearchPath: [FakeAgents.directory])
        defer { Task { _ = try? await t.runProcess("tmux", "-L", host.tmuxSocket, "kill-server"); await t.close() } }
        let id = AgentPTYID(providerID: "amp", kind: .main, suffix: "screen-\(UInt32.random(in: 0...UInt32.max))")
        let session = try await host.startAgent(AgentSessionSpec(
            ptyID: id, provider: try AgentProvider.named("amp"), settings: AgentProviderSettings(binary: "fake-tui"),
            workingDirectory: "/tmp"))
        #expect(session.arguments == ["fake-tui"], "amp has no hooks")
        var inference = AgentScreenInference(quietPeriod: 1)
        let idle = await eventually { () async -> AgentStatus? in
            let s = await host.status(of: session, inference: &inference)
            return s.activity == .idle ? s : nil
        }
        #expect(idle?.source == .screen && idle?.isInferred == true)
        try await host.sendLine("Shall I go on? (y/n)", to: session)
        let asking = await eventually { () async -> AgentStatus? in
            let s = await host.status(of: session, inference: &inference)
            return s.activity == .waitingForInput ? s : nil
        }
        #expect(asking?.isInferred == true)

        // the stream form ends with the process's own word
        var seen: [AgentActivity] = []
        let updates = host.statusUpdates(of: session, interval: .milliseconds(200))
        try await host.sendLine("exit 4", to: session)
        let done = await finishes(within: .seconds(20)) {
            var all: [AgentActivity] = []
            for await s in updates { all.append(s.activity) }
            return all
        }
        seen = (try? done?.get()) ?? []
        #expect(seen.last == .exited(4), "\(seen)")
        try await host.stop(session)
    }
}

/// The SQL literal of the Codex thread lookup: a quote followed by a combining mark (one
/// Swift Character) is doubled too, so a working directory cannot end the literal.
@Suite("Agent SQL literals", .tags(.pure))
struct AgentSQLLiteralTests {
    @Test(arguments: ["plain", "it's", "'\u{301} OR 1=1 --", "a''b'", "ü'\u{20DD}x"])
    func literalsRoundTripThroughSQLite(_ s: String) throws {
        let out = try TestServer.run("/usr/bin/sqlite3", [":memory:", "SELECT \(SQL.string(s)) || '|';"])
        #expect(Array(out.utf8) == Array((s + "|\n").utf8))
    }
}

/// tmux control mode's output read for a text, without a host.
@Suite("Control-mode scanner", .tags(.pure))
struct ControlModeScannerTests {
    static func feed(_ needle: String, _ chunks: [String]) -> Bool? {
        var s = ControlModeScanner(needle: Array(needle.utf8))
        for c in chunks { if let v = s.feed(Array(c.utf8)) { return v } }
        return nil
    }

    @Test func textIsFoundInRepliesAndAcrossNotificationsAndChunks() {
        // in the reply to capture-pane
        #expect(Self.feed("READY", ["%begin 1 2 1\n", "  READY>\n", "%end 1 2 1\n"]) == true)
        // split over two notifications, and a notification split over two reads
        #expect(Self.feed("AGENT-READY", ["%output %0 AGENT-", "\n%out", "put %0 READY\\015\\012\n"]) == true)
        // escapes undone: a backslash and a newline in the text
        #expect(Self.feed("a\\b\nc", ["%output %1 a\\134b\\012c\n"]) == true)
        // text in another notification or in a reply's framing is not the pane's output
        #expect(Self.feed("READY", ["%session-changed $0 READY\n"]) == nil)
        #expect(Self.feed("x", ["%begin 1 2 1\n", "%end 1 2 1\n", "%exit\n"]) == false)
        #expect(Self.feed("y", ["%output %0 x\n"]) == nil)
        // the pane's program ended, as the periodic look reports it
        #expect(Self.feed("y", ["%begin 1 3 1\n", "\(ControlModeScanner.deadMark)0\n", "%end 1 3 1\n"]) == nil)
        #expect(Self.feed("y", ["%begin 1 3 1\n", "\(ControlModeScanner.deadMark)1\n", "%end 1 3 1\n"]) == false)
        var s = ControlModeScanner(needle: Array("z".utf8))
        _ = s.feed(Array("%begin 1 2 0\n%end 1 2 0\n".utf8))
        #expect(!s.isAttached, "attached only once tmux says so")
        _ = s.feed(Array("%session-changed $0 claude-main-x\n".utf8))
        #expect(s.isAttached)
    }
}
