// Agent-sessions workloads: the engine (one shared SSHKit connection per host) against
// Emdash's way of doing the same over OpenSSH (one `ssh` process per remote command,
// through a ControlMaster), alternating, in one run against the same sshd.
import AgentSessions
import Foundation
import SSHKit
import ServerTransport

let agentImplementations = ["AgentSessions", "Emdash's way (ssh)"]

/// A TCP relay on 127.0.0.1 in front of sshd that can cut the network: `cut()` closes
/// every relayed connection and refuses new ones until `restore()`. It counts the bytes
/// it relays.
final class CuttableRelay: @unchecked Sendable {  // safe because: the state is behind `lock`
    let port: Int
    private let target: Int
    private let lock = NSLock()
    private var isCut = false
    private var sockets: Set<Int32> = []
    private var relayed = 0

    /// Bytes relayed so far, both ways.
    var bytes: Int { lock.withLock { relayed } }

    /// Each chunk waits this long before it is passed on, in each direction (0: none): a
    /// network's latency, roughly (chunks of one direction wait one after another).
    private let delay: useconds_t

    init(target: Int, delay: useconds_t = 0) throws {
        self.target = target
        self.delay = delay
        let (fd, port) = try loopbackListener(backlog: 64)
        self.port = port
        Thread.detachNewThread { [self] in
            while true {
                let c = accept(fd, nil, nil)
                if c < 0 { if errno == EINTR { continue }; return }
                let s = connectLoopback(target)
                let refused = lock.withLock { () -> Bool in
                    if isCut || s < 0 { return true }
                    sockets.formUnion([c, s])
                    return false
                }
                if refused { close(c); if s >= 0 { close(s) }; continue }
                Thread.detachNewThread { self.pump(c, s) }
                Thread.detachNewThread { self.pump(s, c) }
            }
        }
    }

    private func pump(_ from: Int32, _ to: Int32) {
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(from, &buf, buf.count)
            if n <= 0 { break }
            if delay > 0 { usleep(delay) }
            if buf.withUnsafeBytes({ send(to, $0.baseAddress!, n, Int32(MSG_NOSIGNAL)) }) != n { break }
            lock.withLock { relayed += n }
        }
        shutdown(to, Int32(SHUT_WR))
        lock.withLock {
            // the second pump to end closes both
            if sockets.remove(from) == nil { return }
            if !sockets.contains(to) { close(from); close(to) }
        }
    }

    func cut() {
        lock.withLock {
            isCut = true
            for s in sockets { shutdown(s, Int32(SHUT_RDWR)) }
        }
    }

    func restore() { lock.withLock { isCut = false } }
}

