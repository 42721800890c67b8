import Foundation
import SSHKit
import Synchronization
import Testing

/// What the cancellation storm found, one test each.
@Suite("Reliability: cancellation regressions", .tags(.integration), .serialized)
struct CancellationRegressionTests {
    /// A command cancelled while its exec request waits for the server's reply used to
    /// be closed at once: sshd started it anyway and, without a terminal, let it run on.
    /// And a TERM sent right after the reply can reach sshd before its child made its
    /// process group (sshd logs `killpg: No such process`) and is lost. Now the worker
    /// waits for the reply, then sends TERM until the server reports the end (at most
    /// 10 s without a terminal), then closes.
    @Test func aCommandCancelledWhileItStartsDoesNotRunOnTheServer() async throws {
        let server = try TestServer.start(name: "cancel-start")
        defer { server.stop() }
        let conn = try await SSHClient.connect(server.configuration())
        let marker = "sleep 6\(Int.random(in: 10_000...99_999))"
        for i in 0..<60 {
            let t = Task { try await conn.startCommand(marker) }
            // from before the open to after the start: most land while a request is pending
            try await Task.sleep(for: .microseconds(50 * (i % 30)))
            t.cancel()
            if let cmd = try? await t.value { cmd.cancel() }
        }
        let settled = await eventually(timeout: .seconds(10)) {
            let out = (try? TestServer.run("/usr/bin/pgrep", ["-f", "-x", marker], allowFailure: true)) ?? ""
            return out.isEmpty
        }
        #expect(settled, "cancelled commands still run on the server")
        if !settled { print((try? TestServer.run("/usr/bin/pgrep", ["-a", "-f", marker], allowFailure: true)) ?? "") }
        #expect(try await conn.execute("echo ok").stdoutString == "ok\n")
        await conn.close()
    }

    /// Cancelled commands used to hold the server's session slots: the worker kept a
    /// cancelled channel until the server closed it, and a cancelled stream whose
    /// window was full never saw the end the server could not send. On a server with
    /// OpenSSH's default `MaxSessions 10`, most commands of a cancel storm then failed to
    /// open their channel. Now every cancel, one after another or four loops at once,
    /// leaves a slot free for the next command, and nothing cancelled runs on.
    @Test func cancelledCommandsGiveTheServersSessionsBack() async throws {
        let server = try TestServer.start(name: "cancel-slots", extraConfig: ["MaxSessions 10"])
        defer { server.stop() }
        let conn = try await SSHClient.connect(server.configuration())
        let tag = Int.random(in: 10_000...99_999)
        let sleeper = "sleep 5.\(tag)"
        let streamer = "head -c 1\(tag)000000000 /dev/zero"
        let wrong = Mutex<[String]>([])
        let ran = Atomic<Int>(0)
        let cancelOne: @Sendable (Int) async -> Void = { i in
            let t = Task { [conn] in
                if i % 2 == 0 {
                    _ = try await conn.execute(sleeper)
                } else {
                    try await conn.withCommand(streamer) { cmd in for try await _ in cmd.stdout {} }
                }
            }
            try? await Task.sleep(for: .milliseconds(Int.random(in: 0...50)))
            t.cancel()
            let r = await finishes(within: .seconds(10)) { try await t.value }
            ran.add(1, ordering: .relaxed)
            switch r {
            case nil: wrong.withLock { $0.append("\(i): no return 10 s after the cancel") }
            case .failure(let e as SSHError)? where e.code == .cancelled: break
            case .failure(let e)?: wrong.withLock { $0.append("\(i): \(e)") }
            case .success?: wrong.withLock { $0.append("\(i): finished although cancelled") }
            }
        }
        for i in 0..<60 { await cancelOne(i) }
        await withTaskGroup(of: Void.self) { group in
            for loop in 0..<4 {
                group.addTask { for i in 0..<30 { await cancelOne(loop + i) } }
            }
        }
        // at once, without a retry: a slot is free
        let after = await finishes(within: .seconds(10)) { try await conn.execute("echo ok") }
        #expect((try? after?.get())?.stdoutString == "ok\n", "after the storm: \(String(describing: after))")
        let failed = wrong.withLock { $0 }
        #expect(failed.count == 0, "\(failed.count) of \(ran.load(ordering: .relaxed)) cancels ended otherwise: \(failed.prefix(10))")
        let settled = await eventually(timeout: .seconds(5)) {
            let out = (try? TestServer.run("/usr/bin/pgrep", ["-f", "\(sleeper)|\(streamer)"], allowFailure: true)) ?? ""
            return out.isEmpty
        }
        #expect(settled, "cancelled commands still run on the server")
        await conn.close()
    }

