import Foundation
import ServerTransport
import SSHKit
import Synchronization
import Testing

/// The cancellation storm: every kind of operation, cancelled at a
/// random moment, thousands of times, on one shared connection (and new connections
/// for connect and jump hosts). Figures: cancel-to-return p50/p99/max, hangs, errors
/// other than `cancelled`, and whether the connection still works afterwards.
///
/// Full run (`SSHKIT_RELIABILITY=full`): 10,000 cancels, spread evenly over the kinds.
/// Reduced run: 20 per kind.
@Suite("Reliability: cancellation storm", .tags(.integration), .serialized)
struct CancellationStormTests {
    /// What the operations share.
    final class Context: Sendable {
        let server: TestServer
        let conn: SSHConnection
        let sftp: SFTPClient
        let transport: SSHTransport
        let echo: EchoServer
        let localDir: String
        let remoteDir: String
        let payload: [UInt8]
        let sequence = Atomic<Int>(0)

        init(server: TestServer, conn: SSHConnection, sftp: SFTPClient, transport: SSHTransport,
             echo: EchoServer, localDir: String, remoteDir: String, payload: [UInt8]) {
            self.server = server
            self.conn = conn
            self.sftp = sftp
            self.transport = transport
            self.echo = echo
            self.localDir = localDir
            self.remoteDir = remoteDir
            self.payload = payload
        }

        var sourcePath: String { localDir + "/payload" }
        func next() -> Int { sequence.add(1, ordering: .relaxed).newValue }
    }

    /// One kind of operation: what runs in the task, how long to wait before the
    /// cancel (uniform in 0...maxDelay; nil: the median time of three uncancelled
    /// runs, so the cancels land all over the operation), and what to clean up after.
    struct Kind: Sendable {
        var name: String
        var maxDelay: Duration?
        /// Runs before the task (not cancelled): a resource the task waits on.
        var prepare: @Sendable (Context) async throws -> (any Sendable)?
        var body: @Sendable (Context, (any Sendable)?) async throws -> Void
        var cleanup: @Sendable (Context, (any Sendable)?) async -> Void = { _, _ in }
    }

    struct Box<T>: @unchecked Sendable { let value: T }

    static var kinds: [Kind] {
        func plain(_ name: String, _ maxMs: Int?, _ body: @escaping @Sendable (Context) async throws -> Void) -> Kind {
            Kind(name: name, maxDelay: maxMs.map { .milliseconds($0) }, prepare: { _ in nil }, body: { c, _ in try await body(c) })
        }
        return [
            plain("connect", nil) { c in
                let conn = try await SSHClient.connect(c.server.configuration())
                await conn.close()
            },
            plain("connect through a jump host", nil) { c in
                var config = c.server.configuration()
                config.host = "127.0.0.1"
                config.jumpHosts = [c.server.configuration()]
                let conn = try await SSHClient.connect(config)
                await conn.close()
            },
            plain("collected exec", 25) { c in
                _ = try await c.conn.execute("head -c 1048576 /dev/zero; sleep 60")
            },
            plain("streamed read", 30) { c in
                try await c.conn.withCommand("cat /dev/zero") { cmd in
                    for try await _ in cmd.stdout {}
                }
            },
            plain("exit status in withCommand", 25) { c in
                _ = try await c.conn.withCommand("sleep 60") { try await $0.exitStatus() }
            },
            Kind(name: "exit status of a running command", maxDelay: .milliseconds(10),
                 prepare: { c in try await c.conn.startCommand("sleep 60") },
                 body: { _, r in _ = try await (r as! SSHCommand).exitStatus() },
                 cleanup: { _, r in (r as? SSHCommand)?.cancel() }),
            plain("shell", 50) { c in
                try await c.conn.withShell { shell in
                    try await shell.input.write("echo storm; sleep 60\n")
                    for try await _ in shell.output {}
                }
            },
            plain("SFTP call", nil) { c in
                _ = try await c.sftp.listDirectory(at: "/usr/bin")
            },
            plain("SFTP open", nil) { c in
                _ = try await c.conn.withSFTP { try await $0.attributes(at: "/tmp") }
            },
            plain("SFTP download", nil) { c in
                let n = c.next()
                try await c.sftp.download(SFTPPath(c.sourcePath), to: c.localDir + "/dl-\(n)")
                try? FileManager.default.removeItem(atPath: c.localDir + "/dl-\(n)")
            },
            plain("SFTP upload", nil) { c in
                let n = c.next()
                try await c.sftp.upload(c.sourcePath, to: SFTPPath(c.remoteDir + "/up-\(n)"))
                try? FileManager.default.removeItem(atPath: c.remoteDir + "/up-\(n)")
            },
            plain("tunnel round trip", nil) { c in
                _ = try await c.conn.withTunnel(toHost: "127.0.0.1", port: c.echo.port) { t in
                    try await SSHTunnel.roundTrip(t, Array(c.payload.prefix(512 << 10)))
                }
            },
            Kind(name: "waiting for a tunnel to close", maxDelay: .milliseconds(10),
                 prepare: { c in try await c.conn.openTunnel(toHost: "127.0.0.1", port: c.echo.port) },
                 body: { _, r in try await (r as! SSHTunnel).waitUntilClosed() },
                 cleanup: { _, r in (r as? SSHTunnel)?.cancel() }),
            Kind(name: "waiting for a forward to stop", maxDelay: .milliseconds(10),
                 prepare: { c in Box(value: try c.conn.forwardLocalPort(to: .tcp(host: "127.0.0.1", port: c.echo.port))) },
                 body: { _, r in
                     try await (r as! Box<SSHPortForward>).value.waitUntilClosed()
                 },
                 cleanup: { _, r in await (r as? Box<SSHPortForward>)?.value.close() }),
            plain("transport process", 30) { c in
                _ = try await c.transport.runProcess("/bin/sleep", arguments: ["60"], stdin: [], environment: [:], timeout: nil)
            },
            plain("transport file read", nil) { c in
                _ = try await c.transport.readFile(c.sourcePath)
            },
        ]
    }

