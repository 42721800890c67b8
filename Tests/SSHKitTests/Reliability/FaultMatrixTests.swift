import Foundation
@testable import SSHKit
import Synchronization
import Testing

/// The fault matrix: every fault of `FaultProxy` (close, reset, bit
/// flip, stall, delay, throttle), server→client and both ways, at offsets spread over
/// the key exchange, authentication and the transfer, under five workloads with
/// keepalive on. Each run must end with the complete, correct result or a typed error;
/// the figures are the false successes, hangs and partial destination files (all 0).
///
/// Full run (`SSHKIT_RELIABILITY=full`): every fault × direction × 10 offsets × 5
/// workloads (600 runs). Reduced run: each fault × direction × workload at one offset
/// picked from the seed (60 runs), so successive CI runs cover all of them.
@Suite("Reliability: fault matrix", .tags(.integration), .serialized)
struct FaultMatrixTests {
    enum Workload: String, CaseIterable {
        case exec, stream, download, upload, forward
    }

    enum Outcome: Sendable {
        case correct
        case typedError(SSHError.Code)
        /// Returned without an error, with wrong bytes or a wrong status.
        case falseSuccess(String)
        /// Failed, but not with an SSHError (or, for a forward, with a clean EOF).
        case untypedError(String)
        case hang
    }

    /// What a run left behind, beside its outcome.
    struct Leftovers {
        /// The destination exists after a failure, or local files that are not it.
        var partialDestination = 0
        /// Temporary files on the server after a failed upload (the connection was gone,
        /// so nothing could remove them).
        var remoteTemporaryFiles = 0
        /// The whole new file at the destination after an upload failed with the answer to
        /// its rename lost (the server renamed; no client can know): not a partial file.
        var wholeAfterLostAnswer = 0
    }

    static let kinds: [FaultProxy.Kind] = [
        .close, .reset, .flip, .stall, .delay(.milliseconds(200)), .throttle(bytesPerSecond: 2 << 20),
    ]
    static let payloadSize = 3 << 20
    static let forwardSize = 2 << 20

    /// The server, the known data and the places the workloads use.
    final class Fixture: Sendable {
        let server: TestServer
        let echo: EchoServer
        let payload: [UInt8]
        let forwardPayload: [UInt8]
        /// Readable by the test user: the source of exec, stream and download.
        let localDir: String
        var sourcePath: String { localDir + "/payload" }
        /// Writable by the test user: uploads land here.
        let uploadDir: String
        /// Downloads land here (a fresh directory per run, inside).
        let downloadRoot: String

        init(server: TestServer, uploadDir: String) throws {
            self.server = server
            echo = try EchoServer()
            var g = Reliability.generator("matrix-payload")
            payload = (0..<FaultMatrixTests.payloadSize).map { _ in UInt8.random(in: 0...255, using: &g) }
            forwardPayload = Array(payload[0..<FaultMatrixTests.forwardSize])
            localDir = try TestPaths.makeTemporaryDirectory("matrix-src")
            downloadRoot = try TestPaths.makeTemporaryDirectory("matrix-dst")
            self.uploadDir = uploadDir
            FileManager.default.createFile(atPath: localDir + "/payload", contents: Data(payload),
                                           attributes: [.posixPermissions: 0o644])
        }

        func remove() {
            echo.stop()
            for d in [localDir, downloadRoot, uploadDir] { try? FileManager.default.removeItem(atPath: d) }
        }
    }

    /// The runs' configuration: keepalive 1 s × 2, a 5 s connect bound.
    static func configuration(_ server: TestServer, port: Int) -> SSHConfiguration {
        var config = server.configuration(connectTimeout: .seconds(5))
        config.port = port
        config.keepalive = SSHKeepalive(interval: .seconds(1), maxMissed: 2)
        return config
    }

    // MARK: one run

