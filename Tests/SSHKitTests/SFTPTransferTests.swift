import Foundation
import SSHKit
import Synchronization
import Testing

/// Downloads, uploads and in-memory files: checksums, modes, atomicity, cancellation
/// and resume, against the shared sshd (on this machine, so both ends are checked).
@Suite("SFTP transfers", .tags(.integration), .serialized)
struct SFTPTransferTests {
    let server = TestServer.shared

    /// A remote directory (owned by the test user) and a local one (owned by root).
    func withDirectories(_ body: (SSHConnection, SFTPClient, SFTPPath, String) async throws -> Void) async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let remote = try await conn.makeRemoteTemporaryDirectory("sftpx")
            let local = NSTemporaryDirectory() + "sshkit-local-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: local, withIntermediateDirectories: false)
            defer {
                try? FileManager.default.removeItem(atPath: remote)
                try? FileManager.default.removeItem(atPath: local)
            }
            try await conn.withSFTP { sftp in try await body(conn, sftp, SFTPPath(remote), local) }
        }
    }

    /// A file of random bytes owned by the test user (so the remote side can use it).
    func randomFile(_ path: String, bytes: Int, mode: Int = 0o640) throws -> [UInt8] {
        let urandom = try #require(FileHandle(forReadingAtPath: "/dev/urandom"))
        defer { try? urandom.close() }
        let data = urandom.readData(ofLength: bytes)
        try data.write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        try giveToTestUser(path)
        return Array(data)
    }

    func contents(_ path: String) -> [UInt8]? {
        FileManager.default.contents(atPath: path).map { Array($0) }
    }

    func leftovers(_ dir: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.contains(".sshkit-") }
    }

    /// Makes the test user own `path` (the remote side writes as that user).
    func giveToTestUser(_ path: String) throws {
        _ = try TestServer.run("/bin/chown", ["-R", server.user, path])
    }

    @Test func downloadIsByteExactKeepsTheModeAndReportsProgress() async throws {
        try await withDirectories { _, sftp, remote, local in
            let src = remote.string + "/src"
            let data = try randomFile(src, bytes: 8 << 20 + 12345, mode: 0o640)
            let seen = Mutex<[UInt64]>([])
            let size = try await sftp.download(SFTPPath(src), to: local + "/dst", options: SFTPTransferOptions(preserveTimes: true)) { p in
                seen.withLock { $0.append(p.bytesTransferred) }
                #expect(p.totalBytes == UInt64(data.count))
            }
            #expect(size == UInt64(data.count))
            #expect(contents(local + "/dst") == data)
            let attrs = try FileManager.default.attributesOfItem(atPath: local + "/dst")
            #expect(attrs[.posixPermissions] as? Int == 0o640)
            let srcTime = try FileManager.default.attributesOfItem(atPath: src)[.modificationDate] as? Date
            #expect((attrs[.modificationDate] as? Date).map { Int($0.timeIntervalSince1970) } == srcTime.map { Int($0.timeIntervalSince1970) })
            let progress = seen.withLock { $0 }
            #expect(progress.first == 0 && progress.last == UInt64(data.count))
            #expect(zip(progress, progress.dropFirst()).allSatisfy { $0 <= $1 }, "progress only grows")
            #expect(leftovers(local).isEmpty)
        }
    }

    @Test func uploadIsAtomicByteExactAndReplacesTheDestination() async throws {
        try await withDirectories { _, sftp, remote, local in
            let data = try randomFile(local + "/src", bytes: 8 << 20 + 777, mode: 0o600)
            let dst = remote.appending("dst")
            try "old".write(toFile: dst.string, atomically: false, encoding: .utf8)
            try giveToTestUser(dst.string)
            let size = try await sftp.upload(local + "/src", to: dst)
            #expect(size == UInt64(data.count))
            #expect(contents(dst.string) == data)
            #expect(try FileManager.default.attributesOfItem(atPath: dst.string)[.posixPermissions] as? Int == 0o600)
            #expect(leftovers(remote.string).isEmpty)

            // a planted symlink at the destination is replaced, its target never written
            let victim = remote.string + "/victim"
            try "keep".write(toFile: victim, atomically: false, encoding: .utf8)
            let planted = remote.appending("planted")
            try FileManager.default.createSymbolicLink(atPath: planted.string, withDestinationPath: victim)
            try await sftp.upload(local + "/src", to: planted)
            #expect(try String(contentsOfFile: victim, encoding: .utf8) == "keep")
            #expect(contents(planted.string) == data)
            #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: planted.string)) == nil)
        }
    }

    @Test func smallFilesInMemoryHaveAnExplicitLimit() async throws {
        try await withDirectories { _, sftp, remote, _ in
            let path = remote.appending("token.json")
            try await sftp.write(Array("{\"t\":1}".utf8), to: path, permissions: 0o600)
            #expect(try await sftp.contentsOfFile(path) == Array("{\"t\":1}".utf8))
            #expect(try FileManager.default.attributesOfItem(atPath: path.string)[.posixPermissions] as? Int == 0o600)
            let big = remote.string + "/big"
            _ = try randomFile(big, bytes: 100_000)
            do throws(SSHError) {
                _ = try await sftp.contentsOfFile(SFTPPath(big), limit: 50_000)
                Issue.record("a file over the limit was read")
            } catch {
                #expect(error.code == .outputLimitExceeded)
            }
            #expect(try await sftp.contentsOfFile(SFTPPath(big), limit: 100_000).count == 100_000)
            #expect(try await sftp.contentsOfFile(remote.appending("token.json"), limit: 7).count == 7)
        }
    }

    /// A slow transfer (4 KiB requests, one at a time) cancelled from its progress callback.
    func cancelMidway(_ start: @escaping @Sendable () async throws -> UInt64) async -> (SSHError?, Duration) {
        let cancelledAt = Mutex<ContinuousClock.Instant?>(nil)
        let task = Task { try await start() }
        // cancel once it has moved some bytes (bounded: 10 s)
        for _ in 0..<500 {
            try? await Task.sleep(for: .milliseconds(20))
            if Progress.moved.withLock({ $0 }) > 1 << 20 { break }
        }
        cancelledAt.withLock { $0 = .now }
        task.cancel()
        let result = await task.result
        let elapsed = ContinuousClock.now - cancelledAt.withLock { $0! }
        switch result {
        case .failure(let e):
            if e as? SSHError == nil { Issue.record("not an SSHError: \(e)") }
            return (e as? SSHError, elapsed)
        case .success(let n):
            Issue.record("the transfer finished (\(n) bytes) before it was cancelled")
            return (nil, elapsed)
        }
    }

    enum Progress {
        static let moved = Mutex<UInt64>(0)
        static func reset() { moved.withLock { $0 = 0 } }
        static let record: @Sendable (SFTPTransferProgress) -> Void = { p in moved.withLock { $0 = p.bytesTransferred } }
    }

    @Test func cancelledDownloadStopsPromptlyLeavesNothingAndResumes() async throws {
        try await withDirectories { _, sftp, remote, local in
            let src = remote.string + "/src"
            let data = try randomFile(src, bytes: 16 << 20)
            let slow = SFTPTransferOptions(chunkSize: 4096, maxRequestsInFlight: 1)
            Progress.reset()
            let (e1, t1) = await cancelMidway { try await sftp.download(SFTPPath(src), to: local + "/dst", options: slow, progress: Progress.record) }
            #expect(e1?.code == .cancelled)
            #expect(t1 < .milliseconds(100), "cancelled after \(t1)")
            #expect(!FileManager.default.fileExists(atPath: local + "/dst") && leftovers(local).isEmpty)

            // with resume the partial data stays, and the next attempt continues from it
            var resume = slow
            resume.resume = true
            Progress.reset()
            let resuming = resume
            let (e2, _) = await cancelMidway { try await sftp.download(SFTPPath(src), to: local + "/dst", options: resuming, progress: Progress.record) }
            #expect(e2?.code == .cancelled)
            let partial = local + "/.dst.sshkit-partial"
            let kept = contents(partial) ?? []
            #expect(kept.count > 1 << 20 && kept == Array(data.prefix(kept.count)), "the partial file is a true prefix")
            let first = Mutex<UInt64?>(nil)
            resume.chunkSize = nil
            resume.maxRequestsInFlight = 16
            try await sftp.download(SFTPPath(src), to: local + "/dst", options: resume) { p in
                first.withLock { if $0 == nil { $0 = p.bytesTransferred } }
            }
            #expect(first.withLock { $0 } == UInt64(kept.count), "resumed from the partial's end")
            #expect(contents(local + "/dst") == data)
            #expect(leftovers(local).isEmpty)
        }
    }

    @Test func cancelledUploadLeavesTheOldFileAndNoTempAndResumes() async throws {
        try await withDirectories { _, sftp, remote, local in
            let data = try randomFile(local + "/src", bytes: 16 << 20)
            let dst = remote.appending("dst")
            try "old".write(toFile: dst.string, atomically: false, encoding: .utf8)
            try giveToTestUser(dst.string)
            let slow = SFTPTransferOptions(chunkSize: 4096, maxRequestsInFlight: 1)
            Progress.reset()
            let (e1, t1) = await cancelMidway { try await sftp.upload(local + "/src", to: dst, options: slow, progress: Progress.record) }
            #expect(e1?.code == .cancelled)
            #expect(t1 < .milliseconds(100), "cancelled after \(t1)")
            #expect(try String(contentsOfFile: dst.string, encoding: .utf8) == "old")
            // the temporary file's removal finishes after the cancelled call returned
            #expect(await eventually(timeout: .seconds(5)) { leftovers(remote.string).isEmpty }, "\(leftovers(remote.string))")

            var resume = slow
            resume.resume = true
            Progress.reset()
            let resuming = resume
            let (e2, _) = await cancelMidway { try await sftp.upload(local + "/src", to: dst, options: resuming, progress: Progress.record) }
            #expect(e2?.code == .cancelled)
            let kept = contents(remote.string + "/.dst.sshkit-partial") ?? []
            #expect(kept.count > 1 << 20 && kept == Array(data.prefix(kept.count)), "the remote partial is a true prefix")
            resume.chunkSize = nil
            resume.maxRequestsInFlight = 16
            try await sftp.upload(local + "/src", to: dst, options: resume)
            #expect(contents(dst.string) == data)
            #expect(leftovers(remote.string).isEmpty)
        }
    }

    /// `defer { sftp.close() }` around an upload that is cancelled: the close waits for the
    /// temporary file's removal (which the cancelled call left to a task of its own) instead
    /// of cutting it off, then ends the session.
    @Test func aCancelledUploadLeavesNoTempWhenTheClientClosesAtOnce() async throws {
        try await withDirectories { conn, _, remote, local in
            _ = try randomFile(local + "/src", bytes: 16 << 20)
            let dst = remote.appending("dst")
            let slow = SFTPTransferOptions(chunkSize: 4096, maxRequestsInFlight: 1)
            let sftp = try await conn.openSFTP()
            Progress.reset()
            let (e, _) = await cancelMidway {
                defer { sftp.close() }
                return try await sftp.upload(local + "/src", to: dst, options: slow, progress: Progress.record)
            }
            #expect(e?.code == .cancelled)
            #expect(await eventually(timeout: .seconds(5)) { leftovers(remote.string).isEmpty }, "\(leftovers(remote.string))")
            #expect(!FileManager.default.fileExists(atPath: dst.string))
            // and the session did end
            var ended = false
            for _ in 0..<80 where !ended {
                do {
                    _ = try await sftp.attributes(at: remote)
                    try await Task.sleep(for: .milliseconds(100))
                } catch {
                    ended = (error as? SSHError)?.code == .connectionClosed
                }
            }
            #expect(ended, "the client's session stayed open after close()")
        }
    }

    /// A partial file longer than the source cannot be its prefix: the download starts over.
    @Test func aResumePartialLongerThanTheSourceIsDiscarded() async throws {
        try await withDirectories { _, sftp, remote, local in
            let src = remote.string + "/src"
            let data = try randomFile(src, bytes: 100_000)
            try Data(repeating: 0x41, count: 300_000).write(to: URL(fileURLWithPath: local + "/.dst.sshkit-partial"))
            try await sftp.download(SFTPPath(src), to: local + "/dst", options: SFTPTransferOptions(resume: true))
            #expect(contents(local + "/dst") == data)
            #expect(leftovers(local).isEmpty)
        }
    }

    @Test func badTransferArgumentsAreTypedErrors() async throws {
        try await withDirectories { _, sftp, remote, local in
            await #expect(throws: SSHError.self) { try await sftp.download(remote, to: local + "/x") } // a directory
            await #expect(throws: SSHError.self) { try await sftp.upload(local, to: remote.appending("x")) } // a directory
            do throws(SSHError) {
                try await sftp.download(remote.appending("missing"), to: local + "/x")
            } catch {
                #expect(error.code == .noSuchFile)
            }
            do throws(SSHError) {
                try await sftp.upload(local + "/missing", to: remote.appending("x"))
            } catch {
                #expect(error.code == .localFileError && error.systemErrno == ENOENT)
            }
            do throws(SSHError) {
                try await sftp.download(remote, to: local + "/x", options: SFTPTransferOptions(maxRequestsInFlight: 0))
            } catch {
                #expect(error.code == .invalidArgument)
            }
            #expect(!FileManager.default.fileExists(atPath: local + "/x") && leftovers(local).isEmpty)
            #expect(leftovers(remote.string).isEmpty)
        }
    }
}

