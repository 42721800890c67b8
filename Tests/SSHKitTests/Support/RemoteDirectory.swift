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
