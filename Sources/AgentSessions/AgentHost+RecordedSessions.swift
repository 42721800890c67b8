import Foundation
import ServerTransport

/// How a start continued the conversation before it, as decided: what the user is told.
public enum AgentResumeMethod: Sendable, Hashable, CustomStringConvertible {
    /// A new conversation: a first start.
    case new
    /// The conversation with this id, named on the command line.
    case exact(String)
    /// The agent's own "the newest conversation here" arguments (`--continue`).
    case newestInDirectory
    /// A new conversation although a resume was asked for, and why.
    case anew(String)

    public var description: String {
        switch self {
        case .new: return "started"
        case .exact(let id): return "resumed its conversation \(id)"
        case .newestInDirectory: return "resumed the newest conversation of its directory (its own was not found)"
        case .anew(let why): return "started anew: \(why)"
        }
    }
}

/// How a start is made, and why.
public struct AgentResumePlan: Sendable, Equatable {
    public var resume: AgentLaunch.Resume
    public var method: AgentResumeMethod
}

/// One session an agent recorded on the host.
struct RecordedAgentSession: Sendable, Equatable {
    var id: String
    var started: Date?
}

extension AgentHost {
    /// Decides how the agent of `ptyID` starts, by how the provider keeps its sessions
    /// (`AgentProvider.SessionTracking`), never by its name.
    /// - Parameters:
    ///   - provider: with the user's settings applied.
    ///   - isResume: the terminal ran before.
    ///   - previousStart: when it was last started, if ever.
    ///   - onlyChatOfItsAgent: no other chat of this provider shares the worktree, so "the
    ///     newest conversation here" is this chat's.
    ///   - environment: the agent's environment (`CLAUDE_CONFIG_DIR`, `VIBE_HOME`, …).
    public func planResume(ptyID: AgentPTYID, provider: AgentProvider, workingDirectory: String, isResume: Bool,
                           previousStart: Date?, onlyChatOfItsAgent: Bool, map: any AgentSessionMapStore,
                           environment: [String: String]) async throws -> AgentResumePlan
    {
        let generic = AgentResumePlan(resume: .generic, method: .newestInDirectory)
        switch provider.sessionTracking {
        case .claudeSessionID:
            let plan = try await planClaudeResume(ptyID: ptyID, workingDirectory: workingDirectory, isResume: isResume,
                                                  map: map, configDirectory: environment["CLAUDE_CONFIG_DIR"])
            switch plan.resume {
            case .exact(let args) where args.first == "--resume": return AgentResumePlan(resume: plan.resume, method: .exact(args[1]))
            case .exact: return AgentResumePlan(resume: plan.resume, method: isResume ? .anew("Claude has no transcript of its session") : .new)
            case .generic: return generic
            case .fresh: return AgentResumePlan(resume: .fresh, method: .new)
            }
        case .codexThread:
            guard isResume else { return AgentResumePlan(resume: .fresh, method: .new) }
            let resume = try await planCodexResume(ptyID: ptyID, workingDirectory: workingDirectory, map: map,
                                                   codexHome: environment["CODEX_HOME"])
            if case .exact(let args) = resume, let id = args.last { return AgentResumePlan(resume: resume, method: .exact(id)) }
            return generic
        case .chosenSessionID(let flag, let store):
            let id = ptyID.sessionUUID
            let resume = AgentLaunch.Resume.exact([flag, id])
            guard isResume else { return AgentResumePlan(resume: resume, method: .new) }
            let existed = try await recordedSessionExists(store, id: id, workingDirectory: workingDirectory, environment: environment)
            return AgentResumePlan(resume: resume, method: existed ? .exact(id) : .anew("its session \(id) was never used (no prompt reached it)"))
        case .recordedSession(let flag, let store):
            guard isResume else { return AgentResumePlan(resume: .fresh, method: .new) }
            let key = ptyID.description
            let all = try await map.entries()
            let sessions: [RecordedAgentSession]
            do {
                sessions = try await recordedSessions(store, workingDirectory: workingDirectory, environment: environment)
            } catch {
                if onlyChatOfItsAgent && !provider.resumeArguments.isEmpty { return generic }
                return AgentResumePlan(resume: .fresh, method: .anew("its sessions could not be read: \(error.message)"))
            }
            if let known = all[key], known.strategy == .recordedSessionID, known.workingDirectory == workingDirectory,
               sessions.contains(where: { $0.id == known.target })
            {
                return AgentResumePlan(resume: .exact([flag, known.target]), method: .exact(known.target))
            }
            let claimed = Set(all.filter { $0.key != key && $0.value.strategy == .recordedSessionID }.map(\.value.target))
            let free = sessions.filter { !claimed.contains($0.id) }
            // the session this chat's last start made: the first to start after it
            var found = previousStart.flatMap { since in
                free.filter { ($0.started ?? .distantPast) >= since.addingTimeInterval(-15) }
                    .min { ($0.started ?? .distantPast) < ($1.started ?? .distantPast) }
            }
            if found == nil && onlyChatOfItsAgent { found = free.last }
            guard let found else {
                if onlyChatOfItsAgent && !provider.resumeArguments.isEmpty && !sessions.isEmpty { return generic }
                return AgentResumePlan(resume: .fresh, method: .anew("no session of it is recorded for this worktree (it never got a prompt)"))
            }
            try await map.set(AgentSessionMapEntry(providerID: ptyID.providerID, workingDirectory: workingDirectory,
                                                   target: found.id, strategy: .recordedSessionID), for: key)
            return AgentResumePlan(resume: .exact([flag, found.id]), method: .exact(found.id))
        case .none:
            guard isResume else { return AgentResumePlan(resume: .fresh, method: .new) }
            if !provider.resumeArguments.isEmpty { return generic }
            return AgentResumePlan(resume: .fresh, method: .anew("this agent cannot resume"))
        }
    }

