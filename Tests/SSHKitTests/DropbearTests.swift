import Foundation
import SSHKit
import Testing

/// Interop with dropbear (Debian's dropbear-bin), started like the sshd fixture.
@Suite("dropbear interop", .tags(.integration), .serialized)
struct DropbearTests {
    static let server: TestServer = {
        do { return try TestServer.startDropbear(name: "dropbear") } catch { fatalError("dropbear: \(error)") }
    }()

    var server: TestServer { Self.server }

    @Test func keyAndPasswordAuthenticationAndExec() async throws {
        for auth in [SSHAuthentication.privateKey(path: server.key("id_ed25519")), .password(server.password)] {
            let conn = try await SSHClient.connect(server.configuration(auth))
            #expect(conn.serverBanner.contains("dropbear"))
            #expect(server.allFingerprints.contains(conn.hostKey.sha256Fingerprint))
            let r = try await conn.execute("echo out; echo err >&2; exit 3")
            #expect(r.stdoutString == "out\n" && r.stderrString == "err\n" && r.exitStatus == .exited(3))
            await conn.close()
        }
    }

    @Test func binaryRoundTripSignalsAndConcurrency() async throws {
        let conn = try await SSHClient.connect(server.configuration())
        let data = randomBytes(3_000_000)
        let echoed = try await conn.execute("cat", stdin: data, outputLimit: 4_000_000)
        #expect(echoed.stdout == data)
        let killed = try await conn.execute("kill -KILL $$")
        guard case .signaled(let name, _) = killed.exitStatus else { Issue.record("\(killed.exitStatus)"); return }
        #expect(name == "KILL")
        let results = try await withThrowingTaskGroup(of: String.self) { g in
            for i in 0..<8 { g.addTask { try await conn.execute("sleep 0.2; echo \(i)").stdoutString } }
            return try await g.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(results == Set((0..<8).map { "\($0)\n" }))
        await conn.close()
    }

    @Test(arguments: ["modern", "compatible", "default"])
    func eachPresetConnects(preset: String) async throws {
        var config = server.configuration()
        config.algorithms = preset == "modern" ? .modern : preset == "compatible" ? .compatible : .libsshDefaults
        let conn = try await SSHClient.connect(config)
        #expect(try await conn.execute("echo ok").stdoutString == "ok\n")
        await conn.close()
    }

    @Test func streamedCommandsAndAShellWork() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let data = randomBytes(2 << 20)
            let cat = try await conn.startCommand("cat")
            async let echoed = cat.stdout.collect(upTo: 4 << 20)
            try await cat.input.write(data)
            try cat.input.finish()
            #expect(try await echoed == data)
            #expect(try await cat.exitStatus() == .exited(0))
            let shell = try await conn.startShell(terminal: SSHTerminal(size: SSHTerminalSize(columns: 90, rows: 33)))
            var it = shell.output.makeAsyncIterator()
            try await shell.input.write("stty size; exit 6\n")
            var seen = ""
            while let chunk = try await it.next() { seen += String(decoding: chunk, as: UTF8.self) }
            #expect(seen.contains("33 90"), "\(seen.debugDescription)")
            #expect(try await shell.exitStatus() == .exited(6))
        }
    }

    /// dropbear runs OpenSSH's sftp-server (/usr/lib/sftp-server) for the subsystem.
    @Test func sftpTransfersAndOperationsWork() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let dir = try await conn.makeRemoteTemporaryDirectory("dbsftp")
            defer { try? FileManager.default.removeItem(atPath: dir) }
            try await conn.withSFTP { sftp in
                #expect(sftp.serverVersion == 3)
                let data = randomBytes(3_000_000)
                let local = NSTemporaryDirectory() + "sshkit-db-\(UUID().uuidString)"
                try Data(data).write(to: URL(fileURLWithPath: local))
                defer { try? FileManager.default.removeItem(atPath: local) }
                let remote = SFTPPath(dir).appending("up")
                try await sftp.upload(local, to: remote)
                try await sftp.download(remote, to: local + ".back")
                defer { try? FileManager.default.removeItem(atPath: local + ".back") }
                #expect(FileManager.default.contents(atPath: local + ".back").map { Array($0) } == data)
                try await sftp.createDirectory(at: SFTPPath(dir).appending("d/e"), parents: true)
                let names = try await sftp.listDirectory(at: SFTPPath(dir)).map(\.name.string).sorted()
                #expect(names == ["d", "up"])
                try await sftp.rename(remote, to: SFTPPath(dir).appending("d/moved"), replacing: true)
                #expect(try await sftp.attributes(at: SFTPPath(dir).appending("d/moved")).size == 3_000_000)
                do throws(SSHError) {
                    _ = try await sftp.attributes(at: remote)
                    Issue.record("the old name still exists")
                } catch {
                    #expect(error.code == .noSuchFile)
                }
            }
        }
    }

    @Test func pinnedMismatchAndKnownHostsWork() async throws {
        let wrong = try SSHHostKey(openSSH: String(contentsOfFile: server.key("id_ed25519.pub"), encoding: .utf8))
        let e = await expectSSHError {
            try await SSHClient.connect(server.configuration(policy: .pinned([wrong.sha256Fingerprint])))
        }
        #expect(e?.code == .hostKeyRejected)
        let store = SSHKnownHostsStore(path: server.dir + "/dropbear_known_hosts")
        await (try await SSHClient.connect(server.configuration(policy: .acceptNew(store)))).close()
        await (try await SSHClient.connect(server.configuration(policy: .strict(store)))).close()
    }

    @Test func aProfileDropbearCannotMeetFailsNamingBothLists() async throws {
        var config = server.configuration()
        config.algorithms = SSHAlgorithms(keyExchange: ["diffie-hellman-group18-sha512"])
        let e = await expectSSHError { try await SSHClient.connect(config) }
        #expect(e?.code == .keyExchangeFailed)
        let text = e.map { "\($0)" } ?? ""
        #expect(text.contains("diffie-hellman-group18-sha512") && text.contains("curve25519-sha256"), "\(text)")
    }

    @Test func wrongPasswordIsAuthenticationFailed() async {
        let e = await expectSSHError { try await SSHClient.connect(server.configuration(.password("wrong"))) }
        #expect(e?.code == .authenticationFailed)
    }
}
