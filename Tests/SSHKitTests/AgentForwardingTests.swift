import Foundation
import SSHKit
import Testing

/// Agent forwarding (`ssh -A`) end to end: a real ssh-agent here holding the test key,
/// `ssh-add -l` on the server through the forwarded agent, and OpenSSH's `ssh` on the
/// server logging in to a second hop with it.
@Suite("Agent forwarding", .tags(.integration), .serialized)
struct AgentForwardingTests {
    final class Agent {
        let dir: String
        let socket: String
        let daemon: Daemon

        init() throws {
            dir = try TestPaths.makeTemporaryDirectory("agent")
            socket = dir + "/agent.sock"
            daemon = try Daemon.spawn("/usr/bin/ssh-agent", ["-D", "-a", socket], log: dir + "/agent.log")
            for _ in 0..<200 where !FileManager.default.fileExists(atPath: socket) { usleep(10_000) }
            _ = try TestServer.run("/usr/bin/ssh-add", ["-q", TestServer.shared.key("id_ed25519")], env: ["SSH_AUTH_SOCK": socket])
        }

        func stop() {
            daemon.stop()
            try? FileManager.default.removeItem(atPath: dir)
        }
    }

    static func fingerprint() throws -> String {
        let line = try TestServer.run("/usr/bin/ssh-keygen", ["-lf", TestServer.shared.key("id_ed25519.pub")])
        return String(line.split(separator: " ")[1])
    }

    @Test("ssh-add -l on the server lists the local agent's key; without forwarding there is no agent")
    func listsKeys() async throws {
        let agent = try Agent()
        defer { agent.stop() }
        let server = TestServer.shared
        var config = server.configuration()
        config.agentForwarding = agent.socket
        let listed = try await SSHClient.withConnection(config) { try await $0.execute("ssh-add -l") }
        #expect(listed.exitStatus == .exited(0), "\(listed.stderrString)")
        #expect(listed.stdoutString.contains(try Self.fingerprint()))

        let plain = try await SSHClient.withConnection(server.configuration()) { try await $0.execute("ssh-add -l") }
        #expect(plain.exitStatus == .exited(2), "no agent: ssh-add exits 2")
    }

    @Test("an agent that is gone: the server's ssh-add fails, the connection goes on")
    func agentGone() async throws {
        let server = TestServer.shared
        var config = server.configuration()
        config.agentForwarding = "/nonexistent/agent.sock"
        try await SSHClient.withConnection(config) { conn in
            let listed = try await conn.execute("ssh-add -l")
            #expect(listed.exitStatus != .exited(0))
            #expect(try await conn.execute("echo still-here").stdoutString == "still-here\n")
        }
    }

    @Test("an agentForwarding that is no socket path is refused before connecting",
          arguments: ["", String(repeating: "a", count: 108)])
    func invalidSocketPath(_ path: String) async {
        var config = TestServer.shared.configuration()
        config.agentForwarding = path
        let e = await expectSSHError { try await SSHClient.connect(config) }
        #expect(e?.code == .invalidArgument)
    }

    @Test("ForwardAgent in ssh_config: yes forwards SSH_AUTH_SOCK's agent, a path forwards that one")
    func fromOpenSSHConfig() async throws {
        let agent = try Agent()
        defer { agent.stop() }
        var h = try OpenSSHHome()
        defer { h.remove() }
        h.environment = ["SSH_AUTH_SOCK": agent.socket]
        try h.identity("id_ed25519", as: "id_ed25519")
        try h.write(try h.knownHostsLines(), to: h.ssh + "/known_hosts")
        try h.config("Host db\n  HostName 127.0.0.1\n  Port @PORT@\n  User @USER@\n  StrictHostKeyChecking yes\n  ForwardAgent yes\n")
        let config = try h.openSSH.connectionConfiguration(for: "db")
        #expect(config.agentForwarding == agent.socket)
        let listed = try await SSHClient.withConnection(config) { try await $0.execute("ssh-add -l").stdoutString }
        #expect(listed.contains(try Self.fingerprint()))
        try h.config("Host db\n  HostName 127.0.0.1\n  ForwardAgent /elsewhere/agent.sock\n")
        #expect(try h.openSSH.connectionConfiguration(for: "db").agentForwarding == "/elsewhere/agent.sock")
        try h.config("Host db\n  HostName 127.0.0.1\n")
        #expect(try h.openSSH.connectionConfiguration(for: "db").agentForwarding == nil, "off unless asked for")
    }
}

extension AgentForwardingTests {
    /// Tests that count this process's fds, threads, sockets or memory: they run alone,
    /// before the other tests run in parallel (Support/Tiers.swift, scripts/test.sh).
    @Suite("Agent forwarding (alone)", .tags(.exclusive), .serialized)
    struct Exclusive {
        @Test("a second hop authenticates with the forwarded agent, and several agent channels run at once")
        func secondHop() async throws {
            let agent = try Agent()
            defer { agent.stop() }
            let server = TestServer.shared
            var config = server.configuration()
            config.agentForwarding = agent.socket
            let hop = "ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "
                + "-o IdentitiesOnly=no -p \(server.port) \(server.user)@127.0.0.1 echo second-hop"
            let sockets = countSockets()
            try await SSHClient.withConnection(config) { conn in
                let result = try await conn.execute(hop)
                #expect(result.stdoutString == "second-hop\n", "\(result.stderrString)")
                try await withThrowingTaskGroup(of: SSHCommandResult.self) { group in
                    for _ in 0..<8 { group.addTask { try await conn.execute("ssh-add -l") } }
                    for try await r in group { #expect(r.exitStatus == .exited(0), "\(r.stderrString)") }
                }
            }
            #expect(await socketsSettle(atMost: sockets), "agent sockets closed with their channels")
        }
    }
}