    enum Outcome: Sendable {
        /// Finished before the cancel landed, or completed although it came (not a
        /// latency sample).
        case completedFirst
        case cancelled(ms: Double)
        /// Cancelled, but ended with another error (or none) after the cancel.
        case otherEnd(ms: Double, String)
        case hang
    }

    /// Starts `kind`, cancels it after a random delay, and times the return.
    static func storm(_ kind: Kind, _ c: Context, delay: Duration) async -> Outcome {
        let resource: (any Sendable)?
        do { resource = try await kind.prepare(c) } catch {
            return .otherEnd(ms: 0, "prepare failed: \(error)")
        }
        let finished = Atomic<Bool>(false)
        let task = Task { () -> Result<Void, any Error> in
            defer { finished.store(true, ordering: .releasing) }
            do { try await kind.body(c, resource); return .success(()) } catch { return .failure(error) }
        }
        try? await Task.sleep(for: delay)
        let wasDone = finished.load(ordering: .acquiring)
        let start = ContinuousClock.now
        task.cancel()
        let waited = await finishes(within: .seconds(10)) { await task.value }
        let ms = Reliability.ms(ContinuousClock.now - start)
        await kind.cleanup(c, resource)
        guard case .success(let r)? = waited else { return .hang }
        if wasDone { return .completedFirst }
        switch r {
        case .failure(let e as SSHError) where e.code == .cancelled: return .cancelled(ms: ms)
        case .failure(let e as TransportError) where e.isCancellation: return .cancelled(ms: ms)
        case .failure(is CancellationError): return .cancelled(ms: ms)
        case .failure(let e): return .otherEnd(ms: ms, "\(e)")
        case .success: return .completedFirst // the cancel came too late to stop it
        }
    }

