import Foundation
import Testing

/// The ssh-exec example, run as a process against the fixture sshd.
@Suite("Examples")
struct ExampleTests {
    let server = TestServer.shared

    static var binary: String { TestServer.packageRoot + "/.build/debug/ssh-exec" }

    func run(_ args: [String], env: [String: String] = [:]) throws -> (status: Int32, out: String, err: String) {
        try TestServer.runCapturing(Self.binary, args, env: env)
    }

    var common: [String] { ["--host", server.host, "--port", "\(server.port)", "--user", server.user] }

    @Test func runsACommandAndExitsWithItsStatus() throws {
        #expect(FileManager.default.isExecutableFile(atPath: Self.binary), "build the package first (swift build)")
        let r = try run(common + ["--key", server.key("id_ed25519"), "--fingerprint", server.fingerprintEd25519,
                                  "--fingerprint", server.fingerprintECDSA, "--fingerprint", server.fingerprintRSA,
                                  "--", "echo hello; echo oops >&2; exit 7"])
        #expect(r.status == 7)
        #expect(r.out == "hello\n")
        #expect(r.err == "oops\n")
    }

    @Test func aSignaledCommandExitsWith128PlusTheSignal() throws {
        let r = try run(common + ["--key", server.key("id_ed25519"), "--insecure-accept-any-host-key",
                                  "--", "kill -KILL $$"])
        #expect(r.status == 128 + 9)
        #expect(r.err.contains("SIGKILL"))
    }

    @Test func passwordFromTheEnvironmentAndInsecureFlag() throws {
        let r = try run(common + ["--password-from-env", "--insecure-accept-any-host-key", "--", "id", "-un"],
                        env: ["SSHKIT_PASSWORD": server.password])
        #expect(r.status == 0)
        #expect(r.out == server.user + "\n")
    }

    @Test func wrongFingerprintIsRefusedWithAClearMessage() throws {
        let r = try run(common + ["--key", server.key("id_ed25519"), "--fingerprint", "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "--", "true"])
        #expect(r.status == 255)
        #expect(r.err.contains("hostKeyRejected"))
        #expect(r.err.contains("presented"))
    }

    var pinned: [String] {
        ["--fingerprint", server.fingerprintEd25519, "--fingerprint", server.fingerprintECDSA,
         "--fingerprint", server.fingerprintRSA]
    }

    /// Runs ssh-exec with `input` on its stdin (then EOF, unless `keepOpen`).
    func run(_ args: [String], input: [UInt8], keepOpen: Bool = false) throws -> (status: Int32, out: String, err: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.binary)
        p.arguments = args
        let stdin = Pipe(), out = Pipe(), err = Pipe()
        p.standardInput = stdin
        p.standardOutput = out
        p.standardError = err
        try p.run()
        stdin.fileHandleForWriting.write(Data(input))
        if !keepOpen { try stdin.fileHandleForWriting.close() }
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        try? stdin.fileHandleForWriting.close()
        return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
    }

    /// `echo x | ssh host cat` prints x: stdin goes to the command, then its EOF.
    @Test func standardInputIsForwardedWithItsEnd() throws {
        let big = randomBytes(3 << 20)
        let r = try run(common + ["--key", server.key("id_ed25519")] + pinned + ["--", "cat; echo done >&2"], input: Array("x\n".utf8))
        #expect(r.status == 0 && r.out == "x\n" && r.err == "done\n", "\(r)")
        let sum = try run(common + ["--key", server.key("id_ed25519")] + pinned + ["--", "wc -c"], input: big)
        #expect(sum.out.trimmingCharacters(in: .whitespacesAndNewlines) == "\(big.count)", "\(sum)")
        // -n: nothing is read, even from an input that never ends
        let none = try run(common + ["-n", "--key", server.key("id_ed25519")] + pinned + ["--", "cat; echo end"],
                           input: Array("unread\n".utf8), keepOpen: true)
        #expect(none.status == 0 && none.out == "end\n", "\(none)")
    }

    /// The first line of a slow command shows while it still runs, as with ssh.
    @Test func outputIsStreamedAsItComes() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.binary)
        p.arguments = common + ["-n", "--key", server.key("id_ed25519")] + pinned + ["--", "echo first; sleep 4; echo second"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        defer { if p.isRunning { p.terminate() }; p.waitUntilExit() }
        var seen = Data()
        while !String(decoding: seen, as: UTF8.self).contains("first\n") {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen += chunk
        }
        #expect(String(decoding: seen, as: UTF8.self) == "first\n")
        #expect(p.isRunning, "the first line came only when the command had ended")
        seen += out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        #expect(String(decoding: seen, as: UTF8.self) == "first\nsecond\n" && p.terminationStatus == 0)
    }

