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

    /// What installs the status hooks of the session's provider: arguments, variables, and
    /// the file they name (its absolute path and text), which the launch script writes just
    /// before the agent starts (`AgentLauncher.script`), so installing them costs no round
    /// trip of its own. Empty for providers without hooks. The provider's adapter
    /// (`AgentProvider.StatusHooks`) says how; the command each hook runs is `hookCommand`.
    func statusHooks(_ spec: AgentSessionSpec) async throws(AgentError)
        -> (arguments: [String], environment: [String: String], file: AgentLauncher.File?)
    {
        let id = spec.ptyID, hooks = spec.provider.statusHooks
        guard let file = hooks.file(for: id, command: { Self.hookCommand(id, $0) }) else {
            let handed = hooks.handOver(id, filePath: nil, command: { Self.hookCommand(id, $0) })
            return (handed.arguments, handed.environment, nil)
        }
        let path = "\(try await home())/\(AgentLauncher.directory)/hooks/\(file.name)"
        let handed = hooks.handOver(id, filePath: path, command: { Self.hookCommand(id, $0) })
        return (handed.arguments, handed.environment, AgentLauncher.File(path: path, text: file.text))
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
           let hit = try? await look(at: screen, providerID: session.ptyID.providerID, rules: rules)
        {
            return AgentStatus(activity: hit.activity, source: .screen, since: now, question: hit.question, rule: hit.rule)
        }
        return AgentStatus(activity: .starting, source: .process, since: now)
    }

    /// One look at `screen` with `rules`, by the watcher's own classifier run on the host
    /// (`AgentStatusWatcher.lookScript`): for a terminal the watcher does not follow. nil
    /// when no rule matches.
    func look(at screen: String, providerID: String, rules: AgentScreenRules) async throws(AgentError)
        -> (activity: AgentActivity, rule: String, question: String?)?
    {
        let r = try await run("/bin/sh", ["-c", AgentStatusWatcher.lookScript, "sh", rules.hostText, providerID],
                              stdin: Array(screen.utf8), what: "looking at the agent's screen")
        guard r.exitStatus == .exited(0) else {
            throw AgentError(.tmuxFailed, "the screen rules could not be applied on \(shell.displayName)", detail: r.stderrString)
        }
        return Self.look(parsing: r.stdoutString)
    }

    /// The classifier's `class TAB rule TAB question` line as a status (nil: no rule matched).
    static func look(parsing line: String) -> (activity: AgentActivity, rule: String, question: String?)? {
        let f = line.trimmingCharacters(in: .newlines).split(separator: "\t", maxSplits: 2, omittingEmptySubsequences: false)
            .map(String.init)
        guard f.count == 3 else { return nil }
        let question = f[2].isEmpty ? nil : f[2]
        switch f[0] {
        case "waiting": return (.waitingForInput, f[1], question)
        case "limit": return (.waitingForInput, f[1], "usage limit: " + (question ?? ""))
        case "working": return (.working, f[1], nil)
        case "idle": return (.idle, f[1], nil)
        default: return nil
        }
    }

    /// What the host's watcher knows, in one round trip (two or three the first time, to
    /// write its script and the rules): each agent session's status by session name, and
    /// the sessions of the tmux server. The watcher is started when the server has agent
    /// sessions and it does not run, or runs an older version.
    func watcherSnapshot(rules: AgentScreenRules) async throws(AgentError) -> AgentWatcherSnapshot {
        let text = rules.hostText
        let sum = AgentStatusWatcher.rulesDigest(rules)
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
