import Foundation
import SSHKit
import Testing

@Suite("Algorithm profiles", .tags(.integration))
struct AlgorithmTests {
    let server = TestServer.shared

    @Test func presetsUseOnlyNamesThisLibsshSupports() {
        #expect(SSHAlgorithms.modern.unsupportedNames == [])
        #expect(SSHAlgorithms.compatible.unsupportedNames == [])
        #expect(SSHAlgorithms.libsshDefaults.unsupportedNames == [])
        let modern = SSHAlgorithms.modern
        let all = [modern.keyExchange, modern.hostKey, modern.ciphersClientToServer, modern.macsClientToServer,
                   modern.publicKeyAcceptedTypes].compactMap { $0 }.joined()
        #expect(!all.contains { $0.contains("sha1") || $0.hasSuffix("-cbc") || $0 == "ssh-rsa" },
                "modern must not contain SHA-1 or CBC")
    }

    @Test func unsupportedNamesFailBeforeConnecting() async {
        var config = server.configuration()
        config.port = closedPort() // would be connectionRefused if anything were attempted
        config.algorithms.ciphersClientToServer = ["aes128-ctr", "nope-cipher"]
        config.algorithms.keyExchange = ["curve25519-sha256", "not-a-kex"]
        let e = await expectSSHError { try await SSHClient.connect(config) }
        #expect(e?.code == .invalidArgument)
        #expect(e?.message.contains("nope-cipher") == true && e?.message.contains("not-a-kex") == true)
        #expect(e?.message.contains("aes128-ctr") == false)
        config.algorithms = SSHAlgorithms(ciphers: [])
        #expect(await expectSSHError { try await SSHClient.connect(config) }?.code == .invalidArgument)
        config.algorithms = SSHAlgorithms(minimumRSABits: 100)
        #expect(await expectSSHError { try await SSHClient.connect(config) }?.code == .invalidArgument)
    }

    @Test func negotiatedAlgorithmsAreReadable() async throws {
        var config = server.configuration()
        config.algorithms = SSHAlgorithms(keyExchange: ["ecdh-sha2-nistp256"], hostKey: ["ecdsa-sha2-nistp256"],
                                          ciphers: ["aes128-ctr"], macs: ["hmac-sha2-256"])
        let conn = try await SSHClient.connect(config)
        let n = conn.negotiatedAlgorithms
        #expect(n.keyExchange == "ecdh-sha2-nistp256")
        #expect(n.hostKey == "ecdsa-sha2-nistp256")
        #expect(conn.hostKey.sha256Fingerprint == server.fingerprintECDSA)
        #expect(n.cipherClientToServer == "aes128-ctr" && n.cipherServerToClient == "aes128-ctr")
        #expect(n.macClientToServer == "hmac-sha2-256" && n.macServerToClient == "hmac-sha2-256")
        #expect(try await conn.execute("echo ok").stdoutString == "ok\n")
        await conn.close()
    }

    @Test(arguments: ["modern", "compatible"])
    func eachPresetConnectsToOpenSSH(preset: String) async throws {
        var config = server.configuration()
        config.algorithms = preset == "modern" ? .modern : .compatible
        let conn = try await SSHClient.connect(config)
        #expect(!conn.negotiatedAlgorithms.keyExchange.isEmpty)
        #expect(try await conn.execute("echo ok").stdoutString == "ok\n")
        await conn.close()
    }

    @Test func aServerOutsideTheProfileFailsNamingBothLists() async throws {
        let old = try TestServer.start(name: "cbc-only", extraConfig: ["Ciphers aes128-cbc"])
        defer { old.stop() }
        var config = old.configuration()
        config.algorithms = .modern
        let e = await expectSSHError { try await SSHClient.connect(config) }
        #expect(e?.code == .keyExchangeFailed)
        let text = "\(e.map { "\($0)" } ?? "")"
        #expect(text.contains("aes128-cbc"), "the server's list: \(text)")
        #expect(text.contains("aes256-ctr"), "the client's list: \(text)")
        config.algorithms = .compatible
        let conn = try await SSHClient.connect(config)
        #expect(conn.negotiatedAlgorithms.cipherClientToServer == "aes128-cbc")
        await conn.close()
    }
}
