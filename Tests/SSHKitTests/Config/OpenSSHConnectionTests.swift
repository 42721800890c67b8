import Foundation
import SSHKit
import Synchronization
import Testing

/// A user's OpenSSH setup in a throwaway home directory: `~/.ssh/config`, identity
/// files and known_hosts, pointed at the test server.
struct OpenSSHHome {
    let home: String
    let server: TestServer
    var environment: [String: String] = [:]

    init(_ server: TestServer = .shared) throws {
        self.server = server
        home = try TestPaths.makeTemporaryDirectory("openssh-home")
        try FileManager.default.createDirectory(atPath: home + "/.ssh", withIntermediateDirectories: false)
        chmod(home + "/.ssh", 0o700)
    }

    var ssh: String { home + "/.ssh" }

    /// Writes `~/.ssh/config`; `@PORT@`, `@USER@`, `@HOME@` and `@DIR@` (the server's
    /// directory) are filled in.
    func config(_ text: String) throws {
        try write(text, to: ssh + "/config", mode: 0o600)
    }

    func write(_ text: String, to path: String, mode: mode_t = 0o644) throws {
        let filled = text.replacingOccurrences(of: "@PORT@", with: "\(server.port)")
            .replacingOccurrences(of: "@USER@", with: server.user)
            .replacingOccurrences(of: "@HOME@", with: home)
            .replacingOccurrences(of: "@DIR@", with: server.dir)
        try filled.write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, mode)
    }

    /// Copies one of the server's user keys (and its .pub) to `~/.ssh/<name>`, 0600.
    func identity(_ serverKey: String, as name: String) throws {
        let to = ssh + "/" + name
        try? FileManager.default.removeItem(atPath: to)
        try? FileManager.default.removeItem(atPath: to + ".pub")
        try FileManager.default.copyItem(atPath: server.key(serverKey), toPath: to)
        try FileManager.default.copyItem(atPath: server.key(serverKey) + ".pub", toPath: to + ".pub")
        chmod(to, 0o600)
    }

    /// known_hosts lines trusting every host key of the server under `name`.
    func knownHostsLines(name: String? = nil) throws -> String {
        let n = name ?? "[127.0.0.1]:\(server.port)"
        return try ["host_ed25519", "host_ecdsa", "host_rsa"].map { k in
            let pub = try String(contentsOfFile: server.key(k) + ".pub", encoding: .utf8)
            return n + " " + pub.split(separator: " ").prefix(2).joined(separator: " ")
        }.joined(separator: "\n") + "\n"
    }

    var context: OpenSSHConfig.Context {
        OpenSSHConfig.Context(homeDirectory: home, localUser: "tester", uid: getuid(), localHostName: "client.example",
                              environment: environment)
    }

    /// The configuration as ssh -F would read it (the system file is left out).
    var openSSH: OpenSSHConfig { OpenSSHConfig(configFile: ssh + "/config", context: context) }

    func remove() { try? FileManager.default.removeItem(atPath: home) }
}

@Suite("OpenSSH setup: connecting like ssh", .tags(.integration), .serialized)
struct OpenSSHConnectionTests {
    static let target = """
        Host db
            HostName 127.0.0.1
            Port @PORT@
            User @USER@

        """

    @Test("an alias connects with ssh's default identities and known_hosts, skipping unusable keys in order")
    func aliasWithDefaults() async throws {
        let h = try OpenSSHHome()
        defer { h.remove() }
        try h.config(Self.target + "    StrictHostKeyChecking yes\n")
        // ssh's order: id_rsa (not authorized), id_ecdsa (encrypted: skipped, no
        // passphrase), then id_ed25519, which the server accepts
        try h.identity("id_unauthorized", as: "id_rsa")
        try h.identity("id_ed25519_pass", as: "id_ecdsa")
        try h.identity("id_ed25519", as: "id_ed25519")
        try h.write(try h.knownHostsLines(), to: h.ssh + "/known_hosts")

        let config = try h.openSSH.connectionConfiguration(for: "db")
        #expect(config.host == "127.0.0.1")
        #expect(config.port == h.server.port)
        #expect(config.user == h.server.user)
        #expect(config.authentication.methods.count == 3)
        #expect(config.authentication.skipsUnusableMethods)
        let who = try await SSHClient.withConnection(config) { try await $0.execute("whoami").stdoutString }
        #expect(who == h.server.user + "\n")
    }

