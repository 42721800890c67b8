import AgentSessions
import Foundation

/// The user's settings for the agents, from a JSON file (optional):
///
///     {
///       "searchPath": ["/opt/agents/bin"],
///       "providers": {
///         "claude": { "binary": "/opt/agents/claude", "extraArguments": ["--model", "opus"],
///                     "environment": { "CLAUDE_CONFIG_DIR": "/srv/claude" } }
///       }
///     }
///
/// `searchPath`: directories looked in for agents on every host, before the login-like
/// PATH. `notifications`: where `watch` sends transitions (`NotificationSettings`).
/// `mcp`: what an MCP client of `agent-sessions mcp` may use (`MCPPolicy`).
/// `landingSeconds`: how long a commit, push, merge or pull request may run on a host
/// (their hooks run there; default 600).
/// `screenRules`: a file of the user's own screen rules (default: `screen-rules` beside
/// this file). Per provider: `binary`, `defaultArguments`, `autoApproveFlag` ("" removes it),
/// `resumeArguments`, `extraArguments`, `environment`, `continueAfterLimit` (seconds after a
/// usage limit resets that new tasks type "continue"; absent: they wait for the user).
struct ToolConfiguration: Sendable {
    var searchPath: [String] = []
    var providers: [String: AgentProviderSettings] = [:]
    /// Where `watch` sends transitions (see `NotificationSettings`).
    var notifications = NotificationSettings()
    /// The user's own screen rules (`screenRules`; default: `screen-rules` beside the
    /// settings file, when it exists).
    var screenRulesPath: String?
    /// What an MCP client may use (`mcp`).
    var mcp = MCPPolicy()
    /// How long a commit, push, merge or pull request may run on a host (`landingSeconds`).
    var landingTimeout: Duration = AgentOrchestrator.defaultLandingTimeout

    /// Every provider of the registry with the user's settings applied (what detection
    /// looks for and what starts).
    var allProviders: [AgentProvider] { AgentProvider.all.map { providers[$0.id]?.applied(to: $0) ?? $0 } }

    static func defaultPath(environment: [String: String]) -> String {
        let base: String
        if let xdg = environment["XDG_CONFIG_HOME"], xdg.hasPrefix("/") {
            base = xdg
        } else {
            base = (environment["HOME"] ?? NSHomeDirectory()) + "/.config"
        }
        return base + "/agent-sessions/config.json"
    }

    private struct File: Decodable {
        struct Provider: Decodable {
            var binary: String?
            var defaultArguments: [String]?
            var autoApproveFlag: String?
            var resumeArguments: [String]?
            var extraArguments: [String]?
            var environment: [String: String]?
            var continueAfterLimit: Int?
        }
        var searchPath: [String]?
        var providers: [String: Provider]?
        var notifications: NotificationSettings.File?
        var screenRules: String?
        var mcp: MCPPolicy.File?
        var landingSeconds: Int?
    }

    /// The settings at `path`; none when the file does not exist.
    /// - Throws: `Failure` (storage) for a file that cannot be read or is not valid.
    static func load(_ path: String) throws -> ToolConfiguration {
        let rulesBeside = (path as NSString).deletingLastPathComponent + "/screen-rules"
        guard FileManager.default.fileExists(atPath: path) else {
            var config = ToolConfiguration()
            config.screenRulesPath = FileManager.default.fileExists(atPath: rulesBeside) ? rulesBeside : nil
            return config
        }
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
        } catch let e as DecodingError {
            throw Failure(.storage, "the settings file \(path) is not valid: \(Self.describe(e))")
        } catch {
            throw Failure(.storage, "cannot read the settings file \(path): \(error.localizedDescription)")
        }
        var config = ToolConfiguration()
        config.searchPath = file.searchPath ?? []
        do {
            config.notifications = try NotificationSettings(file.notifications)
        } catch {
            throw Failure(.storage, "the settings file \(path): \(error.message)")
        }
        if let n = file.landingSeconds {
            guard (1...86_400).contains(n) else {
                throw Failure(.storage, "the settings file \(path): landingSeconds is from 1 to 86400")
            }
            config.landingTimeout = .seconds(n)
        }
        config.screenRulesPath = file.screenRules ?? (FileManager.default.fileExists(atPath: rulesBeside) ? rulesBeside : nil)
        if let m = file.mcp {
            for id in m.agents ?? [] where !AgentProvider.all.contains(where: { $0.id == id }) {
                throw Failure(.storage, "the settings file \(path), mcp: an unknown agent \(id)")
            }
            if let n = m.maxRunning, n < 0 { throw Failure(.storage, "the settings file \(path), mcp: maxRunning is 0 or more") }
            if let n = m.askSeconds, !(10...86_400).contains(n) {
                throw Failure(.storage, "the settings file \(path), mcp: askSeconds is from 10 to 86400")
            }
            config.mcp = MCPPolicy(hosts: m.hosts, projects: m.projects, agents: m.agents, maxRunning: m.maxRunning ?? MCPPolicy.defaultMaxRunning,
                                   ask: m.ask ?? false, askSeconds: m.askSeconds ?? MCPPolicy.defaultAskSeconds,
                                   workers: m.workers ?? false)
        }
        for (id, p) in file.providers ?? [:] {
            guard AgentProvider.all.contains(where: { $0.id == id }) else {
                throw Failure(.storage, "the settings file \(path) names an unknown agent \(id)")
            }
            let settings = AgentProviderSettings(binary: p.binary, defaultArguments: p.defaultArguments,
                                                 autoApproveFlag: p.autoApproveFlag, resumeArguments: p.resumeArguments,
                                                 extraArguments: p.extraArguments ?? [], environment: p.environment ?? [:],
                                                 continueAfterLimit: p.continueAfterLimit.map { .seconds($0) })
            do {
                try settings.validate()
            } catch {
                throw Failure(.storage, "the settings file \(path), agent \(id): \(error.message)")
            }
            config.providers[id] = settings
        }
        return config
    }

    private static func describe(_ e: DecodingError) -> String {
        switch e {
        case .dataCorrupted(let c): return c.debugDescription
        case .keyNotFound(let k, _): return "missing \(k.stringValue)"
        case .typeMismatch(_, let c), .valueNotFound(_, let c):
            return "wrong type at \(c.codingPath.map(\.stringValue).joined(separator: "."))"
        @unknown default: return "\(e)"
        }
    }
}
