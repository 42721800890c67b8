import Foundation
import ServerTransport

/// Which conversation each agent terminal continues: PTY id → the agent's own session id
/// (Claude's session UUID, Codex's thread id, the id Vibe or Hermes recorded) and the
/// directory it belongs to.
public struct AgentSessionMapEntry: Codable, Sendable, Hashable {
    public enum Strategy: String, Codable, Sendable {
        case claudeSessionID
        case codexThreadID
        /// An id the agent recorded in its own session store (Vibe, Hermes).
        case recordedSessionID
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

    /// Atomically and durably through `LocalTransport`, the file 0600 (a secret to it),
    /// its directory made 0700 when missing.
    private func write(_ map: [String: AgentSessionMapEntry]) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let bytes = Array(try encoder.encode(map))
        let dir = (path as NSString).deletingLastPathComponent
        do {
            if !dir.isEmpty && !FileManager.default.fileExists(atPath: dir) {
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                        attributes: [.posixPermissions: 0o700])
            }
            let name = (path as NSString).lastPathComponent
            try LocalTransport(secrets: SecretFiles(extra: [name])).writeFileSynchronously(path, contents: bytes)
        } catch {
            throw AgentError(.storage, "cannot write the session map \(path): \(error)")
        }
        cache = map
    }
}

