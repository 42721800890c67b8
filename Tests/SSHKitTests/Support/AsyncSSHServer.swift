import Foundation
import SSHKit

/// asyncssh's SSH server (PyPI) on 127.0.0.1, from scripts/asyncssh-server.py: SFTP
/// rooted at `root`, exec requests run by /bin/sh there, a fresh Ed25519 host key and a
/// throwaway user key. Started and stopped (by PID) by the test that uses it.
final class AsyncSSHServer: Sendable {
    let dir: String
    let port: Int
    let fingerprint: String
    let daemon: Daemon

    /// Files the server serves (its SFTP root and the commands' working directory).
    var root: String { dir + "/root" }
    var userKey: String { dir + "/id_ed25519" }

    static func start(name: String) throws -> AsyncSSHServer {
        let dir = TestServer.directory(pid: getpid(), name: name)
        try? FileManager.default.removeItem(atPath: dir)
        try FileManager.default.createDirectory(atPath: dir + "/root", withIntermediateDirectories: true)
        ServerRegistry.dirs.withLock { _ = $0.insert(dir) }
        try TestServer.run("/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "sshkit-test",
                                                   "-f", dir + "/id_ed25519"])
        let script = TestServer.packageRoot + "/scripts/asyncssh-server.py"
        // the python3 on PATH: the one scripts/install-deps.sh installed asyncssh into
        let daemon = try Daemon.spawn("/usr/bin/env", ["python3", script, dir, dir + "/id_ed25519.pub"],
                                      log: dir + "/server.log")
        for _ in 0..<400 {
            if let text = try? String(contentsOfFile: dir + "/env", encoding: .utf8) {
                let values = TestServer.parseEnv(text)
                if let port = values["ASYNCSSH_PORT"].flatMap(Int.init), let fp = values["ASYNCSSH_FP"] {
                    return AsyncSSHServer(dir: dir, port: port, fingerprint: fp, daemon: daemon)
                }
            }
            if !daemon.isRunning { break }
            usleep(25_000)
        }
        daemon.stop()
        throw FixtureError("asyncssh server did not start (pip install asyncssh): "
            + ((try? String(contentsOfFile: dir + "/server.log", encoding: .utf8)) ?? ""))
    }

    private init(dir: String, port: Int, fingerprint: String, daemon: Daemon) {
        self.dir = dir
        self.port = port
        self.fingerprint = fingerprint
        self.daemon = daemon
    }

    func configuration(keepalive: SSHKeepalive? = nil) -> SSHConfiguration {
        var config = SSHConfiguration(host: "127.0.0.1", port: port, user: "sshkit-test",
                                      authentication: .privateKey(path: userKey),
                                      hostKeyPolicy: .pinned([fingerprint]), connectTimeout: .seconds(10))
        if let keepalive { config.keepalive = keepalive }
        return config
    }

    /// What the server logged (its exceptions, if any).
    var log: String { (try? String(contentsOfFile: dir + "/server.log", encoding: .utf8)) ?? "" }

    func stop() { daemon.stop() }
}
