import Foundation
import SSHKit
import Testing

/// Host key verification against the fixture sshd; every rejection is typed.
@Suite("Host keys", .tags(.integration))
struct HostKeyTests {
    let server = TestServer.shared

    @Test func presentedKeyIsReadableAndMatchesSshKeygen() async throws {
        let conn = try await SSHClient.connect(server.configuration())
        #expect(server.allFingerprints.contains(conn.hostKey.sha256Fingerprint))
        let pub = try String(contentsOfFile: server.key("host_ed25519.pub"), encoding: .utf8)
        let expected = try SSHHostKey(openSSH: pub)
        if conn.hostKey.type == "ssh-ed25519" { #expect(conn.hostKey == expected) }
        #expect(conn.serverBanner.hasPrefix("SSH-2.0-OpenSSH"))
        await conn.close()
    }

    @Test func pinnedMatchWithAndWithoutPrefix() async throws {
        let bare = server.allFingerprints.map { String($0.dropFirst("SHA256:".count)) }
        let conn = try await SSHClient.connect(server.configuration(policy: .pinned(bare)))
        #expect(conn.isConnected)
        await conn.close()
    }

    @Test func pinnedMismatchIsRejectedWithPresentedAndExpectedKeys() async throws {
        let wrong = try SSHHostKey(openSSH: String(contentsOfFile: server.key("id_ed25519.pub"), encoding: .utf8))
        let e = await expectSSHError {
            try await SSHClient.connect(server.configuration(policy: .pinned([wrong.sha256Fingerprint])))
        }
        #expect(e?.code == .hostKeyRejected)
        #expect(e?.expectedHostKeys == [wrong.sha256Fingerprint])
        #expect(e.flatMap { $0.presentedHostKey.map { server.allFingerprints.contains($0.sha256Fingerprint) } } == true)
        #expect(e?.host == server.host && e?.port == server.port)
    }

    @Test func strictRejectsAnUnknownHostAndAcceptNewThenRemembers() async throws {
        let store = SSHMemoryHostKeyStore()
        #expect(await expectSSHError { try await SSHClient.connect(server.configuration(policy: .strict(store))) }?.code
            == .hostKeyRejected)
        let first = try await SSHClient.connect(server.configuration(policy: .acceptNew(store)))
        await first.close()
        let known = try await store.lookup(host: server.host, port: server.port)
        #expect(known.keys == [first.hostKey])
        let second = try await SSHClient.connect(server.configuration(policy: .strict(store)))
        #expect(second.hostKey == first.hostKey)
        await second.close()
    }

    @Test func acceptNewRejectsAChangedKey() async throws {
        let store = SSHMemoryHostKeyStore()
        let other = try SSHHostKey(openSSH: String(contentsOfFile: server.key("id_ed25519.pub"), encoding: .utf8))
        try await store.add(other, host: server.host, port: server.port)
        let e = await expectSSHError { try await SSHClient.connect(server.configuration(policy: .acceptNew(store))) }
        #expect(e?.code == .hostKeyRejected)
        #expect(e?.message.contains("changed") == true)
        #expect(try await store.lookup(host: server.host, port: server.port).keys == [other])
    }

    @Test func customPolicySeesHostPortAndKeyAndCanThrow() async throws {
        struct Refuse: Error {}
        let port = server.port
        let conn = try await SSHClient.connect(server.configuration(policy: .custom { ctx in
            ctx.port == port && ctx.host == "127.0.0.1" ? .accept : .reject(reason: "unexpected")
        }))
        await conn.close()
        let e = await expectSSHError {
            try await SSHClient.connect(server.configuration(policy: .custom { _ in throw Refuse() }))
        }
        #expect(e?.code == .hostKeyRejected)
        #expect(e?.cause is Refuse)
    }

    @Test func cancellingWhileThePolicyDecidesIsCancelled() async throws {
        let task = Task {
            try await SSHClient.connect(server.configuration(policy: .custom { _ in
                try? await Task.sleep(for: .seconds(5))
                return .accept
            }))
        }
        try await Task.sleep(for: .milliseconds(300))
        task.cancel()
        let (e, seconds) = await measure { await expectSSHError { try await task.value } }
        #expect(e?.code == .cancelled)
        #expect(seconds < 5) // catches a hang; the latency itself is measured elsewhere
    }
}
