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
            let plan = try await claudeSessions.plan(ptyID: ptyID, workingDirectory: workingDirectory, isResume: isResume,
                                                  map: map, configDirectory: environment["CLAUDE_CONFIG_DIR"])
            switch plan.resume {
            case .exact(let args) where args.first == "--resume": return AgentResumePlan(resume: plan.resume, method: .exact(args[1]))
            case .exact: return AgentResumePlan(resume: plan.resume, method: isResume ? .anew("Claude has no transcript of its session") : .new)
            case .generic: return generic
            case .fresh: return AgentResumePlan(resume: .fresh, method: .new)
            }
        case .codexThread:
            guard isResume else { return AgentResumePlan(resume: .fresh, method: .new) }
            let resume = try await codexThreads.plan(ptyID: ptyID, workingDirectory: workingDirectory, map: map,
                                                   codexHome: environment["CODEX_HOME"])
            if case .exact(let args) = resume, let id = args.last { return AgentResumePlan(resume: resume, method: .exact(id)) }
            return generic
        case .chosenSessionID(let flag, let store):
            let id = ptyID.sessionUUID
            let resume = AgentLaunch.Resume.exact([flag, id])
            guard isResume else { return AgentResumePlan(resume: resume, method: .new) }
            let existed = try await recordedSessions.exists(store, id: id, workingDirectory: workingDirectory, environment: environment)
            return AgentResumePlan(resume: resume, method: existed ? .exact(id) : .anew("its session \(id) was never used (no prompt reached it)"))
        case .recordedSession(let flag, let store):
            guard isResume else { return AgentResumePlan(resume: .fresh, method: .new) }
            let key = ptyID.description
            let all = try await map.entries()
            let sessions: [RecordedAgentSession]
            do {
                sessions = try await recordedSessions.sessions(store, workingDirectory: workingDirectory, environment: environment)
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
}
