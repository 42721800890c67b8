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

    let storePath: String
    let config: ToolConfiguration
    let orchestrator: AgentOrchestrator
    let environment: [String: String]

    /// - Parameter agentsStartedHere: variables every agent this context starts gets in
    ///   its environment (beside its provider's own).
    init(_ options: GlobalOptions, environment: [String: String] = ProcessInfo.processInfo.environment,
         agentsStartedHere: [String: String] = [:]) throws {
        self.environment = environment
        let path = Self.storePath(options, environment: environment)
        storePath = path
        let store = try SQLiteAgentStore(path: path)
        config = try ToolConfiguration.load(options.configPath ?? ToolConfiguration.defaultPath(environment: environment))
        let config = config
        let environment = environment
        var providers = config.providers
        if !agentsStartedHere.isEmpty {
            for id in Set(AgentProvider.all.map(\.id)).union(providers.keys) {
                providers[id, default: AgentProviderSettings()].environment.merge(agentsStartedHere) { own, _ in own }
            }
        }
        orchestrator = AgentOrchestrator(store: store, providerSettings: providers, searchPath: config.searchPath,
                                         screenRules: Self.screenRules(config.screenRulesPath),
                                         landingTimeout: config.landingTimeout) { record in
            SSHTransport(configuration: try HostConnection.configuration(for: record, environment: environment),
                         serverID: record.serverID)
        }
    }

    /// Where the store is: `--store`, else its place under the user's data directory.
    static func storePath(_ options: GlobalOptions,
                          environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        options.storePath ?? SQLiteAgentStore.defaultPath(tool: Self.tool, environment: environment)
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
    static func with(_ options: GlobalOptions, agentsStartedHere: [String: String] = [:],
                     _ body: (Context) async throws -> Void) async throws {
        try await running {
            let context = try Context(options, agentsStartedHere: agentsStartedHere)
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

    // What the user typed, resolved by the engine (`AgentRecords`).
    var records: AgentRecords { orchestrator.records }

    func host(named name: String) async throws -> HostRecord { try await records.host(named: name) }

    /// A project by name (`name` or `host/name` when two hosts have one of that name) or id.
    func project(_ ref: String) async throws -> ProjectRecord { try await records.project(named: ref) }

    /// A task by id, id prefix, title, worktree name, slug, or `WORK/LABEL` for an attempt.
    func task(_ ref: String) async throws -> TaskRecord { try await records.task(named: ref) }

    /// The attempts `ref` names.
    func attempts(_ ref: String) async throws -> [TaskRecord] { try await records.attempts(named: ref) }

    /// A task's conversation: the main one, or a chat by id prefix, provider or number (1 = main).
    func conversation(of task: TaskRecord, _ ref: String?) async throws -> ConversationRecord {
        try await records.chat(of: task, named: ref)
    }

    /// The task's project and host.
    func context(of task: TaskRecord) async throws -> (ProjectRecord, HostRecord) {
        let (p, h) = try await records.placeOf(task)
        return (p, h)
    }

    func host(of project: ProjectRecord) async throws -> HostRecord { try await records.host(project.hostID) }
}

/// The first 8 characters of an id, as lists show it.
func short(_ id: some RecordIdentity) -> String { id.short }

/// The first 8 characters of a group's id.
func short(_ id: String) -> String { String(id.prefix(8)) }
