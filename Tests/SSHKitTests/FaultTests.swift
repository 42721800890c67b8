import Foundation
import SSHKit
import Testing

/// Faults provoked for real, on servers of their own (these tests disturb them).
@Suite("Faults", .tags(.integration), .serialized)
struct FaultTests {
    /// Kills every process of every session of `server` (not the listener).
    func killSessions(of server: TestServer) throws {
        let pids = server.sessionProcessTree()
        #expect(!pids.isEmpty, "no session process found")
        for p in pids { kill(p, SIGKILL) }
    }

    @Test func serverKilledMidCommandFailsEveryOperationWithATypedError() async throws {
        let server = try TestServer.start(name: "killed")
        defer { server.stop() }
        let conn = try await SSHClient.connect(server.configuration())
        let running = Task { try await conn.execute("sleep 30") }
        let second = Task { try await conn.execute("sleep 31") }
        try await Task.sleep(for: .milliseconds(300))
        try killSessions(of: server)
        let (e, seconds) = await measure { await expectSSHError { try await running.value } }
        let lost: Set<SSHError.Code> = [.disconnected, .connectionLost]
        #expect(e.map { lost.contains($0.code) } == true, "\(String(describing: e))")
        #expect(seconds < 10)
        let e2 = await expectSSHError { try await second.value }
        #expect(e2.map { lost.contains($0.code) } == true, "\(String(describing: e2))")
        #expect(!conn.isConnected)
        // later calls report the failure, not misuse
        let e3 = await expectSSHError { try await conn.execute("true") }
        #expect(e3.map { lost.contains($0.code) } == true, "\(String(describing: e3))")
        await conn.close()
    }

    @Test func exceedingMaxSessionsIsChannelOpenFailed() async throws {
        let server = try TestServer.start(name: "maxsessions", extraConfig: ["MaxSessions 2"])
        defer { server.stop() }
        let conn = try await SSHClient.connect(server.configuration())
        let outcomes = await withTaskGroup(of: Result<SSHCommandResult, SSHError>.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    do { return .success(try await conn.execute("sleep 1; echo ok")) } catch let e as SSHError {
                        return .failure(e)
                    } catch { return .failure(SSHError(.protocolError, "\(error)")) }
                }
            }
            var all: [Result<SSHCommandResult, SSHError>] = []
            for await r in group { all.append(r) }
            return all
        }
        let failures = outcomes.compactMap { if case .failure(let e) = $0 { e } else { nil } }
        let successes = outcomes.compactMap { if case .success(let r) = $0 { r } else { nil } }
        #expect(failures.count == 1 && failures.first?.code == .channelOpenFailed, "\(failures)")
        #expect(successes.count == 2 && successes.allSatisfy { $0.stdoutString == "ok\n" })
        // The connection is fine afterwards. sshd frees a session only in a later turn of its loop
        // after it reads our CHANNEL_CLOSE, so an open that arrives in the same read as that close
        // can still be refused: retry a refused open a few times, never anything else.
        var again: String?
        for attempt in 0..<10 where again == nil {
            do throws(SSHError) {
                again = try await conn.execute("echo again").stdoutString
            } catch {
                #expect(error.code == .channelOpenFailed, "\(error)")
                if error.code != .channelOpenFailed { break }
                try await Task.sleep(for: .milliseconds(50 * (attempt + 1)))
            }
        }
        #expect(again == "again\n")
        await conn.close()
    }

    @Test func streamsBeyondMaxSessionsAreChannelOpenFailed() async throws {
        let server = try TestServer.start(name: "maxstreams", extraConfig: ["MaxSessions 2"])
        defer { server.stop() }
        try await SSHClient.withConnection(server.configuration()) { conn in
            let shell = try await conn.startShell()
            let cmd = try await conn.startCommand("sleep 5")
            let e = await expectSSHError { try await conn.startCommand("true") }
            #expect(e?.code == .channelOpenFailed, "\(String(describing: e))")
            // the two open channels are unaffected
            try await shell.input.write("echo al\"\"ive\n") // the echoed line shows al""ive
            var it = shell.output.makeAsyncIterator()
            var seen = ""
            while !seen.contains("alive\r\n"), let c = try await it.next() { seen += String(decoding: c, as: UTF8.self) }
            cmd.cancel()
            shell.cancel()
        }
    }

    @Test func cancelsThatLandWhileAChannelOpensDoNotLeakServerSessions() async throws {
        let server = try TestServer.start(name: "opencancel", extraConfig: ["MaxSessions 2"])
        defer { server.stop() }
        let conn = try await SSHClient.connect(server.configuration())
        var cancelled = 0
        for i in 0..<40 {
            let t = Task { try await conn.execute("true") }
            // spread the cancels over the channel-open round trip
            try await Task.sleep(for: .microseconds(Int64(i % 8) * 150))
            t.cancel()
            if case .failure(let e as SSHError) = await t.result, e.code == .cancelled { cancelled += 1 }
        }
        #expect(cancelled > 0)
        // with MaxSessions 2, two leaked server-side sessions would make these fail
        try await Task.sleep(for: .milliseconds(200))
        async let a = conn.execute("sleep 0.3; echo a")
        async let b = conn.execute("sleep 0.3; echo b")
        #expect(try await a.stdoutString == "a\n")
        #expect(try await b.stdoutString == "b\n")
        await conn.close()
    }

    @Test func serverGoneBeforeConnectIsRefused() async throws {
        let server = try TestServer.start(name: "gone")
        let config = server.configuration()
        server.stop()
        let e = await expectSSHError { try await SSHClient.connect(config) }
        #expect(e?.code == .connectionRefused)
    }
}
