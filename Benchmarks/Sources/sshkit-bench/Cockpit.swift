// The cockpit, run in this process on a terminal of the benchmark's own (keys fed in, the
// bytes it writes recorded), over 100 tasks on 10 hosts (the fixture's sshd, a tmux server
// each): keystroke to redraw, bytes written while nothing changes and while a preview is
// live, and an agent's output on the host to the cockpit's screen beside `tmux attach`
// over OpenSSH.
import AgentCockpit
import AgentSessions
import Foundation
import SSHKit
import ServerTransport
import Synchronization
import TerminalSupport

/// The terminal the cockpit draws on: what it wrote, and when.
private final class Recorder: Sendable {
    let writes = Mutex<[(at: Double, bytes: [UInt8])]>([])
    let input = Mutex<AsyncStream<[UInt8]>.Continuation?>(nil)

    var terminal: Cockpit.Terminal {
        Cockpit.Terminal(
            input: { [self] in
                let (stream, c) = AsyncStream<[UInt8]>.makeStream()
                input.withLock { $0 = c }
                return stream
            },
            write: { [self] bytes in
                let at = Date().timeIntervalSince1970
                writes.withLock { $0.append((at, bytes)) }
            },
            size: { (120, 40) }, resizes: AsyncStream { _ in }, colors: .palette256)
    }

    func type(_ text: String) { _ = input.withLock { $0?.yield(Array(text.utf8)) } }
    var count: Int { writes.withLock { $0.count } }
    func bytes(since: Double) -> Int { writes.withLock { $0.filter { $0.at >= since }.reduce(0) { $0 + $1.bytes.count } } }
    /// When bytes containing `needle` were first written after `since`.
    func firstWrite(containing needle: String, since: Double) -> Double? {
        let n = Array(needle.utf8)
        return writes.withLock { w in
            w.first { $0.at >= since && $0.bytes.count >= n.count && String(decoding: $0.bytes, as: UTF8.self).contains(needle) }?.at
        }
    }
}

/// A process's output, read as it comes on a thread of its own, with the time of each read.
private final class StampedOutput: Sendable {
    let reads = Mutex<[(at: Double, bytes: [UInt8])]>([])

    init(_ process: PipedProcess) {
        let fd = process.stdout
        Thread { [self] in
            var buf = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = read(fd, &buf, buf.count)
                if n <= 0 { break }
                let at = Date().timeIntervalSince1970
                let chunk = Array(buf[0..<n])
                reads.withLock { $0.append((at, chunk)) }
            }
        }.start()
    }

    /// When output containing `needle` was read after `after` (the needle may span reads).
    func first(containing needle: String, after: Double) -> Double? {
        reads.withLock { r in
            var tail = ""
            for read in r where read.at >= after {
                tail = String((tail + String(decoding: read.bytes, as: UTF8.self)).suffix(needle.count * 4 + 64))
                if tail.contains(needle) { return read.at }
            }
            return nil
        }
    }
}

private func run(_ t: SSHTransport, _ script: String) async throws -> String {
    try await t.runProcess("/bin/sh", arguments: ["-c", script], stdin: [], environment: [:], timeout: .seconds(120))
        .check("bench cockpit").stdoutString
}

