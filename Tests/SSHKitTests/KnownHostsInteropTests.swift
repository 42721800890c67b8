import Foundation
import SSHKit
import Testing

/// known_hosts files written by this package and read by OpenSSH, and the other way round.
@Suite("known_hosts interop", .tags(.integration))
struct KnownHostsInteropTests {
    let server = TestServer.shared

    func tempPath() -> String {
        let dir = server.dir + "/kh-\(UUID().uuidString.prefix(8))"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir + "/known_hosts"
    }

    /// OpenSSH's client, strict about host keys, with only `file` as known hosts.
    func opensshConnects(knownHosts file: String, extra: [String] = []) throws -> Bool {
        // ssh keeps the first value given for an option: `extra` goes first
        let r = try TestServer.runCapturing("/usr/bin/ssh", ["-F", "/dev/null"] + extra + [
            "-p", "\(server.port)", "-i", server.key("id_ed25519"),
            "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", "UserKnownHostsFile=\(file)", "-o", "GlobalKnownHostsFile=/dev/null",
            "\(server.user)@127.0.0.1", "echo", "ok",
        ])
        return r.status == 0 && r.out == "ok\n"
    }

    @Test(arguments: [SSHKnownHostsStore.HostFormat.plain, .hashed])
    func aFileThisPackageWritesIsAcceptedByOpenSSH(format: SSHKnownHostsStore.HostFormat) async throws {
        let path = tempPath()
        #expect(try !opensshConnects(knownHosts: path), "OpenSSH must refuse before the file exists")
        let store = SSHKnownHostsStore(path: path, hostFormat: format)
        let conn = try await SSHClient.connect(server.configuration(policy: .acceptNew(store)))
        await conn.close()
        // OpenSSH negotiates the key type it finds in known_hosts first
        #expect(try opensshConnects(knownHosts: path))
        let found = try TestServer.runCapturing("/usr/bin/ssh-keygen", ["-F", "[127.0.0.1]:\(server.port)", "-f", path])
        #expect(found.status == 0)
        #expect(found.out.contains(conn.hostKey.base64))
    }

    @Test func aFileFromSshKeyscanIsRead() async throws {
        let path = tempPath()
        let scan = try TestServer.runCapturing("/usr/bin/ssh-keyscan", ["-H", "-p", "\(server.port)", "127.0.0.1"])
        #expect(scan.status == 0)
        try scan.out.write(toFile: path, atomically: true, encoding: .utf8)
        let store = SSHKnownHostsStore(path: path)
        let known = try await store.lookup(host: "127.0.0.1", port: server.port)
        #expect(known.keys.count == 3, "ed25519, ecdsa and rsa")
        #expect(Set(known.keys.map(\.sha256Fingerprint)) == Set(server.allFingerprints))
        let conn = try await SSHClient.connect(server.configuration(policy: .strict(store)))
        await conn.close()
    }

    @Test(arguments: ["yes", "no"])
    func aFileOpenSSHWritesIsRead(hash: String) async throws {
        let path = tempPath()
        #expect(try opensshConnects(knownHosts: path, extra: ["-o", "StrictHostKeyChecking=accept-new",
                                                               "-o", "HashKnownHosts=\(hash)"]))
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.hasPrefix(hash == "yes" ? "|1|" : "[127.0.0.1]:"))
        let conn = try await SSHClient.connect(server.configuration(policy: .strict(SSHKnownHostsStore(path: path))))
        await conn.close()
    }

    @Test func aChangedOrRevokedKeyIsRejectedByStrictAndAcceptNew() async throws {
        let path = tempPath()
        let stranger = try SSHHostKey(openSSH: String(contentsOfFile: server.key("id_ed25519.pub"), encoding: .utf8))
        let store = SSHKnownHostsStore(path: path, hostFormat: .plain)
        try await store.add(stranger, host: "127.0.0.1", port: server.port)
        for policy in [SSHHostKeyPolicy.strict(store), .acceptNew(store)] {
            let e = await expectSSHError { try await SSHClient.connect(server.configuration(policy: policy)) }
            #expect(e?.code == .hostKeyRejected)
            #expect(e?.expectedHostKeys == [stranger.sha256Fingerprint])
        }
        // acceptNew did not overwrite the known key
        #expect(try await store.lookup(host: "127.0.0.1", port: server.port).keys == [stranger])
        // revoke every server key: even a pinned-by-store key is refused
        let scan = try TestServer.runCapturing("/usr/bin/ssh-keyscan", ["-p", "\(server.port)", "127.0.0.1"])
        let revoked = scan.out.split(separator: "\n").filter { !$0.hasPrefix("#") }.map { line in
            "@revoked * " + line.split(separator: " ").dropFirst().joined(separator: " ")
        }
        try (scan.out + revoked.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        let e = await expectSSHError {
            try await SSHClient.connect(server.configuration(policy: .strict(SSHKnownHostsStore(path: path))))
        }
        #expect(e?.code == .hostKeyRejected)
        #expect(e?.message.contains("revoked") == true)
    }
}
