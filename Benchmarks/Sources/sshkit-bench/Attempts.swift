// Several attempts at one task on several hosts: `createAttempts` (every attempt at once,
// over each host's shared connection) against the same twelve tasks started one after
// another, by the engine and by Emdash's way over OpenSSH; then `checkAttempts` (a check
// command in the twelve worktrees) and `compareAttempts` with it against the same check run
// with `ssh host …` one worktree after another. Four host records on the bench sshd, each with its own
// connection, tmux server and checkout of one repository.
import AgentSessions
import Foundation
import SSHKit
import ServerTransport

private func run(_ t: SSHTransport, _ script: String, _ args: [String] = []) async throws -> String {
    try await t.runProcess("/bin/sh", arguments: ["-c", script, "sh"] + args, stdin: [], environment: [:], timeout: .seconds(300))
        .check("bench attempts").stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)
}

func benchAttempts(_ base: Fixture, rounds: Int) async throws {
    let hostCount = 4, attemptCount = 12
    // SSHKIT_BENCH_LATENCY_MS=N: the hosts are reached through a relay that holds each chunk
    // N ms each way, as a network would
    let latency = Int(ProcessInfo.processInfo.environment["SSHKIT_BENCH_LATENCY_MS"] ?? "") ?? 0
    let relay = latency > 0 ? try CuttableRelay(target: base.port, delay: useconds_t(latency * 1000)) : nil
    let f = relay.map { Fixture(dir: base.dir, port: $0.port, user: base.user, key: base.key, fingerprints: base.fingerprints) } ?? base
    out("attempts: preparing \(hostCount) checkouts of one repository" + (latency > 0 ? ", every host \(latency) ms away each way" : ""))
    let setup = SSHTransport(configuration: base.sshkitConfig, serverID: ServerID("bench-attempts-setup"))
    let root = try await run(setup, """
        set -e
        r="$HOME/bench-attempts"; rm -rf "$r"; mkdir -p "$r/repo" "$HOME/.local/bin" && cd "$r/repo"
        git init -q -b main . && git config user.email b@b && git config user.name b
        i=0; while [ $i -lt 50 ]; do head -c 3000 /dev/urandom | base64 > "f$i.txt"; i=$((i + 1)); done
        git add -A && git commit -q -m base
        for n in 1 2 3; do git clone -q "$r/repo" "$r/clone$n"; done
        printf '#!/bin/sh\\necho AGENT-READY\\nexec sleep 600\\n' > "$HOME/.local/bin/bench-agent"; chmod 755 "$HOME/.local/bin/bench-agent"
        for s in 0 1 2 3; do tmux -L "bench-attempts-$s" kill-server 2>/dev/null || true; done; sleep 0.5
        echo "$r"
        """)
    let store = InMemoryAgentStore()
    var hosts: [HostRecord] = [], projects: [ProjectRecord] = []
    for i in 0..<hostCount {
        let h = HostRecord(name: "h\(i)", address: "127.0.0.1", port: f.port, user: f.user, authentication: .keyFiles([f.key]),
                           tmuxSocket: "bench-attempts-\(i)")
        try await store.save(h)
        let p = ProjectRecord(hostID: h.id, name: "repo", path: i == 0 ? root + "/repo" : root + "/clone\(i)", fetchesBase: false)
        try await store.save(p)
        hosts.append(h)
        projects.append(p)
    }
    let engine = AgentOrchestrator(store: store, providerSettings: ["gemini": AgentProviderSettings(binary: "bench-agent")],
                                   searchPath: ["~/.local/bin"]) { record in
        SSHTransport(configuration: f.sshkitConfig, serverID: record.serverID, maxSessions: 10)
    }
    let ctl = try f.startControlMaster("attempts-ctl")
    defer { f.stopControlMaster(ctl) }
    func ssh(_ command: String, master: Bool = true) -> Int32 {
        spawnAndWait(f.sshArgs(["-o", master ? "ControlPath=\(ctl)" : "ControlPath=none"], command: command))
    }
    func waitAll(_ tasks: [TaskRecord]) async throws {
        try await withThrowingTaskGroup(of: Void.self) { g in
            for t in tasks {
                g.addTask {
                    guard let main = try await store.conversations(taskID: t.id).first else { throw BenchError("no agent") }
                    guard try await engine.chat(main.id).waitForOutput(containing: "AGENT-READY", timeout: .seconds(60)) else {
                        let screen: String
                        do { screen = try await engine.chat(main.id).screen(lines: 20) } catch { screen = "\(error)" }
                        throw BenchError("an attempt's first output never came: \(screen.debugDescription)")
                    }
                }
            }
            try await g.waitForAll()
        }
    }
    func clear() async throws {
        for t in try await store.tasks(projectID: nil) { try await engine.task(t.id).delete(force: true) }
    }
    // every host connected, the agent detected: what a second use of the engine finds
    for h in hosts { _ = try await engine.host(h.id).detectAgents() }

    // 1. twelve attempts to their first output
    let startImpls = ["createAttempts, all at once", "createTask, one after another", "Emdash's way (ssh), one after another"]
    var start: [String: [Double]] = [:]
    var kept: [TaskRecord] = []
    // where the time goes, per host: the steps of each host named by the host
    func byHost(_ step: AgentTrace.Step) -> String {
        let name = step.kind == .remoteStream ? "the first output, watched" : step.name
        return step.host.isEmpty ? name : "\(step.host.split(separator: " ").first.map(String.init) ?? step.host): \(name)"
    }
    var startSteps = Breakdown("\(attemptCount) attempts on \(hostCount) hosts at once, to every first output")
    var checkSteps = Breakdown("checkAttempts with git status in the \(attemptCount) worktrees")
    var compareSteps = Breakdown("compareAttempts with git status in the \(attemptCount) worktrees")
    for round in -1..<rounds {
        for impl in rotated(startImpls, by: max(0, round)) {
            try await clear()
            let s = now()
            switch impl {
            case startImpls[0]:
                let trace = AgentTrace()
                try await AgentTrace.$current.withValue(trace) {
                    let launch = try await engine.project(projects[0].id).createAttempts(title: "bench \(round)",
                                                                 agents: [AttemptAgents(providerID: "gemini", count: attemptCount)],
                                                                 hostIDs: hosts.map(\.id))
                    guard launch.started.count == attemptCount else { throw BenchError("\(launch.failed.count) attempts failed") }
                    try await waitAll(launch.started)
                }
                if round >= 0 { startSteps.add(trace, total: now() - s, name: byHost) }
            case startImpls[1]:
                var made: [TaskRecord] = []
                for n in 0..<attemptCount {
                    made.append(try await engine.project(projects[n % hostCount].id).createTask(title: "bench \(round) \(n)",
                                                            providerID: "gemini").record)
                }
                try await waitAll(made)
            default:
                // Emdash 0.4's steps per task: prune, add the worktree, `ssh -tt` running tmux
                // new-session with the agent, its PTY read until the agent speaks
                for n in 0..<attemptCount {
                    let repo = projects[n % hostCount].path, name = "bench-\(round)-\(n)-\(Int(Date().timeIntervalSince1970 * 1000))"
                    let path = repo + "/.emdash/worktrees/" + name
                    guard ssh("git -C '\(repo)' worktree prune") == 0,
                          ssh("git -C '\(repo)' worktree add -q -b 'emdash/\(name)' '\(path)' main") == 0
                    else { throw BenchError("git over ssh failed") }
                    let script = "export PATH=\"$HOME/.local/bin:$PATH\"; cd '\(path)' && exec tmux -L bench-attempts-\(n % hostCount) new-session -As \(name) -- sh -c bench-agent"
                    guard let p = PipedProcess(f.sshArgs(["-tt", "-o", "ControlPath=\(ctl)"], command: script)) else {
                        throw BenchError("ssh did not start")
                    }
                    let ok = p.waitFor("AGENT-READY")
                    p.end()
                    guard ok else { throw BenchError("the agent's output never came through ssh -tt") }
                }
            }
            let ms = now() - s
            if round >= 0 { start[impl, default: []].append(ms) }
            if impl == startImpls[2] {
                // Emdash's sessions and worktrees are not the engine's: removed by hand (the tmux
                // servers stay, as on a host in use)
                _ = ssh("for s in 0 1 2 3; do tmux -L bench-attempts-$s ls -F '#{session_name}' 2>/dev/null | grep '^bench-' | while read -r n; do tmux -L bench-attempts-$s kill-session -t \"=$n\"; done; done; for d in '\(root)'/repo '\(root)'/clone*; do for w in \"$d\"/.emdash/worktrees/bench-*; do [ -d \"$w\" ] && git -C \"$d\" worktree remove --force \"$w\"; done; git -C \"$d\" branch --list 'emdash/bench-*' | xargs -r git -C \"$d\" branch -q -D; done; true")
            }
        }
    }
    out("attempts: starts done")

    // 2. compare with a check in the twelve worktrees
    try await clear()
    let launch = try await engine.project(projects[0].id).createAttempts(title: "bench compare",
                                                 agents: [AttemptAgents(providerID: "gemini", count: attemptCount)], hostIDs: hosts.map(\.id))
    kept = launch.started
    try await waitAll(kept)
    let checks = [("git status", "git status --short | wc -l"), ("a 0.5 s test", "sleep 0.5; test -f f1.txt")]
    let compareImpls = ["checkAttempts, all at once", "compareAttempts (states, changes and the check), all at once",
                        "ssh host, one after another", "ssh through a ControlMaster, one after another"]
    var compare: [String: [Double]] = [:]
    for (name, command) in checks {
        for round in -1..<rounds {
            for impl in rotated(compareImpls, by: max(0, round)) {
                let s = now()
                switch impl {
                case compareImpls[0]:
                    let trace = AgentTrace()
                    let runs = try await AgentTrace.$current.withValue(trace) { try await engine.task(kept[0].id).checkAttempts(command) }
                    guard runs.count == attemptCount, runs.allSatisfy({ $0.check?.passed == true }) else {
                        throw BenchError("a check failed: \(runs.map { $0.problem?.message ?? $0.check?.output ?? "-" })")
                    }
                    if round >= 0 && name == checks[0].0 { checkSteps.add(trace, total: now() - s, name: byHost) }
                case compareImpls[1]:
                    let trace = AgentTrace()
                    let rows = try await AgentTrace.$current.withValue(trace) { try await engine.task(kept[0].id).compareAttempts(check: command) }
                    guard rows.count == attemptCount, rows.allSatisfy({ $0.check?.passed == true }) else {
                        throw BenchError("a check failed: \(rows.map { $0.problem?.message ?? $0.check?.output ?? "-" })")
                    }
                    if round >= 0 && name == checks[0].0 { compareSteps.add(trace, total: now() - s, name: byHost) }
                default:
                    for t in kept {
                        guard ssh("cd '\(t.worktree.path)' && sh -c '\(command)' >/dev/null", master: impl == compareImpls[3]) == 0 else {
                            throw BenchError("the check over ssh failed")
                        }
                    }
                }
                if round >= 0 { compare["\(name)|\(impl)", default: []].append(now() - s) }
            }
        }
    }
    // what compare does besides the check: each attempt's status (the hosts' watchers) and
    // changes against the base
    var bare: [Double] = []
    for round in -1..<rounds {
        let s = now()
        let rows = try await engine.task(kept[0].id).compareAttempts()
        guard rows.count == attemptCount, rows.allSatisfy({ $0.filesChanged != nil }) else { throw BenchError("compare failed") }
        if round >= 0 { bare.append(now() - s) }
    }
    try await clear()
    await engine.close()
    _ = try? await run(setup, "for s in 0 1 2 3; do tmux -L bench-attempts-$s kill-server 2>/dev/null; done; rm -rf \"$HOME/bench-attempts\"")
    await setup.close()

    func fmt(_ x: Double) -> String { String(format: "%.0f", x) }
    out()
    if latency > 0 { out("every host \(latency) ms away each way (a relay holds each chunk)") }
    out("| \(attemptCount) attempts on \(hostCount) hosts, to every attempt's first output | median (ms) | p90 | ratio to createAttempts |")
    out("|---|---|---|---|")
    let mine = median(start[startImpls[0]] ?? [])
    for impl in startImpls {
        let xs = start[impl] ?? []
        out("| \(impl) | \(fmt(median(xs))) | \(fmt(percentile(xs, 0.9))) | \(String(format: "%.2fx", median(xs) / mine)) |")
    }
    out()
    out("| a check in \(attemptCount) worktrees on \(hostCount) hosts | median (ms) | p90 | ratio to checkAttempts |")
    out("|---|---|---|---|")
    for (name, _) in checks {
        let base = median(compare["\(name)|\(compareImpls[0])"] ?? [])
        for impl in compareImpls {
            let xs = compare["\(name)|\(impl)"] ?? []
            out("| \(name): \(impl) | \(fmt(median(xs))) | \(fmt(percentile(xs, 0.9))) | \(String(format: "%.2fx", median(xs) / base)) |")
        }
    }
    out("compareAttempts without a check (status and changes of the \(attemptCount) attempts): median \(fmt(median(bare))) ms, p90 \(fmt(percentile(bare, 0.9)))")
    out("\(rounds) rounds, implementations alternating")
    startSteps.report()
    checkSteps.report()
    compareSteps.report()
    out("attempts: done")
}
