import Foundation
import SSHKit
import Testing
import Synchronization

/// Every authentication method, for real, against the fixture sshd.
@Suite("Authentication", .tags(.integration))
struct AuthenticationTests {
    let server = TestServer.shared

    func whoami(_ auth: SSHAuthentication) async throws -> SSHConnection {
        let conn = try await SSHClient.connect(server.configuration(auth))
        let r = try await conn.execute("id -un")
        #expect(r.stdoutString == server.user + "\n")
        return conn
    }

    @Test func password() async throws {
        let conn = try await whoami(.password(server.password))
        #expect(conn.offeredAuthMethods.contains([.password, .publicKey, .keyboardInteractive]))
        await conn.close()
    }

    @Test(arguments: [("id_ed25519", false), ("id_ed25519_pass", true), ("id_ecdsa_pem", false),
                      ("id_rsa_pem_pass", true), ("id_rsa", false)])
    func privateKeyFile(name: String, encrypted: Bool) async throws {
        let conn = try await whoami(.privateKey(path: server.key(name), passphrase: encrypted ? server.passphrase : nil))
        await conn.close()
    }

    @Test func privateKeyFromMemory() async throws {
        let text = try String(contentsOfFile: server.key("id_ed25519_pass"), encoding: .utf8)
        let conn = try await whoami(.privateKey(text, passphrase: server.passphrase))
        await conn.close()
        let pem = try String(contentsOfFile: server.key("id_ecdsa_pem"), encoding: .utf8)
        await (try await whoami(.privateKey(pem))).close()
    }

    @Test func agent() async throws {
        let sock = server.dir + "/agent-\(UUID().uuidString.prefix(8)).sock"
        let agent = try Daemon.spawn("/usr/bin/ssh-agent", ["-D", "-a", sock], log: server.dir + "/agent.log")
        defer { agent.stop() }
        for _ in 0..<100 where !FileManager.default.fileExists(atPath: sock) { usleep(20_000) }
        try TestServer.run("/usr/bin/ssh-add", [server.key("id_rsa")], env: ["SSH_AUTH_SOCK": sock])
        let conn = try await whoami(.agent(socketPath: sock))
        await conn.close()
    }

    @Test func keyboardInteractive() async throws {
        let seen = PromptLog()
        let pw = server.password
        let conn = try await whoami(.keyboardInteractive { challenge in
            await seen.add(challenge.prompts.map(\.text))
            return challenge.prompts.map { _ in pw }
        })
        let prompts = await seen.all
        #expect(prompts.contains { $0.lowercased().contains("password") })
        await conn.close()
    }