    @Test("no usable identity: authenticationFailed, naming what was skipped")
    func noUsableIdentity() async throws {
        let h = try OpenSSHHome()
        defer { h.remove() }
        try h.config(Self.target + "    IdentityFile ~/.ssh/mine\n    IdentityFile ~/.ssh/missing\n")
        try h.identity("id_ed25519_pass", as: "mine")
        try h.write(try h.knownHostsLines(), to: h.ssh + "/known_hosts")
        let config = try h.openSSH.connectionConfiguration(for: "db")
        let e = await expectSSHError { try await SSHClient.connect(config) }
        #expect(e?.code == .authenticationFailed)
        #expect(e?.message.contains("skipped") == true, "\(String(describing: e))")
    }

    @Test("IdentitiesOnly: the agent is left out; IdentityAgent none too")
    func identitiesOnly() throws {
        var h = try OpenSSHHome()
        defer { h.remove() }
        h.environment["SSH_AUTH_SOCK"] = "/nonexistent/agent.sock"
        try h.identity("id_ed25519", as: "id_ed25519")
        try h.config(Self.target)
        let withAgent = try h.openSSH.connectionConfiguration(for: "db").authentication.methods
        guard case .agent(let socket)? = withAgent.first else {
            Issue.record("the agent should come first: \(withAgent)")
            return
        }
        #expect(socket == "/nonexistent/agent.sock")
        try h.config(Self.target + "    IdentitiesOnly yes\n")
        let only = try h.openSSH.connectionConfiguration(for: "db").authentication.methods
        #expect(only.count == 1)
        try h.config(Self.target + "    IdentityAgent none\n")
        let noAgent = try h.openSSH.connectionConfiguration(for: "db").authentication.methods
        #expect(noAgent.count == 1)
        // an IdentityAgent that expands to nothing is no agent (not an empty socket path)
        h.environment["SSHKIT_EMPTY_AGENT"] = ""
        try h.config(Self.target + "    IdentityAgent ${SSHKIT_EMPTY_AGENT}\n")
        let emptyAgent = try h.openSSH.connectionConfiguration(for: "db")
        #expect(emptyAgent.authentication.methods.count == 1, "\(emptyAgent.authentication.methods)")
    }

    @Test("an agent that is not there is skipped, like ssh")
    func missingAgentIsSkipped() async throws {
        var h = try OpenSSHHome()
        defer { h.remove() }
        h.environment["SSH_AUTH_SOCK"] = h.home + "/no-agent.sock"
        try h.identity("id_ed25519", as: "id_ed25519")
        try h.config(Self.target + "    StrictHostKeyChecking yes\n")
        try h.write(try h.knownHostsLines(), to: h.ssh + "/known_hosts")
        let config = try h.openSSH.connectionConfiguration(for: "db")
        let status = try await SSHClient.withConnection(config) { try await $0.execute("true").exitStatus }
        #expect(status == .exited(0))
    }

    // MARK: StrictHostKeyChecking

    @Test("yes: an unknown host is refused; a key in the global file is trusted")
    func strictChecking() async throws {
        let h = try OpenSSHHome()
        defer { h.remove() }
        try h.identity("id_ed25519", as: "id_ed25519")
        try h.config(Self.target + "    StrictHostKeyChecking yes\n    GlobalKnownHostsFile @HOME@/global_hosts\n")
        let config = try h.openSSH.connectionConfiguration(for: "db")
        let e = await expectSSHError { try await SSHClient.connect(config) }
        #expect(e?.code == .hostKeyRejected)
        #expect(e?.message.contains("not known") == true)
        try h.write(try h.knownHostsLines(), to: h.home + "/global_hosts")
        try await SSHClient.withConnection(config) { _ in }
        #expect(!FileManager.default.fileExists(atPath: h.ssh + "/known_hosts"), "strict checking records nothing")
    }

