import Foundation
import SSHKit
import Testing

/// SFTP, exec and closing against asyncssh's server (PyPI), whose limits and manners
/// differ from OpenSSH's: reads of up to 4 MiB, and a whole connection dropped for a
/// signal sent to a subsystem.
@Suite("asyncssh interop", .tags(.integration), .serialized)
struct AsyncSSHInteropTests {
    func withServer(_ name: String, _ body: (AsyncSSHServer, SSHConnection) async throws -> Void) async throws {
        let server = try AsyncSSHServer.start(name: name)
        defer { server.stop() }
        try await SSHClient.withConnection(server.configuration()) { conn in
            try await body(server, conn)
        }
    }

    func localTemp() throws -> String {
        let dir = NSTemporaryDirectory() + "sshkit-ax-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        return dir
    }

    @Test func execAndExitStatusWork() async throws {
        try await withServer("ax-exec") { _, conn in
            let r = try await conn.execute("echo hi; echo err >&2; exit 3")
            #expect(r.stdoutString == "hi\n" && r.stderrString == "err\n" && r.exitStatus == .exited(3), "\(r)")
        }
    }

    /// asyncssh announces reads of up to 4 MiB: a 1 MiB read's reply is 1 MiB plus its
    /// header, which the reply decoder must take.
    @Test(arguments: [nil, 1 << 20, 256 << 10] as [Int?])
    func downloadsUseTheServersLargeReads(chunkSize: Int?) async throws {
        try await withServer("ax-get") { server, conn in
            let data = randomBytes(5 << 20 + 4321)
            try Data(data).write(to: URL(fileURLWithPath: server.root + "/blob"))
            let local = try localTemp()
            defer { try? FileManager.default.removeItem(atPath: local) }
            try await conn.withSFTP { sftp in
                let options = SFTPTransferOptions(chunkSize: chunkSize)
                let n = try await sftp.download(SFTPPath("/blob"), to: local + "/blob", options: options)
                #expect(n == UInt64(data.count))
                #expect(FileManager.default.contents(atPath: local + "/blob").map { Array($0) } == data)
                let inMemory = try await sftp.contentsOfFile(SFTPPath("/blob"), limit: 8 << 20, options: options)
                #expect(inMemory == data)
            }
        }
    }

    /// Uploads finish by themselves (about one in four stalled until
    /// something else happened on the connection), byte-exact.
    @Test func uploadsNeverStall() async throws {
        try await withServer("ax-put") { server, conn in
            let local = try localTemp()
            defer { try? FileManager.default.removeItem(atPath: local) }
            let data = randomBytes(6 << 20 + 99)
            try Data(data).write(to: URL(fileURLWithPath: local + "/src"))
            let sftp = try await conn.openSFTP()
            defer { sftp.close() }
            for i in 0..<8 {
                let r = await finishes(within: .seconds(30)) {
                    try await sftp.upload(local + "/src", to: SFTPPath("/up\(i)"))
                }
                #expect(r != nil, "upload \(i) stalled")
                if case .failure(let e)? = r { Issue.record("upload \(i): \(e)") }
                #expect(FileManager.default.contents(atPath: server.root + "/up\(i)").map { Array($0) } == data)
            }
        }
    }

    /// Closing an SFTP client ends its channel with EOF and close, never a signal: asyncssh
    /// drops the whole connection on a signal to a subsystem.
    @Test func closingSFTPLeavesTheConnectionWorking() async throws {
        try await withServer("ax-close") { server, conn in
            for round in 0..<3 {
                let sftp = try await conn.openSFTP()
                _ = try await sftp.attributes(at: SFTPPath("/"))
                sftp.close()
                try await Task.sleep(for: .milliseconds(200))
                let r = await finishes(within: .seconds(10)) { try await conn.execute("echo still") }
                if case .success(let out)? = r {
                    #expect(out.stdoutString == "still\n")
                } else {
                    Issue.record("round \(round): \(String(describing: r))\n\(server.log)")
                }
            }
            #expect(conn.isConnected)
        }
    }
}

/// The same rule against OpenSSH, which refuses the signal and logs it.
@Suite("SFTP close", .tags(.integration), .serialized)
struct SFTPCloseTests {
    @Test func closingSFTPSendsNoSignalToTheSubsystem() async throws {
        let server = try TestServer.start(name: "sftp-close")
        defer { server.stop() }
        try await SSHClient.withConnection(server.configuration()) { conn in
            for _ in 0..<3 {
                let sftp = try await conn.openSFTP()
                _ = try await sftp.attributes(at: SFTPPath("/"))
                sftp.close()
            }
            #expect(try await conn.execute("echo ok").stdoutString == "ok\n")
        }
        // sshd logs the end of each session; give it a moment to write its lines
        try await Task.sleep(for: .milliseconds(300))
        let log = try String(contentsOfFile: server.dir + "/sshd.log", encoding: .utf8)
        #expect(!log.contains("refusing to send signal"), "\(log)")
    }
}
