import Foundation
import SSHKit
import Testing

/// The compatibility table of `Docs/Guide-Algorithms.md`, made by this test: one OpenSSH
/// server per configuration (each key exchange, cipher, MAC and host key algorithm the
/// server has, alone; published hardening configurations whole; RSA keys with `ssh-rsa`
/// off), and in each cell the library's profile connecting, running a command and moving
/// a file by SFTP. A cell that fails is the typed error the user gets, and its message
/// names the algorithm the server offered. The table in the guide must be the one this
/// run makes (`SSHKIT_UPDATE_DOCS=1` writes it).
@Suite("Compatibility table: hardened OpenSSH servers", .tags(.integration), .serialized)
struct CompatibilityTableTests {
    static let profiles: [(name: String, algorithms: SSHAlgorithms)] = [
        ("libssh's defaults", .libsshDefaults), ("`.modern`", .modern), ("`.compatible`", .compatible),
    ]

    /// One server configuration: its row's label, its sshd lines, the name that must
    /// appear in a failure's message, the user key, and what a working cell must have
    /// negotiated.
    struct Row: Sendable {
        var section: String
        var label: String
        var config: [String]
        var named: String?
        var userKey = "id_ed25519"
        /// A key of its own (an absolute path) and its passphrase, in `userKey`'s place.
        var ownKey: (path: String, passphrase: String)?
        var negotiated: (@Sendable (SSHNegotiatedAlgorithms) -> Bool)?
        /// A feature the cell tries after the command and SFTP (nil when it worked, else why not).
        var feature: Feature?
        /// Shell commands run as root in the server's own mount namespace before it starts.
        var mountSetup: String?
    }

    enum Feature: Sendable {
        /// `ssh -A` from the test's ssh-agent: `ssh-add -l` on the server lists its key.
        case agentForwarding
        /// `ssh -R 0`: a connection made on the server to the port the server picked reaches
        /// an echo server here.
        case remoteForward
        /// Keyboard-interactive through PAM asking two questions, each answered.
        case twoPrompts
    }

    enum Outcome: Sendable, Equatable {
        case works
        case fails(SSHError.Code)
        /// Connected, but the command or SFTP failed.
        case broken(String)

        var cell: String {
            switch self {
            case .works: "✓"
            case .fails(let code): "✗ `\(code)`"
            case .broken(let why): "✗ \(why)"
            }
        }
    }

    /// The lines of `ssh -Q what`.
    static func query(_ what: String) throws -> [String] {
        try TestServer.run("/usr/bin/ssh", ["-Q", what]).split(separator: "\n").map(String.init)
    }

    /// Keys and certificates the host key rows need beyond the fixture's: ECDSA of 384 and
    /// 521 bits, DSA, and a CA with host certificates of the ED25519, ECDSA and RSA keys.
    struct ExtraKeys {
        let dir: String
        let fingerprints: [String]

