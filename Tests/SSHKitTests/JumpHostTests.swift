import Foundation
import SSHKit
import Testing

/// Jump hosts against two real sshd instances in a network namespace the test makes:
/// the jump host listens on the namespace's veth address (reachable from here), the
/// target only on the namespace's own 127.0.0.1, which nothing outside it can reach.
@Suite("Jump hosts", .tags(.integration), .serialized, .enabled(if: NetworkNamespace.available))
struct JumpHostTests {
    final class Fixture: Sendable {
        let ns: NetworkNamespace
        let jump: TestServer
        let target: TestServer

        init() throws {
            ns = try NetworkNamespace.create()
            do {
                jump = try TestServer.start(name: "jump", namespace: ns)
                target = try TestServer.start(name: "jump-target", namespace: ns, loopbackOnly: true)
            } catch {
                ns.destroy()
                throw error
            }
        }

        func stop() {
            target.stop()
            jump.stop()
            ns.destroy()
        }

        /// The target's configuration, through the jump host.
        func configuration(targetPolicy: SSHHostKeyPolicy? = nil, jumpPolicy: SSHHostKeyPolicy? = nil) -> SSHConfiguration {
            var config = target.configuration(policy: targetPolicy)
            config.host = "127.0.0.1" // as the jump host sees it
            config.jumpHosts = [jump.configuration(policy: jumpPolicy)]
            return config
        }
    }

    /// Hosts behind the same jump host share one connection to it (SSHFleet),
    /// and SSHClient.connect(_:through:) leaves the jump connection open when it closes.
    @Test func hostsBehindOneJumpHostShareOneConnectionToIt() async throws {
        let f = try Fixture()
        defer { f.stop() }
        let hosts = (0..<3).map { SSHFleetHost(f.configuration(), name: "t\($0)") }
        let fleet = try SSHFleet(hosts: hosts)
        var results: [String: SSHFleetResult<SSHCommandResult>] = [:]
        for await r in fleet.execute("echo $SSH_CONNECTION") { results[r.host] = r }
        #expect(results.count == 3)
        for r in results.values {
            let words = (try? r.outcome.get().stdoutString)?.split(separator: " ") ?? []
            #expect(words.last.map(String.init) == "\(f.target.port)\n", "\(r.host): \(r.outcome)")
        }
        // three connections to the target, one to the jump host
        #expect(f.target.sessionProcesses().count == 3, "\(f.target.sessionProcesses())")
        #expect(f.jump.sessionProcesses().count == 1, "the jump host saw \(f.jump.sessionProcesses().count) connections")
        await fleet.close()
        let closed = await eventually(timeout: .seconds(10)) {
            f.jump.sessionProcesses().isEmpty && f.target.sessionProcesses().isEmpty
        }
        #expect(closed)

        // by hand: a target connection through an open jump connection does not own it
        let jump = try await SSHClient.connect(f.jump.configuration())
        var target = f.configuration()
        target.jumpHosts = []
        let first = try await SSHClient.connect(target, through: jump)
        await first.close()
        #expect(jump.isConnected)
        let second = try await SSHClient.connect(target, through: jump)
        #expect(try await second.execute("echo ok").stdoutString == "ok\n")
        await second.close()
        await #expect(throws: SSHError.self) { try await SSHClient.connect(f.configuration(), through: jump) }
        await jump.close()
    }

    @Test func twoHopsChainThroughEachOther() async throws {
        let f = try Fixture()
        defer { f.stop() }
        var config = f.configuration()
        config.jumpHosts.append(f.jump.configuration()) // the jump host again, through itself
        let conn = try await SSHClient.connect(config)
        #expect(conn.jumpConnections.count == 2)
        #expect(try await conn.execute("echo $SSH_CONNECTION").stdoutString.hasSuffix("127.0.0.1 \(f.target.port)\n"))
        let hop2 = try await conn.jumpConnections[1].execute("echo $SSH_CONNECTION").stdoutString
        #expect(hop2.hasSuffix("\(f.jump.host) \(f.jump.port)\n"), "\(hop2)")
        await conn.close()
    }

