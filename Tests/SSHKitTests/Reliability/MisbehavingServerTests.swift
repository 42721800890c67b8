import Foundation
import SSHKit
import Synchronization
import Testing

/// Part 2 of the reliability suite: servers that misbehave. Banners that never end or
/// are huge, MaxStartups refusing a burst, sshd's ChannelTimeout and
/// UnusedConnectionTimeout closing channels and connections, a server killed or frozen in
/// each phase (key exchange, authentication, and with a channel, an SFTP read and a forward
/// all running), and a partition. Each ends in the right result or a typed error in time,
/// and what the connection's other channels delivered until the end is correct.
@Suite("Reliability: misbehaving servers", .tags(.integration), .serialized)
struct MisbehavingServerTests {
    static let part = "2 servers"
    static let keepalive = SSHKeepalive(interval: .seconds(1), maxMissed: 2)

    static func configuration(_ server: TestServer, port: Int? = nil, connectTimeout: Duration = .seconds(3))
        -> SSHConfiguration
    {
        var config = server.configuration(connectTimeout: connectTimeout)
        if let port { config.port = port }
        config.keepalive = keepalive
        return config
    }

    /// Connects to a scripted server; the error, and the seconds until it came.
    static func connectFailure(port: Int, connectTimeout: Duration) async -> (SSHError?, Double) {
        var config = SSHConfiguration(host: "127.0.0.1", port: port, user: "nobody", authentication: .password("x"),
                                      hostKeyPolicy: .insecureAcceptAnyHostKey, connectTimeout: connectTimeout)
        config.keepalive = keepalive
        let c = config
        return await measure { await expectSSHError { try await SSHClient.connect(c) } }
    }

    // MARK: banners

    @Test func aBannerLineThatNeverEndsIsRefusedAtOnce() async throws {
        // "SSH-2.0-" and then an endless line at full speed
        let server = try ScriptedServer { fd, stopped in
            guard ScriptedServer.send(fd, Array("SSH-2.0-".utf8), stopped) else { return }
            let chunk = [UInt8](repeating: UInt8(ascii: "A"), count: 4096)
            while ScriptedServer.send(fd, chunk, stopped) {}
        }
        defer { server.stop() }
        let (e, seconds) = await Self.connectFailure(port: server.port, connectTimeout: .seconds(5))
        #expect(e?.code == .protocolError || e?.code == .keyExchangeFailed, "\(String(describing: e))")
        #expect(seconds < 2, "\(seconds) s")
        Reliability.record(Self.part, "endless banner line", "\(e?.code.description ?? "none") after \(String(format: "%.2f", seconds)) s",
                           goal: "typed error, no hang")
    }

    @Test func aBannerTrickledForeverEndsAtTheConnectTimeout() async throws {
        // one byte every 50 ms, never a newline: the line stays under libssh's 256-byte limit for 12 s
        let server = try ScriptedServer { fd, stopped in
            for b in Array("SSH-2.0-slow".utf8) + [UInt8](repeating: UInt8(ascii: "z"), count: 240) {
                guard ScriptedServer.send(fd, [b], stopped), !ScriptedServer.peerGone(fd, waiting: 50, stopped) else { return }
            }
            _ = ScriptedServer.peerGone(fd, waiting: 20_000, stopped)
        }
        defer { server.stop() }
        let (e, seconds) = await Self.connectFailure(port: server.port, connectTimeout: .seconds(2))
        #expect(e?.code == .connectTimeout, "\(String(describing: e))")
        #expect(seconds >= 1.5 && seconds < 4, "\(seconds) s")
        Reliability.record(Self.part, "banner trickled forever (connect timeout 2 s)",
                           "\(e?.code.description ?? "none") after \(String(format: "%.2f", seconds)) s", goal: "connectTimeout")
    }

