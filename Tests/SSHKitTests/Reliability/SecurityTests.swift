import Foundation
@testable import SSHKit
import Testing

/// Security checks: strict key exchange with OpenSSH, a man in the
/// middle under every host key policy, planted symlinks and loose permissions.
@Suite("Reliability: security checks", .tags(.integration), .serialized)
struct SecurityTests {
    /// Strict key exchange (the Terrapin countermeasure) is in force when both sides
    /// name its pseudo-algorithm in their first KEXINIT, which travels in the clear:
    /// read both from the wire.
    @Test func strictKeyExchangeIsNegotiatedWithOpenSSH() async throws {
        let proxy = try FaultProxy(target: TestServer.shared.port)
        defer { proxy.stop() }
        var config = TestServer.shared.configuration()
        config.port = proxy.port
        let profiles: [(String, SSHAlgorithms)] = [("libssh defaults", .libsshDefaults), ("modern", .modern), ("compatible", .compatible)]
        for (label, algorithms) in profiles {
            config.algorithms = algorithms
            let conn = try await SSHClient.connect(config)
            #expect(try await conn.execute("echo ok").stdoutString == "ok\n")
            let (client, server) = proxy.captured
            await conn.close()
            let clientText = String(decoding: client, as: UTF8.self)
            let serverText = String(decoding: server, as: UTF8.self)
            #expect(clientText.contains("kex-strict-c-v00@openssh.com"), "the client did not offer strict kex")
            #expect(serverText.contains("kex-strict-s-v00@openssh.com"), "OpenSSH did not offer strict kex")
            Reliability.record("security", "strict kex offered by both sides (\(label))",
                               clientText.contains("kex-strict-c-v00@openssh.com") && serverText.contains("kex-strict-s-v00@openssh.com") ? "yes" : "no", goal: "yes")
        }
    }