    /// Connects through the proxy, runs `workload`, closes; the outcome and what it left.
    static func run(_ workload: Workload, _ fixture: Fixture, through proxy: FaultProxy, tag: String) async
        -> (Outcome, Leftovers)
    {
        let config = configuration(fixture.server, port: proxy.port)
        let downloadDir = fixture.downloadRoot + "/" + tag
        try? FileManager.default.createDirectory(atPath: downloadDir, withIntermediateDirectories: false)
        let uploadTarget = fixture.uploadDir + "/up-" + tag
        let result = await finishes(within: .seconds(20)) {
            try await SSHClient.withConnection(config) { conn in
                try await perform(workload, on: conn, fixture, downloadTo: downloadDir + "/dst", uploadTo: uploadTarget)
            }
        }
        var left = Leftovers()
        let outcome: Outcome
        switch result {
        case nil:
            outcome = .hang
        case .success(let verdict):
            outcome = verdict
        case .failure(let e as SSHError):
            outcome = .typedError(e.code)
        case .failure(let e):
            outcome = .untypedError("\(e)")
        }
        let failed = if case .correct = outcome { false } else { true }
        // what is on disk now: after a failure no destination, and no other file anywhere
        let localFiles = (try? FileManager.default.contentsOfDirectory(atPath: downloadDir)) ?? []
        left.partialDestination += localFiles.filter { failed || $0 != "dst" }.count
        if workload == .upload {
            let remoteLeft = ((try? FileManager.default.contentsOfDirectory(atPath: fixture.uploadDir)) ?? [])
                .filter { $0.contains("up-" + tag) }
            if failed && remoteLeft.contains("up-" + tag) {
                let got = FileManager.default.contents(atPath: uploadTarget).map { [UInt8]($0) }
                if case .typedError(let code) = outcome, SFTPClient.outcomeUnknown(SSHError(code, "")), got == fixture.payload {
                    left.wholeAfterLostAnswer += 1
                } else {
                    left.partialDestination += 1
                }
            }
            left.remoteTemporaryFiles += remoteLeft.filter { $0 != "up-" + tag }.count
            for f in remoteLeft { try? FileManager.default.removeItem(atPath: fixture.uploadDir + "/" + f) }
        }
        try? FileManager.default.removeItem(atPath: downloadDir)
        return (outcome, left)
    }

    /// The workload on an open connection: `.correct` when every byte and the exit
    /// status are right, else what was wrong; throws what the library threw.
    static func perform(_ workload: Workload, on conn: SSHConnection, _ fixture: Fixture,
                        downloadTo local: String, uploadTo remote: String) async throws -> Outcome {
        let source = fixture.sourcePath
        switch workload {
        case .exec:
            let r = try await conn.execute("cat \(source); exit 7", outputLimit: 8 << 20)
            if r.stdout != fixture.payload { return .falseSuccess("exec: \(r.stdout.count) bytes, not the payload") }
            if r.exitStatus != .exited(7) { return .falseSuccess("exec: status \(r.exitStatus)") }
            return .correct
        case .stream:
            let cmd = try await conn.startCommand("cat \(source); exit 5")
            let out = try await cmd.stdout.collect(upTo: 8 << 20)
            let status = try await cmd.exitStatus()
            if out != fixture.payload { return .falseSuccess("stream: \(out.count) bytes, not the payload") }
            if status != .exited(5) { return .falseSuccess("stream: status \(status)") }
            return .correct
        case .download:
            let sftp = try await conn.openSFTP()
            let n = try await sftp.download(SFTPPath(source), to: local)
            let got = FileManager.default.contents(atPath: local).map { [UInt8]($0) }
            if n != UInt64(fixture.payload.count) || got != fixture.payload {
                return .falseSuccess("download: \(n) reported, \(got?.count ?? -1) on disk")
            }
            return .correct
        case .upload:
            let sftp = try await conn.openSFTP()
            let n = try await sftp.upload(source, to: SFTPPath(remote))
            let got = FileManager.default.contents(atPath: remote).map { [UInt8]($0) }
            if n != UInt64(fixture.payload.count) || got != fixture.payload {
                return .falseSuccess("upload: \(n) reported, \(got?.count ?? -1) on the server")
            }
            return .correct
        case .forward:
            let failures = Mutex<[SSHError]>([])
            var options = SSHForwardOptions()
            options.eventHandler = { event in
                if case .failed(let e) = event.kind { failures.withLock { $0.append(e) } }
            }
            let forward = try conn.forwardLocalPort(to: .tcp(host: "127.0.0.1", port: fixture.echo.port), options: options)
            defer { Task { await forward.close() } }
            guard let port = forward.port else { return .untypedError("forward: no port") }
            let fd = SocketClient.connect(port: port)
            guard fd >= 0 else { return .untypedError("forward: connect errno \(errno)") }
            let o = await SocketClient.exchange(fd, send: fixture.forwardPayload, timeout: .seconds(19))
            close(fd)
            if o.received == fixture.forwardPayload && o.sawEOF { return .correct }
            if let e = o.readError {
                // a reset is how a broken forward shows on a socket; the forward says why
                if let why = failures.withLock({ $0.first }) { return .typedError(why.code) }
                return .typedError(e == ECONNRESET ? .connectionLost : .systemError)
            }
            if !o.sawEOF { return .hang }
            // a clean end of stream with bytes missing or wrong: the client cannot tell
            return .falseSuccess("forward: clean EOF after \(o.received.count) of \(fixture.forwardPayload.count) bytes"
                + (o.received == Array(fixture.forwardPayload.prefix(o.received.count)) ? "" : " (bytes differ)"))
        }
    }

