import Foundation
import SSHCore
@testable import SSHKit
import Testing

/// The worker tier: connection attempts against local listeners that misbehave.
/// No SSH server involved; checks cancellation, deadlines and fd/thread ownership.
@Suite("Worker", .tags(.worker), .serialized)
struct WorkerTests {
    func config(port: Int, host: String = "127.0.0.1", timeout: Duration = .seconds(30)) -> SSHConfiguration {
        SSHConfiguration(host: host, port: port, user: "nobody", authentication: .password("x"),
                         hostKeyPolicy: .pinned(["SHA256:AAAA"]), connectTimeout: timeout)
    }

    @Test func cancellingAConnectToASilentServerReturnsCancelledPromptly() async throws {
        let server = try FakeServer(.silent)
        defer { server.stop() }
        var latencies: [Double] = []
        for _ in 0..<20 {
            let task = Task { try await SSHClient.connect(config(port: server.port)) }
            try await Task.sleep(for: .milliseconds(50))
            let clock = ContinuousClock()
            let start = clock.now
            task.cancel()
            let error = await expectSSHError { try await task.value }
            let d = clock.now - start
            latencies.append(Double(d.components.attoseconds) / 1e15 + Double(d.components.seconds) * 1000)
            #expect(error?.code == .cancelled)
        }
        latencies.sort()
        print("connect cancel latency (ms): median \(latencies[latencies.count / 2]), max \(latencies.last!)")
        // a generous bound that only catches a hang; the latency itself is reported above
        #expect(latencies.last! < 5000)
        #expect(server.accepted.load(ordering: .relaxed) >= 20)
    }

    @Test func aSilentServerHitsTheConnectTimeout() async throws {
        let server = try FakeServer(.silent)
        defer { server.stop() }
        let (error, seconds) = await measure {
            await expectSSHError { try await SSHClient.connect(config(port: server.port, timeout: .milliseconds(300))) }
        }
        #expect(error?.code == .connectTimeout)
        #expect(error?.host == "127.0.0.1")
        #expect(seconds >= 0.29 && seconds < 5)
    }

    @Test func garbageInsteadOfABannerIsATypedError() async throws {
        let server = try FakeServer(.reply(Array("HTTP/1.1 400 Bad Request\r\n\r\n".utf8)))
        defer { server.stop() }
        let error = await expectSSHError { try await SSHClient.connect(config(port: server.port, timeout: .seconds(5))) }
        // the server closes with our banner unread, which TCP turns into a reset when it
        // lands first: a reset is connectionLost in every phase
        let typed: Set<SSHError.Code> = [.keyExchangeFailed, .disconnected, .connectionLost]
        #expect(error.map { typed.contains($0.code) } == true, "\(String(describing: error))")
    }

    @Test func aClosedPortIsConnectionRefused() async {
        let error = await expectSSHError { try await SSHClient.connect(config(port: closedPort())) }
        #expect(error?.code == .connectionRefused)
        #expect(error?.systemErrno == ECONNREFUSED)
    }

    @Test func anUnresolvableNameIsNameResolutionFailed() async {
        let error = await expectSSHError { try await SSHClient.connect(config(port: 22, host: "no-such-host.invalid")) }
        #expect(error?.code == .nameResolutionFailed)
    }

    @Test func invalidConfigurationFailsBeforeConnecting() async {
        var c = config(port: 0)
        #expect(await expectSSHError { try await SSHClient.connect(c) }?.code == .invalidArgument)
        c = config(port: 22, host: "")
        #expect(await expectSSHError { try await SSHClient.connect(c) }?.code == .invalidArgument)
        c = config(port: 22)
        c.authentication = SSHAuthentication([])
        #expect(await expectSSHError { try await SSHClient.connect(c) }?.code == .invalidArgument)
        c = config(port: 22)
        c.connectTimeout = .zero
        #expect(await expectSSHError { try await SSHClient.connect(c) }?.code == .invalidArgument)
    }

    @Test func aClosedPortOnIPv6LoopbackIsConnectionRefused() async {
        let error = await expectSSHError { try await SSHClient.connect(config(port: closedPort(), host: "::1")) }
        #expect(error?.code == .connectionRefused, "\(String(describing: error))")
    }

