import Foundation
import Testing

/// The ssh-exec example, run as a process against the fixture sshd, with an ssh_config
/// and a known_hosts file as a user has them (ToolSetup), and without a terminal.
@Suite("Examples", .tags(.process))
struct ExampleTests {
    let server = TestServer.shared

    static var binary: String { TestServer.packageRoot + "/.build/debug/ssh-exec" }

    /// ssh-exec -F config ARGS, with no terminal.
    func exec(_ setup: ToolSetup, _ args: [String], env: [String: String] = [:]) throws
        -> (status: Int32, out: String, err: String)
    {
        try ToolSetup.run("ssh-exec", ["-F", setup.config] + args, env: env)
    }

    @Test func runsACommandAndExitsWithItsStatus() throws {
        #expect(FileManager.default.isExecutableFile(atPath: Self.binary), "build the package first (swift build)")
        let setup = try ToolSetup(server)
        defer { setup.remove() }
        let r = try exec(setup, ["fixture", "echo hello; echo oops >&2; exit 7"])
        #expect(r.status == 7)
        #expect(r.out == "hello\n")
        #expect(r.err == "oops\n")
        // the words after the host are one command line, as with ssh
        let words = try exec(setup, ["fixture", "--", "printf", "'%s|'", "a", "b c"])
        #expect(words.status == 0 && words.out == "a|b|c|", "\(words)")
    }

    @Test func aSignaledCommandExitsWith128PlusTheSignal() throws {
        let setup = try ToolSetup(server)
        defer { setup.remove() }
        let r = try exec(setup, ["fixture", "kill -KILL $$"])
        #expect(r.status == 128 + 9)
        #expect(r.err.contains("SIGKILL"))
    }

    /// Without ssh_config: `-p`, `-l`, `-i`, `-o`, and the ssh:// form.
    @Test func commandLineOptionsWithoutAConfigFile() throws {
        let setup = try ToolSetup(server)
        defer { setup.remove() }
        let options = ["-F", "none", "-o", "UserKnownHostsFile=\(setup.knownHosts)", "-o", "GlobalKnownHostsFile /dev/null",
                       "-i", server.key("id_ed25519")]
        let plain = try ToolSetup.run("ssh-exec", options + ["-p", "\(server.port)", "-l", server.user, server.host, "id -un"])
        #expect(plain.status == 0 && plain.out == server.user + "\n", "\(plain)")
        let uri = try ToolSetup.run("ssh-exec", options + ["ssh://\(server.user)@\(server.host):\(server.port)", "id", "-un"])
        #expect(uri.status == 0 && uri.out == server.user + "\n", "\(uri)")
        // -p wins over the configuration's Port (here a wrong one)
        let wins = try ToolSetup.run("ssh-exec", ["-F", setup.config, "-o", "Port=1", "-p", "\(server.port)", "fixture", "true"])
        #expect(wins.status == 0, "\(wins)")
        let wrongPort = try ToolSetup.run("ssh-exec", ["-F", setup.config, "-o", "Port=1", "fixture", "true"])
        #expect(wrongPort.status == 255 && wrongPort.err.contains("connectionRefused"), "\(wrongPort)")
    }