    // MARK: calibration

    /// Byte counts of a clean run: after authentication and at the end, server→client
    /// and both ways together.
    struct Calibration {
        var connectedS2C = 0, endS2C = 0
        var connectedBoth = 0, endBoth = 0

        /// Ten offsets: the banner, the key exchange, authentication, the transfer.
        func offsets(_ direction: FaultProxy.Direction) -> [Int] {
            let (a, t) = direction == .both ? (connectedBoth, endBoth) : (connectedS2C, endS2C)
            let transfer = max(1, t - a)
            return [1, 21, a / 5, 2 * a / 5, 3 * a / 5, 4 * a / 5, a - 40,
                    a + transfer / 10, a + transfer / 2, a + 9 * transfer / 10]
        }
    }

    static func calibrate(_ workload: Workload, _ fixture: Fixture) async throws -> Calibration {
        let proxy = try FaultProxy(target: fixture.server.port)
        defer { proxy.stop() }
        let config = configuration(fixture.server, port: proxy.port)
        var cal = Calibration()
        let conn = try await SSHClient.connect(config)
        try await Task.sleep(for: .milliseconds(50))
        let connected = proxy.forwarded
        cal.connectedS2C = connected.serverToClient
        cal.connectedBoth = connected.clientToServer + connected.serverToClient
        let tag = "calibrate-\(workload.rawValue)"
        try? FileManager.default.createDirectory(atPath: fixture.downloadRoot + "/" + tag, withIntermediateDirectories: false)
        let verdict = try await perform(workload, on: conn, fixture, downloadTo: fixture.downloadRoot + "/\(tag)/dst",
                                        uploadTo: fixture.uploadDir + "/up-" + tag)
        guard case .correct = verdict else { throw FixtureError("clean \(workload) run failed: \(verdict)") }
        try await Task.sleep(for: .milliseconds(50))
        let end = proxy.forwarded
        cal.endS2C = end.serverToClient
        cal.endBoth = end.clientToServer + end.serverToClient
        await conn.close()
        try? FileManager.default.removeItem(atPath: fixture.downloadRoot + "/" + tag)
        try? FileManager.default.removeItem(atPath: fixture.uploadDir + "/up-" + tag)
        return cal
    }

    // MARK: the matrix

}

