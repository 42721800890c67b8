import Foundation
import Testing

/// The ssh-shell example driven like a person would: inside tmux (a real terminal),
/// with keys sent by `tmux send-keys` and the screen read by `capture-pane`.
@Suite("ssh-shell example", .tags(.process), .serialized)
struct ShellExampleTests {
    let server = TestServer.shared
    static var binary: String { TestServer.packageRoot + "/.build/debug/ssh-shell" }

    /// A tmux server of its own (its own socket), killed at the end.
    struct Tmux {
        /// In the test's own directory, removed with it.
        let socket: String
        let session = "shell"

        func run(_ args: [String]) throws -> String {
            try TestServer.run("/usr/bin/tmux", ["-S", socket] + args)
        }

        func screen() throws -> String { try run(["capture-pane", "-p", "-t", session]) }

        /// Bounded wait until the screen shows `needle`.
        func waitFor(_ needle: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
            var last = ""
            for _ in 0..<100 {
                last = (try? screen()) ?? ""
                if last.contains(needle) { return }
                try await Task.sleep(for: .milliseconds(100))
            }
            Issue.record("the screen never showed \(needle.debugDescription):\n\(last)", sourceLocation: sourceLocation)
        }

        /// Bounded wait until the screen shows `needle` `count` times.
        func waitFor(_ needle: String, count: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws {
            var last = ""
            for _ in 0..<100 {
                last = (try? screen()) ?? ""
                if last.components(separatedBy: needle).count - 1 >= count { return }
                try await Task.sleep(for: .milliseconds(100))
            }
            Issue.record("the screen never showed \(needle.debugDescription) \(count) times:\n\(last)",
                         sourceLocation: sourceLocation)
        }

        /// Starts the session. The tmux server it forks keeps the client's stdout, so
        /// the client is started like the fixture daemons, not through a pipe.
        func start(width: Int, height: Int, command: String, log: String) throws {
            let client = try Daemon.spawn("/usr/bin/tmux", [
                "-S", socket, "new-session", "-d", "-s", session, "-x", "\(width)", "-y", "\(height)", command,
            ], log: log)
            let status = client.wait()
            if status != 0 { throw FixtureError("tmux new-session exited \(status)") }
        }

        func kill() { _ = try? TestServer.runCapturing("/usr/bin/tmux", ["-S", socket, "kill-server"]) }
    }

    @Test func anInteractiveShellInTmuxTypesResizesAndRestoresTheTerminal() async throws {
        #expect(FileManager.default.isExecutableFile(atPath: Self.binary), "build the package first (swift build)")
        let dir = "/tmp/sshkit-tmux-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tmux = Tmux(socket: dir + "/tmux.sock")
        defer { tmux.kill() }
        let setup = try ToolSetup(server)
        defer { setup.remove() }
        let shell = [Self.binary, "-F", setup.config, "fixture"].map { "'\($0)'" }.joined(separator: " ")
        // after ssh-shell: its exit status and the local terminal's settings, for the checks below
        // (the settings first: the status file appearing means both are written)
        let script = "env -u SSH_AUTH_SOCK \(shell); s=$?; stty -a > \(dir)/stty; echo status=$s > \(dir)/status; sleep 30"
        try tmux.start(width: 100, height: 30, command: script, log: dir + "/tmux.log")
        try await tmux.waitFor("$")
        _ = try tmux.run(["send-keys", "-t", tmux.session, "echo typed-$((6*7))", "Enter"])
        try await tmux.waitFor("typed-42")
        _ = try tmux.run(["send-keys", "-t", tmux.session, "stty size", "Enter"])
        try await tmux.waitFor("30 100")
        // a window size change reaches the remote terminal (SIGWINCH forwarded)
        _ = try tmux.run(["resize-window", "-t", tmux.session, "-x", "120", "-y", "40"])
        try await Task.sleep(for: .milliseconds(300))
        _ = try tmux.run(["send-keys", "-t", tmux.session, "clear; stty size", "Enter"])
        try await tmux.waitFor("40 120")
        // Ctrl-C goes to the remote foreground program, not to ssh-shell
        _ = try tmux.run(["send-keys", "-t", tmux.session, "sleep 100", "Enter"])
        try await Task.sleep(for: .milliseconds(300))
        _ = try tmux.run(["send-keys", "-t", tmux.session, "C-c"])
        _ = try tmux.run(["send-keys", "-t", tmux.session, "echo still-$((2+3))", "Enter"])
        try await tmux.waitFor("still-5")
        _ = try tmux.run(["send-keys", "-t", tmux.session, "exit 4", "Enter"])
        var status = ""
        for _ in 0..<100 {
            status = (try? String(contentsOfFile: dir + "/status", encoding: .utf8)) ?? ""
            if !status.isEmpty { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(status == "status=4\n")
        // the local terminal is back in cooked mode with echo
        let stty = (try? String(contentsOfFile: dir + "/stty", encoding: .utf8)) ?? ""
        let flags = Set(stty.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == ";" }).map(String.init))
        #expect(flags.contains("icanon") && flags.contains("echo") && flags.contains("isig"), "\(stty)")
    }

