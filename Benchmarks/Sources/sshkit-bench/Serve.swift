// `agent-sessions serve`, the release binary with its own store, over 100 tasks on 10 hosts
// (the bench sshd, a tmux server each): a keystroke's round trip through the page's
// terminal beside webssh's in the same headless Chromium and `ssh -tt host tmux attach`;
// a status change on a host to an open board; the board's first load in bytes. The browser
// side is Benchmarks/scripts/serve_page_bench.py (Selenium, from the test venv).
import Foundation
import SSHKit
import ServerTransport

/// An agent that, for each line it reads, fires the engine's hook (prompt, then stop, in
/// turns) after writing when it fired; its session's name is its tmux session's.
private let hookedServeAgent = #"""
    #!/bin/sh
    id=$(tmux display-message -p '#S')
    n=0
    echo SERVE-READY
    while read -r line; do
        n=$((n + 1)); if [ $((n % 2)) = 1 ]; then ev=prompt; else ev=stop; fi
        printf '%s %s\n' "$(date +%s.%N)" "$n" >> "$HOME/bench-serve/hook-times-$id"
        printf '%s %s\n' "$(date +%s)" "$ev" >> "$HOME/.cache/sshkit-agents/status/$id"
        s=${TMUX%%,*}; w=$(cat "$HOME/.cache/sshkit-agents/watch/tmux-${s##*/}/pid" 2>/dev/null)
        kill -USR1 "$w" 2>/dev/null || printf '%s %s %s no watcher (%s)\n' "$(date +%s.%N)" "$id" "$n" "$w" >> "$HOME/bench-serve/unwoken"
        echo "MARK-$n"
    done
    """#

private func run(_ t: SSHTransport, _ script: String) async throws -> String {
    try await t.runProcess("/bin/sh", arguments: ["-c", script], stdin: [], environment: [:], timeout: .seconds(120))
        .check("bench serve").stdoutString
}

/// A process of the bench's own: its output collected, stopped by PID.
private final class Child: @unchecked Sendable {  // safe because: output behind `lock`
    let process = Process()
    private let lock = NSLock()
    private var data = Data()

    init(_ exe: String, _ args: [String], env: [String: String]) throws {
        process.executableURL = URL(fileURLWithPath: exe)
        process.arguments = args
        process.environment = env
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        pipe.fileHandleForReading.readabilityHandler = { [self] h in
            let d = h.availableData
            lock.withLock { data.append(d) }
        }
        try process.run()
    }

    var output: String { lock.withLock { String(decoding: data, as: UTF8.self) } }

    /// SIGTERM, then SIGKILL after 10 s.
    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        for _ in 0..<200 where process.isRunning { usleep(50_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    /// Waits for the end (at most `seconds`), then the last line of output as JSON.
    func result(seconds: Double) throws -> [String: Any] {
        let end = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < end { usleep(50_000) }
        if process.isRunning { stop() }
        usleep(100_000)
        let lines = output.split(separator: "\n")
        guard let last = lines.last(where: { $0.hasPrefix("{") }),
              let o = try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any]
        else { throw BenchError("no result from \(process.arguments?.first ?? "?"): \(output.suffix(2000))") }
        return o
    }
}

func benchServe(_ f: Fixture, rounds: Int) async throws {
    let binary = try agentSessionsBinary()
    let python = ProcessInfo.processInfo.environment["SSHKIT_BENCH_BROWSER_PYTHON"] ?? "/opt/sshkit-browser/bin/python"
    let wssh = ProcessInfo.processInfo.environment["SSHKIT_BENCH_WEBSSH"] ?? "/opt/sshkit-webssh/bin/wssh"
    guard FileManager.default.isExecutableFile(atPath: python) else {
        throw BenchError("no \(python) with Selenium: bash scripts/install-deps.sh")
    }
    let script = root + "/Benchmarks/scripts/serve_page_bench.py"
    out("serve: preparing 100 tasks on 10 hosts")
    let setup = SSHTransport(configuration: f.sshkitConfig, serverID: ServerID("bench-serve-setup"))
    _ = try await prepareAgentHost(setup)
    _ = try await run(setup, """
        mkdir -p "$HOME/.local/bin" "$HOME/bench-serve" "$HOME/.cache/sshkit-agents/status" && rm -f "$HOME"/bench-serve/hook-times-*
        cat > "$HOME/.local/bin/bench-serve-agent" <<'SH'
        \(hookedServeAgent)
        SH
        chmod 755 "$HOME/.local/bin/bench-serve-agent"
        for i in 0 1 2 3 4 5 6 7 8 9; do
            tmux -L bench-sv-$i kill-server 2>/dev/null
            rm -rf "$HOME/bench-serve/repo-$i" "$HOME/.cache/sshkit-agents/watch/tmux-bench-sv-$i"
            git init -q -b main "$HOME/bench-serve/repo-$i" && cd "$HOME/bench-serve/repo-$i" && echo x > a.txt && git add a.txt \\
                && git -c user.name=b -c user.email=b@b commit -q -m one
        done
        """)
    let remoteHome = try await run(setup, "printf %s \"$HOME\"")
    let home = "/tmp/sshkit-bench-serve-\(getpid())"
    try FileManager.default.createDirectory(atPath: home + "/.config/agent-sessions", withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: home) }
    try #"{"providers": {"amp": {"binary": "bench-serve-agent"}, "codex": {"binary": "bench-echo"}}}"#
        .write(toFile: home + "/.config/agent-sessions/config.json", atomically: true, encoding: .utf8)
    let env = ["HOME": home, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"]
    func tool(_ args: [String]) throws -> String {
        let c = try Child(binary, args, env: env)
        c.process.waitUntilExit()
        usleep(20_000)
        guard c.process.terminationStatus == 0 else { throw BenchError("agent-sessions \(args.joined(separator: " ")): \(c.output)") }
        return c.output
    }
    for i in 0..<10 {
        _ = try tool(["hosts", "add", "host-\(i)", "\(f.user)@127.0.0.1:\(f.port)", "--key", f.key, "--tmux-socket", "bench-sv-\(i)"])
        _ = try tool(["projects", "add", "host-\(i)", "\(remoteHome)/bench-serve/repo-\(i)", "--name", "repo-\(i)"])
        for k in 0..<10 { _ = try tool(["tasks", "new", "repo-\(i)", "t-\(i)-\(k)", "--agent", "amp"]) }
    }
    _ = try tool(["tasks", "new", "repo-0", "echo", "--agent", "codex"])
    struct Made {
        var id, title, session, socket: String
    }
    guard let listed = try JSONSerialization.jsonObject(with: Data(try tool(["tasks", "list", "--json"]).utf8)) as? [String: Any],
          let rows = listed["tasks"] as? [[String: Any]]
    else { throw BenchError("tasks list --json") }
    let made: [Made] = rows.compactMap { r in
        guard let id = r["id"] as? String, let title = r["title"] as? String,
              let session = (r["agents"] as? [[String: Any]])?.first?["session"] as? String,
              let host = (r["host"] as? String)?.split(separator: "-").last else { return nil }
        return Made(id: id, title: title, session: session, socket: "bench-sv-\(host)")
    }
    guard made.count == 101, let echo = made.first(where: { $0.title == "echo" }) else {
        throw BenchError("\(made.count) tasks listed, not 101")
    }
    out("serve: 101 tasks started")

    let serve = try Child(binary, ["serve", "--listen", "127.0.0.1:0"], env: env)
    defer { serve.stop() }
    let addressFile = home + "/.local/share/agent-sessions/serve/address"
    var url: String?
    for _ in 0..<300 where url == nil {
        url = try? String(contentsOfFile: addressFile, encoding: .utf8)
        if url == nil { usleep(50_000) }
    }
    guard let url else { throw BenchError("serve did not start: \(serve.output)") }
    func code() throws -> String { try tool(["serve", "pair", "--quiet"]).trimmingCharacters(in: .whitespacesAndNewlines) }
    let browserEnv = ["PATH": "/usr/bin:/bin", "HOME": "/root", "PYTHONDONTWRITEBYTECODE": "1"]
    let artifacts = "/tmp/sshkit-bench-serve-artifacts"

    // held for a profiler or a look by hand: SSHKIT_BENCH_SERVE_HOLD=seconds
    if let hold = ProcessInfo.processInfo.environment["SSHKIT_BENCH_SERVE_HOLD"].flatMap(Double.init) {
        out("serve: held \(Int(hold)) s at \(url) (HOME=\(home)); the echo task \(echo.id), session \(echo.session) on \(echo.socket)")
        try await Task.sleep(for: .seconds(hold))
    }

    // 1. the first load: the board with 101 rows, and a task page
    let loaded = try Child(python, [script, "load", "--url", url, "--code", try code(), "--task", echo.id, "--out", artifacts],
                           env: browserEnv).result(seconds: 120)
    out("serve: first load measured")

    // 2. a status change on a host to the open board: each sample a line to one agent,
    //    whose hook's time on the host is the start; the board message showing the new
    //    state, the end
    let samples = rounds >= 10 ? 200 : 60
    let boardFile = home + "/board.jsonl"
    let listener = try Child(python, [script, "board", "--url", url, "--code", try code(), "--file", boardFile,
                                      "--seconds", "\(Double(samples) * 0.3 + 25)"], env: browserEnv)
    try await Task.sleep(for: .seconds(5))  // the socket open, the hosts' events followed
    let agents = made.filter { $0.title != "echo" }
    var sent: [(task: Made, n: Int, written: Double?)] = []
    var counts: [String: Int] = [:]
    for i in 0..<samples {
        let t = agents[(i * 37) % agents.count]
        counts[t.session, default: 0] += 1
        _ = try await run(setup, "tmux -L \(t.socket) send-keys -t '=\(t.session):' go Enter")
        try await Task.sleep(for: .milliseconds(250))
        // when that host's watcher last wrote its log (its change time): splits a sample
        // between the host and the way to the board
        let written = Double(try await run(setup, "stat -c %.9Z \"$HOME/.cache/sshkit-agents/watch/tmux-\(t.socket)/events\"")
            .trimmingCharacters(in: .whitespacesAndNewlines))
        sent.append((t, counts[t.session]!, written))
    }
    _ = try listener.result(seconds: 60)
    let hookLines = try await run(setup, "cd \"$HOME/bench-serve\" && for f in hook-times-*; do sed \"s/^/${f#hook-times-} /\" \"$f\"; done")
    var fired: [String: Double] = [:]  // "session n" → when
    for line in hookLines.split(separator: "\n") {
        let p = line.split(separator: " ")
        if p.count == 3, let at = Double(p[1]) { fired["\(p[0]) \(p[2])"] = at }
    }
    var messages: [(at: Double, bytes: Int, states: [String: String])] = []
    for line in (try String(contentsOfFile: boardFile, encoding: .utf8)).split(separator: "\n") {
        guard let o = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
              let at = o["at"] as? Double, let states = o["states"] as? [String: String] else { continue }
        messages.append((at, o["bytes"] as? Int ?? 0, states))
    }
    var boardMs: [Double] = [], hostMs: [Double] = [], wireMs: [Double] = []
    var missed = 0
    for (t, n, written) in sent {
        // prompt (odd lines) shows as working, stop (even) as done
        guard let t0 = fired["\(t.session) \(n)"] else { missed += 1; continue }
        let want = n % 2 == 1 ? "working" : "done"
        if let m = messages.first(where: { $0.at >= t0 && $0.states[t.title] == want }) {
            boardMs.append((m.at - t0) * 1000)
            if let written, written >= t0, written <= m.at {
                hostMs.append((written - t0) * 1000)
                wireMs.append((m.at - written) * 1000)
            }
            if (m.at - t0) * 1000 > 200 {
                out("serve: slow sample \(Int((m.at - t0) * 1000)) ms: \(t.session) on \(t.socket), line \(n), the log written \(written.map { String(format: "%.3f", $0 - t0) } ?? "?") s after the hook")
            }
        } else {
            missed += 1
        }
    }
    let unwoken = try await run(setup, "cat \"$HOME/bench-serve/unwoken\" 2>/dev/null; exit 0")
    if !unwoken.isEmpty { out("serve: hooks that found no watcher to wake:\n\(unwoken)") }
    out("serve: board latency measured")

    // 3. a keystroke's round trip: the page, webssh and ssh -tt, in turns
    var keys: [String: [Double]] = [:]
    var webNote: String?
    if FileManager.default.isExecutableFile(atPath: wssh) {
        let webPort = try freePort()
        let web = try Child(wssh, ["--address=127.0.0.1", "--port=\(webPort)", "--policy=autoadd"], env: browserEnv)
        defer { web.stop() }
        try await Task.sleep(for: .seconds(1))
        let k = try Child(python, [script, "keys", "--url", url, "--code", try code(), "--task", echo.id, "--session", echo.session,
                                   "--socket", echo.socket, "--webssh", "http://127.0.0.1:\(webPort)/", "--ssh-port", "\(f.port)",
                                   "--user", f.user, "--key", f.key, "--blocks", rounds >= 10 ? "6" : "3", "--per-block", "20",
                                   "--out", artifacts], env: browserEnv).result(seconds: 600)
        keys = (k["keys"] as? [String: [Double]]) ?? [:]
        if keys.isEmpty { throw BenchError("keys: \(k)") }
    } else {
        webNote = "webssh is not installed (python3 -m venv /opt/sshkit-webssh && /opt/sshkit-webssh/bin/pip install webssh==1.6.3)"
    }
    out("serve: keystrokes measured")

    func fmt(_ x: Double) -> String { String(format: "%.1f", x) }
    out()
    out("| a keystroke's round trip into an agent's tmux pane (ms) | p50 | p99 | samples | p50 ratio |")
    out("|---|---|---|---|---|")
    let page = keys["page"] ?? []
    let labels = ["page": "the page of `agent-sessions serve`", "webssh": "webssh 1.6 (same browser)",
                  "ssh -tt": "`ssh -tt host tmux attach`", "socket": "… the page's socket without a browser (websocket-client)"]
    for name in ["page", "webssh", "ssh -tt", "socket"] {
        guard let xs = keys[name], !xs.isEmpty, let label = labels[name] else { continue }
        let ratio = name == "page" ? "1.00x" : String(format: "page %.2fx", median(page) / median(xs))
        out("| \(label) | \(fmt(median(xs))) | \(fmt(percentile(xs, 0.99))) | \(xs.count) | \(ratio) |")
    }
    if let webNote { out("(\(webNote))") }
    out()
    out("| a status change on a host to an open board, 100 tasks on 10 hosts (ms) | p50 | p99 | max | samples | missed |")
    out("|---|---|---|---|---|---|")
    out("| hook fired on the host → the board's socket message | \(fmt(median(boardMs))) | \(fmt(percentile(boardMs, 0.99))) | \(fmt(boardMs.max() ?? .nan)) | \(boardMs.count) | \(missed) |")
    out("| … of which: hook → the watcher's log on the host | \(fmt(median(hostMs))) | \(fmt(percentile(hostMs, 0.99))) | \(fmt(hostMs.max() ?? .nan)) | \(hostMs.count) | |")
    out("| … of which: the log → the board's socket message | \(fmt(median(wireMs))) | \(fmt(percentile(wireMs, 0.99))) | \(fmt(wireMs.max() ?? .nan)) | \(wireMs.count) | |")
    let sizes = messages.map(\.bytes)
    out()
    out("| first load, the cache off (bytes over the wire) | board, 101 tasks | a task page |")
    out("|---|---|---|")
    let load = loaded["load"] as? [String: [String: Any]] ?? [:]
    func total(_ k: String) -> Int { load[k]?["total"] as? Int ?? -1 }
    func first(_ k: String) -> Int { load[k]?["firstSocketMessage"] as? Int ?? 0 }
    out("| the page and what it loads | \(total("board")) | \(total("task")) |")
    func wire(_ k: String) -> Int { (load[k]?["firstSocketWire"] as? [Any])?.first as? Int ?? -1 }
    func deflated(_ k: String) -> String { ((load[k]?["firstSocketWire"] as? [Any])?.last as? Bool) == true ? " (deflated)" : "" }
    out("| its first socket message, as read | \(first("board")) | \(first("task")) |")
    out("| … on the wire | \(wire("board"))\(deflated("board")) | \(wire("task"))\(deflated("task")) |")
    out("| in all (the page, what it loads, the first message on the wire) | \(total("board") + wire("board")) | \(total("task") + wire("task")) |")
    out("(a board message as read: \(sizes.isEmpty ? 0 : sizes.reduce(0, +) / sizes.count) bytes on average over \(sizes.count))")

    serve.stop()
    // the store goes with the bench's home; the agents with their tmux servers, the
    // worktrees with the repositories
    _ = try? await run(setup, """
        for i in 0 1 2 3 4 5 6 7 8 9; do tmux -L bench-sv-$i kill-server 2>/dev/null; rm -rf "$HOME/.cache/sshkit-agents/watch/tmux-bench-sv-$i"; done
        rm -rf "$HOME/bench-serve" "$HOME/.local/bin/bench-serve-agent"; exit 0
        """)
    await setup.close()
    out("serve: done")
}
