import Foundation
import SSHKit
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Listeners that accept and never speak, counting the connections open across all of
/// them at once: what a handshake limit looks like from the servers' side.
final class CountingListeners: Sendable {
    let ports: [Int]
    private let fds: [Int32]
    private let counts = Mutex<(open: Int, most: Int, accepted: Int)>((0, 0, 0))
    private let acceptedAt = Mutex<[ContinuousClock.Instant]>([])
    private let stopping = Atomic<Bool>(false)
    private let done = Atomic<Bool>(false)

    init(count: Int) throws {
        var fds: [Int32] = [], ports: [Int] = []
        for _ in 0..<count {
            let (fd, port) = try listenOnLoopback(backlog: 64)
            fds.append(fd)
            ports.append(port)
        }
        self.fds = fds
        self.ports = ports
        Thread.detachNewThread { [self] in serve() }
    }

    var most: Int { counts.withLock { $0.most } }
    var accepted: Int { counts.withLock { $0.accepted } }
    /// When each connection was accepted, in order.
    var acceptTimes: [ContinuousClock.Instant] { acceptedAt.withLock { $0 } }

    private func serve() {
        var peers: [Int32] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while !stopping.load(ordering: .acquiring) {
            var pfds = (fds + peers).map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            _ = poll(&pfds, nfds_t(pfds.count), 50)
            // closes first, then accepts: a client that closed before it opened the next
            // connection is never counted twice in one poll
            let ready = pfds.filter { $0.revents != 0 }
            for p in ready.filter({ !fds.contains($0.fd) }) + ready.filter({ fds.contains($0.fd) }) {
                if fds.contains(p.fd) {
                    let c = accept(p.fd, nil, nil)
                    guard c >= 0 else { continue }
                    peers.append(c)
                    acceptedAt.withLock { $0.append(.now) }
                    counts.withLock { s in
                        s.open += 1
                        s.accepted += 1
                        s.most = max(s.most, s.open)
                    }
                } else if read(p.fd, &buf, buf.count) <= 0 {
                    close(p.fd)
                    peers.removeAll { $0 == p.fd }
                    counts.withLock { $0.open -= 1 }
                }
            }
        }
        for fd in peers + fds { close(fd) }
        done.store(true, ordering: .releasing)
    }

    func stop() {
        stopping.store(true, ordering: .releasing)
        for _ in 0..<200 where !done.load(ordering: .acquiring) { usleep(10_000) }
    }
}

@Suite("Fleet", .tags(.integration), .serialized)
struct FleetTests {
    static func collect<V>(_ stream: AsyncStream<SSHFleetResult<V>>) async -> [String: SSHFleetResult<V>] {
        var all: [String: SSHFleetResult<V>] = [:]
        for await r in stream { all[r.host] = r }
        return all
    }

