import Foundation
import SSHKit
import Synchronization
import Testing

/// Damaged and held-back byte streams between the client and a real sshd, through a
/// FaultProxy: a flipped bit, a reset in each phase, a server that reads slowly while
/// its replies wait, a server that stops answering during an SFTP cancel.
@Suite("Stream faults", .tags(.integration), .serialized)
struct StreamFaultTests {
    /// A server of its own behind a proxy, and a configuration that goes through it.
    func withProxiedServer(_ name: String, clientReceiveBuffer: Int? = nil,
                           _ body: (TestServer, FaultProxy, SSHConfiguration) async throws -> Void) async throws {
        let server = try TestServer.start(name: name)
        defer { server.stop() }
        let proxy = try FaultProxy(target: server.port, clientReceiveBuffer: clientReceiveBuffer)
        defer { proxy.stop() }
        var config = server.configuration()
        config.port = proxy.port
        try await body(server, proxy, config)
    }

    // MARK: a corrupted packet

    /// One flipped bit in the middle of a 4 MiB output: the command fails at once with
    /// `streamCorrupted`, with or without keepalive, and so does everything after it.
    @Test(arguments: [false, true])
    func aFlippedBitMidOutputFailsEverythingAsStreamCorrupted(keepalive: Bool) async throws {
        try await withProxiedServer("corrupt-mid") { _, proxy, base in
            var config = base
            if keepalive { config.keepalive = SSHKeepalive(interval: .seconds(2), maxMissed: 2) }
            let conn = try await SSHClient.connect(config)
            defer { Task { await conn.close() } }
            proxy.arm { f, _, s2c in f.flipServerToClientAt = s2c + (2 << 20) + 777 }
            let streamed = try await conn.startCommand("sleep 30")
            let r = await finishes(within: .seconds(20)) {
                try await conn.execute("head -c 4194304 /dev/zero", outputLimit: 8 << 20)
            }
            #expect(r != nil, "execute hung after a corrupted packet")
            let e = sshError(r)
            #expect(e?.code == .streamCorrupted, "\(String(describing: r))")
            #expect(e?.libssh?.message.isEmpty == false, "libssh's own words are kept: \(String(describing: e))")
            #expect(!conn.isConnected)
            // the other channel on the connection ends with the same cause
            let other = await finishes(within: .seconds(5)) { try await streamed.exitStatus() }
            #expect(sshError(other)?.code == .streamCorrupted, "\(String(describing: other))")
            // and a later call fails at once, with the same cause
            let later = await finishes(within: .seconds(5)) { try await conn.execute("true") }
            #expect(sshError(later)?.code == .streamCorrupted, "\(String(describing: later))")
        }
    }

    /// A flip in the first packet after authentication: the next channel open fails as
    /// corrupted (not "Decryption error" on a connection that claims to be up).
    @Test func aFlippedBitRightAfterAuthenticationIsStreamCorrupted() async throws {
        try await withProxiedServer("corrupt-auth") { _, proxy, config in
            let conn = try await SSHClient.connect(config)
            defer { Task { await conn.close() } }
            proxy.arm { f, _, s2c in f.flipServerToClientAt = s2c + 20 }
            for attempt in 0..<3 {
                let r = await finishes(within: .seconds(10)) { try await conn.execute("echo hi") }
                #expect(sshError(r)?.code == .streamCorrupted, "attempt \(attempt): \(String(describing: r))")
            }
            #expect(!conn.isConnected)
        }
    }

    // MARK: a reset

    /// A reset is `connectionLost` whenever it comes: in the banner, in the key exchange,
    /// after authentication. (A clean close by the server is `disconnected`.)
    @Test func aResetIsConnectionLostInEveryPhase() async throws {
        try await withProxiedServer("reset") { _, proxy, config in
            for offset in [10, 300] {
                proxy.arm { f, _, _ in f.resetServerToClientAt = offset }
                let r = await finishes(within: .seconds(20)) { try await SSHClient.connect(config) }
                #expect(sshError(r)?.code == .connectionLost, "reset at \(offset): \(String(describing: r))")
            }
            proxy.arm { f, _, _ in f.resetServerToClientAt = nil }
            let conn = try await SSHClient.connect(config)
            defer { Task { await conn.close() } }
            proxy.arm { f, _, s2c in f.resetServerToClientAt = s2c + 1 }
            let r = await finishes(within: .seconds(20)) { try await conn.execute("echo hi") }
            #expect(sshError(r)?.code == .connectionLost, "reset after auth: \(String(describing: r))")
        }
    }