    /// ssh reads options after the destination too, up to the command's first word; the
    /// tools used to send them to the server as part of the command (`-p 1 true` ran there).
    @Test func optionsAfterTheDestinationAreOptionsUpToTheCommand() throws {
        let setup = try ToolSetup(server)
        defer { setup.remove() }
        let port = try exec(setup, ["fixture", "-p", "1", "true"])
        #expect(port.status == 255 && port.err.contains("connectionRefused"), "-p after the destination: \(port)")
        let joined = try exec(setup, ["fixture", "-oPort=1", "true"])
        #expect(joined.status == 255 && joined.err.contains("connectionRefused"), "\(joined)")
        let login = try exec(setup, ["fixture", "-l", server.user, "-n", "id", "-un"])
        #expect(login.status == 0 && login.out == server.user + "\n", "\(login)")
        // the command's own options stay the command's
        let echo = try exec(setup, ["fixture", "echo", "-n", "hi"])
        #expect(echo.status == 0 && echo.out == "hi", "\(echo)")
        let dashed = try exec(setup, ["fixture", "--", "-p", "1"])
        #expect(dashed.status != 255 && !dashed.err.contains("connectionRefused"), "after --, a command: \(dashed)")
        let joinedFirst = try exec(setup, ["-oPort=1", "fixture", "true"])
        #expect(joinedFirst.status == 255 && joinedFirst.err.contains("connectionRefused"), "\(joinedFirst)")
        let unknown = try exec(setup, ["fixture", "-Z", "true"])
        #expect(unknown.status == 64 && unknown.err.contains("-Z"), "\(unknown)")
        // scp and sftp (glibc's getopt) take options between all operands
        let dir = try TestPaths.makeTemporaryDirectory("options-after")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let copy = try ToolSetup.run("ssh-sftp", ["-F", setup.config, "fixture:/etc/hostname", dir + "/h", "-P", "1"])
        #expect(copy.status == 255 && copy.err.contains("connectionRefused"), "-P after the operands: \(copy)")
        // in `destination operation paths`, an option after the operation is the operation's
        let remote = "/tmp/sshkit-mkdir-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: remote) }
        let made = try ToolSetup.run("ssh-sftp", ["-F", setup.config, "fixture", "mkdir", "-p", remote + "/a/b"])
        #expect(made.status == 0 && FileManager.default.fileExists(atPath: remote + "/a/b"), "\(made)")
        let shell = try ToolSetup.run("ssh-shell", ["-F", setup.config, "fixture", "-p", "1", "true"])
        #expect(shell.status == 255 && shell.err.contains("connectionRefused"), "\(shell)")
        let forward = try ToolSetup.run("ssh-forward", ["-F", setup.config, "fixture", "-p", "1", "-D", "0"])
        #expect(forward.status == 255 && forward.err.contains("connectionRefused"), "\(forward)")
    }

    /// When the reader of the tool's output goes away (`| head -1`), the tool stops
    /// reading, closes the channel (the remote command ends) and ends as ssh does: by
    /// SIGPIPE (141 in a shell). It used to run on with the remote command blocked.
    @Test func aClosedOutputEndsTheToolAndTheRemoteCommand() throws {
        let setup = try ToolSetup(server)
        defer { setup.remove() }
        let marker = "seq 1 3\(Int.random(in: 100_000...999_999))000"
        let script = "\(TestServer.packageRoot)/.build/debug/ssh-exec -F \(setup.config) fixture \(marker) | head -n 1; "
            + "echo \"status ${PIPESTATUS[0]}\""
        let start = ContinuousClock.now
        let r = try TestServer.runCapturing("/usr/bin/timeout", ["60", "/bin/bash", "-c", script],
                                            env: ToolSetup.environment([:]))
        let took = ContinuousClock.now - start
        #expect(r.out == "1\nstatus 141\n", "\(r)")
        #expect(took < .seconds(30), "the tool ran on for \(took) after its reader left")
        let gone = (1...50).contains { _ in
            usleep(100_000)
            return ((try? TestServer.run("/usr/bin/pgrep", ["-f", marker], allowFailure: true)) ?? "").isEmpty
        }
        #expect(gone, "the remote \(marker) still runs")
    }

