import AgentSessions
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where `agent-sessions watch` sends the transitions that need someone, from the
/// settings file's `notifications`:
///
///     "notifications": {
///       "hold": 2,
///       "states": ["waiting", "done", "exited", "lost"],
///       "channels": [
///         { "type": "terminal" },
///         { "type": "desktop" },
///         { "type": "ntfy", "url": "https://ntfy.sh/my-agents", "token": "tk_…" },
///         { "type": "webhook", "url": "https://example.com/agents", "headers": { "Authorization": "Bearer …" } },
///         { "type": "command", "command": ["/usr/local/bin/on-agent", "--quiet"] }
///       ]
///     }
///
/// `hold`: seconds a state must hold before it is sent (a question answered at once is
/// not sent). `states`: which states are sent. A channel's `name` (default: its type,
/// numbered when repeated) keys where it is in each host's events.
struct NotificationSettings: Sendable {
    enum Kind: Sendable {
        /// OSC 9 and OSC 777 notifications and the bell, on the terminal `watch` runs in
        /// (through tmux's passthrough inside tmux).
        case terminal
        /// `notify-send`.
        case desktop
        /// An HTTP POST of the text to an ntfy topic URL (title, priority and tags as
        /// ntfy's headers; `token` as a bearer token).
        case ntfy(url: URL, token: String?)
        /// An HTTP POST of the event as JSON.
        case webhook(url: URL, headers: [String: String])
        /// A program run with the event as JSON on stdin and in AGENT_SESSIONS_* variables.
        case command([String])
    }

    struct Channel: Sendable {
        var name: String
        var kind: Kind
    }

    static let allStates: Set<String> = ["starting", "working", "waiting", "done", "idle", "exited", "stopped", "lost"]

    var hold: Duration = .seconds(2)
    var states: Set<String> = ["waiting", "done", "exited", "lost"]
    var channels: [Channel] = [Channel(name: "terminal", kind: .terminal)]

    struct File: Decodable {
        struct Channel: Decodable {
            var type: String
            var name: String?
            var url: String?
            var token: String?
            var headers: [String: String]?
            var command: [String]?
        }
        var hold: Double?
        var states: [String]?
        var channels: [Channel]?
    }

    /// The defaults: the terminal, after 2 s, for waiting, done, exited and lost.
    init() {}

    /// The settings a file's `notifications` describes.
    /// - Throws: a message naming what is wrong.
    init(_ file: File?) throws(Failure) {
        guard let file else { return }
        func bad(_ why: String) -> Failure { Failure(.storage, "notifications: \(why)") }
        if let hold = file.hold {
            guard hold >= 0 && hold <= 3600 else { throw bad("hold must be from 0 to 3600 seconds") }
            self.hold = .milliseconds(Int(hold * 1000))
        }
        if let states = file.states {
            for s in states where !Self.allStates.contains(s) {
                throw bad("no state is called '\(s)' (\(Self.allStates.sorted().joined(separator: ", ")))")
            }
            self.states = Set(states)
        }
        guard let list = file.channels else { return }
        var channels: [Channel] = []
        var counts: [String: Int] = [:]
        for (i, c) in list.enumerated() {
            func url() throws(Failure) -> URL {
                guard let text = c.url, let u = URL(string: text), ["http", "https"].contains(u.scheme ?? "") else {
                    throw bad("channel \(i + 1) (\(c.type)) needs an http or https url")
                }
                return u
            }
            let kind: Kind
            switch c.type {
            case "terminal": kind = .terminal
            case "desktop": kind = .desktop
            case "ntfy": kind = .ntfy(url: try url(), token: c.token)
            case "webhook": kind = .webhook(url: try url(), headers: c.headers ?? [:])
            case "command":
                guard let argv = c.command, let first = argv.first, !first.isEmpty else {
                    throw bad("channel \(i + 1) (command) needs a command: [\"program\", \"argument\", …]")
                }
                kind = .command(argv)
            default:
                throw bad("channel \(i + 1): no channel type is called '\(c.type)' (terminal, desktop, ntfy, webhook, command)")
            }
            counts[c.type, default: 0] += 1
            let name = c.name ?? (counts[c.type]! > 1 ? "\(c.type)-\(counts[c.type]!)" : c.type)
            guard !channels.contains(where: { $0.name == name }) else { throw bad("two channels are called '\(name)'") }
            channels.append(Channel(name: name, kind: kind))
        }
        self.channels = channels
    }
}

/// One transition as `watch` and `events` report it.
struct NotificationEvent: Sendable {
    var event: AgentStatusEvent
    var host: HostRecord
    var conversation: ConversationRecord?
    var task: TaskRecord?
    var project: ProjectRecord?

    var stateName: String { event.status.activity.name }

