import Foundation
import SSHKit
import ServerTransport

/// Status hooks and the status of running agents.
extension AgentHost {
    /// Where the hooks of `ptyID` append their events (relative to the home directory).
    static func statusFile(_ ptyID: AgentPTYID) -> String { "\(AgentLauncher.directory)/status/\(ptyID)" }

    /// The shell command a hook runs: appends `<unix seconds> <event>` to the status file.
    /// It reaches the agent as data (a settings file, a config value), never typed into a shell.
    static func hookCommand(_ ptyID: AgentPTYID, _ event: AgentHookEvent) -> String {
        "mkdir -p \"$HOME/\(AgentLauncher.directory)/status\" && printf '%s \(event.rawValue)\\n' \"$(date +%s)\" >> \"$HOME/\(statusFile(ptyID))\""
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

    /// The arguments that install status hooks for the provider (empty for providers
    /// without hooks), writing Claude's settings file on the host first.
    func statusHookArguments(_ spec: AgentSessionSpec) async throws(AgentError) -> [String] {
        switch spec.provider.sessionTracking {
        case .claudeSessionID:
            let home = try await home()
            let path = "\(home)/\(AgentLauncher.directory)/hooks/\(spec.ptyID).json"
            do {
                try await transport.createDirectory("\(home)/\(AgentLauncher.directory)/hooks")
                try await transport.writeTextFile(path, Self.claudeHookSettings(spec.ptyID))
            } catch {
                throw AgentError(error, while: "writing Claude's hook settings")
            }
            return ["--settings", path]
        case .codexThread:
            return ["-c", Self.codexNotifyOverride(spec.ptyID)]
        case .none, .chosenSessionID, .recordedSession:
            return []
        }
    }

    /// The agent's status now: from its process when it ended, else from its hooks when
    /// they reported anything, else inferred from its screen with `inference` (keep one
    /// per session between calls; the first calls may answer `.starting` until a guess is
    /// confirmed).
    public func status(of session: AgentSession, inference: inout AgentScreenInference) async -> AgentStatus {
        let now = Date()
        let state: AgentProcessState
        do {
            state = try await self.state(of: session)
        } catch {
            return AgentStatus(activity: .lost, source: .process, since: now)
        }
        switch state {
        case .gone: return AgentStatus(activity: .lost, source: .process, since: now)
        case .exited(let code): return AgentStatus(activity: .exited(code), source: .process, since: now)
        case .signaled(let n): return AgentStatus(activity: .exited(128 + n), source: .process, since: now)
        case .running: break
        }
        if let r = try? await run("/bin/sh", ["-c", "tail -n 5 \"$HOME/$1\" 2>/dev/null; exit 0", "sh",
                                              Self.statusFile(session.ptyID)], what: "reading hook events"),
           let (event, at) = AgentHookEvent.last(in: r.stdoutString)
        {
            return AgentStatus(activity: event.activity, source: .hook, since: at)
        }
        guard let screen = try? await screenText(session) else {
            return AgentStatus(activity: .lost, source: .process, since: now)
        }
        let activity = inference.observe(screen: screen, at: now) ?? .starting
        return AgentStatus(activity: activity, source: .screen, since: now)
    }

    /// The agent's status as it changes: polled every `interval` until the session is
    /// lost or has exited (that status is the last element), or the task is cancelled.
    public func statusUpdates(of session: AgentSession, interval: Duration = .seconds(1)) -> AsyncStream<AgentStatus> {
        AsyncStream { continuation in
            let task = Task {
                var inference = AgentScreenInference()
                var last: AgentStatus?
                while !Task.isCancelled {
                    let s = await self.status(of: session, inference: &inference)
                    if s.activity != last?.activity || s.source != last?.source {
                        continuation.yield(s)
                        last = s
                    }
                    switch s.activity {
                    case .exited, .lost:
                        continuation.finish()
                        return
                    default:
                        break
                    }
                    try? await Task.sleep(for: interval)
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
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
