import Foundation
import SSHKit
import ServerTransport

/// How a Claude Code start continues (or begins) its conversation: Emdash's decision
/// tree, with the transcript checked on the host before choosing the flag.
public struct ClaudeResumePlan: Sendable, Equatable {
    public enum Reason: String, Sendable, Equatable {
        /// The map knows this terminal's session.
        case knownSession
        /// A further chat of the task: its own session, from its conversation id.
        case additionalChat
        /// The task's main chat resumed while other Claude chats share its directory: it
        /// adopts its earlier session (the newest transcript no other chat claims).
        case mainChatBecomingMultiChat
        /// The task's first start: a session id chosen up front.
        case firstMainStart
        /// A resume with nothing known: the provider's generic flags.
        case genericResume
    }

    public var reason: Reason
    /// `.exact(["--resume", id])` when the transcript exists on the host,
    /// `.exact(["--session-id", id])` when it does not, or `.generic`.
    public var resume: AgentLaunch.Resume
    /// The session UUID, when one was chosen.
    public var sessionID: String?
}

/// Claude Code's sessions on a host: its transcripts (one `.jsonl` per session, in a
/// folder per working directory) and how a start continues one.
public struct ClaudeSessionFinder: Sendable {
    let shell: HostShell

    /// Where Claude Code keeps its transcripts for `workingDirectory` on this host:
    /// `<config dir>/projects/<cwd with every non-alphanumeric character as '-'>`.
    /// `configDirectory` is `CLAUDE_CONFIG_DIR` when set, else `~/.claude`.
    public func projectDirectory(workingDirectory: String, configDirectory: String? = nil) async throws(AgentError) -> String {
        let config = try await shell.absolutePath(configDirectory ?? "~/.claude")
        return "\(config)/projects/\(AgentNaming.claudeProjectDirectory(forWorkingDirectory: workingDirectory))"
    }

    /// Whether Claude's transcript of `sessionID` for `workingDirectory` exists on the host.
    public func transcriptExists(sessionID: String, workingDirectory: String, configDirectory: String? = nil)
        async throws(AgentError) -> Bool
    {
        let dir = try await projectDirectory(workingDirectory: workingDirectory, configDirectory: configDirectory)
        do {
            return try await shell.transport.fileExists("\(dir)/\(sessionID).jsonl")
        } catch {
            throw AgentError(error, while: "looking for a Claude transcript")
        }
    }

    /// Decides how Claude starts in the terminal `ptyID`, records the choice in `map`,
    /// and picks the flag from what is on the host: `--resume <uuid>` when the
    /// transcript exists, `--session-id <uuid>` when it does not (`--session-id` on an
    /// existing transcript fails as "already in use"; `--resume` on a missing one as
    /// "No conversation found").
    /// - Parameters:
    ///   - workingDirectory: absolute.
    ///   - isResume: the terminal ran before (the task is being resumed).
    ///   - configDirectory: `CLAUDE_CONFIG_DIR` of the agent's environment, if set.
    public func plan(ptyID: AgentPTYID, workingDirectory: String, isResume: Bool,
                                 map: any AgentSessionMapStore, configDirectory: String? = nil)
        async throws -> ClaudeResumePlan
    {
        let key = ptyID.description
        let all = try await map.entries()
        let transcriptExists = { (id: String) async throws(AgentError) -> Bool in
            try await self.transcriptExists(sessionID: id, workingDirectory: workingDirectory,
                                                  configDirectory: configDirectory)
        }
        func plan(_ reason: ClaudeResumePlan.Reason, _ id: String) async throws -> ClaudeResumePlan {
            try await map.set(AgentSessionMapEntry(providerID: ptyID.providerID, workingDirectory: workingDirectory,
                                                   target: id, strategy: .claudeSessionID), for: key)
            let flag = try await transcriptExists(id) ? "--resume" : "--session-id"
            return ClaudeResumePlan(reason: reason, resume: .exact([flag, id]), sessionID: id)
        }

        if let known = all[key], known.strategy == .claudeSessionID {
            if known.workingDirectory == workingDirectory { return try await plan(.knownSession, known.target) }
            try await map.remove(key)  // it belongs to another directory: stale
        }
        let own = ptyID.sessionUUID
        if ptyID.kind == .chat { return try await plan(.additionalChat, own) }
        let siblings = all.filter { $0.key != key && $0.value.providerID == ptyID.providerID
            && $0.value.workingDirectory == workingDirectory && $0.value.strategy == .claudeSessionID }
        if isResume && !siblings.isEmpty {
            let claimed = Set(siblings.values.map(\.target))
            let adopted = try await newestTranscript(workingDirectory: workingDirectory, excluding: claimed,
                                                           configDirectory: configDirectory)
            return try await plan(.mainChatBecomingMultiChat, adopted ?? own)
        }
        if !isResume { return try await plan(.firstMainStart, own) }
        // a resume with nothing recorded: our own id if its transcript is there, else generic
        if try await transcriptExists(own) { return try await plan(.knownSession, own) }
        return ClaudeResumePlan(reason: .genericResume, resume: .generic, sessionID: nil)
    }