    /// Another server with other host keys behind the same address: every policy but the
    /// explicitly insecure one refuses it, and no store learns its key.
    @Test func aManInTheMiddleIsRefusedUnderEveryPolicyButTheInsecureOne() async throws {
        let genuine = TestServer.shared
        let impostor = try TestServer.start(name: "impostor")
        defer { impostor.stop() }
        #expect(Set(genuine.allFingerprints).isDisjoint(with: impostor.allFingerprints))
        let proxy = try FaultProxy(target: genuine.port)
        defer { proxy.stop() }
        var config = genuine.configuration()
        config.port = proxy.port
        let dir = try TestPaths.makeTemporaryDirectory("mitm")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = SSHKnownHostsStore(path: dir + "/known_hosts")
        let memory = SSHMemoryHostKeyStore()
        // first contact with the genuine server teaches both stores its key
        for store in [file, memory] as [any SSHHostKeyStore] {
            config.hostKeyPolicy = .acceptNew(store)
            let conn = try await SSHClient.connect(config)
            await conn.close()
        }
        let knownBefore = try String(contentsOfFile: dir + "/known_hosts", encoding: .utf8)
        let genuineKeys = try await memory.lookup(host: config.host, port: config.port).keys
        let genuinePins = genuine.allFingerprints

        proxy.retarget(impostor.port)
        let policies: [(String, SSHHostKeyPolicy)] = [
            ("strict, known_hosts", .strict(file)), ("acceptNew, known_hosts", .acceptNew(file)),
            ("strict, memory", .strict(memory)), ("acceptNew, memory", .acceptNew(memory)),
            ("pinned", .pinned(genuinePins)),
            ("custom", .custom { ctx in genuinePins.contains(ctx.presentedKey.sha256Fingerprint) ? .accept : .reject(reason: "not the pinned key") }),
        ]
        var refused = 0
        for (name, policy) in policies {
            config.hostKeyPolicy = policy
            let attempt = config
            let r = await finishes(within: .seconds(20)) { try await SSHClient.connect(attempt) }
            if case .success(let conn)? = r { await conn.close() }
            let e = sshError(r)
            #expect(e?.code == .hostKeyRejected, "\(name): \(String(describing: r))")
            if e?.code == .hostKeyRejected { refused += 1 }
            #expect(e.flatMap { $0.presentedHostKey.map { impostor.allFingerprints.contains($0.sha256Fingerprint) } } == true,
                    "\(name): the error names the impostor's key")
        }
        Reliability.record("security", "man in the middle refused (policies other than insecure)", "\(refused) of \(policies.count)",
                           goal: "\(policies.count) of \(policies.count)")
        // nothing was learnt from the impostor
        #expect(try String(contentsOfFile: dir + "/known_hosts", encoding: .utf8) == knownBefore)
        #expect(try await memory.lookup(host: config.host, port: config.port).keys == genuineKeys)
        // only the explicit choice connects (with a key the impostor accepts: it is
        // then the impostor that the client talks to, as the choice says)
        var insecureConfig = config
        insecureConfig.hostKeyPolicy = .insecureAcceptAnyHostKey
        insecureConfig.authentication = .privateKey(path: impostor.key("id_ed25519"))
        let insecure = try await SSHClient.connect(insecureConfig)
        #expect(impostor.allFingerprints.contains(insecure.hostKey.sha256Fingerprint))
        await insecure.close()
        // and the genuine server is still trusted
        proxy.retarget(genuine.port)
        config.hostKeyPolicy = .strict(file)
        let back = try await SSHClient.connect(config)
        await back.close()
    }

    /// known_hosts planted as a symbolic link, or with permissions that let others add
    /// a key: followed to an existing file and kept as a link; never used to create a
    /// file elsewhere; refused (every policy then rejects) when others could write it.
    @Test func knownHostsAsASymlinkOrWithLoosePermissionsIsHandledSafely() async throws {
        let dir = try TestPaths.makeTemporaryDirectory("kh-planted")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let keyA = HostKeyPolicyTests.keyA, keyB = HostKeyPolicyTests.keyB
        let real = dir + "/real_known_hosts", link = dir + "/known_hosts"
        try SSHKnownHostsFile.line(for: keyA, host: "a.example", port: 22, hashed: false).appending("\n")
            .write(toFile: real, atomically: false, encoding: .utf8)
        chmod(real, 0o600)
        symlink(real, link)
        let store = SSHKnownHostsStore(path: link, hostFormat: .plain)
        #expect(try await store.lookup(host: "a.example", port: 22).keys == [keyA])
        // an append goes to the file the link names, like ssh's
        try await store.add(keyB, host: "b.example", port: 22)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == real)
        #expect(try String(contentsOfFile: real, encoding: .utf8).contains("b.example"))
        // a rewrite replaces that file and keeps the link
        try await store.replace(host: "a.example", port: 22, with: keyB)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == real)
        #expect(try await SSHKnownHostsStore(path: real).lookup(host: "a.example", port: 22).keys == [keyB])
        #expect(try await store.remove(host: "b.example", port: 22) == 1)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == real)

        // a link to a missing file: an empty store to read, but nothing is created through it
        let dangling = dir + "/dangling", target = dir + "/not-here"
        symlink(target, dangling)
        let planted = SSHKnownHostsStore(path: dangling)
        #expect(try await planted.lookup(host: "a.example", port: 22).keys.isEmpty)
        let e = await expectSSHError { try await planted.add(keyA, host: "a.example", port: 22) }
        #expect(e?.code == .knownHostsUnusable && e?.message.contains("symbolic link") == true, "\(String(describing: e))")
        #expect(!FileManager.default.fileExists(atPath: target))

        // writable by every user: refused, and a policy over it rejects
        chmod(real, 0o666)
        let loose = await expectSSHError { try await store.lookup(host: "a.example", port: 22) }
        #expect(loose?.code == .knownHostsUnusable && loose?.message.contains("writable by every user") == true)
        let verdict = await SSHHostKeyPolicy.strict(store).evaluate(SSHHostKeyContext(host: "a.example", port: 22, presentedKey: keyB))
        if case .accept = verdict { Issue.record("a world-writable known_hosts was trusted") }
        // group-writable is fine (user-private groups)
        chmod(real, 0o660)
        #expect(try await store.lookup(host: "a.example", port: 22).keys == [keyB])
        // owned by another user: refused
        chmod(real, 0o600)
        let other = try #require(getpwnam(TestServer.shared.user)?.pointee.pw_uid)
        chown(real, other, gid_t(other))
        let foreign = await expectSSHError { try await store.lookup(host: "a.example", port: 22) }
        #expect(foreign?.code == .knownHostsUnusable && foreign?.message.contains("another user") == true)
    }

    /// A private key others may read is refused before it is read, as ssh does
    /// ("UNPROTECTED PRIVATE KEY FILE"); at 0600 the same file works.
    @Test func aPrivateKeyWithLoosePermissionsIsRefusedLikeSsh() async throws {
        let dir = try TestPaths.makeTemporaryDirectory("loose-key")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let key = dir + "/id_ed25519"
        try FileManager.default.copyItem(atPath: TestServer.shared.key("id_ed25519"), toPath: key)
        for mode in [0o644, 0o640, 0o604] as [mode_t] {
            chmod(key, mode)
            let e = await expectSSHError {
                try await SSHClient.connect(TestServer.shared.configuration(.privateKey(path: key)))
            }
            #expect(e?.code == .privateKeyUnreadable, "mode \(String(mode, radix: 8)): \(String(describing: e))")
            #expect(e?.message.contains("too open") == true)
        }
        chmod(key, 0o600)
        let conn = try await SSHClient.connect(TestServer.shared.configuration(.privateKey(path: key)))
        #expect(try await conn.execute("echo ok").stdoutString == "ok\n")
        await conn.close()
    }
}
