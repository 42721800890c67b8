import Foundation
@testable import SSHKit
import Synchronization
import Testing

/// Local (-L) and dynamic (-D, SOCKS) forwarding through the real sshd, with real TCP
/// clients on 127.0.0.1 and echo / HTTP servers the tests start.
@Suite("Forwarding", .tags(.integration), .serialized)
struct ForwardTests {
    let server = TestServer.shared

    static func randomBytes(_ n: Int) -> [UInt8] {
        guard let urandom = FileHandle(forReadingAtPath: "/dev/urandom") else { return [] }
        defer { try? urandom.close() }
        return Array(urandom.readData(ofLength: n))
    }

    /// Collects a forward's events for assertions.
    final class Events: Sendable {
        private let list = Mutex<[SSHForwardEvent]>([])
        var all: [SSHForwardEvent] { list.withLock { $0 } }
        func add(_ e: SSHForwardEvent) { list.withLock { $0.append(e) } }
        var handler: @Sendable (SSHForwardEvent) -> Void { { [self] e in add(e) } }

        /// Waits (bounded) until `predicate` holds for the events so far.
        func wait(_ what: String, timeout: Duration = .seconds(10), _ predicate: ([SSHForwardEvent]) -> Bool) async -> Bool {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                if predicate(all) { return true }
                try? await Task.sleep(for: .milliseconds(20))
            }
            Issue.record("timed out waiting for \(what); events: \(all)")
            return false
        }
    }

    static func isFailed(_ e: SSHForwardEvent, _ code: SSHError.Code) -> Bool {
        if case .failed(let err) = e.kind { return err.code == code }
        return false
    }

    static func isClosed(_ e: SSHForwardEvent) -> Bool {
        if case .closed = e.kind { return true }
        return false
    }

    // MARK: local forwarding

    @Test func aLocalForwardCarriesBytesBothWaysWithHalfClose() async throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        let events = Events()
        try await SSHClient.withConnection(server.configuration()) { conn in
            let forward = try conn.forwardLocalPort(to: .tcp(host: "127.0.0.1", port: echo.port),
                                                    options: SSHForwardOptions(eventHandler: events.handler))
            let port = try #require(forward.port)
            #expect(port > 0)
            #expect(forward.listenAddresses == [.tcp(host: "127.0.0.1", port: port)])
            let data = Self.randomBytes(4 << 20)
            let fd = SocketClient.connect(port: port)
            #expect(fd >= 0)
            let outcome = await SocketClient.exchange(fd, send: data)
            #expect(outcome.sawEOF)
            #expect(outcome.received.count == data.count)
            #expect(outcome.received == data)
            _ = await events.wait("the connection to close") { $0.contains(where: Self.isClosed) }
            let stats = forward.statistics
            #expect(stats.accepted == 1 && stats.completed == 1 && stats.active == 0 && stats.failed == 0)
            #expect(stats.bytesToClients == UInt64(data.count) && stats.bytesFromClients == UInt64(data.count))
            if case .closed(let toClient, let fromClient) = events.all.last?.kind {
                #expect(toClient == UInt64(data.count) && fromClient == UInt64(data.count))
            }
            #expect(events.all.first.map { if case .opened = $0.kind { true } else { false } } == true)
            await forward.close()
        }
    }

    @Test func theServerAnswersBeforeTheClientFinishesAndSeesTheClientsEOF() async throws {
        // a half-closed client still reads: the echo answers only after our EOF here
        let echo = try EchoServer()
        defer { echo.stop() }
        try await SSHClient.withConnection(server.configuration()) { conn in
            let forward = try conn.forwardLocalPort(to: .tcp(host: "127.0.0.1", port: echo.port))
            let fd = SocketClient.connect(port: try #require(forward.port))
            #expect(SocketClient.writeAll(fd, Array("ping".utf8)))
            #expect(SocketClient.readExactly(fd, 4) == Array("ping".utf8)) // still open both ways
            shutdown(fd, Int32(SHUT_WR))
            let rest = SocketClient.readExactly(fd, 1, timeout: .seconds(10))
            #expect(rest.isEmpty) // EOF came back after ours
            close(fd)
            await forward.close()
        }
    }

    @Test func twoHundredConcurrentForwardedConnectionsAreByteExact() async throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        try await SSHClient.withConnection(server.configuration()) { conn in
            let forward = try conn.forwardLocalPort(to: .tcp(host: "127.0.0.1", port: echo.port),
                                                    options: SSHForwardOptions(backlog: 512))
            let port = try #require(forward.port)
            let ok = await withTaskGroup(of: Bool.self) { group in
                for i in 0..<200 {
                    group.addTask {
                        let data = Self.randomBytes(64 * 1024 + i * 997)
                        let fd = SocketClient.connect(port: port)
                        guard fd >= 0 else { return false }
                        let out = await SocketClient.exchange(fd, send: data)
                        return out.sawEOF && out.received == data
                    }
                }
                var good = 0
                for await r in group where r { good += 1 }
                return good
            }
            #expect(ok == 200)
            let stats = forward.statistics
            #expect(stats.accepted == 200)
            #expect(echo.connections == 200)
            await forward.close()
            #expect(forward.statistics.active == 0)
        }
    }

    @Test func aRefusedTargetClosesTheClientWithATypedErrorAndTheListenerGoesOn() async throws {
        let echo = try EchoServer()
        let closedPort = echo.port
        echo.stop()
        let events = Events()
        try await SSHClient.withConnection(server.configuration()) { conn in
            let forward = try conn.forwardLocalPort(to: .tcp(host: "127.0.0.1", port: closedPort),
                                                    options: SSHForwardOptions(eventHandler: events.handler))
            let port = try #require(forward.port)
            for _ in 0..<3 {
                let fd = SocketClient.connect(port: port)
                #expect(fd >= 0) // the listener is still there
                let out = await SocketClient.exchange(fd, send: Array("hello".utf8), timeout: .seconds(20))
                #expect(out.sawEOF || out.readError != nil)
                #expect(out.received.isEmpty)
            }
            _ = await events.wait("three failures") { $0.filter { Self.isFailed($0, .channelOpenFailed) }.count == 3 }
            #expect(forward.statistics.failed == 3)
            #expect(try await conn.execute("echo alive").stdoutString == "alive\n")
            await forward.close()
        }
    }

    @Test func killingTheSSHConnectionResetsEveryForwardedSocketAndStopsTheForward() async throws {
        let own = try TestServer.start(name: "fwdkill")
        defer { own.stop() }
        let echo = try EchoServer()
        defer { echo.stop() }
        let conn = try await SSHClient.connect(own.configuration())
        let forward = try conn.forwardLocalPort(to: .tcp(host: "127.0.0.1", port: echo.port))
        let port = try #require(forward.port)
        var fds: [Int32] = []
        for _ in 0..<4 {
            let fd = SocketClient.connect(port: port)
            #expect(SocketClient.writeAll(fd, [9]))
            #expect(SocketClient.readExactly(fd, 1) == [9])
            fds.append(fd)
        }
        for p in own.sessionProcessTree() { kill(p, SIGKILL) }
        for fd in fds {
            // the streams were cut: each client reads a reset, never a clean EOF that
            // it could take for the end of a complete stream
            #expect(SocketClient.readEnd(fd, timeout: .seconds(15)) == .error(ECONNRESET))
            close(fd)
        }
        let reason = await expectSSHError { try await forward.waitUntilClosed() }
        #expect(reason?.code == .connectionClosed || reason?.code == .connectionLost, "\(String(describing: reason))")
        #expect(SocketClient.connect(port: port) < 0)
        #expect(forward.statistics.active == 0)
        await conn.close()
    }

    @Test func aBusyPortIsASystemErrorAndBadArgumentsAreRejected() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let first = try conn.forwardLocalPort(to: .tcp(host: "127.0.0.1", port: 9))
            let port = try #require(first.port)
            do throws(SSHError) {
                _ = try conn.forwardLocalPort(.loopback(port: port), to: .tcp(host: "127.0.0.1", port: 9))
                Issue.record("a second listener on a busy port started")
            } catch {
                #expect(error.code == .systemError && error.systemErrno == EADDRINUSE, "\(error)")
            }
            await first.close()
            for bad in [SSHForwardTarget.tcp(host: "", port: 80), .tcp(host: "x", port: 0), .tcp(host: "x", port: 70000),
                        .unixSocket(path: "")] {
                #expect(throws: SSHError.self) { try conn.forwardLocalPort(to: bad) }
            }
            #expect(throws: SSHError.self) { try conn.forwardLocalPort(.loopback(port: -1), to: .tcp(host: "x", port: 1)) }
            #expect(throws: SSHError.self) {
                try conn.forwardLocalPort(to: .tcp(host: "x", port: 1), options: SSHForwardOptions(maxConnections: 0))
            }
        }
        // after close: invalidState
        let conn = try await SSHClient.connect(server.configuration())
        await conn.close()
        do throws(SSHError) {
            _ = try conn.forwardLocalPort(to: .tcp(host: "127.0.0.1", port: 1))
            Issue.record("a forward started on a closed connection")
        } catch {
            #expect(error.code == .invalidState)
        }
    }

    @Test func aUnixSocketListenerForwardsToARemoteUnixSocket() async throws {
        let dir = try TestPaths.makeTemporaryDirectory("fwd-unix")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let remoteSocket = dir + "/remote.sock"
        let localSocket = dir + "/local.sock"
        let echo = try EchoServer(unixSocket: remoteSocket)
        defer { echo.stop() }
        try await SSHClient.withConnection(server.configuration()) { conn in
            let forward = try conn.forwardLocalPort(.unixSocket(path: localSocket), to: .unixSocket(path: remoteSocket))
            #expect(forward.port == nil)
            var st = stat()
            #expect(lstat(localSocket, &st) == 0 && st.st_mode & 0o777 == 0o600)
            let data = Self.randomBytes(1 << 20)
            let fd = SocketClient.connect(unixSocket: localSocket)
            #expect(fd >= 0)
            let out = await SocketClient.exchange(fd, send: data)
            #expect(out.received == data)
            // an existing socket is not replaced unless asked
            #expect(throws: SSHError.self) {
                try conn.forwardLocalPort(.unixSocket(path: localSocket), to: .unixSocket(path: remoteSocket))
            }
            await forward.close()
            #expect(lstat(localSocket, &st) != 0) // removed
        }
    }

    @Test func moreThanMaxConnectionsAreTurnedAway() async throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        let events = Events()
        try await SSHClient.withConnection(server.configuration()) { conn in
            let forward = try conn.forwardLocalPort(to: .tcp(host: "127.0.0.1", port: echo.port),
                                                    options: SSHForwardOptions(maxConnections: 2, eventHandler: events.handler))
            let port = try #require(forward.port)
            let a = SocketClient.connect(port: port)
            let b = SocketClient.connect(port: port)
            #expect(SocketClient.writeAll(a, [1]) && SocketClient.readExactly(a, 1) == [1])
            #expect(SocketClient.writeAll(b, [2]) && SocketClient.readExactly(b, 1) == [2])
            let c = SocketClient.connect(port: port)
            #expect(SocketClient.readExactly(c, 1).isEmpty) // closed at once
            _ = await events.wait("a rejection") { $0.contains { if case .rejected = $0.kind { true } else { false } } }
            close(a); close(b); close(c)
            #expect(forward.statistics.rejected == 1)
            await forward.close()
        }
    }

    // MARK: SOCKS

    func socks5Connect(_ fd: Int32, host: String, port: Int) -> [UInt8] {
        var req: [UInt8] = [5, 1, 0, 5, 1, 0, 3, UInt8(host.utf8.count)] + Array(host.utf8)
        req += [UInt8(port >> 8), UInt8(port & 0xFF)]
        _ = SocketClient.writeAll(fd, req)
        return SocketClient.readExactly(fd, 2 + 10)
    }

    /// Closing a forward while connections are being opened through it: each connection's
    /// events stay in order (`opened` never after its end), every connection ends with
    /// exactly one final event, and `close()` returns after all of them.
    @Test func eventsOfEachConnectionStayInOrderWhenCloseRacesTheOpens() async throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        try await SSHClient.withConnection(server.configuration()) { conn in
            for round in 0..<10 {
                let events = Events()
                let forward = try conn.forwardLocalPort(to: .tcp(host: "127.0.0.1", port: echo.port),
                                                        options: SSHForwardOptions(eventHandler: events.handler))
                let port = try #require(forward.port)
                let clients = (0..<20).map { _ in SocketClient.connect(port: port) }
                try await Task.sleep(for: .milliseconds(round % 5)) // the close lands at different points
                await forward.close()
                for fd in clients { close(fd) }
                var byConnection: [UInt64: [SSHForwardEvent.Kind]] = [:]
                for e in events.all { byConnection[e.connectionID, default: []].append(e.kind) }
                for (id, kinds) in byConnection {
                    let finals = kinds.filter { if case .opened = $0 { false } else { true } }
                    #expect(finals.count == 1, "round \(round) #\(id): \(kinds)")
                    if case .opened = kinds.last { Issue.record("round \(round) #\(id): opened after its end: \(kinds)") }
                }
                #expect(forward.statistics.active == 0)
            }
        }
    }

    /// A long-lived connection that opens and closes many forwards keeps nothing of them.
    @Test func closedForwardsLeaveNothingWaitingOnTheConnection() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            for _ in 0..<20 {
                let direct = try conn.forwardLocalPort(to: .tcp(host: "127.0.0.1", port: server.port))
                let socks = try conn.forwardDynamicPort()
                #expect(conn.core.context.terminationHandlerCount == 2)
                await direct.close()
                await socks.close()
            }
            #expect(conn.core.context.terminationHandlerCount == 0)
        }
    }

    /// OpenSSH refuses with reason 1 and the text "open failed": SOCKS5's "not allowed".
    @Test func aServerThatForbidsForwardingIsSocksNotAllowed() async throws {
        let off = try TestServer.start(name: "nosocks", extraConfig: ["AllowTcpForwarding no"])
        defer { off.stop() }
        try await SSHClient.withConnection(off.configuration()) { conn in
            let proxy = try conn.forwardDynamicPort()
            let fd = SocketClient.connect(port: try #require(proxy.port))
            defer { close(fd) }
            #expect(socks5Connect(fd, host: "127.0.0.1", port: off.port) == [5, 0] + [5, 2, 0, 1, 0, 0, 0, 0, 0, 0])
            await proxy.close()
        }
    }

    @Test func socks5AndSocks4aAndSocks4ReachTheTargetThroughTheServer() async throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        try await SSHClient.withConnection(server.configuration()) { conn in
            let proxy = try conn.forwardDynamicPort()
            let port = try #require(proxy.port)
            let p = echo.port
            let hi = UInt8(p >> 8), lo = UInt8(p & 0xFF)
            // SOCKS5 with a domain name, resolved by the server
            var fd = SocketClient.connect(port: port)
            #expect(socks5Connect(fd, host: "localhost", port: p) == [5, 0] + [5, 0, 0, 1, 0, 0, 0, 0, 0, 0])
            let data = Self.randomBytes(300_000)
            var out = await SocketClient.exchange(fd, send: data)
            #expect(out.received == data)
            // SOCKS5 with an IPv4 address, request sent in pieces
            fd = SocketClient.connect(port: port)
            _ = SocketClient.writeAll(fd, [5, 2, 2, 0])
            #expect(SocketClient.readExactly(fd, 2) == [5, 0])
            for piece in [[5, 1, 0], [1, 127, 0], [0, 1, hi], [lo]] as [[UInt8]] {
                _ = SocketClient.writeAll(fd, piece)
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(SocketClient.readExactly(fd, 10) == [5, 0, 0, 1, 0, 0, 0, 0, 0, 0])
            out = await SocketClient.exchange(fd, send: [1, 2, 3])
            #expect(out.received == [1, 2, 3])
            // SOCKS4 with early data right behind the request
            fd = SocketClient.connect(port: port)
            _ = SocketClient.writeAll(fd, [4, 1, hi, lo, 127, 0, 0, 1] + Array("user".utf8) + [0] + Array("early".utf8))
            #expect(SocketClient.readExactly(fd, 8) == [0, 0x5A, 0, 0, 0, 0, 0, 0])
            out = await SocketClient.exchange(fd, send: Array(" late".utf8))
            #expect(String(decoding: out.received, as: UTF8.self) == "early late")
            // SOCKS4a
            fd = SocketClient.connect(port: port)
            _ = SocketClient.writeAll(fd, [4, 1, hi, lo, 0, 0, 0, 1, 0] + Array("localhost".utf8) + [0])
            #expect(SocketClient.readExactly(fd, 8) == [0, 0x5A, 0, 0, 0, 0, 0, 0])
            out = await SocketClient.exchange(fd, send: [7])
            #expect(out.received == [7])
            #expect(proxy.statistics.accepted == 4)
            await proxy.close()
        }
    }

    @Test func theSOCKSAnswerComesBeforeATargetThatSpeaksFirst() async throws {
        // sshd sends its banner the moment it accepts: the banner can arrive with the
        // channel's open confirmation, and must still reach the client after the answer
        try await SSHClient.withConnection(server.configuration()) { conn in
            let proxy = try conn.forwardDynamicPort()
            let port = try #require(proxy.port)
            for _ in 0..<20 {
                let fd = SocketClient.connect(port: port)
                let reply = socks5Connect(fd, host: "127.0.0.1", port: server.port)
                #expect(reply == [5, 0, 5, 0, 0, 1, 0, 0, 0, 0, 0, 0])
                #expect(SocketClient.readExactly(fd, 8) == Array("SSH-2.0-".utf8))
                close(fd)
            }
            await proxy.close()
        }
    }

    @Test func badSOCKSInputGetsASOCKSErrorReplyAndTheProxyGoesOn() async throws {
        let echo = try EchoServer()
        let closedPort = echo.port
        echo.stop()
        let events = Events()
        try await SSHClient.withConnection(server.configuration()) { conn in
            let proxy = try conn.forwardDynamicPort(options: SSHForwardOptions(handshakeTimeout: .milliseconds(300),
                                                                            eventHandler: events.handler))
            let port = try #require(proxy.port)
            func ask(_ bytes: [UInt8], expect n: Int) -> (reply: [UInt8], closed: Bool) {
                let fd = SocketClient.connect(port: port)
                defer { close(fd) }
                _ = SocketClient.writeAll(fd, bytes)
                let reply = SocketClient.readExactly(fd, n)
                let closed = SocketClient.readExactly(fd, 1, timeout: .seconds(5)).isEmpty
                return (reply, closed)
            }
            // not SOCKS at all: closed without a reply
            var r = ask(Array("GET / HTTP/1.0\r\n\r\n".utf8), expect: 1)
            #expect(r.reply.isEmpty && r.closed)
            // SOCKS5 offering only username/password: no acceptable method
            r = ask([5, 1, 2], expect: 2)
            #expect(r.reply == [5, 0xFF] && r.closed)
            // SOCKS5 BIND: command not supported
            r = ask([5, 1, 0, 5, 2, 0, 1, 127, 0, 0, 1, 0, 80], expect: 12)
            #expect(r.reply == [5, 0, 5, 7, 0, 1, 0, 0, 0, 0, 0, 0] && r.closed)
            // SOCKS5 address type 9: not supported
            r = ask([5, 1, 0, 5, 1, 0, 9, 1, 2], expect: 12)
            #expect(r.reply == [5, 0, 5, 8, 0, 1, 0, 0, 0, 0, 0, 0] && r.closed)
            // SOCKS4 BIND: rejected
            r = ask([4, 2, 0, 80, 127, 0, 0, 1, 0], expect: 8)
            #expect(r.reply == [0, 0x5B, 0, 0, 0, 0, 0, 0] && r.closed)
            // an unbounded user id: rejected once over the limit
            r = ask([4, 1, 0, 80, 127, 0, 0, 1] + [UInt8](repeating: 0x41, count: 2000), expect: 8)
            #expect(r.reply == [0, 0x5B, 0, 0, 0, 0, 0, 0] && r.closed)
            // a refused target: SOCKS5 "connection refused"
            let fd = SocketClient.connect(port: port)
            #expect(socks5Connect(fd, host: "127.0.0.1", port: closedPort) == [5, 0, 5, 5, 0, 1, 0, 0, 0, 0, 0, 0])
            #expect(SocketClient.readExactly(fd, 1).isEmpty)
            close(fd)
            // silence: closed after the handshake timeout
            let silent = SocketClient.connect(port: port)
            #expect(SocketClient.readExactly(silent, 1, timeout: .seconds(5)).isEmpty)
            close(silent)
            _ = await events.wait("the refusal") { $0.contains { Self.isFailed($0, .channelOpenFailed) } }
            let stats = proxy.statistics
            #expect(stats.rejected == 7, "\(events.all)")
            #expect(stats.failed == 1)
            // and it still works
            let echo2 = try EchoServer()
            defer { echo2.stop() }
            let ok = SocketClient.connect(port: port)
            #expect(socks5Connect(ok, host: "127.0.0.1", port: echo2.port) == [5, 0, 5, 0, 0, 1, 0, 0, 0, 0, 0, 0])
            let out = await SocketClient.exchange(ok, send: [42])
            #expect(out.received == [42])
            await proxy.close()
        }
    }

    @Test func curlFetchesThroughTheSOCKSProxy() async throws {
        let body = Self.randomBytes(2 << 20)
        let http = try TinyHTTPServer(body: body)
        defer { http.stop() }
        let dir = try TestPaths.makeTemporaryDirectory("curl")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await SSHClient.withConnection(server.configuration()) { conn in
            let proxy = try conn.forwardDynamicPort()
            let port = try #require(proxy.port)
            for (i, flag) in ["--socks5-hostname", "--socks5", "--socks4a", "--socks4"].enumerated() {
                let file = dir + "/body\(i)"
                let r = try TestServer.runCapturing("/usr/bin/curl", [
                    "-sS", "--max-time", "30", flag, "127.0.0.1:\(port)", "-o", file,
                    "http://localhost:\(http.port)/file"])
                #expect(r.status == 0, "curl \(flag): \(r.err)")
                #expect(FileManager.default.contents(atPath: file).map { Array($0) == body } == true, "curl \(flag)")
            }
            await proxy.close()
        }
    }
}

