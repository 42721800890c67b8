import AgentSessions
import Foundation
import GRDB

/// The agent-sessions records and session map in one SQLite database (through GRDB).
///
/// - Saving updates a row in place (an upsert): `INSERT OR REPLACE` would delete it first,
///   and the delete would cascade to its children.
/// - Where: `SQLiteAgentStore.defaultPath(tool:)`, the XDG data directory
///   (`$XDG_DATA_HOME/<tool>/store.sqlite`, else `~/.local/share/<tool>/store.sqlite`); the
///   directory is made 0700 and the database 0600 (SQLite gives its WAL the same mode).
/// - Several processes at once: WAL mode (readers never wait for the writer), a 5 s busy
///   timeout for writers, and every change one transaction.
/// - Durability: `synchronous = FULL`, so a change is on disk when its call returns; a crash
///   (of the process or the machine) loses nothing acknowledged.
/// - Schema: versioned migrations from the first version on (`SQLiteAgentStore.migrator`);
///   a database written by a newer version is refused rather than misread.
/// - No secret is stored: records carry key paths, never keys or passwords.
public final class SQLiteAgentStore: AgentStore, Sendable {
    public let path: String
    private let pool: DatabasePool

    /// The store's file for a tool: `$XDG_DATA_HOME/<tool>/store.sqlite`, or
    /// `~/.local/share/<tool>/store.sqlite` when XDG_DATA_HOME is unset or not absolute.
    public static func defaultPath(tool: String, environment: [String: String] = ProcessInfo.processInfo.environment)
        -> String
    {
        let base: String
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            base = xdg
        } else {
            base = (environment["HOME"] ?? NSHomeDirectory()) + "/.local/share"
        }
        return base + "/" + tool + "/store.sqlite"
    }

    /// Opens (creating when needed) the store at `path` and brings its schema up to date.
    /// - Throws: `AgentError.storage` when the file cannot be made or opened, is not a
    ///   store, or was written by a newer version of the schema.
    public init(path: String) throws(AgentError) {
        self.path = (path as NSString).expandingTildeInPath
        do {
            try Self.prepareFile(self.path)
            var configuration = Configuration()
            configuration.busyMode = .timeout(5)
            configuration.foreignKeysEnabled = true
            configuration.prepareDatabase { db in
                try db.execute(sql: "PRAGMA synchronous = FULL")
            }
            pool = try DatabasePool(path: self.path, configuration: configuration)
            try pool.write { db in
                if try Self.migrator.hasBeenSuperseded(db) {
                    throw AgentError(.storage, "the store \(self.path) was written by a newer version of this tool")
                }
            }
            try Self.migrator.migrate(pool)
        } catch let e as AgentError {
            throw e
        } catch {
            throw AgentError(.storage, "cannot open the store \(self.path): \(error)")
        }
    }

    /// The directory 0700 and the file 0600, made before SQLite opens it (SQLite would
    /// make the file with the process's umask).
    private static func prepareFile(_ path: String) throws {
        let dir = (path as NSString).deletingLastPathComponent
        if !FileManager.default.fileExists(atPath: dir) {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
        let fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw AgentError(.storage, "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        close(fd)
    }

    /// The schema, one migration per version. Never edit a shipped migration: add one.
    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE host (
                    id TEXT PRIMARY KEY NOT NULL,
                    name TEXT NOT NULL UNIQUE,
                    address TEXT NOT NULL,
                    port INTEGER NOT NULL,
                    user TEXT NOT NULL,
                    authentication TEXT NOT NULL,   -- JSON: key file paths, the ssh-agent or a prompt; never a secret
                    jumpHost TEXT,
                    hostKeyFingerprint TEXT,
                    tmuxSocket TEXT NOT NULL,
                    createdAt DOUBLE NOT NULL       -- every time: seconds since 2001-01-01 UTC
                );
                CREATE TABLE project (
                    id TEXT PRIMARY KEY NOT NULL,
                    hostID TEXT NOT NULL REFERENCES host(id) ON DELETE CASCADE,
                    name TEXT NOT NULL,
                    path TEXT NOT NULL,
                    defaultBaseRef TEXT,
                    createdAt DOUBLE NOT NULL
                );
                CREATE INDEX project_host ON project(hostID);
                CREATE TABLE task (
                    id TEXT PRIMARY KEY NOT NULL,
                    projectID TEXT NOT NULL REFERENCES project(id) ON DELETE CASCADE,
                    title TEXT NOT NULL,
                    worktreeName TEXT NOT NULL,
                    projectPath TEXT NOT NULL,
                    worktreePath TEXT NOT NULL,
                    branch TEXT NOT NULL,
                    baseRef TEXT NOT NULL,
                    baseCommit TEXT NOT NULL,
                    createdAt DOUBLE NOT NULL,
                    archivedAt DOUBLE
                );
                CREATE INDEX task_project ON task(projectID);
                CREATE TABLE conversation (
                    id TEXT PRIMARY KEY NOT NULL,
                    taskID TEXT NOT NULL REFERENCES task(id) ON DELETE CASCADE,
                    providerID TEXT NOT NULL,
                    kind TEXT NOT NULL CHECK (kind IN ('main', 'chat')),
                    autoApprove BOOLEAN NOT NULL,
                    arguments TEXT NOT NULL,        -- JSON array
                    survivesDisconnect BOOLEAN NOT NULL,
                    state TEXT NOT NULL,            -- running, stopped, gone, exited:N, signaled:N
                    createdAt DOUBLE NOT NULL,
                    lastStartedAt DOUBLE
                );
                CREATE INDEX conversation_task ON conversation(taskID);
                CREATE TABLE terminalLog (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    conversationID TEXT NOT NULL REFERENCES conversation(id) ON DELETE CASCADE,
                    capturedAt DOUBLE NOT NULL,
                    text TEXT NOT NULL
                );
                CREATE INDEX terminalLog_conversation ON terminalLog(conversationID);
                CREATE TABLE sessionMap (
                    ptyID TEXT PRIMARY KEY NOT NULL,
                    providerID TEXT NOT NULL,
                    workingDirectory TEXT NOT NULL,
                    target TEXT NOT NULL,
                    strategy TEXT NOT NULL
                );
                """)
        }
        m.registerMigration("v2-task-prompt") { db in
            try db.execute(sql: "ALTER TABLE task ADD COLUMN prompt TEXT")
        }
        m.registerMigration("v3-task-environment") { db in
            try db.execute(sql: """
                ALTER TABLE task ADD COLUMN port INTEGER;
                ALTER TABLE project ADD COLUMN setupCommand TEXT;
                ALTER TABLE project ADD COLUMN teardownCommand TEXT;
                ALTER TABLE project ADD COLUMN fetchesBase BOOLEAN;
                """)
        }
        m.registerMigration("v4-host-openssh") { db in
            // JSON: the ssh alias, -F file, -o options; nil for a host given by address
            try db.execute(sql: "ALTER TABLE host ADD COLUMN openSSH TEXT")
        }
        m.registerMigration("v5-task-attempt") { db in
            try db.execute(sql: """
                ALTER TABLE task ADD COLUMN attemptGroup TEXT;
                ALTER TABLE task ADD COLUMN attemptLabel TEXT;
                ALTER TABLE task ADD COLUMN attemptPickedAt DOUBLE;
                CREATE INDEX task_attempt_group ON task(attemptGroup);
                """)
        }
        return m
    }

    /// The migrations applied to this store, oldest first.
    public func appliedMigrations() async throws -> [String] {
        try await pool.read { db in try Self.migrator.appliedIdentifiers(db).sorted() }
    }

    /// SQLite's check of the file and its foreign keys, the last migration applied, and
    /// the file's path.
    public func check() async throws -> AgentStoreCheck {
        AgentStoreCheck(problems: try await integrityProblems(), schema: try await appliedMigrations().last, location: path)
    }

    /// SQLite's own check of the file and the foreign keys: empty when the store is sound,
    /// else what is wrong, one problem per element.
    public func integrityProblems() async throws -> [String] {
        try await pool.read { db in
            var problems = try String.fetchAll(db, sql: "PRAGMA integrity_check").filter { $0 != "ok" }
            let orphans = try Row.fetchAll(db, sql: "PRAGMA foreign_key_check")
            problems += orphans.map { "a row of \($0[0] as String? ?? "?") refers to a missing \($0[2] as String? ?? "?")" }
            return problems
        }
    }

    // MARK: hosts

    public func hosts() async throws -> [HostRecord] {
        try await pool.read { db in try Row.fetchAll(db, sql: "SELECT * FROM host ORDER BY createdAt, id").map(Self.host) }
    }

    public func host(id: HostID) async throws -> HostRecord? {
        try await pool.read { db in try Row.fetchOne(db, sql: "SELECT * FROM host WHERE id = ?", arguments: [id]).map(Self.host) }
    }

    /// - Throws: `invalidArgument` when another host has the same name.
    public func save(_ host: HostRecord) async throws {
        let auth = String(decoding: try JSONEncoder().encode(host.authentication), as: UTF8.self)
        let openSSH = try host.openSSH.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
        try await pool.write { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM host WHERE name = ? AND id != ?", arguments: [host.name, host.id]) == true {
                throw AgentError(.invalidArgument, "a host named \(host.name) exists already")
            }
            try db.execute(sql: """
                INSERT INTO host (id, name, address, port, user, authentication, jumpHost, hostKeyFingerprint, tmuxSocket,
                                  createdAt, openSSH)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(id) DO UPDATE SET
                    name = excluded.name, address = excluded.address, port = excluded.port,
                    user = excluded.user, authentication = excluded.authentication,
                    jumpHost = excluded.jumpHost, hostKeyFingerprint = excluded.hostKeyFingerprint,
                    tmuxSocket = excluded.tmuxSocket, createdAt = excluded.createdAt, openSSH = excluded.openSSH
                """, arguments: [host.id, host.name, host.address, host.port, host.user, auth, host.jumpHost,
                                 host.hostKeyFingerprint, host.tmuxSocket, host.createdAt.timeIntervalSinceReferenceDate,
                                 openSSH])
        }
    }

    public func deleteHost(id: HostID) async throws {
        try await pool.write { db in try db.execute(sql: "DELETE FROM host WHERE id = ?", arguments: [id]) }
    }

    // MARK: projects

    public func projects(hostID: HostID?) async throws -> [ProjectRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM project WHERE ?1 IS NULL OR hostID = ?1 ORDER BY createdAt, id",
                             arguments: [hostID]).map(Self.project)
        }
    }

    public func project(id: ProjectID) async throws -> ProjectRecord? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM project WHERE id = ?", arguments: [id]).map(Self.project)
        }
    }

    public func save(_ project: ProjectRecord) async throws {
        try await pool.write { db in
            try Self.requireParent(db, "host", project.hostID)
            try db.execute(sql: """
                INSERT INTO project (id, hostID, name, path, defaultBaseRef, createdAt, setupCommand, teardownCommand, fetchesBase)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(id) DO UPDATE SET
                    hostID = excluded.hostID, name = excluded.name, path = excluded.path,
                    defaultBaseRef = excluded.defaultBaseRef, createdAt = excluded.createdAt,
                    setupCommand = excluded.setupCommand, teardownCommand = excluded.teardownCommand,
                    fetchesBase = excluded.fetchesBase
                """, arguments: [project.id, project.hostID, project.name, project.path, project.defaultBaseRef,
                                 project.createdAt.timeIntervalSinceReferenceDate, project.setupCommand, project.teardownCommand,
                                 project.fetchesBase])
        }
    }

    public func deleteProject(id: ProjectID) async throws {
        try await pool.write { db in try db.execute(sql: "DELETE FROM project WHERE id = ?", arguments: [id]) }
    }

    // MARK: tasks

    public func tasks(projectID: ProjectID?) async throws -> [TaskRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM task WHERE ?1 IS NULL OR projectID = ?1 ORDER BY createdAt, id",
                             arguments: [projectID]).map(Self.task)
        }
    }

    public func task(id: TaskID) async throws -> TaskRecord? {
        try await pool.read { db in try Row.fetchOne(db, sql: "SELECT * FROM task WHERE id = ?", arguments: [id]).map(Self.task) }
    }

    public func save(_ task: TaskRecord) async throws {
        let w = task.worktree
        try await pool.write { db in
            try Self.requireParent(db, "project", task.projectID)
            try db.execute(sql: """
                INSERT INTO task (id, projectID, title, worktreeName, projectPath, worktreePath, branch, baseRef, baseCommit, createdAt,
                                  archivedAt, prompt, port, attemptGroup, attemptLabel, attemptPickedAt)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(id) DO UPDATE SET
                    projectID = excluded.projectID, title = excluded.title,
                    worktreeName = excluded.worktreeName, projectPath = excluded.projectPath,
                    worktreePath = excluded.worktreePath, branch = excluded.branch,
                    baseRef = excluded.baseRef, baseCommit = excluded.baseCommit,
                    createdAt = excluded.createdAt, archivedAt = excluded.archivedAt, prompt = excluded.prompt,
                    port = excluded.port, attemptGroup = excluded.attemptGroup, attemptLabel = excluded.attemptLabel,
                    attemptPickedAt = excluded.attemptPickedAt
                """, arguments: [task.id, task.projectID, task.title, w.name, w.projectPath, w.path, w.branch, w.baseRef,
                                 w.baseCommit, task.createdAt.timeIntervalSinceReferenceDate, task.archivedAt?.timeIntervalSinceReferenceDate,
                                 task.prompt, task.port, task.attempt?.group, task.attempt?.label,
                                 task.attempt?.pickedAt?.timeIntervalSinceReferenceDate])
        }
    }

    public func deleteTask(id: TaskID) async throws {
        try await pool.write { db in try db.execute(sql: "DELETE FROM task WHERE id = ?", arguments: [id]) }
    }

    // MARK: conversations

    public func conversations(taskID: TaskID) async throws -> [ConversationRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM conversation WHERE taskID = ? ORDER BY createdAt, id",
                             arguments: [taskID]).map(Self.conversation)
        }
    }

    public func conversation(id: ChatID) async throws -> ConversationRecord? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM conversation WHERE id = ?", arguments: [id]).map(Self.conversation)
        }
    }

    public func save(_ c: ConversationRecord) async throws {
        let args = String(decoding: try JSONEncoder().encode(c.arguments), as: UTF8.self)
        try await pool.write { db in
            try Self.requireParent(db, "task", c.taskID)
            try db.execute(sql: """
                INSERT INTO conversation (id, taskID, providerID, kind, autoApprove, arguments, survivesDisconnect, state, createdAt, lastStartedAt)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(id) DO UPDATE SET
                    taskID = excluded.taskID, providerID = excluded.providerID, kind = excluded.kind,
                    autoApprove = excluded.autoApprove, arguments = excluded.arguments,
                    survivesDisconnect = excluded.survivesDisconnect, state = excluded.state,
                    createdAt = excluded.createdAt, lastStartedAt = excluded.lastStartedAt
                """, arguments: [c.id, c.taskID, c.providerID, c.kind.rawValue, c.autoApprove, args, c.survivesDisconnect,
                                 Self.encode(c.state), c.createdAt.timeIntervalSinceReferenceDate, c.lastStartedAt?.timeIntervalSinceReferenceDate])
        }
    }

    public func deleteConversation(id: ChatID) async throws {
        try await pool.write { db in try db.execute(sql: "DELETE FROM conversation WHERE id = ?", arguments: [id]) }
    }

    // MARK: terminal logs

    public func appendTerminalLog(_ log: TerminalLogRecord) async throws {
        try await pool.write { db in
            try Self.requireParent(db, "conversation", log.conversationID)
            try db.execute(sql: "INSERT INTO terminalLog (conversationID, capturedAt, text) VALUES (?, ?, ?)",
                           arguments: [log.conversationID, log.capturedAt.timeIntervalSinceReferenceDate, log.text])
        }
    }

    public func terminalLogs(conversationID: ChatID) async throws -> [TerminalLogRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM terminalLog WHERE conversationID = ? ORDER BY id",
                             arguments: [conversationID]).map { row in
                TerminalLogRecord(conversationID: row["conversationID"], capturedAt: Self.date(row["capturedAt"]),
                                  text: row["text"])
            }
        }
    }

    // MARK: the session map

    public func entries() async throws -> [String: AgentSessionMapEntry] {
        try await pool.read { db in
            var map: [String: AgentSessionMapEntry] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT * FROM sessionMap") {
                let strategy: String = row["strategy"]
                guard let s = AgentSessionMapEntry.Strategy(rawValue: strategy) else { continue }
                map[row["ptyID"]] = AgentSessionMapEntry(providerID: row["providerID"], workingDirectory: row["workingDirectory"],
                                                         target: row["target"], strategy: s)
            }
            return map
        }
    }

    public func set(_ entry: AgentSessionMapEntry, for ptyID: String) async throws {
        try await pool.write { db in
            try db.execute(sql: """
                INSERT INTO sessionMap (ptyID, providerID, workingDirectory, target, strategy)
                VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(ptyID) DO UPDATE SET
                    providerID = excluded.providerID, workingDirectory = excluded.workingDirectory,
                    target = excluded.target, strategy = excluded.strategy
                """, arguments: [ptyID, entry.providerID, entry.workingDirectory, entry.target, entry.strategy.rawValue])
        }
    }

    public func remove(_ ptyID: String) async throws {
        try await pool.write { db in try db.execute(sql: "DELETE FROM sessionMap WHERE ptyID = ?", arguments: [ptyID]) }
    }

    // MARK: rows

    private static func requireParent(_ db: Database, _ table: String, _ id: some RecordIdentity & DatabaseValueConvertible) throws {
        guard try Bool.fetchOne(db, sql: "SELECT 1 FROM \(table) WHERE id = ?", arguments: [id]) == true else {
            throw AgentError(.notFound, "no \(table) \(id) in the store")
        }
    }

    /// Times are stored as Foundation's reference-date seconds (since 2001-01-01 UTC), which
    /// give back the very same `Date` (Unix seconds would lose its last bits); in SQL,
    /// `datetime(createdAt + 978307200, 'unixepoch')`.
    private static func date(_ seconds: Double) -> Date { Date(timeIntervalSinceReferenceDate: seconds) }

    private static func host(_ row: Row) throws -> HostRecord {
        let auth: String = row["authentication"]
        return HostRecord(id: row["id"], name: row["name"], address: row["address"], port: row["port"], user: row["user"],
                          authentication: try JSONDecoder().decode(HostAuthentication.self, from: Data(auth.utf8)),
                          jumpHost: row["jumpHost"], hostKeyFingerprint: row["hostKeyFingerprint"],
                          tmuxSocket: row["tmuxSocket"], createdAt: date(row["createdAt"]),
                          openSSH: try (row["openSSH"] as String?).map {
                              try JSONDecoder().decode(OpenSSHHostReference.self, from: Data($0.utf8))
                          })
    }

    private static func project(_ row: Row) -> ProjectRecord {
        ProjectRecord(id: row["id"], hostID: row["hostID"], name: row["name"], path: row["path"],
                      defaultBaseRef: row["defaultBaseRef"], createdAt: date(row["createdAt"]), setupCommand: row["setupCommand"],
                      teardownCommand: row["teardownCommand"], fetchesBase: row["fetchesBase"])
    }

    private static func task(_ row: Row) -> TaskRecord {
        let archived: Double? = row["archivedAt"]
        let group: String? = row["attemptGroup"], label: String? = row["attemptLabel"], picked: Double? = row["attemptPickedAt"]
        let attempt = group.flatMap { g in label.map { TaskAttempt(group: g, label: $0, pickedAt: picked.map(date)) } }
        return TaskRecord(id: row["id"], projectID: row["projectID"], title: row["title"],
                          worktree: Worktree(name: row["worktreeName"], projectPath: row["projectPath"], path: row["worktreePath"],
                                             branch: row["branch"], baseRef: row["baseRef"], baseCommit: row["baseCommit"]),
                          createdAt: date(row["createdAt"]), archivedAt: archived.map(date), prompt: row["prompt"],
                          port: row["port"], attempt: attempt)
    }

    private static func conversation(_ row: Row) throws -> ConversationRecord {
        let args: String = row["arguments"]
        let kind: String = row["kind"]
        let started: Double? = row["lastStartedAt"]
        return ConversationRecord(id: row["id"], taskID: row["taskID"], providerID: row["providerID"],
                                  kind: AgentPTYID.Kind(rawValue: kind) ?? .chat, autoApprove: row["autoApprove"],
                                  arguments: try JSONDecoder().decode([String].self, from: Data(args.utf8)),
                                  survivesDisconnect: row["survivesDisconnect"], state: decode(row["state"]),
                                  createdAt: date(row["createdAt"]), lastStartedAt: started.map(date))
    }

    static func encode(_ state: ConversationRecord.State) -> String {
        switch state {
        case .running: "running"
        case .stopped: "stopped"
        case .gone: "gone"
        case .exited(let s): "exited:\(s)"
        case .signaled(let s): "signaled:\(s)"
        }
    }

    static func decode(_ text: String) -> ConversationRecord.State {
        let parts = text.split(separator: ":", maxSplits: 1)
        switch (parts.first, parts.count == 2 ? Int32(parts[1]) : nil) {
        case ("exited", let s?): return .exited(s)
        case ("signaled", let s?): return .signaled(s)
        case ("stopped", _): return .stopped
        case ("gone", _): return .gone
        default: return .running
        }
    }
}

// The records' identities are stored as their text.
extension HostID: DatabaseValueConvertible {
    public var databaseValue: DatabaseValue { rawValue.databaseValue }
    public static func fromDatabaseValue(_ value: DatabaseValue) -> Self? { String.fromDatabaseValue(value).map(Self.init) }
}
extension ProjectID: DatabaseValueConvertible {
    public var databaseValue: DatabaseValue { rawValue.databaseValue }
    public static func fromDatabaseValue(_ value: DatabaseValue) -> Self? { String.fromDatabaseValue(value).map(Self.init) }
}
extension TaskID: DatabaseValueConvertible {
    public var databaseValue: DatabaseValue { rawValue.databaseValue }
    public static func fromDatabaseValue(_ value: DatabaseValue) -> Self? { String.fromDatabaseValue(value).map(Self.init) }
}
extension ChatID: DatabaseValueConvertible {
    public var databaseValue: DatabaseValue { rawValue.databaseValue }
    public static func fromDatabaseValue(_ value: DatabaseValue) -> Self? { String.fromDatabaseValue(value).map(Self.init) }
}
