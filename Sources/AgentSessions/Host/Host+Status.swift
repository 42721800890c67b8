import Foundation
import SSHKit
import ServerTransport
import Synchronization

/// Status hooks and the status of running agents.
extension AgentHost {
    /// Where the hooks of `ptyID` append their events (relative to the home directory).
    static func statusFile(_ ptyID: AgentPTYID) -> String { "\(AgentLauncher.directory)/status/\(ptyID)" }

    /// The shell command a hook runs: appends `<unix seconds> <event>` to the status file
    /// and wakes the watcher. It reaches the agent as data (a settings file, a config
    /// value), never typed into a shell, prints nothing and always succeeds.
    static func hookCommand(_ ptyID: AgentPTYID, _ event: AgentHookEvent) -> String {
        "mkdir -p \"$HOME/\(AgentLauncher.directory)/status\" && printf '%s \(event.rawValue)\\n' \"$(date +%s)\" >> \"$HOME/\(statusFile(ptyID))\"; "
            + "s=${TMUX%%,*}; kill -USR1 \"$(cat \"$HOME/\(AgentStatusWatcher.directory)/tmux-${s##*/}/pid\" 2>/dev/null)\" 2>/dev/null; exit 0"
    }

    /// Claude Code's hooks for `ptyID`, as a settings document for `--settings`.
    static func claudeHookSettings(_ ptyID: AgentPTYID) -> String {
        func hooks(_ e: AgentHookEvent, matcher: String? = nil) -> [String: Any] {
            var group: [String: Any] = ["hooks": [["type": "command", "command": hookCommand(ptyID, e)]]]
            if let matcher { group["matcher"] = matcher }
            return group
        }
        let doc: [String: Any] = ["hooks": [
            "SessionStart": [hooks(.start)],
            "UserPromptSubmit": [hooks(.prompt)],
            "PreToolUse": [hooks(.tool, matcher: "*")],
            "Notification": [hooks(.notification)],
            "Stop": [hooks(.stop)],
        ]]
        let data = (try? JSONSerialization.data(withJSONObject: doc, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// Codex's `notify` program for `ptyID`, as a `-c` override (TOML): Codex runs it with
    /// a JSON argument at the end of each turn.
    static func codexNotifyOverride(_ ptyID: AgentPTYID) -> String {
        func toml(_ s: String) -> String {
            "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        return "notify=[\(toml("sh")), \(toml("-c")), \(toml(hookCommand(ptyID, .stop))), \(toml("sh"))]"
    }

    /// Gemini CLI's hooks for `ptyID`, as a settings file for `GEMINI_CLI_SYSTEM_DEFAULTS_PATH`:
    /// `SessionStart`, `BeforeAgent` (a prompt), `BeforeTool`, `Notification` (an approval
    /// it waits for), `AfterAgent` (the turn's end). Gemini has no event for a failed or
    /// cancelled turn; its screen's idle rule ends those.
    static func geminiHookSettings(_ ptyID: AgentPTYID) -> String {
        commandHookSettings(ptyID, [
            ("SessionStart", .start), ("BeforeAgent", .prompt), ("BeforeTool", .tool),
            ("Notification", .notification), ("AfterAgent", .stop),
        ])
    }

    /// Qwen Code's hooks for `ptyID`, as a settings file for `QWEN_CODE_SYSTEM_DEFAULTS_PATH`
    /// (Claude's event names; `PreToolUse` runs once a tool is allowed, `PermissionRequest`
    /// before its dialog, `StopFailure` for a turn an API error ended).
    static func qwenHookSettings(_ ptyID: AgentPTYID) -> String {
        commandHookSettings(ptyID, [
            ("SessionStart", .start), ("UserPromptSubmit", .prompt), ("PreToolUse", .tool),
            ("PermissionRequest", .approval), ("Notification", .notification), ("Stop", .stop),
            ("StopFailure", .failure),
        ])
    }

    /// `{"hooks": {Event: [{"hooks": [command]}]}}` with a named command per event (the
    /// name keeps it apart from a user's hook of the same command) and a 5 s timeout.
    private static func commandHookSettings(_ ptyID: AgentPTYID, _ events: [(String, AgentHookEvent)]) -> String {
        var hooks: [String: Any] = [:]
        for (name, event) in events {
            hooks[name] = [["hooks": [[
                "type": "command", "name": "sshkit-agents-status-\(event.rawValue)",
                "command": hookCommand(ptyID, event), "timeout": 5000,
            ] as [String: Any]]]]
        }
        let data = (try? JSONSerialization.data(withJSONObject: ["hooks": hooks], options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// The file name of OpenCode's plugin for `ptyID`: OpenCode tells plugins apart by
    /// their file's name, so it is the engine's own.
    static func openCodePluginName(_ ptyID: AgentPTYID) -> String { "sshkit-agents-status-\(ptyID).js" }

    /// OpenCode's plugin for `ptyID`: one exported function, as OpenCode loads plugins,
    /// whose hooks run the hook command (with `node:child_process`, which Bun and Node
    /// both have) for a new message (`chat.message`), a tool (`tool.execute.before`) and
    /// the events `session.idle` or an idle `session.status` (the turn's end),
    /// `permission.asked` (`permission.updated` before OpenCode 1.1), `question.asked`,
    /// their replies, and `session.error`. Events of sub-agents' sessions (those with a
    /// parent) are left out, so a sub-agent's end is never taken for the session's.
    static func openCodePlugin(_ ptyID: AgentPTYID) -> String {
        func js(_ s: String) -> String {
            let data = (try? JSONSerialization.data(withJSONObject: [s], options: [])) ?? Data("[\"\"]".utf8)
            return String(String(decoding: data, as: UTF8.self).dropFirst().dropLast())
        }
        let commands = AgentHookEvent.allCases.map { "    \(js($0.rawValue)): \(js(hookCommand(ptyID, $0))),\n" }.joined()
        return """
            // agent-sessions: the status hooks of \(ptyID), written by the engine when it started the agent
            import { spawn } from "node:child_process";

            const commands = {
            \(commands)};
            const children = new Set();

            function fire(event) {
                try {
                    spawn("/bin/sh", ["-c", commands[event]], { stdio: "ignore" }).on("error", () => {});
                } catch {}
            }

            export const SSHKitAgentsStatus = async () => ({
                event: async ({ event }) => {
                    const p = (event && event.properties) || {};
                    if (event.type === "session.created" && p.info && p.info.parentID) children.add(p.info.id);
                    const session = p.sessionID || (p.info && p.info.sessionID);
                    if (session && children.has(session)) return;
                    switch (event.type) {
                    case "session.idle": fire("stop"); break;
                    case "session.status": if (p.status && p.status.type === "idle") fire("stop"); break;
                    case "permission.asked": case "permission.updated": case "permission.v2.asked": fire("approval"); break;
                    case "question.asked": case "question.v2.asked": fire("notification"); break;
                    case "permission.replied": case "question.replied": case "question.rejected": fire("answered"); break;
                    case "session.error": fire("failure"); break;
                    }
                },
                "chat.message": async (input) => { if (!children.has(input && input.sessionID)) fire("prompt"); },
                "tool.execute.before": async (input) => { if (!children.has(input && input.sessionID)) fire("tool"); },
            });

            """
    }

    /// What installs the status hooks of the session's provider: arguments, variables, and
    /// the files they name, written on the host first (empty for providers without hooks).
    func statusHooks(_ spec: AgentSessionSpec) async throws(AgentError) -> (arguments: [String], environment: [String: String]) {
        let id = spec.ptyID
        let file: (name: String, text: String)
        switch spec.provider.statusHooks {
        case .none: return ([], [:])
        case .codexNotify: return (["-c", Self.codexNotifyOverride(id)], [:])
        case .claudeSettings: file = ("\(id).json", Self.claudeHookSettings(id))
        case .geminiSystemDefaults: file = ("\(id).gemini.json", Self.geminiHookSettings(id))
        case .qwenSystemDefaults: file = ("\(id).qwen.json", Self.qwenHookSettings(id))
        case .openCodePlugin: file = (Self.openCodePluginName(id), Self.openCodePlugin(id))
        }
        let home = try await home()
        let path = "\(home)/\(AgentLauncher.directory)/hooks/\(file.name)"
        do {
            try await transport.createDirectory("\(home)/\(AgentLauncher.directory)/hooks")
            try await transport.writeTextFile(path, file.text)
        } catch {
            throw AgentError(error, while: "writing \(spec.provider.displayName)'s hook settings")
        }
        switch spec.provider.statusHooks {
        case .claudeSettings: return (["--settings", path], [:])
        case .geminiSystemDefaults: return ([], ["GEMINI_CLI_SYSTEM_DEFAULTS_PATH": path])
        case .qwenSystemDefaults: return ([], ["QWEN_CODE_SYSTEM_DEFAULTS_PATH": path])
        case .openCodePlugin:
            let url = "file://" + path.split(separator: "/", omittingEmptySubsequences: false)
                .map { $0.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? String($0) }.joined(separator: "/")
            let config = ["$schema": "https://opencode.ai/config.json", "plugin": [url]] as [String: Any]
            let data = (try? JSONSerialization.data(withJSONObject: config, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
            return ([], ["OPENCODE_CONFIG_CONTENT": String(decoding: data, as: UTF8.self)])
        case .none, .codexNotify: return ([], [:])
        }
    }

    /// The agent's status now, from the host's watcher (started when it does not run,
    /// and its first round waited for, so the answer is current); for a plain terminal,
    /// from its process and one look at its screen with `rules`.
    public func status(of session: AgentSession, rules: AgentScreenRules = .shipped) async -> AgentStatus {
        let now = Date()
        if case .tmux(let name) = session.container, let snapshot = try? await watcherSnapshot(rules: rules) {
            if let s = snapshot.states[name] { return s }
            if let t = snapshot.sessions.first(where: { $0.name == name }), !t.isRunning {
                let code: Int32 = t.exitStatus ?? t.exitSignal.map { 128 + $0 } ?? 0
                return AgentStatus(activity: .exited(code), source: .process, since: now, rule: "pane-dead")
            }
            if !snapshot.sessions.contains(where: { $0.name == name }) {
                return AgentStatus(activity: .lost, source: .process, since: now, rule: "gone")
            }
        }
        let state: AgentProcessState
        do {
            state = try await self.state(of: session)
        } catch {
            return AgentStatus(activity: .lost, source: .process, since: now, rule: "gone")
        }
        switch state {
        case .gone: return AgentStatus(activity: .lost, source: .process, since: now, rule: "gone")
        case .exited(let code): return AgentStatus(activity: .exited(code), source: .process, since: now)
        case .signaled(let n): return AgentStatus(activity: .exited(128 + n), source: .process, since: now)
        case .running: break
        }
        if let screen = try? await screenText(session),
           let hit = rules.classify(screen: screen, providerID: session.ptyID.providerID)
        {
            return AgentStatus(activity: hit.activity, source: .screen, since: now, question: hit.question, rule: hit.rule.id)
        }
        return AgentStatus(activity: .starting, source: .process, since: now)
    }

    /// What the host's watcher knows, in one round trip (two or three the first time, to
    /// write its script and the rules): each agent session's status by session name, and
    /// the sessions of the tmux server. The watcher is started when the server has agent
    /// sessions and it does not run, or runs an older version.
    func watcherSnapshot(rules: AgentScreenRules) async throws(AgentError) -> AgentWatcherSnapshot {
        let text = rules.hostText
        let sum = CoreDigest.sha256(Array(text.utf8)).map { String(format: "%02x", $0) }.joined()
        for _ in 0..<3 {
            let r = try await run("/bin/sh", ["-c", AgentStatusWatcher.ensureScript, "sh", "\(AgentStatusWatcher.version)",
                                              tmux.socket, sum, AgentTmuxServer.sessionFormat,
                                              AgentStatusWatcher.scriptDigest],
                                  what: "asking the status watcher")
            let out = r.stdoutString
            if out.hasPrefix("N") {
                let need = out.split(separator: "\n")[0].split(separator: " ").dropFirst()
                if need.contains("script") {
                    try await installWatcherFile(AgentStatusWatcher.scriptName, AgentStatusWatcher.script, sum: nil)
                }
                if need.contains("rules") { try await installWatcherFile("tmux-\(tmux.socket)/rules", text, sum: sum) }
                continue
            }
            guard r.exitStatus == .exited(0) else {
                throw AgentError(.tmuxFailed, "the status watcher could not be asked", detail: r.stderrString)
            }
            return AgentWatcherSnapshot(parsing: out)
        }
        throw AgentError(.tmuxFailed, "the status watcher's files could not be written on \(shell.displayName)")
    }

    private func installWatcherFile(_ name: String, _ text: String, sum: String?) async throws(AgentError) {
        let r = try await run("/bin/sh", ["-c", AgentStatusWatcher.installScript, "sh", name, sum ?? ""], stdin: Array(text.utf8),
                              what: "writing the status watcher")
        guard r.exitStatus == .exited(0) else {
            throw AgentError(.transport, "the status watcher could not be written on \(shell.displayName)", detail: r.stderrString)
        }
    }

    /// Marks a session's turn as looked at (its log read, something sent): a `done`
    /// becomes `idle`. Attaching does the same by itself (the watcher sees the client).
    func markSeen(_ ptyID: AgentPTYID) async throws(AgentError) {
        let script = """
            w="$HOME/\(AgentStatusWatcher.directory(socket: tmux.socket))"; mkdir -p "$w/seen" && date +%s > "$w/seen/$1" || exit 1
            pid=$(cat "$w/pid" 2>/dev/null) && kill -USR1 "$pid" 2>/dev/null
            exit 0
            """
        _ = try await run("/bin/sh", ["-c", script, "sh", ptyID.description], what: "marking a turn seen")
    }

    /// The host's status events after `cursor` (without one, from the start of its log, or
    /// with `fromEnd` only new ones), then each new one as the watcher writes it, over one
    /// channel, until the channel ends or the task is cancelled. The first element is the
    /// cursor reading starts after (another log's cursor, or one past the log's end, reads
    /// the log from its start).
    /// A channel that says nothing for 30 s (it says `K` every 10 s) is taken as dead.
    func statusEvents(after cursor: AgentEventCursor?, fromEnd: Bool = false) async throws(AgentError)
        -> AsyncThrowingStream<AgentWatcherLine, Error>
    {
        let process: TransportProcess
        do {
            process = try await transport.startProcess("/bin/sh", arguments: [
                "-c", AgentStatusWatcher.readerScript, "sh", cursor.map { "\($0.sequence)" } ?? (fromEnd ? "end" : "0"),
                cursor?.log ?? "-", tmux.socket,
            ], environment: [:])
        } catch {
            throw AgentError(error, while: "following the status events of \(shell.displayName)")
        }
        let displayName = shell.displayName
        return AsyncThrowingStream { continuation in
            let reader = Task {
                var buffer: [UInt8] = []
                var log: String?
                let lastHeard = Mutex(ContinuousClock.now)
                let watchdog = Task {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .seconds(5))
                        if ContinuousClock.now - lastHeard.withLock({ $0 }) > .seconds(30) { process.cancel(); return }
                    }
                }
                defer { watchdog.cancel() }
                for await chunk in process.stdout {
                    lastHeard.withLock { $0 = .now }
                    buffer += chunk
                    while let nl = buffer.firstIndex(of: 10) {
                        let line = String(decoding: buffer[..<nl], as: UTF8.self)
                        buffer.removeSubrange(...nl)
                        if line == "K" { continue }
                        if line.hasPrefix("H ") {
                            let f = line.split(separator: " ")
                            guard f.count >= 3, let from = Int(f[2]) else { continue }
                            log = String(f[1])
                            continuation.yield(.start(AgentEventCursor(log: String(f[1]), sequence: from)))
                            continue
                        }
                        guard let log, let e = AgentStatusWatcher.parseEvent(Substring(line)) else { continue }
                        continuation.yield(.event(AgentStatusEvent(cursor: AgentEventCursor(log: log, sequence: e.sequence),
                                                                   session: e.session, status: e.status)))
                    }
                }
                let ended = try? await process.exitStatus()
                if Task.isCancelled {
                    continuation.finish()
                } else {
                    continuation.finish(throwing: AgentError(.transport, "the status events of \(displayName) ended"
                        + (ended.map { " (\($0))" } ?? "")))
                }
            }
            continuation.onTermination = { _ in
                reader.cancel()
                process.cancel()
            }
        }
    }

    /// The visible screen as plain text.
    func screenText(_ session: AgentSession) async throws(AgentError) -> String {
        switch session.container {
        case .tmux(let name):
            return try await tmux.captureScreen(name)
        case .plainTerminal:
            // no terminal emulator here: the last lines of output, escape sequences stripped
            let raw = try await recentOutput(of: session)
            let lines = raw.split(separator: "\n", omittingEmptySubsequences: false).suffix(40).joined(separator: "\n")
            return Self.strippingEscapes(lines)
        }
    }

    static func strippingEscapes(_ s: String) -> String {
        var out = ""
        var it = s.unicodeScalars.makeIterator()
        while let c = it.next() {
            if c == "\u{1B}" {
                // CSI: ESC [ params final-byte; other escapes: drop the next character
                guard let n = it.next() else { break }
                if n == "[" {
                    while let p = it.next(), !(0x40...0x7E).contains(p.value) {}
                }
            } else if c == "\r" {
                continue
            } else {
                out.unicodeScalars.append(c)
            }
        }
        return out
    }
}

/// What the host's watcher knows at one moment.
struct AgentWatcherSnapshot: Sendable {
    /// The watcher's version (0: none has run on the host).
    var version: Int
    var log: String
    /// Each agent session's status, by session name.
    var states: [String: AgentStatus]
    var sessions: [AgentTmuxSession]

    init(parsing text: String) {
        version = 0
        log = ""
        states = [:]
        sessions = []
        var limits: [String: Date] = [:]
        for line in text.split(separator: "\n") {
            if line.hasPrefix("W ") {
                let f = line.split(separator: " ")
                version = f.count > 1 ? Int(f[1]) ?? 0 : 0
                log = f.count > 2 ? String(f[2]) : ""
            } else if line.hasPrefix("S "), let (name, status) = AgentStatusWatcher.parseState(line) {
                states[name] = status
            } else if line.hasPrefix("L ") {
                let f = line.split(separator: " ")
                if f.count == 3, let at = Double(f[2]) { limits[String(f[1])] = Date(timeIntervalSince1970: at) }
            } else if line.hasPrefix("T "), let s = AgentTmuxServer.parseSession(String(line.dropFirst(2))),
                      s.name != AgentStatusWatcher.sessionName
            {
                sessions.append(s)
            }
        }
        for (name, at) in limits where states[name]?.activity == .waitingForInput { states[name]?.limitedUntil = at }
        // a state the watcher kept for a session that is gone is not current
        let names = Set(sessions.map(\.name))
        states = states.filter { names.contains($0.key) }
    }
}

/// A line of a host's event channel.
enum AgentWatcherLine: Sendable {
    /// The channel is open: the log, and where reading begins.
    case start(AgentEventCursor)
    case event(AgentStatusEvent)
}
