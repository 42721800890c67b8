import AgentSessions
import Foundation
import SSHKit
import ServerTransport
import Testing

/// A real coding agent, not a fake: Hermes (PyPI's `hermes-agent`, installed by
/// scripts/install-deps.sh into /opt/sshkit-hermes). Without an API key it starts to a
/// setup question; the test drives it through start, attach, answer, a menu, detach,
/// reattach and stop, over the fixture's sshd.
@Suite("Hermes agent", .tags(.integration), .serialized)
struct HermesAgentTests {
    static let bin = "/opt/sshkit-hermes/bin"

    /// Waits until the agent's screen (tmux's rendering, not the raw stream) shows `text`.
    static func screen(_ host: AgentHost, _ session: AgentSession, shows text: String) async -> String? {
        await eventually(60) { () async -> String? in
            let s = (try? await host.recentOutput(of: session, lines: 60)) ?? ""
            return s.contains(text) ? s : nil
        }
    }

    @Test func hermesStartsAnswersItsSetupQuestionAndSurvivesADetach() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.bin + "/hermes"),
                     "Hermes is not installed: run scripts/install-deps.sh")
        let t = SSHTransport(configuration: TestServer.shared.configuration())
        let host = AgentHost(transport: t, tmuxSocket: "sshkit-hermes-\(UInt32.random(in: 0...UInt32.max))",
                             extraSearchPath: [Self.bin])
        // a host where Hermes was never set up
        _ = try await t.runProcess("/bin/rm", "-rf", ".hermes")
        defer {
            Task {
                _ = try? await t.runProcess("tmux", "-L", host.tmuxSocket, "kill-server")
                _ = try? await t.runProcess("/bin/rm", "-rf", ".hermes")
                await t.close()
            }
        }

        let detected = try await host.detectAgents()
        #expect(detected.installed["hermes"] == Self.bin + "/hermes")

        let spec = AgentSessionSpec(ptyID: AgentPTYID(providerID: "hermes", kind: .main, suffix: "real\(UInt32.random(in: 0...UInt32.max))"),
                                    provider: try AgentProvider.named("hermes"), workingDirectory: "/tmp",
                                    size: SSHTerminalSize(columns: 120, rows: 40), statusHooks: false)
        let session = try await host.startAgent(spec)
        #expect(session.arguments == ["hermes"])
        let question = await Self.screen(host, session, shows: "Run setup now? [Y/n]")
        #expect(question?.contains("isn't configured yet") == true, "\(question ?? "no question on the screen")")

        // attach: the screen comes through the PTY, the answer goes back
        let terminal = try await host.attach(session, size: SSHTerminalSize(columns: 120, rows: 40))
        #expect(await read(terminal, until: "Run setup now?").contains("Run setup now?"))
        try await terminal.input.write(Array("y\r".utf8))
        #expect(await Self.screen(host, session, shows: "How would you like to set up Hermes?") != nil)
        #expect(await Self.screen(host, session, shows: "→ (●) Quick Setup") != nil)
        // the arrow key moves its menu
        try await terminal.input.write([0x1B, 0x5B, 0x42])
        #expect(await Self.screen(host, session, shows: "→ (○) Full setup") != nil)

        // detach: Hermes waits on, unchanged; reattach redraws it
        terminal.cancel()
        try await Task.sleep(for: .milliseconds(500))
        #expect(try await host.state(of: session) == .running)
        let again = try await host.attach(session, size: SSHTerminalSize(columns: 100, rows: 30))
        #expect(await read(again, until: "Full setup").contains("Full setup"))
        again.cancel()

        // stop: the session and Hermes are gone
        try await host.stop(session)
        #expect(try await host.state(of: session) == .gone)
        // ([h]: the pattern does not match the shell that runs pgrep)
        let left = await eventually { () async -> String? in
            let r = try? await t.runProcess("/bin/sh", arguments: ["-c", "pgrep -u \"$(id -u)\" -f 'sshkit-hermes/bin/[h]ermes' || true"],
                                            stdin: [], environment: [:], timeout: .seconds(20))
            return r?.stdoutString.isEmpty == true ? "" : nil
        }
        #expect(left != nil, "no Hermes process is left")
    }
}
