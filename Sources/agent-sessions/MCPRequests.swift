import AgentSessions
import Foundation
import TerminalSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A start an MCP client asked for that waits for the user's yes (the settings' `mcp.ask`).
struct MCPRequest: Codable, Sendable, Equatable {
    var id: String
    var at: Date
    /// No answer by then is no.
    var expires: Date
    /// The MCP client's name, as it gave it.
    var client: String
    var host: String
    var project: String
    var title: String
    var agent: String
    var prompt: String?
    /// Whether the agent would approve its own actions.
    var autoApprove: Bool?

    /// `kimi on build-1/app: "Fix the tests"`.
    var what: String { "\(agent)\(autoApprove == true ? " (approving its own actions)" : "") on \(host)/\(project): \"\(title)\"" }
}

/// The answer to a request: written once (the first of the user and the time limit wins).
struct MCPAnswer: Codable, Sendable, Equatable {
    enum Outcome: String, Codable, Sendable { case yes, no, expired }
    var outcome: Outcome
    var at: Date
    /// Who answered: `command`, `cockpit`, or `time` for an expired request.
    var by: String
}

/// The requests waiting for the user's yes, in `mcp-requests/` beside the store (a 0700
/// directory): `ID.json` each, written whole by the server that waits on it, and
/// `ID.answer`, made once (O_EXCL) by whoever answers first: `mcp allow`/`mcp deny`, the
/// cockpit, or the waiting server when the time is up. Requests older than a week are
/// cleared when a new one is made.
struct MCPRequests: Sendable {
    let directory: String

    init(storePath: String) {
        directory = (storePath as NSString).deletingLastPathComponent + "/mcp-requests"
    }

    private static var encoder: JSONEncoder {
        let e = JSONEncoder()
        e.dateEncodingStrategy = .iso8601
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return e
    }

    private static var decoder: JSONDecoder {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .iso8601
        return d
    }