    /// The newest transcript (by modification time) in the directory's Claude project
    /// folder whose id is not in `excluding`; one remote command.
    func newestTranscript(workingDirectory: String, excluding: Set<String>, configDirectory: String?)
        async throws(AgentError) -> String?
    {
        let dir = try await projectDirectory(workingDirectory: workingDirectory, configDirectory: configDirectory)
        let r = try await shell.run("/bin/sh", ["-c", "cd \"$1\" 2>/dev/null && ls -t -- *.jsonl 2>/dev/null; exit 0", "sh", dir],
                              what: "listing Claude transcripts")
        for line in r.stdoutString.split(separator: "\n") where line.hasSuffix(".jsonl") {
            let id = String(line.dropLast(6))
            if !excluding.contains(id) { return id }
        }
        return nil
    }

}

/// Codex's threads on a host, in its state database (`~/.codex/state_5.sqlite`), and how a
/// start continues one.
public struct CodexThreadFinder: Sendable {
    let shell: HostShell

    /// The path of Codex's state database on the host (`$CODEX_HOME` moves `~/.codex`).
    public func statePath(codexHome: String? = nil) async throws(AgentError) -> String {
        try await shell.absolutePath(codexHome ?? "~/.codex") + "/state_5.sqlite"
    }

    /// How Codex resumes the terminal `ptyID`: `codex resume <thread id>` when the map
    /// has its thread and Codex still knows it for this directory (not archived), else
    /// `resume --last`.
    public func plan(ptyID: AgentPTYID, workingDirectory: String, map: any AgentSessionMapStore,
                                codexHome: String? = nil) async throws -> AgentLaunch.Resume
    {
        guard let entry = try await map.entries()[ptyID.description], entry.strategy == .codexThreadID,
              entry.workingDirectory == workingDirectory
        else { return .generic }
        let rows = try await threads(
            where: "id = \(SQL.string(entry.target)) AND cwd = \(SQL.string(workingDirectory)) AND archived = 0",
            codexHome: codexHome)
        return rows.isEmpty ? .generic : .exact(["resume", entry.target])
    }

    /// After a fresh Codex start in `workingDirectory` at `startedAt`: the id of the thread
    /// it created (the newest one of that directory since 15 s before the start that no
    /// other terminal claims), recorded in `map`. Polls Codex's state database through
    /// the transport's SQLite snapshot every 500 ms for up to `timeout`; nil if none came.
    public func bind(ptyID: AgentPTYID, workingDirectory: String, startedAt: Date,
                                map: any AgentSessionMapStore, codexHome: String? = nil,
                                timeout: Duration = .seconds(20)) async throws -> String?
    {
        let claimed = Set(try await map.entries().filter { $0.key != ptyID.description && $0.value.strategy == .codexThreadID }
            .map(\.value.target))
        let since = Int64(startedAt.timeIntervalSince1970) - 15
        let deadline = ContinuousClock.now + timeout
        while true {
            let rows = (try? await threads(
                where: "cwd = \(SQL.string(workingDirectory)) AND archived = 0 AND (created_at >= \(since) OR updated_at >= \(since))",
                codexHome: codexHome)) ?? []
            if let id = rows.first(where: { !claimed.contains($0) }) {
                try await map.set(AgentSessionMapEntry(providerID: ptyID.providerID, workingDirectory: workingDirectory,
                                                       target: id, strategy: .codexThreadID), for: ptyID.description)
                return id
            }
            if ContinuousClock.now >= deadline { return nil }
            try await Task.sleep(for: .milliseconds(500))
        }
    }

    /// Thread ids matching `condition`, newest first, from a snapshot of Codex's state
    /// database queried with this machine's `sqlite3` (read-only).
    func threads(where condition: String, codexHome: String?) async throws -> [String] {
        let path = try await statePath(codexHome: codexHome)
        let taken: Result<SQLiteSnapshot, TransportError>
        do throws(TransportError) {
            taken = .success(try await shell.transport.snapshotSQLite(path))
        } catch {
            taken = .failure(error)
        }
        if case .failure(let e) = taken, e.isNoSuchFile { return [] }
        let snapshot = try taken.get()
        let query = "SELECT id FROM threads WHERE \(condition) ORDER BY updated_at DESC, created_at DESC;"
        let r = try await LocalTransport().runProcess("sqlite3", arguments: ["-readonly", snapshot.path, query], stdin: [],
                                                      environment: [:], timeout: .seconds(20))
        try r.check("sqlite3 on Codex's state database")
        return r.stdoutString.split(separator: "\n").map(String.init).filter { !$0.isEmpty }
    }

}

/// The sessions Vibe, Hermes and Kimi record themselves, found on the host: each agent's
/// own files, read the way it writes them.
public struct RecordedSessionFinder: Sendable {
    let shell: HostShell