extension ForwardTests {
    /// Tests that count this process's fds, threads, sockets or memory: they run alone,
    /// before the other tests run in parallel (Support/Tiers.swift, scripts/test.sh).
    @Suite("Forwarding (alone)", .tags(.exclusive), .serialized)
    struct Exclusive {
        let server = TestServer.shared

        @Test func stoppingClosesTheListenerAndResetsEveryForwardedConnection() async throws {
            let echo = try EchoServer()
            defer { echo.stop() }
            try await SSHClient.withConnection(server.configuration()) { conn in
                let socketsBefore = countSockets()
                let forward = try conn.forwardLocalPort(to: .tcp(host: "127.0.0.1", port: echo.port))
                let port = try #require(forward.port)
                var fds: [Int32] = []
                for _ in 0..<5 {
                    let fd = SocketClient.connect(port: port)
                    #expect(SocketClient.writeAll(fd, [1, 2, 3]))
                    #expect(SocketClient.readExactly(fd, 3) == [1, 2, 3])
                    fds.append(fd)
                }
                #expect(forward.statistics.active == 5)
                await forward.close()
                for fd in fds {
                    // cut mid-stream (the echo never ended): a reset, not a clean EOF
                    #expect(SocketClient.readEnd(fd) == .error(ECONNRESET))
                    close(fd)
                }
                #expect(SocketClient.connect(port: port) < 0 && errno == ECONNREFUSED)
                #expect(forward.statistics.active == 0)
                try await forward.waitUntilClosed()
                // the listener and every bridged socket are closed (the echo
                // server in this process closes its ends once sshd's connections to it end)
                let deadline = ContinuousClock.now + .seconds(10)
                while countSockets() != socketsBefore && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
                #expect(countSockets() == socketsBefore)
                #expect(try await conn.execute("echo alive").stdoutString == "alive\n")
            }
        }
    }
}
