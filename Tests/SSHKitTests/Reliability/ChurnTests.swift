import Foundation
import SSHCore
@_spi(Testing) import SSHKit
import Synchronization
import Testing

/// Part 4 of the reliability suite: leaks and churn. Thousands of connects cancelled at
/// random moments against a real sshd, then a thousand cycles of each feature; the
/// process's fds, threads, live core objects and resident memory before and after.
/// The LeakSanitizer run of the same suite is `scripts/sanitizers.sh leak`.
@Suite("Reliability: leaks and churn", .tags(.integration), .serialized)
struct ChurnTests {
    static let part = "4 churn"
    static let connectCycles = Reliability.full ? 10_000 : 200
    static let featureCycles = Reliability.full ? 1_000 : 25

    struct Snapshot {
        var fds = countFDs(), threads = countThreads(), kib = residentKiB()
        var connections = sshcore_debug_live_connections(), workers = sshcore_debug_live_workers()
    }

    /// Waits (bounded) until fds, threads and core objects are back to `before`: teardown
    /// is asynchronous (a worker ends after close returns), a leak does not settle.
    static func settled(_ before: Snapshot) async -> Snapshot {
        var now = Snapshot()
        for _ in 0..<250 {
            if now.fds <= before.fds && now.threads <= before.threads && now.connections <= before.connections
                && now.workers <= before.workers { break }
            try? await Task.sleep(for: .milliseconds(20))
            now = Snapshot()
        }
        return now
    }

    static func record(_ what: String, cycles: Int, _ before: Snapshot, _ after: Snapshot) {
        Reliability.record(part, "\(what): fds, threads, core connections after \(cycles) cycles",
                           "\(after.fds - before.fds), \(after.threads - before.threads), \(after.connections - before.connections)",
                           goal: "0, 0, 0")
        Reliability.record(part, "\(what): resident memory growth", "\((after.kib - before.kib) >> 10) MiB", goal: "bounded")
    }

    static func expectNoLeak(_ what: String, _ before: Snapshot, _ after: Snapshot) {
        #expect(after.fds <= before.fds, "\(what): fds \(before.fds) -> \(after.fds)")
        #expect(after.threads <= before.threads, "\(what): threads \(before.threads) -> \(after.threads)")
        #expect(after.connections <= before.connections, "\(what): core connections \(before.connections) -> \(after.connections)")
        #expect(after.workers <= before.workers, "\(what): workers \(before.workers) -> \(after.workers)")
        // a generous bound: a leak of one connection's buffers per cycle would pass it by far
        #expect(after.kib - before.kib < 256 << 10 || Reliability.underSanitizer,
                "\(what): resident memory grew \((after.kib - before.kib) >> 10) MiB")
    }

    static func configuration(_ server: TestServer) -> SSHConfiguration {
        var config = server.configuration()
        config.keepalive = SSHKeepalive(interval: .seconds(5), maxMissed: 3)
        return config
    }

}

extension ChurnTests {
    /// Tests that count this process's fds, threads, sockets or memory: they run alone,
    /// before the other tests run in parallel (Support/Tiers.swift, scripts/test.sh).
    @Suite("Reliability: leaks and churn (alone)", .tags(.exclusive), .serialized)
    struct Exclusive {
        @Test(.timeLimit(.minutes(60)))
        func connectsCancelledAtRandomMomentsLeaveNothing() async throws {
            let server = try TestServer.start(name: "churn-connect", extraConfig: ["MaxStartups 200:30:400"])
            defer { server.stop() }
            let config = ChurnTests.configuration(server)
            // the duration of a whole connect, to spread the cancels over every phase
            var durations: [Double] = []
            for _ in 0..<5 {
                let (conn, s) = try await measure { try await SSHClient.connect(config) }
                durations.append(s)
                await conn.close()
            }
            let window = durations.sorted()[2]
            try await Task.sleep(for: .milliseconds(200))
            let before = Snapshot()
            var rng = Reliability.generator("churn-connect")
            var outcomes: [String: Int] = [:]
            var untyped = 0
            for _ in 0..<ChurnTests.connectCycles {
                let t = Task { try await SSHClient.connect(config) }
                try await Task.sleep(for: .microseconds(Int64(Double.random(in: 0...window, using: &rng) * 1e6)))
                t.cancel()
                do {
                    let conn = try await t.value
                    outcomes["connected", default: 0] += 1
                    await conn.close()
                } catch let e as SSHError {
                    outcomes[e.code.description, default: 0] += 1
                } catch {
                    untyped += 1
                }
            }
            let after = await ChurnTests.settled(before)
            #expect(untyped == 0)
            ChurnTests.expectNoLeak("connect/cancel", before, after)
            // no session left behind on the server either
            let leftover = await eventually(timeout: .seconds(10)) { server.sessionProcesses().isEmpty }
            #expect(leftover, "sshd still has \(server.sessionProcesses().count) sessions")
            Reliability.record(ChurnTests.part, "connect/cancel cycles (cancel uniform over \(Int(window * 1000)) ms)",
                               "\(ChurnTests.connectCycles): " + outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "),
                               goal: "≥ 10,000")
            ChurnTests.record("connect/cancel", cycles: ChurnTests.connectCycles, before, after)
        }

