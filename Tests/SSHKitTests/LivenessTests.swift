import Foundation
import SSHKit
import Testing

/// Dead-peer detection against real servers: a frozen sshd (SIGSTOP; its kernel still
/// ACKs) and a silent partition (iptables DROP inside a network namespace the test makes).
/// The detection bound checked is the one SSHKeepalive promises:
/// interval × maxMissed + 1 s after the peer went silent.
@Suite("Liveness", .tags(.integration), .serialized)
struct LivenessTests {
    static let keepalive = SSHKeepalive(interval: .seconds(1), maxMissed: 2)
    static var bound: Double { 1.0 * Double(keepalive.maxMissed) + 1.0 }

    func configuration(_ server: TestServer, keepalive: SSHKeepalive? = Self.keepalive) -> SSHConfiguration {
        var config = server.configuration()
        config.keepalive = keepalive
        return config
    }

    /// Waits for `task` to fail and returns the error and the seconds it took.
    func failure(of task: Task<SSHCommandResult, any Error>) async -> (SSHError?, Double) {
        await measure { await expectSSHError { try await task.value } }
    }

    /// Starts two silent commands, lets `silence` make the server mute, and checks that the
    /// connection and both commands fail with `.connectionLost` within the bound.
    func expectDetection(_ conn: SSHConnection, what: String, silence: () throws -> Void) async throws {
        let first = Task { try await conn.execute("sleep 60") }
        let second = Task { try await conn.execute("sleep 61") }
        try await Task.sleep(for: .milliseconds(500))
        #expect(conn.isConnected)
        try silence()
        let (e, seconds) = await failure(of: first)
        print("liveness: \(what) detected after \(String(format: "%.2f", seconds)) s "
              + "(interval 1 s, maxMissed 2, bound \(Self.bound) s)")
        #expect(e?.code == .connectionLost, "\(String(describing: e))")
        #expect(e?.message.contains("keepalive") == true, "\(String(describing: e))")
        #expect(seconds <= Self.bound, "detection took \(seconds) s")
        // not an instant failure from something else: at least one interval of silence passed
        #expect(seconds >= 1.0, "detected after only \(seconds) s")
        let (e2, more) = await failure(of: second)
        #expect(e2?.code == .connectionLost, "\(String(describing: e2))")
        #expect(more < 0.5, "the second command failed \(more) s after the first")
        #expect(!conn.isConnected)
        let e3 = await expectSSHError { try await conn.execute("true") }
        #expect(e3?.code == .connectionLost, "\(String(describing: e3))")
        await conn.close()
    }

    @Test func aFrozenServerIsDetectedAndEveryOperationFails() async throws {
        let server = try TestServer.start(name: "frozen")
        defer { server.stop() }
        let conn = try await SSHClient.connect(configuration(server))
        var frozen: [Int32] = []
        defer {
            for p in frozen { kill(p, SIGCONT) }
        }
        try await expectDetection(conn, what: "frozen server (SIGSTOP)") {
            frozen = server.sessionProcessTree()
            #expect(!frozen.isEmpty, "no session process found")
            for p in frozen { kill(p, SIGSTOP) }
        }
    }

    @Test func aSilentPartitionIsDetectedAndEveryOperationFails() async throws {
        let ns = try NetworkNamespace.create()
        defer { ns.destroy() }
        let server = try TestServer.start(name: "partition", namespace: ns)
        defer { server.stop() }
        let conn = try await SSHClient.connect(configuration(server))
        try await expectDetection(conn, what: "silent partition (iptables DROP)") {
            try ns.iptables(["-A", "INPUT", "-j", "DROP"])
            try ns.iptables(["-A", "OUTPUT", "-j", "DROP"])
        }
    }

    @Test(arguments: ["sshd", "dropbear"])
    func anIdleHealthyConnectionIsNeverDropped(_ kind: String) async throws {
        let server = kind == "sshd" ? TestServer.shared : try TestServer.startDropbear(name: "idle-dropbear")
        defer { if kind != "sshd" { server.stop() } }
        // Two probes may go unanswered for 625 ms in all: a server that did not answer
        // them would be dropped long before the 3 s of idleness end.
        let conn = try await SSHClient.connect(
            configuration(server, keepalive: SSHKeepalive(interval: .milliseconds(250), maxMissed: 2)))
        let quiet = Task { try await conn.execute("sleep 2; echo done") }
        try await Task.sleep(for: .seconds(3))
        #expect(conn.isConnected)
        #expect(try await quiet.value.stdoutString == "done\n")
        #expect(try await conn.execute("echo still").stdoutString == "still\n")
        await conn.close()
    }

    @Test func withoutKeepaliveTCPUserTimeoutCatchesAPartitionWithDataInFlight() async throws {
        let ns = try NetworkNamespace.create()
        defer { ns.destroy() }
        let server = try TestServer.start(name: "usertimeout", namespace: ns)
        defer { server.stop() }
        var config = configuration(server, keepalive: nil)
        config.socketTimeout = .seconds(2)
        let conn = try await SSHClient.connect(config)
        try ns.iptables(["-A", "INPUT", "-j", "DROP"])
        try ns.iptables(["-A", "OUTPUT", "-j", "DROP"])
        // the channel open stays unacknowledged; the kernel gives up after TCP_USER_TIMEOUT
        let (e, seconds) = await measure { await expectSSHError { try await conn.execute("true") } }
        print("liveness: TCP_USER_TIMEOUT 2 s ended the connection after \(String(format: "%.2f", seconds)) s")
        #expect(e?.code == .connectionLost, "\(String(describing: e))")
        #expect(seconds < 15, "took \(seconds) s")
        await conn.close()
    }

    @Test func aHostUnreachableReplyIsTyped() async throws {
        let ns = try NetworkNamespace.create()
        defer { ns.destroy() }
        try ns.iptables(["-A", "INPUT", "-p", "tcp", "-j", "REJECT", "--reject-with", "icmp-host-unreachable"])
        var config = TestServer.shared.configuration()
        config.host = ns.address
        let e = await expectSSHError { try await SSHClient.connect(config) }
        #expect(e?.code == .hostUnreachable, "\(String(describing: e))")
        #expect(e?.host == ns.address)
    }

    @Test func keepaliveSettingsAreValidated() async throws {
        for bad in [SSHKeepalive(interval: .milliseconds(50), maxMissed: 3), SSHKeepalive(interval: .seconds(1), maxMissed: 0)] {
            var config = TestServer.shared.configuration()
            config.keepalive = bad
            let e = await expectSSHError { try await SSHClient.connect(config) }
            #expect(e?.code == .invalidArgument, "\(String(describing: e))")
        }
        #expect(SSHKeepalive(interval: .seconds(15), maxMissed: 3).detectionTime == .seconds(46))
        #expect(SSHKeepalive(interval: .seconds(1), maxMissed: 2).detectionTime == .milliseconds(2500))
    }
}