extension FaultMatrixTests {
    /// Tests that count this process's fds, threads, sockets or memory: they run alone,
    /// before the other tests run in parallel (Support/Tiers.swift, scripts/test.sh).
    @Suite("Reliability: fault matrix (alone)", .tags(.exclusive), .serialized)
    struct Exclusive {
        @Test func everyFaultAtEveryOffsetEndsCorrectOrWithATypedError() async throws {
            let server = try TestServer.start(name: "matrix")
            defer { server.stop() }
            let setup = try await SSHClient.connect(server.configuration())
            let uploadDir = try await setup.makeRemoteTemporaryDirectory("matrix-up")
            await setup.close()
            let fixture = try Fixture(server: server, uploadDir: uploadDir)
            defer { fixture.remove() }
            var g = Reliability.generator("matrix")
            let socketsBefore = countSockets()

            var runs = 0, correct = 0, typed = 0, hangs = 0, partial = 0, remoteTemp = 0, notFired = 0, wholeAfterLostAnswer = 0
            var falseSuccesses: [String] = [], untyped: [String] = []
            var codes: [String: Int] = [:]
            let started = ContinuousClock.now
            for (w, workload) in Workload.allCases.enumerated() {
                let cal = try await FaultMatrixTests.calibrate(workload, fixture)
                for (k, kind) in FaultMatrixTests.kinds.enumerated() {
                    for (d, direction) in FaultProxy.Direction.allCases.enumerated() {
                        let all = cal.offsets(direction)
                        let picked = Reliability.full ? all : [all[(Int(g.next() % 10) + w + k + d) % all.count]]
                        for offset in picked {
                            let fault = FaultProxy.InjectedFault(kind: kind, direction: direction, offset: offset)
                            let proxy = try FaultProxy(target: server.port, injecting: fault)
                            let (outcome, left) = await FaultMatrixTests.run(workload, fixture, through: proxy, tag: "\(runs)")
                            if proxy.fired.load(ordering: .relaxed) == 0 { notFired += 1 }
                            proxy.stop()
                            runs += 1
                            partial += left.partialDestination
                            remoteTemp += left.remoteTemporaryFiles
                            wholeAfterLostAnswer += left.wholeAfterLostAnswer
                            let label = "\(workload) \(fault)"
                            if left.partialDestination > 0 { Issue.record("partial destination: \(label)") }
                            switch outcome {
                            case .correct: correct += 1
                            case .typedError(let code):
                                typed += 1
                                codes["\(code)", default: 0] += 1
                            case .falseSuccess(let why):
                                falseSuccesses.append("\(label): \(why)")
                                Issue.record("false success: \(label): \(why)")
                            case .untypedError(let why):
                                untyped.append("\(label): \(why)")
                                Issue.record("untyped error: \(label): \(why)")
                            case .hang:
                                hangs += 1
                                Issue.record("hang: \(label)")
                            }
                        }
                    }
                }
            }
            let elapsed = Reliability.ms(ContinuousClock.now - started) / 1000
            let part = "fault matrix"
            Reliability.record(part, "runs (faults x directions x offsets x workloads)", runs)
            Reliability.record(part, "correct results", correct)
            Reliability.record(part, "typed errors", typed)
            Reliability.record(part, "typed errors by code", codes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
            Reliability.record(part, "false successes", falseSuccesses.count, goal: "0")
            Reliability.record(part, "untyped errors", untyped.count, goal: "0")
            Reliability.record(part, "hangs (nothing after 20 s)", hangs, goal: "0")
            Reliability.record(part, "partial destination files", partial, goal: "0")
            Reliability.record(part, "server temp files after failed uploads", remoteTemp)
            Reliability.record(part, "whole uploads whose rename's answer was lost (reported as failed)", wholeAfterLostAnswer)
            Reliability.record(part, "faults past the end of the session (not fired)", notFired)
            Reliability.record(part, "wall time (s)", String(format: "%.1f", elapsed))
            Reliability.record(part, "seed", Reliability.seed)
            for f in falseSuccesses + untyped { print("  \(f)") }
            #expect(falseSuccesses.isEmpty && untyped.isEmpty && hangs == 0 && partial == 0)
            #expect(await socketsSettle(atMost: socketsBefore), "sockets left open by the matrix")
        }
    }
}
