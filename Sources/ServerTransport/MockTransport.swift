import Foundation
import SSHKit
import Synchronization

/// An in-memory transport for testing services built on `ServerTransport`: a file tree
/// and scripted processes. It keeps the protocol's promises (atomic writes, 0600
/// secrets, idempotent create and remove, typed errors) so a service tested on it
/// behaves the same on a real one. Every call is recorded in `calls`.
public final class MockTransport: ServerTransport, Sendable {
    /// Answers `runProcess`: the invocation in, a result out. Throwing `TransportError`
    /// (e.g. `.timedOut`) is how a script simulates failures.
    public typealias ProcessScript = @Sendable (ProcessInvocation) throws(TransportError) -> ProcessResult

    /// What a script is asked to run.
    public struct ProcessInvocation: Sendable {
        /// The executable as the caller gave it (`~` not expanded).
        public var executable: String
        /// The arguments as the caller gave them.
        public var arguments: [String]
        /// The input: `runProcess`'s `stdin`, or for `startProcess` everything written before
        /// `input.finish()`.
        public var stdin: [UInt8]
        /// The extra environment variables the caller gave.
        public var environment: [String: String]
        /// The caller's timeout (nil for `startProcess`): a script simulating a slow
        /// program throws `TransportError.timedOut(after:partialStdout:)` with it.
        public var timeout: Duration?
        /// The executable and arguments as one line, e.g. "git status --short".
        public var commandLine: String { ([executable] + arguments).joined(separator: " ") }
    }

    struct Node {
        var contents: [UInt8]
        var permissions: UInt16
        var modificationTime: Double
        var isDirectory: Bool
    }

    private struct State {
        var nodes: [String: Node] = ["/": Node(contents: [], permissions: 0o755, modificationTime: 0, isDirectory: true)]
        var clock: Double = 1_700_000_000
        var calls: [String] = []
        var unreachable = false
    }

    private let state = Mutex(State())
    private let script: ProcessScript
    /// "mock" unless given.
    public let serverID: ServerID
    /// As given (`true` by default).
    public let isRemote: Bool
    /// The file names `writeFile` keeps at 0600.
    public let secrets: SecretFiles
    /// The login user's home, where `~`, `~/…` and relative paths lead.
    public let home: String
    /// Where `snapshotSQLite` puts copies (of the bytes at the path; no SQLite involved);
    /// by default a directory of this mock's own under the system's temporary directory,
    /// never the user's cache.
    public let cache: SnapshotCache

    /// An empty tree: only `/` exists (create `home` if the service expects it). The
    /// default `script` answers every process with exit status 127 and "NAME: not found".
    public init(serverID: ServerID = ServerID("mock"), isRemote: Bool = true, home: String = "/home/user",
                secrets: SecretFiles = SecretFiles(),
                cache: SnapshotCache = SnapshotCache(directory: NSTemporaryDirectory() + "/sshkit-mock-snapshots-"
                                                     + UUID().uuidString),
                script: @escaping ProcessScript = { run in
                    ProcessResult(exitStatus: .exited(127), stdout: [], stderr: Array("\(run.executable): not found\n".utf8))
                }) {
        self.serverID = serverID
        self.isRemote = isRemote
        self.home = home
        self.secrets = secrets
        self.cache = cache
        self.script = script
    }

    /// Every call made, e.g. "writeFile /etc/app.conf", in order.
    public var calls: [String] { state.withLock { $0.calls } }

    /// While set, every call fails with `hostUnreachable` (a dropped connection).
    public func setUnreachable(_ value: Bool) { state.withLock { $0.unreachable = value } }

    func normalize(_ path: String) -> String {
        var p = path
        if p == "~" || p.byteHasPrefix("~/") { p = home + p.byteDropFirst(1) }
        if !p.byteHasPrefix("/") { p = home + "/" + p }
        var parts: [Substring] = []
        for part in p.split(separator: "/") where part != "." {
            if part == ".." { _ = parts.popLast() } else { parts.append(part) }
        }
        return "/" + parts.joined(separator: "/")
    }

    private static func parent(_ p: String) -> String {
        guard let i = p.lastIndex(of: "/"), i != p.startIndex else { return "/" }
        return String(p[..<i])
    }

    private static func noSuchFile(_ path: String) -> TransportError {
        fileError("no such file or directory", path, .noSuchFile)
    }

    private static func fileError(_ message: String, _ path: String, _ reason: TransportError.FileIOReason) -> TransportError {
        TransportError(.fileIO, message, path: path, context: .fileIO(reason: reason))
    }

    /// Runs `body` under the lock after recording the call and checking reachability.
    private func call<R>(_ what: String, _ body: (inout State) throws(TransportError) -> R) throws(TransportError) -> R {
        try state.withLock { (s: inout State) throws(TransportError) -> R in
            s.calls.append(what)
            if s.unreachable { throw TransportError(.hostUnreachable, "mock: unreachable") }
            return try body(&s)
        }
    }

