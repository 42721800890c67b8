import Foundation
import SSHKit
import Testing

/// The ssh-forward example run as a process: -L, -D and -R at once against the fixture
/// sshd, exercised by real clients (a TCP client, curl through the SOCKS proxy, curl on
/// the server), then stopped with SIGTERM.
@Suite("ssh-forward example", .tags(.process), .serialized)
struct ForwardExampleTests {
    let server = TestServer.shared

    static var binary: String { TestServer.packageRoot + "/.build/debug/ssh-forward" }

    /// A running ssh-forward and the lines it printed up to "ready".
    final class Running: @unchecked Sendable {
        let process = Process()
        let out = Pipe()
        let err = Pipe()
        var lines: [String] = []

        init(_ args: [String], environment: [String: String] = [:]) throws {
            process.executableURL = URL(fileURLWithPath: ForwardExampleTests.binary)
            process.arguments = args
            if !environment.isEmpty {
                process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            }
            process.standardOutput = out
            process.standardError = err
            try process.run()
            // read stdout until "ready" (bounded)
            let fd = out.fileHandleForReading.fileDescriptor
            var buffer: [UInt8] = []
            let deadline = ContinuousClock.now + .seconds(30)
            var chunk = [UInt8](repeating: 0, count: 4096)
            while ContinuousClock.now < deadline && !lines.contains("ready") {
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&p, 1, 200) >= 0 else { break }
                if p.revents == 0 { if !process.isRunning { break } else { continue } }
                let n = read(fd, &chunk, chunk.count)
                if n <= 0 { break }
                buffer += chunk[0..<n]
                lines = String(decoding: buffer, as: UTF8.self).split(separator: "\n").map(String.init)
            }
        }

        /// The port of the first line starting with `prefix` ("local 127.0.0.1:PORT -> ...").
        func port(_ prefix: String) -> Int? {
            guard let line = lines.first(where: { $0.hasPrefix(prefix) }) else { return nil }
            let address = line.split(separator: " ")[1]
            return address.split(separator: ":").last.flatMap { Int($0) }
        }

        /// SIGTERM, then a bounded wait for the exit status.
        func terminate() -> Int32? {
            process.terminate()
            let deadline = ContinuousClock.now + .seconds(15)
            while process.isRunning && ContinuousClock.now < deadline { usleep(20_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL); return nil }
            return process.terminationStatus
        }

        var stderr: String { String(decoding: err.fileHandleForReading.availableData, as: UTF8.self) }
    }

    @Test func localDynamicAndRemoteForwardsWorkTogetherAndSIGTERMStopsThem() async throws {
        #expect(FileManager.default.isExecutableFile(atPath: Self.binary), "build the package first (swift build)")
        let echo = try EchoServer()
        defer { echo.stop() }
        let body = ForwardTests.randomBytes(300_000)
        let http = try TinyHTTPServer(body: body)
        defer { http.stop() }
        let setup = try ToolSetup(server)
        defer { setup.remove() }
        let run = try Running([
            "-F", setup.config, "-N", "-v",
            "-L", "0:127.0.0.1:\(echo.port)", "-D", "127.0.0.1:0", "-R", "0:127.0.0.1:\(http.port)", "fixture",
        ])
        #expect(run.lines.contains("ready"), "\(run.lines)")
        let localPort = try #require(run.port("local "))
        let socksPort = try #require(run.port("socks "))
        let remotePort = try #require(run.port("remote "))

        // -L: a TCP client through to the echo server
        let fd = SocketClient.connect(port: localPort)
        let data = ForwardTests.randomBytes(500_000)
        #expect(await SocketClient.exchange(fd, send: data).received == data)

        // -D: curl through the SOCKS proxy to the HTTP server
        let dir = try TestPaths.makeTemporaryDirectory("fwd-example")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try TestServer.runCapturing("/usr/bin/curl", [
            "-sS", "--max-time", "30", "--socks5-hostname", "127.0.0.1:\(socksPort)", "-o", dir + "/body",
            "http://127.0.0.1:\(http.port)/"])
        #expect(r.status == 0, "\(r.err)")
        #expect(FileManager.default.contents(atPath: dir + "/body").map { Array($0) == body } == true)

        // -R: curl on the server reaches the HTTP server here
        try await SSHClient.withConnection(server.configuration()) { conn in
            let remote = try await conn.execute("curl -sS --max-time 30 http://127.0.0.1:\(remotePort)/ | wc -c")
            #expect(remote.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines) == "\(body.count)", "\(remote.stderrString)")
        }

        #expect(run.terminate() == 0)
        #expect(run.stderr.contains("open"), "verbose events")
        #expect(SocketClient.connect(port: localPort) < 0) // its listeners are gone
    }

    @Test func badSpecsAndAFailedConnectionExitNonZero() throws {
        let setup = try ToolSetup(server)
        defer { setup.remove() }
        for bad in [["-L", "nonsense"], ["-L", "80:host"], ["-D", "x"], ["-R", "a:b:c:d:e"], []] {
            let r = try ToolSetup.run("ssh-forward", ["-F", setup.config] + bad + ["fixture"])
            #expect(r.status != 0 && r.status != 255, "\(bad): \(r)")
            #expect(bad.isEmpty || r.err.contains("forwarding specification"), "\(r.err)")
        }
        let refused = try ToolSetup.run("ssh-forward", ["-F", setup.config, "-p", "1", "-D", "0", "fixture"])
        #expect(refused.status == 255)
        #expect(refused.err.contains("connectionRefused"))
    }

    /// The host's LocalForward and DynamicForward lines from ssh_config, after the
    /// command line's; a forward that cannot listen is a warning, or the end under
    /// ExitOnForwardFailure yes.
    @Test func forwardsFromTheConfigurationAndExitOnForwardFailure() async throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        // a port that is taken: the second listener on it fails
        let taken = try EchoServer()
        defer { taken.stop() }
        let socketPath = "/tmp/sshkit-fwd-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        defer { unlink(socketPath) }
        let setup = try ToolSetup(server, extra: ["LocalForward \(socketPath) 127.0.0.1:\(echo.port)",
                                                  "LocalForward 127.0.0.1:\(taken.port) 127.0.0.1:\(echo.port)"])
        defer { setup.remove() }
        let run = try Running(["-F", setup.config, "-L", "0:127.0.0.1:\(echo.port)", "fixture"],
                              environment: ToolSetup.environment([:]))
        #expect(run.lines.contains("ready"), "\(run.lines)")
        #expect(run.lines.first?.hasPrefix("local 127.0.0.1:") == true, "the command line's first: \(run.lines)")
        #expect(run.lines.contains("local \(socketPath) -> 127.0.0.1:\(echo.port)"), "\(run.lines)")
        #expect(run.stderr.contains("Could not request local forwarding."), "a warning, not the end")
        // the Unix socket from ssh_config reaches the echo server
        let fd = SocketClient.connect(unixSocket: socketPath)
        #expect(fd >= 0)
        let data = ForwardTests.randomBytes(100_000)
        #expect(await SocketClient.exchange(fd, send: data).received == data)
        #expect(run.terminate() == 0)

        let strict = try ToolSetup.run("ssh-forward", ["-F", setup.config, "-o", "ExitOnForwardFailure=yes", "fixture"])
        #expect(strict.status == 255 && strict.err.contains("Could not request local forwarding."), "\(strict)")
        #expect(!strict.out.contains("ready"))
    }
}