    @Test func methodsAreTriedInOrderAndUnofferedOnesSkipped() async throws {
        let conn = try await whoami(SSHAuthentication([
            .password("wrong-\(UUID())"),
            .privateKeyFile(path: server.key("id_unauthorized"), passphrase: nil),
            .privateKeyFile(path: server.key("id_ed25519"), passphrase: nil),
        ]))
        await conn.close()
        // the order shows in what a refusal lists as tried: exactly the order given
        let order = await expectSSHError {
            try await SSHClient.connect(server.configuration(SSHAuthentication([
                .privateKeyFile(path: server.key("id_unauthorized"), passphrase: nil),
                .keyboardInteractive { challenge in challenge.prompts.map { _ in "wrong" } },
                .password("wrong-\(UUID())"),
            ])))
        }
        #expect(order?.code == .authenticationFailed)
        #expect(order?.message.contains("tried: publickey(file),keyboard-interactive,password") == true,
                "\(String(describing: order?.message))")
        // a method the server does not offer is never tried
        let keysOnly = try TestServer.start(name: "order-\(UUID().uuidString.prefix(6))",
                                            extraConfig: ["PasswordAuthentication no", "KbdInteractiveAuthentication no"])
        defer { keysOnly.stop() }
        let skipped = await expectSSHError {
            try await SSHClient.connect(keysOnly.configuration(SSHAuthentication([
                .password("x"),
                .privateKeyFile(path: keysOnly.key("id_unauthorized"), passphrase: nil),
            ])))
        }
        #expect(skipped?.code == .authenticationFailed)
        #expect(skipped?.message.contains("tried: publickey(file)") == true && skipped?.message.contains("password") == false,
                "\(String(describing: skipped?.message))")
        #expect(skipped?.offeredAuthMethods == [.publicKey], "\(String(describing: skipped?.offeredAuthMethods))")
    }

    @Test func wrongPasswordIsAuthenticationFailedWithTheOfferedMethods() async {
        let e = await expectSSHError { try await SSHClient.connect(server.configuration(.password("wrong"))) }
        #expect(e?.code == .authenticationFailed)
        #expect(e?.message.contains("publickey") == true)
        #expect(e?.message.contains("tried: password") == true)
        #expect(e?.host == server.host && e?.port == server.port)
        #expect(e?.offeredAuthMethods?.contains([.publicKey, .password, .keyboardInteractive]) == true)
        // a failure after key exchange carries the key that was seen (the error model's
        // general field, not only for a rejected key)
        #expect(e?.presentedHostKey.map { server.allFingerprints.contains($0.sha256Fingerprint) } == true)
    }

    @Test func unauthorizedKeyIsAuthenticationFailed() async {
        let e = await expectSSHError {
            try await SSHClient.connect(server.configuration(.privateKey(path: server.key("id_unauthorized"))))
        }
        #expect(e?.code == .authenticationFailed)
    }

    @Test func wrongPassphraseOrMissingKeyIsPrivateKeyUnreadable() async {
        var e = await expectSSHError {
            try await SSHClient.connect(server.configuration(.privateKey(path: server.key("id_rsa_pem_pass"), passphrase: "nope")))
        }
        #expect(e?.code == .privateKeyUnreadable)
        e = await expectSSHError {
            try await SSHClient.connect(server.configuration(.privateKey(path: "/nonexistent/key")))
        }
        #expect(e?.code == .privateKeyUnreadable)
        e = await expectSSHError { try await SSHClient.connect(server.configuration(.privateKey("not a key"))) }
        #expect(e?.code == .privateKeyUnreadable)
    }

    @Test func agentWithoutSocketIsAgentUnavailable() async {
        let e = await expectSSHError {
            try await SSHClient.connect(server.configuration(.agent(socketPath: server.dir + "/no-agent.sock")))
        }
        #expect(e?.code == .agentUnavailable || e?.code == .authenticationFailed, "\(String(describing: e))")
    }

    /// libssh keeps the first agent it reached for every agent method: two different
    /// agents in one list would silently ask the first twice, so they are refused.
    @Test func twoDifferentAgentsOrAnEmptyAgentPathAreInvalidArguments() async {
        for methods: [SSHAuthentication.Method] in [
            [.agent(socketPath: server.dir + "/a.sock"), .agent(socketPath: server.dir + "/b.sock")],
            [.agent(socketPath: nil), .agent(socketPath: server.dir + "/b.sock")],
            [.agent(socketPath: "")],
            [.agent(socketPath: "/tmp/a\0b")],
        ] {
            let e = await expectSSHError { try await SSHClient.connect(server.configuration(SSHAuthentication(methods))) }
            #expect(e?.code == .invalidArgument, "\(methods.count) methods: \(String(describing: e))")
        }
        // the same agent twice is one agent
        let same = SSHAuthentication([.agent(socketPath: server.dir + "/no-agent.sock"),
                                      .agent(socketPath: server.dir + "/no-agent.sock")])
        let e = await expectSSHError { try await SSHClient.connect(server.configuration(same)) }
        #expect(e?.code == .agentUnavailable || e?.code == .authenticationFailed, "\(String(describing: e))")
    }

    @Test func responderThatThrowsFailsAuthenticationWithTheCause() async {
        struct NoAnswer: Error {}
        let e = await expectSSHError {
            try await SSHClient.connect(server.configuration(.keyboardInteractive { _ in throw NoAnswer() }))
        }
        #expect(e?.code == .authenticationFailed)
        #expect(e?.cause is NoAnswer)
    }
}

actor PromptLog {
    var all: [String] = []
    func add(_ p: [String]) { all += p }
}

extension AuthenticationTests {
    /// Values that would reach libssh cut short at a NUL (another password, another key
    /// file), or overflow in the core, are refused before anything is sent.
    @Test func nulBytesInSecretsAndOutOfRangeSettingsAreInvalidArguments() async throws {
        let base = server.configuration()
        let methods: [SSHAuthentication.Method] = [
            .password("a\u{0}b"),
            .privateKeyFile(path: server.key("id_ed25519") + "\u{0}x", passphrase: nil),
            .privateKeyFile(path: server.key("id_ed25519"), passphrase: "p\u{0}"),
            .privateKeyFile(path: server.key("id_ed25519"), passphrase: nil, certificate: "/c\u{0}"),
            .privateKey("key\u{0}", passphrase: nil),
        ]
        for method in methods {
            var c = base
            c.authentication = SSHAuthentication([method])
            let e = await expectSSHError { try await SSHClient.connect(c) }
            #expect(e?.code == .invalidArgument, "\(method): \(String(describing: e))")
        }
        var long = base
        long.socketTimeout = .seconds(86_401)
        #expect(await expectSSHError { try await SSHClient.connect(long) }?.code == .invalidArgument)

        // a terminal size changed after its init: a typed error, not a trap
        try await SSHClient.withConnection(base) { conn in
            var terminal = SSHTerminal()
            terminal.size.columns = 0
            let e = await expectSSHError { try await conn.startCommand("true", terminal: terminal) }
            #expect(e?.code == .invalidArgument)
            let cmd = try await conn.startCommand("cat", terminal: SSHTerminal())
            var size = SSHTerminalSize(columns: 80, rows: 24)
            size.rows = -1
            do throws(SSHError) {
                try cmd.resize(to: size)
                Issue.record("resized to \(size)")
            } catch {
                #expect(error.code == .invalidArgument)
            }
            size.rows = 70_000
            #expect(throws: SSHError.self) { try cmd.resize(to: size) }
            cmd.cancel()
        }
    }
}