    /// Waiting for an exit status, a tunnel's close or a forward's stop ends at once when
    /// the waiting task is cancelled, and the thing waited for goes on.
    @Test func waitsEndWithTheirTaskAndWhatTheyWaitedForGoesOn() async throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        try await SSHClient.withConnection(TestServer.shared.configuration()) { conn in
            let cmd = try await conn.startCommand("sleep 2; exit 3")
            let waiter = Task { try await cmd.exitStatus() }
            try await Task.sleep(for: .milliseconds(50))
            waiter.cancel()
            let r = await finishes(within: .seconds(1)) { try await waiter.value }
            #expect(sshError(r)?.code == .cancelled, "\(String(describing: r))")
            // the command went on, and a later wait gets its status
            #expect(try await cmd.exitStatus() == .exited(3))

            let tunnel = try await conn.openTunnel(toHost: "127.0.0.1", port: echo.port)
            let closing = Task { try await tunnel.waitUntilClosed() }
            try await Task.sleep(for: .milliseconds(50))
            closing.cancel()
            let c = await finishes(within: .seconds(1)) { try await closing.value }
            #expect(sshError(c)?.code == .cancelled, "\(String(describing: c))")
            try await tunnel.input.write([1, 2, 3])
            var it = tunnel.output.makeAsyncIterator()
            #expect(try await it.next() == [1, 2, 3])
            tunnel.cancel()

            let forward = try conn.forwardLocalPort(to: .tcp(host: "127.0.0.1", port: echo.port))
            let stopping = Task { () async throws -> Void in try await forward.waitUntilClosed() }
            try await Task.sleep(for: .milliseconds(50))
            stopping.cancel()
            let s = await finishes(within: .seconds(1)) { try await stopping.value }
            #expect(sshError(s)?.code == .cancelled, "waitUntilClosed did not end with its task: \(String(describing: s))")
            let fd = SocketClient.connect(port: try #require(forward.port))
            #expect(fd >= 0, "the forward stopped")
            if fd >= 0 {
                #expect(SocketClient.writeAll(fd, [7]))
                #expect(SocketClient.readExactly(fd, 1) == [7])
                close(fd)
            }
            await forward.close()
            try await forward.waitUntilClosed()
        }
    }

    /// Reading a whole file through SFTP copied each reply byte by byte into place
    /// (25 ms per 256 KiB in a debug build), and a cancel waited behind each copy.
    @Test func aCancelledWholeFileReadReturnsPromptly() async throws {
        let dir = try TestPaths.makeTemporaryDirectory("cancel-read")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        FileManager.default.createFile(atPath: dir + "/f", contents: Data(randomBytes(8 << 20)),
                                       attributes: [.posixPermissions: 0o644])
        try await SSHClient.withConnection(TestServer.shared.configuration()) { conn in
            let sftp = try await conn.openSFTP()
            var worst = 0.0
            for i in 0..<10 {
                let t = Task { try await sftp.contentsOfFile(SFTPPath(dir + "/f"), limit: 16 << 20) }
                try await Task.sleep(for: .milliseconds(2 + i))
                let start = ContinuousClock.now
                t.cancel()
                let r = await finishes(within: .seconds(5)) { try await t.value }
                #expect(r != nil, "the read did not end after its cancel")
                worst = max(worst, Reliability.ms(ContinuousClock.now - start))
            }
            print("cancel of a whole-file read: worst \(String(format: "%.2f", worst)) ms")
            let all = try await sftp.contentsOfFile(SFTPPath(dir + "/f"), limit: 16 << 20)
            #expect(all.count == 8 << 20)
        }
    }
}
