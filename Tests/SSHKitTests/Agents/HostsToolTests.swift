import AgentSessions
import Foundation
import SSHKit
import Testing

/// Hosts as ssh knows them: added by their name in an OpenSSH configuration (with
/// Include, Match and ProxyJump), credentials asked as ssh asks them, `hosts doctor`
/// and `agents install`, from the command line as a user runs them.
@Suite("agent-sessions: hosts from ssh config", .tags(.process), .serialized)
struct HostsToolTests {
    typealias User = AgentSessionsToolTests.User

    /// An ssh configuration in the user's temporary home; `lines` after the fixture's own
    /// entries. Its known_hosts file starts empty.
    func writeConfig(_ u: User, _ lines: [String], name: String = "ssh_config") throws -> String {
        let server = u.server
        let path = u.home + "/" + name
        try FileManager.default.createDirectory(atPath: u.home + "/ssh_config.d", withIntermediateDirectories: true)
        // reached through an Include, and its user and key only through a Match
        try """
            Host m-target m-old
              HostName 127.0.0.1
              Port \(server.port)
            Match originalhost m-target,m-old
              User \(server.user)
              IdentityFile \(server.key("id_ed25519"))
            """.write(toFile: u.home + "/ssh_config.d/more.conf", atomically: true, encoding: .utf8)
        let text = ([
            "Host *",
            "  IdentitiesOnly yes",
            "  UserKnownHostsFile \(u.home)/known_hosts_ssh",
            "  GlobalKnownHostsFile /dev/null",
            "Include \(u.home)/ssh_config.d/*.conf",
            "Host fixture-alias",
            "  HostName 127.0.0.1",
            "  Port \(server.port)",
            "  User \(server.user)",
            "  IdentityFile \(server.key("id_ed25519"))",
        ] + lines).joined(separator: "\n") + "\n"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func aHostAddedByItsSSHNameFollowsTheConfiguration() async throws {
        let u = try User()
        let repo = try await WorktreeTests.makeRepository(u.host)
        defer { Task { await u.tearDown([repo]) } }
        let config = try writeConfig(u, [
            "Host dead", "  HostName 127.0.0.1", "  Port 1", "  User \(u.server.user)",
            "  IdentityFile \(u.server.key("id_ed25519"))",
            "Host badname", "  HostName sshkit-nothing.invalid", "  User \(u.server.user)",
            "Host needs-exec", "  HostName 127.0.0.1",
            "Match originalhost needs-exec exec \"true\"", "  Port \(u.server.port)", "  User \(u.server.user)",
            "  IdentityFile \(u.server.key("id_ed25519"))",
        ])
        let added = try u.ok(["hosts", "add", "fixture-alias", "-F", config, "--tmux-socket", u.socket])
        #expect(added.contains("recorded the host key of [127.0.0.1]:\(u.server.port) in \(u.home)/known_hosts_ssh"), "\(added)")
        #expect(added.contains("added host fixture-alias: ssh fixture-alias -F \(config)"), "\(added)")
        let record = try #require(try await u.store().hosts().first)
        #expect(record.openSSH == OpenSSHHostReference(alias: "fixture-alias", configFile: config))
        #expect(record.authentication == .openSSH && record.user.isEmpty && record.port == 0, "the alias, not what it resolved to")
        try u.ok(["projects", "add", "fixture-alias", repo, "--name", "app"])
        #expect(try u.ok(["hosts", "list"]).contains("ok ("))

        // the configuration changed: the next connect follows it, the store untouched
        let original = try String(contentsOfFile: config, encoding: .utf8)
        try original.replacingOccurrences(of: "  Port \(u.server.port)\n  User", with: "  Port 1\n  User")
            .write(toFile: config, atomically: true, encoding: .utf8)
        let moved = try u.fails(["hosts", "test", "fixture-alias"], 4)
        #expect(moved.contains("127.0.0.1") || moved.contains("refused"), "\(moved)")
        try original.write(toFile: config, atomically: true, encoding: .utf8)
        #expect(try u.ok(["hosts", "test", "fixture-alias"]).contains("tmux 3"))
        #expect(try await u.store().hosts() == [record])

        // a name that resolves to nothing reachable: exit 4, nothing stored
        try u.fails(["hosts", "add", "dead", "-F", config], 4)
        // a name that is neither a Host of the configuration nor in DNS is looked up before
        // credentials are chosen, as ssh does: said so, naming the files read, exit 4
        let unknown = try u.fails(["hosts", "add", "sshkit-nosuchalias", "-F", config], 4)
        #expect(unknown.contains("sshkit-nosuchalias is not a Host of the ssh configuration (read: \(config))")
                    && unknown.contains("does not resolve as a host name") && !unknown.contains("authentication"), "\(unknown)")
        let plain = try u.fails(["hosts", "add", "sshkit-nosuchalias"], 4)
        #expect(plain.contains(".ssh/config") && plain.contains("/etc/ssh/ssh_config") && plain.contains("does not resolve"), "\(plain)")
        // a Host whose HostName does not resolve: that name is given
        let badName = try u.fails(["hosts", "add", "badname", "-F", config], 4)
        #expect(badName.contains("badname: its host name sshkit-nothing.invalid") && badName.contains("does not resolve"), "\(badName)")
        #expect(try await u.store().hosts() == [record], "nothing stored")
        // Match exec is refused unless allowed, as the library refuses it
        let exec = try u.fails(["hosts", "add", "needs-exec", "-F", config], 64)
        #expect(exec.contains("exec"), "\(exec)")
        try u.ok(["hosts", "add", "needs-exec", "-F", config, "--allow-match-exec", "--tmux-socket", u.socket])
        // an explicit setting wins: a pinned fingerprint that is not the server's
        try u.fails(["hosts", "add", "pinned", "fixture-alias", "-F", config,
                     "--fingerprint", "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"], 4)
        try u.fails(["hosts", "add", "both", "me@10.0.0.1", "-F", config], 64)

        // import: the names a pattern matches, through the Include and the Match
        let imported = try u.ok(["hosts", "import", "m-*,!m-old", "-F", config, "--tmux-socket", u.socket])
        #expect(imported.contains("added host m-target") && !imported.contains("m-old"), "\(imported)")
        #expect(imported.contains("1 host added"), "\(imported)")
        let again = try u.ok(["hosts", "import", "m-target,fixture-alias", "-F", config])
        #expect(again.contains("m-target: in the store already") && again.contains("0 hosts added"), "\(again)")
        let none = try u.fails(["hosts", "import", "gpu-*", "-F", config], 2)
        #expect(none.contains("no Host in \(config) matches gpu-*"), "\(none)")
        #expect(try await u.store().hosts().map(\.name).sorted() == ["fixture-alias", "m-target", "needs-exec"])
    }

