import SSHKit
import Synchronization

/// An in-memory transport for testing services built on `ServerTransport`: a file tree
/// and scripted processes. It keeps the protocol's promises (atomic writes, 0600
/// secrets, idempotent create and remove, typed errors) so a service tested on it
/// behaves the same on a real one. Every call is recorded in `calls`.
public final class MockTransport: ServerTransport, Sendable {
    /// Answers `runProcess`: the invocation in, a result out. Throwing `TransportError`
    /// (e.g. `.timeout`) is how a script simulates failures.
    public typealias ProcessScript = @Sendable (_ executable: String, _ arguments: [String], _ stdin: [UInt8],
                                                _ environment: [String: String]) throws(TransportError) -> ProcessResult

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
    public let serverID: ServerID
    public let isRemote: Bool
    public let secrets: SecretFiles
    public let home: String

    public init(serverID: ServerID = ServerID("mock"), isRemote: Bool = true, home: String = "/home/user",
                secrets: SecretFiles = SecretFiles(),
                script: @escaping ProcessScript = { executable, _, _, _ in
                    ProcessResult(exitStatus: .exited(127), stdout: [], stderr: Array("\(executable): not found\n".utf8))
                }) {
        self.serverID = serverID
        self.isRemote = isRemote
        self.home = home
        self.secrets = secrets
        self.script = script
    }

    /// Every call made, e.g. "writeFile /etc/app.conf", in order.
    public var calls: [String] { state.withLock { $0.calls } }

    /// While set, every call fails with `hostUnreachable` (a dropped connection).
    public func setUnreachable(_ value: Bool) { state.withLock { $0.unreachable = value } }

    func normalize(_ path: String) -> String {
        var p = path
        if p == "~" || p.hasPrefix("~/") { p = home + p.dropFirst() }
        if !p.hasPrefix("/") { p = home + "/" + p }
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
        var e = TransportError(.fileIO, message, path: path)
        e.reason = reason
        return e
    }

    /// Runs `body` under the lock after recording the call and checking reachability.
    private func call<R>(_ what: String, _ body: (inout State) throws(TransportError) -> R) throws(TransportError) -> R {
        try state.withLock { (s: inout State) throws(TransportError) -> R in
            s.calls.append(what)
            if s.unreachable { throw TransportError(.hostUnreachable, "mock: unreachable") }
            return try body(&s)
        }
    }

    public func readFile(_ path: String) async throws(TransportError) -> [UInt8] {
        let p = normalize(path)
        return try call("readFile \(p)") { s throws(TransportError) in
            guard let n = s.nodes[p] else { throw Self.noSuchFile(path) }
            guard !n.isDirectory else { throw Self.fileError("is a directory", path, .isADirectory) }
            return n.contents
        }
    }

    public func writeFile(_ path: String, contents: [UInt8]) async throws(TransportError) {
        let p = normalize(path)
        try call("writeFile \(p)") { s throws(TransportError) in
            guard s.nodes[Self.parent(p)]?.isDirectory == true else { throw Self.noSuchFile(path) }
            if s.nodes[p]?.isDirectory == true { throw Self.fileError("is a directory", path, .isADirectory) }
            s.clock += 1
            let mode: UInt16 = secrets.isSecret(p) ? 0o600 : (s.nodes[p]?.permissions ?? 0o644)
            s.nodes[p] = Node(contents: contents, permissions: mode, modificationTime: s.clock, isDirectory: false)
        }
    }

    public func fileExists(_ path: String) async throws(TransportError) -> Bool {
        let p = normalize(path)
        return try call("fileExists \(p)") { s in s.nodes[p] != nil }
    }

    public func stat(_ path: String) async throws(TransportError) -> FileStatus {
        let p = normalize(path)
        return try call("stat \(p)") { s throws(TransportError) in
            guard let n = s.nodes[p] else { throw Self.noSuchFile(path) }
            return FileStatus(size: UInt64(n.contents.count), modificationTime: n.modificationTime,
                              kind: n.isDirectory ? .directory : .file, permissions: n.permissions)
        }
    }

    public func listDirectory(_ path: String) async throws(TransportError) -> [DirectoryEntry] {
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

    public func createDirectory(_ path: String) async throws(TransportError) {
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

    public func removeFile(_ path: String) async throws(TransportError) {
        let p = normalize(path)
        try call("removeFile \(p)") { s throws(TransportError) in
            if s.nodes[p]?.isDirectory == true { throw Self.fileError("is a directory", path, .isADirectory) }
            s.nodes[p] = nil
        }
    }

    public func runProcess(_ executable: String, arguments: [String], stdin: [UInt8],
                           environment: [String: String], timeout: Duration?) async throws(TransportError) -> ProcessResult {
        try call("runProcess \(([executable] + arguments).joined(separator: " "))") { _ in }
        return try script(executable, arguments, stdin, environment)
    }
}