        init() throws {
            let dir = try TestPaths.makeTemporaryDirectory("hostkeys")
            self.dir = dir
            chmod(dir, 0o755)
            func keygen(_ args: [String]) throws {
                _ = try TestServer.run("/usr/bin/ssh-keygen", ["-q", "-C", "table"] + args)
            }
            try keygen(["-t", "ecdsa", "-b", "384", "-N", "", "-f", dir + "/host_ecdsa384"])
            try keygen(["-t", "ecdsa", "-b", "521", "-N", "", "-f", dir + "/host_ecdsa521"])
            try keygen(["-t", "dsa", "-N", "", "-f", dir + "/host_dsa"])
            try keygen(["-t", "ed25519", "-N", "", "-f", dir + "/ca"])
            for t in ["ed25519", "ecdsa", "rsa"] {
                try keygen(["-t", t, "-N", "", "-f", dir + "/cert_\(t)"])
                try keygen(["-s", dir + "/ca", "-I", "table-\(t)", "-h", "-n", "127.0.0.1", dir + "/cert_\(t).pub"])
            }
            // encrypted user keys in each format: OpenSSH's own (bcrypt, aes256-ctr), PEM, PKCS#8
            var authorized = ""
            for (type, format) in Self.userKeys {
                var args = ["-t", type, "-N", Self.passphrase, "-f", dir + "/user_\(type)_\(format)"]
                if type == "rsa" { args += ["-b", "2048"] }
                if format != "openssh" { args += ["-m", format == "pem" ? "PEM" : "PKCS8"] }
                try keygen(args)
                authorized += try String(contentsOfFile: dir + "/user_\(type)_\(format).pub", encoding: .utf8)
            }
            try authorized.write(toFile: dir + "/user_keys", atomically: true, encoding: .utf8)
            chmod(dir + "/user_keys", 0o644)
            fingerprints = try ["host_ecdsa384", "host_ecdsa521", "host_dsa", "cert_ed25519", "cert_ecdsa", "cert_rsa"].map {
                let line = try TestServer.run("/usr/bin/ssh-keygen", ["-lf", dir + "/\($0).pub"])
                return String(line.split(separator: " ")[1])
            }
        }

        static let passphrase = "table passphrase"
        static let userKeys = [("ed25519", "openssh"), ("ecdsa", "openssh"), ("ecdsa", "pem"), ("ecdsa", "pkcs8"),
                               ("rsa", "openssh"), ("rsa", "pem"), ("rsa", "pkcs8")]

        var hostKeyLines: [String] {
            ["HostKey \(dir)/host_ecdsa384", "HostKey \(dir)/host_ecdsa521", "HostKey \(dir)/host_dsa",
             "HostKey \(dir)/cert_ed25519", "HostKey \(dir)/cert_ecdsa", "HostKey \(dir)/cert_rsa",
             "HostCertificate \(dir)/cert_ed25519-cert.pub", "HostCertificate \(dir)/cert_ecdsa-cert.pub",
             "HostCertificate \(dir)/cert_rsa-cert.pub"]
        }
    }