extension SFTPTransferTests {
    @Test func directoryTreesGoBothWaysWithModesAndTimesAndNoSymlinksFollowed() async throws {
        try await withDirectories { conn, sftp, remote, local in
            let r = remote.string
            _ = try await conn.execute("""
                mkdir -p \(r)/tree/sub/deeper && chmod 750 \(r)/tree/sub && \
                printf one > \(r)/tree/one && printf two > \(r)/tree/sub/two && chmod 640 \(r)/tree/sub/two && \
                head -c 300000 /dev/urandom > \(r)/tree/sub/deeper/blob && \
                touch -d @1234567890 \(r)/tree/sub/two && ln -s /etc/passwd \(r)/tree/sub/link && mkfifo \(r)/tree/fifo
                """)
            let summary = try await sftp.downloadDirectory(SFTPPath(r + "/tree"), to: local + "/tree")
            #expect(summary.files == 3 && summary.directories == 3)
            #expect(Set(summary.skipped) == ["sub/link", "fifo"])
            #expect(contents(local + "/tree/one") == Array("one".utf8))
            #expect(contents(local + "/tree/sub/deeper/blob") == contents(r + "/tree/sub/deeper/blob"))
            let two = try FileManager.default.attributesOfItem(atPath: local + "/tree/sub/two")
            #expect(two[.posixPermissions] as? Int == 0o640)
            #expect((two[.modificationDate] as? Date)?.timeIntervalSince1970 == 1_234_567_890)
            #expect(try FileManager.default.attributesOfItem(atPath: local + "/tree/sub")[.posixPermissions] as? Int == 0o750)
            #expect(!FileManager.default.fileExists(atPath: local + "/tree/sub/link"))

            // and back up to a new remote place
            let up = try await sftp.uploadDirectory(local + "/tree", to: SFTPPath(r + "/copy"))
            #expect(up.files == 3 && up.directories == 3 && up.skipped.isEmpty)
            #expect(contents(r + "/copy/sub/deeper/blob") == contents(r + "/tree/sub/deeper/blob"))
            let copied = try FileManager.default.attributesOfItem(atPath: r + "/copy/sub/two")
            #expect(copied[.posixPermissions] as? Int == 0o640)
            #expect((copied[.modificationDate] as? Date)?.timeIntervalSince1970 == 1_234_567_890)
            #expect(try FileManager.default.attributesOfItem(atPath: r + "/copy/sub")[.posixPermissions] as? Int == 0o750)

            // a local symlink where a directory goes is never followed
            let elsewhere = local + "/elsewhere"
            try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: false)
            try FileManager.default.createSymbolicLink(atPath: local + "/trap", withDestinationPath: elsewhere)
            do throws(SSHError) {
                try await sftp.downloadDirectory(SFTPPath(r + "/tree"), to: local + "/trap")
                Issue.record("downloaded through a symlink")
            } catch {
                #expect(error.code == .localFileError && error.systemErrno == ENOTDIR)
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).isEmpty)
        }
    }

    @Test func onlyPlainNamesAreSafeToJoin() {
        #expect(SFTPPath("file.txt").isPlainName && SFTPPath(bytes: [0xff]).isPlainName)
        for bad: SFTPPath in ["", ".", "..", "a/b", "/etc", "../x", "x/"] { #expect(!bad.isPlainName, "\(bad)") }
        #expect(SFTPPath("/a/b/c").parent == "/a/b" && SFTPPath("/c").parent == "/" && SFTPPath("c").parent == ".")
        #expect(SFTPPath("/a/b/").lastComponent == "b" && SFTPPath("/a//b").parent == "/a")
        #expect(SFTPPath("/a").appending("b") == "/a/b" && SFTPPath("/a/").appending("b") == "/a/b")
    }
}