    /// ssh's question for an unknown host key, answered at the terminal: a wrong word
    /// asks again, "no" refuses (nothing recorded), "yes" records the key so that the
    /// next run asks nothing; the password prompt does not echo.
    @Test func theUnknownHostQuestionIsAskedOnTheTerminal() async throws {
        let setup = try ToolSetup(server, key: nil, trusted: false)
        defer { setup.remove() }
        let exec = TestServer.packageRoot + "/.build/debug/ssh-exec"
        let tmux = Tmux(socket: setup.dir + "/tmux.sock")
        defer { tmux.kill() }
        let run = "env -u SSH_AUTH_SOCK -u SSH_ASKPASS '\(exec)' -F '\(setup.config)' fixture 'echo ran-$((40+2))'; echo status=$?"
        try tmux.start(width: 150, height: 30, command: "\(run); \(run); \(run); sleep 30", log: setup.dir + "/tmux.log")
        let fingerprints = server.allFingerprints
        try await tmux.waitFor("(yes/no/[fingerprint])?")
        let screen = try tmux.screen()
        #expect(screen.contains("The authenticity of host '[\(server.host)]:\(server.port)' can't be established."), "\(screen)")
        #expect(fingerprints.contains { screen.contains("key fingerprint is \($0).") }, "\(screen)")
        _ = try tmux.run(["send-keys", "-t", tmux.session, "maybe", "Enter"])
        try await tmux.waitFor("Please type 'yes', 'no' or the fingerprint:")
        _ = try tmux.run(["send-keys", "-t", tmux.session, "no", "Enter"])
        try await tmux.waitFor("status=255")
        #expect(try tmux.screen().contains("Host key verification failed."))
        #expect(setup.knownHostsText.isEmpty)
        // the second run: yes, then the password (not echoed)
        try await tmux.waitFor("(yes/no/[fingerprint])?\n")
        _ = try tmux.run(["send-keys", "-t", tmux.session, "yes", "Enter"])
        try await tmux.waitFor("Warning: Permanently added '[\(server.host)]:\(server.port)'")
        try await tmux.waitFor("Password:")
        _ = try tmux.run(["send-keys", "-t", tmux.session, "-l", server.password])
        _ = try tmux.run(["send-keys", "-t", tmux.session, "Enter"])
        try await tmux.waitFor("ran-42")
        #expect(!(try tmux.screen().contains(server.password)), "the password was echoed")
        #expect(setup.knownHostsText.hasPrefix("[\(server.host)]:\(server.port) "), "\(setup.knownHostsText)")
        // the third run: the key is known now; only the password is asked for
        try await tmux.waitFor("Password:", count: 2)
        let third = try tmux.screen()
        #expect(third.components(separatedBy: "(yes/no/[fingerprint])?").count - 1 == 2, "\(third)")
        _ = try tmux.run(["send-keys", "-t", tmux.session, "-l", server.password])
        _ = try tmux.run(["send-keys", "-t", tmux.session, "Enter"])
        var last = ""
        for _ in 0..<100 {
            last = try tmux.screen()
            // the command's output, then the status line the script prints after ssh-shell exits
            if last.components(separatedBy: "ran-42").count - 1 == 2
                && last.components(separatedBy: "status=0").count - 1 == 2 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(last.components(separatedBy: "status=0").count - 1 == 2, "\(last)")
    }
}
