import Foundation
import SSHKit
import Testing

/// The known-hosts example, run as a process against the fixture sshd.
@Suite("known-hosts tool", .tags(.process))
struct KnownHostsToolTests {
    let server = TestServer.shared
    static var binary: String { TestServer.packageRoot + "/.build/debug/known-hosts" }

    func run(_ args: [String]) throws -> (status: Int32, out: String, err: String) {
        try TestServer.runCapturing(Self.binary, args)
    }

    var target: [String] { ["127.0.0.1", "-p", "\(server.port)"] }

    @Test func scanPrintsEveryHostKeyFingerprint() throws {
        let r = try run(["scan"] + target)
        #expect(r.status == 0, "\(r.err)")
        let printed = Set(r.out.split(separator: "\n").compactMap { $0.split(separator: " ").last.map(String.init) })
        #expect(printed == Set(server.allFingerprints))
        #expect(r.out.hasPrefix("[127.0.0.1]:\(server.port) "))
    }

    @Test func addCheckChangeAndRemove() throws {
        let file = server.dir + "/tool-\(UUID().uuidString.prefix(8))"
        #expect(try run(["check", "--file", file] + target).status == 2, "unknown before add")
        #expect(try run(["add", "--file", file] + target).status == 0)
        let found = try TestServer.runCapturing("/usr/bin/ssh-keygen", ["-F", "[127.0.0.1]:\(server.port)", "-f", file])
        #expect(found.status == 0)
        let ok = try run(["check", "--file", file] + target)
        #expect(ok.status == 0 && ok.out.contains("ok ssh-ed25519"))
        // the server's ed25519 key replaced by another one in the file: CHANGED, exit 1
        let text = try String(contentsOfFile: file, encoding: .utf8)
        let stranger = try String(contentsOfFile: server.key("id_ed25519.pub"), encoding: .utf8)
            .split(separator: " ")[1]
        let mine = try String(contentsOfFile: server.key("host_ed25519.pub"), encoding: .utf8).split(separator: " ")[1]
        try text.replacingOccurrences(of: String(mine), with: String(stranger))
            .write(toFile: file, atomically: true, encoding: .utf8)
        let changed = try run(["check", "--file", file] + target)
        #expect(changed.status == 1)
        #expect(changed.out.contains("CHANGED: ssh-ed25519"))
        let removed = try run(["remove", "--file", file] + target)
        #expect(removed.out == "removed 3 lines\n")
        #expect(try run(["check", "--file", file] + target).status == 2)
    }

    @Test func aClosedPortIsAClearError() throws {
        let r = try run(["scan", "127.0.0.1", "-p", "\(closedPort())"])
        #expect(r.status != 0)
        #expect(r.err.contains("connectionRefused"))
    }
}
