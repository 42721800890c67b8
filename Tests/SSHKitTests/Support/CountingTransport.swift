import ServerTransport
import Synchronization

/// A transport that counts the processes it runs, around a real one: to show how
/// many remote commands (round trips) a service needs.
final class CountingTransport: ServerTransport {
    let inner: any ServerTransport
    private let counts = Mutex<(runs: Int, commands: [String])>((0, []))

    init(_ inner: any ServerTransport) { self.inner = inner }

    var runs: Int { counts.withLock { $0.runs } }
    var commands: [String] { counts.withLock { $0.commands } }

    var serverID: ServerID { inner.serverID }
    var isRemote: Bool { inner.isRemote }
    func readFile(_ path: String) async throws(TransportError) -> [UInt8] { try await inner.readFile(path) }
    func writeFile(_ path: String, contents: [UInt8]) async throws(TransportError) { try await inner.writeFile(path, contents: contents) }
    func fileExists(_ path: String) async throws(TransportError) -> Bool { try await inner.fileExists(path) }
    func stat(_ path: String) async throws(TransportError) -> FileStatus { try await inner.stat(path) }
    func listDirectory(_ path: String) async throws(TransportError) -> [DirectoryEntry] { try await inner.listDirectory(path) }
    func createDirectory(_ path: String) async throws(TransportError) { try await inner.createDirectory(path) }
    func removeFile(_ path: String) async throws(TransportError) { try await inner.removeFile(path) }
    func runProcess(_ executable: String, arguments: [String], stdin: [UInt8], environment: [String: String],
                    timeout: Duration?) async throws(TransportError) -> ProcessResult
    {
        counts.withLock {
            $0.runs += 1
            $0.commands.append(([executable] + arguments).joined(separator: " "))
        }
        return try await inner.runProcess(executable, arguments: arguments, stdin: stdin, environment: environment, timeout: timeout)
    }
    func startProcess(_ executable: String, arguments: [String], environment: [String: String])
        async throws(TransportError) -> TransportProcess
    {
        try await inner.startProcess(executable, arguments: arguments, environment: environment)
    }
    func snapshotSQLite(_ path: String) async throws(TransportError) -> SQLiteSnapshot { try await inner.snapshotSQLite(path) }
    func watchPaths(_ paths: [String], pollInterval: Duration) -> PathWatch { inner.watchPaths(paths, pollInterval: pollInterval) }
}
