import Foundation
@testable import SSHKit
import Testing

/// The replace path for servers without posix-rename, driven directly: OpenSSH and
/// dropbear both announce posix-rename, so no test server would take this path.
@Suite("SFTP rename fallback", .tags(.integration), .serialized)
struct SFTPFallbackTests {
    let server = TestServer.shared

    @Test func mvReplacesTheDestinationAndQuotesHostileNames() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let dir = try await conn.makeRemoteTemporaryDirectory("mv")
            defer { try? FileManager.default.removeItem(atPath: dir) }
            try await conn.withSFTP { sftp in
                let source = SFTPPath(dir).appending("-n $(touch pwned) 'q' new")
                let destination = SFTPPath(dir).appending("dest file")
                try await sftp.write(Array("new".utf8), to: source)
                try await sftp.write(Array("old".utf8), to: destination)
                try await sftp.replaceWithMove(source, destination)
                #expect(try String(contentsOfFile: destination.string, encoding: .utf8) == "new")
                #expect(!FileManager.default.fileExists(atPath: source.string))
                #expect(!FileManager.default.fileExists(atPath: dir + "/pwned"))
                do throws(SSHError) {
                    try await sftp.replaceWithMove(SFTPPath(dir).appending("missing"), destination)
                    Issue.record("mv of a missing file succeeded")
                } catch {
                    #expect(error.code == .sftpFailure && error.message.contains("mv failed"))
                }
                do throws(SSHError) {
                    try await sftp.replaceWithMove(SFTPPath(bytes: [0x2f, 0xff]), destination)
                    Issue.record("a non-UTF-8 name went to the shell")
                } catch {
                    #expect(error.code == .unsupported)
                }
            }
        }
    }
}
