import Foundation
@testable import SSHKit
import Synchronization
import Testing

/// Inputs an outside reviewer found crashing, hanging or losing data in transfers: each
/// gets a typed error or the right result now, against the shared sshd.
extension SFTPTransferTests {
    @Test func nulBytesNegativeSizesAndAFIFOAreTypedErrorsNotCrashesOrHangs() async throws {
        try await withDirectories { _, sftp, remote, local in
            let withNUL = SFTPPath(bytes: Array("a".utf8) + [0] + Array("b".utf8)) // no trap
            func invalid(_ what: String, _ body: () async throws -> Void) async {
                do {
                    try await body()
                    Issue.record("\(what): accepted")
                } catch {
                    #expect((error as? SSHError)?.code == .invalidArgument, "\(what): \(error)")
                }
            }
            await invalid("stat") { _ = try await sftp.attributes(at: withNUL) }
            await invalid("write") { try await sftp.write([1], to: remote.appending(withNUL)) }
            await invalid("rename") { try await sftp.rename(remote.appending("x"), to: withNUL) }
            await invalid("symlink") { try await sftp.createSymbolicLink(at: remote.appending("l"), pointingTo: withNUL) }
            await invalid("download") { _ = try await sftp.download(remote.appending("x"), to: local + "/a\u{0}b") }
            await invalid("upload") { _ = try await sftp.upload(local + "/a\u{0}b", to: remote.appending("x")) }
            await invalid("downloadDirectory") { _ = try await sftp.downloadDirectory(remote, to: local + "/d\u{0}") }
            await invalid("uploadDirectory") { _ = try await sftp.uploadDirectory(local + "\u{0}", to: remote.appending("d")) }
            await invalid("limit") { _ = try await sftp.contentsOfFile(remote.appending("x"), limit: -1) }
            try await sftp.write(Array("data".utf8), to: remote.appending("f"))
            let file = try await sftp.openFile(remote.appending("f"))
            await #expect(throws: SSHError.self) { try await file.read(at: 0, count: -1) }
            try await file.close()
            #expect(!FileManager.default.fileExists(atPath: local + "/a"), "nothing written at the cut-short path")

            // a FIFO: refused at once, not waited on for a writer
            let fifo = local + "/fifo"
            #expect(mkfifo(fifo, 0o600) == 0)
            let stuck = Mutex(false)
            let unblock = Task.detached { // bounds the test if the open ever blocks again
                try? await Task.sleep(for: .seconds(10))
                let fd = open(fifo, O_WRONLY | O_NONBLOCK)
                if fd >= 0 { stuck.withLock { $0 = true }; close(fd) }
            }
            do throws(SSHError) {
                try await sftp.upload(fifo, to: remote.appending("fifo"))
                Issue.record("uploaded a FIFO")
            } catch {
                #expect(error.code == .invalidArgument, "\(error)")
            }
            unblock.cancel()
            #expect(!stuck.withLock { $0 }, "the upload waited for a writer")
            #expect(leftovers(remote.string).isEmpty)
        }
    }

