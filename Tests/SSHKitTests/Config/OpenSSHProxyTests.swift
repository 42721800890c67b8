import Foundation
import SSHKit
import Testing

/// ProxyCommand and ProxyJump from ssh_config, against the test server (which is also
/// its own jump host: its sshd allows direct-tcpip to itself).
@Suite("OpenSSH setup: ProxyCommand and ProxyJump", .tags(.integration), .serialized)
struct OpenSSHProxyTests {
    static func home(_ extra: String) throws -> OpenSSHHome {
        let h = try OpenSSHHome()
        try h.identity("id_ed25519", as: "id_ed25519")
        try h.write(try h.knownHostsLines(), to: h.ssh + "/known_hosts")
        try h.config("""
            Host *
                StrictHostKeyChecking yes
            Host jump jump2 db a b
                HostName 127.0.0.1
                Port @PORT@
                User @USER@
            \(extra)
            """)
        return h
    }

    /// The pid a proxy command wrote, once it is there.
    static func pid(in file: String) async -> Int32? {
        for _ in 0..<200 {
            if let text = try? String(contentsOfFile: file, encoding: .utf8), let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
                return pid
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    /// Whether the process is gone (reaped) within 5 s.
    static func ends(_ pid: Int32) async -> Bool {
        for _ in 0..<250 {
            if kill(pid, 0) != 0 && errno == ESRCH { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    @Test("ProxyCommand nc %h %p and socat carry the connection", arguments: ["nc %h %p", "socat - TCP:%h:%p"])
    func proxyCommand(_ command: String) async throws {
        let h = try Self.home("Host db\n    ProxyCommand \(command)\n")
        defer { h.remove() }
        let config = try h.openSSH.connectionConfiguration(for: "db")
        #expect(config.proxyCommand == command.replacingOccurrences(of: "%h", with: "127.0.0.1")
            .replacingOccurrences(of: "%p", with: "\(h.server.port)"))
        let payload = randomBytes(1 << 20)
        let echoed = try await SSHClient.withConnection(config) { try await $0.execute("cat", stdin: payload).stdout }
        #expect(echoed == payload)
    }

    @Test("a command that fails is a typed error saying how it ended", arguments: [
        ("false", "exited with status 1"),
        ("nc 127.0.0.1 1", "exited with status 1"),
        ("/nonexistent/proxy", "exited with status 127"),
    ])
    func failingCommand(_ command: String, _ how: String) async throws {
        let h = try Self.home("Host db\n    ProxyCommand \(command)\n")
        defer { h.remove() }
        let config = try h.openSSH.connectionConfiguration(for: "db")
        let e = await expectSSHError { try await SSHClient.connect(config) }
        #expect(e?.code == .proxyCommandFailed)
        #expect(e?.message.contains(how) == true, "\(String(describing: e))")
        #expect(e?.host == "127.0.0.1")
    }

    @Test("a command that never answers: connectTimeout, and the command is stopped; cancel stops it too")
    func silentCommand() async throws {
        let h = try Self.home("Host db\n    ConnectTimeout 1\n    ProxyCommand sh -c 'echo $$ > @HOME@/proxy.pid; exec sleep 60'\n")
        defer { h.remove() }
        let config = try h.openSSH.connectionConfiguration(for: "db")
        let e = await expectSSHError { try await SSHClient.connect(config) }
        #expect(e?.code == .connectTimeout)
        let pid = try #require(await Self.pid(in: h.home + "/proxy.pid"))
        #expect(await Self.ends(pid))

        try FileManager.default.removeItem(atPath: h.home + "/proxy.pid")
        let task = Task { try await SSHClient.connect(config) }
        let second = try #require(await Self.pid(in: h.home + "/proxy.pid"))
        task.cancel()
        let outcome = await task.result
        guard case .failure(let error as SSHError) = outcome else {
            Issue.record("expected cancelled, got \(outcome)")
            return
        }
        #expect(error.code == .cancelled)
        #expect(await Self.ends(second))
    }

    @Test("ProxyJump: the hop is resolved from the file too, and the target reached through it")
    func proxyJump() async throws {
        let h = try Self.home("Host db\n    ProxyJump jump\n")
        defer { h.remove() }
        let config = try h.openSSH.connectionConfiguration(for: "db")
        #expect(config.jumpHosts.count == 1)
        #expect(config.jumpHosts.first?.port == h.server.port)
        let (who, hops) = try await SSHClient.withConnection(config) { conn in
            (try await conn.execute("whoami").stdoutString, conn.jumpConnections.count)
        }
        #expect(who == h.server.user + "\n")
        #expect(hops == 1)
    }

    @Test("ProxyJump chains: the first hop's own ProxyJump comes first; a later hop's is overridden, as ssh -J does")
    func proxyJumpChain() async throws {
        let h = try Self.home("""
            Host jump2
                ProxyJump jump
            Host db
                ProxyJump jump2,b
            Host b
                ProxyCommand false
            """)
        defer { h.remove() }
        let config = try h.openSSH.connectionConfiguration(for: "db")
        #expect(config.jumpHosts.count == 3) // jump, jump2, b
        #expect(config.jumpHosts.allSatisfy { $0.proxyCommand == nil && $0.jumpHosts.isEmpty })
        let hops = try await SSHClient.withConnection(config) { $0.jumpConnections.count }
        #expect(hops == 3)
    }

    @Test("a ProxyJump loop is an error, not a hang")
    func proxyJumpLoop() throws {
        let h = try Self.home("Host a\n    ProxyJump b\nHost b\n    ProxyJump a\n")
        defer { h.remove() }
        #expect(throws: SSHConfigError.self) { try h.openSSH.connectionConfiguration(for: "a") }
    }

    @Test("ProxyJump's first hop may itself use a ProxyCommand")
    func firstHopProxyCommand() async throws {
        let h = try Self.home("Host jump\n    ProxyCommand nc %h %p\nHost db\n    ProxyJump jump\n")
        defer { h.remove() }
        let config = try h.openSSH.connectionConfiguration(for: "db")
        #expect(config.jumpHosts.first?.proxyCommand != nil)
        #expect(config.proxyCommand == nil)
        try await SSHClient.withConnection(config) { _ in }
    }

    @Test("proxyCommand with jumpHosts, or on a later hop, is refused before anything runs")
    func invalidCombinations() async throws {
        var config = TestServer.shared.configuration()
        config.proxyCommand = "nc %h %p"
        config.jumpHosts = [TestServer.shared.configuration()]
        #expect(await expectSSHError { try await SSHClient.connect(config) }?.code == .invalidArgument)
        config.proxyCommand = " "
        config.jumpHosts = []
        #expect(await expectSSHError { try await SSHClient.connect(config) }?.code == .invalidArgument)
    }
}

extension OpenSSHProxyTests {
    /// Tests that count this process's fds, threads, sockets or memory: they run alone,
    /// before the other tests run in parallel (Support/Tiers.swift, scripts/test.sh).
    @Suite("OpenSSH setup: ProxyCommand (alone)", .tags(.exclusive), .serialized)
    struct Exclusive {
        @Test("the command is stopped with the connection, and %r %n are expanded")
        func stoppedWithTheConnection() async throws {
            let h = try OpenSSHProxyTests.home("Host db\n    ProxyCommand sh -c 'echo $$ > @HOME@/proxy.pid; echo %r %n > @HOME@/proxy.args; exec nc %h %p'\n")
            defer { h.remove() }
            let fds = countFDs()
            let conn = try await SSHClient.connect(try h.openSSH.connectionConfiguration(for: "db"))
            let pid = try #require(await OpenSSHProxyTests.pid(in: h.home + "/proxy.pid"))
            #expect(kill(pid, 0) == 0)
            #expect(try String(contentsOfFile: h.home + "/proxy.args", encoding: .utf8) == "\(h.server.user) db\n")
            await conn.close()
            #expect(await OpenSSHProxyTests.ends(pid))
            let settled = await eventually(5) { countFDs() <= fds ? true : nil }
            #expect(settled == true, "fds: \(countFDs()) after, \(fds) before")
        }
    }
}