/// A server stalled or killed in the middle of a transfer, on servers of their own.
@Suite("SFTP faults", .tags(.integration), .serialized)
struct SFTPFaultTests {
    /// Starts a slow download (4 KiB requests, one at a time) of 32 MiB on `server`,
    /// lets `fault` act once it is under way, and returns how the download ended.
    func downloadWithFault(on server: TestServer, options: SFTPOptions,
                           fault: @Sendable (TestServer) throws -> Void) async throws -> (SSHError?, Duration, String) {
        let remote = server.dir + "/blob"
        _ = try TestServer.run("/bin/sh", ["-c", "head -c 33554432 /dev/urandom > \(remote) && chmod 644 \(remote)"])
        let local = NSTemporaryDirectory() + "sshkit-fault-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: local, withIntermediateDirectories: false)
        let conn = try await SSHClient.connect(server.configuration())
        let sftp = try await conn.openSFTP(options: options)
        let moved = Mutex<UInt64>(0)
        let task = Task {
            try await sftp.download(SFTPPath(remote), to: local + "/dst",
                                    options: SFTPTransferOptions(chunkSize: 4096, maxRequestsInFlight: 1)) { p in
                moved.withLock { $0 = p.bytesTransferred }
            }
        }
        for _ in 0..<500 where moved.withLock({ $0 }) < 1 << 20 { try await Task.sleep(for: .milliseconds(10)) }
        try fault(server)
        let t0 = ContinuousClock.now
        let result = await task.result
        let elapsed = ContinuousClock.now - t0
        let files = try FileManager.default.contentsOfDirectory(atPath: local)
        try? FileManager.default.removeItem(atPath: local)
        await conn.close()
        if case .failure(let e) = result { return (e as? SSHError, elapsed, files.joined(separator: ",")) }
        return (nil, elapsed, files.joined(separator: ","))
    }

