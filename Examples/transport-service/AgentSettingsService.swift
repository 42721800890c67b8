import Foundation
import ServerTransport

/// An example service, built the recommended way: a stateless struct over a
/// `ServerContext` that re-reads through the transport on every call (so it never acts
/// on a stale copy, and two instances never disagree), with typed errors only.
///
/// It manages a CLI agent's settings on a server: its JSON config, credentials in its
/// `.env`, the installed version, and recent sessions from its SQLite database.
public struct AgentSettingsService: Sendable {
    public let context: ServerContext

    public init(context: ServerContext) {
        self.context = context
    }

    /// The settings this service knows; other keys in the file are kept as they are.
    public struct Settings: Sendable, Equatable {
        public var model: String
        public var maxTurns: Int
        public var autoUpdate: Bool

        public static let defaults = Settings(model: "default", maxTurns: 50, autoUpdate: true)
        public init(model: String, maxTurns: Int, autoUpdate: Bool) {
            self.model = model
            self.maxTurns = maxTurns
            self.autoUpdate = autoUpdate
        }
    }

    var transport: any ServerTransport { context.transport }
    var paths: ProgramPaths { context.paths }

    // MARK: config

    /// The settings; the defaults when there is no config file yet.
    /// - Throws: `other` when the file is not a JSON object; transport errors as they are.
    public func settings() async throws(TransportError) -> Settings {
        Self.settings(from: try await configObject())
    }

    /// Reads, changes and writes back the config (atomically), keeping unknown keys.
    /// Returns the new settings.
    @discardableResult
    public func updateSettings(_ change: (inout Settings) -> Void) async throws(TransportError) -> Settings {
        var object = try await configObject()
        var settings = Self.settings(from: object)
        change(&settings)
        object["model"] = settings.model
        object["maxTurns"] = settings.maxTurns
        object["autoUpdate"] = settings.autoUpdate
        let data: Data
        do {
            data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
        } catch {
            throw TransportError(.other, "cannot encode the config: \(error)", path: paths.configFile)
        }
        try await transport.createDirectory(paths.root)
        try await transport.writeFile(paths.configFile, contents: Array(data) + [0x0a])
        return settings
    }

    private func configObject() async throws(TransportError) -> [String: Any] {
        let bytes: [UInt8]
        do {
            bytes = try await transport.readFile(paths.configFile)
        } catch where error.isNoSuchFile {
            return [:]
        }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] else {
            throw TransportError(.other, "the config is not a JSON object", path: paths.configFile)
        }
        return object
    }

    private static func settings(from object: [String: Any]) -> Settings {
        var s = Settings.defaults
        if let m = object["model"] as? String { s.model = m }
        if let t = object["maxTurns"] as? Int { s.maxTurns = t }
        if let a = object["autoUpdate"] as? Bool { s.autoUpdate = a }
        return s
    }

    // MARK: credentials

    /// Sets `name=value` in the program's `.env` (kept 0600 by the transport), keeping
    /// the other lines. - Throws: `other` for a bad name or a value with a line break.
    public func setCredential(_ name: String, _ value: String) async throws(TransportError) {
        guard name.range(of: #"^[A-Za-z_][A-Za-z0-9_]*$"#, options: .regularExpression) != nil else {
            throw TransportError(.other, "invalid variable name \(name)")
        }
        guard !value.contains(where: \.isNewline) else {
            throw TransportError(.other, "a credential cannot contain a line break")
        }
        var lines = try await environmentLines().filter { !$0.hasPrefix(name + "=") }
        lines.append("\(name)=\(value)")
        try await transport.createDirectory(paths.root)
        try await transport.writeTextFile(paths.environmentFile, lines.joined(separator: "\n") + "\n")
    }

    /// Whether `name` has a non-empty value in the `.env`.
    public func hasCredential(_ name: String) async throws(TransportError) -> Bool {
        try await environmentLines().contains { $0.hasPrefix(name + "=") && $0.count > name.count + 1 }
    }

    private func environmentLines() async throws(TransportError) -> [String] {
        do {
            return try await transport.readTextFile(paths.environmentFile).split(separator: "\n").map(String.init)
        } catch where error.isNoSuchFile {
            return []
        }
    }

    // MARK: the program

    /// `executable --version`, or nil when it is not installed (status 127).
    /// - Throws: `commandFailed` when it fails otherwise, `timeout` after 10 s.
    public func installedVersion() async throws(TransportError) -> String? {
        let r = try await transport.runProcess(paths.executable, arguments: ["--version"], stdin: [], environment: [:],
                                               timeout: .seconds(10))
        if r.exitStatus == .exited(127) { return nil }
        try r.check("\(paths.executable) --version")
        return r.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A session the program recorded.
    public struct Session: Sendable, Equatable {
        public var id: String
        public var title: String
    }

    /// The newest sessions from the program's database, read from a snapshot (so a
    /// program writing it meanwhile is never disturbed); from the cached snapshot when
    /// the server is unreachable (`fromCache`). Needs `sqlite3` on this machine.
    public func recentSessions(limit: Int = 10) async throws(TransportError) -> (sessions: [Session], fromCache: Bool) {
        let snapshot = try await transport.snapshotSQLite(paths.database)
        let query = "SELECT id, title FROM sessions ORDER BY updated_at DESC LIMIT \(max(1, limit));"
        let r = try await LocalTransport().runProcess("sqlite3", "-readonly", "-separator", "\t", snapshot.path, query)
        try r.check("sqlite3 on the snapshot")
        let sessions = r.stdoutString.split(separator: "\n").compactMap { line -> Session? in
            let parts = line.split(separator: "\t", maxSplits: 1)
            return parts.count == 2 ? Session(id: String(parts[0]), title: String(parts[1])) : nil
        }
        return (sessions, snapshot.isCached)
    }
}
