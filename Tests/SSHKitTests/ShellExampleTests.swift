import Foundation
import Testing

/// The ssh-shell example driven like a person would: inside tmux (a real terminal),
/// with keys sent by `tmux send-keys` and the screen read by `capture-pane`.
@Suite("ssh-shell example", .serialized)
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
        let shell = [Self.binary, "--host", server.host, "--port", "\(server.port)", "--user", server.user,
                     "--key", server.key("id_ed25519"), "--fingerprint", server.fingerprintEd25519,
                     "--fingerprint", server.fingerprintECDSA, "--fingerprint", server.fingerprintRSA]
            .map { "'\($0)'" }.joined(separator: " ")
        // after ssh-shell: its exit status and the local terminal's settings, for the checks below
        let script = "\(shell); echo status=$? > \(dir)/status; stty -a > \(dir)/stty; sleep 30"
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
}
