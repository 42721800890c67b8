import Foundation
import SSHKit
import Testing

/// direct-tcpip and direct-streamlocal tunnels through the shared sshd to echo servers
/// this test starts on 127.0.0.1 and on a Unix socket: real bytes both ways.
@Suite("Tunnels", .tags(.integration), .serialized)
struct TunnelTests {
    let server = TestServer.shared


    @Test func bytesGoThroughADirectTCPIPTunnelBothWaysWithHalfClose() async throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        try await SSHClient.withConnection(server.configuration()) { conn in
            let tunnel = try await conn.openTunnel(toHost: "127.0.0.1", port: echo.port)
            #expect(tunnel.target == "127.0.0.1:\(echo.port)")
            let data = ForwardTests.randomBytes(5_000_000)
            let back = try await SSHTunnel.roundTrip(tunnel, data)
            #expect(back == data)
            try await tunnel.waitUntilClosed()
        }
    }

    @Test func aRefusedTargetIsChannelOpenFailedAndTheConnectionGoesOn() async throws {
        let echo = try EchoServer()
        let closedPort = echo.port
        echo.stop() // nothing listens there now
        try await SSHClient.withConnection(server.configuration()) { conn in
            do throws(SSHError) {
                _ = try await conn.openTunnel(toHost: "127.0.0.1", port: closedPort)
                Issue.record("a tunnel to a closed port opened")
            } catch {
                #expect(error.code == .channelOpenFailed, "\(error)")
            }
            let ok = try await conn.execute("echo ok").stdoutString
            #expect(ok == "ok\n")
            do throws(SSHError) {
                _ = try await conn.openTunnel(toHost: "127.0.0.1", port: 0)
                Issue.record("port 0 was accepted")
            } catch {
                #expect(error.code == .invalidArgument)
            }
        }
    }

    @Test func manyTunnelsAtOnceOnOneConnectionAreByteExact() async throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        try await SSHClient.withConnection(server.configuration()) { conn in
            let results = try await withThrowingTaskGroup(of: Bool.self) { group in
                for i in 0..<40 {
                    group.addTask {
                        let data = ForwardTests.randomBytes(50_000 + i * 1000)
                        let tunnel = try await conn.openTunnel(toHost: "127.0.0.1", port: echo.port)
                        return try await SSHTunnel.roundTrip(tunnel, data) == data
                    }
                }
                var all: [Bool] = []
                for try await ok in group { all.append(ok) }
                return all
            }
            #expect(results.count == 40 && results.allSatisfy { $0 })
            #expect(echo.connections == 40)
        }
    }

    @Test func closingOneTunnelLeavesTheOthersAndTheConnection() async throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        try await SSHClient.withConnection(server.configuration()) { conn in
            let a = try await conn.openTunnel(toHost: "127.0.0.1", port: echo.port)
            let b = try await conn.openTunnel(toHost: "127.0.0.1", port: echo.port)
            a.cancel()
            do throws(SSHError) {
                try await a.input.write([1, 2, 3])
                Issue.record("wrote to a closed tunnel")
            } catch {
                #expect(error.code == .cancelled || error.code == .channelClosed, "\(error)")
            }
            #expect(try await SSHTunnel.roundTrip(b, [9, 8, 7]) == [9, 8, 7])
        }
    }

    @Test func aUnixSocketOnTheServerIsReachable() async throws {
        let dir = try TestPaths.makeTemporaryDirectory("unix")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let echo = try EchoServer(unixSocket: dir + "/echo.sock")
        defer { echo.stop() }
        try await SSHClient.withConnection(server.configuration()) { conn in
            let tunnel = try await conn.openTunnel(toUnixSocket: dir + "/echo.sock")
            let data = ForwardTests.randomBytes(1_000_000)
            #expect(try await SSHTunnel.roundTrip(tunnel, data) == data)
            do throws(SSHError) {
                _ = try await conn.openTunnel(toUnixSocket: dir + "/missing.sock")
                Issue.record("a missing socket opened")
            } catch {
                #expect(error.code == .channelOpenFailed)
            }
        }
    }
}
