import Foundation
import SSHKit
import Synchronization
import ServerTransport

/// A real OpenSSH sshd on 127.0.0.1 with a random free port and throwaway keys,
/// prepared by scripts/test-sshd.sh and started (and stopped, by PID) here.
final class TestServer: Sendable {
    let dir: String
    let host: String
    let port: Int
    let user: String
    let password: String
    let passphrase: String
    let fingerprintEd25519: String
    let fingerprintECDSA: String
    let fingerprintRSA: String
    private let daemon: Mutex<Daemon?>
    let pid: Int32

    /// The server shared by the integration tests that do not disturb it.
    static let shared: TestServer = {
        do { return try TestServer.start(name: "shared") } catch { fatalError("test sshd: \(error)") }
    }()

    static var packageRoot: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().path
    }

    /// The KEY=value lines test-sshd.sh writes.
    static func parseEnv(_ text: String) -> [String: String] {
        var values: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { values[String(parts[0])] = String(parts[1]) }
        }
        return values
    }

    static func directory(pid: pid_t, name: String) -> String { "/tmp/sshkit-tests-\(pid)-\(name)" }

    /// Prepares keys and config in a fresh directory and starts sshd in the foreground
    /// as a child of this process.
    /// With `namespace`, sshd runs inside it, bound to its address.
    /// - Parameter loopbackOnly: with a namespace, bind to the namespace's own 127.0.0.1
    ///   instead of its veth address: reachable only from inside the namespace (e.g.
    ///   through a jump host running there), never from the test process.
    /// - Parameter mountSetup: shell commands run as root in a private mount namespace
    ///   before sshd starts there (e.g. bind mounts that hide a program from its users);
    ///   the rest of the machine does not see them.
    static func start(name: String, extraConfig: [String] = [], namespace: NetworkNamespace? = nil,
                      loopbackOnly: Bool = false, mountSetup: String? = nil) throws -> TestServer
    {
        let dir = directory(pid: getpid(), name: name)
        let env = try run("/bin/bash", ["\(packageRoot)/scripts/test-sshd.sh", "prepare", dir] + extraConfig,
                          env: namespace.map { ["SSHKIT_LISTEN_ADDRESS": loopbackOnly ? "127.0.0.1" : $0.address] })
        let values = parseEnv(env)
        guard let port = values["SSHKIT_TEST_PORT"].flatMap(Int.init) else {
            throw FixtureError("no port in \(env)")
        }
        ServerRegistry.dirs.withLock { _ = $0.insert(dir) }
        let sshd = ["/usr/sbin/sshd", "-D", "-e", "-f", "\(dir)/sshd_config"]
        // `ip netns exec` execs sshd in place: the PID is still sshd's
        let daemon: Daemon
        if let namespace {
            daemon = try Daemon.spawn("/usr/sbin/ip", ["netns", "exec", namespace.name] + sshd, log: "\(dir)/sshd.log")
        } else if let mountSetup {
            // unshare and sh exec in place too
            daemon = try Daemon.spawn("/usr/bin/unshare", ["--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                                                           mountSetup + "\nexec \"$@\"", "sh"] + sshd, log: "\(dir)/sshd.log")
        } else {
            daemon = try Daemon.spawn(sshd[0], Array(sshd.dropFirst()), log: "\(dir)/sshd.log")
        }
        let server = TestServer(dir: dir, port: port, values: values, daemon: daemon)
        if let namespace, loopbackOnly {
            // probe from inside the namespace: the test process cannot reach it
            for _ in 0..<200 {
                if (try? namespace.exec(["/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/\(port)"])) != nil { return server }
                if !daemon.isRunning { break }
                usleep(25_000)
            }
            server.stop()
            throw FixtureError("server did not start: \((try? String(contentsOfFile: dir + "/sshd.log", encoding: .utf8)) ?? "")")
        }
        return try waitUntilAccepting(server, daemon: daemon, log: dir + "/sshd.log")
    }

    /// A dropbear server (same test user, password and user keys) on its own port.
    static func startDropbear(name: String) throws -> TestServer {
        let dir = directory(pid: getpid(), name: name)
        ServerRegistry.dirs.withLock { _ = $0.insert(dir) }
        _ = try run("/bin/bash", ["\(packageRoot)/scripts/test-dropbear.sh", "prepare", dir])
        var values = parseEnv(try String(contentsOfFile: dir + "/env", encoding: .utf8))
        let dropbear = parseEnv(try String(contentsOfFile: dir + "/dropbear.env", encoding: .utf8))
        guard let port = dropbear["DROPBEAR_PORT"].flatMap(Int.init) else { throw FixtureError("no dropbear port") }
        for kind in ["ED25519", "ECDSA", "RSA"] { values["SSHKIT_TEST_FP_\(kind)"] = dropbear["DROPBEAR_FP_\(kind)"] }
        let daemon = try Daemon.spawn("/usr/sbin/dropbear", [
            "-F", "-E", "-m", "-w", "-p", "127.0.0.1:\(port)",
            "-r", dir + "/dropbear_ed25519", "-r", dir + "/dropbear_ecdsa", "-r", dir + "/dropbear_rsa",
        ], log: dir + "/dropbear.log")
        return try waitUntilAccepting(TestServer(dir: dir, port: port, values: values, daemon: daemon),
                                      daemon: daemon, log: dir + "/dropbear.log")
    }

    /// A bounded wait until the server's port accepts; stops it and throws its log otherwise.
    private static func waitUntilAccepting(_ server: TestServer, daemon: Daemon, log: String) throws -> TestServer {
        for _ in 0..<200 {
            if canConnect(host: server.host, port: server.port) { return server }
            if !daemon.isRunning { break }
            usleep(25_000)
        }
        server.stop()
        throw FixtureError("server did not start: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
    }

    /// The shared server of another test process (an exit test's parent), without owning it.
    static func attach(dir: String) throws -> TestServer {
        let env = try String(contentsOfFile: dir + "/env", encoding: .utf8)
        let values = parseEnv(env)
        guard let port = values["SSHKIT_TEST_PORT"].flatMap(Int.init) else { throw FixtureError("no port in \(dir)") }
        return TestServer(dir: dir, port: port, values: values, daemon: nil)
    }

    private init(dir: String, port: Int, values: [String: String], daemon: Daemon?) {
        self.dir = dir
        self.host = values["SSHKIT_TEST_HOST"] ?? "127.0.0.1"
        self.port = port
        self.user = values["SSHKIT_TEST_USER"] ?? "sshkit-test"
        self.password = values["SSHKIT_TEST_PASSWORD"] ?? ""
        self.passphrase = values["SSHKIT_TEST_PASSPHRASE"] ?? ""
        self.fingerprintEd25519 = values["SSHKIT_TEST_FP_ED25519"] ?? ""
        self.fingerprintECDSA = values["SSHKIT_TEST_FP_ECDSA"] ?? ""
        self.fingerprintRSA = values["SSHKIT_TEST_FP_RSA"] ?? ""
        self.daemon = Mutex(daemon)
        self.pid = daemon?.pid ?? 0
    }

    func stop() {
        daemon.withLock { d -> Daemon? in defer { d = nil }; return d }?.stop()
    }

    func key(_ name: String) -> String { "\(dir)/\(name)" }

    var allFingerprints: [String] { [fingerprintEd25519, fingerprintECDSA, fingerprintRSA] }

    func configuration(
        _ auth: SSHAuthentication? = nil,
        policy: SSHHostKeyPolicy? = nil,
        connectTimeout: Duration = .seconds(10)
    ) -> SSHConfiguration {
        SSHConfiguration(
            host: host, port: port, user: user,
            authentication: auth ?? .privateKey(path: key("id_ed25519")),
            hostKeyPolicy: policy ?? .pinned(allFingerprints),
            connectTimeout: connectTimeout)
    }

    /// PIDs of the per-connection sshd processes (children of the listener).
    func sessionProcesses() -> [Int32] {
        let out = (try? TestServer.run("/usr/bin/pgrep", ["-P", "\(pid)"], allowFailure: true)) ?? ""
        return out.split(separator: "\n").compactMap { Int32($0) }
    }

    /// Every process below the listener: per-connection sshd processes and what they run.
    func sessionProcessTree() -> [Int32] {
        var pids: [Int32] = []
        var frontier = sessionProcesses()
        while !frontier.isEmpty {
            pids += frontier
            frontier = frontier.flatMap { p in
                ((try? TestServer.run("/usr/bin/pgrep", ["-P", "\(p)"], allowFailure: true)) ?? "")
                    .split(separator: "\n").compactMap { Int32($0) }
            }
        }
        return pids
    }

    /// Runs a short-lived local command to completion: its status, stdout and stderr.
    static func runCapturing(_ exe: String, _ args: [String], env: [String: String]? = nil) throws
        -> (status: Int32, out: String, err: String)
    {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        if let env { p.environment = ProcessInfo.processInfo.environment.merging(env) { $1 } }
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self), String(decoding: errData, as: UTF8.self))
    }

    /// Runs a local command; returns stdout. Throws on a non-zero exit unless allowed.
    @discardableResult
    static func run(_ exe: String, _ args: [String], env: [String: String]? = nil,
                    allowFailure: Bool = false) throws -> String {
        let r = try runCapturing(exe, args, env: env)
        if r.status != 0 && !allowFailure {
            throw FixtureError("\(exe) \(args.joined(separator: " ")) failed: \(r.err)")
        }
        return r.out
    }

    static func canConnect(host: String = "127.0.0.1", port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr(host)
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

struct FixtureError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// Every sshd this process started; killed at exit if a test did not stop it.
enum ServerRegistry {
    static let pids = Mutex<Set<Int32>>([])
    static let dirs = Mutex<Set<String>>([])
    static let installed = Mutex(false)

    static func add(_ pid: Int32) {
        pids.withLock { _ = $0.insert(pid) }
        installed.withLock { done in
            if !done {
                done = true
                atexit {
                    // SIGTERM first so a server can reap its own session processes, then
                    // a bounded wait, then SIGKILL; always reaped
                    for pid in ServerRegistry.pids.withLock({ $0 }) { Daemon(pid: pid).stop() }
                    for dir in ServerRegistry.dirs.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: dir) }
                }
            }
        }
    }

    static func remove(_ pid: Int32) { pids.withLock { _ = $0.remove(pid) } }
}

/// Removes `paths` on the host through `transport`, read-only directories inside too (Vibe
/// copies its plugins' files with their package's modes), and again for a few seconds while
/// something still writes into them.
func removeOnHost(_ paths: [String], _ transport: any ServerTransport) async {
    guard !paths.isEmpty else { return }
    let script = """
        i=0
        while [ $i -lt 20 ]; do
            chmod -R u+w "$@" 2>/dev/null; rm -rf "$@"
            back=0; for p in "$@"; do [ ! -e "$p" ] || back=1; done
            [ $back = 1 ] || exit 0
            sleep 0.25; i=$((i + 1))
        done
        exit 1
        """
    _ = try? await transport.runProcess("/bin/sh", arguments: ["-c", script, "sh"] + paths, stdin: [], environment: [:],
                                        timeout: .seconds(30))
}