    /// The sessions `store` records for `workingDirectory`, oldest first.
    func recordedSessions(_ store: AgentProvider.RecordedSessions, workingDirectory: String, environment: [String: String])
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
            let home = try await absolutePath(environment["VIBE_HOME"] ?? "~/.vibe")
            let r = try await run("/bin/sh", ["-c", script, "sh", home], what: "listing Vibe's sessions")
            return r.stdoutString.split(separator: "\n").compactMap { line -> RecordedAgentSession? in
                let f = line.split(separator: "\t", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
                guard f.count == 3, !f[0].isEmpty, f[2] == workingDirectory else { return nil }
                return RecordedAgentSession(id: f[0], started: Self.isoDate(f[1]))
            }.sorted { ($0.started ?? .distantPast) < ($1.started ?? .distantPast) }
        case .hermes:
            let path = try await absolutePath(environment["HERMES_HOME"] ?? "~/.hermes") + "/state.db"
            let rows = try await sqliteRows(path, "SELECT id, started_at FROM sessions WHERE cwd = \(Self.sqlString(workingDirectory)) "
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
    func recordedSessionExists(_ store: AgentProvider.RecordedSessions, id: String, workingDirectory: String,
                               environment: [String: String]) async throws(AgentError) -> Bool
    {
        switch store {
        case .kimi:
            let share = try await absolutePath(environment["KIMI_SHARE_DIR"] ?? "~/.kimi")
            let script = "[ -d \"$1/sessions/$(printf %s \"$2\" | md5sum | cut -c1-32)/$3\" ] && echo yes; exit 0"
            let r = try await run("/bin/sh", ["-c", script, "sh", share, workingDirectory, id], what: "looking for Kimi's session")
            return r.stdoutString.hasPrefix("yes")
        case .vibe, .hermes:
            return try await recordedSessions(store, workingDirectory: workingDirectory, environment: environment)
                .contains { $0.id == id }
        }
    }

    /// Rows of `query` on a snapshot of the SQLite database at `path` on the host, read
    /// with this machine's `sqlite3`; none when the database does not exist yet.
    func sqliteRows(_ path: String, _ query: String, what: String) async throws(AgentError) -> [String] {
        let snapshot: SQLiteSnapshot
        do {
            snapshot = try await transport.snapshotSQLite(path)
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