    /// Writes a new request (and clears the week-old ones).
    func create(_ request: MCPRequest) throws {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            let data = try Self.encoder.encode(request)
            let tmp = "\(directory)/\(request.id).json.tmp"
            guard FileManager.default.createFile(atPath: tmp, contents: data, attributes: [.posixPermissions: 0o600]) else {
                throw Failure(.storage, "cannot write \(tmp)")
            }
            guard rename(tmp, "\(directory)/\(request.id).json") == 0 else {
                throw Failure(.storage, "cannot write the request in \(directory): \(String(cString: strerror(errno)))")
            }
        } catch let f as Failure {
            throw f
        } catch {
            throw Failure(.storage, "cannot write the request in \(directory): \(error.localizedDescription)")
        }
        let old = Date().addingTimeInterval(-7 * 86_400)
        for r in all() where r.request.at < old {
            try? FileManager.default.removeItem(atPath: "\(directory)/\(r.request.id).json")
            try? FileManager.default.removeItem(atPath: "\(directory)/\(r.request.id).answer")
        }
    }

    /// Every request with its answer, oldest first.
    func all() -> [(request: MCPRequest, answer: MCPAnswer?)] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasSuffix(".json") }.compactMap { name -> (MCPRequest, MCPAnswer?)? in
            guard let data = FileManager.default.contents(atPath: "\(directory)/\(name)"),
                  let r = try? Self.decoder.decode(MCPRequest.self, from: data) else { return nil }
            return (r, answer(r.id))
        }.sorted { $0.0.at < $1.0.at }
    }

    /// The requests with no answer whose time is not up.
    func pending(now: Date = Date()) -> [MCPRequest] {
        all().filter { $0.answer == nil && $0.request.expires > now }.map(\.request)
    }

    func answer(_ id: String) -> MCPAnswer? {
        FileManager.default.contents(atPath: "\(directory)/\(id).answer").flatMap { try? Self.decoder.decode(MCPAnswer.self, from: $0) }
    }

    /// Answers the request whose id starts with `prefix`: the request, the answer it now
    /// has, and whether this call gave it (not when someone answered first, or the time
    /// was up: then it is `expired`).
    /// - Throws: no such request, or several match.
    func answer(_ prefix: String, _ outcome: MCPAnswer.Outcome, by: String) throws -> (MCPRequest, MCPAnswer, made: Bool) {
        let matches = all().filter { $0.request.id.hasPrefix(prefix) }
        guard !prefix.isEmpty, let first = matches.first else {
            throw Failure(.notFound, "no MCP request \(prefix) (agent-sessions mcp requests lists those that wait)")
        }
        guard matches.count == 1 else {
            throw Failure.usage("\(prefix) is the start of \(matches.count) requests' ids: \(matches.map(\.request.id).joined(separator: ", "))")
        }
        if let a = first.answer { return (first.request, a, false) }
        let given = outcome != .expired && first.request.expires <= Date()
            ? MCPAnswer(outcome: .expired, at: Date(), by: "time") : MCPAnswer(outcome: outcome, at: Date(), by: by)
        let stored = try store(first.request.id, given)
        return (first.request, stored, stored == given && given.outcome == outcome)
    }

    /// Makes the answer file; when one is there already, that one.
    private func store(_ id: String, _ answer: MCPAnswer) throws -> MCPAnswer {
        let path = "\(directory)/\(id).answer"
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            if errno == EEXIST, let existing = self.answer(id) { return existing }
            throw Failure(.storage, "cannot answer the request: \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        let data = (try? Self.encoder.encode(answer)) ?? Data()
        _ = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        return answer
    }

    /// Makes the request, tells the user through `channels`, and waits for the answer
    /// (told to `progress` every 10 s); the time being up is no.
    func ask(_ request: MCPRequest, channels: [NotificationSettings.Channel],
             progress: (@Sendable (Double, Double?, String) async -> Void)?) async throws -> MCPAnswer {
        try create(request)
        await tell(request, channels: channels)
        let limit = request.expires.timeIntervalSince(request.at)
        var told = Date.distantPast
        while true {
            if let a = answer(request.id) { return a }
            if Date() >= request.expires { return try answer(request.id, .expired, by: "time").1 }
            if let progress, Date().timeIntervalSince(told) >= 10 {
                let waited = Date().timeIntervalSince(request.at)
                await progress(waited.rounded(), limit, "waiting for the user's yes to start \(request.what) (\(Int(waited)) s)")
                told = Date()
            }
            do {
                try await Task.sleep(for: .milliseconds(200))
            } catch {
                // the client went away: the request is taken back
                _ = try? answer(request.id, .no, by: "client gone")
                throw error
            }
        }
    }

    /// Sends the request on each channel but the terminal (the server's terminal is its
    /// client's), once each; a channel that fails is written to stderr.
    func tell(_ request: MCPRequest, channels: [NotificationSettings.Channel]) async {
        let body = "\(request.client) asks to start \(request.what)"
            + (request.prompt.map { ", asking: \(TerminalWidth.truncate($0.replacingOccurrences(of: "\n", with: " "), to: 200))" } ?? "")
            + ". agent-sessions mcp allow \(request.id) (or deny \(request.id)), or Y in the cockpit;"
            + " no answer in \(Int(request.expires.timeIntervalSince(request.at))) s is no."
        let json: JSONValue = .object([
            "schemaVersion": .int(1), "kind": .string("mcp-request"), "request": .string(request.id),
            "client": .string(request.client), "host": .string(request.host), "project": .string(request.project),
            "title": .string(request.title), "agent": .string(request.agent),
            "prompt": request.prompt.map(JSONValue.string) ?? .null, "expires": .date(request.expires), "autoApprove": .bool(request.autoApprove ?? false),
        ])
        let line = String(decoding: (try? JSONSerialization.data(withJSONObject: json.any, options: [.sortedKeys, .withoutEscapingSlashes]))
            ?? Data("{}".utf8), as: UTF8.self)
        let message = NotificationMessage(
            title: "agent-sessions · start \(request.agent) on \(request.host)?", body: body, urgent: true, tags: ["question"],
            json: line, environment: ["AGENT_SESSIONS_EVENT": line, "AGENT_SESSIONS_MCP_REQUEST": request.id,
                                      "AGENT_SESSIONS_HOST": request.host, "AGENT_SESSIONS_AGENT": request.agent,
                                      "AGENT_SESSIONS_TITLE": request.title, "AGENT_SESSIONS_TEXT": body])
        let config = URLSessionConfiguration.ephemeral
        config.timeoutIntervalForRequest = 10
        let session = URLSession(configuration: config)
        for channel in channels {
            if case .terminal = channel.kind { continue }
            do {
                try await Notifier.deliver(message, to: channel, session: session)
            } catch {
                note("agent-sessions mcp: \(channel.name): the request could not be sent: \(error)")
            }
        }
    }
}