    @Test func aHostBehindAJumpHostOfTheConfiguration() async throws {
        let u = try User()
        let jump = try TestServer.start(name: "jump-\(UUID().uuidString.prefix(6))")
        defer {
            jump.stop()
            Task { await u.tearDown() }
        }
        // the target's own sshd is reached from the jump host's side (both on loopback)
        let config = try writeConfig(u, [
            "Host jumpbox", "  HostName 127.0.0.1", "  Port \(jump.port)", "  User \(jump.user)",
            "  IdentityFile \(jump.key("id_ed25519"))",
            "Host behind", "  HostName 127.0.0.1", "  Port \(u.server.port)", "  User \(u.server.user)",
            "  IdentityFile \(u.server.key("id_ed25519"))", "  ProxyJump jumpbox",
        ])
        let added = try u.ok(["hosts", "add", "behind", "-F", config, "--tmux-socket", u.socket])
        #expect(added.contains("[127.0.0.1]:\(jump.port)"), "the jump host's key is recorded too: \(added)")
        #expect(try u.ok(["hosts", "test", "behind"]).contains("tmux 3"))
        // without the jump host the host cannot be reached: the path goes through it
        jump.stop()
        try u.fails(["hosts", "test", "behind"], 4)
    }

    @Test func aKeysPassphraseIsAskedThroughAskpassAndNeverWithBatchMode() async throws {
        let u = try User()
        defer { Task { await u.tearDown() } }
        let config = try writeConfig(u, [
            "Host locked", "  HostName 127.0.0.1", "  Port \(u.server.port)", "  User \(u.server.user)",
            "  IdentityFile \(u.server.key("id_ed25519_pass"))",
            "  KbdInteractiveAuthentication no", "  PasswordAuthentication no",
        ])
        func askpass(_ answer: String) throws -> [String: String] {
            let path = u.home + "/askpass-\(UUID().uuidString.prefix(6))"
            try "#!/bin/sh\nprintf '%s\\n' \"$1\" >> \(u.home)/askpass.log\nprintf '%s\\n' '\(answer)'\n"
                .write(toFile: path, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
            return ["SSH_ASKPASS": path, "SSH_ASKPASS_REQUIRE": "force"]
        }
        var log: String { (try? String(contentsOfFile: u.home + "/askpass.log", encoding: .utf8)) ?? "" }
        // wrong every time: asked three times, then refused (exit 4), nothing stored
        let wrong = try u.run(["hosts", "add", "locked", "-F", config], env: try askpass("wrong"))
        #expect(wrong.status == 4, "\(wrong)")
        #expect(log.components(separatedBy: "passphrase").count - 1 == 3, "\(log)")
        #expect(log.contains("Bad passphrase, try again for \(u.server.key("id_ed25519_pass"))"), "\(log)")
        // BatchMode: nobody is asked
        try? FileManager.default.removeItem(atPath: u.home + "/askpass.log")
        let batch = try u.run(["hosts", "add", "locked", "-F", config, "-o", "BatchMode=yes"], env: try askpass(u.server.passphrase))
        #expect(batch.status == 4 && log.isEmpty, "\(batch) \(log)")
        // the right one: asked once
        let right = try u.run(["hosts", "add", "locked", "-F", config, "--tmux-socket", u.socket], env: try askpass(u.server.passphrase))
        #expect(right.status == 0, "\(right)")
        #expect(log == "Enter passphrase for key '\(u.server.key("id_ed25519_pass"))': \n", "\(log)")
        #expect(try await u.store().hosts().map(\.name) == ["locked"])
    }

    @Test func doctorSaysWhatAHostNeedsAndHowToFixIt() async throws {
        let u = try User()
        let bare = try AgentHostTests.serverWithoutTmux()
        let secrets = ".local/share/amp/secrets.json"
        defer {
            bare.stop()
            Task {
                _ = try? await u.transport.runProcess("/bin/rm", "-f", "\(try await u.host.home())/\(secrets)")
                await u.tearDown()
            }
        }
        try u.addHost()
        let good = try u.ok(["hosts", "doctor", "fixture"])
        for line in ["ok    tmux", "ok    git", "ok    login shell", "ok    login PATH", "ok    clock", "ok    disk ~/"] {
            #expect(good.contains(line), "\(line): \(good)")
        }
        // amp (a stand-in on the search path) has no login yet: a warning with its fix
        #expect(good.contains("warn  agent amp") && good.contains("AMP_API_KEY"), "\(good)")
        let home = try await u.host.home()
        _ = try await u.transport.runProcess("/bin/sh", "-c", "mkdir -p \"$1\" && : > \"$1/secrets.json\"", "sh",
                                             "\(home)/.local/share/amp")
        let json = try u.ok(["hosts", "doctor", "fixture", "--json"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let findings = try #require(object["findings"] as? [[String: Any]])
        let amp = findings.first { $0["subject"] as? String == "agent amp" }
        #expect(amp?["level"] as? String == "ok" && (amp?["detail"] as? String)?.contains(secrets) == true, "\(json)")

        // a host without tmux: a problem, its fix, exit 1
        try u.ok(["hosts", "add", "bare", "\(bare.user)@\(bare.host):\(bare.port)", "--key", bare.key("id_ed25519")])
        let r = try u.run(["hosts", "doctor", "bare"])
        #expect(r.status == 1, "\(r)")
        #expect(r.out.contains("FAIL  tmux") && r.out.contains("fix: install tmux"), "\(r.out)")
    }

    @Test func installingAnAgentFromPyPIAndStartingATaskWithIt() async throws {
        let u = try User()
        let repo = try await WorktreeTests.makeRepository(u.host)
        let home = try await u.host.home()
        let venv = "\(home)/.local/share/agent-sessions/venvs/hermes", link = "\(home)/.local/bin/hermes"
        defer { Task { await u.tearDown([repo, venv, link]) } }
        try u.addHost()
        try u.ok(["projects", "add", "fixture", repo, "--name", "app"])
        // bad input first: an unknown agent, one without an install command, and a
        // script piped into a shell with nobody to confirm it (even with --yes)
        try u.fails(["agents", "install", "nope", "--host", "fixture"], 64)
        try u.fails(["agents", "install", "rovo", "--host", "fixture", "--yes"], 64)
        let piped = try u.run(["agents", "install", "claude", "--host", "fixture", "--yes"])
        #expect(piped.status == 3 && piped.err.contains("confirmed at a terminal"), "\(piped)")
        try u.fails(["agents", "install", "hermes", "--host", "fixture"], 3) // nobody to ask, no --yes

        let r = try u.run(["agents", "install", "hermes", "--host", "fixture", "--yes"], timeout: 300)
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.contains("installed Hermes Agent on fixture: \(link)"), "\(r.out)")
        #expect(try u.ok(["agents", "fixture"]).contains(link), "detection is refreshed")
        // a task with it: the installed agent runs in the task's tmux session
        try u.ok(["tasks", "new", "app", "With hermes", "--agent", "hermes"])
        let task = try #require(try await u.store().tasks(projectID: nil).first)
        let conversation = try #require(try await u.store().conversations(taskID: task.id).first)
        let screen = await eventually(60) { () async -> String? in
            let s = (try? await u.transport.runProcess("tmux", "-L", u.socket, "capture-pane", "-p", "-t",
                                                       conversation.ptyID.description).stdoutString) ?? ""
            return s.localizedCaseInsensitiveContains("hermes") ? s : nil
        }
        #expect(screen != nil, "hermes's screen in the task's session")
    }
}