    @Test("accept-new records the key where ssh-keygen -F finds it, then a changed key is refused")
    func acceptNew() async throws {
        let h = try OpenSSHHome()
        defer { h.remove() }
        try h.identity("id_ed25519", as: "id_ed25519")
        try h.config(Self.target + "    StrictHostKeyChecking accept-new\n    HashKnownHosts yes\n")
        let config = try h.openSSH.connectionConfiguration(for: "db")
        let key = try await SSHClient.withConnection(config) { $0.hostKey }
        let file = try String(contentsOfFile: h.ssh + "/known_hosts", encoding: .utf8)
        #expect(file.hasPrefix("|1|"), "HashKnownHosts yes writes hashed names")
        let found = try TestServer.run("/usr/bin/ssh-keygen", ["-F", "[127.0.0.1]:\(h.server.port)", "-f", h.ssh + "/known_hosts"])
        #expect(found.contains(key.base64))
        // now pretend the server's key changed
        let other = try String(contentsOfFile: h.server.key("id_unauthorized.pub"), encoding: .utf8)
        try h.write("[127.0.0.1]:\(h.server.port) " + other.split(separator: " ").prefix(2).joined(separator: " ") + "\n",
                    to: h.ssh + "/known_hosts")
        let e = await expectSSHError { try await SSHClient.connect(config) }
        #expect(e?.code == .hostKeyRejected)
        #expect(e?.message.contains("changed") == true)
    }

    @Test("ask: the prompt sees the key and where it goes; yes records it, no refuses, nobody to ask refuses")
    func ask() async throws {
        let h = try OpenSSHHome()
        defer { h.remove() }
        try h.identity("id_ed25519", as: "id_ed25519")
        try h.config(Self.target)
        // no prompt given: fail closed, as ssh without a terminal
        let closed = try h.openSSH.connectionConfiguration(for: "db")
        let e = await expectSSHError { try await SSHClient.connect(closed) }
        #expect(e?.code == .hostKeyRejected)
        #expect(e?.message.contains("nobody to ask") == true)

        let prompts = Mutex<[SSHHostKeyPrompt]>([])
        let answer = Atomic<Bool>(false)
        let interaction = SSHConfigInteraction(confirmUnknownHostKey: { prompt in
            prompts.withLock { $0.append(prompt) }
            return answer.load(ordering: .relaxed)
        })
        let config = try h.openSSH.connectionConfiguration(for: "db", interaction: interaction)
        let refused = await expectSSHError { try await SSHClient.connect(config) }
        #expect(refused?.code == .hostKeyRejected)
        #expect(!FileManager.default.fileExists(atPath: h.ssh + "/known_hosts"))
        answer.store(true, ordering: .relaxed)
        let key = try await SSHClient.withConnection(config) { $0.hostKey }
        let seen = prompts.withLock { $0 }
        #expect(seen.count == 2)
        #expect(seen.last?.key == key)
        #expect(seen.last?.hostName == "127.0.0.1")
        #expect(seen.last?.port == h.server.port)
        #expect(seen.last?.knownHostsFile == h.ssh + "/known_hosts")
        // recorded: the next connection does not ask
        try await SSHClient.withConnection(config) { _ in }
        #expect(prompts.withLock { $0.count } == 2)

        // BatchMode: nobody is asked even with a prompt
        try h.config(Self.target + "    BatchMode yes\n    UserKnownHostsFile ~/.ssh/other_hosts\n")
        let batch = try h.openSSH.connectionConfiguration(for: "db", interaction: interaction)
        let b = await expectSSHError { try await SSHClient.connect(batch) }
        #expect(b?.code == .hostKeyRejected)
        #expect(prompts.withLock { $0.count } == 2)
    }

