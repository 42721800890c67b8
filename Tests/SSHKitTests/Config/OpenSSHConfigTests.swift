import Foundation
@testable import SSHKit
import Testing

/// The parts of ssh_config resolution that `ssh -G` cannot show or that need a
/// controlled home directory.
@Suite("ssh_config: resolution", .tags(.pure))
struct OpenSSHConfigTests {
    /// A context whose home is a fresh directory (with `.ssh/`), for `~` and relative Includes.
    static func sandbox() throws -> (dir: String, context: OpenSSHConfig.Context) {
        let dir = try TestPaths.makeTemporaryDirectory("sshconfig")
        try FileManager.default.createDirectory(atPath: dir + "/.ssh", withIntermediateDirectories: true)
        let context = OpenSSHConfig.Context(homeDirectory: dir, localUser: "tester", uid: getuid(),
                                            localHostName: "client.example.org",
                                            environment: ["HOME": dir, "KEYS": dir + "/keys"])
        return (dir, context)
    }

    static func write(_ path: String, _ text: String, mode: mode_t = 0o644) throws {
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, mode)
    }

    @Test func defaultsLikeSSHWhenNothingIsConfigured() throws {
        let (dir, context) = try Self.sandbox()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let c = try OpenSSHConfig(configFile: "none", context: context).resolve("Server.Example")
        #expect(c.hostName == "server.example")
        #expect(c.user == "tester")
        #expect(c.port == 22)
        #expect(c.identityFilesConfigured == false)
        #expect(c.identityFiles.first == dir + "/.ssh/id_rsa")
        #expect(c.identityFiles.map { ($0 as NSString).lastPathComponent } ==
            ["id_rsa", "id_ecdsa", "id_ecdsa_sk", "id_ed25519", "id_ed25519_sk", "id_xmss", "id_dsa"])
        #expect(c.userKnownHostsFiles == [dir + "/.ssh/known_hosts", dir + "/.ssh/known_hosts2"])
        #expect(c.globalKnownHostsFiles == ["/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"])
        #expect(c.strictHostKeyChecking == .ask)
        #expect(c.connectTimeout == nil)
        #expect(c.proxyJump.isEmpty && c.proxyCommand == nil)
        #expect(c.warnings.isEmpty)
    }

    @Test func optionsAndArgumentsComeBeforeTheFiles() throws {
        let (dir, context) = try Self.sandbox()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.write(dir + "/.ssh/config", "Host *\n  User fromfile\n  Port 1000\n  ConnectTimeout 9\n")
        let config = OpenSSHConfig(options: ["Port=2000", "ConnectTimeout 3"], context: context)
        let c = try config.resolve("h", user: "given")
        #expect(c.user == "given")
        #expect(c.port == 2000)
        #expect(c.connectTimeout == 3)
        #expect(try config.resolve("h", port: 3000).port == 3000) // the arguments come first, then -o, then files
        #expect(throws: SSHConfigError.self) { try OpenSSHConfig(options: ["Host x"], context: context).resolve("h") }
        #expect(throws: SSHConfigError.self) { try OpenSSHConfig(options: ["Include /etc/passwd"], context: context).resolve("h") }
    }

    @Test func declaredHostsAreTheNamesOfHostLinesFollowingIncludes() throws {
        let (dir, context) = try Self.sandbox()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.write(dir + "/.ssh/config", """
            Host web1 web2 *.internal !bad
              User deploy
            Host db
              Include db.conf
            Match exec "exit 1"
              Include late.conf
            Host web2 web10
            """)
        try Self.write(dir + "/.ssh/db.conf", "Host db-replica\n  Port 2222\n")
        try Self.write(dir + "/.ssh/late.conf", "Host late\n")
        let config = OpenSSHConfig(configFile: dir + "/.ssh/config", context: context)
        // Match exec is not run (nor refused) when only names are listed
        #expect(try config.declaredHosts() == ["web1", "web2", "db", "db-replica", "late", "web10"])
        #expect(try config.declaredHosts(matching: "web*") == ["web1", "web2", "web10"])
        #expect(try config.declaredHosts(matching: "web?,db*,!db-*") == ["web1", "web2", "db"])
        #expect(try config.declaredHosts(matching: "WEB*").isEmpty) // Host patterns are case-sensitive
        #expect(try config.declaredHosts(matching: "nothing*").isEmpty)
        // a file ssh would refuse is refused here too, with its line
        try Self.write(dir + "/.ssh/config", "Host a\n  NoSuchKeyword yes\n")
        #expect(throws: SSHConfigError.self) { try config.declaredHosts() }
    }

    @Test func relativeIncludesAreUnderTildeSSHAndAMissingOneIsAWarning() throws {
        let (dir, context) = try Self.sandbox()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir + "/.ssh/conf.d", withIntermediateDirectories: true)
        try Self.write(dir + "/.ssh/config", "Include conf.d/*.conf\nInclude missing.conf\nInclude nothing-*.conf\nIdentityFile ${KEYS}/%r@%h\n")
        try Self.write(dir + "/.ssh/conf.d/10-users.conf", "Host prod\n  User ops\n")
        let c = try OpenSSHConfig(context: context).resolve("prod")
        #expect(c.user == "ops")
        #expect(c.identityFiles == [dir + "/keys/ops@prod"])
        #expect(c.rawIdentityFiles == ["${KEYS}/%r@%h"])
        #expect(c.warnings.count == 1, "\(c.warnings)")
        #expect(c.warnings.first?.line == 2)
        #expect(c.warnings.first?.message.contains("missing.conf") == true)
    }

    /// Debian's rule for a group-writable file: the group must be the user's alone. A
    /// group that is another account's primary group, or that has no member at all, is
    /// not (the file could be written by someone else, who could add a ProxyCommand).
    @Test func aGroupWritableIncludeIsReadOnlyWhenTheGroupIsTheUsersAlone() throws {
        let (dir, context) = try Self.sandbox()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tag = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        let (empty, shared, other) = ("sshkit-e\(tag)", "sshkit-s\(tag)", "sshkit-o\(tag)")
        _ = try TestServer.run("/usr/sbin/groupadd", [empty])
        _ = try TestServer.run("/usr/sbin/groupadd", [shared])
        _ = try TestServer.run("/usr/sbin/useradd", ["-M", "-N", "-g", shared, "-s", "/usr/sbin/nologin", other])
        defer {
            _ = try? TestServer.run("/usr/sbin/userdel", [other])
            _ = try? TestServer.run("/usr/sbin/groupdel", [shared])
            _ = try? TestServer.run("/usr/sbin/groupdel", [empty])
        }
        func resolves(group: String) throws -> Bool {
            try Self.write(dir + "/g.conf", "User fromgroup\n", mode: 0o664)
            _ = try TestServer.run("/bin/chgrp", [group, dir + "/g.conf"])
            chmod(dir + "/g.conf", 0o664)
            try Self.write(dir + "/main.conf", "Include \(dir)/g.conf\n")
            do {
                return try OpenSSHConfig(configFile: dir + "/main.conf", context: context).resolve("h").user == "fromgroup"
            } catch {
                #expect(error.code == .include, "\(error)")
                return false
            }
        }
        #expect(getuid() == 0, "the tests run as root, whose group is root's alone")
        #expect(try resolves(group: "root"))
        #expect(try !resolves(group: empty), "a group without members")
        #expect(try !resolves(group: shared), "another account's primary group")
    }

    @Test func includeErrorsNameTheFileAndLine() throws {
        let (dir, context) = try Self.sandbox()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // loops end at ssh's depth limit
        try Self.write(dir + "/loop.conf", "Include \(dir)/loop.conf\n")
        do {
            _ = try OpenSSHConfig(configFile: dir + "/loop.conf", context: context).resolve("h")
            Issue.record("an include loop resolved")
        } catch {
            #expect(error.code == .include)
            #expect(error.message.contains("Too many recursive"))
        }
        // an include that others may write is refused, as ssh refuses it
        try Self.write(dir + "/open.conf", "User x\n", mode: 0o666)
        try Self.write(dir + "/main.conf", "# first\nInclude \(dir)/open.conf\n")
        do {
            _ = try OpenSSHConfig(configFile: dir + "/main.conf", context: context).resolve("h")
            Issue.record("a world-writable include was read")
        } catch {
            #expect(error.code == .include)
            #expect(error.file == dir + "/main.conf")
            #expect(error.line == 2)
        }
        // an error inside an included file names that file
        try Self.write(dir + "/bad.conf", "\n\nPort none\n")
        try Self.write(dir + "/main2.conf", "Include \(dir)/bad.conf\n")
        do {
            _ = try OpenSSHConfig(configFile: dir + "/main2.conf", context: context).resolve("h")
            Issue.record("a bad port resolved")
        } catch {
            #expect(error == SSHConfigError(.invalidValue, "Bad port 'none'.", file: dir + "/bad.conf", line: 3))
        }
        // -F with a file that does not exist
        #expect(throws: SSHConfigError.self) {
            try OpenSSHConfig(configFile: dir + "/absent.conf", context: context).resolve("h")
        }
    }

    @Test func matchExecRunsOnlyWhenAllowed() throws {
        let (dir, context) = try Self.sandbox()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let marker = dir + "/ran"
        try Self.write(dir + "/main.conf", "Match host skip exec \"touch \(marker)\"\n  User never\nMatch exec \"touch \(marker)\"\n  User ran\n")
        do {
            _ = try OpenSSHConfig(configFile: dir + "/main.conf", context: context).resolve("h")
            Issue.record("Match exec resolved without permission")
        } catch {
            #expect(error.code == .match)
            #expect(error.line == 3) // line 1's exec is skipped: its host did not match
        }
        #expect(!FileManager.default.fileExists(atPath: marker))
        let c = try OpenSSHConfig(configFile: dir + "/main.conf", context: context, allowsMatchExec: true).resolve("h")
        #expect(c.user == "ran")
        #expect(FileManager.default.fileExists(atPath: marker))
    }

    @Test func ignoreUnknownCoversOnlyLaterLines() throws {
        let (dir, context) = try Self.sandbox()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.write(dir + "/a.conf", "IgnoreUnknown UseKeychain\nUseKeychain yes\n")
        #expect(try OpenSSHConfig(configFile: dir + "/a.conf", context: context).resolve("h").user == "tester")
        try Self.write(dir + "/b.conf", "UseKeychain yes\nIgnoreUnknown UseKeychain\n")
        do {
            _ = try OpenSSHConfig(configFile: dir + "/b.conf", context: context).resolve("h")
            Issue.record("an unknown keyword before IgnoreUnknown was accepted")
        } catch {
            #expect(error.code == .unknownKeyword)
            #expect(error.message == "Bad configuration option: usekeychain")
        }
    }

    @Test func theResolvedValuesAreTyped() throws {
        let (dir, context) = try Self.sandbox()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.write(dir + "/main.conf", """
            Host app
              HostName 10.0.0.7
              ProxyJump alice@bastion:2200,[fe80::1%eth0]
              LocalForward 8080 db:5432
              RemoteForward 9000
              DynamicForward 1080
              ForwardAgent yes
              ControlPersist 5m
              ServerAliveInterval 10
              ServerAliveCountMax 2
              Ciphers aes256-gcm@openssh.com
            """)
        let c = try OpenSSHConfig(configFile: dir + "/main.conf", context: context).resolve("app")
        #expect(c.hostName == "10.0.0.7")
        #expect(c.proxyJump == [SSHConfigJumpHost(user: "alice", host: "bastion", port: 2200),
                                SSHConfigJumpHost(host: "fe80::1%eth0")])
        #expect(c.localForwards == [SSHConfigForward(listen: .port(host: nil, port: 8080), connect: .port(host: "db", port: 5432))])
        #expect(c.remoteForwards == [SSHConfigForward(listen: .port(host: nil, port: 9000), connect: nil)])
        #expect(c.dynamicForwards == [SSHConfigForward(listen: .port(host: nil, port: 1080), connect: nil)])
        #expect(c.forwardAgent == "")
        #expect(c.controlPersist == 300)
        #expect(c.serverAliveInterval == 10 && c.serverAliveCountMax == 2)
        #expect(c.ciphers == ["aes256-gcm@openssh.com"])
    }

    @Test func proxyCommandIsKeptAsWrittenAndExpandsAsSSHRunsIt() throws {
        let (dir, context) = try Self.sandbox()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.write(dir + "/main.conf", "Host gw\n  HostName GW.example\n  ProxyCommand nc %h %p # %r, %%\n")
        let c = try OpenSSHConfig(configFile: dir + "/main.conf", context: context).resolve("gw")
        #expect(c.proxyCommand == "nc %h %p # %r, %%")
        #expect(try c.expandedProxyCommand() == "nc gw.example 22 # tester, %")
    }

    @Test func lexingFollowsOpenSSH() {
        func split(_ s: String) -> (String, [String])? {
            guard let (k, rest) = SSHConfigSyntax.keyword(of: Array(s.utf8)), let rest else { return nil }
            return (k, SSHConfigSyntax.words(rest) ?? ["<invalid quotes>"])
        }
        #expect(split("User==alice")?.1 == ["=alice"])
        #expect(split("  User = alice")?.0 == "user")
        #expect(split("User alice # comment")?.1 == ["alice"])
        #expect(split("User alice#x")?.1 == ["alice#x"])
        #expect(split("User al\"i c\"e")?.1 == ["ali ce"])
        #expect(split("User 'a\"b'")?.1 == ["a\"b"])
        #expect(split("User a\\b")?.1 == ["a\\b"])
        #expect(split("User \"open")?.1 == ["<invalid quotes>"])
        #expect(SSHConfigSyntax.keyword(of: Array("# only a comment".utf8)) == nil)
        #expect(SSHConfigSyntax.keyword(of: Array("   ".utf8)) == nil)
        #expect(SSHConfigSyntax.seconds("1h30m") == 5400)
        #expect(SSHConfigSyntax.seconds("-5") == nil)
        #expect(SSHConfigSyntax.port("ssh") == 22)
        #expect(SSHConfigSyntax.port("65536") == nil)
        #expect(SSHConfigSyntax.matchList("web1", "web*,!web2", lowercasePatterns: false) == 1)
        #expect(SSHConfigSyntax.matchList("web2", "web*,!web2", lowercasePatterns: false) == -1)
    }

    /// The package's one SHA-256 (the core's OpenSSL digest): FIPS 180-4 vectors, and
    /// the multi-block case.
    @Test func theCoresSHA256MatchesTheStandardVectors() {
        func hex(_ b: [UInt8]) -> String { b.map { String(format: "%02x", $0) }.joined() }
        #expect(hex(CoreDigest.sha256([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(hex(CoreDigest.sha256(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(hex(CoreDigest.sha256(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(hex(CoreDigest.sha256([UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        #expect(hex(CoreDigest.sha1(Array("abc".utf8))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
    }

    @Test func controlPathHashIsSHA1() {
        // FIPS 180-4 test vectors
        #expect(SSHConfigExpansion.sha1Hex("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(SSHConfigExpansion.sha1Hex("") == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        #expect(SSHConfigExpansion.sha1Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
            == "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
    }

    /// `-L`, `-R`, `-D` arguments read as ssh reads them: the same forward as the
    /// keyword with the same fields, nil where ssh says "Bad forwarding specification".
    @Test func commandLineForwardsParseLikeTheKeywords() throws {
        typealias F = SSHConfigForward
        #expect(F(commandLine: "5432:db:5432", kind: .local)
            == F(listen: .port(host: nil, port: 5432), connect: .port(host: "db", port: 5432)))
        #expect(F(commandLine: "127.0.0.1:8080:[::1]:80", kind: .local)
            == F(listen: .port(host: "127.0.0.1", port: 8080), connect: .port(host: "::1", port: 80)))
        #expect(F(commandLine: "/tmp/s.sock:host:22", kind: .local)
            == F(listen: .path("/tmp/s.sock"), connect: .port(host: "host", port: 22)))
        #expect(F(commandLine: "1080", kind: .dynamic) == F(listen: .port(host: nil, port: 1080), connect: nil))
        #expect(F(commandLine: "8080", kind: .remote) == F(listen: .port(host: nil, port: 8080), connect: nil))
        #expect(F(commandLine: "0:localhost:3000", kind: .remote)
            == F(listen: .port(host: nil, port: 0), connect: .port(host: "localhost", port: 3000)))
        // ssh refuses a local port 0; the tools may allow it
        #expect(F(commandLine: "0:db:5432", kind: .local) == nil)
        #expect(F(commandLine: "0:db:5432", kind: .local, allowsPortZero: true) != nil)
        #expect(F(commandLine: "0", kind: .dynamic) == nil)
        for bad in ["nonsense", "80:host", "a:b:c:d:e", "80:host:0", ""] {
            #expect(F(commandLine: bad, kind: .local) == nil, "\(bad)")
        }
        // the same as the keyword's two words
        let (dir, context) = try Self.sandbox()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let c = try OpenSSHConfig(options: ["LocalForward 127.0.0.1:8080 [::1]:80"], context: context).resolve("h")
        #expect(c.localForwards == [F(commandLine: "127.0.0.1:8080:[::1]:80", kind: .local)!])
    }

    /// SetEnv pairs (the first of a name wins) and the local variables SendEnv names.
    @Test func sessionEnvironmentIsSetEnvAndSendEnv() throws {
        let (dir, context) = try Self.sandbox()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.write(dir + "/.ssh/config", """
            Host *
              SetEnv A=one B="two words" A=ignored
              SendEnv LC_* TOKEN
              SendEnv -TOKEN
              SendEnv B

            """)
        // the file alone: Debian's /etc/ssh/ssh_config sends LANG too
        let c = try OpenSSHConfig(configFile: dir + "/.ssh/config", context: context).resolve("h")
        let env = c.sessionEnvironment(local: ["LC_ALL": "C", "LC_TIME": "x", "LANG": "no", "TOKEN": "secret", "B": "local"])
        #expect(env == ["A": "one", "B": "two words", "LC_ALL": "C", "LC_TIME": "x"])
        #expect(c.option("passwordauthentication", default: true))
        let off = try OpenSSHConfig(options: ["PasswordAuthentication no"], context: context).resolve("h")
        #expect(!off.option("passwordauthentication", default: true))
    }

}
