import AgentSessions
import AgentSessionsSQLite
import ArgumentParser
import Foundation
import SSHKit
import ServerTransport

/// Options every subcommand takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .customLong("store"), help: ArgumentHelp(
        "The store file (default: $XDG_DATA_HOME/agent-sessions/store.sqlite, else ~/.local/share/agent-sessions/store.sqlite).",
        valueName: "path"))
    var storePath: String?

    @Option(name: .customLong("config"), help: ArgumentHelp(
        "The agents' settings (default: $XDG_CONFIG_HOME/agent-sessions/config.json, else ~/.config/agent-sessions/config.json).",
        valueName: "path"))
    var configPath: String?
}

/// What a command works with: the store, the settings, the hosts' connections.
final class Context: Sendable {
    static let tool = "agent-sessions"

    let store: SQLiteAgentStore
    let storePath: String
    let config: ToolConfiguration
    let orchestrator: AgentOrchestrator
    let environment: [String: String]

    init(_ options: GlobalOptions, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        self.environment = environment
        let path = options.storePath ?? SQLiteAgentStore.defaultPath(tool: Self.tool, environment: environment)
        storePath = path
        store = try SQLiteAgentStore(path: path)
        config = try ToolConfiguration.load(options.configPath ?? ToolConfiguration.defaultPath(environment: environment))
        let config = config
        let environment = environment
        orchestrator = AgentOrchestrator(store: store, providerSettings: config.providers, searchPath: config.searchPath,
                                         screenRules: Self.screenRules(config.screenRulesPath)) { record in
            SSHTransport(configuration: try HostConnection.configuration(for: record, environment: environment),
                         serverID: record.serverID)
        }
    }

    /// The user's screen rules before the shipped ones. A file that cannot be read or
    /// parsed is reported (naming its line) and left out: the shipped rules still apply.
    static func screenRules(_ path: String?) -> AgentScreenRules {
        guard let path else { return .shipped }
        do {
            let text = try String(contentsOfFile: path, encoding: .utf8)
            return try AgentScreenRules.parse(text, origin: "user").followed(by: .shipped)
        } catch let e as AgentError {
            note("agent-sessions: \(path): \(e.message) (\(e.detail ?? "")); using the shipped screen rules only")
        } catch {
            note("agent-sessions: cannot read the screen rules \(path): \(error.localizedDescription); using the shipped ones only")
        }
        return .shipped
    }

    /// Closes every connection.
    func close() async {
        await orchestrator.close()
    }

    /// Opens the context, runs `body`, closes the connections; failures become one line
    /// and an exit status.
    static func with(_ options: GlobalOptions, _ body: (Context) async throws -> Void) async throws {
        try await running {
            let context = try Context(options)
            do {
                try await body(context)
            } catch {
                await context.close()
                throw error
            }
            await context.close()
        }
    }

    // MARK: finding records

    /// `body(value)` when there is a value (Optional.map, for async bodies).
    func optional<T, R>(_ value: T?, _ body: (T) async throws -> R) async throws -> R? {
        guard let value else { return nil }
        return try await body(value)
    }

    func host(named name: String) async throws -> HostRecord {
        let all = try await store.hosts()
        if let h = all.first(where: { $0.name == name }) ?? all.first(where: { $0.id == name }) { return h }
        throw Failure.notFound("no host named \(name); see agent-sessions hosts list")
    }

    /// A project by name (`name` or `host/name` when two hosts have one of that name) or id.
    func project(_ ref: String) async throws -> ProjectRecord {
        let hosts = try await store.hosts()
        let all = try await store.projects(hostID: nil)
        if let p = all.first(where: { $0.id == ref }) { return p }
        var matches = all.filter { $0.name == ref }
        if matches.isEmpty, let slash = ref.firstIndex(of: "/") {
            let hostName = String(ref[..<slash]), name = String(ref[ref.index(after: slash)...])
            if let h = hosts.first(where: { $0.name == hostName }) {
                matches = all.filter { $0.hostID == h.id && $0.name == name }
            }
        }
        if matches.count == 1 { return matches[0] }
        if matches.isEmpty { throw Failure.notFound("no project \(ref); see agent-sessions projects list") }
        throw Failure.usage("several hosts have a project named \(ref); say which, as host/\(ref)")
    }