    @Test func tenThousandCancelsReturnPromptlyAndLeaveTheConnectionWorking() async throws {
        let server = try TestServer.start(name: "storm")
        defer { server.stop() }
        let echo = try EchoServer()
        defer { echo.stop() }
        let localDir = try TestPaths.makeTemporaryDirectory("storm")
        defer { try? FileManager.default.removeItem(atPath: localDir) }
        var g = Reliability.generator("storm")
        let payload = (0..<(2 << 20)).map { _ in UInt8.random(in: 0...255, using: &g) }
        FileManager.default.createFile(atPath: localDir + "/payload", contents: Data(payload),
                                       attributes: [.posixPermissions: 0o644])
        let conn = try await SSHClient.connect(server.configuration())
        let remoteDir = try await conn.makeRemoteTemporaryDirectory("storm-up")
        defer { try? FileManager.default.removeItem(atPath: remoteDir) }
        let sftp = try await conn.openSFTP()
        let transport = SSHTransport(configuration: server.configuration())
        let c = Context(server: server, conn: conn, sftp: sftp, transport: transport, echo: echo,
                        localDir: localDir, remoteDir: remoteDir, payload: payload)
        _ = try await transport.runProcess("/bin/true")
        let sessionsBefore = server.sessionProcessTree().count

        var kinds = Self.kinds
        for i in kinds.indices where kinds[i].maxDelay == nil {
            var times: [Duration] = []
            for _ in 0..<3 {
                let start = ContinuousClock.now
                let r = try await kinds[i].prepare(c)
                try await kinds[i].body(c, r)
                await kinds[i].cleanup(c, r)
                times.append(ContinuousClock.now - start)
            }
            kinds[i].maxDelay = times.sorted()[1]
        }
        let perKind = Reliability.full ? (10_000 + kinds.count - 1) / kinds.count : 20
        var plan: [Int] = kinds.indices.flatMap { Array(repeating: $0, count: perKind) }
        plan.shuffle(using: &g)
        var latencies: [String: [Double]] = [:]
        var all: [Double] = []
        var hangs: [String] = [], wrong: [String] = []
        var completedFirst = 0
        for k in plan {
            let kind = kinds[k]
            let delayUs = Int64.random(in: 0...Int64(Reliability.ms(kind.maxDelay ?? .zero) * 1000), using: &g)
            switch await Self.storm(kind, c, delay: .microseconds(delayUs)) {
            case .completedFirst: completedFirst += 1
            case .cancelled(let ms):
                latencies[kind.name, default: []].append(ms)
                all.append(ms)
            case .otherEnd(let ms, let why):
                latencies[kind.name, default: []].append(ms)
                all.append(ms)
                if wrong.count < 50 { wrong.append("\(kind.name): \(why)") }
            case .hang:
                hangs.append(kind.name)
            }
        }
        // the shared connection and its SFTP session still work, and nothing is left running
        let echoed = try? await conn.execute("echo still-here").stdoutString
        let listed = try? await sftp.listDirectory(at: "/tmp")
        let processed = try? await transport.runProcess("/bin/echo", "ok").stdout
        let settled = await eventually(timeout: .seconds(15)) { server.sessionProcessTree().count <= sessionsBefore }
        let part = "cancellation storm"
        Reliability.record(part, "cancels (kinds: \(kinds.count))", plan.count, goal: Reliability.full ? "10000" : "")
        Reliability.record(part, "finished before the cancel landed", completedFirst)
        Reliability.record(part, "cancel to return p50 (ms)", String(format: "%.2f", Reliability.percentile(all, 50)))
        Reliability.record(part, "cancel to return p99 (ms)", String(format: "%.2f", Reliability.percentile(all, 99)), goal: "<= 50")
        Reliability.record(part, "cancel to return max (ms)", String(format: "%.2f", all.max() ?? .nan))
        Reliability.record(part, "hangs (no return 10 s after the cancel)", hangs.count, goal: "0")
        Reliability.record(part, "ended otherwise than cancelled", wrong.count, goal: "0")
        Reliability.record(part, "connection works afterwards", echoed == "still-here\n" && listed != nil && processed == Array("ok\n".utf8) ? "yes" : "no", goal: "yes")
        Reliability.record(part, "remote processes left running", settled ? 0 : server.sessionProcessTree().count - sessionsBefore, goal: "0")
        Reliability.record(part, "seed", Reliability.seed)
        for (name, values) in latencies.sorted(by: { $0.key < $1.key }) {
            let window = Reliability.ms(kinds.first { $0.name == name }?.maxDelay ?? .zero)
            print(String(format: "  %-36@ cancelled within %6.1f ms: n=%4d p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms", name as NSString, window, values.count,
                         Reliability.percentile(values, 50), Reliability.percentile(values, 99), values.max() ?? .nan))
        }
        for w in wrong { print("  other end: \(w)") }
        #expect(hangs.isEmpty, "hangs: \(hangs)")
        #expect(wrong.isEmpty, "\(wrong)")
        #expect(echoed == "still-here\n")
        #expect(listed != nil)
        #expect(processed == Array("ok\n".utf8))
        if !settled {
            let tree = server.sessionProcessTree().map(String.init).joined(separator: ",")
            let ps = (try? TestServer.run("/bin/ps", ["-o", "pid,ppid,args", "-p", tree], allowFailure: true)) ?? ""
            Issue.record("remote processes left: \(server.sessionProcessTree().count) > \(sessionsBefore)\n\(ps)")
        }
        await transport.close()
        await conn.close()
    }
}

/// Polls `condition` every 50 ms until it holds or `timeout` passes.
func eventually(timeout: Duration, _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return condition()
}