    @Test func aHugeBannerInFrontOfARealServerIsAccepted() async throws {
        // 1,000 lines (200 KB) before sshd's own version line, as RFC 4253 allows
        let sshd = TestServer.shared
        let line = Array((String(repeating: "y", count: 198) + "\r\n").utf8)
        let prelude = Array((0..<1000).map { _ in line }.joined())
        let server = try ScriptedServer { fd, stopped in
            guard ScriptedServer.send(fd, prelude, stopped) else { return }
            let upstream = SocketClient.connect(port: sshd.port)
            guard upstream >= 0 else { return }
            defer { close(upstream) }
            ScriptedServer.splice(fd, upstream, stopped)
        }
        defer { server.stop() }
        let conn = try await SSHClient.connect(Self.configuration(sshd, port: server.port, connectTimeout: .seconds(10)))
        let r = try await conn.execute("echo through")
        #expect(r.stdoutString == "through\n")
        await conn.close()
        Reliability.record(Self.part, "1,000 lines (200 KB) before a real banner", "connected", goal: "connected")
    }

    // MARK: MaxStartups

    @Test func maxStartupsRefusalsAreTypedAndTheAdmittedConnectionsWork() async throws {
        let server = try TestServer.start(name: "maxstartups", extraConfig: ["MaxStartups 3", "LoginGraceTime 20"])
        defer { server.stop() }
        // three connections that never speak fill every unauthenticated slot: sshd drops the
        // rest. The fixture's readiness probe holds a slot until its sshd child sees it gone,
        // so each holder is opened until sshd greets it (a dropped one reads an end instead).
        var holders: [Int32] = []
        for _ in 0..<50 where holders.count < 3 {
            let fd = SocketClient.connect(port: server.port)
            if fd >= 0 && SocketClient.readExactly(fd, 8, timeout: .seconds(2)) == Array("SSH-2.0-".utf8) {
                holders.append(fd)
            } else {
                if fd >= 0 { close(fd) }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        #expect(holders.count == 3)
        var refused: [SSHError.Code] = []
        for _ in 0..<5 {
            let e = await expectSSHError { try await SSHClient.connect(Self.configuration(server)) }
            if let e { refused.append(e.code) }
        }
        #expect(refused.count == 5)
        let lost: Set<SSHError.Code> = [.disconnected, .connectionLost, .keyExchangeFailed, .protocolError]
        #expect(refused.allSatisfy(lost.contains), "\(refused)")
        for fd in holders where fd >= 0 { close(fd) }
        // sshd frees a slot when the holder's child has seen the end and exited, which a
        // loaded machine may take a while to do: the burst starts once no child is left
        // (bounded: 15 s)
        for _ in 0..<150 {
            let children = try TestServer.run("/bin/sh", ["-c", "pgrep -P \(server.pid) | wc -l"])
            if children.trimmingCharacters(in: .whitespacesAndNewlines) == "0" { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        try await Task.sleep(for: .milliseconds(100))

        // a burst: every attempt connects and works, or is refused with a typed error, in time
        let burst = Reliability.full ? 60 : 24
        let outcomes = await withTaskGroup(of: Result<Bool, SSHError>?.self) { group in
            for _ in 0..<burst {
                group.addTask {
                    await finishes(within: .seconds(20)) { () async throws -> Bool in
                        let conn = try await SSHClient.connect(Self.configuration(server, connectTimeout: .seconds(10)))
                        let ok = try await conn.execute("echo admitted").stdoutString == "admitted\n"
                        await conn.close()
                        return ok
                    }.map { r in r.mapError { ($0 as? SSHError) ?? SSHError(.systemError, "untyped: \($0)") } }
                }
            }
            var all: [Result<Bool, SSHError>?] = []
            for await o in group { all.append(o) }
            return all
        }
        let hangs = outcomes.filter { $0 == nil }.count
        let admitted = outcomes.filter { if case .success(true)? = $0 { return true }; return false }.count
        let wrong = outcomes.filter { if case .success(false)? = $0 { return true }; return false }.count
        let errors = outcomes.compactMap { o -> SSHError.Code? in if case .failure(let e)? = o { return e.code }; return nil }
        #expect(hangs == 0)
        #expect(wrong == 0)
        #expect(admitted >= 3, "only \(admitted) of \(burst) admitted")
        #expect(errors.allSatisfy(lost.contains), "\(errors)")
        let byCode = Dictionary(grouping: errors, by: \.description).map { "\($0.key) \($0.value.count)" }.sorted().joined(separator: ", ")
        Reliability.record(Self.part, "MaxStartups 3, slots held: refused", "\(refused.count) of 5 (\(Set(refused.map(\.description)).sorted().joined(separator: ", ")))",
                           goal: "all typed")
        Reliability.record(Self.part, "MaxStartups 3, burst of \(burst)", "\(admitted) admitted and correct, \(errors.count) refused (\(byCode)), \(hangs) hangs",
                           goal: "typed, 0 hangs")
    }

    // MARK: sshd's timeouts

    @Test func channelTimeoutClosesTheIdleChannelAndTheBusyOneGoesOn() async throws {
        let server = try TestServer.start(name: "channeltimeout", extraConfig: ["ChannelTimeout session:command=2s"])
        defer { server.stop() }
        let conn = try await SSHClient.connect(Self.configuration(server))
        let idle = Task { try await conn.execute("sleep 30") }
        let busy = Task { try await conn.execute("i=0; while [ $i -lt 12 ]; do echo $i; i=$((i+1)); sleep 0.5; done") }
        let (idleOutcome, seconds) = await measure { await idle.result }
        let busyResult = try await busy.value
        #expect(busyResult.stdoutString == (0..<12).map { "\($0)\n" }.joined())
        #expect(busyResult.exitStatus == .exited(0))
        // sshd closes the idle channel without an exit status: a result that says so, or a typed error
        var what = ""
        switch idleOutcome {
        case .success(let r):
            what = "result, status \(r.exitStatus)"
            #expect(r.exitStatus != .exited(0), "\(r.exitStatus)")
        case .failure(let e as SSHError):
            what = "\(e.code.description)"
        case .failure(let e):
            Issue.record("untyped: \(e)")
        }
        // sshd checks its channel timers coarsely: the idle channel goes between 1 and 4 s
        #expect(seconds >= 0.5 && seconds < 6, "\(seconds) s")
        #expect(try await conn.execute("echo still").stdoutString == "still\n")
        await conn.close()
        Reliability.record(Self.part, "ChannelTimeout session:command=2s: the idle channel",
                           "\(what) after \(String(format: "%.1f", seconds)) s; the busy one complete; the connection works",
                           goal: "typed, others intact")
    }

    @Test func unusedConnectionTimeoutEndsAConnectionWithoutChannels() async throws {
        let server = try TestServer.start(name: "unusedtimeout", extraConfig: ["UnusedConnectionTimeout 2s"])
        defer { server.stop() }
        // with a channel open the whole time, the connection stays
        let kept = try await SSHClient.connect(Self.configuration(server))
        #expect(try await kept.execute("sleep 3; echo kept").stdoutString == "kept\n")
        // without one, sshd closes it after 2 s (keepalives are not channels; `kept` goes
        // the same way once its channel has ended)
        let unused = try await SSHClient.connect(Self.configuration(server))
        let gone = await eventually(timeout: .seconds(8)) { !unused.isConnected }
        #expect(gone, "the unused connection is still up")
        let e = await expectSSHError { try await unused.execute("true") }
        let lost: Set<SSHError.Code> = [.disconnected, .connectionLost]
        #expect(e.map { lost.contains($0.code) } == true, "\(String(describing: e))")
        await kept.close()
        await unused.close()
        Reliability.record(Self.part, "UnusedConnectionTimeout 2s", "the unused connection ends (\(e?.code.description ?? "none")); one with a channel stays",
                           goal: "typed")
    }

    // MARK: killed or frozen before the connection is up

    enum Disaster: String, CaseIterable, Sendable {
        case kill, freeze, partition
    }

    /// The server→client offset just after sshd's version line, inside the key exchange,
    /// from a clean connect through a proxy.
    static func keyExchangeOffset(_ server: TestServer) async throws -> Int {
        let proxy = try FaultProxy(target: server.port)
        defer { proxy.stop() }
        let conn = try await SSHClient.connect(configuration(server, port: proxy.port))
        let banner = (proxy.captured.serverToClient.firstIndex(of: UInt8(ascii: "\n")) ?? 40) + 1
        await conn.close()
        return banner + 40
    }

    /// An AuthorizedKeysCommand that says when sshd is authenticating (a file `in-auth`
    /// in its directory) and then takes 3 s to print the keys: the server is held inside
    /// authentication, where the test kills or freezes it. sshd wants the command and
    /// every directory above it owned by root and writable by nobody else.
    static func installAuthHook() throws -> String {
        let dir = "/usr/local/lib/sshkit-test"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o755])
        let path = dir + "/auth-pause.sh"
        let script = "#!/bin/sh\n# sshkit tests: announce authentication, pause, print the keys\n"
            + ": > \"$1/in-auth\"\nsleep 3\nexec cat \"$1/authorized_keys\"\n"
        if (try? String(contentsOfFile: path, encoding: .utf8)) != script {
            try script.write(toFile: path + ".new", atomically: false, encoding: .utf8)
            chmod(path + ".new", 0o755)
            rename(path + ".new", path)
        }
        return path
    }

    @Test(arguments: ["key exchange", "authentication"], [Disaster.kill, .freeze])
    func aServerKilledOrFrozenBeforeTheConnectionIsUpIsTyped(_ phase: String, _ disaster: Disaster) async throws {
        let hook = try TestPaths.makeTemporaryDirectory("auth-hook")
        defer { try? FileManager.default.removeItem(atPath: hook) }
        let extra = phase == "authentication"
            ? ["AuthorizedKeysFile none", "AuthorizedKeysCommand \(try Self.installAuthHook()) \(hook)", "AuthorizedKeysCommandUser root"]
            : []
        let server = try TestServer.start(name: "phase-\(disaster.rawValue)", extraConfig: extra)
        defer { server.stop() }
        try FileManager.default.copyItem(atPath: server.key("authorized_keys"), toPath: hook + "/authorized_keys")
        var proxy: FaultProxy?
        defer { proxy?.stop() }
        var config = Self.configuration(server, connectTimeout: .seconds(3))
        if phase == "key exchange" {
            let offset = try await Self.keyExchangeOffset(server)
            let p = try FaultProxy(target: server.port, injecting: .init(kind: .stall, direction: .serverToClient, offset: offset))
            proxy = p
            config.port = p.port
        }
        let c = config
        let attempt = Task { try await SSHClient.connect(c) }
        let reached = await eventually(timeout: .seconds(5)) {
            if let proxy { return proxy.fired.load(ordering: .relaxed) > 0 }
            return FileManager.default.fileExists(atPath: hook + "/in-auth")
        }
        #expect(reached, "the connect never reached \(phase)")
        let pids = server.sessionProcessTree()
        #expect(!pids.isEmpty)
        for p in pids { kill(p, disaster == .kill ? SIGKILL : SIGSTOP) }
        defer { for p in pids { kill(p, SIGCONT) } }
        let (e, seconds) = await measure { await expectSSHError { try await attempt.value } }
        // killed: the socket closes and the client learns it at once; frozen: the connect timeout
        let expected: Set<SSHError.Code> = disaster == .kill ? [.disconnected, .connectionLost, .keyExchangeFailed, .authenticationFailed]
            : [.connectTimeout]
        #expect(e.map { expected.contains($0.code) } == true, "\(String(describing: e))")
        #expect(seconds < (disaster == .kill ? 1.5 : 4), "\(seconds) s")
        Reliability.record(Self.part, "server \(disaster == .kill ? "killed" : "frozen") in \(phase)",
                           "\(e?.code.description ?? "none") after \(String(format: "%.2f", seconds)) s", goal: "typed, no hang")
    }

    // MARK: killed, frozen or partitioned with everything running

    /// What one activity saw: its bytes were right up to the end, how it ended.
    struct Activity: Sendable {
        var name: String
        var verifiedBytes = 0
        var corrupt: String?
        var end: String = "?"
        var typed = false

        /// Runs `body` and notes how it ended: by itself, with an SSHError, or untyped.
        static func run(_ name: String, _ body: (inout Activity) async throws -> Void) async -> Activity {
            var a = Activity(name: name)
            do {
                try await body(&a)
            } catch let e as SSHError {
                a.end = e.code.description
                a.typed = true
            } catch {
                a.end = "untyped: \(error)"
            }
            return a
        }
    }

    @Test(arguments: Disaster.allCases)
    func everyChannelIsCorrectUntilATypedEnd(_ disaster: Disaster) async throws {
        let ns = disaster == .partition ? try NetworkNamespace.create() : nil
        defer { ns?.destroy() }
        let server = try TestServer.start(name: "all-\(disaster.rawValue)", namespace: ns)
        defer { server.stop() }
        // on a Unix socket: sshd reaches it from inside a network namespace too
        let echo = try EchoServer(unixSocket: "/tmp/sshkit-echo-\(getpid())-\(disaster.rawValue).sock")
        defer { echo.stop() }
        let conn = try await SSHClient.connect(Self.configuration(server))
        let forward = try conn.forwardLocalPort(to: .unixSocket(path: echo.socketPath!))
        defer { Task { await forward.close() } }
        let sftp = try await conn.openSFTP()

        // a streamed command: consecutive numbers, one per line
        let stream = Task {
            await Activity.run("stream") { a in
                var expected = 1, partial: [UInt8] = []
                let cmd = try await conn.startCommand("seq 1 1000000000")
                for try await chunk in cmd.stdout {
                    partial += chunk
                    while let nl = partial.firstIndex(of: UInt8(ascii: "\n")) {
                        if String(decoding: partial[..<nl], as: UTF8.self) != String(expected) {
                            a.corrupt = "line \(expected) read as \(String(decoding: partial[..<nl], as: UTF8.self).prefix(40))"
                        }
                        a.verifiedBytes += nl + 1
                        expected += 1
                        partial.removeSubrange(...nl)
                    }
                    if a.corrupt != nil { break }
                }
                a.end = "ended without an error"
            }
        }
        // an SFTP read of an endless file: zeros
        let file = Task {
            await Activity.run("sftp") { a in
                let f = try await sftp.openFile(SFTPPath("/dev/zero"))
                var offset: UInt64 = 0
                while true {
                    let chunk = try await f.read(at: offset, count: 32 << 10)
                    if chunk.contains(where: { $0 != 0 }) { a.corrupt = "non-zero byte near \(offset)"; return }
                    if chunk.isEmpty { a.end = "end of file"; return }
                    offset += UInt64(chunk.count)
                    a.verifiedBytes += chunk.count
                }
            }
        }
        // the forward: a pattern echoed back
        guard let port = forward.port else { throw FixtureError("forward without a port") }
        // on a thread of its own: a blocking loop on one of the two pool threads would
        // hold back every task of this test (the kill included) until it ended
        let forwarded = Task { () -> Activity in
            await withCheckedContinuation { c in Thread.detachNewThread { c.resume(returning: Self.pumpPattern(port: port)) } }
        }
        // a collected exec that never ends by itself
        let exec = Task {
            await Activity.run("exec") { a in
                a.end = "returned \(try await conn.execute("sleep 120").exitStatus)"
            }
        }

        try await Task.sleep(for: .milliseconds(700))
        var frozen: [Int32] = []
        defer { for p in frozen { kill(p, SIGCONT) } }
        switch disaster {
        case .kill:
            for p in server.sessionProcessTree() { kill(p, SIGKILL) }
        case .freeze:
            frozen = server.sessionProcessTree()
            for p in frozen { kill(p, SIGSTOP) }
        case .partition:
            try ns?.iptables(["-A", "INPUT", "-j", "DROP"])
            try ns?.iptables(["-A", "OUTPUT", "-j", "DROP"])
        }
        let hit = ContinuousClock.now
        var activities: [Activity] = []
        var hangs = 0
        for t in [stream, file, forwarded, exec] {
            let done = await finishes(within: .seconds(20)) { await t.value }
            if case .success(let a)? = done { activities.append(a) } else { hangs += 1; t.cancel() }
        }
        let seconds = Self.seconds(ContinuousClock.now - hit)
        #expect(hangs == 0)
        for a in activities {
            #expect(a.corrupt == nil, "\(a.name): \(a.corrupt ?? "")")
            #expect(a.typed, "\(a.name) ended: \(a.end)")
            #expect(a.verifiedBytes > 0 || a.name == "exec", "\(a.name) moved no bytes before the \(disaster)")
        }
        // killed: at once; frozen or partitioned: keepalive's bound (1 s x 2 + 1 s) and some slack
        #expect(seconds < (disaster == .kill ? 3 : 6), "\(seconds) s")
        #expect(!conn.isConnected)
        await conn.close()
        let summary = activities.map { "\($0.name) \($0.end) after \($0.verifiedBytes >> 10) KiB" }.joined(separator: "; ")
        Reliability.record(Self.part, "\(disaster.rawValue) with a stream, an SFTP read, a forward and an exec running",
                           "all typed in \(String(format: "%.1f", seconds)) s, 0 corrupt, \(hangs) hangs (\(summary))",
                           goal: "typed, correct until the end")
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    /// Sends a repeating pattern through the forward and checks what comes back, until the
    /// socket ends (a reset is a forward's typed end) or 30 s pass.
    static func pumpPattern(port: Int) -> Activity {
        var a = Activity(name: "forward")
        let fd = SocketClient.connect(port: port)
        guard fd >= 0 else { a.end = "connect errno \(errno)"; return a }
        defer { close(fd) }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        let pattern = (0..<(64 << 10)).map { UInt8($0 % 251) }
        var sentTotal = 0, received = 0
        var buf = [UInt8](repeating: 0, count: 64 << 10)
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            var p = pollfd(fd: fd, events: Int16(POLLIN) | (sentTotal - received < 1 << 20 ? Int16(POLLOUT) : 0), revents: 0)
            guard poll(&p, 1, 100) > 0 else { continue }
            if p.revents & Int16(POLLOUT) != 0 {
                let start = sentTotal % 251
                let n = pattern[start...].withUnsafeBytes { send(fd, $0.baseAddress, min($0.count, 32 << 10), Int32(MSG_NOSIGNAL)) }
                if n > 0 { sentTotal += n }
                // a reset reported here is consumed: the next read would only see an end of stream
                if n < 0 && errno != EAGAIN && errno != EINTR {
                    a.end = errno == ECONNRESET || errno == EPIPE ? "reset" : "errno \(errno)"
                    a.typed = errno == ECONNRESET || errno == EPIPE
                    return a
                }
            }
            if p.revents & (Int16(POLLIN) | Int16(POLLHUP) | Int16(POLLERR)) != 0 {
                let n = recv(fd, &buf, buf.count, 0)
                if n > 0 {
                    for i in 0..<n where buf[i] != UInt8((received + i) % 251) {
                        a.corrupt = "byte \(received + i) differs"
                        return a
                    }
                    received += n
                    a.verifiedBytes = received
                } else if n == 0 {
                    a.end = "clean end of stream (a false end: the stream was cut)"
                    return a
                } else if errno != EAGAIN && errno != EINTR {
                    a.end = errno == ECONNRESET ? "reset" : "errno \(errno)"
                    a.typed = errno == ECONNRESET
                    return a
                }
            }
        }
        a.end = "no end after 30 s"
        return a
    }
}

extension MisbehavingServerTests {
    /// Tests that count this process's fds, threads, sockets or memory: they run alone,
    /// before the other tests run in parallel (Support/Tiers.swift, scripts/test.sh).
    @Suite("Reliability: misbehaving servers (alone)", .tags(.exclusive), .serialized)
    struct Exclusive {
        @Test func endlessLinesBeforeTheBannerEndAtTheConnectTimeoutInBoundedMemory() async throws {
            // RFC 4253 lets a server send other lines before its version; this one never stops
            let line = Array((String(repeating: "x", count: 200) + "\r\n").utf8)
            let chunk = Array((0..<64).map { _ in line }.joined())
            let sent = Atomic<Int>(0)
            let server = try ScriptedServer { fd, stopped in
                while ScriptedServer.send(fd, chunk, stopped) { sent.add(chunk.count, ordering: .relaxed) }
            }
            defer { server.stop() }
            let before = residentKiB()
            let (e, seconds) = await MisbehavingServerTests.connectFailure(port: server.port, connectTimeout: .seconds(3))
            let growth = residentKiB() - before
            #expect(e?.code == .connectTimeout, "\(String(describing: e))")
            #expect(seconds < 5, "\(seconds) s")
            #expect(sent.load(ordering: .relaxed) > 1 << 20, "the server only sent \(sent.load(ordering: .relaxed)) bytes")
            #expect(growth < 32 << 10 || Reliability.underSanitizer, "resident memory grew \(growth) KiB")
            Reliability.record(MisbehavingServerTests.part, "endless lines before the banner",
                               "\(e?.code.description ?? "none") after \(String(format: "%.2f", seconds)) s, "
                               + "\(sent.load(ordering: .relaxed) >> 20) MiB read, RSS +\(max(0, growth) >> 10) MiB", goal: "typed error, bounded memory")
        }
    }
}