    /// Every row, in the table's order.
    static func rows(extra: ExtraKeys, moduli: String) throws -> [Row] {
        var rows: [Row] = []
        for kex in try query("kex") {
            // libssh 0.10 does not name a group exchange it negotiated
            let unnamed = kex.hasPrefix("diffie-hellman-group-exchange-")
            rows.append(Row(section: "key exchange", label: "`\(kex)`", config: ["KexAlgorithms \(kex)"], named: kex,
                            negotiated: { $0.keyExchange == kex || (unnamed && $0.keyExchange.isEmpty) }))
        }
        for cipher in try query("cipher") {
            rows.append(Row(section: "cipher", label: "`\(cipher)`", config: ["Ciphers \(cipher)"], named: cipher,
                            negotiated: { $0.cipherClientToServer == cipher && $0.cipherServerToClient == cipher }))
        }
        // a MAC is used only beside a cipher that does not authenticate itself
        let plainCiphers = "aes128-ctr,aes192-ctr,aes256-ctr,aes128-cbc,aes192-cbc,aes256-cbc,3des-cbc"
        for mac in try query("mac") {
            rows.append(Row(section: "MAC", label: "`\(mac)`", config: ["Ciphers \(plainCiphers)", "MACs \(mac)"], named: mac,
                            negotiated: { $0.macClientToServer == mac && $0.macServerToClient == mac }))
        }
        // the host key algorithms of the keys a server can hold without a hardware token
        // (and of the certificates made here: ED25519, ECDSA P-256 and RSA)
        let hostKeyAlgorithms = try query("key-sig").filter {
            !$0.hasPrefix("sk-") && !$0.hasPrefix("webauthn-")
                && !["ecdsa-sha2-nistp384-cert-v01@openssh.com", "ecdsa-sha2-nistp521-cert-v01@openssh.com",
                     "ssh-dss-cert-v01@openssh.com"].contains($0)
        }
        for alg in hostKeyAlgorithms {
            var type = alg.replacingOccurrences(of: "-cert-v01@openssh.com", with: "")
            if type.hasPrefix("rsa-sha2-") { type = "ssh-rsa" }
            rows.append(Row(section: "host key", label: "`\(alg)`", config: ["HostKeyAlgorithms \(alg)"] + extra.hostKeyLines,
                            named: alg, negotiated: { [type] in $0.hostKey == type || $0.hostKey == alg }))
        }
        // encrypted user keys, each in a format the client reads
        for (type, format) in ExtraKeys.userKeys {
            let name = ["ed25519": "Ed25519", "ecdsa": "ECDSA P-256", "rsa": "RSA 2048"][type]!
            let how = ["openssh": "OpenSSH's format (bcrypt, aes256-ctr)", "pem": "PEM (`Proc-Type: 4,ENCRYPTED`, AES-128-CBC)",
                       "pkcs8": "PKCS#8 (`ENCRYPTED PRIVATE KEY`, PBES2)"][format]!
            rows.append(Row(section: "user key", label: "\(name), \(how), with a passphrase",
                            config: ["AuthorizedKeysFile \(extra.dir)/user_keys", "AuthenticationMethods publickey"],
                            ownKey: (extra.dir + "/user_\(type)_\(format)", ExtraKeys.passphrase)))
        }
        // features a hardened server may still allow
        rows.append(Row(section: "feature", label: "agent forwarding (`AllowAgentForwarding yes`): `ssh-add -l` on the server",
                        config: ["AllowAgentForwarding yes"], feature: .agentForwarding))
        rows.append(Row(section: "feature", label: "a remote forward of port 0 (`-R`, `AllowTcpForwarding remote`), used from the server",
                        config: ["AllowTcpForwarding remote"], feature: .remoteForward))
        // keyboard-interactive only, through a PAM stack (bound over the server's own
        // /etc/pam.d/sshd in its mount namespace) that asks two questions: the password
        // (pam_unix), then pam_stress's own
        let pam = extra.dir + "/pam-sshd"
        try """
            auth required pam_unix.so
            auth required pam_stress.so
            account required pam_unix.so
            session required pam_unix.so
            """.write(toFile: pam, atomically: true, encoding: .utf8)
        chmod(pam, 0o644)
        rows.append(Row(section: "feature", label: "keyboard-interactive only, PAM asking two questions",
                        config: ["AuthenticationMethods keyboard-interactive", "KbdInteractiveAuthentication yes", "UsePAM yes"],
                        feature: .twoPrompts, mountSetup: "mount --bind \(pam) /etc/pam.d/sshd"))
        // hardening configurations, whole
        rows.append(Row(section: "hardening", label: "Mozilla's OpenSSH guidelines (modern, OpenSSH 6.7+)", config: [
            "KexAlgorithms curve25519-sha256@libssh.org,ecdh-sha2-nistp521,ecdh-sha2-nistp384,ecdh-sha2-nistp256,diffie-hellman-group-exchange-sha256",
            "Ciphers chacha20-poly1305@openssh.com,aes256-gcm@openssh.com,aes128-gcm@openssh.com,aes256-ctr,aes192-ctr,aes128-ctr",
            "MACs hmac-sha2-512-etm@openssh.com,hmac-sha2-256-etm@openssh.com,umac-128-etm@openssh.com,hmac-sha2-512,hmac-sha2-256,umac-128@openssh.com",
            "AuthenticationMethods publickey", "LogLevel VERBOSE",
        ]))
        rows.append(Row(section: "hardening", label: "ssh-audit's Debian 12 server guide", config: [
            "KexAlgorithms sntrup761x25519-sha512@openssh.com,curve25519-sha256,curve25519-sha256@libssh.org,diffie-hellman-group16-sha512,diffie-hellman-group18-sha512,diffie-hellman-group-exchange-sha256",
            "Ciphers chacha20-poly1305@openssh.com,aes256-gcm@openssh.com,aes256-ctr,aes192-ctr,aes128-gcm@openssh.com,aes128-ctr",
            "MACs hmac-sha2-256-etm@openssh.com,hmac-sha2-512-etm@openssh.com,umac-128-etm@openssh.com",
            "HostKeyAlgorithms sk-ssh-ed25519-cert-v01@openssh.com,ssh-ed25519-cert-v01@openssh.com,rsa-sha2-512-cert-v01@openssh.com,rsa-sha2-256-cert-v01@openssh.com,sk-ssh-ed25519@openssh.com,ssh-ed25519,rsa-sha2-512,rsa-sha2-256",
            "CASignatureAlgorithms sk-ssh-ed25519@openssh.com,ssh-ed25519,rsa-sha2-512,rsa-sha2-256",
            "HostbasedAcceptedAlgorithms sk-ssh-ed25519-cert-v01@openssh.com,ssh-ed25519-cert-v01@openssh.com,sk-ssh-ed25519@openssh.com,ssh-ed25519,rsa-sha2-512-cert-v01@openssh.com,rsa-sha2-512,rsa-sha2-256-cert-v01@openssh.com,rsa-sha2-256",
            "PubkeyAcceptedAlgorithms sk-ssh-ed25519-cert-v01@openssh.com,ssh-ed25519-cert-v01@openssh.com,sk-ssh-ed25519@openssh.com,ssh-ed25519,rsa-sha2-512-cert-v01@openssh.com,rsa-sha2-512,rsa-sha2-256-cert-v01@openssh.com,rsa-sha2-256",
            "RequiredRSASize 3072", "ModuliFile \(moduli)",
        ]))
        rows.append(Row(section: "hardening", label: "RSA host key and RSA user key, `ssh-rsa` off", config: [
            "HostKeyAlgorithms rsa-sha2-512,rsa-sha2-256", "PubkeyAcceptedAlgorithms rsa-sha2-512,rsa-sha2-256",
            "AuthenticationMethods publickey",
        ], userKey: "id_rsa", negotiated: { $0.hostKey == "ssh-rsa" }))
        return rows
    }