    /// `build-1 · repo · Fix the tests: kimi is waiting for input: Approve once?`
    var title: String {
        var parts = [host.name]
        if let project { parts.append(project.name) }
        if let task { parts.append(task.title) }
        return parts.joined(separator: " · ")
    }

    var agent: String { conversation?.providerID ?? event.ptyID?.providerID ?? event.session }

    var body: String {
        let s = event.status
        switch s.activity {
        case .waitingForInput: return "\(agent) is waiting for input" + (s.question.map { ": \($0)" } ?? "")
        case .done: return "\(agent) is done with its turn"
        case .exited(let code): return "\(agent) exited (status \(code))"
        case .lost: return "\(agent) is gone (its session ended without a stop)"
        case .stopped: return "\(agent) was stopped"
        case .idle: return "\(agent) is idle"
        case .working: return "\(agent) is working"
        case .starting: return "\(agent) is starting"
        }
    }

    /// The JSON document of the event (`schemaVersion` 1).
    var json: JSONValue {
        let s = event.status
        var exit: JSONValue = .null
        if case .exited(let code) = s.activity { exit = .int(Int(code)) }
        return .object([
            "schemaVersion": .int(1),
            "host": .string(host.name), "hostID": .id(host.id),
            "log": .string(event.cursor.log), "sequence": .int(event.cursor.sequence),
            "session": .string(event.session),
            "conversation": conversation.map { .id($0.id) } ?? .null,
            "task": task.map { .object(["id": .id($0.id), "title": .string($0.title), "branch": .string($0.worktree.branch)]) } ?? .null,
            "project": project.map { .string($0.name) } ?? .null,
            "agent": .string(agent),
            "state": .string(stateName), "exitStatus": exit,
            "source": .string(s.source.rawValue), "rule": s.rule.map(JSONValue.string) ?? .null,
            "question": s.question.map(JSONValue.string) ?? .null,
            "since": .date(s.since),
        ])
    }

