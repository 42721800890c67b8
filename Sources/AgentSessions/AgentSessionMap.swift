import Foundation

/// Which conversation each agent terminal continues: PTY id → the agent's own session id
/// (Claude's session UUID, Codex's thread id) and the directory it belongs to.
public struct AgentSessionMapEntry: Codable, Sendable, Hashable {
    public enum Strategy: String, Codable, Sendable {
        case claudeSessionID
        case codexThreadID
    }

    public var providerID: String
    /// Absolute, on the host: a conversation belongs to one directory.
    public var workingDirectory: String
    /// The session UUID or thread id.
    public var target: String
    public var strategy: Strategy

    public init(providerID: String, workingDirectory: String, target: String, strategy: Strategy) {
        self.providerID = providerID
        self.workingDirectory = workingDirectory
        self.target = target
        self.strategy = strategy
    }
}

/// Where the session map lives. `AgentSessionMapFile` keeps it in a JSON file; the
/// command's store keeps it in SQLite. Implementations must make each change durable
/// before returning (a crash never leaves a half-written map).
public protocol AgentSessionMapStore: Sendable {
    func entries() async throws -> [String: AgentSessionMapEntry]
    func set(_ entry: AgentSessionMapEntry, for ptyID: String) async throws
    func remove(_ ptyID: String) async throws
}

/// The session map as a JSON file, written atomically (a temporary file in the same
/// directory, fsync, rename) and 0600.
public actor AgentSessionMapFile: AgentSessionMapStore {
    public nonisolated let path: String
    private var cache: [String: AgentSessionMapEntry]?

    /// - Parameter path: a local file; a leading `~` is this user's home.
    public init(path: String) {
        self.path = (path as NSString).expandingTildeInPath
    }

    public func entries() throws -> [String: AgentSessionMapEntry] {
        if let cache { return cache }
        let map: [String: AgentSessionMapEntry]
        if let data = FileManager.default.contents(atPath: path) {
            do {
                map = try JSONDecoder().decode([String: AgentSessionMapEntry].self, from: data)
            } catch {
                // left as it is for the user to look at; nothing is written over it
                throw AgentError(.invalidArgument, "the session map \(path) is not a session map: \(error)")
            }
        } else {
            map = [:]
        }
        cache = map
        return map
    }

    public func set(_ entry: AgentSessionMapEntry, for ptyID: String) throws {
        var map = try entries()
        map[ptyID] = entry
        try write(map)
    }

    public func remove(_ ptyID: String) throws {
        var map = try entries()
        guard map.removeValue(forKey: ptyID) != nil else { return }
        try write(map)
    }

    private func write(_ map: [String: AgentSessionMapEntry]) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        try AtomicFile.write(Array(try encoder.encode(map)), to: path, mode: 0o600)
        cache = map
    }
}

/// Atomic replacement of a local file.
enum AtomicFile {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func write(_ bytes: [UInt8], to path: String, mode: mode_t) throws {
        let dir = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: dir.isEmpty ? "." : dir, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        var template = Array((dir.isEmpty ? "." : dir).utf8CString.dropLast()) + Array("/.tmp-XXXXXX".utf8CString)
        let fd = mkstemp(&template)
        guard fd >= 0 else { throw Failure(description: "cannot create a file in \(dir): errno \(errno)") }
        let tmp = String(cString: template)
        var ok = false
        defer {
            if !ok { unlink(tmp) }
        }
        fchmod(fd, mode)
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                close(fd)
                throw Failure(description: "cannot write \(tmp): errno \(errno)")
            }
            offset += n
        }
        guard fsync(fd) == 0 else {
            close(fd)
            throw Failure(description: "cannot sync \(tmp): errno \(errno)")
        }
        close(fd)
        guard rename(tmp, path) == 0 else { throw Failure(description: "cannot rename over \(path): errno \(errno)") }
        ok = true
        // the rename itself is durable once the directory is synced
        let dfd = open(dir.isEmpty ? "." : dir, O_RDONLY | O_DIRECTORY)
        if dfd >= 0 {
            fsync(dfd)
            close(dfd)
        }
    }
}