    @Test func anUnreachableTargetBehindTheJumpIsTyped() async throws {
        let f = try Fixture()
        defer { f.stop() }
        var config = f.configuration()
        config.port = f.target.port == 65535 ? 65534 : f.target.port + 1 // nothing listens there
        let e = await expectSSHError { try await SSHClient.connect(config) }
        #expect(e?.code == .connectionRefused, "\(String(describing: e))")
        #expect(e?.message.contains("jump host \(f.jump.host):\(f.jump.port)") == true)
        config.host = "no-such-host.invalid"
        let e2 = await expectSSHError { try await SSHClient.connect(config) }
        #expect(e2?.code == .nameResolutionFailed || e2?.code == .channelOpenFailed, "\(String(describing: e2))")
        // a bad hop list is rejected before anything connects
        var nested = f.configuration()
        nested.jumpHosts[0].jumpHosts = [f.jump.configuration()]
        let e3 = await expectSSHError { try await SSHClient.connect(nested) }
        #expect(e3?.code == .invalidArgument)
    }

    @Test func theForwardExampleReachesTheTargetThroughAJumpHost() async throws {
        let f = try Fixture()
        defer { f.stop() }
        // ssh-forward -J jump -L 0:127.0.0.1:TARGET target, with both hosts in ssh_config
        // (the target by the address the jump host reaches it at): the local port leads
        // to the target's sshd, which greets with its banner
        let setup = try ToolSetup([.init(alias: "jump", server: f.jump),
                                   .init(alias: "target", server: f.target, hostName: "127.0.0.1")])
        defer { setup.remove() }
        let run = try ForwardExampleTests.Running([
            "-F", setup.config, "-J", "jump", "-L", "0:127.0.0.1:\(f.target.port)", "target",
        ], environment: ToolSetup.environment([:]))
        #expect(run.lines.contains("ready"), "\(run.lines) \(run.stderr)")
        let port = try #require(run.port("local "))
        let fd = SocketClient.connect(port: port)
        let banner = SocketClient.readExactly(fd, 8)
        close(fd)
        #expect(String(decoding: banner, as: UTF8.self) == "SSH-2.0-")
        #expect(run.terminate() == 0)
    }

    @Test func losingTheJumpConnectionFailsTheTargetConnection() async throws {
        let f = try Fixture()
        defer { f.stop() }
        let conn = try await SSHClient.connect(f.configuration())
        let running = Task { try await conn.execute("sleep 30") }
        try await Task.sleep(for: .milliseconds(300))
        // kill only the jump host's sessions: the target sshd lives on
        for p in f.jump.sessionProcessTree() { kill(p, SIGKILL) }
        let (e, seconds) = await measure { await expectSSHError { try await running.value } }
        let lost: Set<SSHError.Code> = [.disconnected, .connectionLost]
        #expect(e.map { lost.contains($0.code) } == true, "\(String(describing: e))")
        #expect(seconds < 10)
        #expect(!conn.isConnected)
        await conn.close()
    }
}

/// Accepts TCP connections (the kernel does) and never says anything.
final class SilentListener: Sendable {
    let port: Int
    private let fd: Int32

    init(address: String) throws {
        (fd, port) = try listenOnLoopback(address: address, backlog: 8)
    }

    func stop() { close(fd) }
}