/// The bench user's remote setup: three fake agents on the login PATH (so detection
/// finds some), one that prints a marker and waits, a ticker and a key echo; a git
/// repository.
func prepareAgentHost(_ t: SSHTransport) async throws -> String {
    let script = """
        set -e
        mkdir -p "$HOME/.local/bin" "$HOME/bench-agents"
        for a in claude codex gemini; do printf '#!/bin/sh\\necho %s 1.0\\n' "$a" > "$HOME/.local/bin/$a"; chmod 755 "$HOME/.local/bin/$a"; done
        printf '#!/bin/sh\\necho AGENT-READY\\nexec sleep 600\\n' > "$HOME/.local/bin/bench-agent"
        printf '#!/bin/sh\\ni=0; while :; do i=$((i+1)); echo "tick $i"; sleep 0.05; done\\n' > "$HOME/.local/bin/bench-ticker"
        # answers each key with a line k<count>; (never seen before, so a redraw cannot stand in for it)
        cat > "$HOME/.local/bin/bench-echo" <<'PY'
        #!/usr/bin/python3
        import os, tty
        tty.setraw(0)
        os.write(1, b"ECHO-READY\\r\\n")
        i = 0
        while os.read(0, 1):
            i += 1
            os.write(1, b"k%d;\\r\\n" % i)
        PY
        chmod 755 "$HOME/.local/bin/bench-agent" "$HOME/.local/bin/bench-ticker" "$HOME/.local/bin/bench-echo"
        cd "$HOME/bench-agents" && rm -rf repo && mkdir repo && cd repo
        git init -q -b main . && git config user.email b@example.com && git config user.name Bench
        echo one > a.txt && git add a.txt && git commit -q -m first
        pwd
        """
    return try await t.runProcess("/bin/sh", arguments: ["-c", script], stdin: [], environment: [:], timeout: .seconds(60))
        .check("preparing the agent host").stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Takes back what the agent workloads put in the bench user's home (the test suite's user
/// too: a fake `codex` left on its PATH would be taken for an installed agent).
func removeAgentHostFiles(user: String) {
    guard let pw = getpwnam(user), let dir = pw.pointee.pw_dir else { return }
    let home = String(cString: dir)
    let bin = "\(home)/.local/bin"
    let names = ((try? FileManager.default.contentsOfDirectory(atPath: bin)) ?? []).filter {
        ["claude", "codex", "gemini"].contains($0) || $0.hasPrefix("bench-")
    }
    for name in names { try? FileManager.default.removeItem(atPath: "\(bin)/\(name)") }
    for dir in ["bench-agents", "bench-attempts", "bench-cockpit", "bench-fetch", "bench-serve", "bench-status"] {
        try? FileManager.default.removeItem(atPath: "\(home)/\(dir)")
    }
}

func benchAgents(_ f: Fixture, rounds: Int) async throws -> [Row] {
    let t = SSHTransport(configuration: f.sshkitConfig, serverID: ServerID("bench-host"), maxSessions: 256)
    let repo = try await prepareAgentHost(t)
    let socket = "bench-agents"
    // sessions an interrupted run left behind would be taken for this run's
    _ = try await t.runProcess("tmux", arguments: ["-L", socket, "kill-server"], stdin: [], environment: [:], timeout: .seconds(20))
    let host = AgentHost(transport: t, tmuxSocket: socket)
    let ctl = try f.startControlMaster("cm-agents")
    defer { f.stopControlMaster(ctl) }
    func ssh(_ command: String) -> Int32 { spawnAndWait(f.sshArgs(["-o", "ControlPath=\(ctl)"], command: command)) }

    // 1. which agents are installed
    var detect = Row(workload: "detect all 21 agents (ms)")
    var detectParallel = Row(workload: "detect all 21 agents, Emdash's checks all at once (ms)")
    let binaries = AgentProvider.all.filter { $0.id != "hermes" }.map { $0.binary.split(separator: " ")[0] }
    let found = try await host.detectAgents(refresh: true).installed.keys.sorted()
    guard found == ["claude", "codex", "gemini"] else { throw BenchError("detection found \(found)") }
    for round in 0..<rounds * 4 {
        for impl in rotated(agentImplementations, by: round) {
            let s = now()
            if impl == agentImplementations[0] {
                _ = try await host.detectAgents(refresh: true)
                let ms = now() - s
                detect.samples[impl, default: []].append(ms)
                detectParallel.samples[impl, default: []].append(ms)
            } else {
                for b in binaries { _ = ssh("PATH=\"$HOME/.local/bin:$PATH\" command -v \(b) >/dev/null 2>&1") }
                detect.samples[impl, default: []].append(now() - s)
                let s2 = now()
                await withTaskGroup(of: Void.self) { g in
                    for b in binaries { g.addTask { _ = ssh("PATH=\"$HOME/.local/bin:$PATH\" command -v \(b) >/dev/null 2>&1") } }
                }
                detectParallel.samples[impl, default: []].append(now() - s2)
            }
        }
    }
    out("agents: detection done")

    // 2. a new task: worktree, agent in tmux, its first output seen
    var create = Row(workload: "task creation to the agent's first output (ms)")
    let store = InMemoryAgentStore()
    let hostRecord = HostRecord(id: "bench-host", name: "bench", address: "127.0.0.1", port: f.port, user: f.user,
                                authentication: .keyFiles([f.key]), tmuxSocket: socket)
    try await store.save(hostRecord)
    let project = ProjectRecord(hostID: hostRecord.id, name: "repo", path: repo)
    try await store.save(project)
    let orchestrator = AgentOrchestrator(store: store, providerSettings: ["gemini": AgentProviderSettings(binary: "bench-agent")]) { _ in host }
    var createSteps = Breakdown("task creation to the agent's first output")
    for round in 0..<rounds * 2 {
        for impl in rotated(agentImplementations, by: round) {
            let title = "bench task \(round)"
            if impl == agentImplementations[0] {
                let trace = AgentTrace()
                let s = now()
                let task = try await AgentTrace.$current.withValue(trace) {
                    let (_, task, main, _) = try await orchestrator.project(project.id).createTask(title: title, providerID: "gemini")
                    guard try await orchestrator.chat(main.id).waitForOutput(containing: "AGENT-READY", timeout: .seconds(30)) else {
                        let screen = (try? await orchestrator.chat(main.id).screen(lines: 20)) ?? "?"
                        throw BenchError("the agent's first output never came in \(now() - s) ms: \(screen.debugDescription)")
                    }
                    return task.id
                }
                let ms = now() - s
                create.samples[impl, default: []].append(ms)
                createSteps.add(trace, total: ms) { $0.kind == .remoteStream ? "the agent's first output, watched" : $0.name }
                try await orchestrator.task(task).delete(force: true)
            } else {
                // Emdash 0.4: prune, add the worktree, then `ssh -tt` running tmux new-session -As
                // with the agent, reading the PTY until the agent speaks
                let name = "bench-task-\(round)-\(Int(Date().timeIntervalSince1970 * 1000))"
                let path = repo + "/.emdash/worktrees/" + name
                let s = now()
                guard ssh("git -C '\(repo)' worktree prune") == 0,
                      ssh("git -C '\(repo)' worktree add -b 'emdash/\(name)' '\(path)' main") == 0
                else { throw BenchError("git over ssh failed") }
                let script = "export PATH=\"$HOME/.local/bin:$PATH\"; cd '\(path)' && if command -v bench-agent >/dev/null 2>&1; then exec tmux -L \(socket) new-session -As \(name) -- sh -c bench-agent; fi"
                guard let p = PipedProcess(f.sshArgs(["-tt", "-o", "ControlPath=\(ctl)"], command: script)) else {
                    throw BenchError("ssh did not start")
                }
                let ok = p.waitFor("AGENT-READY")
                let ms = now() - s
                p.end()
                guard ok else { throw BenchError("the agent's output never came through ssh -tt") }
                create.samples[impl, default: []].append(ms)
                _ = ssh("tmux -L \(socket) kill-session -t '=\(name)'; git -C '\(repo)' worktree remove --force '\(path)'; git -C '\(repo)' branch -D 'emdash/\(name)'")
            }
        }
    }
    out("agents: task creation done")

    // 3. a keystroke through an attached agent: tmux attach on a PTY channel of the shared
    // connection, against `ssh -tt … tmux attach` through the ControlMaster. Both are attached
    // at once, each to its own echo agent, and the keys alternate between them one by one
    // (which side goes first alternates too), so whatever the machine does meanwhile falls on
    // both alike; each round attaches both again.
    var keystroke = Row(workload: "keystroke round trip through an attached agent (ms)")
    var echoes: [AgentSession] = []
    for suffix in ["echo", "echo2"] {
        let session = try await host.startAgent(AgentSessionSpec(
            ptyID: AgentPTYID(providerID: "gemini", kind: .main, suffix: suffix), provider: try AgentProvider.named("gemini"),
            settings: AgentProviderSettings(binary: "bench-echo"), workingDirectory: "~", statusHooks: false))
        for attempt in 0... {
            if try await host.recentOutput(of: session, lines: 20).contains("ECHO-READY") { break }
            if attempt == 2000 { throw BenchError("the echo agent did not start: \(try await host.recentOutput(of: session, lines: 20))") }
            try await Task.sleep(for: .milliseconds(10))
        }
        echoes.append(session)
    }
    var keys = [0, 0]
    for _ in 0..<rounds {
        // the engine's attach as `agent-sessions attach` makes it: the terminal (a
        // pseudo-terminal, as ssh's) joined to `tmux attach` on a PTY channel of the shared
        // connection, carried by the connection's worker
        guard let pty = Pseudoterminal() else { throw BenchError("openpty") }
        defer { close(pty.master) }
        let term = try await host.attach(echoes[0], joining: pty.terminal, detachByte: nil)
        close(pty.terminal)
        defer { term.cancel() }
        guard let ssh = PipedProcess(onTerminal: f.sshArgs(["-tt", "-o", "ControlPath=\(ctl)"],
                                                            command: "tmux -L \(socket) attach-session -t '=\(echoes[1].tmuxName!)'"))
        else { throw BenchError("ssh did not start") }
        defer { ssh.end() }
        var seen: [UInt8] = []
        // the redraw shows the last reply; keys typed while a tmux client still queries its
        // terminal would be taken for answers, so wait a moment more
        guard readUntil(pty.master, keys[0] == 0 ? "ECHO-READY" : "k\(keys[0]);", seen: &seen) else {
            throw BenchError("no screen on attach")
        }
        guard ssh.waitFor(keys[1] == 0 ? "ECHO-READY" : "k\(keys[1]);") else {
            throw BenchError("ssh attach showed no screen: \(String(decoding: ssh.lastOutput.suffix(300), as: UTF8.self).debugDescription)")
        }
        try await Task.sleep(for: .milliseconds(300))
        for i in 0...50 {
            for side in i % 2 == 0 ? [0, 1] : [1, 0] {
                let fd = side == 0 ? pty.master : ssh.stdin
                var b: UInt8 = 0x78
                // each key starts from a quiet machine, as typed keys do
                usleep(2000)
                let s = now()
                guard write(fd, &b, 1) == 1 else { throw BenchError("write to \(agentImplementations[side])'s terminal failed") }
                keys[side] += 1
                guard readUntil(side == 0 ? pty.master : ssh.stdout, "k\(keys[side]);", seen: &seen) else {
                    throw BenchError("\(agentImplementations[side]): key \(keys[side]) did not come back: \(String(decoding: seen.suffix(300), as: UTF8.self).debugDescription)")
                }
                if i > 0 { keystroke.samples[agentImplementations[side], default: []].append(now() - s) }
            }
        }
    }
    for session in echoes { try await host.stop(session) }
    out("agents: keystrokes done")

    // 4. the network comes back: time until the agent's screen is attached again
    var reattach = Row(workload: "restored network to reattached session (ms)")
    let relay = try CuttableRelay(target: f.port)
    var relayed = f.sshkitConfig
    relayed.port = relay.port
    let rt = SSHTransport(configuration: relayed, serverID: ServerID("bench-relayed"))
    let rhost = AgentHost(transport: rt, tmuxSocket: socket)
    let spec = AgentSessionSpec(ptyID: AgentPTYID(providerID: "gemini", kind: .main, suffix: "reattach"),
                                provider: try AgentProvider.named("gemini"),
                                settings: AgentProviderSettings(binary: "bench-ticker"), workingDirectory: "~",
                                statusHooks: false)
    let session = try await rhost.startAgent(spec)
    let sshThroughRelay = f.sshArgs(["-tt", "-o", "ControlMaster=no", "-o", "ControlPath=none",
                                     "-o", "ConnectTimeout=5"], command: "tmux -L \(socket) attach-session -t '=\(session.tmuxName!)'")
        .map { $0 == "\(f.port)" ? "\(relay.port)" : $0 }
    for round in 0..<rounds * 2 {
        for impl in rotated(agentImplementations, by: round) {
            // attached, then the network goes away
            var sshAttached: PipedProcess?
            var terminal: AgentTerminal?
            if impl == agentImplementations[0] {
                let term = try await rhost.attach(session)
                guard await readUntil(term, "tick") else { throw BenchError("no ticks on the attached terminal") }
                terminal = term
            } else {
                guard let p = PipedProcess(sshThroughRelay), p.waitFor("tick") else { throw BenchError("ssh attach failed") }
                sshAttached = p
            }
            relay.cut()
            try await Task.sleep(for: .milliseconds(300))
            relay.restore()
            let s = now()
            if impl == agentImplementations[0] {
                terminal?.cancel()
                // what a client does after a drop: attach again (the transport reconnects),
                // retried every 50 ms
                while true {
                    if let term = try? await rhost.attach(session) {
                        if await readUntil(term, "tick") { term.cancel(); break }
                        term.cancel()
                    }
                    try await Task.sleep(for: .milliseconds(50))
                }
            } else {
                sshAttached?.end()
                // a new ssh -tt (the old connection and its ControlMaster are gone), retried every 50 ms
                while true {
                    if let p = PipedProcess(sshThroughRelay) {
                        let ok = p.waitFor("tick", seconds: 10)
                        p.end()
                        if ok { break }
                    }
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
            reattach.samples[impl, default: []].append(now() - s)
        }
    }
    out("agents: reattach done")
    try await rhost.stop(session)
    _ = try? await t.runProcess("tmux", "-L", socket, "kill-server")
    _ = try? await t.runProcess("/bin/rm", "-rf", "bench-agents", ".local/bin/bench-agent", ".local/bin/bench-ticker",
                                ".local/bin/claude", ".local/bin/codex", ".local/bin/gemini",
                                ".local/bin/bench-echo")
    await orchestrator.close()
    await rt.close()
    await t.close()
    createSteps.report()
    return [detect, detectParallel, create, keystroke, reattach]
}

private func readUntil(_ terminal: AgentTerminal, _ text: String) async -> Bool {
    var all = ""
    for await chunk in terminal.output {
        all += String(decoding: chunk, as: UTF8.self)
        if all.contains(text) { return true }
    }
    return false
}

func reportAgents(_ rows: [Row]) {
    func f(_ x: Double) -> String { String(format: x < 10 ? "%.2f" : "%.1f", x) }
    out()
    out("| workload | AgentSessions median | Emdash's way (ssh) median | AgentSessions / Emdash's way |")
    out("|---|---|---|---|")
    for r in rows {
        let m = agentImplementations.map { median(r.samples[$0] ?? []) }
        let p90 = percentile(r.samples[agentImplementations[0]] ?? [], 0.9)
        out("| \(r.workload) | \(f(m[0])) (p90 \(f(p90))) | \(f(m[1])) | \(String(format: "%.2fx", m[0] / m[1])) |")
    }
    out("samples per implementation: " + rows.map { "\($0.samples[agentImplementations[0]]?.count ?? 0)" }.joined(separator: ", "))
    if let keys = rows.first(where: { $0.workload.hasPrefix("keystroke") }) {
        let a = keys.samples[agentImplementations[0]] ?? [], b = keys.samples[agentImplementations[1]] ?? []
        out("keystrokes, key by key (each of the engine's keys against the ssh key beside it): median ratio "
            + String(format: "%.3fx", pairedMedian(a, b)) + "; p90 \(f(percentile(a, 0.9))) against \(f(percentile(b, 0.9)))")
    }
}