    /// The stored bytes. A missing file is `fileIO` with reason `noSuchFile`, a directory
    /// `isADirectory`; `hostUnreachable` while `setUnreachable(true)`.
    public func readFile(_ path: String) async throws(TransportError) -> [UInt8] {
        try TransportError.checkPath(path)
        let p = normalize(path)
        return try call("readFile \(p)") { s throws(TransportError) in
            guard let n = s.nodes[p] else { throw Self.noSuchFile(path) }
            guard !n.isDirectory else { throw Self.fileError("is a directory", path, .isADirectory) }
            return n.contents
        }
    }

    /// Replaces the bytes in one step (0600 for a secret, else the old mode or 0644) and
    /// advances the mock's clock. The parent must be a directory, else `fileIO` with reason
    /// `noSuchFile`; a directory at `path` is `isADirectory`.
    public func writeFile(_ path: String, contents: [UInt8]) async throws(TransportError) {
        try TransportError.checkPath(path)
        let p = normalize(path)
        try call("writeFile \(p)") { s throws(TransportError) in
            guard s.nodes[Self.parent(p)]?.isDirectory == true else { throw Self.noSuchFile(path) }
            if s.nodes[p]?.isDirectory == true { throw Self.fileError("is a directory", path, .isADirectory) }
            s.clock += 1
            let mode: UInt16 = secrets.isSecret(p) ? 0o600 : (s.nodes[p]?.permissions ?? 0o644)
            s.nodes[p] = Node(contents: contents, permissions: mode, modificationTime: s.clock, isDirectory: false)
        }
    }

    /// Whether a file or directory is stored at `path`; throws only `hostUnreachable`.
    public func fileExists(_ path: String) async throws(TransportError) -> Bool {
        try TransportError.checkPath(path)
        let p = normalize(path)
        return try call("fileExists \(p)") { s in s.nodes[p] != nil }
    }

    /// Size, the mock's clock when it was written or created, `.file` or `.directory`
    /// (the mock has no symlinks) and mode. A missing path is `fileIO` with reason `noSuchFile`.
    public func stat(_ path: String) async throws(TransportError) -> FileStatus {
        try TransportError.checkPath(path)
        let p = normalize(path)
        return try call("stat \(p)") { s throws(TransportError) in
            guard let n = s.nodes[p] else { throw Self.noSuchFile(path) }
            return FileStatus(size: UInt64(n.contents.count), modificationTime: n.modificationTime,
                              kind: n.isDirectory ? .directory : .file, permissions: n.permissions)
        }
    }

    /// The stored children, sorted by name. A missing path is `fileIO` with reason
    /// `noSuchFile`, a file `notADirectory`.
    public func listDirectory(_ path: String) async throws(TransportError) -> [DirectoryEntry] {
        try TransportError.checkPath(path)
        let p = normalize(path)
        return try call("listDirectory \(p)") { s throws(TransportError) in
            guard let n = s.nodes[p] else { throw Self.noSuchFile(path) }
            guard n.isDirectory else { throw Self.fileError("not a directory", path, .notADirectory) }
            let prefix = p == "/" ? "/" : p + "/"
            return s.nodes.compactMap { key, node -> DirectoryEntry? in
                guard key.hasPrefix(prefix), key != p, !key.dropFirst(prefix.count).contains("/") else { return nil }
                return DirectoryEntry(name: String(key.dropFirst(prefix.count)), kind: node.isDirectory ? .directory : .file)
            }.sorted { $0.name < $1.name }
        }
    }

    /// Creates the missing directories (0755). A file on the way is `fileIO` with reason
    /// `notADirectory`, and `path` names that file (normalized).
    public func createDirectory(_ path: String) async throws(TransportError) {
        try TransportError.checkPath(path)
        let p = normalize(path)
        try call("createDirectory \(p)") { s throws(TransportError) in
            var prefix = ""
            for part in p.split(separator: "/") {
                prefix += "/" + part
                if let n = s.nodes[prefix] {
                    guard n.isDirectory else { throw Self.fileError("exists and is not a directory", prefix, .notADirectory) }
                    continue
                }
                s.clock += 1
                s.nodes[prefix] = Node(contents: [], permissions: 0o755, modificationTime: s.clock, isDirectory: true)
            }
        }
    }

    /// Removes a stored file; a missing one is fine, a directory is `fileIO` with reason
    /// `isADirectory`.
    public func removeFile(_ path: String) async throws(TransportError) {
        try TransportError.checkPath(path)
        let p = normalize(path)
        try call("removeFile \(p)") { s throws(TransportError) in
            if s.nodes[p]?.isDirectory == true { throw Self.fileError("is a directory", path, .isADirectory) }
            s.nodes[p] = nil
        }
    }