    var jsonLine: String {
        let data = (try? JSONSerialization.data(withJSONObject: json.any, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}

/// Where each channel is in each host's events (`watch-cursors.json` beside the store),
/// so a restarted `watch` sends each transition once.
struct WatchCursors: Sendable {
    /// channel name → host id → cursor.
    var channels: [String: [String: AgentEventCursor]] = [:]
    let path: String

    init(path: String) {
        self.path = path
        if let data = FileManager.default.contents(atPath: path),
           let decoded = try? JSONDecoder().decode([String: [String: AgentEventCursor]].self, from: data)
        {
            channels = decoded
        }
    }

    /// Where reading a host's events starts: the earliest channel's cursor (nil: none
    /// has one, only new events are read).
    func start(host: HostID, channels names: [String]) -> AgentEventCursor? {
        let all = names.compactMap { channels[$0]?[host.rawValue] }
        guard let first = all.first else { return nil }
        let sameLog = all.filter { $0.log == first.log }
        return sameLog.min { $0.sequence < $1.sequence }
    }

    /// Whether `channel` has handled `cursor` already.
    func handled(_ cursor: AgentEventCursor, channel: String, host: HostID) -> Bool {
        guard let c = channels[channel]?[host.rawValue], c.log == cursor.log else { return false }
        return cursor.sequence <= c.sequence
    }

    mutating func set(_ cursor: AgentEventCursor, channel: String, host: HostID) {
        channels[channel, default: [:]][host.rawValue] = cursor
    }

    /// Written through a temporary file, so a crash never leaves half a file.
    func save() {
        guard let data = try? JSONEncoder().encode(channels) else { return }
        let tmp = path + ".tmp"
        if FileManager.default.createFile(atPath: tmp, contents: data, attributes: [.posixPermissions: 0o600]) {
            _ = rename(tmp, path)
        }
    }
}

/// Sends events to the channels: each channel in its own queue, in order, retried with a
/// growing pause when it fails (1, 2, 4, 8, 16 s, then given up with a message), so a
/// channel that is down holds up only itself.
actor Notifier {
    let settings: NotificationSettings
    private var cursors: WatchCursors
    private var queues: [String: AsyncStream<Item>.Continuation] = [:]
    private var workers: [Task<Void, Never>] = []
    private let log: @Sendable (String) -> Void
    private let session: URLSession

    enum Item: Sendable {
        /// Send it, then mark the host's cursor.
        case send(NotificationEvent)
        /// Only mark the cursor (a transition not sent, or one a later one replaced).
        case skip(AgentEventCursor, host: HostID)
    }

    init(settings: NotificationSettings, cursorsPath: String, log: @escaping @Sendable (String) -> Void) {
        self.settings = settings
        cursors = WatchCursors(path: cursorsPath)
        self.log = log
        let config = URLSessionConfiguration.ephemeral
        config.timeoutIntervalForRequest = 10
        session = URLSession(configuration: config)
    }

    func start() {
        for channel in settings.channels {
            let (stream, continuation) = AsyncStream<Item>.makeStream()
            queues[channel.name] = continuation
            workers.append(Task { await self.run(channel, stream) })
        }
    }

    /// Where to read each host from.
    func startCursors(hosts: [HostRecord]) -> [HostID: AgentEventCursor] {
        var all: [HostID: AgentEventCursor] = [:]
        for h in hosts {
            if let c = cursors.start(host: h.id, channels: settings.channels.map(\.name)) { all[h.id] = c }
        }
        return all
    }

    /// The host's events begin at `cursor`: a channel with no cursor there starts here.
    func connected(_ host: HostRecord, at cursor: AgentEventCursor) {
        var changed = false
        for c in settings.channels where cursors.channels[c.name]?[host.id.rawValue]?.log != cursor.log {
            cursors.set(cursor, channel: c.name, host: host.id)
            changed = true
        }
        if changed { cursors.save() }
    }

    /// Whether some channel has not handled the event yet (a restarted watch reads on
    /// from the channel furthest behind).
    func isNew(_ e: NotificationEvent) -> Bool {
        settings.channels.contains { !cursors.handled(e.event.cursor, channel: $0.name, host: e.host.id) }
    }

    func enqueue(_ item: Item) {
        for c in settings.channels { queues[c.name]?.yield(item) }
    }

    private var stopping = false

    /// Ends the queues: a delivery under way ends (and its place is kept), nothing after
    /// it starts, so a stopped watch sends each transition once when started again.
    func stop() async {
        stopping = true
        for q in queues.values { q.finish() }
        for w in workers { await w.value }
    }

    private func advance(_ cursor: AgentEventCursor, channel: String, host: HostID) {
        cursors.set(cursor, channel: channel, host: host)
        cursors.save()
    }

    private func alreadyHandled(_ cursor: AgentEventCursor, channel: String, host: HostID) -> Bool {
        cursors.handled(cursor, channel: channel, host: host)
    }

    private func run(_ channel: NotificationSettings.Channel, _ items: AsyncStream<Item>) async {
        for await item in items {
            if stopping { return }
            switch item {
            case .skip(let cursor, let host):
                if !alreadyHandled(cursor, channel: channel.name, host: host) { advance(cursor, channel: channel.name, host: host) }
            case .send(let e):
                guard !alreadyHandled(e.event.cursor, channel: channel.name, host: e.host.id) else { continue }
                var pause = Duration.seconds(1)
                var attempt = 1
                while true {
                    do {
                        try await deliver(e, to: channel)
                        break
                    } catch {
                        if attempt == 5 {
                            log("agent-sessions watch: \(channel.name): gave up on \(e.title): \(error)")
                            break
                        }
                        log("agent-sessions watch: \(channel.name): \(error); trying again in \(pause)")
                        let until = ContinuousClock.now + pause
                        while ContinuousClock.now < until && !stopping { try? await Task.sleep(for: .milliseconds(100)) }
                        if stopping { return }
                        pause *= 2
                        attempt += 1
                    }
                }
                advance(e.event.cursor, channel: channel.name, host: e.host.id)
            }
        }
    }

    struct DeliveryError: Error, CustomStringConvertible {
        var description: String
    }

    private func deliver(_ e: NotificationEvent, to channel: NotificationSettings.Channel) async throws {
        try await Self.deliver(e.message, to: channel, session: session)
    }

    /// Sends one message on one channel (a failure thrown as `DeliveryError`).
    static func deliver(_ m: NotificationMessage, to channel: NotificationSettings.Channel, session: URLSession) async throws {
        switch channel.kind {
        case .terminal:
            TerminalNotification.write(title: m.title, body: m.body)
        case .desktop:
            try run(["notify-send", "--app-name=agent-sessions", "--urgency=\(m.urgent ? "critical" : "normal")", m.title, m.body],
                    stdin: nil, environment: [:])
        case .ntfy(let url, let token):
            var r = URLRequest(url: url)
            r.httpMethod = "POST"
            r.httpBody = Data(m.body.utf8)
            r.setValue(m.title, forHTTPHeaderField: "Title")
            r.setValue(m.urgent ? "4" : "3", forHTTPHeaderField: "Priority")
            r.setValue((["agent-sessions"] + m.tags).joined(separator: ","), forHTTPHeaderField: "Tags")
            if let token { r.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
            try await post(r, session: session)
        case .webhook(let url, let headers):
            var r = URLRequest(url: url)
            r.httpMethod = "POST"
            r.httpBody = Data(m.json.utf8)
            r.setValue("application/json", forHTTPHeaderField: "Content-Type")
            for (k, v) in headers { r.setValue(v, forHTTPHeaderField: k) }
            try await post(r, session: session)
        case .command(let argv):
            try run(argv, stdin: Data((m.json + "\n").utf8), environment: m.environment)
        }
    }

    private static func post(_ request: URLRequest, session: URLSession) async throws {
        let (_, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw DeliveryError(description: "no HTTP response") }
        guard (200..<300).contains(http.statusCode) else {
            throw DeliveryError(description: "\(request.url?.absoluteString ?? "?") answered HTTP \(http.statusCode)")
        }
    }

    /// Runs a program (found on PATH) to its end, at most 30 s.
    private static func run(_ argv: [String], stdin: Data?, environment: [String: String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = argv
        p.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let input = Pipe()
        p.standardInput = input
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        do {
            try p.run()
        } catch {
            throw DeliveryError(description: "cannot run \(argv[0]): \(error.localizedDescription)")
        }
        if let stdin { try? input.fileHandleForWriting.write(contentsOf: stdin) }
        try? input.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(30)
        while p.isRunning && Date() < deadline { usleep(20_000) }
        if p.isRunning {
            p.terminate()
            throw DeliveryError(description: "\(argv[0]) did not end within 30 s")
        }
        guard p.terminationStatus == 0 else {
            throw DeliveryError(description: "\(argv[0]) ended with status \(p.terminationStatus)"
                + (p.terminationStatus == 127 ? " (not installed?)" : ""))
        }
    }
}

/// What a channel sends: a title and a line, whether it is urgent (someone is waited on),
/// ntfy's tags, the JSON document (webhooks, a command's stdin) and a command's variables.
struct NotificationMessage: Sendable {
    var title: String
    var body: String
    var urgent: Bool
    var tags: [String]
    var json: String
    var environment: [String: String]
}

extension NotificationEvent {
    var message: NotificationMessage {
        var env = [
            "AGENT_SESSIONS_EVENT": jsonLine, "AGENT_SESSIONS_STATE": stateName, "AGENT_SESSIONS_HOST": host.name,
            "AGENT_SESSIONS_AGENT": agent, "AGENT_SESSIONS_TITLE": title, "AGENT_SESSIONS_TEXT": body,
        ]
        if let q = event.status.question { env["AGENT_SESSIONS_QUESTION"] = q }
        if let t = task { env["AGENT_SESSIONS_TASK"] = t.id.rawValue }
        return NotificationMessage(title: title, body: body, urgent: event.status.activity == .waitingForInput,
                                   tags: [stateName], json: jsonLine, environment: env)
    }
}

/// Desktop notifications through the terminal: OSC 9 (iTerm2, WezTerm, Windows Terminal,
/// Ghostty, kitty), OSC 777 (foot, rxvt, Konsole, Ghostty) and the bell, written to the
/// controlling terminal (standard output when there is none). Inside tmux each sequence
/// is wrapped for tmux's passthrough (`allow-passthrough on`), so it reaches the outer
/// terminal, also through SSH.
enum TerminalNotification {
    static func sequences(title: String, body: String, insideTmux: Bool) -> [UInt8] {
        // no control characters inside an OSC string, and no field separator in OSC 777's
        func clean(_ s: String) -> String {
            var out = String.UnicodeScalarView()
            out.append(contentsOf: s.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F && !(0x80...0x9F).contains($0.value) })
            return String(out)
        }
        let osc9 = "\u{1B}]9;\(clean(title)): \(clean(body))\u{07}"
        let osc777 = "\u{1B}]777;notify;\(clean(title).replacingOccurrences(of: ";", with: ","));"
            + "\(clean(body).replacingOccurrences(of: ";", with: ","))\u{07}"
        func passthrough(_ s: String) -> String {
            insideTmux ? "\u{1B}Ptmux;" + s.replacingOccurrences(of: "\u{1B}", with: "\u{1B}\u{1B}") + "\u{1B}\\" : s
        }
        return Array((passthrough(osc9) + passthrough(osc777) + "\u{07}").utf8)
    }

    static func write(title: String, body: String) {
        let bytes = sequences(title: title, body: body, insideTmux: ProcessInfo.processInfo.environment["TMUX"] != nil)
        let fd = open("/dev/tty", O_WRONLY | O_NOCTTY | O_CLOEXEC)
        let out = fd >= 0 ? fd : 1
        bytes.withUnsafeBytes { p in
            var off = 0
            while off < p.count {
                let n = Foundation.write(out, p.baseAddress! + off, p.count - off)
                if n <= 0 { break }
                off += n
            }
        }
        if fd >= 0 { close(fd) }
    }
}