    /// The sessions `store` records for `workingDirectory`, oldest first.
    func sessions(_ store: AgentProvider.RecordedSessions, workingDirectory: String, environment: [String: String])
        async throws(AgentError) -> [RecordedAgentSession]
    {
        switch store {
        case .vibe:
            // one line per session: id, start time, directory (meta.json is written one
            // key per line; no JSON parser is needed on the host)
            let script = """
                for f in "$1"/logs/session/unified/*/meta.json; do
                    [ -f "$f" ] || continue
                    v() { sed -n "s/^ *\\"$1\\": *\\"\\\\([^\\"]*\\\\)\\".*/\\\\1/p" "$f" | head -n 1; }
                    printf '%s\\t%s\\t%s\\n' "$(v session_id)" "$(v start_time)" "$(v working_directory)"
                done
                exit 0
                """
            let home = try await shell.absolutePath(environment["VIBE_HOME"] ?? "~/.vibe")
            let r = try await shell.run("/bin/sh", ["-c", script, "sh", home], what: "listing Vibe's sessions")
            return r.stdoutString.split(separator: "\n").compactMap { line -> RecordedAgentSession? in
                let f = line.split(separator: "\t", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
                guard f.count == 3, !f[0].isEmpty, f[2] == workingDirectory else { return nil }
                return RecordedAgentSession(id: f[0], started: Self.isoDate(f[1]))
            }.sorted { ($0.started ?? .distantPast) < ($1.started ?? .distantPast) }
        case .hermes:
            let path = try await shell.absolutePath(environment["HERMES_HOME"] ?? "~/.hermes") + "/state.db"
            let rows = try await sqliteRows(path, "SELECT id, started_at FROM sessions WHERE cwd = \(SQL.string(workingDirectory)) "
                + "ORDER BY started_at;", what: "Hermes's sessions")
            return rows.compactMap { row in
                let f = row.split(separator: "|", maxSplits: 1).map(String.init)
                guard let id = f.first, !id.isEmpty else { return nil }
                return RecordedAgentSession(id: id, started: f.count == 2 ? Double(f[1]).map(Date.init(timeIntervalSince1970:)) : nil)
            }
        case .kimi:
            return []
        }
    }

    /// Whether the session `id` exists in `store` (Kimi: its directory under the
    /// directory's hash).
    func exists(_ store: AgentProvider.RecordedSessions, id: String, workingDirectory: String,
                               environment: [String: String]) async throws(AgentError) -> Bool
    {
        switch store {
        case .kimi:
            let share = try await shell.absolutePath(environment["KIMI_SHARE_DIR"] ?? "~/.kimi")
            let script = "[ -d \"$1/sessions/$(printf %s \"$2\" | md5sum | cut -c1-32)/$3\" ] && echo yes; exit 0"
            let r = try await shell.run("/bin/sh", ["-c", script, "sh", share, workingDirectory, id], what: "looking for Kimi's session")
            return r.stdoutString.hasPrefix("yes")
        case .vibe, .hermes:
            return try await sessions(store, workingDirectory: workingDirectory, environment: environment)
                .contains { $0.id == id }
        }
    }

    /// Rows of `query` on a snapshot of the SQLite database at `path` on the host, read
    /// with this machine's `sqlite3`; none when the database does not exist yet.
    func sqliteRows(_ path: String, _ query: String, what: String) async throws(AgentError) -> [String] {
        let snapshot: SQLiteSnapshot
        do {
            snapshot = try await shell.transport.snapshotSQLite(path)
        } catch {
            if error.isNoSuchFile { return [] }
            throw AgentError(error, while: "reading \(what)")
        }
        let r: ProcessResult
        do {
            r = try await LocalTransport().runProcess("sqlite3", arguments: ["-readonly", snapshot.path, query], stdin: [],
                                                      environment: [:], timeout: .seconds(20))
        } catch {
            throw AgentError(error, while: "reading \(what) with sqlite3")
        }
        guard r.exitStatus == .exited(0) else {
            throw AgentError(.transport, "sqlite3 could not read \(what)", detail: r.stderrString)
        }
        return r.stdoutString.split(separator: "\n").map(String.init).filter { !$0.isEmpty }
    }

    /// An ISO 8601 time, its fractions of a second dropped (`2026-11-27T23:50:54.123456+00:00`),
    /// UTC when it names no zone.
    static func isoDate(_ text: String) -> Date? {
        var t = text.replacingOccurrences(of: #"\.[0-9]+"#, with: "", options: .regularExpression)
        if t.count == 19 { t += "Z" }
        return ISO8601DateFormatter().date(from: t)
    }
}

/// SQL text for the agents' databases, read with `sqlite3`.
enum SQL {
    /// A SQL string literal ('' for each '). Byte-wise: a quote followed by a combining
    /// mark is one Character, which a Character-wise replacement would leave alone.
    static func string(_ s: String) -> String {
        let bytes = s.utf8.flatMap { $0 == UInt8(ascii: "'") ? [$0, $0] : [$0] }
        return "'" + String(decoding: bytes, as: UTF8.self) + "'"
    }
}