    // MARK: a lost wake-up

    /// The server reads slowly and sends nothing back until it has the whole input: the
    /// client must keep writing as the kernel's queue drains, with no packet from the
    /// server to wake it. (Fewer bytes than the channel's window: only the socket limits.)
    @Test func inputKeepsFlowingWhenOnlyTheSocketDrains() async throws {
        try await withProxiedServer("wakeup", clientReceiveBuffer: 16 << 10) { _, proxy, config in
            let conn = try await SSHClient.connect(config)
            defer { Task { await conn.close() } }
            let cmd = try await conn.startCommand("wc -c")
            let input = randomBytes(1_600_000)
            proxy.arm { f, c2s, _ in
                f.holdServerToClient = true
                f.releaseHoldAtClientBytes = c2s + input.count
                f.clientBytesPerTick = 64 << 10
            }
            let r = await finishes(within: .seconds(30)) {
                try await cmd.input.write(input)
                try cmd.input.finish()
                let out = try await cmd.stdout.collect(upTo: 1024)
                return (String(decoding: out, as: UTF8.self), try await cmd.exitStatus())
            }
            proxy.arm { f, _, _ in f = FaultProxy.Faults() }
            #expect(r != nil, "the writer stalled while the socket drained")
            if case .success(let (out, status))? = r {
                #expect(out.trimmingCharacters(in: .whitespacesAndNewlines) == "\(input.count)")
                #expect(status == .exited(0))
            } else if let r {
                Issue.record("\(r)")
            }
        }
    }

    // MARK: cancelling a download

    /// A cancelled download returns at once although the server answers nothing any
    /// more (its replies are held back): the handle's close is left to the session, and
    /// its late replies are dropped when they come.
    @Test func aCancelledDownloadDoesNotWaitForTheServer() async throws {
        try await withProxiedServer("sftp-cancel") { server, proxy, config in
            let remote = server.dir + "/blob"
            _ = try TestServer.run("/bin/sh", ["-c", "head -c 33554432 /dev/urandom > \(remote) && chmod 644 \(remote)"])
            let local = NSTemporaryDirectory() + "sshkit-cancel-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: local, withIntermediateDirectories: false)
            defer { try? FileManager.default.removeItem(atPath: local) }
            let conn = try await SSHClient.connect(config)
            defer { Task { await conn.close() } }
            let sftp = try await conn.openSFTP()
            let moved = Mutex<UInt64>(0)
            let download = Task {
                try await sftp.download(SFTPPath(remote), to: local + "/dst",
                                        options: SFTPTransferOptions(chunkSize: 32 << 10, maxRequestsInFlight: 64)) { p in
                    moved.withLock { $0 = p.bytesTransferred }
                }
            }
            for _ in 0..<1000 where moved.withLock({ $0 }) < 1 << 20 { try await Task.sleep(for: .milliseconds(5)) }
            proxy.arm { f, _, _ in f.holdServerToClient = true }
            try await Task.sleep(for: .milliseconds(100))
            download.cancel()
            let r = await finishes(within: .seconds(5)) { try await download.value }
            #expect(r != nil, "the cancelled download waited for the server")
            #expect(sshError(r)?.code == .cancelled, "\(String(describing: r))")
            #expect(try FileManager.default.contentsOfDirectory(atPath: local).isEmpty, "nothing left behind")
            // the replies come after all; the session drops them and goes on
            proxy.arm { f, _, _ in f.holdServerToClient = false }
            let attrs = await finishes(within: .seconds(10)) { try await sftp.attributes(at: SFTPPath(remote)) }
            if case .success(let a)? = attrs { #expect(a.size == 33_554_432) } else { Issue.record("\(String(describing: attrs))") }
        }
    }
}