        @Test(.timeLimit(.minutes(60)))
        func aThousandCyclesOfEachFeatureLeaveNothing() async throws {
            let server = try TestServer.start(name: "churn-features")
            defer { server.stop() }
            let echo = try EchoServer()
            defer { echo.stop() }
            let config = ChurnTests.configuration(server)
            let n = ChurnTests.featureCycles
            let payload = randomBytes(4096)

            /// One feature: a warm-up cycle, the snapshot, `n` cycles, the settled snapshot.
            func churn(_ what: String, _ cycle: () async throws -> Void) async throws {
                try await cycle()
                try await Task.sleep(for: .milliseconds(100))
                let before = Snapshot()
                let started = ContinuousClock.now
                for _ in 0..<n { try await cycle() }
                let seconds = Reliability.ms(ContinuousClock.now - started) / 1000
                let after = await ChurnTests.settled(before)
                ChurnTests.expectNoLeak(what, before, after)
                ChurnTests.record(what, cycles: n, before, after)
                Reliability.record(ChurnTests.part, "\(what): cycles", "\(n) in \(String(format: "%.1f", seconds)) s", goal: "≥ 1,000")
            }

            try await churn("connect and close") {
                let conn = try await SSHClient.connect(config)
                await conn.close()
            }
            let conn = try await SSHClient.connect(config)
            try await churn("exec") {
                let r = try await conn.execute("echo churn")
                #expect(r.stdoutString == "churn\n")
            }
            try await churn("SFTP open, stat, read, close") {
                let sftp = try await conn.openSFTP()
                _ = try await sftp.attributes(at: SFTPPath("/etc/hostname"))
                _ = try await sftp.contentsOfFile(SFTPPath("/etc/hostname"))
                sftp.close()
            }
            try await churn("forward: start, round trip, stop") {
                let forward = try conn.forwardLocalPort(to: .tcp(host: "127.0.0.1", port: echo.port))
                guard let port = forward.port else { throw FixtureError("no port") }
                let fd = SocketClient.connect(port: port)
                let o = await SocketClient.exchange(fd, send: payload, timeout: .seconds(10))
                close(fd)
                #expect(o.received == payload)
                await forward.close()
            }
            try await churn("shell: open, echo, close") {
                let shell = try await conn.startShell()
                try await shell.input.write("echo churn-$((6*7)); exit\n")
                var seen: [UInt8] = []
                for try await chunk in shell.output {
                    seen += chunk
                    if String(decoding: seen, as: UTF8.self).contains("churn-42") { break }
                }
                #expect(String(decoding: seen, as: UTF8.self).contains("churn-42"))
                _ = try await shell.exitStatus()
                shell.cancel()
            }
            await conn.close()
        }

        /// libssh closes its own fd when the goodbye of `ssh_disconnect` cannot be
        /// written (after a refused login the core has shut the socket down), and
        /// another thread of the process may be given that number at once. The probe
        /// takes the number the way such a thread would; the worker must leave it open.
        @Test func anFdNumberLibsshClosedAndAnotherThreadReusedIsNotClosedAgain() async throws {
            let server = try TestServer.start(name: "fd-reuse")
            defer { server.stop() }
            FdReuseProbe.taken.store(-1, ordering: .sequentiallyConsistent)
            SSHCoreTesting.setTeardownProbe { fd in
                guard fcntl(fd, F_GETFD) == -1 && errno == EBADF else { return } // still libssh's
                let file = open("/dev/null", O_RDONLY | O_CLOEXEC)
                guard file >= 0 else { return }
                if file != fd {
                    dup2(file, fd)
                    close(file)
                }
                FdReuseProbe.taken.store(fd, ordering: .sequentiallyConsistent)
            }
            defer { SSHCoreTesting.setTeardownProbe(nil) }
            let e = await expectSSHError {
                try await SSHClient.connect(server.configuration(.password("not the password")))
            }
            #expect(e?.code == .authenticationFailed)
            // the worker has ended: the connect returns after its teardown
            let fd = FdReuseProbe.taken.load(ordering: .sequentiallyConsistent)
            #expect(fd >= 0, "libssh closed its fd in ssh_disconnect, as this test expects")
            guard fd >= 0 else { return }
            var st = stat()
            #expect(fstat(fd, &st) == 0, "the file opened at the number libssh freed was closed by the worker")
            #expect(st.st_mode & S_IFMT == S_IFCHR, "fd \(fd) is no longer /dev/null")
            close(fd)
        }
    }
}

/// What the teardown probe of the fd-reuse test took (a C callback captures nothing).
enum FdReuseProbe {
    static let taken = Atomic<Int32>(-1)
}