    @Test func aStalledServerIsTimedOutAndLeavesNoFile() async throws {
        let server = try TestServer.start(name: "sftp-stall")
        defer { server.stop() }
        var stopped: [Int32] = []
        let (e, elapsed, files) = try await downloadWithFault(on: server, options: SFTPOptions(replyTimeout: .seconds(1))) { s in
            for p in s.sessionProcessTree() { kill(p, SIGSTOP) }
        }
        stopped = server.sessionProcessTree()
        for p in stopped { kill(p, SIGCONT) }
        #expect(e?.code == .timedOut, "\(String(describing: e))")
        #expect(elapsed < .seconds(5), "noticed after \(elapsed)")
        #expect(files.isEmpty, "left behind: \(files)")
    }

    @Test func aKilledServerIsATypedErrorAndLeavesNoFile() async throws {
        let server = try TestServer.start(name: "sftp-killed")
        defer { server.stop() }
        let (e, elapsed, files) = try await downloadWithFault(on: server, options: SFTPOptions()) { s in
            for p in s.sessionProcessTree() { kill(p, SIGKILL) }
        }
        let typed: Set<SSHError.Code> = [.connectionLost, .disconnected, .channelClosed]
        #expect(e.map { typed.contains($0.code) } == true, "\(String(describing: e))")
        #expect(elapsed < .seconds(5))
        #expect(files.isEmpty, "left behind: \(files)")
    }
}