    @Test("ask: a changed key is refused without asking")
    func askChangedKey() async throws {
        let h = try OpenSSHHome()
        defer { h.remove() }
        try h.identity("id_ed25519", as: "id_ed25519")
        try h.config(Self.target)
        let other = try String(contentsOfFile: h.server.key("id_unauthorized.pub"), encoding: .utf8)
        try h.write("[127.0.0.1]:@PORT@ " + other.split(separator: " ").prefix(2).joined(separator: " ") + "\n",
                    to: h.ssh + "/known_hosts")
        let asked = Atomic<Int>(0)
        let config = try h.openSSH.connectionConfiguration(
            for: "db", interaction: SSHConfigInteraction(confirmUnknownHostKey: { _ in
                asked.add(1, ordering: .relaxed)
                return true
            }))
        let e = await expectSSHError { try await SSHClient.connect(config) }
        #expect(e?.code == .hostKeyRejected)
        #expect(e?.message.contains("changed") == true)
        #expect(asked.load(ordering: .relaxed) == 0)
    }

    @Test("no: refused unless allowed; allowed, a changed key is accepted but keyboard-interactive is not answered")
    func insecureNo() async throws {
        let h = try OpenSSHHome()
        defer { h.remove() }
        try h.config(Self.target + "    StrictHostKeyChecking no\n")
        #expect(throws: SSHConfigError.self) { try h.openSSH.connectionConfiguration(for: "db") }
        do {
            _ = try h.openSSH.connectionConfiguration(for: "db")
        } catch {
            #expect(error.code == .insecure)
        }
        let other = try String(contentsOfFile: h.server.key("id_unauthorized.pub"), encoding: .utf8)
        try h.write("[127.0.0.1]:@PORT@ " + other.split(separator: " ").prefix(2).joined(separator: " ") + "\n",
                    to: h.ssh + "/known_hosts")
        let answered = Atomic<Int>(0)
        let password = h.server.password
        let interaction = SSHConfigInteraction(
            keyboardInteractive: { challenge in
                answered.add(1, ordering: .relaxed)
                return challenge.prompts.map { _ in password }
            },
            allowsInsecureHostKeyChecking: true)
        // no identity: only keyboard-interactive could log in, and it must not be used
        let config = try h.openSSH.connectionConfiguration(for: "db", interaction: interaction)
        let e = await expectSSHError { try await SSHClient.connect(config) }
        #expect(e?.code == .authenticationFailed)
        #expect(answered.load(ordering: .relaxed) == 0)
        // that configuration answers no prompt any more, even for a host now unknown
        try FileManager.default.removeItem(atPath: h.ssh + "/known_hosts")
        let again = await expectSSHError { try await SSHClient.connect(config) }
        #expect(again?.code == .authenticationFailed)
        #expect(answered.load(ordering: .relaxed) == 0)
        // a fresh one records the unknown host, and the password is given
        let fresh = try h.openSSH.connectionConfiguration(for: "db", interaction: interaction)
        try await SSHClient.withConnection(fresh) { _ in }
        #expect(answered.load(ordering: .relaxed) == 1)
        #expect(FileManager.default.fileExists(atPath: h.ssh + "/known_hosts"))
    }

