import AgentSessions
import Foundation
import Testing

/// `agent-sessions mcp` as an MCP client sees it: the protocol over its stdin and stdout
/// (newline-delimited JSON-RPC), against the test sshd with a fake agent.
@Suite("agent-sessions: mcp", .tags(.process), .serialized)
struct MCPServerTests {
    typealias User = AgentSessionsToolTests.User

    /// The server started on pipes; its answers collected as they come, by id.
    final class Client: @unchecked Sendable {
        let process = Process()
        private let input = Pipe()
        private let lock = NSLock()
        private var buffer = Data()
        private var lines: [String] = []
        private var next = 1

        /// The server, or with `launcher` the server started by that program (its
        /// arguments before the server's path), `env` added to the environment.
        init(_ u: User, env: [String: String] = [:], launcher: [String] = []) throws {
            process.executableURL = URL(fileURLWithPath: launcher.first ?? AgentSessionsToolTests.binary)
            process.arguments = launcher.isEmpty ? ["mcp"] : Array(launcher.dropFirst()) + [AgentSessionsToolTests.binary, "mcp"]
            process.environment = ["HOME": u.home, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"].merging(env) { $1 }
            let out = Pipe()
            process.standardInput = input
            process.standardOutput = out
            process.standardError = FileHandle.nullDevice
            out.fileHandleForReading.readabilityHandler = { [weak self] h in
                let chunk = h.availableData
                guard let self, !chunk.isEmpty else { return }
                self.lock.withLock {
                    self.buffer.append(chunk)
                    while let nl = self.buffer.firstIndex(of: UInt8(ascii: "\n")) {
                        self.lines.append(String(decoding: self.buffer[..<nl], as: UTF8.self))
                        self.buffer.removeSubrange(...nl)
                    }
                }
            }
            try process.run()
        }

        /// Every line the server wrote so far.
        var written: [String] { lock.withLock { lines } }

        func send(_ message: [String: Any]) throws {
            var m = message
            m["jsonrpc"] = "2.0"
            var data = try JSONSerialization.data(withJSONObject: m)
            data.append(UInt8(ascii: "\n"))
            input.fileHandleForWriting.write(data)
        }

        /// The messages the server wrote that are not answers (its notifications).
        var notifications: [[String: Any]] {
            written.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }.filter { $0["id"] == nil }
        }

        /// A request, and its answer (nil when none came within `seconds`).
        func request(_ method: String, _ params: [String: Any] = [:], seconds: Double = 60) async throws -> [String: Any]? {
            let id = lock.withLock { () -> Int in
                next += 1
                return next
            }
            try send(["id": id, "method": method, "params": params])
            return await eventually(seconds) { () -> [String: Any]? in
                for line in self.written {
                    guard let o = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                          o["id"] as? Int == id else { continue }
                    return o
                }
                return nil
            }
        }

        /// A tool's result: its text (JSON for a success) and whether it is an error.
        func call(_ tool: String, _ arguments: [String: Any] = [:], seconds: Double = 60) async throws -> (text: String, isError: Bool) {
            let answer = try #require(try await request("tools/call", ["name": tool, "arguments": arguments], seconds: seconds),
                                      "no answer to \(tool)")
            let result = try #require(answer["result"] as? [String: Any], "\(answer)")
            let content = try #require(result["content"] as? [[String: Any]], "\(result)")
            return (content.compactMap { $0["text"] as? String }.joined(), result["isError"] as? Bool ?? false)
        }

        /// A successful tool's result as a JSON object.
        func object(_ tool: String, _ arguments: [String: Any] = [:], seconds: Double = 60) async throws -> [String: Any] {
            let r = try await call(tool, arguments, seconds: seconds)
            #expect(!r.isError, "\(tool): \(r.text)")
            return try #require(try JSONSerialization.jsonObject(with: Data(r.text.utf8)) as? [String: Any], "\(r.text)")
        }

        func closeInput() throws { try input.fileHandleForWriting.close() }