extension JumpHostTests {
    /// Tests that count this process's fds, threads, sockets or memory: they run alone,
    /// before the other tests run in parallel (Support/Tiers.swift, scripts/test.sh).
    @Suite("Jump hosts (alone)", .tags(.exclusive), .serialized)
    struct Exclusive {
        @Test func theTargetIsReachedThroughTheJumpHostOnlyAndWorksFully() async throws {
            let f = try Fixture()
            defer { f.stop() }
            // not reachable directly: nothing listens on that port here
            var direct = f.target.configuration()
            direct.connectTimeout = .seconds(3)
            let e = await expectSSHError { try await SSHClient.connect(direct) }
            #expect(e != nil)

            let socketsBefore = countSockets()

            let conn = try await SSHClient.connect(f.configuration())
            #expect(conn.host == "127.0.0.1" && conn.port == f.target.port)
            #expect(conn.jumpConnections.count == 1 && conn.jumpConnections[0].host == f.jump.host)
            #expect(f.target.allFingerprints.contains(conn.hostKey.sha256Fingerprint))
            // the target sshd sees the connection arrive on its loopback port
            let where_ = try await conn.execute("echo $SSH_CONNECTION").stdoutString
            #expect(where_.hasSuffix("127.0.0.1 \(f.target.port)\n"), "\(where_)")
            // bulk bytes, byte-exact, through the bridged socket
            let file = "/tmp/sshkit-jump-\(getpid())"
            let digest = try await conn.execute("head -c 16000000 /dev/urandom > \(file) && sha256sum \(file) | cut -c1-64")
            #expect(digest.exitStatus == .exited(0))
            let back = try await conn.execute("cat \(file); rm -f \(file)", outputLimit: 32 << 20)
            #expect(back.stdout.count == 16_000_000)
            let local = "/tmp/sshkit-jump-local-\(getpid())"
            _ = FileManager.default.createFile(atPath: local, contents: Data(back.stdout))
            defer { unlink(local) }
            let sum = try TestServer.run("/usr/bin/sha256sum", [local])
            #expect(sum.prefix(64) == digest.stdoutString.prefix(64))
            // SFTP and concurrency through the hop
            try await conn.withSFTP { sftp in
                let attrs = try await sftp.attributes(at: "/")
                #expect(attrs.kind == .directory)
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<16 {
                    group.addTask { () async throws -> Void in
                        let out = try await conn.execute("echo \(i)").stdoutString
                        #expect(out == "\(i)\n")
                    }
                }
                try await group.waitForAll()
            }
            await conn.close()
            #expect(!conn.jumpConnections[0].isConnected) // closed with it
            #expect(await socketsSettle(atMost: socketsBefore)) // none leaked

        }

        @Test func eachHopVerifiesItsOwnHostKey() async throws {
            let f = try Fixture()
            defer { f.stop() }
            let wrong = SSHHostKeyPolicy.pinned(["SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"])
            let socketsBefore = countSockets()
            var e = await expectSSHError { try await SSHClient.connect(f.configuration(targetPolicy: wrong)) }
            #expect(e?.code == .hostKeyRejected, "\(String(describing: e))")
            #expect(e?.host == "127.0.0.1" && e?.port == f.target.port)
            #expect(e?.message.contains("through jump host") == true)
            e = await expectSSHError { try await SSHClient.connect(f.configuration(jumpPolicy: wrong)) }
            #expect(e?.code == .hostKeyRejected, "\(String(describing: e))")
            #expect(e?.host == f.jump.host)
            // wrong credentials at the target only
            var badAuth = f.configuration()
            badAuth.authentication = .password("not the password")
            e = await expectSSHError { try await SSHClient.connect(badAuth) }
            #expect(e?.code == .authenticationFailed, "\(String(describing: e))")
            // every failed attempt closed its jump connection
            #expect(await socketsSettle(atMost: socketsBefore)) // none leaked
        }

        @Test func cancellingWhileTheTargetNeverSpeaksEndsPromptlyAndClosesTheJump() async throws {
            let f = try Fixture()
            defer { f.stop() }
            // a listener the jump host reaches (this side of the veth pair) that accepts
            // TCP and never sends an SSH banner
            let silent = try SilentListener(address: f.ns.hostAddress)
            defer { silent.stop() }
            var config = f.configuration()
            config.host = f.ns.hostAddress
            config.port = silent.port
            config.connectTimeout = .seconds(30)
            let socketsBefore = countSockets()
            let task = Task { try await SSHClient.connect(config) }
            try await Task.sleep(for: .milliseconds(700)) // the jump is up, the target silent
            let (e, seconds) = await measure {
                task.cancel()
                return await expectSSHError { try await task.value }
            }
            #expect(e?.code == .cancelled, "\(String(describing: e))")
            #expect(seconds < 2, "took \(seconds) s")
            #expect(await socketsSettle(atMost: socketsBefore)) // none leaked
        }
    }
}