    @Test("the password prompt: last, NumberOfPasswordPrompts times; not with PasswordAuthentication no or BatchMode")
    func passwordPrompt() async throws {
        let h = try OpenSSHHome()
        defer { h.remove() }
        try h.write(try h.knownHostsLines(), to: h.ssh + "/known_hosts")
        let asked = Mutex<[Int]>([])
        let password = h.server.password
        let interaction = SSHConfigInteraction(password: { request in
            asked.withLock { $0.append(request.attempt) }
            return request.attempt == 1 ? "wrong" : password
        })
        try h.config(Self.target + "    IdentityFile @HOME@/none\n    KbdInteractiveAuthentication no\n")
        let who = try await SSHClient.withConnection(
            try h.openSSH.connectionConfiguration(for: "db", interaction: interaction)) { conn in
            try await conn.execute("id -un").stdoutString
        }
        #expect(who == h.server.user + "\n")
        #expect(asked.withLock { $0 } == [1, 2])
        // one prompt only: the wrong password ends it
        asked.withLock { $0 = [] }
        try h.config(Self.target + "    IdentityFile @HOME@/none\n    KbdInteractiveAuthentication no\n"
                     + "    NumberOfPasswordPrompts 1\n")
        let once = await expectSSHError {
            try await SSHClient.connect(try h.openSSH.connectionConfiguration(for: "db", interaction: interaction))
        }
        #expect(once?.code == .authenticationFailed)
        #expect(asked.withLock { $0 } == [1])
        // not asked at all
        for setting in ["PasswordAuthentication no", "BatchMode yes"] {
            asked.withLock { $0 = [] }
            try h.config(Self.target + "    IdentityFile @HOME@/none\n    KbdInteractiveAuthentication no\n    \(setting)\n")
            let config = try h.openSSH.connectionConfiguration(for: "db", interaction: interaction)
            #expect(!config.authentication.methods.contains { if case .passwordPrompt = $0 { true } else { false } })
            #expect(asked.withLock { $0 }.isEmpty, "\(setting)")
        }
    }

    @Test("HostKeyAlias: the key is looked up under the alias, without the port")
    func hostKeyAlias() async throws {
        let h = try OpenSSHHome()
        defer { h.remove() }
        try h.identity("id_ed25519", as: "id_ed25519")
        try h.config(Self.target + "    StrictHostKeyChecking yes\n    HostKeyAlias Database.Example\n")
        try h.write(try h.knownHostsLines(name: "database.example"), to: h.ssh + "/known_hosts")
        try await SSHClient.withConnection(try h.openSSH.connectionConfiguration(for: "db")) { _ in }
    }

    @Test("UserKnownHostsFile /dev/null with accept-new: connects, records nothing")
    func devNull() async throws {
        let h = try OpenSSHHome()
        defer { h.remove() }
        try h.identity("id_ed25519", as: "id_ed25519")
        try h.config(Self.target + "    StrictHostKeyChecking accept-new\n    UserKnownHostsFile /dev/null\n")
        try await SSHClient.withConnection(try h.openSSH.connectionConfiguration(for: "db")) { _ in }
        try await SSHClient.withConnection(try h.openSSH.connectionConfiguration(for: "db")) { _ in }
        #expect(!FileManager.default.fileExists(atPath: h.ssh + "/known_hosts"))
    }

    @Test("timeouts and keepalive come from the file")
    func timeoutsAndKeepalive() throws {
        let h = try OpenSSHHome()
        defer { h.remove() }
        try h.config(Self.target + "    ConnectTimeout 7\n    ServerAliveInterval 5\n    ServerAliveCountMax 4\n"
                     + "    Ciphers aes256-gcm@openssh.com,aes128-ctr\n    KexAlgorithms sntrup761x25519-sha512@openssh.com,curve25519-sha256\n")
        let c = try h.openSSH.connectionConfiguration(for: "db")
        #expect(c.connectTimeout == .seconds(7))
        #expect(c.keepalive == SSHKeepalive(interval: .seconds(5), maxMissed: 4))
        #expect(c.algorithms.ciphersClientToServer == ["aes256-gcm@openssh.com", "aes128-ctr"])
        // libssh 0.10 has no sntrup761: dropped, the rest kept
        #expect(c.algorithms.keyExchange == ["curve25519-sha256"])
        #expect(c.algorithms.macsClientToServer == nil, "lists left at the default stay at libssh's")
        try h.config(Self.target + "    KexAlgorithms sntrup761x25519-sha512@openssh.com\n")
        #expect(throws: SSHConfigError.self) { try h.openSSH.connectionConfiguration(for: "db") }
        // values ssh takes that SSHKit's ranges did not: "no timeout" and a very long interval
        try h.config(Self.target + "    ConnectTimeout 0\n    ServerAliveInterval 200000\n")
        let wide = try h.openSSH.connectionConfiguration(for: "db")
        #expect(wide.connectTimeout == .seconds(120))
        #expect(wide.keepalive?.interval == .seconds(86_400))
    }
}