        /// `initialize` and `initialized`, as a client begins; the answer to `initialize`.
        @discardableResult
        func begin(_ name: String = "test") async throws -> [String: Any] {
            let hello = try #require(try await request("initialize", [
                "protocolVersion": "2025-06-18", "capabilities": [:] as [String: Any], "clientInfo": ["name": name, "version": "1"],
            ]), "no answer to initialize")
            try send(["method": "notifications/initialized"])
            return hello
        }
    }

    /// Runs a program here to its end (killed after `timeout` seconds): its status and
    /// standard output and error together.
    static func runHere(_ exe: String, _ args: [String], env: [String: String], timeout: Double) throws -> (status: Int32, output: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        p.environment = env
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        p.standardInput = FileHandle.nullDevice
        try p.run()
        let watchdog = DispatchWorkItem { if p.isRunning { p.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        watchdog.cancel()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// The lines a client script printed, one JSON object each, by their `step`.
    final class Steps: @unchecked Sendable {
        private let lock = NSLock()
        private var buffer = Data()
        private var steps: [String: [String: Any]] = [:]

        func take(_ chunk: Data) {
            lock.withLock {
                buffer.append(chunk)
                while let nl = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = Data(buffer[..<nl])
                    buffer.removeSubrange(...nl)
                    if let o = try? JSONSerialization.jsonObject(with: line) as? [String: Any], let step = o["step"] as? String {
                        steps[step] = o
                    }
                }
            }
        }

        func step(_ name: String) -> [String: Any]? { lock.withLock { steps[name] } }
    }

    /// A user of the tool with `repositories` repositories on the fixture host, torn down
    /// when `body` ends, awaited (a task a test leaves behind may never run: the process can
    /// end first).
    static func withUser(repositories n: Int = 0, _ body: (User, [String]) async throws -> Void) async throws {
        let u = try User()
        var repos: [String] = []
        do {
            for _ in 0..<n { repos.append(try await WorktreeTests.makeRepository(u.host)) }
            try await body(u, repos)
        } catch {
            await u.tearDown(repos)
            throw error
        }
        await u.tearDown(repos)
    }

    /// `withUser` with one repository.
    static func withRepository(_ body: (User, String) async throws -> Void) async throws {
        try await withUser(repositories: 1) { u, repos in try await body(u, repos[0]) }
    }

    @Test func anAgentStartsFollowsAndStopsAnAgentOnAHost() async throws {
        try await Self.withRepository { u, repo in
            try u.addHost()
            try u.ok(["projects", "add", "fixture", repo, "--name", "app"])
            let c = try Client(u)
            defer { if c.process.isRunning { c.process.terminate() } }

            let hello = try await c.begin()
            let info = try #require((hello["result"] as? [String: Any])?["serverInfo"] as? [String: Any], "\(hello)")
            #expect(info["name"] as? String == "agent-sessions")
            let listed = try #require(try await c.request("tools/list"), "no tool list")
            let names = ((listed["result"] as? [String: Any])?["tools"] as? [[String: Any]])?.compactMap { $0["name"] as? String }
            #expect(Set(names ?? []) == ["list_hosts", "board", "start_task", "task_status", "wait_for_task", "task_output",
                                         "task_diff", "task_result", "send_to_task", "land_task", "stop_task"], "\(listed)")

            let hosts = try await c.object("list_hosts")
            let host = try #require((hosts["hosts"] as? [[String: Any]])?.first, "\(hosts)")
            #expect(host["name"] as? String == "fixture")
            #expect((host["projects"] as? [[String: Any]])?.first?["path"] as? String == repo, "\(host)")

            // a task started, waited for, read, answered, its work seen, stopped
            let started = try await c.object("start_task", ["project": "app", "title": "Via MCP", "agent": "amp", "prompt": "hello"])
            #expect(started["title"] as? String == "Via MCP" && started["host"] as? String == "fixture", "\(started)")
            #expect((started["agents"] as? [[String: Any]])?.first?["agent"] as? String == "amp", "\(started)")
            let worktree = try #require(started["worktree"] as? String)
            let waited = try await c.object("wait_for_task", ["task": "Via MCP", "timeout_seconds": 60], seconds: 90)
            #expect(waited["timedOut"] as? Bool == false, "\(waited)")
            let output = await eventually { () async -> String? in
                let o = try? await c.object("task_output", ["task": "Via MCP", "lines": 20])
                let text = o?["output"] as? String ?? ""
                return text.contains("got: hello") ? text : nil
            }
            #expect(output?.contains("READY>") == true, "\(output ?? "no output with the prompt")")
            #expect(try await !c.call("send_to_task", ["task": "Via MCP", "text": "second line"]).isError)
            let answered = await eventually { () async -> Bool? in
                let o = try? await c.object("task_output", ["task": "Via MCP"])
                return (o?["output"] as? String)?.contains("got: second line") == true ? true : nil
            }
            #expect(answered == true, "the line sent did not reach the agent")
            _ = try await WorktreeTests.sh(u.host, #"printf 'a\nb\nc\n' > "$1/notes.txt""#, worktree)
            let diff = try await c.object("task_diff", ["task": "Via MCP"])
            let file = try #require((diff["files"] as? [[String: Any]])?.first { $0["path"] as? String == "notes.txt" }, "\(diff)")
            #expect(file["added"] as? Int == 3 && file["new"] as? Bool == true, "\(file)")
            // the task's log and diff as resources
            let listedResources = try #require(try await c.request("resources/list"), "no resource list")
            let uris = ((listedResources["result"] as? [String: Any])?["resources"] as? [[String: Any]])?.compactMap { $0["uri"] as? String }
            let id = try #require(started["id"] as? String)
            #expect(Set(uris ?? []) == ["agent-sessions://tasks/\(id)/log", "agent-sessions://tasks/\(id)/diff"], "\(listedResources)")
            func resource(_ uri: String) async throws -> String? {
                let r = try await c.request("resources/read", ["uri": uri])
                return ((r?["result"] as? [String: Any])?["contents"] as? [[String: Any]])?.first?["text"] as? String
            }
            let patch = try await resource("agent-sessions://tasks/\(id)/diff")
            #expect(patch?.contains("+++ b/notes.txt") == true && patch?.contains("+c") == true, "\(patch ?? "no diff")")
            let log = try await resource("agent-sessions://tasks/\(id)/log")
            #expect(log?.contains("got: second line") == true, "\(log ?? "no log")")
            let noResource = try await c.request("resources/read", ["uri": "agent-sessions://tasks/\(id)/secrets"])
            #expect(noResource?["error"] != nil, "\(noResource ?? [:])")

            // a wait past its time, told as it goes: an agent that never stops working
            let busy = try await c.object("start_task", ["project": "app", "title": "Busy", "agent": "gemini"])
            let waitID = try #require(try await c.request("tools/call", ["name": "wait_for_task", "_meta": ["progressToken": "w1"],
                                                                       "arguments": ["task": "Busy", "timeout_seconds": 3]],
                                                       seconds: 60), "no answer to the wait")
            let waitText = (((waitID["result"] as? [String: Any])?["content"] as? [[String: Any]])?.first?["text"] as? String) ?? ""
            let waitResult = try JSONSerialization.jsonObject(with: Data(waitText.utf8)) as? [String: Any]
            #expect(waitResult?["timedOut"] as? Bool == true && waitResult?["id"] as? String == busy["id"] as? String, "\(waitText)")
            let told = c.notifications.filter { $0["method"] as? String == "notifications/progress" }
                .compactMap { $0["params"] as? [String: Any] }
            #expect(told.contains { $0["progressToken"] as? String == "w1" && ($0["message"] as? String)?.hasPrefix("Busy: ") == true },
                    "\(c.notifications)")
            _ = try await c.object("stop_task", ["task": "Busy"])

            let stopped = try await c.object("stop_task", ["task": "Via MCP"])
            #expect((stopped["agents"] as? [[String: Any]])?.first?["state"] as? String == "stopped", "\(stopped)")

            // bad calls: tool errors with the command's one-line message, the server goes on
            let missing = try await c.call("task_status", ["task": "no such task"])
            #expect(missing.isError && missing.text.contains("no task"), "\(missing)")
            let noTitle = try await c.call("start_task", ["project": "app", "agent": "amp"])
            #expect(noTitle.isError && noTitle.text.contains("title is required"), "\(noTitle)")
            let badAgent = try await c.call("start_task", ["project": "app", "title": "x", "agent": "no-such-agent"])
            #expect(badAgent.isError && badAgent.text.contains("no-such-agent"), "\(badAgent)")
            let noHost = try await c.call("start_task", ["project": "nowhere/app", "title": "x", "agent": "amp"])
            #expect(noHost.isError && noHost.text.contains("nowhere"), "\(noHost)")
            let badTool = try await c.call("rm_rf")
            #expect(badTool.isError && badTool.text.contains("no tool rm_rf"), "\(badTool)")
            let board = try await c.object("board")
            #expect((board["tasks"] as? [[String: Any]])?.count == 2, "\(board)")

            // the input's end ends the server; it wrote nothing but protocol messages
            try c.closeInput()
            #expect(await eventually(20) { c.process.isRunning ? nil : true } == true, "the server outlived its input")
            #expect(c.process.terminationStatus == 0)
            for line in c.written {
                #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "not a protocol message: \(line)")
            }
            let sessions = try await u.transport.runProcess("/bin/sh", "-c", "tmux -L \"$1\" ls 2>/dev/null; true", "sh", u.socket)
            #expect(!sessions.stdoutString.contains("amp-main-"), "the stopped agent's session is still there: \(sessions.stdoutString)")
        }
    }

    /// The settings' `mcp`: the hosts, projects and agents a client may use, how many of its
    /// tasks may run at once; every call in the audit log, refusals too.
    @Test func theSettingsSayWhatAClientMayUseAndEveryCallIsWrittenDown() async throws {
        try await Self.withUser(repositories: 2) { u, repos in
            let repo = repos[0], other = repos[1]
            try u.addHost()
            try u.ok(["projects", "add", "fixture", repo, "--name", "app"])
            try u.ok(["projects", "add", "fixture", other, "--name", "other"])
            try u.ok(["tasks", "new", "other", "Not for MCP", "--agent", "amp"])
            let settings = """
                {"searchPath": ["\(FakeAgents.directory)"],
                 "providers": {"amp": {"binary": "fake-tui"}, "gemini": {"binary": "fake-ticker"}},
                 "mcp": {"hosts": ["fixture"], "projects": ["app"], "agents": ["amp"], "maxRunning": 1}}
                """
            try settings.write(toFile: u.home + "/.config/agent-sessions/config.json", atomically: true, encoding: .utf8)
            let c = try Client(u)
            defer { if c.process.isRunning { c.process.terminate() } }
            try await c.begin()

            let hosts = try await c.object("list_hosts")
            let projects = (hosts["hosts"] as? [[String: Any]])?.first?["projects"] as? [[String: Any]]
            #expect(projects?.compactMap { $0["name"] as? String } == ["app"], "\(hosts)")
            let board = try await c.object("board")
            #expect((board["tasks"] as? [[String: Any]])?.isEmpty == true, "another project's task is not shown: \(board)")
            let hidden = try await c.call("task_status", ["task": "Not for MCP"])
            #expect(hidden.isError && hidden.text.contains("not one the MCP settings allow"), "\(hidden)")
            let otherProject = try await c.call("start_task", ["project": "other", "title": "x", "agent": "amp"])
            #expect(otherProject.isError && otherProject.text.contains("fixture/other is not one the MCP settings allow"), "\(otherProject)")
            let otherAgent = try await c.call("start_task", ["project": "app", "title": "x", "agent": "gemini"])
            #expect(otherAgent.isError && otherAgent.text.contains("gemini is not one the MCP settings allow"), "\(otherAgent)")

            // one at a time: the second waits for the first to stop
            let first = try await c.object("start_task", ["project": "app", "title": "First", "agent": "amp"])
            let firstID = try #require(first["id"] as? String)
            let second = try await c.call("start_task", ["project": "app", "title": "Second", "agent": "amp"])
            #expect(second.isError && second.text.contains("allow 1 at once") && second.text.contains("First"), "\(second)")
            _ = try await c.object("stop_task", ["task": "First"])
            let again = try await c.object("start_task", ["project": "app", "title": "Second", "agent": "amp"])
            #expect(again["title"] as? String == "Second")
            _ = try await c.object("stop_task", ["task": "Second"])
            try c.closeInput()
            #expect(await eventually(20) { c.process.isRunning ? nil : true } == true)

            // every call written down, refusals too, in a file only the user reads
            let log = try JSONSerialization.jsonObject(with: Data(try u.ok(["mcp", "log", "--json"]).utf8)) as? [[String: Any]]
            let tools = log?.compactMap { $0["tool"] as? String }
            #expect(tools == ["list_hosts", "board", "task_status", "start_task", "start_task", "start_task", "start_task", "stop_task",
                              "start_task", "stop_task"], "\(tools ?? [])")
            #expect(log?.filter { $0["ok"] as? Bool == false }.count == 4, "\(log ?? [])")
            #expect(log?.first { $0["tool"] as? String == "start_task" && $0["ok"] as? Bool == true }?["task"] as? String == firstID)
            let table = try u.ok(["mcp", "log", "-n", "2"])
            #expect(table.contains("start_task") && table.contains("stop_task") && !table.contains("list_hosts"), "\(table)")
            let mode = try FileManager.default.attributesOfItem(atPath: u.home + "/.local/share/agent-sessions/mcp-audit.jsonl")[.posixPermissions]
            #expect((mode as? NSNumber)?.intValue == 0o600, "\(String(describing: mode))")
        }
    }

    /// `mcp install --for` writes the server into the agent's own settings by the agent's own
    /// command: the real Kimi and Vibe (their files read back, the server found by their own
    /// list), and Claude's, Codex's and Gemini's documented `mcp add`/`mcp remove` through
    /// fakes that write down what they were asked; adding twice keeps one entry.
    @Test func installWritesTheServerIntoEachAgentsOwnSettings() async throws {
        try await Self.withUser { u, _ in
            let kimi = RealAgentTests.binaries["kimi"]!, vibe = RealAgentTests.binaries["mistral"]!
            #expect(FileManager.default.isExecutableFile(atPath: kimi) && FileManager.default.isExecutableFile(atPath: vibe),
                    "the real Kimi and Vibe are installed by scripts/install-deps.sh")
            let fakes = u.home + "/fake-bin"
            try FileManager.default.createDirectory(atPath: fakes, withIntermediateDirectories: true)
            for name in ["claude", "codex", "gemini"] {
                try "#!/bin/sh\nprintf '%s\\n' \"$*\" >> \"$HOME/\(name).calls\"\n".write(toFile: "\(fakes)/\(name)", atomically: true, encoding: .utf8)
                chmod("\(fakes)/\(name)", 0o755)
            }
            let path = ["PATH": "\(fakes):\((kimi as NSString).deletingLastPathComponent):\((vibe as NSString).deletingLastPathComponent):/usr/local/bin:/usr/bin:/bin"]
            // the executable by its absolute path, as /proc/self/exe names it (symbolic links resolved)
            let server = URL(fileURLWithPath: AgentSessionsToolTests.binary).resolvingSymlinksInPath().path
            func install(_ args: String...) throws -> (status: Int32, out: String, err: String) {
                try u.run(["mcp", "install"] + args, env: path, timeout: 120)
            }

            // Kimi: its mcp.json, and its own list
            for _ in 0..<2 { #expect(try install("--for", "kimi").status == 0) }
            let kimiFile = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: u.home + "/.kimi/mcp.json"))) as? [String: Any]
            let entry = (kimiFile?["mcpServers"] as? [String: Any])?["agent-sessions"] as? [String: Any]
            #expect(entry?["command"] as? String == server && entry?["args"] as? [String] == ["mcp"], "\(kimiFile ?? [:])")
            #expect((kimiFile?["mcpServers"] as? [String: Any])?.count == 1)
            let listed = try TestServer.runCapturing("/usr/bin/env", ["HOME=\(u.home)", kimi, "mcp", "list"])
            #expect(listed.out.contains("agent-sessions"), "\(listed.out) \(listed.err)")
            // Vibe: its config.toml, one entry after two installs
            for _ in 0..<2 { #expect(try install("--for", "vibe").status == 0) }
            let toml = try String(contentsOfFile: u.home + "/.vibe/config.toml", encoding: .utf8)
            #expect(toml.components(separatedBy: "name = \"agent-sessions\"").count == 2 && toml.contains("command = \"\(server)\"")
                    && toml.contains("transport = \"stdio\""), "\(toml)")
            // taken out again
            #expect(try install("--for", "kimi", "--remove").status == 0)
            #expect(try install("--for", "vibe", "--remove").status == 0)
            let kimiAfter = try String(contentsOfFile: u.home + "/.kimi/mcp.json", encoding: .utf8)
            #expect(!kimiAfter.contains("agent-sessions"), "\(kimiAfter)")
            #expect(!(try String(contentsOfFile: u.home + "/.vibe/config.toml", encoding: .utf8)).contains("agent-sessions"))

            // Claude, Codex, Gemini: their documented commands, replacing one added before
            for name in ["claude", "codex", "gemini"] { #expect(try install("--for", name).status == 0) }
            func calls(_ name: String) throws -> [String] {
                try String(contentsOfFile: "\(u.home)/\(name).calls", encoding: .utf8).split(separator: "\n").map(String.init)
            }
            #expect(try calls("claude") == ["mcp remove --scope user agent-sessions", "mcp add --scope user agent-sessions -- \(server) mcp"])
            #expect(try calls("codex") == ["mcp remove agent-sessions", "mcp add agent-sessions -- \(server) mcp"])
            #expect(try calls("gemini") == ["mcp remove --scope user agent-sessions", "mcp add --scope user agent-sessions \(server) mcp"])

            // an agent it does not know, and one that is not there
            let unknown = try install("--for", "emacs")
            #expect(unknown.status == 64 && unknown.err.contains("claude, codex, gemini, kimi or vibe"), "\(unknown.err)")
            let absent = try u.run(["mcp", "install", "--for", "claude"], env: ["PATH": "/usr/bin:/bin"])
            #expect(absent.status == 1 && absent.err.contains("claude is not on PATH"), "\(absent.err)")
        }
    }

    /// A real MCP client nobody here wrote (the Python SDK from PyPI, `Tests/Fixtures/mcp/lead.py`)
    /// lists the tools, starts a task with the stand-in agent, waits for it (told how the wait
    /// goes), reads its diff, lands it (a commit in the worktree) and stops it; a start whose
    /// title breaks the schema is a tool error.
    @Test func aRealMCPClientStartsWaitsForReadsAndLandsATask() async throws {
        let python = "/opt/sshkit-mcp-client/bin/python"
        try #require(FileManager.default.isExecutableFile(atPath: python), "scripts/install-deps.sh installs the Python mcp SDK in \(python)")
        try await Self.withRepository { u, repo in
            try u.addHost()
            try u.ok(["projects", "add", "fixture", repo, "--name", "app"])

            let p = Process()
            p.executableURL = URL(fileURLWithPath: python)
            p.arguments = [TestServer.packageRoot + "/Tests/Fixtures/mcp/lead.py", AgentSessionsToolTests.binary, u.home, "app", "amp"]
            let input = Pipe(), out = Pipe()
            p.standardInput = input
            p.standardOutput = out
            p.standardError = FileHandle.nullDevice
            let steps = Steps()
            out.fileHandleForReading.readabilityHandler = { h in
                let chunk = h.availableData
                if !chunk.isEmpty { steps.take(chunk) }
            }
            try p.run()
            defer { if p.isRunning { p.terminate() } }
            func step(_ name: String, within seconds: Double = 90) async -> [String: Any]? {
                await eventually(seconds) { steps.step(name) }
            }
            func json(_ step: [String: Any]?) -> [String: Any] {
                ((step?["text"] as? String).flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) } as? [String: Any]) ?? [:]
            }

            let tools = try #require(await step("tools"), "the client listed no tools")
            #expect((tools["text"] as? String)?.contains("land_task") == true, "\(tools)")
            let started = await step("started")
            #expect(started?["error"] as? Bool == false, "\(started ?? [:])")
            let worktree = try #require(json(started)["worktree"] as? String, "\(started ?? [:])")
            let waited = await step("waited")
            #expect(waited?["error"] as? Bool == false && json(waited)["timedOut"] as? Bool == false, "\(waited ?? [:])")
            _ = try await WorktreeTests.sh(u.host, #"printf 'one\ntwo\n' > "$1/worker.txt""#, worktree)
            input.fileHandleForWriting.write(Data("go\n".utf8))
            let diff = await step("diff")
            #expect((json(diff)["files"] as? [[String: Any]])?.contains { $0["path"] as? String == "worker.txt" && $0["added"] as? Int == 2 } == true,
                    "\(diff ?? [:])")
            let landed = await step("landed")
            #expect(landed?["error"] as? Bool == false && (json(landed)["commit"] as? [String: Any])?["files"] as? Int == 1, "\(landed ?? [:])")
            let log = try await WorktreeTests.sh(u.host, #"git -C "$1" log -1 --format=%s"#, worktree)
            #expect(log.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines) == "Notes from the worker")
            let stopped = await step("stopped")
            #expect(stopped?["error"] as? Bool == false, "\(stopped ?? [:])")
            let bad = await step("bad")
            #expect(bad?["error"] as? Bool == true, "a title that is not a string: \(bad ?? [:])")
            #expect(await eventually(30) { p.isRunning ? nil : true } == true, "the client did not end")
            #expect(p.terminationStatus == 0)
        }
    }

    /// A real agent as the lead: Kimi (kimi-cli from PyPI), given this server by
    /// `mcp install --for kimi` and scripted by the test's model server, starts a worker (a
    /// real Kimi too) on another host through `start_task`, waits for it and collects its
    /// result; the worker's file is on its host, and the lead's answer quotes what the
    /// worker said. The worker's own server (the same settings) refuses to start agents.
    @Test(.tags(.integration)) func aRealAgentAsTheLeadStartsAWorkerOnAnotherHost() async throws {
        let kimi = RealAgentTests.binaries["kimi"]!
        try #require(FileManager.default.isExecutableFile(atPath: kimi), "scripts/install-deps.sh installs the real Kimi")
        let model = try RealAgentTests.ModelServer()
        defer { model.stop() }
        try await Self.withRepository { u, repo in
            // the lead's agent home is the user's (here); the worker's, one of its own on the host
            let workerHome = u.home + "/worker-home"
            _ = try TestServer.run("/bin/bash", [TestServer.packageRoot + "/scripts/agents/configure-agents.sh", u.home, "\(model.port)"])
            _ = try TestServer.run("/bin/bash", [TestServer.packageRoot + "/scripts/agents/configure-agents.sh", workerHome, "\(model.port)",
                                                 TestServer.shared.user])
            _ = try TestServer.run("/bin/chown", [TestServer.shared.user, workerHome])
            let kimiDir = (kimi as NSString).deletingLastPathComponent
            let agentEnvironment = #"{"HOME": "\#(workerHome)", "KIMI_SHARE_DIR": "\#(workerHome)/.kimi", "KIMI_CLI_NO_AUTO_UPDATE": "1"}"#
            try """
                {"searchPath": ["\(FakeAgents.directory)", "\(kimiDir)"],
                 "providers": {"kimi": {"environment": \(agentEnvironment)}},
                 "mcp": {"hosts": ["build"], "agents": ["kimi"]}}
                """.write(toFile: u.home + "/.config/agent-sessions/config.json", atomically: true, encoding: .utf8)
            try u.addHost("build")
            try u.ok(["projects", "add", "build", repo, "--name", "app"])
            let path = "\(kimiDir):/usr/local/bin:/usr/bin:/bin"
            #expect(try u.run(["mcp", "install", "--for", "kimi"], env: ["PATH": path], timeout: 120).status == 0)

            // the lead, here, in a directory of its own
            let desk = u.home + "/lead-desk"
            try FileManager.default.createDirectory(atPath: desk, withIntermediateDirectories: true)
            let calls = #"calls: start_task {"project": "app", "title": "Worker", "agent": "kimi", "prompt": "file: worker.txt", "auto_approve": true}"#
                + #" | wait_for_task {"task": "Worker", "timeout_seconds": 45} | task_result {"task": "Worker"}"#
            let lead = try Self.runHere(kimi, ["--quiet", "--yolo", "-w", desk, "-p", calls],
                                        env: ["HOME": u.home, "KIMI_SHARE_DIR": u.home + "/.kimi", "KIMI_CLI_NO_AUTO_UPDATE": "1",
                                              "PATH": path, "LANG": "C.UTF-8"], timeout: 240)
            #expect(lead.status == 0, "\(lead.output.suffix(2000))")
            // the worker's result as the lead got it: the file it changed, and its last screen
            // showing the write (its closing words when the wait saw it done; a loaded machine
            // can show Kimi's idle input box between the write and those words, and the wait
            // then ends there)
            #expect(lead.output.contains("lead: ") && lead.output.contains(#""path":"worker.txt""#)
                        && (lead.output.contains("done: wrote worker.txt") || lead.output.contains("WriteFile (worker.txt)")),
                    "the lead's answer does not quote the worker: \(lead.output.suffix(2000))")

            // the worker's file, on its host, in its worktree
            let task = try #require(try await u.store().tasks(projectID: nil).first { $0.title == "Worker" }, "no task Worker")
            let file = try? await u.transport.readTextFile(task.worktree.path + "/worker.txt")
            #expect(file == "hello from the model\n", "\(file ?? "no worker.txt")")
            let log = try JSONSerialization.jsonObject(with: Data(try u.ok(["mcp", "log", "--json"]).utf8)) as? [[String: Any]]
            #expect(log?.map { "\($0["tool"] ?? "") \($0["ok"] ?? "") \($0["client"] ?? "")" }.prefix(3)
                    == ["start_task 1 kimi", "wait_for_task 1 kimi", "task_result 1 kimi"]
                    || log?.filter { $0["ok"] as? Bool == true }.compactMap { $0["tool"] as? String } == ["start_task", "wait_for_task", "task_result"],
                    "\(log ?? [])")
            try u.ok(["tasks", "stop", "Worker"])
        }
    }

    /// The settings' `mcp.ask`: a start waits for the user's yes, told through the
    /// notification channels; `mcp allow` lets it go, `mcp deny` refuses it, no answer in
    /// time is no, and an answered request cannot be answered again.
    @Test func aStartWaitsForTheUsersYesWhenTheSettingsAsk() async throws {
        try await Self.withRepository { u, repo in
            try """
                {"searchPath": ["\(FakeAgents.directory)"],
                 "providers": {"amp": {"binary": "fake-tui"}, "gemini": {"binary": "fake-ticker"}},
                 "notifications": {"channels": [{"type": "command", "command": ["/bin/sh", "-c", "cat >> \(u.home)/told.jsonl"]}]},
                 "mcp": {"ask": true, "askSeconds": 10}}
                """.write(toFile: u.home + "/.config/agent-sessions/config.json", atomically: true, encoding: .utf8)
            try u.addHost()
            try u.ok(["projects", "add", "fixture", repo, "--name", "app"])
            let c = try Client(u)
            defer { if c.process.isRunning { c.process.terminate() } }
            try await c.begin("lead-test")

            func pending() throws -> [[String: Any]] {
                (try JSONSerialization.jsonObject(with: Data(try u.ok(["mcp", "requests", "--json"]).utf8)) as? [[String: Any]]) ?? []
            }
            func start(_ title: String) async throws -> Task<(text: String, isError: Bool), Error> {
                let started = Task { try await c.call("start_task", ["project": "app", "title": title, "agent": "amp"], seconds: 60) }
                _ = await eventually(20) { (try? pending())?.first { $0["title"] as? String == title } }
                return started
            }

            // allowed: the task starts, and the user was told, naming the request
            let first = try await start("Allowed")
            let request = try #require(try pending().first, "no request waits")
            #expect(request["client"] as? String == "lead-test" && request["agent"] as? String == "amp" && request["host"] as? String == "fixture")
            let id = try #require(request["id"] as? String)
            #expect(try u.ok(["mcp", "allow", String(id.prefix(4))]).contains("allowed: amp on fixture/app"))
            let allowed = try await first.value
            #expect(!allowed.isError && allowed.text.contains("\"title\":\"Allowed\""), "\(allowed)")
            let told = (try? String(contentsOfFile: u.home + "/told.jsonl", encoding: .utf8)) ?? ""
            #expect(told.contains("\"kind\":\"mcp-request\"") && told.contains("\"request\":\"\(id)\""), "\(told)")
            let again = try u.run(["mcp", "deny", id])
            #expect(again.status == 3 && again.err.contains("has its answer already: yes"), "\(again)")

            // denied
            let second = try await start("Denied")
            let deniedID = try #require(try pending().first?["id"] as? String)
            #expect(try u.ok(["mcp", "deny", deniedID]).contains("denied"))
            let denied = try await second.value
            #expect(denied.isError && denied.text.contains("the user did not allow starting amp on fixture/app"), "\(denied)")

            // no answer: no, after askSeconds
            let third = try await start("Unanswered")
            let unanswered = try await third.value
            #expect(unanswered.isError && unanswered.text.contains("did not answer within 10 s"), "\(unanswered)")
            #expect(try pending().isEmpty)
            let late = try u.run(["mcp", "allow", (try #require(unanswered.text.split(separator: " ").last.map(String.init)))])
            #expect(late.status != 0, "\(late)")
            let listed = try u.ok(["mcp", "requests", "--all"])
            #expect(listed.contains("yes (command)") && listed.contains("no (command)") && listed.contains("expired"), "\(listed)")

            // only the allowed one was made
            let board = try await c.object("board")
            #expect((board["tasks"] as? [[String: Any]])?.compactMap { $0["title"] as? String } == ["Allowed"], "\(board)")
            _ = try await c.object("stop_task", ["task": "Allowed"])
            // a client that goes away while its start waits takes the request back
            try c.send(["id": 998, "method": "tools/call", "params": ["name": "start_task",
                                                                      "arguments": ["project": "app", "title": "Abandoned", "agent": "amp"]]])
            _ = await eventually(20) { (try? pending())?.first { $0["title"] as? String == "Abandoned" } }
            try c.closeInput()
            #expect(await eventually(20) { c.process.isRunning ? nil : true } == true)
            #expect(try pending().isEmpty)
            #expect(try u.ok(["mcp", "requests", "--all"]).contains("no (client gone)"))
            let tasks = try await u.store().tasks(projectID: nil).map(\.title)
            #expect(tasks == ["Allowed"], "\(tasks)")
        }
    }

    /// A wait cut by its client going away leaves the worker running and orphans nothing;
    /// a lead that comes back (a new server) collects the worker's last turn, also after
    /// its session ended. A server inside an agent started through MCP (the variable in
    /// its own environment, or in a process above it only) refuses to start agents unless
    /// the settings let workers do so.
    @Test func resultsOutliveTheLeadAndWorkersDoNotStartAgents() async throws {
        try await Self.withRepository { u, repo in
            try u.addHost()
            try u.ok(["projects", "add", "fixture", repo, "--name", "app"])
            let c = try Client(u)
            defer { if c.process.isRunning { c.process.terminate() } }
            try await c.begin()
            _ = try await c.object("start_task", ["project": "app", "title": "Answers", "agent": "amp", "prompt": "hello"])
            _ = try await c.object("start_task", ["project": "app", "title": "Ticks", "agent": "gemini"])
            let now = try await c.object("wait_for_task", ["task": "Ticks", "timeout_seconds": 0])
            #expect(now["timedOut"] as? Bool == true, "a wait of 0 s gives the state at once: \(now)")
            let done = try await c.object("wait_for_task", ["task": "Answers", "timeout_seconds": 60], seconds: 90)
            let turn = done["lastTurn"] as? [String: Any]
            #expect(done["timedOut"] as? Bool == false && (turn?["screen"] as? String)?.contains("got: hello") == true, "\(done)")

            // the lead goes away in the middle of a wait
            try c.send(["id": 999, "method": "tools/call", "params": ["name": "wait_for_task",
                                                                      "arguments": ["task": "Ticks", "timeout_seconds": 600]]])
            try await Task.sleep(for: .seconds(2))
            try c.closeInput()
            #expect(await eventually(30) { c.process.isRunning ? nil : true } == true, "the server outlived its client's wait")
            let children = try TestServer.runCapturing("/usr/bin/pgrep", ["-P", "\(c.process.processIdentifier)"])
            #expect(children.out.isEmpty, "the server left processes: \(children.out)")

            // a lead that comes back: the worker runs on, the other's last turn is there, also
            // once its session is gone
            let back = try Client(u)
            defer { if back.process.isRunning { back.process.terminate() } }
            try await back.begin()
            let ticks = try await back.object("task_status", ["task": "Ticks"])
            #expect((ticks["agents"] as? [[String: Any]])?.first?["state"] as? String == "working", "\(ticks)")
            _ = try await back.object("stop_task", ["task": "Answers"])
            let result = try await back.object("task_result", ["task": "Answers"])
            let kept = result["lastTurn"] as? [String: Any]
            #expect((kept?["screen"] as? String)?.contains("got: hello") == true && kept?["state"] as? String != nil, "\(result)")
            #expect(result["files"] as? [[String: Any]] != nil, "\(result)")
            _ = try await back.object("stop_task", ["task": "Ticks"])
            try back.closeInput()

            // workers: the variable in the server's own environment, then in its parent's only
            for launcher in [[], ["/usr/bin/env", "\(MCPPolicyName.variable)=1", "/bin/sh", "-c", "env -u \(MCPPolicyName.variable) \"$0\" \"$@\"; true"]] {
                let worker = try Client(u, env: launcher.isEmpty ? [MCPPolicyName.variable: "1"] : [:], launcher: launcher)
                defer { if worker.process.isRunning { worker.process.terminate() } }
                try await worker.begin()
                let refused = try await worker.call("start_task", ["project": "app", "title": "Grandchild", "agent": "amp"])
                #expect(refused.isError && refused.text.contains("do not let such workers start agents"), "\(launcher): \(refused)")
                #expect(try await !worker.call("board").isError, "a worker may still read the board")
                try worker.closeInput()
                #expect(await eventually(20) { worker.process.isRunning ? nil : true } == true)
            }
            try """
                {"searchPath": ["\(FakeAgents.directory)"], "providers": {"amp": {"binary": "fake-tui"}}, "mcp": {"workers": true}}
                """.write(toFile: u.home + "/.config/agent-sessions/config.json", atomically: true, encoding: .utf8)
            let allowed = try Client(u, env: [MCPPolicyName.variable: "1"])
            defer { if allowed.process.isRunning { allowed.process.terminate() } }
            try await allowed.begin()
            let child = try await allowed.object("start_task", ["project": "app", "title": "Grandchild", "agent": "amp"])
            #expect(child["title"] as? String == "Grandchild")
            _ = try await allowed.object("stop_task", ["task": "Grandchild"])
            try allowed.closeInput()
        }
    }

    /// `mcp install --host` runs the agent's own `mcp add` on the host (found on the host's
    /// search path), naming `agent-sessions` there; an agent the host lacks is one line.
    @Test func installOnAHostRunsTheAgentsOwnCommandThere() async throws {
        try await Self.withUser { u, _ in
            try u.addHost()
            let fakes = u.home + "/host-bin"
            try FileManager.default.createDirectory(atPath: fakes, withIntermediateDirectories: true)
            chmod(u.home, 0o777)
            chmod(fakes, 0o777)
            try "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '\(fakes)/codex.calls'\n".write(toFile: "\(fakes)/codex", atomically: true, encoding: .utf8)
            chmod("\(fakes)/codex", 0o755)
            let added = try u.run(["mcp", "install", "--for", "codex", "--host", "fixture", "--binary", "\(fakes)/codex"], timeout: 120)
            #expect(added.status == 0 && added.out.contains("on fixture"), "\(added)")
            let calls = try String(contentsOfFile: "\(fakes)/codex.calls", encoding: .utf8).split(separator: "\n").map(String.init)
            #expect(calls == ["mcp remove agent-sessions", "mcp add agent-sessions -- agent-sessions mcp"], "\(calls)")
            let missing = try u.run(["mcp", "install", "--for", "claude", "--host", "fixture", "--binary", "no-such-claude-here"], timeout: 120)
            #expect(missing.status == 1 && missing.err.contains("no-such-claude-here is not on fixture's search path"), "\(missing)")
            let noHost = try u.run(["mcp", "install", "--for", "claude", "--host", "nowhere"])
            #expect(noHost.status != 0 && noHost.err.contains("nowhere"), "\(noHost)")
        }
    }
}

/// The variable the engine gives every agent started through MCP.
enum MCPPolicyName {
    static let variable = "AGENT_SESSIONS_MCP_WORKER"
}