    /// A missing `-i` file: ssh warns and goes on with the default identities (the file is
    /// not one of them); the tool used to stop with "no authentication method configured".
    /// Run as the test user, whose `~/.ssh/id_ed25519` (from the password database, as ssh
    /// reads it) is the server's key for the test.
    @Test func aMissingIdentityFileIsAWarningAndTheDefaultsAreTried() throws {
        let pw = try #require(getpwnam(server.user))
        let home = String(cString: pw.pointee.pw_dir)
        let (uid, gid) = (pw.pointee.pw_uid, pw.pointee.pw_gid)
        let key = home + "/.ssh/id_ed25519"
        let made = !FileManager.default.fileExists(atPath: key)
        if made {
            try FileManager.default.createDirectory(atPath: home + "/.ssh", withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            try FileManager.default.copyItem(atPath: server.key("id_ed25519"), toPath: key)
            chmod(key, 0o600)
            chown(home + "/.ssh", uid, gid)
            chown(key, uid, gid)
        }
        defer { if made { try? FileManager.default.removeItem(atPath: key) } }
        let r = try TestServer.runCapturing("/usr/bin/setpriv", [
            "--reuid=\(uid)", "--regid=\(gid)", "--init-groups", "/usr/bin/env", "HOME=\(home)", "SSH_AUTH_SOCK=",
            TestServer.packageRoot + "/.build/debug/ssh-exec", "-F", "none", "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "GlobalKnownHostsFile=/dev/null", "-i", home + "/missing",
            "-p", "\(server.port)", "-l", server.user, server.host, "id -un",
        ])
        #expect(r.status == 0 && r.out == server.user + "\n", "\(r)")
        #expect(r.err.contains("Warning: Identity file \(home)/missing not accessible: No such file or directory."), "\(r.err)")
    }

    /// The password and keyboard-interactive prompts, answered through SSH_ASKPASS.
    @Test func passwordAuthenticationThroughAskpass() throws {
        let setup = try ToolSetup(server, key: nil)
        defer { setup.remove() }
        let answer = try setup.askpass(answering: server.password)
        let r = try exec(setup, ["-o", "KbdInteractiveAuthentication=no", "fixture", "id", "-un"], env: answer)
        #expect(r.status == 0 && r.out == server.user + "\n", "\(r)")
        #expect(setup.askpassLog == "\(server.user)@\(server.host)'s password: \n", "\(setup.askpassLog)")
        // the server's PAM prompt through keyboard-interactive, tried before password
        let kbd = try exec(setup, ["fixture", "id", "-un"], env: answer)
        #expect(kbd.status == 0 && kbd.out == server.user + "\n", "\(kbd)")
        #expect(setup.askpassLog.hasSuffix("Password: \n"), "\(setup.askpassLog)")
        // no terminal and no askpass: no key and nobody to ask, so there is no way in
        let none = try exec(setup, ["fixture", "true"])
        #expect(none.status == 255 && none.err.contains("no authentication method"), "\(none)")
    }

    /// A wrong password is asked for again, NumberOfPasswordPrompts times, as ssh does.
    @Test func aWrongPasswordIsAskedForAgain() throws {
        let setup = try ToolSetup(server, key: nil)
        defer { setup.remove() }
        let r = try exec(setup, ["-o", "KbdInteractiveAuthentication=no", "-o", "NumberOfPasswordPrompts=2", "fixture", "true"],
                         env: try setup.askpass(answering: "wrong"))
        #expect(r.status == 255, "\(r)")
        #expect(setup.askpassLog.components(separatedBy: "password:").count - 1 == 2, "\(setup.askpassLog)")
        #expect(r.err.contains("Permission denied, please try again."), "\(r.err)")
        // BatchMode: no prompt at all
        let batch = try exec(setup, ["-o", "BatchMode=yes", "fixture", "true"], env: try setup.askpass(answering: "x"))
        #expect(batch.status == 255)
        #expect(setup.askpassLog.components(separatedBy: "password:").count - 1 == 2, "BatchMode asked: \(setup.askpassLog)")
    }

    /// An encrypted identity's passphrase is asked through askpass, as ssh asks it; under
    /// BatchMode the key is skipped without asking.
    @Test func anEncryptedIdentitysPassphraseThroughAskpass() throws {
        let setup = try ToolSetup(server, key: "id_ed25519_pass", extra: ["KbdInteractiveAuthentication no",
                                                                         "PasswordAuthentication no"])
        defer { setup.remove() }
        let r = try exec(setup, ["fixture", "id", "-un"], env: try setup.askpass(answering: server.passphrase))
        #expect(r.status == 0 && r.out == server.user + "\n", "\(r)")
        #expect(setup.askpassLog == "Enter passphrase for key '\(server.key("id_ed25519_pass"))': \n", "\(setup.askpassLog)")
        let batch = try exec(setup, ["-o", "BatchMode=yes", "fixture", "true"], env: try setup.askpass(answering: "x"))
        #expect(batch.status == 255 && batch.err.contains("encrypted, and no passphrase was given"), "\(batch)")
        #expect(setup.askpassLog.components(separatedBy: "passphrase").count - 1 == 1, "BatchMode asked: \(setup.askpassLog)")
    }

    /// Without a terminal nobody can confirm an unknown key: refused, nothing recorded.
    @Test func anUnknownHostFailsClosedWithoutATerminal() throws {
        let setup = try ToolSetup(server, trusted: false)
        defer { setup.remove() }
        let r = try exec(setup, ["fixture", "echo ran"])
        #expect(r.status == 255 && r.out.isEmpty, "\(r)")
        #expect(r.err.contains("Host key verification failed."), "\(r.err)")
        #expect(setup.knownHostsText.isEmpty)
        // accept-new records it without asking, as ssh does
        let tofu = try exec(setup, ["-o", "StrictHostKeyChecking=accept-new", "fixture", "echo ran"])
        #expect(tofu.status == 0 && tofu.out == "ran\n", "\(tofu)")
        #expect(setup.knownHostsText.hasPrefix("[\(server.host)]:\(server.port) "), "\(setup.knownHostsText)")
        #expect(try exec(setup, ["fixture", "true"]).status == 0)
    }

    @Test func aChangedHostKeyIsRefused() throws {
        let setup = try ToolSetup(server, trusted: false)
        defer { setup.remove() }
        let other = try String(contentsOfFile: server.key("id_unauthorized.pub"), encoding: .utf8)
        try "[\(server.host)]:\(server.port) \(other)".write(toFile: setup.knownHosts, atomically: true, encoding: .utf8)
        let r = try exec(setup, ["fixture", "echo ran"])
        #expect(r.status == 255 && r.out.isEmpty, "\(r)")
        #expect(r.err.contains("host key changed") && r.err.contains("Host key verification failed."), "\(r.err)")
        // StrictHostKeyChecking no: accepted with ssh's warning, as ssh does
        let no = try exec(setup, ["-o", "StrictHostKeyChecking=no", "fixture", "echo ran"])
        #expect(no.status == 0 && no.out == "ran\n", "\(no)")
        #expect(no.err.contains("REMOTE HOST IDENTIFICATION HAS CHANGED"), "\(no.err)")
    }

    /// A configuration ssh refuses: the file and line, exit 255, nothing connects.
    @Test func configurationErrorsNameTheFileAndLine() throws {
        let setup = try ToolSetup(server, extra: ["Frobnicate yes"])
        defer { setup.remove() }
        let r = try exec(setup, ["fixture", "echo ran"])
        #expect(r.status == 255 && r.out.isEmpty, "\(r)")
        #expect(r.err.contains("\(setup.config) line 9: Bad configuration option: frobnicate"), "\(r.err)")
        let badPort = try ToolSetup.run("ssh-exec", ["-F", "none", "-p", "0", "host", "true"])
        #expect(badPort.status == 255 && badPort.err.contains("Bad port"), "\(badPort)")
        let missing = try ToolSetup.run("ssh-exec", ["-F", setup.dir + "/missing", "host", "true"])
        #expect(missing.status == 255 && missing.err.contains("missing"), "\(missing)")
    }

    /// SetEnv and SendEnv reach the command; a variable the server refuses (not in its
    /// AcceptEnv) is left out and the command runs as given, as with ssh.
    @Test func setEnvAndSendEnvAreSent() throws {
        let setup = try ToolSetup(server, extra: ["SetEnv SSHKIT_SET=one", "SendEnv SSHKIT_SENT LANGUAGE"])
        defer { setup.remove() }
        let r = try exec(setup, ["fixture", "echo \"$SSHKIT_SET $SSHKIT_SENT ${LANGUAGE-unset}\""],
                         env: ["SSHKIT_SENT": "two", "LANGUAGE": "refused"])
        #expect(r.status == 0 && r.out == "one two unset\n", "\(r)")
    }

    @Test func verboseShowsDebugMessagesAndHelpListsEveryOption() throws {
        let setup = try ToolSetup(server)
        defer { setup.remove() }
        let r = try exec(setup, ["-v", "fixture", "true"])
        #expect(r.status == 0 && r.err.contains("debug1: connecting"), "\(r.err)")
        let help = try ToolSetup.run("ssh-exec", ["--help"])
        for option in ["-p <port>", "-l <login_name>", "-i <identity_file>", "-F <configfile>", "-J <destination>",
                       "-o <option>", "-n", "-v", "-q", "-A"] {
            #expect(help.out.contains(option), "\(option) missing from --help")
        }
        let unknown = try ToolSetup.run("ssh-exec", ["-Z", "host", "true"])
        #expect(unknown.status != 0 && unknown.status != 255 && unknown.err.contains("-Z"), "\(unknown)")
    }

    /// Runs ssh-exec with `input` on its stdin (then EOF, unless `keepOpen`).
    func run(_ args: [String], input: [UInt8], keepOpen: Bool = false) throws -> (status: Int32, out: String, err: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.binary)
        p.arguments = args
        p.environment = ProcessInfo.processInfo.environment.merging(ToolSetup.environment([:])) { $1 }
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
        let setup = try ToolSetup(server)
        defer { setup.remove() }
        let common = ["-F", setup.config]
        let big = randomBytes(3 << 20)
        let r = try run(common + ["fixture", "cat; echo done >&2"], input: Array("x\n".utf8))
        #expect(r.status == 0 && r.out == "x\n" && r.err == "done\n", "\(r)")
        let sum = try run(common + ["fixture", "wc -c"], input: big)
        #expect(sum.out.trimmingCharacters(in: .whitespacesAndNewlines) == "\(big.count)", "\(sum)")
        // -n: nothing is read, even from an input that never ends
        let none = try run(common + ["-n", "fixture", "cat; echo end"], input: Array("unread\n".utf8), keepOpen: true)
        #expect(none.status == 0 && none.out == "end\n", "\(none)")
    }