    /// One cell: connect with `algorithms`, run a command, write a file by SFTP and read it back.
    static func cell(_ server: TestServer, _ row: Row, _ algorithms: SSHAlgorithms, pins: [String],
                     agent: AgentForwardingTests.Agent?) async -> Outcome {
        let asked = PromptLog()
        var auth: SSHAuthentication = row.ownKey.map { .privateKey(path: $0.path, passphrase: $0.passphrase) }
            ?? .privateKey(path: server.key(row.userKey))
        if case .twoPrompts = row.feature {
            let password = server.password
            auth = .keyboardInteractive { challenge in
                await asked.add(challenge.prompts.map(\.text))
                return challenge.prompts.map { _ in password }
            }
        }
        var config = server.configuration(auth, policy: .pinned(pins))
        config.algorithms = algorithms
        if case .agentForwarding = row.feature { config.agentForwarding = agent?.socket }
        let conn: SSHConnection
        do {
            conn = try await SSHClient.connect(config)
        } catch {
            if let named = row.named {
                #expect("\(error)".contains(named), "\(row.label): the error does not name what the server offered: \(error)")
            }
            return .fails(error.code)
        }
        defer { Task { await conn.close() } }
        if let check = row.negotiated, !check(conn.negotiatedAlgorithms) {
            Issue.record("\(row.label): negotiated \(conn.negotiatedAlgorithms)")
        }
        do {
            guard try await conn.execute("echo ok").stdoutString == "ok\n" else { return .broken("the command's output") }
            let sftp = try await conn.openSFTP()
            let bytes = (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let path = SFTPPath("/tmp/sshkit-table-\(UInt32.random(in: 0...UInt32.max))")
            try await sftp.write(bytes, to: path)
            let back = try await sftp.contentsOfFile(path)
            try? await sftp.removeFile(at: path)
            sftp.close()
            guard back == bytes else { return .broken("SFTP gave other bytes back") }
            switch row.feature {
            case nil:
                return .works
            case .agentForwarding:
                let listed = try await conn.execute("ssh-add -l")
                let fingerprint = (try? AgentForwardingTests.fingerprint()) ?? "?"
                return listed.stdoutString.contains(fingerprint) ? .works : .broken("`ssh-add -l`: \(listed.stderrString)")
            case .twoPrompts:
                let prompts = await asked.all
                return prompts.count == 2 ? .works : .broken("\(prompts.count) questions: \(prompts)")
            case .remoteForward:
                let echo = try? EchoServer()
                defer { echo?.stop() }
                guard let echo else { return .broken("no echo server here") }
                let forward = try await conn.forwardRemotePort(port: 0, to: .tcp(host: "127.0.0.1", port: echo.port))
                let p = forward.port
                let through = try await conn.execute("bash -c 'exec 3<>/dev/tcp/127.0.0.1/\(p) && echo ping-\(p) >&3 && head -n 1 <&3'")
                await forward.close()
                return through.stdoutString == "ping-\(forward.port)\n" ? .works : .broken("the forward's port: \(through.stderrString)")
            }
        } catch {
            return .broken("`\(error.code)` after connecting")
        }
    }

    @Test func theGuidesTableIsWhatTheServersGive() async throws {
        let extra = try ExtraKeys()
        defer { try? FileManager.default.removeItem(atPath: extra.dir) }
        // the guide's moduli: 3072 bits and more
        let moduli = extra.dir + "/moduli"
        let safe = try String(contentsOfFile: "/etc/ssh/moduli", encoding: .utf8).split(separator: "\n")
            .filter { line in line.hasPrefix("#") || (line.split(separator: " ").count > 4 && (Int(line.split(separator: " ")[4]) ?? 0) >= 3071) }
        try (safe.joined(separator: "\n") + "\n").write(toFile: moduli, atomically: true, encoding: .utf8)
        chmod(moduli, 0o644)

        let rows = try Self.rows(extra: extra, moduli: moduli)
        let agent = try AgentForwardingTests.Agent()
        defer { agent.stop() }
        var results: [[Outcome]] = []
        // the shared fixture's keys, so that each server does not make its own (seconds each)
        let keys = try FileManager.default.contentsOfDirectory(atPath: TestServer.shared.dir).filter {
            $0.hasPrefix("host_") || $0.hasPrefix("id_") || $0 == "authorized_keys"
        }
        for (i, row) in rows.enumerated() {
            let dir = TestServer.directory(pid: getpid(), name: "table-\(i)")
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            for key in keys { try? FileManager.default.copyItem(atPath: TestServer.shared.dir + "/" + key, toPath: dir + "/" + key) }
            let server = try TestServer.start(name: "table-\(i)", extraConfig: row.config, mountSetup: row.mountSetup)
            defer { server.stop() }
            var line: [Outcome] = []
            for (_, algorithms) in Self.profiles {
                line.append(await Self.cell(server, row, algorithms, pins: server.allFingerprints + extra.fingerprints, agent: agent))
            }
            results.append(line)
        }

        // the presets' promises hold: `.compatible` reaches every row `.modern` does, and
        // both reach the hardening configurations
        for (row, line) in zip(rows, results) {
            if line[1] == .works { #expect(line[2] == .works, "\(row.label): .modern works, .compatible not") }
            if row.section == "hardening" { #expect(line[1] == .works && line[2] == .works, "\(row.label): \(line)") }
            for outcome in line { if case .broken(let why) = outcome { Issue.record("\(row.label): \(why)") } }
        }

        // the user key cells are the passphrase's doing: a wrong one is refused
        let keyed = try TestServer.start(name: "table-wrong-passphrase", extraConfig: ["AuthorizedKeysFile \(extra.dir)/user_keys"])
        defer { keyed.stop() }
        for (type, format) in ExtraKeys.userKeys {
            let config = keyed.configuration(.privateKey(path: extra.dir + "/user_\(type)_\(format)", passphrase: "wrong"))
            do {
                let conn = try await SSHClient.connect(config)
                await conn.close()
                Issue.record("\(type) \(format): a wrong passphrase connected")
            } catch {
                #expect([.authenticationFailed, .invalidArgument].contains(error.code) || "\(error)".contains("passphrase"),
                        "\(type) \(format): \(error)")
            }
        }

        let table = Self.markdown(rows, results, versions: try Self.versions())
        let guide = TestServer.packageRoot + "/Docs/Guide-Algorithms.md"
        let text = try String(contentsOfFile: guide, encoding: .utf8)
        let begin = "<!-- compatibility table: made by CompatibilityTableTests -->\n", end = "<!-- end of the table -->\n"
        let start = try #require(text.range(of: begin), "the guide has no table marker")
        let stop = try #require(text.range(of: end, range: start.upperBound..<text.endIndex))
        let written = String(text[start.upperBound..<stop.lowerBound])
        if ProcessInfo.processInfo.environment["SSHKIT_UPDATE_DOCS"] == "1" {
            try (String(text[..<start.upperBound]) + table + String(text[stop.lowerBound...]))
                .write(toFile: guide, atomically: true, encoding: .utf8)
        } else {
            #expect(written == table, """
                Docs/Guide-Algorithms.md's table differs from what the servers gave; \
                SSHKIT_UPDATE_DOCS=1 swift test --filter CompatibilityTableTests writes it. This run:
                \(table)
                """)
        }
    }

    /// `OpenSSH_9.2p1` and libssh's version, as the table's heading names them.
    static func versions() throws -> (openssh: String, libssh: String) {
        let ssh = try TestServer.runCapturing("/usr/bin/ssh", ["-V"])
        let openssh = (ssh.err + ssh.out).split(separator: ",").first.map { String($0).replacingOccurrences(of: "OpenSSH_", with: "") } ?? "?"
        let libssh = try TestServer.run("/usr/bin/pkg-config", ["--modversion", "libssh"]).trimmingCharacters(in: .whitespacesAndNewlines)
        return (openssh.trimmingCharacters(in: .whitespacesAndNewlines), libssh)
    }

    static func markdown(_ rows: [Row], _ results: [[Outcome]], versions: (openssh: String, libssh: String)) -> String {
        var out = "Made by the test suite against OpenSSH \(versions.openssh) with libssh \(versions.libssh): one server per row, "
            + "each cell a connection with that profile, a command and a file moved by SFTP. ✓: all three worked; "
            + "✗: the error the connection failed with.\n"
        var section = ""
        for (row, line) in zip(rows, results) {
            if row.section != section {
                section = row.section
                let heading = switch section {
                case "hardening": "the server's configuration"
                case "user key": "the user's key (the server takes only keys)"
                case "feature": "beside the command and SFTP"
                default: "the server offers only this \(section)"
                }
                out += "\n| \(heading) | " + profiles.map(\.name).joined(separator: " | ") + " |\n"
                out += "|---|" + String(repeating: "---|", count: profiles.count) + "\n"
            }
            out += "| \(row.label) | " + line.map(\.cell).joined(separator: " | ") + " |\n"
        }
        return out
    }

    /// What ssh-audit (Debian's package) fails in a client's offer: it listens in a network
    /// namespace of the test's own (it binds every address), the profile connects to it, and
    /// its report's `[fail]` lines are read: (algorithm, reason) each.
    static func audit(_ algorithms: SSHAlgorithms, in ns: NetworkNamespace, port: Int) async throws -> [(String, String)] {
        let dir = try TestPaths.makeTemporaryDirectory("ssh-audit")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let report = dir + "/report.txt"
        let daemon = try Daemon.spawn("/usr/sbin/ip", ["netns", "exec", ns.name, "/usr/bin/ssh-audit", "-c", "-n",
                                                         "-p", "\(port)", "-t", "20"], log: report)
        defer { daemon.stop() }
        // listening (a probe would be audited in the client's place)
        var listening = false
        for _ in 0..<200 where !listening {
            listening = ((try? ns.exec(["/usr/bin/ss", "-ltnH"])) ?? "").contains(":\(port) ")
            if !listening { usleep(25_000) }
        }
        try #require(listening, "ssh-audit did not listen: \((try? String(contentsOfFile: report, encoding: .utf8)) ?? "")")
        var config = SSHConfiguration(host: ns.address, port: port, user: "audit", authentication: .password("audit"),
                                      hostKeyPolicy: .insecureAcceptAnyHostKey, connectTimeout: .seconds(10))
        config.algorithms = algorithms
        // ssh-audit reads the client's offer and hangs up: the connection fails
        _ = try? await SSHClient.connect(config)
        let ended = await eventually(30) { daemon.isRunning ? nil : true }
        #expect(ended == true, "ssh-audit did not end after the client's offer")
        let text = try String(contentsOfFile: report, encoding: .utf8)
        #expect(text.contains("# key exchange algorithms"), "no report: \(text)")
        var fails: [(String, String)] = []
        var current = ""
        for line in text.split(separator: "\n").map(String.init) {
            if line.hasPrefix("("), let close = line.firstIndex(of: ")") {
                current = String(line[line.index(after: close)...].split(separator: " ").first ?? "")
            }
            if let mark = line.range(of: "[fail] ") {
                fails.append((current, String(line[mark.upperBound...]).trimmingCharacters(in: .whitespaces)))
            }
        }
        return fails
    }

    /// An outside audit of the client: `.modern` gets no failure from ssh-audit; what
    /// `.compatible` gets is in the guide, each algorithm with the reason it stays.
    @Test func sshAuditFailsNothingOfTheModernProfile() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/ssh-audit"), "scripts/install-deps.sh installs ssh-audit")
        try #require(NetworkNamespace.available, "network namespaces are needed (root)")
        let ns = try NetworkNamespace.create()
        defer { ns.destroy() }
        let modern = try await Self.audit(.modern, in: ns, port: 2222)
        #expect(modern.isEmpty, "ssh-audit fails these of .modern: \(modern)")
        let compatible = try await Self.audit(.compatible, in: ns, port: 2223)
        #expect(!compatible.isEmpty, "ssh-audit failed nothing of .compatible: is the report read?")
        var seen = Set<String>()
        var block = "| what `.compatible` offers | ssh-audit says |\n|---|---|\n"
        for (alg, reason) in compatible where seen.insert(alg + reason).inserted {
            block += "| `\(alg)` | \(reason) |\n"
        }
        let guide = TestServer.packageRoot + "/Docs/Guide-Algorithms.md"
        let text = try String(contentsOfFile: guide, encoding: .utf8)
        let begin = "<!-- ssh-audit: made by CompatibilityTableTests -->\n", end = "<!-- end of the audit -->\n"
        let start = try #require(text.range(of: begin), "the guide has no audit marker")
        let stop = try #require(text.range(of: end, range: start.upperBound..<text.endIndex))
        if ProcessInfo.processInfo.environment["SSHKIT_UPDATE_DOCS"] == "1" {
            try (String(text[..<start.upperBound]) + block + String(text[stop.lowerBound...])).write(toFile: guide, atomically: true, encoding: .utf8)
        } else {
            #expect(String(text[start.upperBound..<stop.lowerBound]) == block, """
                Docs/Guide-Algorithms.md's audit differs from ssh-audit's; SSHKIT_UPDATE_DOCS=1 writes it. This run:
                \(block)
                """)
        }
    }
}
