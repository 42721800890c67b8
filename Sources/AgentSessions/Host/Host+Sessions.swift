import Foundation
import SSHKit
import ServerTransport

/// Where an agent is: still working, ended (with its exit status), or gone.
public enum AgentProcessState: Sendable, Hashable {
    case running
    case exited(Int32)
    /// Ended by this signal (9 for SIGKILL).
    case signaled(Int32)
    /// No session of that name (stopped, or the host rebooted), or a plain terminal
    /// whose connection dropped.
    case gone
}

/// Starting, attaching, typing into and stopping agents on the host.
extension AgentHost {
    /// Starts the agent of `spec` in a detached tmux session named after its PTY id, or,
    /// on a host without tmux, on a plain PTY channel (marked as not surviving a
    /// disconnect). A tmux session of that name that already runs is returned as it is
    /// (starting twice never starts two agents).
    ///
    /// The pane runs the login shell (checked against `AgentShells.allowed`), which runs
    /// a launch script that enters the worktree, exports the validated environment and
    /// starts the agent if `command -v` finds it, else prints its install hint and exits
    /// 127. A typed prompt is typed once the agent's screen settles.
    /// - Throws: `shellNotAllowed`, `invalidEnvironmentName`, `invalidArgument`,
    ///   `tmuxFailed`, `terminalUnsupported` (no tmux and no PTY), `transport`.
    public func startAgent(_ spec: AgentSessionSpec) async throws(AgentError) -> AgentSession {
        let start = try await prepareStart(spec, directory: try await absolutePath(spec.workingDirectory))
        let launch = start.launch, directory = start.directory, nonce = start.nonce
        if let file = launch.promptFile { try await writePromptFile(file, in: directory) }
        var session = start.session
        if start.hasTmux {
            let started = try await tmux.newSession(name: start.name, directory: directory, size: spec.size, argv: start.argv,
                                                   script: (spec.ptyID, nonce, start.script))
            if started, let typed = launch.typedInput {
                try await typeWhenReady(start.name, typed, readyWhenShowing: spec.provider.readyScreen)
            }
            return session
        }
        let argv = start.argv, script = start.script, name = start.name
        guard let terminals = transport as? any TerminalTransport else {
            throw AgentError(.terminalUnsupported, "\(displayName) has no tmux and its transport opens no terminal")
        }
        session.container = .plainTerminal
        let write = AgentLauncher.writeThenRun(spec.ptyID, nonce: nonce, then: ["true"])
        let w = try await run(write.executable, write.arguments, stdin: Array(script.utf8), what: "writing the launch script")
        guard w.exitStatus == .exited(0) else {
            throw AgentError(.transport, "cannot write the launch script on \(displayName)", detail: w.stderrString)
        }
        let terminal: TransportTerminal
        do {
            terminal = try await terminals.startTerminal(argv[0], arguments: Array(argv.dropFirst()), environment: [:],
                                                         terminal: SSHTerminal(size: spec.size))
        } catch {
            throw AgentError(error, while: "opening a terminal")
        }
        let plain = PlainAgentSession(terminal: terminal)
        plainSessions.withLock { $0[name] = plain }
        if let typed = launch.typedInput {
            try await Task.sleep(for: .milliseconds(800), orThrow: ())
            _ = try? await terminal.input.write(typed)
        }
        return session
    }