    /// The first line of a slow command shows while it still runs, as with ssh.
    @Test func outputIsStreamedAsItComes() throws {
        let setup = try ToolSetup(server)
        defer { setup.remove() }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.binary)
        p.arguments = ["-F", setup.config, "-n", "fixture", "echo first; sleep 4; echo second"]
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
        let setup = try ToolSetup(server, key: nil)
        defer { setup.remove() }
        let loose = setup.dir + "/loose-key"
        try FileManager.default.copyItem(atPath: server.key("id_ed25519"), toPath: loose)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: loose)
        let r = try exec(setup, ["-i", loose, "fixture", "echo ran"])
        #expect(r.status == 255 && r.out.isEmpty, "\(r)")
        #expect(r.err.contains("UNPROTECTED PRIVATE KEY FILE") && r.err.contains("Permissions 0644"), "\(r.err)")
        // with another method the key is skipped and the other one is used
        let pw = try exec(setup, ["-i", loose, "fixture", "echo ran"], env: try setup.askpass(answering: server.password))
        #expect(pw.status == 0 && pw.out == "ran\n" && pw.err.contains("This private key will be ignored"), "\(pw)")
        // 0600 is fine
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: loose)
        let ok = try exec(setup, ["-i", loose, "fixture", "echo ran"])
        #expect(ok.status == 0 && ok.out == "ran\n" && ok.err.isEmpty, "\(ok)")
    }
}

