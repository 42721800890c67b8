import AgentSessions
import Foundation

/// What an MCP client of `agent-sessions mcp` may use, from the settings file's `mcp`:
///
///     "mcp": {"hosts": ["build-1"], "projects": ["app", "build-1/web"],
///             "agents": ["claude", "codex"], "maxRunning": 4,
///             "ask": true, "askSeconds": 300, "workers": false}
///
/// A list left out allows all. `maxRunning`: at most this many tasks started through MCP
/// with an agent running at once (default 8; 0 starts none). The tools see only the
/// allowed hosts' and projects' tasks. `ask`: each start waits for the user's yes
/// (`mcp allow`, or the cockpit), told through the notification channels; no answer within
/// `askSeconds` (default 300) is no. `workers`: whether an agent started through MCP may
/// itself start agents through an `agent-sessions mcp` it runs (default no: its server
/// refuses `start_task`).
struct MCPPolicy: Sendable {
    static let defaultMaxRunning = 8
    static let defaultAskSeconds = 300

    /// The variable every agent started through MCP has in its environment.
    static let workerVariable = "AGENT_SESSIONS_MCP_WORKER"

    var hosts: [String]?
    /// Names, or `HOST/NAME`.
    var projects: [String]?
    var agents: [String]?
    var maxRunning = Self.defaultMaxRunning
    var ask = false
    var askSeconds = Self.defaultAskSeconds
    var workers = false

    struct File: Decodable {
        var hosts: [String]?
        var projects: [String]?
        var agents: [String]?
        var maxRunning: Int?
        var ask: Bool?
        var askSeconds: Int?
        var workers: Bool?
    }

    func allows(host: HostRecord) -> Bool { hosts.map { $0.contains(host.name) } ?? true }

    func allows(project: ProjectRecord, on host: HostRecord) -> Bool {
        guard allows(host: host) else { return false }
        return projects.map { $0.contains(project.name) || $0.contains("\(host.name)/\(project.name)") } ?? true
    }

    /// Refuses a project outside the policy.
    func check(project: ProjectRecord, on host: HostRecord) throws {
        guard allows(project: project, on: host) else {
            throw Failure(.refused, "the project \(host.name)/\(project.name) is not one the MCP settings allow "
                + "(mcp.hosts and mcp.projects in the settings file)")
        }
    }

    /// Refuses a start from a server that runs inside an agent started through MCP, unless
    /// workers may start agents. The agent has `workerVariable` in its environment; an
    /// agent's MCP client may start its servers with a few variables only (the MCP SDKs'
    /// default), so the processes above this one are looked at too.
    func checkNotAWorker(environment: [String: String]) throws {
        guard !workers, environment[Self.workerVariable] != nil || Self.anAncestorIsAWorker() else { return }
        throw Failure(.refused, "this MCP server runs inside an agent that was itself started through MCP, and the MCP "
            + "settings do not let such workers start agents (mcp.workers in the settings file)")
    }

    /// Whether a process above this one (its parent, and theirs, to the first) has
    /// `workerVariable` in its environment, as /proc shows it.
    static func anAncestorIsAWorker() -> Bool {
        var pid = getppid()
        let marker = Array((workerVariable + "=").utf8)
        for _ in 0..<64 where pid > 1 {
            if let environ = FileManager.default.contents(atPath: "/proc/\(pid)/environ") {
                for entry in environ.split(separator: 0) where entry.starts(with: marker) { return true }
            }
            // the parent's parent: the field after the command's closing parenthesis and the state
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return false }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 1, let parent = Int32(fields[1]) else { return false }
            pid = parent
        }
        return false
    }

    func check(agent: String) throws {
        guard agents.map({ $0.contains(agent) }) ?? true else {
            throw Failure(.refused, "the agent \(agent) is not one the MCP settings allow: \(agents!.joined(separator: ", "))")
        }
    }
}

/// Every call of an MCP client, one JSON line each (0600), beside the store:
/// `mcp-audit.jsonl`. `agent-sessions mcp log` prints it.
struct MCPAudit: Sendable {
    let path: String

    init(storePath: String) {
        path = (storePath as NSString).deletingLastPathComponent + "/mcp-audit.jsonl"
    }

    struct Entry: Codable, Sendable {
        var at: Date
        var tool: String
        var arguments: [String: String]
        var ok: Bool
        /// The task the call was about, when there was one.
        var task: String?
        /// The error's message, for a call that failed.
        var error: String?
        var milliseconds: Int
        /// The MCP client's name, as it gave it.
        var client: String?
    }

    /// Appends an entry (a line written whole, so servers running at once do not mix).
    func record(_ entry: Entry) {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard var line = try? encoder.encode(entry) else { return }
        line.append(UInt8(ascii: "\n"))
        try? FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                 withIntermediateDirectories: true)
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            note("agent-sessions: cannot write the MCP audit log \(path): \(String(cString: strerror(errno)))")
            return
        }
        defer { close(fd) }
        _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    /// The entries, oldest first (a line that does not parse is left out).
    func entries() throws -> [Entry] {
        guard FileManager.default.fileExists(atPath: path) else { return [] }
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw Failure(.storage, "cannot read the MCP audit log \(path): \(error.localizedDescription)")
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return text.split(separator: "\n").compactMap { try? decoder.decode(Entry.self, from: Data($0.utf8)) }
    }

    /// The tasks started through MCP (their ids, oldest first).
    func startedTasks() throws -> [String] {
        try entries().filter { $0.tool == "start_task" && $0.ok }.compactMap(\.task)
    }
}