    @Test func everyHostGetsItsOwnOutcomeAndOpenConnectionsAreReused() async throws {
        var servers: [TestServer] = []
        defer { for s in servers { s.stop() } }
        for i in 0..<4 { servers.append(try TestServer.start(name: "fleet-\(i)")) }
        let gone = try TestServer.start(name: "fleet-gone")
        let goneConfig = gone.configuration(connectTimeout: .seconds(3))
        gone.stop() // its port now refuses
        var hosts = servers.enumerated().map { SSHFleetHost($1.configuration(), name: "ok-\($0)") }
        hosts.append(SSHFleetHost(goneConfig, name: "gone"))
        // a server whose key is not the one pinned for it: refused, never accepted
        hosts.append(SSHFleetHost(servers[0].configuration(policy: .pinned(servers[1].allFingerprints)), name: "wrong-key"))
        let fleet = try SSHFleet(hosts: hosts, options: SSHFleetOptions(
            maxConcurrentHandshakes: 3, connectRetries: 2, retryBackoff: .milliseconds(50)))
        defer { Task { await fleet.close() } }

        let first = await Self.collect(fleet.execute("echo $SSH_CONNECTION"))
        #expect(first.count == 6)
        for (i, server) in servers.enumerated() {
            let r = try #require(first["ok-\(i)"])
            let fields = (try? r.outcome.get().stdoutString)?.split(separator: " ") ?? []
            #expect(fields.last.map(String.init) == "\(server.port)\n", "ok-\(i): \(r.outcome)")
            #expect(r.connectAttempts == 1)
        }
        let refused = try #require(first["gone"])
        #expect((try? refused.outcome.get()) == nil)
        if case .failure(let e) = refused.outcome { #expect(e.code == .connectionRefused, "\(e)") }
        #expect(refused.connectAttempts == 3, "a refused connection is tried 1 + connectRetries times")
        let wrong = try #require(first["wrong-key"])
        if case .failure(let e) = wrong.outcome { #expect(e.code == .hostKeyRejected, "\(e)") } else {
            Issue.record("a host with another key was accepted")
        }
        #expect(wrong.connectAttempts == 1, "a rejected host key is not retried")

        // a second run reuses the open connections
        let second = await Self.collect(fleet.execute("true"))
        for i in servers.indices {
            let r = try #require(second["ok-\(i)"])
            #expect((try? r.outcome.get().exitStatus) == .exited(0))
            #expect(r.connectAttempts == 0, "ok-\(i) connected again")
        }
        await fleet.close()
    }

    @Test func theHandshakeLimitHoldsAtTheServers() async throws {
        let listeners = try CountingListeners(count: 6)
        defer { listeners.stop() }
        let hosts = listeners.ports.enumerated().map { i, port in
            SSHFleetHost(SSHConfiguration(host: "127.0.0.1", port: port, user: "nobody", authentication: .password("x"),
                                          hostKeyPolicy: .pinned(["SHA256:none"]), connectTimeout: .seconds(1)),
                         name: "silent-\(i)")
        }
        let fleet = try SSHFleet(hosts: hosts, options: SSHFleetOptions(maxConcurrentHandshakes: 2, connectRetries: 0))
        let results = await Self.collect(fleet.execute("true"))
        #expect(results.count == 6)
        for r in results.values {
            if case .failure(let e) = r.outcome { #expect(e.code == .connectTimeout, "\(r.host): \(e)") }
        }
        #expect(listeners.accepted == 6)
        #expect(listeners.most == 2, "at most 2 key exchanges at once, and the limit was used: \(listeners.most)")
    }

    @Test func hostsBehindAJumpHostThatCannotBeReachedTryItOnceTogether() async throws {
        // a jump host that accepts and never answers: each attempt times out
        let jump = try CountingListeners(count: 1)
        defer { jump.stop() }
        let jumpConfig = SSHConfiguration(host: "127.0.0.1", port: jump.ports[0], user: "nobody",
                                          authentication: .password("x"), hostKeyPolicy: .pinned(["SHA256:none"]),
                                          connectTimeout: .seconds(1))
        let hosts = (0..<4).map { i in
            var c = SSHConfiguration(host: "10.0.0.\(i + 1)", user: "nobody", authentication: .password("x"),
                                     hostKeyPolicy: .pinned(["SHA256:none"]))
            c.jumpHosts = [jumpConfig]
            return SSHFleetHost(c, name: "behind-\(i)")
        }
        let fleet = try SSHFleet(hosts: hosts, options: SSHFleetOptions(
            maxConcurrentHandshakes: 8, connectRetries: 1, retryBackoff: .milliseconds(10)))
        let first = await Self.collect(fleet.execute("true"))
        #expect(first.count == 4)
        for r in first.values {
            if case .failure(let e) = r.outcome { #expect(e.code == .connectTimeout, "\(r.host): \(e)") } else {
                Issue.record("\(r.host) succeeded behind a jump host that never answers")
            }
            #expect(r.connectAttempts == 1, "\(r.host) tried again: \(r.connectAttempts)")
        }
        // 1 + connectRetries attempts for the four of them, not for each
        #expect(jump.accepted == 2, "\(jump.accepted) connections to the jump host")
        // the failure holds for its run only: the next run tries again
        _ = await Self.collect(fleet.execute("true"))
        #expect(jump.accepted == 4, "\(jump.accepted)")
        await fleet.close()
    }

    @Test func handshakesStartNoFasterThanTheRate() async throws {
        let listeners = try CountingListeners(count: 4)
        defer { listeners.stop() }
        let hosts = listeners.ports.enumerated().map { i, port in
            SSHFleetHost(SSHConfiguration(host: "127.0.0.1", port: port, user: "nobody", authentication: .password("x"),
                                          hostKeyPolicy: .pinned(["SHA256:none"]), connectTimeout: .seconds(1)),
                         name: "silent-\(i)")
        }
        // four handshakes per second, with room for all at once: the rate is what spaces them
        let fleet = try SSHFleet(hosts: hosts, options: SSHFleetOptions(
            maxConcurrentHandshakes: 8, handshakesPerSecond: 4, connectRetries: 0))
        _ = await Self.collect(fleet.execute("true"))
        let times = listeners.acceptTimes
        #expect(times.count == 4)
        for (a, b) in zip(times, times.dropFirst()) {
            #expect(b - a >= .milliseconds(200), "two handshakes started \(b - a) apart at 4 per second")
        }
        // they overlapped (each waits out its 1 s timeout): the limit of 8 never held one back
        #expect(listeners.most >= 2, "\(listeners.most) at once")
    }

    @Test func cancellingTheRunEndsItPromptlyAndLeavesNothingRunning() async throws {
        var servers: [TestServer] = []
        defer { for s in servers { s.stop() } }
        for i in 0..<3 { servers.append(try TestServer.start(name: "fleet-cancel-\(i)")) }
        let fleet = try SSHFleet(hosts: servers.enumerated().map { SSHFleetHost($1.configuration(), name: "h\($0)") })
        let reader = Task { await Self.collect(fleet.execute("sleep 41.5")) }
        // every host runs it (a connection is two sshd processes from its key exchange on: a
        // run cancelled before the command starts ends a connect, and its connection goes too)
        let started = await eventually(timeout: .seconds(20)) {
            servers.allSatisfy { s in
                s.sessionProcessTree().contains { pid in
                    let line = (try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8)) ?? ""
                    return line.split(separator: "\0").map(String.init) == ["sleep", "41.5"]
                }
            }
        }
        #expect(started)
        reader.cancel()
        let ended = await finishes(within: .seconds(5)) { await reader.value }
        #expect(ended != nil, "the run did not end with its task")
        // the commands were stopped on the servers (TERM) while the connections stay open
        let stopped = await eventually(timeout: .seconds(10)) {
            ((try? TestServer.run("/usr/bin/pgrep", ["-f", "^sleep 41\\.5$"], allowFailure: true)) ?? "").isEmpty
        }
        #expect(stopped, "a cancelled command still runs on a server")
        #expect(servers.allSatisfy { !$0.sessionProcesses().isEmpty }, "the connections were kept for the next run")
        // and closing leaves no session
        await fleet.close()
        let left = await eventually(timeout: .seconds(10)) { servers.allSatisfy { $0.sessionProcessTree().isEmpty } }
        #expect(left, "\(servers.map { $0.sessionProcessTree() })")
    }

    @Test func uploadAndDownloadOnEveryHost() async throws {
        var servers: [TestServer] = []
        defer { for s in servers { s.stop() } }
        for i in 0..<2 { servers.append(try TestServer.start(name: "fleet-files-\(i)")) }
        let fleet = try SSHFleet(hosts: servers.enumerated().map { SSHFleetHost($1.configuration(), name: "h\($0)") })
        let dir = try TestPaths.makeTemporaryDirectory("fleet-files")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        FileManager.default.createFile(atPath: dir + "/local", contents: bytes)
        // both servers run on this machine: one remote path, replaced atomically by each
        let remote = "/tmp/fleet-files-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: remote) }
        let up = await Self.collect(fleet.upload(dir + "/local", to: SFTPPath(remote)))
        #expect(up.count == 2 && up.values.allSatisfy { (try? $0.outcome.get()) == 300_000 }, "\(up)")
        #expect(FileManager.default.contents(atPath: remote) == bytes)

        for h in ["h0", "h1"] { try FileManager.default.createDirectory(atPath: "\(dir)/\(h)", withIntermediateDirectories: true) }
        let down = await Self.collect(fleet.download(SFTPPath(remote)) { host throws(SSHError) in
            if host.name == "h1" { throw SSHError(.localFileError, "no room for h1") }
            return "\(dir)/\(host.name)/copy"
        })
        #expect((try? down["h0"]?.outcome.get()) == 300_000)
        #expect(FileManager.default.contents(atPath: dir + "/h0/copy") == bytes)
        if case .failure(let e) = down["h1"]?.outcome { #expect(e.code == .localFileError) } else {
            Issue.record("h1's destination failed, its download did not")
        }
        #expect(!FileManager.default.fileExists(atPath: dir + "/h1/copy"))
        // a missing remote file: each host's own typed failure, nothing written
        let missing = await Self.collect(fleet.download(SFTPPath(remote + ".missing")) { host throws(SSHError) in
            "\(dir)/\(host.name)/missing"
        })
        for r in missing.values {
            if case .failure(let e) = r.outcome { #expect(e.code == .noSuchFile, "\(e)") } else { Issue.record("\(r.host)") }
        }
        #expect((try FileManager.default.contentsOfDirectory(atPath: dir + "/h0")) == ["copy"])
        await fleet.close()
    }

    @Test func oneHostCanBeCancelledAndAHostPastItsTimeoutFails() async throws {
        var servers: [TestServer] = []
        defer { for s in servers { s.stop() } }
        for i in 0..<2 { servers.append(try TestServer.start(name: "fleet-one-\(i)")) }
        let fleet = try SSHFleet(hosts: [SSHFleetHost(servers[0].configuration(), name: "a"),
                                         SSHFleetHost(servers[1].configuration(), name: "b")],
                                 options: SSHFleetOptions(hostTimeout: .seconds(4)))
        defer { Task { await fleet.close() } }
        let reader = Task { await Self.collect(fleet.execute("sleep 42.5")) }
        let started = await eventually(timeout: .seconds(20)) {
            servers.allSatisfy { s in s.sessionProcessTree().count >= 2 }
        }
        #expect(started)
        fleet.cancel(host: "a")
        let results = await reader.value
        let a = try #require(results["a"]), b = try #require(results["b"])
        if case .failure(let e) = a.outcome { #expect(e.code == .cancelled, "\(e)") } else { Issue.record("a was not cancelled") }
        if case .failure(let e) = b.outcome { #expect(e.code == .timedOut, "\(e)") } else { Issue.record("b did not time out") }
        #expect(a.duration < b.duration)
        #expect(throws: SSHError.self) { try SSHFleet(hosts: [SSHFleetHost(servers[0].configuration(), name: "x"),
                                                              SSHFleetHost(servers[1].configuration(), name: "x")]) }
        await fleet.close()
    }
}