/// The ssh-sftp example, run as a process against the fixture sshd: scp-like copies
/// (`host:path`) and sftp-like operations, with an ssh_config and known_hosts.
@Suite("ssh-sftp example", .tags(.process), .serialized)
struct SFTPExampleTests {
    let server = TestServer.shared

    func sftp(_ setup: ToolSetup, _ args: [String]) throws -> (status: Int32, out: String, err: String) {
        try ToolSetup.run("ssh-sftp", ["-F", setup.config] + args)
    }

    @Test func listsCopiesMovesAndRemovesFiles() throws {
        let setup = try ToolSetup(server)
        defer { setup.remove() }
        let remote = try TestServer.run("/usr/sbin/runuser", ["-u", server.user, "--", "mktemp", "-d", "/tmp/sshkit-sftpcli-XXXXXXXX"])
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let local = setup.dir + "/local"
        try FileManager.default.createDirectory(atPath: local, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: remote) }
        let data = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try data.write(to: URL(fileURLWithPath: local + "/src"))

        #expect(try sftp(setup, ["fixture", "mkdir", "-p", remote + "/a/b"]).status == 0)
        let put = try sftp(setup, ["fixture", "put", local + "/src", remote + "/a/b/file"])
        #expect(put.status == 0, "\(put.err)")
        #expect(FileManager.default.contents(atPath: remote + "/a/b/file") == data)
        let ls = try sftp(setup, ["fixture", "ls", remote + "/a/b"])
        #expect(ls.status == 0 && ls.out.contains("file") && ls.out.contains("300000"), "\(ls.out)")
        #expect(try sftp(setup, ["fixture", "mv", remote + "/a/b/file", remote + "/a/moved"]).status == 0)
        let get = try sftp(setup, ["fixture", "get", remote + "/a/moved", local + "/back"])
        #expect(get.status == 0 && get.err.isEmpty, "no progress bar without a terminal: \(get.err)")
        #expect(FileManager.default.contents(atPath: local + "/back") == data)
        let tree = try sftp(setup, ["-r", "fixture", "get", remote + "/a", local + "/tree"])
        #expect(tree.status == 0 && tree.out.contains("1 files, 2 directories"), "\(tree.out)")
        #expect(try sftp(setup, ["fixture", "rm", remote + "/a/moved"]).status == 0)

