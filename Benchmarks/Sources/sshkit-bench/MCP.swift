// `agent-sessions mcp` against `agent-sessions tasks new`: starting a task through the MCP
// server (a client's initialize, then start_task) and from the command, both the release
// binary with its own store, alternating, against the bench sshd; and how long after the
// host's watcher wrote an agent's end a `wait_for_task` call returns.
import AgentSessions
import Foundation
import SSHKit
import ServerTransport

/// The release `agent-sessions`: built beside the library (`swift build -c release
/// --product agent-sessions` at the top) or in this package.
func agentSessionsBinary() throws -> String {
    let candidates = ["\(root)/.build/release/agent-sessions", "\(root)/Benchmarks/.build/release/agent-sessions"]
    guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
        throw BenchError("no release agent-sessions: run `swift build -c release --product agent-sessions` at the top first")
    }
    return found
}

/// One `agent-sessions` run to its end: its status and output.
private func tool(_ binary: String, home: String, _ args: [String]) throws -> (status: Int32, out: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: binary)
    p.arguments = args
    p.environment = ["HOME": home, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"]
    let out = Pipe()
    p.standardOutput = out
    p.standardError = out
    p.standardInput = FileHandle.nullDevice
    try p.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// An MCP client of `agent-sessions mcp` on pipes: a request written, its answer read.
private final class MCPClient {
    let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private var buffer = Data()
    private var next = 0

    init(_ binary: String, home: String) throws {
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["mcp"]
        process.environment = ["HOME": home, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"]
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    func send(_ message: [String: Any]) throws {
        var m = message
        m["jsonrpc"] = "2.0"
        var data = try JSONSerialization.data(withJSONObject: m)
        data.append(UInt8(ascii: "\n"))
        input.fileHandleForWriting.write(data)
    }

    /// Sends a request and reads lines until its answer.
    func request(_ method: String, _ params: [String: Any]) throws -> [String: Any] {
        next += 1
        let id = next
        try send(["id": id, "method": method, "params": params])
        while true {
            if let nl = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = buffer[..<nl]
                buffer.removeSubrange(...nl)
                if let o = try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any], o["id"] as? Int == id { return o }
                continue
            }
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw BenchError("agent-sessions mcp ended before answering \(method)") }
            buffer.append(chunk)
        }
    }

    func begin() throws {
        _ = try request("initialize", ["protocolVersion": "2025-06-18", "capabilities": [:] as [String: Any],
                                       "clientInfo": ["name": "bench", "version": "1"]])
        try send(["method": "notifications/initialized"])
    }

    /// A tool's text; an error result is thrown.
    func call(_ tool: String, _ arguments: [String: Any]) throws -> String {
        let answer = try request("tools/call", ["name": tool, "arguments": arguments])
        let result = answer["result"] as? [String: Any]
        let text = ((result?["content"] as? [[String: Any]])?.first?["text"] as? String) ?? "\(answer)"
        if result?["isError"] as? Bool == true || result == nil { throw BenchError("\(tool): \(text)") }
        return text
    }

    func end() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

func benchMCP(_ f: Fixture, rounds: Int) async throws {
    let binary = try agentSessionsBinary()
    let t = SSHTransport(configuration: f.sshkitConfig, serverID: ServerID("bench-host"), maxSessions: 256)
    let repo = try await prepareAgentHost(t)
    // an agent that says it is ready and stays, and one that ends 1.5 s after it started
    _ = try await t.runProcess("/bin/sh", arguments: ["-c", """
        printf '#!/bin/sh\\necho AGENT-READY\\nsleep 1.5\\necho AGENT-DONE\\n' > "$HOME/.local/bin/bench-brief" && chmod 755 "$HOME/.local/bin/bench-brief"
        """], stdin: [], environment: [:], timeout: .seconds(20)).check("writing bench-brief")
    let socket = "bench-mcp"
    _ = try await t.runProcess("tmux", arguments: ["-L", socket, "kill-server"], stdin: [], environment: [:], timeout: .seconds(20))
    let home = "/tmp/sshkit-bench-mcp-\(getpid())"
    try FileManager.default.createDirectory(atPath: home + "/.config/agent-sessions", withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: home) }
    try #"{"providers": {"gemini": {"binary": "bench-agent"}, "codex": {"binary": "bench-brief"}}}"#
        .write(toFile: home + "/.config/agent-sessions/config.json", atomically: true, encoding: .utf8)
    for args in [["hosts", "add", "bench", "\(f.user)@127.0.0.1:\(f.port)", "--key", f.key, "--tmux-socket", socket],
                 ["projects", "add", "bench", repo, "--name", "repo"]] {
        let r = try tool(binary, home: home, args)
        guard r.status == 0 else { throw BenchError("agent-sessions \(args.joined(separator: " ")): \(r.out)") }
    }
    let impls = ["MCP start_task", "tasks new"]
    var start = Row(workload: "a task started, process start to the task made (ms)")
    for round in 0..<rounds * 2 {
        for impl in rotated(impls, by: round) {
            let title = "mcp bench \(round) \(impl == impls[0] ? "a" : "b")"
            let s = now()
            if impl == impls[0] {
                let c = try MCPClient(binary, home: home)
                try c.begin()
                _ = try c.call("start_task", ["project": "repo", "title": title, "agent": "gemini"])
                start.samples[impl, default: []].append(now() - s)
                c.end()
            } else {
                let r = try tool(binary, home: home, ["tasks", "new", "repo", title, "--agent", "gemini"])
                guard r.status == 0 else { throw BenchError("tasks new: \(r.out)") }
                start.samples[impl, default: []].append(now() - s)
            }
            _ = try tool(binary, home: home, ["tasks", "delete", title, "--force"])
        }
    }
    out("mcp: starts done")

    // a wait's return after the watcher's event: the event as this process follows the
    // host's log (the engine's own follower), the wait's answer as the client gets it
    let store = InMemoryAgentStore()
    let record = HostRecord(id: "bench-host", name: "bench", address: "127.0.0.1", port: f.port, user: f.user,
                            authentication: .keyFiles([f.key]), tmuxSocket: socket)
    try await store.save(record)
    let host = AgentHost(transport: t, tmuxSocket: socket)
    let follower = AgentOrchestrator(store: store) { _ in host }
    final class Seen: @unchecked Sendable {
        let lock = NSLock()
        var ended: [String: Double] = [:]
    }
    let seen = Seen()
    let following = Task {
        for await update in follower.followStatus(hosts: [record]) {
            if ProcessInfo.processInfo.environment["BENCH_DEBUG"] != nil { out("follower: \(update)") }
            // the first of the states a wait ends at: waiting, done, idle, exited
            if case .status(let e, _, _) = update,
               ["waiting", "done", "idle", "exited"].contains(e.status.activity.name) {
                let at = now()
                seen.lock.withLock { seen.ended[e.session] = seen.ended[e.session] ?? at }
            }
        }
    }
    defer { following.cancel() }
    var after: [Double] = []
    for round in 0..<rounds {
        let title = "mcp wait \(round)"
        let c = try MCPClient(binary, home: home)
        try c.begin()
        let made = try c.call("start_task", ["project": "repo", "title": title, "agent": "codex"])
        guard let row = try JSONSerialization.jsonObject(with: Data(made.utf8)) as? [String: Any],
              let session = ((row["agents"] as? [[String: Any]])?.first?["session"] as? String)
        else { throw BenchError("start_task said \(made)") }
        let waited = try c.call("wait_for_task", ["task": title, "timeout_seconds": 60])
        let returned = now()
        c.end()
        guard waited.contains("\"timedOut\":false") else { throw BenchError("the wait timed out: \(waited)") }
        var event: Double?
        for _ in 0..<200 where event == nil {
            event = seen.lock.withLock { seen.ended[session] }
            if event == nil { try await Task.sleep(for: .milliseconds(10)) }
        }
        guard let event else { throw BenchError("the follower never saw \(session) settle") }
        after.append(returned - event)
        _ = try tool(binary, home: home, ["tasks", "delete", title, "--force"])
    }
    await follower.close()
    _ = try? await t.runProcess("tmux", arguments: ["-L", socket, "kill-server"], stdin: [], environment: [:], timeout: .seconds(20))
    await t.close()

    func fmt(_ x: Double) -> String { String(format: "%.1f", x) }
    out("")
    out("| \(start.workload) | median | p90 | ratio to tasks new |")
    out("|---|---|---|---|")
    let base = median(start.samples[impls[1]] ?? [])
    for impl in impls {
        let xs = start.samples[impl] ?? []
        out("| \(impl) | \(fmt(median(xs))) | \(fmt(percentile(xs, 0.9))) | \(String(format: "%.2fx", median(xs) / base)) |")
    }
    out("")
    out("| wait_for_task's answer after the watcher's event (ms) | median | p90 | max |")
    out("|---|---|---|---|")
    out("| \(after.count) waits | \(fmt(median(after))) | \(fmt(percentile(after, 0.9))) | \(fmt(after.max() ?? .nan)) |")
}
