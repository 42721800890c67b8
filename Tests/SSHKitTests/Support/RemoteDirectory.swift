import Foundation
import SSHKit

extension SSHConnection {
    /// A fresh directory on the server (`mktemp -d /tmp/sshkit-NAME-XXXXXXXX`), owned by
    /// the login user. The servers run on this machine: remove it with FileManager.
    func makeRemoteTemporaryDirectory(_ name: String) async throws -> String {
        let result = try await execute("mktemp -d /tmp/sshkit-\(name)-XXXXXXXX")
        let dir = result.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)
        guard result.exitStatus == .exited(0), dir.hasPrefix("/tmp/sshkit-\(name)-") else {
            throw FixtureError("mktemp on the server: \(result.stderrString)")
        }
        return dir
    }
}

enum TestPaths {
    /// A fresh local directory `/tmp/sshkit-NAME-PID-RANDOM`, mode 0755 so the test
    /// server's login user can reach sockets inside it. Remove it with FileManager.
    static func makeTemporaryDirectory(_ name: String) throws -> String {
        let dir = "/tmp/sshkit-\(name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        chmod(dir, 0o755)
        return dir
    }
}