    /// Waits until the agent's screen shows `text`, seen as its output happens (see
    /// `AgentTmuxServer.waitForOutput`); on a plain terminal, its screen is looked at
    /// every 50 ms. False when the agent ended or `timeout` passed first.
    public func waitForOutput(of session: AgentSession, containing text: String, timeout: Duration = .seconds(30))
        async throws(AgentError) -> Bool
    {
        guard case .tmux(let name) = session.container else {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                if try await recentOutput(of: session, lines: 200).contains(text) { return true }
                try await Task.sleep(for: .milliseconds(50), orThrow: ())
            }
            return false
        }
        return try await tmux.waitForOutput(of: name, containing: text, timeout: timeout)
    }

    /// Everything a start needs before it touches the host's tmux: the validated launch,
    /// its hooks, the launch script and the pane's command line.
    struct PreparedStart {
        let launch: AgentLaunch
        let script: String
        let argv: [String]
        let nonce: String
        let name: String
        let directory: String
        let hasTmux: Bool
        let session: AgentSession
    }

    /// Validates `spec` (before anything runs on the host), writes its status hooks, and
    /// plans its launch in `directory` (absolute). Detection is asked (cached).
    func prepareStart(_ spec: AgentSessionSpec, directory: String) async throws(AgentError) -> PreparedStart {
        try Self.checkSuffix(spec.ptyID)
        // validates everything before anything runs on the host
        _ = try AgentLaunch.plan(spec.provider, settings: spec.settings, name: spec.ptyID.description,
                                 prompt: spec.prompt, autoApprove: spec.autoApprove, resume: spec.resume)
        let hooks = spec.statusHooks ? try await statusHooks(spec) : (arguments: [], environment: [:], file: nil)
        let launch = try AgentLaunch.plan(spec.provider, settings: spec.settings, name: spec.ptyID.description,
                                          prompt: spec.prompt, autoApprove: spec.autoApprove, resume: spec.resume,
                                          hookArguments: hooks.arguments, hookEnvironment: hooks.environment)
        let facts = try await detectAgents()
        try AgentShells.check(facts.loginShell)
        let script = AgentLauncher.script(launch, ptyID: spec.ptyID, provider: spec.provider, workingDirectory: directory,
                                          extraSearchPath: extraSearchPath,
                                          setup: spec.setupCommand.map { ($0, spec.setupTimeout) },
                                          files: hooks.file.map { [$0] } ?? [])
        let nonce = AgentLauncher.makeNonce()
        let argv = AgentLauncher.paneCommand(shell: facts.loginShell, ptyID: spec.ptyID, nonce: nonce)
        let name = spec.ptyID.description
        let session = AgentSession(ptyID: spec.ptyID, host: serverID, container: .tmux(name: name),
                                   workingDirectory: directory, arguments: launch.arguments)
        return PreparedStart(launch: launch, script: script, argv: argv, nonce: nonce, name: name, directory: directory,
                             hasTmux: facts.tmuxVersion != nil, session: session)
    }

    /// Attaches this program to the agent's terminal (see `AgentTerminal`).
    /// - Throws: `sessionNotRunning` (no such session), `terminalUnsupported`, `transport`.
    public func attach(_ session: AgentSession, size: SSHTerminalSize = SSHTerminalSize(columns: 120, rows: 40),
                       term: String = "xterm-256color") async throws(AgentError) -> AgentTerminal
    {
        switch session.container {
        case .plainTerminal:
            guard let plain = plainSessions.withLock({ $0[session.ptyID.description] }), plain.isRunning else {
                throw AgentError(.sessionNotRunning, "\(session.ptyID) ran on a plain terminal that has ended")
            }
            try? plain.terminal.resize(to: size)
            return AgentTerminal(session: session, backend: .plain(plain))
        case .tmux(let name):
            guard let terminals = transport as? any TerminalTransport else {
                throw AgentError(.terminalUnsupported, "the transport of \(displayName) opens no terminal; use its tmux server's capture and send")
            }
            guard try await tmux.session(named: name) != nil else {
                throw AgentError(.sessionNotRunning, "no tmux session \(name) on \(displayName)")
            }
            do {
                // -u: the local terminal is UTF-8, whatever locale the host's login has
                // (without one, the client would draw line art as `qqqq` and the rest as `_`)
                let t = try await terminals.startTerminal("tmux", arguments: Self.attachArguments(tmuxSocket, name),
                                                          environment: [:], terminal: SSHTerminal(term: term, size: size))
                return AgentTerminal(session: session, backend: .attached(t))
            } catch {
                throw AgentError(error, while: "attaching to \(name)")
            }
        }
    }

    /// `tmux attach-session` to the session `name`, after unsetting its window's
    /// `window-size`: a window a preview laid out at another size (`followScreen(of:size:)`)
    /// and did not give back (its loop was killed) would otherwise keep that size.
    static func attachArguments(_ socket: String, _ name: String) -> [String] {
        ["-u", "-L", socket, "set-option", "-w", "-q", "-u", "-t", AgentTmuxServer.pane(name), "window-size", ";",
         "attach-session", "-t", "=" + name]
    }

    /// Attaches the local terminal `fd` to the agent's terminal (see
    /// `AgentJoinedTerminal`): a tmux session over a transport that joins terminals
    /// (`SSHTransport`). `fd` stays the caller's; its open file description becomes
    /// non-blocking, so pass one of its own (a fresh `open("/dev/tty")`).
    /// - Parameter detachByte: the byte that detaches (0x1D for Ctrl-]), or nil.
    /// - Throws: `sessionNotRunning` (no such session); `terminalUnsupported` for a plain
    ///   session or a transport that does not join terminals (use `attach(_:size:term:)`);
    ///   `transport`.
    public func attach(_ session: AgentSession, joining fd: Int32,
                       size: SSHTerminalSize = SSHTerminalSize(columns: 120, rows: 40),
                       term: String = "xterm-256color", detachByte: UInt8?) async throws(AgentError) -> AgentJoinedTerminal
    {
        guard case .tmux(let name) = session.container else {
            throw AgentError(.terminalUnsupported, "\(session.ptyID) runs on a plain terminal, which is attached through its output")
        }
        guard let terminals = transport as? any TerminalJoiningTransport else {
            throw AgentError(.terminalUnsupported, "the transport of \(displayName) joins no terminal; attach through its output")
        }
        guard try await tmux.session(named: name) != nil else {
            throw AgentError(.sessionNotRunning, "no tmux session \(name) on \(displayName)")
        }
        do {
            let t = try await terminals.startJoinedTerminal(
                "tmux", arguments: Self.attachArguments(tmuxSocket, name), environment: [:],
                terminal: SSHTerminal(term: term, size: size), joining: fd, detachByte: detachByte)
            return AgentJoinedTerminal(session: session, joined: t)
        } catch {
            throw AgentError(error, while: "attaching to \(name)")
        }
    }

    /// Whether the agent still runs, and how it ended.
    public func state(of session: AgentSession) async throws(AgentError) -> AgentProcessState {
        switch session.container {
        case .plainTerminal:
            guard let plain = plainSessions.withLock({ $0[session.ptyID.description] }) else { return .gone }
            return plain.processState
        case .tmux(let name):
            // one round trip: tmux's view of the pane and the status the launch script wrote
            let script = """
                tmux -L "$1" -f /dev/null display-message -p -t "=$2:" "$3"
                printf '#exit %s\\n' "$(cat "$HOME/$4" 2>/dev/null)"
                """
            let r = try await run("/bin/sh", ["-c", script, "sh", tmuxSocket, name, AgentTmuxServer.sessionFormat,
                                              AgentLauncher.directory + "/status/\(name).exit"], what: "reading a session's state")
            let lines = r.stdoutString.split(separator: "\n").map(String.init)
            let written = lines.last { $0.hasPrefix("#exit ") }.flatMap { Int32($0.dropFirst(6).trimmingCharacters(in: .whitespaces)) }
            let e = r.stderrString
            if e.contains("can't find") || e.contains("no server running") || e.contains("error connecting") {
                return .gone
            }
            guard let s = lines.first.flatMap(AgentTmuxServer.parseSession) else {
                if e.contains("command not found") || e.contains("not found") {
                    throw AgentError(.tmuxUnavailable, "tmux is not installed on \(displayName)", detail: e)
                }
                return .gone
            }
            if let code = s.exitStatus { return .exited(code) }
            if let signal = s.exitSignal { return .signaled(signal) }
            if let written { return .exited(written) }
            return .running
        }
    }

    /// The agent's recent output: the last `lines` lines of its history and its screen
    /// (tmux), or the last bytes of a plain terminal. What a caller shows after
    /// reattaching, to cover what it missed while away.
    public func recentOutput(of session: AgentSession, lines: Int = 2000) async throws(AgentError) -> String {
        switch session.container {
        case .plainTerminal:
            guard let plain = plainSessions.withLock({ $0[session.ptyID.description] }) else {
                throw AgentError(.sessionNotRunning, "\(session.ptyID) is gone")
            }
            return String(decoding: plain.capture(), as: UTF8.self)
        case .tmux(let name):
            return try await tmux.capture(name, lines: lines)
        }
    }

    /// The agent's visible screen each time it changes (see `AgentTmuxServer.followScreen`),
    /// until it ends or the task is cancelled; with `size`, the agent laid out at that size
    /// while nobody is attached to it. A plain terminal (no tmux) is read again every half
    /// second and given when it changed.
    /// - Throws: `sessionNotRunning`, `transport`, `cancelled`.
    public func followScreen(of session: AgentSession, size: SSHTerminalSize? = nil,
                             _ screen: @Sendable (String) async -> Void) async throws(AgentError)
    {
        switch session.container {
        case .tmux(let name):
            try await tmux.followScreen(of: name, size: size, screen)
        case .plainTerminal:
            var last: String?
            while !Task.isCancelled {
                let now = try await recentOutput(of: session, lines: 0)
                if now != last {
                    await screen(now)
                    last = now
                }
                try? await Task.sleep(for: .milliseconds(500))
            }
            throw AgentError(.cancelled, "following the screen of \(session.ptyID) was cancelled")
        }
    }

    /// Types into the agent without attaching (bytes as a terminal sends them).
    public func send(_ bytes: [UInt8], to session: AgentSession) async throws(AgentError) {
        switch session.container {
        case .plainTerminal:
            guard let plain = plainSessions.withLock({ $0[session.ptyID.description] }), plain.isRunning else {
                throw AgentError(.sessionNotRunning, "\(session.ptyID) has ended")
            }
            do {
                try await plain.terminal.input.write(bytes)
            } catch {
                throw AgentError(.sessionNotRunning, "\(session.ptyID) no longer takes input", cause: error)
            }
        case .tmux(let name):
            try await tmux.send(name, bytes: bytes)
        }
    }

    /// Types `text` and submits it (bracketed paste when it spans lines).
    public func sendLine(_ text: String, to session: AgentSession) async throws(AgentError) {
        try await send(AgentLaunch.typed(text), to: session)
    }

    /// Stops the agent and removes its session (no orphan left on the host). A session
    /// already gone is fine. `forget`: its task is deleted, and so are the session's files
    /// on the host (its hooks' settings now; its status, screens and results once the
    /// watcher has told its end).
    public func stop(_ session: AgentSession, forget: Bool = false) async throws(AgentError) {
        switch session.container {
        case .plainTerminal:
            let plain = plainSessions.withLock { $0.removeValue(forKey: session.ptyID.description) }
            plain?.terminal.cancel()
        case .tmux(let name):
            try await tmux.stop(name, forget: forget,
                                removing: forget ? AgentProvider.StatusHooks.files(of: session.ptyID) : [])
        }
    }

    // MARK: helpers

    static func checkSuffix(_ id: AgentPTYID) throws(AgentError) {
        let ok = !id.suffix.isEmpty && id.suffix.utf8.count <= 200
            && id.suffix.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
        guard ok else {
            throw AgentError(.invalidArgument, "a task or conversation id is 1-200 of [A-Za-z0-9_-], got '\(id.suffix)'")
        }
    }

    private func writePromptFile(_ file: AgentLaunch.PromptFile, in directory: String) async throws(AgentError) {
        let path = directory + "/" + file.relativePath
        do {
            try await transport.createDirectory(String(path[..<path.lastIndex(of: "/")!]))
            try await transport.writeTextFile(path, file.contents)
        } catch {
            throw AgentError(error, while: "writing the prompt file")
        }
    }

    /// Waits until the agent's screen shows something and has not changed for a moment
    /// (it is ready for input), then types. With `markers` (the provider's
    /// `readyScreen`), the screen must also show one of them: a TUI that draws its
    /// frame before it reads input is not taken for ready. Gives up waiting after 20 s
    /// (60 s with markers) and types anyway, unless the agent has ended.
    func typeWhenReady(_ name: String, _ bytes: [UInt8], readyWhenShowing markers: [String] = [])
        async throws(AgentError)
    {
        var last = ""
        var stable = 0
        for _ in 0..<(markers.isEmpty ? 100 : 300) {
            try await Task.sleep(for: .milliseconds(200), orThrow: ())
            guard let s = try await tmux.session(named: name), s.isRunning else { return }
            let screen = try await tmux.captureScreen(name).trimmingCharacters(in: .whitespacesAndNewlines)
            let ready = markers.isEmpty || markers.contains { screen.contains($0) }
            if ready && !screen.isEmpty && screen == last {
                stable += 1
                if stable >= 2 { break }
            } else {
                stable = 0
            }
            last = screen
        }
        try await tmux.send(name, bytes: bytes)
    }
}

extension Task where Success == Never, Failure == Never {
    /// `sleep`, with cancellation as `AgentError.cancelled`.
    static func sleep(for d: Duration, orThrow: ()) async throws(AgentError) {
        do {
            try await Task.sleep(for: d)
        } catch {
            throw AgentError(.cancelled, "cancelled")
        }
    }
}