        let missing = try sftp(setup, ["fixture", "rm", remote + "/a/moved"])
        #expect(missing.status == 1 && missing.err.contains("no such file"), "\(missing.err)")
        let bad = try sftp(setup, ["fixture", "frobnicate", "x"])
        #expect(bad.status != 0 && bad.err.contains("unknown operation"))
    }

    /// scp's forms: host:path to a local file or directory, local files to host:path
    /// or into a remote directory, -r for trees; a connection failure is 255.
    @Test func copiesLikeScp() throws {
        let setup = try ToolSetup(server)
        defer { setup.remove() }
        let remote = try TestServer.run("/usr/sbin/runuser", ["-u", server.user, "--", "mktemp", "-d", "/tmp/sshkit-scp-XXXXXXXX"])
            .trimmingCharacters(in: .whitespacesAndNewlines)
        defer { try? FileManager.default.removeItem(atPath: remote) }
        let local = setup.dir + "/local"
        try FileManager.default.createDirectory(atPath: local + "/tree/sub", withIntermediateDirectories: true)
        let one = Data(randomBytes(200_000)), two = Data(randomBytes(1000))
        try one.write(to: URL(fileURLWithPath: local + "/one"))
        try two.write(to: URL(fileURLWithPath: local + "/two"))
        try two.write(to: URL(fileURLWithPath: local + "/tree/sub/leaf"))

        // local -> host:path (a new name), then two files into the remote directory
        #expect(try sftp(setup, [local + "/one", "fixture:\(remote)/renamed"]).status == 0)
        #expect(FileManager.default.contents(atPath: remote + "/renamed") == one)
        let both = try sftp(setup, [local + "/one", local + "/two", "fixture:\(remote)"])
        #expect(both.status == 0, "\(both)")
        #expect(FileManager.default.contents(atPath: remote + "/one") == one)
        #expect(FileManager.default.contents(atPath: remote + "/two") == two)
        // host:path -> a local directory, and user@host:path -> a file name
        try FileManager.default.createDirectory(atPath: local + "/in", withIntermediateDirectories: false)
        #expect(try sftp(setup, ["fixture:\(remote)/renamed", local + "/in"]).status == 0)
        #expect(FileManager.default.contents(atPath: local + "/in/renamed") == one)
        #expect(try sftp(setup, ["\(server.user)@fixture:\(remote)/two", local + "/copy"]).status == 0)
        #expect(FileManager.default.contents(atPath: local + "/copy") == two)
        // -r: a tree up and back
        let up = try sftp(setup, ["-r", local + "/tree", "fixture:\(remote)/tree"])
        #expect(up.status == 0 && up.out.contains("1 files"), "\(up)")
        #expect(FileManager.default.contents(atPath: remote + "/tree/sub/leaf") == two)
        // refusals: several files to a path that is no directory; a missing source
        let notDir = try sftp(setup, [local + "/one", local + "/two", "fixture:\(remote)/renamed"])
        #expect(notDir.status == 1 && notDir.err.contains("not a directory"), "\(notDir)")
        let missing = try sftp(setup, ["fixture:\(remote)/nope", local + "/nope"])
        #expect(missing.status == 1 && !FileManager.default.fileExists(atPath: local + "/nope"), "\(missing)")
        let remoteToRemote = try sftp(setup, ["fixture:/a", "fixture:/b"])
        #expect(remoteToRemote.status != 0 && remoteToRemote.err.contains("remote to remote"), "\(remoteToRemote)")
        let down = try ToolSetup.run("ssh-sftp", ["-F", setup.config, "-P", "1", "fixture:/etc/hostname", local + "/x"])
        #expect(down.status == 255 && down.err.contains("connectionRefused"), "\(down)")
    }

    /// On a terminal (tmux), get draws a progress bar that ends at 100%.
    @Test func getDrawsAProgressBarOnATerminal() async throws {
        let setup = try ToolSetup(server)
        defer { setup.remove() }
        let dir = setup.dir
        _ = try TestServer.run("/bin/sh", ["-c", "head -c 20000000 /dev/urandom > \(dir)/big && chmod 755 \(dir) && chmod 644 \(dir)/big"])
        let tmux = ShellExampleTests.Tmux(socket: dir + "/tmux.sock")
        defer { tmux.kill() }
        let argv = [TestServer.packageRoot + "/.build/debug/ssh-sftp", "-F", setup.config,
                    "fixture:" + dir + "/big", dir + "/copy"].map { "'\($0)'" }.joined(separator: " ")
        try tmux.start(width: 120, height: 10, command: "env -u SSH_AUTH_SOCK \(argv); echo status=$?; sleep 30",
                       log: dir + "/tmux.log")
        try await tmux.waitFor("status=0")
        let screen = try tmux.screen()
        #expect(screen.contains("100%") && screen.contains("MB/s") && screen.contains("[##########"), "\(screen)")
        #expect(FileManager.default.contents(atPath: dir + "/copy") == FileManager.default.contents(atPath: dir + "/big"))
    }
}