    /// Records the call, then asks the script with a `ProcessInvocation` (with `timeout`):
    /// what it returns or throws is the answer. Nothing times out by itself: a script
    /// simulates a timeout by throwing `TransportError.timedOut(after:partialStdout:stderr:)`.
    public func runProcess(_ executable: String, arguments: [String], stdin: [UInt8],
                           environment: [String: String], timeout: Duration?) async throws(TransportError) -> ProcessResult {
        try TransportError.checkProcess(executable, arguments, environment)
        try call("runProcess \(([executable] + arguments).joined(separator: " "))") { _ in }
        return try script(ProcessInvocation(executable: executable, arguments: arguments, stdin: stdin,
                                            environment: environment, timeout: timeout))
    }

    /// The file's bytes copied into the cache (or the last copy while unreachable).
    public func snapshotSQLite(_ path: String) async throws(TransportError) -> SQLiteSnapshot {
        try TransportError.checkPath(path)
        let local = cache.path(for: normalize(path), on: serverID)
        return try await RemoteSQLiteSnapshot.orCached(local) { () async throws(TransportError) in
            let bytes = try await readFile(path)
            try RemoteSQLiteSnapshot.store(bytes, at: local)
            return SQLiteSnapshot(path: local, takenAt: Date())
        }
    }

    /// Polls `stat` every `pollInterval` (each write advances the mock's clock).
    public func watchPaths(_ paths: [String], pollInterval: Duration) -> PathWatch {
        PollingWatch.watch(paths, every: pollInterval) { [self] ps throws(TransportError) in
            try await PollingWatch.signature(self, ps)
        }
    }

    /// The script runs once stdin is finished; its output then streams, and
    /// `exitStatus()` returns its status (or throws what it threw).
    public func startProcess(_ executable: String, arguments: [String], environment: [String: String])
        async throws(TransportError) -> TransportProcess
    {
        try TransportError.checkProcess(executable, arguments, environment)
        try call("startProcess \(([executable] + arguments).joined(separator: " "))") { _ in }
        let script = self.script
        return TransportProcess(backend: MockProcess { stdin throws(TransportError) in
            try script(ProcessInvocation(executable: executable, arguments: arguments, stdin: stdin,
                                         environment: environment, timeout: nil))
        })
    }
}

/// A scripted process: input is collected until `input.finish()`, then the script runs.
final class MockProcess: ProcessBackend, Sendable {
    private struct State {
        var stdin: [UInt8] = []
        var ran = false
        var outcome: Result<SSHExitStatus, TransportError>?
        var waiters = WaitList<Result<SSHExitStatus, TransportError>>()
    }
    private let state = Mutex(State())
    private let out = ChunkQueue(), err = ChunkQueue()
    private let run: @Sendable ([UInt8]) throws(TransportError) -> ProcessResult

    init(run: @escaping @Sendable ([UInt8]) throws(TransportError) -> ProcessResult) {
        self.run = run
    }

    func read(_ stream: ProcessOutput.Stream) async -> [UInt8]? { await (stream == .stdout ? out : err).next() }

    func write(_ bytes: [UInt8]) async throws(TransportError) {
        let ok = state.withLock { s -> Bool in
            guard s.outcome == nil, !s.ran else { return false }
            s.stdin += bytes
            return true
        }
        if !ok { throw TransportError(.other, "the process no longer reads its input") }
    }

    func finishInput() {
        let stdin = state.withLock { s -> [UInt8]? in
            guard s.outcome == nil, !s.ran else { return nil }
            s.ran = true
            return s.stdin
        }
        guard let stdin else { return }
        let outcome: Result<SSHExitStatus, TransportError>
        do throws(TransportError) {
            let r = try run(stdin)
            out.push(r.stdout)
            err.push(r.stderr)
            outcome = .success(r.exitStatus)
        } catch {
            outcome = .failure(error)
        }
        end(outcome)
    }

    func cancel() {
        end(.success(.signaled("TERM", coreDumped: false)))
    }

    private func end(_ outcome: Result<SSHExitStatus, TransportError>) {
        let waiters = state.withLock { s -> [CheckedContinuation<Result<SSHExitStatus, TransportError>, Never>]? in
            guard s.outcome == nil else { return nil }
            s.outcome = outcome
            return s.waiters.removeAll()
        }
        guard let waiters else { return }
        out.end()
        err.end()
        for w in waiters { w.resume(returning: outcome) }
    }

    /// The script's outcome; `cancelled` at once when the waiting task is cancelled.
    func exitStatus() async throws(TransportError) -> SSHExitStatus {
        try await waitInList(cancelled: .failure(.cancelled)) { c, id in
            state.withLock { s -> Result<SSHExitStatus, TransportError>? in
                if let o = s.outcome { return o }
                return s.waiters.insert(c, id: id) ? nil : .failure(.cancelled)
            }
        } leave: { [self] id in
            state.withLock { $0.waiters.remove(id) }
        }.get()
    }
}