    @Test func aResumedUploadOfAReadOnlyFileContinuesAndEndsReadOnly() async throws {
        try await withDirectories { _, sftp, remote, local in
            let data = try randomFile(local + "/src", bytes: 16 << 20, mode: 0o444)
            let dst = remote.appending("dst")
            var options = SFTPTransferOptions(chunkSize: 4096, maxRequestsInFlight: 1, resume: true)
            Progress.reset()
            let first = options
            let (error, _) = await cancelMidway { try await sftp.upload(local + "/src", to: dst, options: first, progress: Progress.record) }
            #expect(error?.code == .cancelled)
            let partial = remote.string + "/.dst.sshkit-partial"
            #expect(try FileManager.default.attributesOfItem(atPath: partial)[.posixPermissions] as? Int == 0o600,
                    "the partial stays writable by its owner, and no one else's")
            options.chunkSize = nil
            options.maxRequestsInFlight = 16
            try await sftp.upload(local + "/src", to: dst, options: options)
            #expect(contents(dst.string) == data)
            #expect(try FileManager.default.attributesOfItem(atPath: dst.string)[.posixPermissions] as? Int == 0o444)
            #expect(leftovers(remote.string).isEmpty)
        }
    }

    @Test func namesNearTheLengthLimitTravelBothWaysAndResume() async throws {
        try await withDirectories { _, sftp, remote, local in
            // 84 three-byte characters: 252 bytes, room for no temporary suffix
            let name = String(repeating: "語", count: 84)
            let data = try randomFile(local + "/" + name, bytes: 100_000)
            try await sftp.upload(local + "/" + name, to: remote.appending(name))
            #expect(contents(remote.string + "/" + name) == data)
            try await sftp.upload(local + "/" + name, to: remote.appending(name), options: SFTPTransferOptions(resume: true))
            try FileManager.default.createDirectory(atPath: local + "/back", withIntermediateDirectories: false)
            try await sftp.download(remote.appending(name), to: local + "/back/" + name)
            try await sftp.download(remote.appending(name), to: local + "/back/" + name, options: SFTPTransferOptions(resume: true))
            #expect(contents(local + "/back/" + name) == data)
            #expect(leftovers(remote.string).isEmpty && leftovers(local + "/back").isEmpty)
            // the shortened names stay apart and valid UTF-8
            let a = temporaryName(Array((name + "a").utf8), suffix: ".sshkit-partial")
            let b = temporaryName(Array((name + "b").utf8), suffix: ".sshkit-partial")
            #expect(a.count <= 255 && a != b && String(validating: a, as: UTF8.self) != nil)
            #expect(temporaryName(Array("x".utf8), suffix: ".s") == Array(".x.s".utf8))
        }
    }

    @Test func treesKeepDirectoryModesWithoutSetIDAndNeverFollowATrailingSlashLink() async throws {
        try await withDirectories { conn, sftp, remote, local in
            let r = remote.string
            _ = try await conn.execute("mkdir -p \(r)/tree/sub && chmod 2750 \(r)/tree/sub && printf one > \(r)/tree/sub/one")
            let summary = try await sftp.downloadDirectory(SFTPPath(r + "/tree"), to: local + "/tree/",
                                                           options: SFTPTransferOptions(permissions: 0o600))
            #expect(summary.files == 1 && summary.directories == 2)
            #expect(try FileManager.default.attributesOfItem(atPath: local + "/tree/sub")[.posixPermissions] as? Int == 0o750,
                    "a directory keeps its mode, less set-group-ID, whatever `permissions` says")
            #expect(try FileManager.default.attributesOfItem(atPath: local + "/tree/sub/one")[.posixPermissions] as? Int == 0o600)

            // "trap/" names the link's target to lstat: the slash is dropped, the link refused
            let elsewhere = local + "/elsewhere"
            try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: false)
            try FileManager.default.createSymbolicLink(atPath: local + "/trap", withDestinationPath: elsewhere)
            do throws(SSHError) {
                try await sftp.downloadDirectory(SFTPPath(r + "/tree"), to: local + "/trap/")
                Issue.record("downloaded through a symlink")
            } catch {
                #expect(error.code == .localFileError && error.systemErrno == ENOTDIR)
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).isEmpty)
            await #expect(throws: SSHError.self) { try await sftp.uploadDirectory(local + "/trap/", to: SFTPPath(r + "/up")) }

            // a local name that is not UTF-8 is skipped, the rest goes up
            let odd: [UInt8] = Array((local + "/tree/odd-").utf8) + [0xff]
            let fd = odd.withUnsafeBufferPointer { p in
                (Array(p) + [0]).withUnsafeBufferPointer { q in
                    q.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_WRONLY | O_CREAT | O_EXCL, 0o600) }
                }
            }
            #expect(fd >= 0)
            close(fd)
            let up = try await sftp.uploadDirectory(local + "/tree", to: SFTPPath(r + "/copy"))
            #expect(up.files == 1 && up.skipped.count == 1 && up.skipped[0].hasPrefix("odd-"), "\(up)")
            #expect(contents(r + "/copy/sub/one") == Array("one".utf8))
        }
    }
}

extension SFTPFallbackTests {
    @Test func mvRefusesADirectoryAtTheDestinationLikePosixRename() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let dir = try await conn.makeRemoteTemporaryDirectory("mvdir")
            defer { try? FileManager.default.removeItem(atPath: dir) }
            try await conn.withSFTP { sftp in
                let source = SFTPPath(dir).appending("new")
                try await sftp.write(Array("new".utf8), to: source)
                try await sftp.createDirectory(at: SFTPPath(dir).appending("target"))
                try await sftp.createSymbolicLink(at: SFTPPath(dir).appending("link"), pointingTo: SFTPPath(dir).appending("target"))
                for destination in ["target", "link"] {
                    do throws(SSHError) {
                        try await sftp.replaceWithMove(source, SFTPPath(dir).appending(destination))
                        Issue.record("moved into the directory at \(destination)")
                    } catch {
                        #expect(error.code == .sftpFailure && error.message.contains("is a directory"), "\(error)")
                    }
                }
                #expect(FileManager.default.fileExists(atPath: source.string))
                #expect(try FileManager.default.contentsOfDirectory(atPath: dir + "/target").isEmpty)
            }
        }
    }
}
