import Foundation
import SSHKit
@testable import ServerTransport
import Testing

/// What only the OpenSSH transport promises: its control directory, multiplexing over
/// one master, and failures read from `ssh`'s stderr.
@Suite("OpenSSH transport", .tags(.integration), .serialized)
struct OpenSSHTransportTests {
    @Test func theControlDirectoryMustBePrivateAndStaleSocketsAreSwept() throws {
        let base = try TestPaths.makeTemporaryDirectory("cmdir")
        defer { try? FileManager.default.removeItem(atPath: base) }
        func make(_ dir: String) throws(TransportError) -> OpenSSHTransport {
            try OpenSSHTransport(destination: "127.0.0.1", options: .init(controlDirectory: dir))
        }
        // missing: created 0700
        _ = try make(base + "/new")
        var st = stat()
        #expect(lstat(base + "/new", &st) == 0 && st.st_mode & 0o777 == 0o700)
        // open to others
        mkdir(base + "/open", 0o755)
        chmod(base + "/open", 0o755)
        #expect(throws: TransportError.self) { try make(base + "/open") }
        // a symlink to a private directory
        symlink(base + "/new", base + "/link")
        #expect(throws: TransportError.self) { try make(base + "/link") }
        // somebody else's
        mkdir(base + "/theirs", 0o700)
        chown(base + "/theirs", 65534, 65534)
        do {
            _ = try make(base + "/theirs")
            Issue.record("accepted a directory owned by nobody")
        } catch {
            #expect(error.message.contains("owned by uid 65534"), "\(error)")
        }
        // a socket nobody listens on goes, one with a listener stays
        let dir = base + "/new"
        let stale = try listenOnUnixSocket(dir + "/stale")
        close(stale)
        let live = try listenOnUnixSocket(dir + "/live")
        defer { close(live) }
        try "not a socket".write(toFile: dir + "/notes", atomically: true, encoding: .utf8)
        _ = try make(dir)
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: dir)) == ["live", "notes"])
    }

    @Test func callsShareOneMasterConnectionEvenAfterTheFirstCallTimedOut() async throws {
        let server = try TestServer.start(name: "openssh-mux")
        defer { server.stop() }
        let t = try TransportContractTests.openSSH(server)
        defer { try? FileManager.default.removeItem(atPath: t.controlDirectory) }
        // the first call starts the master, and is then stopped by its timeout: TERM
        // and KILL go to its process group, which the detached master has left
        do {
            _ = try await t.runProcess("/bin/sh", arguments: ["-c", "echo first; sleep 37.75"], stdin: [],
                                       environment: [:], timeout: .seconds(1))
            Issue.record("no timeout")
        } catch {
            #expect(error.code == .timedOut && error.partialStdout == Array("first\n".utf8), "\(error)")
        }
        for i in 0..<10 {
            #expect(try await t.runProcess("/bin/echo", "\(i)").stdoutString == "\(i)\n")
        }
        try await t.writeTextFile("~/mux.txt", "one connection")
        #expect(try await t.readTextFile("~/mux.txt") == "one connection")
        #expect(server.sessionProcesses().count == 1, "\(server.sessionProcesses())")
        #expect(try FileManager.default.contentsOfDirectory(atPath: t.controlDirectory).contains { $0.count == 40 })
        try await t.removeFile("~/mux.txt")
        await t.close()
        // the master is gone with its socket
        #expect(try FileManager.default.contentsOfDirectory(atPath: t.controlDirectory).allSatisfy { $0.count != 40 })
        _ = try? TestServer.run("/usr/bin/pkill", ["-f", "^sleep 37\\.75$"], allowFailure: true)
    }

    /// With no secret patterns (or empty ones) nothing is a secret, and writes still work
    /// (the remote script once had an empty `case` pattern, a syntax error).
    @Test func noSecretPatternsMeansPlainWrites() async throws {
        var none = SecretFiles()
        none.patterns = ["", ""]
        let t = try TransportContractTests.openSSH(TestServer.shared, secrets: none)
        let name = "~/plain-\(UInt32.random(in: 0...UInt32.max)).env"
        try await t.writeTextFile(name, "KEY=1")
        #expect(try await t.readTextFile(name) == "KEY=1")
        #expect(try await t.stat(name).permissions == 0o644)
        try await t.removeFile(name)
        await t.close()
        try? FileManager.default.removeItem(atPath: t.controlDirectory)
    }

    /// ssh's own messages (OpenSSH 9.2), and a command's messages that only look alike.
    @Test func stderrClassification() {
        let cases: [(String, TransportError.Code?)] = [
            ("ssh: Could not resolve hostname nowhere: Name or service not known", .hostUnreachable),
            ("ssh: connect to host 127.0.0.1 port 1: Connection refused", .hostUnreachable),
            ("Connection to 127.0.0.1 closed by remote host.", .hostUnreachable),
            ("client_loop: send disconnect: Broken pipe", .hostUnreachable),
            ("mux_client_request_session: session request failed: Session open refused by peer", .other),
            ("user@127.0.0.1: Permission denied (publickey,password).", .authenticationFailed),
            ("Host key verification failed.", .hostKeyRejected),
            ("grep: pattern: No such file or directory", nil),
        ]
        for (stderr, code) in cases {
            #expect(OpenSSHTransport.classify(stderr)?.code == code, "\(stderr)")
        }
        // a refused session says so, not that the host is down
        #expect(OpenSSHTransport.classify(cases[4].0)?.message.contains("MaxSessions") == true)
    }

    @Test func sshFailuresAreClassifiedFromItsStderr() async throws {
        let server = TestServer.shared
        // a known_hosts entry with another key for this host and port
        let dir = try TestPaths.makeTemporaryDirectory("cm-keys")
        chmod(dir, 0o700)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let other = try String(contentsOfFile: server.key("id_unauthorized.pub"), encoding: .utf8)
            .split(separator: " ").prefix(2).joined(separator: " ")
        try "[\(server.host)]:\(server.port) \(other)\n".write(toFile: dir + "/known_hosts", atomically: true, encoding: .utf8)
        let mismatch = try OpenSSHTransport(destination: server.host, options: .init(
            user: server.user, port: server.port, identityFile: server.key("id_ed25519"),
            knownHostsFile: dir + "/known_hosts", configFile: "/dev/null", controlDirectory: dir))
        do {
            _ = try await mismatch.runProcess("/bin/true")
            Issue.record("connected despite a changed host key")
        } catch {
            #expect(error.code == .hostKeyRejected, "\(error)")
        }
        // a key the server does not take
        let badAuth = try OpenSSHTransport(destination: server.host, options: .init(
            user: server.user, port: server.port, identityFile: server.key("id_unauthorized"),
            knownHostsFile: dir + "/known_hosts2", configFile: "/dev/null", controlDirectory: dir))
        do {
            _ = try await badAuth.readFile("~/x")
            Issue.record("authenticated with an unauthorized key")
        } catch {
            #expect(error.code == .authenticationFailed, "\(error)")
        }
        // nobody listening
        let gone = try TestServer.start(name: "openssh-gone")
        gone.stop()
        let refused = try OpenSSHTransport(destination: gone.host, options: .init(
            user: gone.user, port: gone.port, identityFile: gone.key("id_ed25519"),
            knownHostsFile: dir + "/known_hosts3", configFile: "/dev/null", controlDirectory: dir))
        do {
            _ = try await refused.stat("/")
            Issue.record("reached a stopped server")
        } catch {
            #expect(error.code == .hostUnreachable, "\(error)")
        }
        // a remote command that exits 255 is a result, not an ssh failure
        let ok = try TransportContractTests.openSSH(server)
        defer { try? FileManager.default.removeItem(atPath: ok.controlDirectory) }
        let r = try await ok.runProcess("/bin/sh", "-c", "echo 'not ssh' >&2; exit 255")
        #expect(r.exitStatus == .exited(255) && r.stderrString == "not ssh\n")
        await ok.close()
    }
}

/// A Unix socket listening at `path`.
func listenOnUnixSocket(_ path: String) throws -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    var addr = sockaddr_un()
    addr.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
    let ok = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    } == 0 && listen(fd, 4) == 0
    guard ok else {
        close(fd)
        throw FixtureError("cannot listen on \(path)")
    }
    return fd
}