    /// A task by id, unique id prefix (4 characters or more), exact title, worktree name,
    /// or the title's slug (`fix-the-flaky-test`, the worktree name without its time).
    /// One of several attempts is named `WORK/LABEL` (`fix-the-flaky-test/claude-2`); the
    /// work alone names its picked attempt.
    func task(_ ref: String) async throws -> TaskRecord {
        let all = try await store.tasks(projectID: nil)
        if let t = all.first(where: { $0.id == ref }) { return t }
        if let slash = ref.lastIndex(of: "/"), slash != ref.startIndex {
            let label = String(ref[ref.index(after: slash)...])
            let work = Self.matches(String(ref[..<slash]), in: all)
            let groups = Set(work.compactMap { $0.attempt?.group })
            if groups.count == 1, let t = all.first(where: { $0.attempt?.group == groups.first && $0.attempt?.label == label }) {
                return t
            }
        }
        var matches = Self.matches(ref, in: all).inAttemptOrder
        if matches.count > 1 { matches = matches.filter { $0.archivedAt == nil } }
        if matches.count > 1, let group = matches[0].attempt?.group, matches.allSatisfy({ $0.attempt?.group == group }) {
            if let picked = matches.first(where: { $0.attempt?.pickedAt != nil }) { return picked }
            let labels = matches.compactMap { $0.attempt?.label }
            throw Failure.usage("\(ref) names the \(labels.count) attempts of \"\(matches[0].title)\" (\(labels.joined(separator: ", "))); say which, as \(ref)/\(labels[0])")
        }
        if matches.count == 1 { return matches[0] }
        if matches.isEmpty { throw Failure.notFound("no task \(ref); see agent-sessions tasks list") }
        throw Failure.usage("\(ref) names \(matches.count) tasks; give more of the id")
    }

    /// The tasks `ref` may name: by id prefix, by the id of a group of attempts (or its
    /// prefix), else by worktree name or title, else by the title's slug.
    private static func matches(_ ref: String, in all: [TaskRecord]) -> [TaskRecord] {
        let lower = ref.lowercased()
        var matches = ref.count >= 4 ? all.filter { $0.id.hasPrefix(lower) || $0.attempt?.group.hasPrefix(lower) == true } : []
        if matches.isEmpty { matches = all.filter { $0.worktree.name == ref || $0.title == ref } }
        if matches.isEmpty { matches = all.filter { AgentNaming.slug($0.title) == ref } }
        return matches
    }

    /// The attempts `ref` names: a group's id (or prefix), one of its attempts, or a title
    /// that only its attempts have.
    func attempts(_ ref: String) async throws -> [TaskRecord] {
        let all = try await store.tasks(projectID: nil)
        var matches = all.first(where: { $0.id == ref }).map { [$0] } ?? Self.matches(ref, in: all)
        if matches.isEmpty, let slash = ref.lastIndex(of: "/") { matches = Self.matches(String(ref[..<slash]), in: all) }
        if matches.isEmpty { throw Failure.notFound("no task \(ref); see agent-sessions tasks list") }
        let groups = Set(matches.compactMap { $0.attempt?.group })
        if groups.isEmpty {
            throw Failure.refused("the task \(matches[0].title) is not one of several attempts (tasks new --agents makes them)")
        }
        if groups.count > 1 { throw Failure.usage("\(ref) names tasks of \(groups.count) different works; give more of the id") }
        return all.filter { $0.attempt?.group == groups.first }.inAttemptOrder
    }

    /// A task's conversation: the main one, or a chat by id prefix, provider or number (1 = main).
    func conversation(of task: TaskRecord, _ ref: String?) async throws -> ConversationRecord {
        let all = try await store.conversations(taskID: task.id)
        guard let ref else {
            guard let main = all.first(where: { $0.kind == .main }) ?? all.first else {
                throw Failure.notFound("the task \(task.title) has no agent")
            }
            return main
        }
        if let n = Int(ref), n >= 1, n <= all.count { return all[n - 1] }
        let byID = ref.count >= 4 ? all.filter { $0.id.hasPrefix(ref.lowercased()) } : []
        if byID.count == 1 { return byID[0] }
        let byProvider = all.filter { $0.providerID == ref }
        if byProvider.count == 1 { return byProvider[0] }
        if byProvider.count > 1 { throw Failure.usage("the task has \(byProvider.count) \(ref) chats; give the chat's number or id") }
        throw Failure.notFound("the task \(task.title) has no chat \(ref); see agent-sessions tasks show \(short(task.id))")
    }

    /// The task's project and host.
    func context(of task: TaskRecord) async throws -> (ProjectRecord, HostRecord) {
        guard let project = try await store.project(id: task.projectID) else {
            throw Failure.notFound("the project of the task \(task.title) is gone from the store")
        }
        return (project, try await host(of: project))
    }

    func host(of project: ProjectRecord) async throws -> HostRecord {
        guard let host = try await store.host(id: project.hostID) else {
            throw Failure.notFound("the host of the project \(project.name) is gone from the store")
        }
        return host
    }
}

/// The first 8 characters of an id, as lists show it.
func short(_ id: String) -> String { String(id.prefix(8)) }