/// A key given without its passphrase has it asked for when its turn comes, as ssh
/// asks "Enter passphrase for key …", and again while it is wrong.
extension AuthenticationTests {
    /// The answers in order (the last repeated); the requests are logged.
    final class Passphrases: Sendable {
        let answers: [String?]
        let log = Mutex<[SSHPassphraseRequest]>([])
        init(_ answers: [String?]) { self.answers = answers }
        var requests: [SSHPassphraseRequest] { log.withLock { $0 } }
        func answer(_ r: SSHPassphraseRequest) -> String? {
            log.withLock { $0.append(r) }
            return answers[min(r.attempt, answers.count) - 1]
        }
    }

    func authentication(_ methods: [SSHAuthentication.Method], skips: Bool = false, _ p: Passphrases)
        -> SSHAuthentication
    {
        SSHAuthentication(methods, skipsUnusableMethods: skips, passphrase: { p.answer($0) })
    }

    @Test(arguments: ["id_ed25519_pass", "id_rsa_pem_pass"])
    func anEncryptedKeysPassphraseIsAskedAndAWrongOneAskedAgain(name: String) async throws {
        let path = server.key(name)
        let p = Passphrases(["wrong", server.passphrase])
        await (try await whoami(authentication([.privateKeyFile(path: path, passphrase: nil)], p))).close()
        let asked = p.requests
        #expect(asked.map(\.attempt) == [1, 2])
        #expect(asked.allSatisfy { $0.keyPath == path })
        #expect(asked.first?.prompt == "Enter passphrase for key '\(path)': ")
        #expect(asked.last?.prompt == "Bad passphrase, try again for \(path): ")
    }

    @Test func aKeyInMemoryOrAKeyThatIsNotEncryptedIsAskedOnlyWhenEncrypted() async throws {
        let text = try String(contentsOfFile: server.key("id_ed25519_pass"), encoding: .utf8)
        let p = Passphrases([server.passphrase])
        await (try await whoami(authentication([.privateKey(text, passphrase: nil)], p))).close()
        #expect(p.requests.count == 1 && p.requests.first?.keyPath == nil)
        let plain = Passphrases([server.passphrase])
        await (try await whoami(authentication([.privateKeyFile(path: server.key("id_ed25519"), passphrase: nil)], plain))).close()
        #expect(plain.requests.isEmpty, "a key that is not encrypted is never asked about")
        // a passphrase given with the key: nobody is asked
        let given = Passphrases(["x"])
        await (try await whoami(authentication([.privateKeyFile(path: server.key("id_ed25519_pass"),
                                                                passphrase: server.passphrase)], given))).close()
        #expect(given.requests.isEmpty)
    }

    @Test func wrongPassphrasesNoAnswerOrNobodyToAskMakeTheKeyUnusable() async throws {
        let path = server.key("id_ed25519_pass")
        // wrong three times: the key is unusable, and the connection fails saying so
        let wrong = Passphrases(["a", "b", "c", "d"])
        var e = await expectSSHError {
            try await SSHClient.connect(server.configuration(authentication([.privateKeyFile(path: path, passphrase: nil)], wrong)))
        }
        #expect(e?.code == .privateKeyUnreadable && "\(e!)".contains("wrong passphrase (asked 3 times)"), "\(String(describing: e))")
        #expect(wrong.requests.count == 3)
        // no answer (nil, or an empty line as ssh takes it): unusable at once
        for answer in [nil, ""] as [String?] {
            let none = Passphrases([answer])
            e = await expectSSHError {
                try await SSHClient.connect(server.configuration(authentication([.privateKeyFile(path: path, passphrase: nil)], none)))
            }
            #expect(e?.code == .privateKeyUnreadable && "\(e!)".contains("no passphrase was given"), "\(String(describing: e))")
            #expect(none.requests.count == 1)
        }
        // skipped as ssh skips it, and the next method used
        let skipped = Passphrases(["a"])
        let conn = try await whoami(authentication([.privateKeyFile(path: path, passphrase: nil), .password(server.password)],
                                                   skips: true, skipped))
        await conn.close()
        #expect(skipped.requests.count == 3)
        // nobody to ask (no responder): unusable, as before
        e = await expectSSHError { try await SSHClient.connect(server.configuration(.privateKey(path: path))) }
        #expect(e?.code == .privateKeyUnreadable)
        // a responder that throws ends authentication with its error as the cause
        struct Refused: Error {}
        e = await expectSSHError {
            try await SSHClient.connect(server.configuration(SSHAuthentication([.privateKeyFile(path: path, passphrase: nil)],
                                                                               passphrase: { _ in throw Refused() })))
        }
        #expect(e?.code == .authenticationFailed && e?.cause is Refused, "\(String(describing: e))")
    }
}
