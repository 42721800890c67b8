import Foundation
import SSHKit
import Testing

/// SFTP against the shared sshd (internal-sftp). The server runs on this machine, so
/// what the client did is also checked on the local file system.
@Suite("SFTP", .tags(.integration), .serialized)
struct SFTPTests {
    let server = TestServer.shared

    /// A fresh directory owned by the test user; removed afterwards.
    func withRemoteDirectory(_ body: (SSHConnection, SFTPClient, SFTPPath) async throws -> Void) async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let dir = try await conn.makeRemoteTemporaryDirectory("sftp")
            defer { try? FileManager.default.removeItem(atPath: dir) }
            return try await conn.withSFTP { sftp in try await body(conn, sftp, SFTPPath(dir)) }
        }
    }

    func sftpError(_ body: () async throws -> Void) async -> SSHError? {
        do {
            try await body()
            return nil
        } catch {
            return error as? SSHError
        }
    }

    @Test func theServerSpeaksVersion3WithOpenSSHExtensions() async throws {
        try await withRemoteDirectory { _, sftp, _ in
            #expect(sftp.serverVersion == 3)
            for ext in ["posix-rename@openssh.com", "statvfs@openssh.com", "fsync@openssh.com", "hardlink@openssh.com"] {
                #expect(sftp.supports(extension: ext), "\(ext) not in \(sftp.serverExtensions)")
            }
            let home = try await sftp.canonicalPath(".")
            #expect(home.string.hasPrefix("/"))
        }
    }

    @Test func aFileIsCreatedWrittenAtOffsetsReadBackAndStated() async throws {
        try await withRemoteDirectory { _, sftp, dir in
            let path = dir.appending("secret.env")
            let first = Array("hello, ".utf8), second = Array(repeating: UInt8(0x5a), count: 100_000)
            try await sftp.withFile(path, flags: [.write, .create, .exclusive], permissions: 0o600) { file in
                // out of order on purpose: offsets decide, not arrival
                try await file.write(second, at: UInt64(first.count))
                try await file.write(first, at: 0)
                try await file.synchronize()
            }
            let local = try Data(contentsOf: URL(fileURLWithPath: path.string))
            #expect(Array(local) == first + second)
            let mode = try FileManager.default.attributesOfItem(atPath: path.string)[.posixPermissions] as? Int
            #expect(mode == 0o600)
            let attrs = try await sftp.attributes(at: path)
            #expect(attrs.size == UInt64(first.count + second.count))
            #expect(attrs.kind == .regular && attrs.mode == 0o600)
            try await sftp.withFile(path) { file throws in
                #expect(try await file.read(at: 0, count: 7) == first)
                #expect(try await file.read(at: 7, count: 10) == Array(second.prefix(10)))
                #expect(try await file.read(at: 100_007, count: 10) == [], "reading at the end is empty")
                #expect(try await file.attributes().size == 100_007)
            }
        }
    }

    @Test func manyReadsInFlightOnOneHandleAssembleTheFile() async throws {
        try await withRemoteDirectory { conn, sftp, dir in
            let path = dir.appending("blob")
            _ = try await conn.execute("head -c 4194304 /dev/urandom > \(path.string)")
            let expected = Array(try Data(contentsOf: URL(fileURLWithPath: path.string)))
            let chunk = 64 * 1024
            let file = try await sftp.openFile(path)
            let pieces = try await withThrowingTaskGroup(of: (Int, [UInt8]).self) { group in
                for i in 0..<(expected.count / chunk) {
                    group.addTask { (i, try await file.read(at: UInt64(i * chunk), count: chunk)) }
                }
                var out: [(Int, [UInt8])] = []
                for try await p in group { out.append(p) }
                return out
            }
            try await file.close()
            let assembled = pieces.sorted { $0.0 < $1.0 }.flatMap { $0.1 }
            #expect(assembled == expected)
        }
    }

    @Test func serverStatusesBecomeTypedErrorsWithPathAndOperation() async throws {
        try await withRemoteDirectory { conn, sftp, dir in
            let missing = dir.appending("missing")
            let e1 = await sftpError { _ = try await sftp.attributes(at: missing) }
            #expect(e1?.code == .noSuchFile)
            #expect(e1?.sftp?.operation == "stat" && e1?.sftp?.path == missing && e1?.sftp?.status == 2)
            #expect(await sftpError { _ = try await sftp.listDirectory(at: missing) }?.code == .noSuchFile)
            #expect(try await sftp.exists(missing) == false)

            let e2 = await sftpError { _ = try await sftp.openFile("/etc/sshkit-denied", flags: [.write, .create]) }
            #expect(e2?.code == .permissionDenied && e2?.sftp?.operation == "open")

            let file = dir.appending("f")
            _ = try await conn.execute("echo old > \(file.string)")
            let e3 = await sftpError { _ = try await sftp.openFile(file, flags: [.write, .create, .exclusive]) }
            #expect(e3?.code == .sftpFailure, "O_EXCL on an existing file")
            #expect(try String(contentsOfFile: file.string, encoding: .utf8) == "old\n")

            let e4 = await sftpError { try await sftp.removeDirectory(at: dir) }
            #expect(e4?.code == .sftpFailure, "a directory that is not empty")
            let e5 = await sftpError { try await sftp.removeFile(at: missing) }
            #expect(e5?.code == .noSuchFile && e5?.sftp?.operation == "remove")
        }
    }

    @Test func directoriesAreMadeListedStreamedAndRemoved() async throws {
        try await withRemoteDirectory { conn, sftp, dir in
            let deep = dir.appending("a/b/c")
            try await sftp.createDirectory(at: deep, mode: 0o750, parents: true)
            try await sftp.createDirectory(at: deep, parents: true) // exists: fine with parents
            #expect(await sftpError { try await sftp.createDirectory(at: deep) }?.code == .sftpFailure)
            #expect(try await sftp.attributes(at: deep).kind == .directory)
            _ = try await conn.execute("cd \(dir.string)/a && touch f1 && ln -s f1 l1")
            let entries = try await sftp.listDirectory(at: dir.appending("a"))
            let kinds = Dictionary(uniqueKeysWithValues: entries.map { ($0.name.string, $0.attributes.kind) })
            #expect(kinds == ["b": .directory, "f1": .regular, "l1": .symlink])

            // a big directory arrives in batches, every name once
            _ = try await conn.execute("mkdir \(dir.string)/big && cd \(dir.string)/big && seq 1 2500 | xargs touch")
            var names = Set<String>()
            var count = 0
            for try await entry in sftp.directoryEntries(at: dir.appending("big")) {
                names.insert(entry.name.string)
                count += 1
            }
            #expect(count == 2500 && names.count == 2500 && names.contains("2500"))

            try await sftp.removeDirectory(at: deep)
            #expect(try await sftp.exists(deep) == false)
        }
    }

    @Test func renameNeverOverwritesUnlessAskedAndThenReplacesAtomically() async throws {
        try await withRemoteDirectory { conn, sftp, dir in
            let a = dir.appending("a"), b = dir.appending("b"), c = dir.appending("c")
            _ = try await conn.execute("echo A > \(a.string) && echo B > \(b.string)")
            let e = await sftpError { try await sftp.rename(a, to: b) }
            #expect(e?.code == .sftpFailure && e?.sftp?.operation == "rename")
            #expect(try String(contentsOfFile: b.string, encoding: .utf8) == "B\n")
            try await sftp.rename(a, to: b, replacing: true)
            #expect(try String(contentsOfFile: b.string, encoding: .utf8) == "A\n")
            #expect(!FileManager.default.fileExists(atPath: a.string))
            try await sftp.rename(b, to: c)
            #expect(try String(contentsOfFile: c.string, encoding: .utf8) == "A\n")
        }
    }

    @Test func linksPermissionsTimesAndFileSystemStats() async throws {
        try await withRemoteDirectory { conn, sftp, dir in
            let target = dir.appending("target"), link = dir.appending("link"), hard = dir.appending("hard")
            _ = try await conn.execute("echo T > \(target.string)")
            try await sftp.createSymbolicLink(at: link, pointingTo: "target")
            #expect(try await sftp.destinationOfSymbolicLink(at: link) == "target")
            #expect(try await sftp.linkAttributes(at: link).kind == .symlink)
            #expect(try await sftp.attributes(at: link).kind == .regular)
            try await sftp.createHardLink(at: hard, to: target)
            #expect(try String(contentsOfFile: hard.string, encoding: .utf8) == "T\n")

            try await sftp.setPermissions(0o640, at: target)
            #expect(try await sftp.attributes(at: target).mode == 0o640)
            try await sftp.setTimes(access: 1_000_000_000, modification: 1_234_567_890, at: target)
            let a = try await sftp.attributes(at: target)
            #expect(a.modificationTime == 1_234_567_890 && a.accessTime == 1_000_000_000)
            let mtime = try FileManager.default.attributesOfItem(atPath: target.string)[.modificationDate] as? Date
            #expect(mtime?.timeIntervalSince1970 == 1_234_567_890)
            // one time alone: the other stays (SFTP sends both; the client reads it first)
            try await sftp.setAttributes(SFTPFileAttributes(modificationTime: 1_300_000_000), at: target)
            let b = try await sftp.attributes(at: target)
            #expect(b.modificationTime == 1_300_000_000 && b.accessTime == 1_000_000_000, "\(b)")
            try await sftp.setAttributes(SFTPFileAttributes(accessTime: 1_100_000_000), at: target)
            let c = try await sftp.attributes(at: target)
            #expect(c.modificationTime == 1_300_000_000 && c.accessTime == 1_100_000_000, "\(c)")

            let fs = try await sftp.fileSystemStats(at: dir)
            #expect(fs.blockSize > 0 && fs.blocks > 0 && fs.maxNameLength >= 255)
        }
    }

    @Test func nonUTF8NamesRoundTripAsBytes() async throws {
        try await withRemoteDirectory { _, sftp, dir in
            let name = SFTPPath(bytes: [0x66, 0xff, 0xfe, 0x2e, 0x74, 0x78, 0x74]) // "f\xff\xfe.txt"
            #expect(!name.isValidUTF8)
            let path = dir.appending(name)
            try await sftp.withFile(path, flags: [.write, .create, .exclusive]) { try await $0.write([1, 2, 3], at: 0) }
            let listed = try await sftp.listDirectory(at: dir)
            #expect(listed.map(\.name) == [name], "the listing gives back the exact bytes")
            #expect(try await sftp.withFile(path.parent.appending(listed[0].name)) { try await $0.read(at: 0, count: 10) } == [1, 2, 3])
            // the same bytes on disk
            let raw = path.bytes.map { CChar(bitPattern: $0) } + [0]
            #expect(access(raw, F_OK) == 0)
        }
    }

    /// A request whose reply is late (the server is stuck opening a FIFO) is cancelled
    /// at once; the session goes on, and the handle that arrives later is closed.
    @Test func cancellingARequestLeavesTheSessionUsable() async throws {
        try await withRemoteDirectory { conn, sftp, dir in
            let fifo = dir.appending("fifo")
            _ = try await conn.execute("mkfifo \(fifo.string)")
            let opener = Task { try await sftp.openFile(fifo) }
            try await Task.sleep(for: .milliseconds(200)) // the server now blocks in open()
            let t0 = ContinuousClock.now
            opener.cancel()
            let result = await opener.result
            #expect(ContinuousClock.now - t0 < .milliseconds(100))
            #expect((result.error as? SSHError)?.code == .cancelled)
            // unblock the server: a writer for the FIFO
            let writer = open(fifo.string, O_WRONLY)
            #expect(writer >= 0)
            defer { close(writer) }
            // the session still answers, and the connection is fine
            #expect(try await sftp.attributes(at: dir).kind == .directory)
            #expect(try await conn.execute("echo ok").stdoutString == "ok\n")
            // the handle the server opened for the cancelled request was closed again
            func serverHoldsFIFO() -> Bool {
                server.sessionProcessTree().contains { pid in
                    let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
                    return fds.contains { fd in
                        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")) == fifo.string
                    }
                }
            }
            var held = serverHoldsFIFO()
            for _ in 0..<100 where held { // bounded: 2 s
                try await Task.sleep(for: .milliseconds(20))
                held = serverHoldsFIFO()
            }
            #expect(!held, "sshd still holds the FIFO open")
        }
    }

    @Test func closingTheSessionOrTheConnectionFailsCallsWithATypedError() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let sftp = try await conn.openSFTP()
            sftp.close()
            #expect(await sftpError { _ = try await sftp.attributes(at: "/") }?.code == .connectionClosed)
            // the connection and a new session are fine
            let again = try await conn.openSFTP()
            #expect(try await again.attributes(at: "/").kind == .directory)
            await conn.close()
            let e = await sftpError { _ = try await again.attributes(at: "/") }
            #expect(e?.code == .connectionClosed, "\(String(describing: e))")
        }
    }

    /// Dropping a client closes its channel: with MaxSessions 1, a second session opens
    /// only once the first is gone (sshd frees a session a loop turn after our CLOSE, so
    /// a refusal is retried a bounded number of times).
    @Test func droppingTheClientClosesItsChannel() async throws {
        let one = try TestServer.start(name: "sftp-one-session", extraConfig: ["MaxSessions 1"])
        defer { one.stop() }
        try await SSHClient.withConnection(one.configuration()) { conn in
            do {
                let first = try await conn.openSFTP()
                #expect(try await first.attributes(at: "/").kind == .directory)
            }
            var opened: SFTPClient?
            for _ in 0..<50 where opened == nil {
                do throws(SSHError) {
                    opened = try await conn.openSFTP()
                } catch {
                    #expect(error.code == .channelOpenFailed, "\(error)")
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            #expect(opened != nil, "the first session's channel was never closed")
            opened?.close()
        }
    }

    @Test func aServerWithoutSFTPIsSftpUnavailable() async throws {
        let bare = try TestServer.start(name: "no-sftp", extraConfig: ["Subsystem other /bin/false"])
        defer { bare.stop() }
        try await SSHClient.withConnection(bare.configuration()) { conn in
            let e = await sftpError { _ = try await conn.openSFTP() }
            #expect(e?.code == .sftpUnavailable, "\(String(describing: e))")
            let ok = try await conn.execute("echo ok").stdoutString
            #expect(ok == "ok\n")
        }
    }
}

extension Result {
    var error: Failure? {
        if case .failure(let e) = self { return e }
        return nil
    }
}