    /// Runs a connection over one end of a socketpair whose other end the test holds.
    func socketpairConfig(timeout: Duration = .seconds(30)) -> (SSHConfiguration, peer: Int32, coreEnd: Int32) {
        var sv: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &sv) == 0)
        var c = config(port: 22, host: "socketpair.test", timeout: timeout)
        c.connectedSocket = sv[0]
        return (c, sv[1], sv[0])
    }

    /// Waits (bounded) until the peer sees end of file: the core closed every copy of its end.
    func peerSeesEOF(_ fd: Int32) -> Bool {
        var buf = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<100 {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, 50) > 0 {
                let n = read(fd, &buf, buf.count)
                if n == 0 { return true }
                if n < 0 { return false }
            }
        }
        return false
    }

    @Test func socketpairSilentPeerCancelsPromptlyAndEveryFdIsClosedOnce() async throws {
        for _ in 0..<20 {
            let (c, peer, coreEnd) = socketpairConfig()
            let task = Task { try await SSHClient.connect(c) }
            try await Task.sleep(for: .milliseconds(20))
            let (e, seconds) = await measure { () async -> SSHError? in
                task.cancel()
                return await expectSSHError { try await task.value }
            }
            #expect(e?.code == .cancelled)
            #expect(seconds < 5) // catches a hang
            // the core sent its banner, then closed its end (original and libssh's dup)
            #expect(peerSeesEOF(peer))
            // the fd number is free again; whatever reuses it must stay open: a second
            // close by the core would close this probe
            let probe = open("/dev/null", O_RDONLY)
            #expect(probe >= 0)
            if probe == coreEnd {
                try await Task.sleep(for: .milliseconds(50))
                #expect(fcntl(probe, F_GETFD) != -1, "the core closed a reused fd number")
            }
            close(probe)
            close(peer)
        }
    }

    @Test func socketpairPeerThatHangsUpIsATypedError() async throws {
        let (c, peer, _) = socketpairConfig(timeout: .seconds(5))
        close(peer)
        let e = await expectSSHError { try await SSHClient.connect(c) }
        let expected: Set<SSHError.Code> = [.disconnected, .connectionLost, .keyExchangeFailed]
        #expect(e.map { expected.contains($0.code) } == true, "\(String(describing: e))")
    }

    @Test func socketpairSilentPeerHitsTheConnectTimeout() async throws {
        let (c, peer, _) = socketpairConfig(timeout: .milliseconds(200))
        defer { close(peer) }
        let e = await expectSSHError { try await SSHClient.connect(c) }
        #expect(e?.code == .connectTimeout)
        #expect(peerSeesEOF(peer))
    }

}

extension WorkerTests {
    /// Tests that count this process's fds, threads, sockets or memory: they run alone,
    /// before the other tests run in parallel (Support/Tiers.swift, scripts/test.sh).
    @Suite("Worker (alone)", .tags(.exclusive), .serialized)
    struct Exclusive {
        func config(port: Int, host: String = "127.0.0.1", timeout: Duration = .seconds(30)) -> SSHConfiguration {
            WorkerTests().config(port: port, host: host, timeout: timeout)
        }

        @Test func fiveHundredConnectCancelCyclesLeaveNoFdOrThread() async throws {
            let server = try FakeServer(.silent)
            // warm up: the runtime's own threads and fds exist before we count
            for _ in 0..<5 {
                let t = Task { try await SSHClient.connect(config(port: server.port)) }
                try await Task.sleep(for: .milliseconds(5))
                t.cancel()
                _ = try? await t.value
            }
            try await Task.sleep(for: .milliseconds(100))
            let fdsBefore = countFDs()
            let threadsBefore = countThreads()
            // objects other tests may still hold (e.g. a policy closure still running)
            let connectionsBefore = sshcore_debug_live_connections()
            let workersBefore = sshcore_debug_live_workers()
            var codes: [SSHError.Code: Int] = [:]
            for i in 0..<500 {
                let t = Task { try await SSHClient.connect(config(port: server.port)) }
                if i % 3 != 0 { try await Task.sleep(for: .microseconds(Int64(i % 7) * 300)) }
                t.cancel()
                do { _ = try await t.value } catch let e as SSHError { codes[e.code, default: 0] += 1 }
            }
            #expect(codes[.cancelled] == 500, "\(codes)")
            #expect(sshcore_debug_live_connections() <= connectionsBefore)
            #expect(sshcore_debug_live_workers() <= workersBefore)
            server.stop()
            // the listener's accepted sockets are closed by now; count ours
            var fdsAfter = countFDs(), threadsAfter = countThreads()
            for _ in 0..<50 where fdsAfter > fdsBefore - 3 + 0 || threadsAfter > threadsBefore {
                // the listener held 3 fds of its own (listen socket, stop pipe) counted before
                if fdsAfter <= fdsBefore - 3 && threadsAfter <= threadsBefore { break }
                try await Task.sleep(for: .milliseconds(20))
                fdsAfter = countFDs()
                threadsAfter = countThreads()
            }
            print("fds before \(fdsBefore) after \(fdsAfter); threads before \(threadsBefore) after \(threadsAfter)")
            #expect(fdsAfter <= fdsBefore - 3)
            #expect(threadsAfter <= threadsBefore)
        }
    }
}
