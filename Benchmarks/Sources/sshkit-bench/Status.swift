// Agent status: the engine's host-side watcher, read over one channel per host, against
// what the peers do (each agent's pane captured over SSH once a second), in one run
// against the same sshd.
import AgentSessions
import Foundation
import SSHKit
import ServerTransport

/// A fake agent that fires the engine's hook for each line it reads (prompt, then stop,
/// alternating: the line the engine's hooks append to the status file, and the watcher
/// woken), after writing the time it fired, and prints a marker line a poller can see.
private let hookedAgent = #"""
    #!/bin/sh
    n=0
    echo HOOKED-READY
    while read -r line; do
        n=$((n + 1)); if [ $((n % 2)) = 1 ]; then ev=prompt; else ev=stop; fi
        date +%s.%N >> "$HOME/bench-status/hook-times-$1"
        printf '%s %s\n' "$(date +%s)" "$ev" >> "$HOME/.cache/sshkit-agents/status/$1"
        s=${TMUX%%,*}; kill -USR1 "$(cat "$HOME/.cache/sshkit-agents/watch/tmux-${s##*/}/pid" 2>/dev/null)" 2>/dev/null
        echo "MARK-$n"
    done
    """#

/// CPU seconds of a process and its reaped children, from /proc/<pid>/stat.
private func treeCPUSeconds(pid: Int32) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return .nan }
    let f = stat[stat.index(after: close)...].split(separator: " ")
    // after the name: utime is the 12th field, stime 13th, cutime 14th, cstime 15th
    let ticks = [11, 12, 13, 14].compactMap { Double(f[$0]) }.reduce(0, +)
    return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
}

private func run(_ t: SSHTransport, _ script: String, _ args: [String] = []) async throws -> String {
    try await t.runProcess("/bin/sh", arguments: ["-c", script, "sh"] + args, stdin: [], environment: [:], timeout: .seconds(60))
        .check("bench status").stdoutString
}

func benchStatus(_ f: Fixture, rounds: Int) async throws {
    out("status: preparing")
    let setup = SSHTransport(configuration: f.sshkitConfig, serverID: ServerID("bench-status-setup"))
    _ = try await run(setup, """
        mkdir -p "$HOME/.local/bin" "$HOME/bench-status" && rm -f "$HOME"/bench-status/hook-times-*
        cat > "$HOME/.local/bin/bench-hooked" <<'SH'
        \(hookedAgent)
        SH
        printf '#!/bin/sh\\necho "idle agent> "\\nexec sleep 100000\\n' > "$HOME/.local/bin/bench-idle"
        chmod 755 "$HOME/.local/bin/bench-hooked" "$HOME/.local/bin/bench-idle"
        """)

    // 1. from a hook firing on the host to the event on the laptop; against a poller
    //    that captures the pane once a second and looks for the agent's marker
    let socket = "bench-status-latency"
    _ = try? await run(setup, "tmux -L \(socket) kill-server 2>/dev/null; rm -rf \"$HOME/.cache/sshkit-agents/watch/tmux-\(socket)\"; exit 0")
    let record = HostRecord(name: "bench", address: "127.0.0.1", port: f.port, user: f.user,
                            authentication: .keyFiles([f.key]), tmuxSocket: socket)
    let t = SSHTransport(configuration: f.sshkitConfig, serverID: record.serverID)
    let host = AgentHost(transport: t, tmuxSocket: socket)
    let store = InMemoryAgentStore()
    try await store.save(record)
    let engine = AgentOrchestrator(store: store) { _ in host }
    let pty = AgentPTYID(providerID: "amp", kind: .main, suffix: "latency")
    let session = try await host.startAgent(AgentSessionSpec(
        ptyID: pty, provider: try AgentProvider.named("amp"),
        settings: AgentProviderSettings(binary: "bench-hooked", extraArguments: [pty.description]), workingDirectory: "/tmp"))
    guard try await host.waitForOutput(of: session, containing: "HOOKED-READY", timeout: .seconds(20)) else {
        throw BenchError("the hooked agent did not start")
    }
    // settled first (a fresh screen reads as working for its first moments), so each hook
    // changes the state: prompt → working, stop → done
    for _ in 0..<100 {
        if await host.status(of: session).activity == .idle { break }
        try await Task.sleep(for: .milliseconds(200))
    }
    final class Arrivals: @unchecked Sendable {  // safe because: behind `lock`
        let lock = NSLock()
        var times: [Double] = []
    }
    let arrivals = Arrivals()
    let updates = engine.followStatus(hosts: [record], newOnly: true)
    let connected = DispatchSemaphore(value: 0)
    let follower = Task {
        var first = true
        for await u in updates {
            switch u {
            case .hostConnected: if first { first = false; connected.signal() }
            case .status(let e, _, _) where e.session == pty.description && (e.status.rule == "prompt" || e.status.rule == "stop"):
                let at = Date().timeIntervalSince1970
                arrivals.lock.withLock { arrivals.times.append(at) }
            default: break
            }
        }
    }
    _ = await Task.detached { connected.wait() }.value
    let samples = rounds * 10
    var watcherMs: [Double] = []
    var pollMs: [Double] = []
    var hostMs: [Double] = []  // hook → the watcher's log
    var wireMs: [Double] = []  // the log → the laptop
    for i in 1...samples {
        let before = arrivals.lock.withLock { arrivals.times.count }
        try await host.sendLine("go", to: session)
        var arrived: Double?
        for _ in 0..<400 where arrived == nil {
            try await Task.sleep(for: .milliseconds(5))
            arrived = arrivals.lock.withLock { arrivals.times.count > before ? arrivals.times.last : nil }
        }
        guard let arrived else { throw BenchError("no event for hook \(i)") }
        // when the watcher wrote it (the log's change time on the host): splits a slow
        // sample between the host and the way to the laptop
        let written = Double(try await run(t, "stat -c %.9Z \"$HOME/.cache/sshkit-agents/watch/tmux-\(socket)/events\"")
            .trimmingCharacters(in: .whitespacesAndNewlines))
        // the poller's way: capture-pane once a second until the marker shows
        let started = Date()
        var seenAt: Double?
        let phase = Double.random(in: 0..<1)  // where in its second the poll loop is
        try await Task.sleep(for: .milliseconds(Int(phase * 1000)))
        while seenAt == nil && Date().timeIntervalSince(started) < 10 {
            let screen = try await t.runProcess("tmux", arguments: ["-L", socket, "capture-pane", "-p", "-t", "=\(pty.description):"],
                                                stdin: [], environment: [:], timeout: .seconds(10)).stdoutString
            if screen.contains("MARK-\(i)\n") { seenAt = Date().timeIntervalSince1970; break }
            try await Task.sleep(for: .seconds(1))
        }
        let fired = try await run(t, "tail -n 1 \"$HOME/bench-status/hook-times-$1\"", [pty.description])
        guard let t0 = Double(fired.trimmingCharacters(in: .whitespacesAndNewlines)) else { throw BenchError("no hook time") }
        watcherMs.append((arrived - t0) * 1000)
        if let written { hostMs.append((written - t0) * 1000); wireMs.append((arrived - written) * 1000) }
        if let seenAt { pollMs.append((seenAt - t0) * 1000) }
        try await Task.sleep(for: .milliseconds(300))
    }
    follower.cancel()
    func fmt(_ x: Double) -> String { String(format: "%.0f", x) }
    out()
    out("| from a hook firing on the host to the laptop (ms) | p50 | p99 | samples |")
    out("|---|---|---|---|")
    out("| AgentSessions (host watcher, one events channel) | \(fmt(median(watcherMs))) | \(fmt(percentile(watcherMs, 0.99))) | \(watcherMs.count) |")
    out("| … of which: hook → the watcher's log on the host | \(fmt(median(hostMs))) | \(fmt(percentile(hostMs, 0.99))) | \(hostMs.count) |")
    out("| … of which: the log → the laptop | \(fmt(median(wireMs))) | \(fmt(percentile(wireMs, 0.99))) | \(wireMs.count) |")
    out("| capture-pane polled once a second over SSH | \(fmt(median(pollMs))) | \(fmt(percentile(pollMs, 0.99))) | \(pollMs.count) |")
    out("status: latency measured")
    try await host.stop(session)
    await engine.close()
    out("status: latency engine shut down")
    _ = try? await run(setup, "tmux -L \(socket) kill-server 2>/dev/null; rm -rf \"$HOME/.cache/sshkit-agents/watch/tmux-\(socket)\"; exit 0")

    // 2. the cost of watching 1 and 10 hosts with 10 idle agents each, for a window:
    //    bytes on the wire (a counting relay), the laptop's CPU, the hosts' CPU
    let window = Double(ProcessInfo.processInfo.environment["SSHKIT_BENCH_STATUS_WINDOW"].flatMap { Int($0) } ?? (rounds >= 10 ? 60 : 20))
    out()
    out("| watching idle agents, per minute | AgentSessions bytes | polling bytes | AgentSessions laptop CPU ms | polling laptop CPU ms | AgentSessions host CPU ms |")
    out("|---|---|---|---|---|---|")
    for hostCount in [1, 10] {
        let relay = try CuttableRelay(target: f.port)
        var relayed = f.sshkitConfig
        relayed.port = relay.port
        var records: [HostRecord] = []
        var hosts: [HostID: AgentHost] = [:]
        var transports: [SSHTransport] = []
        var firstSessions: [AgentSession] = []
        for h in 0..<hostCount {
            let sock = "bench-status-\(h)"
            _ = try? await run(setup, "tmux -L \(sock) kill-server 2>/dev/null; rm -rf \"$HOME/.cache/sshkit-agents/watch/tmux-\(sock)\"; exit 0")
            let r = HostRecord(name: "bench-\(h)", address: "127.0.0.1", port: relay.port, user: f.user,
                               authentication: .keyFiles([f.key]), tmuxSocket: sock)
            let tr = SSHTransport(configuration: relayed, serverID: r.serverID)
            let ah = AgentHost(transport: tr, tmuxSocket: sock)
            for a in 0..<10 {
                let started = try await ah.startAgent(AgentSessionSpec(
                    ptyID: AgentPTYID(providerID: "amp", kind: .main, suffix: "idle\(a)"), provider: try AgentProvider.named("amp"),
                    settings: AgentProviderSettings(binary: "bench-idle"), workingDirectory: "/tmp"))
                if a == 0 { firstSessions.append(started) }
            }
            records.append(r)
            hosts[r.id] = ah
            transports.append(tr)
        }
        let s2 = InMemoryAgentStore()
        for r in records { try await s2.save(r) }
        let hostsByID = hosts
        let watching = AgentOrchestrator(store: s2) { r in hostsByID[r.id]! }
        // the watchers start and settle (their first look), then the window
        for (r, first) in zip(records, firstSessions) { _ = await hostsByID[r.id]!.status(of: first) }
        out("status: \(Wording.count(hostCount, "host")) ready")
        let follow = Task { for await _ in watching.followStatus(hosts: records, newOnly: true) {} }
        try await Task.sleep(for: .seconds(5))
        let watcherPIDs = try await run(setup, "cat \"$HOME\"/.cache/sshkit-agents/watch/tmux-bench-status-*/pid")
            .split(separator: "\n").compactMap { Int32($0) }
        let hostCPU0 = watcherPIDs.map { treeCPUSeconds(pid: $0) }.reduce(0, +)
        let bytes0 = relay.bytes, cpu0 = processCPUSeconds()
        try await Task.sleep(for: .seconds(window))
        let watchBytes = Double(relay.bytes - bytes0) * 60 / window
        let watchCPU = (processCPUSeconds() - cpu0) * 1000 * 60 / window
        let hostCPU = (watcherPIDs.map { treeCPUSeconds(pid: $0) }.reduce(0, +) - hostCPU0) * 1000 * 60 / window
        follow.cancel()
        out("status: \(Wording.count(hostCount, "host")) watched")

        // the peers' way: each agent's pane captured once a second, over the same connections
        let bytes1 = relay.bytes, cpu1 = processCPUSeconds()
        let started = Date()
        while Date().timeIntervalSince(started) < window {
            let tick = Date()
            try await withThrowingTaskGroup(of: Void.self) { g in
                for (h, tr) in transports.enumerated() {
                    for a in 0..<10 {
                        g.addTask {
                            _ = try await tr.runProcess("tmux", arguments: ["-L", "bench-status-\(h)", "capture-pane", "-p", "-e",
                                                                            "-t", "=amp-main-idle\(a):"],
                                                        stdin: [], environment: [:], timeout: .seconds(10))
                        }
                    }
                }
                try await g.waitForAll()
            }
            let rest = 1 - Date().timeIntervalSince(tick)
            if rest > 0 { try await Task.sleep(for: .milliseconds(Int(rest * 1000))) }
        }
        let pollBytes = Double(relay.bytes - bytes1) * 60 / window
        let pollCPU = (processCPUSeconds() - cpu1) * 1000 * 60 / window
        out("| \(Wording.count(hostCount, "host")) × 10 agents | \(Int(watchBytes)) | \(Int(pollBytes)) (\(String(format: "%.0fx", pollBytes / max(watchBytes, 1)))) | \(fmt(watchCPU)) | \(fmt(pollCPU)) | \(fmt(hostCPU)) |")
        await watching.close()
        for (h, tr) in transports.enumerated() {
            _ = try? await run(setup, "tmux -L bench-status-\(h) kill-server 2>/dev/null; rm -rf \"$HOME/.cache/sshkit-agents/watch/tmux-bench-status-\(h)\"; exit 0")
            await tr.close()
        }
    }
    out("window: \(Int(window)) s per measurement, scaled to a minute; host CPU is the watchers' shells and what they ran")
    _ = try? await run(setup, "rm -rf \"$HOME/bench-status\" \"$HOME/.local/bin/bench-hooked\" \"$HOME/.local/bin/bench-idle\"")
    await t.close()
    await setup.close()
}
