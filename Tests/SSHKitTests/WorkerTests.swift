import Foundation
import SSHCore
import SSHKit
import Testing

/// The worker tier: connection attempts against local listeners that misbehave.
/// No SSH server involved; checks cancellation, deadlines and fd/thread ownership.
@Suite("Worker", .serialized)
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
        #expect(latencies.last! < 2000)
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
        #expect(error?.code == .keyExchangeFailed || error?.code == .disconnected, "\(String(describing: error))")
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