    /// A private key others can read is ignored with ssh's warning; with no other method
    /// the tool exits 255, as ssh does, and nothing runs.
    @Test func anUnprotectedKeyIsRefusedLikeSSHDoes() throws {
        let loose = NSTemporaryDirectory() + "sshkit-loose-\(UUID().uuidString)"
        try FileManager.default.copyItem(atPath: server.key("id_ed25519"), toPath: loose)
        defer { try? FileManager.default.removeItem(atPath: loose) }
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: loose)
        let r = try run(common + ["--key", loose] + pinned + ["--", "echo ran"])
        #expect(r.status == 255 && r.out.isEmpty, "\(r)")
        #expect(r.err.contains("UNPROTECTED PRIVATE KEY FILE") && r.err.contains("Permissions 0644"), "\(r.err)")
        // with another method the key is skipped and the other one is used
        let pw = try run(common + ["--key", loose, "--password-from-env"] + pinned + ["--", "echo ran"],
                         env: ["SSHKIT_PASSWORD": server.password])
        #expect(pw.status == 0 && pw.out == "ran\n" && pw.err.contains("This private key will be ignored"), "\(pw)")
        // 0600 is fine
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: loose)
        let ok = try run(common + ["--key", loose] + pinned + ["--", "echo ran"])
        #expect(ok.status == 0 && ok.out == "ran\n" && ok.err.isEmpty, "\(ok)")
    }

    @Test func refusesToRunWithoutAHostKeyDecision() throws {
        let r = try run(common + ["--key", server.key("id_ed25519"), "--", "true"])
        #expect(r.status != 0)
        #expect(r.err.contains("--fingerprint"))
    }
}

/// The ssh-sftp example, run as a process against the fixture sshd.
@Suite("ssh-sftp example", .serialized)
struct SFTPExampleTests {
    let server = TestServer.shared

    func sftp(_ args: [String]) throws -> (status: Int32, out: String, err: String) {
        try TestServer.runCapturing(TestServer.packageRoot + "/.build/debug/ssh-sftp",
                                    ["--host", server.host, "--port", "\(server.port)", "--user", server.user,
                                     "--key", server.key("id_ed25519"), "--fingerprint", server.fingerprintEd25519,
                                     "--fingerprint", server.fingerprintECDSA, "--fingerprint", server.fingerprintRSA] + args)
    }

    @Test func listsCopiesMovesAndRemovesFiles() throws {
        let remote = try TestServer.run("/usr/sbin/runuser", ["-u", server.user, "--", "mktemp", "-d", "/tmp/sshkit-sftpcli-XXXXXXXX"])
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let local = NSTemporaryDirectory() + "sshkit-cli-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: local, withIntermediateDirectories: false)
        defer {
            try? FileManager.default.removeItem(atPath: remote)
            try? FileManager.default.removeItem(atPath: local)
        }
        let data = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try data.write(to: URL(fileURLWithPath: local + "/src"))

        #expect(try sftp(["mkdir", "-p", remote + "/a/b"]).status == 0)
        let put = try sftp(["put", local + "/src", remote + "/a/b/file"])
        #expect(put.status == 0, "\(put.err)")
        #expect(FileManager.default.contents(atPath: remote + "/a/b/file") == data)
        let ls = try sftp(["ls", remote + "/a/b"])
        #expect(ls.status == 0 && ls.out.contains("file") && ls.out.contains("300000"), "\(ls.out)")
        #expect(try sftp(["mv", remote + "/a/b/file", remote + "/a/moved"]).status == 0)
        let get = try sftp(["get", remote + "/a/moved", local + "/back"])
        #expect(get.status == 0 && get.err.isEmpty, "no progress bar without a terminal: \(get.err)")
        #expect(FileManager.default.contents(atPath: local + "/back") == data)
        let tree = try sftp(["--recursive", "get", remote + "/a", local + "/tree"])
        #expect(tree.status == 0 && tree.out.contains("1 files, 2 directories"), "\(tree.out)")
        #expect(try sftp(["rm", remote + "/a/moved"]).status == 0)

        let missing = try sftp(["rm", remote + "/a/moved"])
        #expect(missing.status == 1 && missing.err.contains("no such file"), "\(missing.err)")
        let bad = try sftp(["frobnicate", "x"])
        #expect(bad.status != 0 && bad.err.contains("unknown operation"))
    }

    /// On a terminal (tmux), get draws a progress bar that ends at 100%.
    @Test func getDrawsAProgressBarOnATerminal() async throws {
        let dir = "/tmp/sshkit-tmux-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try TestServer.run("/bin/sh", ["-c", "head -c 20000000 /dev/urandom > \(dir)/big && chmod 755 \(dir) && chmod 644 \(dir)/big"])
        let tmux = ShellExampleTests.Tmux(socket: dir + "/tmux.sock")
        defer { tmux.kill() }
        let argv = [TestServer.packageRoot + "/.build/debug/ssh-sftp", "--host", server.host, "--port", "\(server.port)",
                    "--user", server.user, "--key", server.key("id_ed25519"), "--fingerprint", server.fingerprintEd25519,
                    "--fingerprint", server.fingerprintECDSA, "--fingerprint", server.fingerprintRSA,
                    "get", dir + "/big", dir + "/copy"].map { "'\($0)'" }.joined(separator: " ")
        try tmux.start(width: 120, height: 10, command: "\(argv); echo status=$?; sleep 30", log: dir + "/tmux.log")
        try await tmux.waitFor("status=0")
        let screen = try tmux.screen()
        #expect(screen.contains("100%") && screen.contains("MB/s") && screen.contains("[##########"), "\(screen)")
        #expect(FileManager.default.contents(atPath: dir + "/copy") == FileManager.default.contents(atPath: dir + "/big"))
    }
}