func benchCockpit(_ f: Fixture, rounds: Int) async throws {
    out("cockpit: preparing 100 tasks on 10 hosts")
    let setup = SSHTransport(configuration: f.sshkitConfig, serverID: ServerID("bench-cockpit-setup"))
    // an idle agent, and one that prints a line of one letter (a new letter each time, so the
    // renderer writes the whole line) every 700 ms, with the time it printed it
    let home = try await run(setup, """
        mkdir -p "$HOME/.local/bin" "$HOME/bench-cockpit" && rm -f "$HOME/bench-cockpit/ticks"
        printf '#!/bin/sh\\necho "idle agent> "\\nexec sleep 100000\\n' > "$HOME/.local/bin/bench-ck-idle"
        cat > "$HOME/.local/bin/bench-ck-ticker" <<'SH'
        #!/bin/sh
        i=0
        while :; do
            for l in A B C D E F G H I J K L M N O P Q R S T U V W X Y Z; do
                i=$((i + 1))
                printf '%s %s\\n' "$(date +%s.%N)" "$l" >> "$HOME/bench-cockpit/ticks"
                printf '%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s %d\\n' $l $l $l $l $l $l $l $l $l $l $l $l $l $l $l $l $i
                sleep 0.7
            done
        done
        SH
        chmod 755 "$HOME/.local/bin/bench-ck-idle" "$HOME/.local/bin/bench-ck-ticker"
        for i in 0 1 2 3 4 5 6 7 8 9; do
            tmux -L bench-ck-$i kill-server 2>/dev/null
            rm -rf "$HOME/bench-cockpit/repo-$i" "$HOME/.cache/sshkit-agents/watch/tmux-bench-ck-$i"
            git init -q -b main "$HOME/bench-cockpit/repo-$i" && cd "$HOME/bench-cockpit/repo-$i" && echo x > a.txt && git add a.txt \\
                && git -c user.name=b -c user.email=b@b commit -q -m one
        done
        printf '%s' "$HOME"
        """)
    let store = InMemoryAgentStore()
    var hosts: [HostRecord] = []
    var projects: [ProjectRecord] = []
    for i in 0..<10 {
        let h = HostRecord(name: "host-\(i)", address: "127.0.0.1", port: f.port, user: f.user,
                           authentication: .keyFiles([f.key]), tmuxSocket: "bench-ck-\(i)")
        try await store.save(h)
        let p = ProjectRecord(hostID: h.id, name: "repo-\(i)", path: "\(home)/bench-cockpit/repo-\(i)")
        try await store.save(p)
        hosts.append(h)
        projects.append(p)
    }
    let engine = AgentOrchestrator(store: store, providerSettings: [
        "amp": AgentProviderSettings(binary: "bench-ck-idle"), "gemini": AgentProviderSettings(binary: "bench-ck-ticker"),
    ], searchPath: ["~/.local/bin"], statusHooks: false) { record in
        SSHTransport(configuration: f.sshkitConfig, serverID: record.serverID)
    }
    for (i, p) in projects.enumerated() {
        try await withThrowingTaskGroup(of: Void.self) { g in
            for k in 0..<10 {
                let ticker = i == 0 && k == 0
                g.addTask {
                    _ = try await engine.project(p.id).createTask(title: ticker ? "ticker" : "idle \(i) \(k)",
                                                    providerID: ticker ? "gemini" : "amp")
                }
            }
            try await g.waitForAll()
        }
    }
    out("cockpit: 100 tasks started")

    let recorder = Recorder()
    let cockpit = Cockpit(engine: engine, terminal: recorder.terminal) { _ in nil }
    let running = Task { await cockpit.run() }
    func settle(_ seconds: Double = 1) async throws { try await Task.sleep(for: .milliseconds(Int(seconds * 1000))) }
    // settled: the live board in, and nothing drawn for 2 s (the selected agent is idle)
    var last = -1, quiet = 0
    for _ in 0..<600 where quiet < 20 {
        try await settle(0.1)
        let n = recorder.count
        quiet = n == last && n > 2 ? quiet + 1 : 0
        last = n
    }
    guard quiet >= 20 else { throw BenchError("the cockpit kept drawing with nothing changing") }

    // 1. keystroke to redraw: j and k in turn (each moves the selection)
    var redraw: [Double] = []
    for i in 0..<(rounds * 20) {
        let before = recorder.count
        let t0 = Date().timeIntervalSince1970
        recorder.type(i % 2 == 0 ? "j" : "k")
        var at: Double?
        for _ in 0..<2000 where at == nil {
            try await Task.sleep(for: .microseconds(200))
            at = recorder.writes.withLock { $0.count > before ? $0[before].at : nil }
        }
        guard let at else { throw BenchError("no redraw after a keystroke") }
        redraw.append((at - t0) * 1000)
        try await Task.sleep(for: .milliseconds(30))
    }

    // 2. bytes written: an idle agent selected (its preview followed, nothing changing),
    //    then the ticker's live preview
    recorder.type("/idle 3 4\r")
    try await settle(3)
    let window = rounds >= 10 ? 20.0 : 8.0
    var s = Date().timeIntervalSince1970
    try await settle(window)
    let idleBytes = Double(recorder.bytes(since: s)) / window
    recorder.type("/\u{1B}")  // the filter cleared
    try await settle(0.3)
    recorder.type("/ticker\r")
    try await settle(3)
    s = Date().timeIntervalSince1970
    try await settle(window)
    let liveBytes = Double(recorder.bytes(since: s)) / window

    // 3. an agent's line on the host to the cockpit's screen, beside tmux attach over OpenSSH
    let session = "gemini-main-" + (try await store.tasks(projectID: projects[0].id).first { $0.title == "ticker" }!.id.rawValue)
    guard let attach = PipedProcess(f.sshArgs(["-tt"], command: "tmux -L bench-ck-0 attach -t '=\(session)'")) else {
        throw BenchError("ssh did not start")
    }
    let attached = StampedOutput(attach)
    var cockpitMs: [Double] = [], attachMs: [Double] = []
    let samples = rounds >= 10 ? 30 : 10
    var seen = Set<String>()
    let started = Date().timeIntervalSince1970
    while cockpitMs.count < samples && Date().timeIntervalSince1970 - started < Double(samples) * 2 + 30 {
        try await settle(0.1)
        let ticks = try await run(setup, "tail -n 3 \"$HOME/bench-cockpit/ticks\"")
        for line in ticks.split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let t = Double(parts[0]), t > started, !seen.contains(String(line)) else { continue }
            let letters = String(repeating: String(parts[1]), count: 16)
            guard let c = recorder.firstWrite(containing: letters, since: t - 0.001), let a = attached.first(containing: letters, after: t - 0.001)
            else { continue }
            seen.insert(String(line))
            cockpitMs.append((c - t) * 1000)
            attachMs.append((a - t) * 1000)
        }
    }
    attach.end()
    running.cancel()
    recorder.type("q")
    _ = await running.value

    func fmt(_ x: Double) -> String { String(format: "%.1f", x) }
    out()
    out("| cockpit, 100 tasks on 10 hosts | p50 | p99 | samples |")
    out("|---|---|---|---|")
    out("| keystroke to redraw (ms) | \(fmt(median(redraw))) | \(fmt(percentile(redraw, 0.99))) | \(redraw.count) |")
    out("| an agent's line on the host to the cockpit's preview (ms) | \(fmt(median(cockpitMs))) | \(fmt(percentile(cockpitMs, 0.99))) | \(cockpitMs.count) |")
    out("| the same line to `ssh -tt host tmux attach` (ms) | \(fmt(median(attachMs))) | \(fmt(percentile(attachMs, 0.99))) | \(attachMs.count) |")
    out()
    out("| bytes written to the terminal per second | |")
    out("|---|---|")
    out("| an idle agent selected (nothing on screen changes) | \(fmt(idleBytes)) |")
    out("| a live preview (a new line every 0.7 s) | \(fmt(liveBytes)) |")

    for t in try await store.tasks(projectID: nil) { try? await engine.task(t.id).delete(force: true) }
    await engine.close()
    _ = try? await run(setup, """
        for i in 0 1 2 3 4 5 6 7 8 9; do tmux -L bench-ck-$i kill-server 2>/dev/null; rm -rf "$HOME/.cache/sshkit-agents/watch/tmux-bench-ck-$i"; done
        rm -rf "$HOME/bench-cockpit" "$HOME/.local/bin/bench-ck-idle" "$HOME/.local/bin/bench-ck-ticker"; exit 0
        """)
    await setup.close()
    out("cockpit: done")
}
