@testable import AgentServe
import AgentSessions
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `agent-sessions serve` as a phone and an attacker see it: the page in a real headless
/// Chromium (Selenium) at a phone's size, and the HTTP and WebSocket doors by hand.
@Suite("agent-sessions: serve", .tags(.process), .serialized)
struct ServeTests {
    typealias User = AgentSessionsToolTests.User

    /// `agent-sessions serve` on a free loopback port, stopped (SIGTERM, then waited for)
    /// by `stop()`.
    final class Served: @unchecked Sendable {
        let process = Process()
        let url: String
        let port: Int
        let state: String

        init(_ u: User) throws {
            state = u.home + "/.local/share/agent-sessions/serve"
            try? FileManager.default.removeItem(atPath: state + "/address")
            process.executableURL = URL(fileURLWithPath: AgentSessionsToolTests.binary)
            process.arguments = ["serve", "--listen", "127.0.0.1:0"]
            process.environment = ["HOME": u.home, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            var found: String?
            for _ in 0..<300 where found == nil {
                found = try? String(contentsOfFile: state + "/address", encoding: .utf8)
                if found == nil { usleep(50_000) }
            }
            guard let found, let port = Int(found.split(separator: ":").last ?? "") else {
                process.terminate()
                throw FixtureError("agent-sessions serve did not start")
            }
            url = found
            self.port = port
        }

        /// SIGTERM, and the server must be gone within 15 s (else SIGKILL, and the test fails).
        func stop(sourceLocation: SourceLocation = #_sourceLocation) {
            guard process.isRunning else { return }
            process.terminate()
            var waited = 0
            while process.isRunning && waited < 300 {
                usleep(50_000)
                waited += 1
            }
            if process.isRunning {
                Issue.record("agent-sessions serve did not stop on SIGTERM", sourceLocation: sourceLocation)
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
        }
    }

    /// One HTTP/1.1 exchange on a socket of its own: the status, the head's fields
    /// (lower-cased names) and the body. A 101 answer leaves the socket open in `socket`.
    struct Exchange {
        var status: Int
        var fields: [String: String]
        var body: String
        var socket: Int32 = -1
        /// The body as it came (a gzipped one is not text).
        var bytes: [UInt8] = []
    }

    static func http(_ port: Int, _ method: String, _ path: String, headers: [String: String] = [:],
                     body: String? = nil) throws -> Exchange {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var tv = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let ok = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard ok == 0 else {
            close(fd)
            throw FixtureError("cannot connect to 127.0.0.1:\(port)")
        }
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
        for (k, v) in headers { head += "\(k): \(v)\r\n" }
        if let body { head += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n" }
        head += "Connection: close\r\n\r\n" + (body ?? "")
        _ = head.withCString { send(fd, $0, strlen($0), 0) }
        var data = [UInt8]()
        var buf = [UInt8](repeating: 0, count: 65536)
        var headEnd: Int?
        var length: Int?
        while true {
            let n = recv(fd, &buf, buf.count, 0)
            if n <= 0 { break }
            data += buf[0..<n]
            if headEnd == nil, let r = data.firstRange(of: Array("\r\n\r\n".utf8)) {
                headEnd = r.upperBound
                let text = String(decoding: data[..<r.lowerBound], as: UTF8.self).lowercased()
                if text.hasPrefix("http/1.1 101") { break }
                if let l = text.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }) {
                    length = Int(l.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces))
                }
            }
            if let h = headEnd, let length, data.count >= h + length { break }
        }
        let h = headEnd ?? data.count
        let lines = String(decoding: data[..<h], as: UTF8.self).split(separator: "\r\n")
        let status = lines.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        var fields: [String: String] = [:]
        for l in lines.dropFirst() {
            if let c = l.firstIndex(of: ":") {
                fields[l[..<c].lowercased()] = l[l.index(after: c)...].trimmingCharacters(in: .whitespaces)
            }
        }
        var e = Exchange(status: status, fields: fields, body: String(decoding: data[h...], as: UTF8.self), bytes: Array(data[h...]))
        if status == 101 { e.socket = fd } else { close(fd) }
        return e
    }

    static func upgrade(_ port: Int, _ path: String, headers: [String: String] = [:]) throws -> Exchange {
        try http(port, "GET", path, headers: ["Upgrade": "websocket", "Connection": "Upgrade",
                                              "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "13"]
                    .merging(headers) { $1 })
    }

    /// Pairs through the API as a browser would: the device's cookie ("as_device=…").
    static func pairByHand(_ u: User, _ s: Served) throws -> String {
        let code = try u.ok(["serve", "pair", "--quiet"]).trimmingCharacters(in: .whitespacesAndNewlines)
        let r = try http(s.port, "POST", "/api/pair", headers: ["Origin": s.url], body: #"{"code":"\#(code)","name":"by hand"}"#)
        #expect(r.status == 200, "\(r)")
        let cookie = try #require(r.fields["set-cookie"], "\(r)")
        #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && cookie.contains("Path=/"), "\(cookie)")
        return String(cookie.split(separator: ";")[0])
    }

    static var browserPython: String { "/opt/sshkit-browser/bin/python" }

    @Test func aPhonePairsSeesTheBoardAndDrivesAnAgentInARealBrowser() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.browserPython),
                     "Selenium is missing: bash scripts/install-deps.sh")
        try await MCPServerTests.withRepository { u, repo in
            try u.addHost()
            try u.ok(["projects", "add", "fixture", repo, "--name", "app"])
            let title = #"Fix <script>window.__injected=true</script> & "quotes""#
            try u.ok(["tasks", "new", "app", title, "--agent", "amp", "--prompt", "hello"])
            let task = try #require(try await u.store().tasks(projectID: nil).first)
            _ = try await u.transport.runProcess("/bin/sh", arguments: ["-c", "echo 'from the agent' > \"$1/made.txt\"", "sh",
                                                                        task.worktree.path],
                                                 stdin: [], environment: [:], timeout: .seconds(30)).check("a file")
            let s = try Served(u)
            defer { s.stop() }
            let code = try u.ok(["serve", "pair", "--quiet"]).trimmingCharacters(in: .whitespacesAndNewlines)
            let out = Self.artifacts + "/serve-phone"
            try? FileManager.default.removeItem(atPath: out)
            let run = try MCPServerTests.runHere(Self.browserPython, [
                TestServer.packageRoot + "/Tests/Browser/serve_page.py", "--url", s.url, "--code", code, "--title", "Fix <script>",
                "--out", out,
            ], env: ["PATH": "/usr/bin:/bin", "HOME": u.home, "PYTHONDONTWRITEBYTECODE": "1"], timeout: 300)
            try? run.output.write(toFile: out + "/steps.jsonl", atomically: true, encoding: .utf8)
            let steps = MCPServerTests.Steps()
            steps.take(Data(run.output.utf8))
            #expect(steps.step("error") == nil, "\(run.output)")

            let unpaired = try #require(steps.step("unpaired"), "\(run.output)")
            #expect((unpaired["body"] as? String)?.contains("not paired") == true, "\(unpaired)")
            let paired = try #require(steps.step("paired"), "\(run.output)")
            let cookie = (paired["cookie"] as? [[String: Any]])?.first { $0["name"] as? String == "as_device" }
            #expect(cookie?["httpOnly"] as? Bool == true && cookie?["sameSite"] as? String == "Strict", "\(paired)")

            let board = try #require(steps.step("board"), "\(run.output)")
            #expect((board["text"] as? String)?.contains(title) == true, "the title shown as text: \(board)")
            #expect(board["injected"] as? Bool == false, "\(board)")
            #expect(board["live"] as? Bool == true, "\(board)")

            let page = try #require(steps.step("task"), "\(run.output)")
            #expect((page["screen"] as? String)?.contains("got: hello") == true, "\(page)")
            #expect((page["width"] as? Int ?? 999) <= 390, "no sideways scrolling at a phone's width: \(page)")
            #expect(steps.step("typed")?["echoed"] as? Bool == true, "\(String(describing: steps.step("typed")))")
            let drawn = try #require(steps.step("drawn"), "\(run.output)")
            #expect(drawn["same"] as? Bool == true, "the rows drawn are the terminal's lines: \(drawn)")
            let rows = drawn["rows"] as? Int ?? 0, spans = drawn["spans"] as? Int ?? .max
            #expect(rows >= 5 && spans <= rows * 4, "a run of like cells is one span: \(drawn)")
            #expect(steps.step("sent")?["echoed"] as? Bool == true, "\(String(describing: steps.step("sent")))")

            let question = try #require(steps.step("question"), "\(run.output)")
            #expect(question["labels"] as? [String] == ["Yes", "No"], "\(question)")
            #expect(question["answered"] as? Bool == true && question["message"] as? String == "answered: Yes", "\(question)")
            let diff = try #require(steps.step("diff"), "\(run.output)")
            #expect((diff["files"] as? [String])?.contains { $0.hasPrefix("made.txt") } == true, "\(diff)")
            #expect((diff["patch"] as? String)?.contains("+from the agent") == true, "\(diff)")
            #expect((steps.step("commit")?["message"] as? String)?.contains("committed 1 file") == true,
                    "\(String(describing: steps.step("commit")))")
            // the command's refusal, word for word
            let push = try #require(steps.step("push"), "\(run.output)")
            #expect(push["bad"] as? Bool == true, "\(push)")
            let refused = try u.fails(["tasks", "push", String(task.id.short)], 1)
            #expect(refused.contains(push["message"] as? String ?? "<none>"), "\(push) vs \(refused)")
            #expect((steps.step("stop")?["agents"] as? String)?.contains("stopped") == true,
                    "\(String(describing: steps.step("stop")))")
            #expect((steps.step("resume")?["screen"] as? String)?.contains("READY>") == true,
                    "\(String(describing: steps.step("resume")))")
            for shot in ["pair", "board", "task", "question", "diff", "resumed"] {
                #expect(FileManager.default.fileExists(atPath: "\(out)/\(shot).png"), "\(shot).png")
            }

            // every action in the audit log, with the device
            let audit = try String(contentsOfFile: s.state + "/audit.jsonl", encoding: .utf8)
            let device = try #require(try ServeState(directory: s.state).devices().first { $0.name == "test phone" })
            for action in ["pair", "send", "answer", "commit", "push", "stop", "resume", "terminal"] {
                #expect(audit.contains(#""action":"\#(action)""#) && audit.contains(#""device":"\#(device.id)""#),
                        "\(action) in \(audit)")
            }
            #expect(audit.contains(#""action":"push""#) && audit.contains("refused: noRemote"), "\(audit)")
        }
    }

    /// Work started and landed from the page: a new task, another agent in it, its port as
    /// a link that reaches a server on the task's PORT, commit, pull request and merge with
    /// the command's refusals, and attempts compared with a check and one kept; then what
    /// the same routes refuse.
    @Test func aPhoneStartsWorkLandsItAndKeepsOneAttempt() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.browserPython),
                     "Selenium is missing: bash scripts/install-deps.sh")
        try await MCPServerTests.withRepository { u, repo in
            try u.addHost()
            try u.ok(["projects", "add", "fixture", repo, "--name", "app"])
            try u.ok(["tasks", "new", "app", "Land me", "--agent", "amp", "--prompt", "hello"])
            let land = try #require(try await u.store().tasks(projectID: nil).first)
            _ = try await u.transport.runProcess("/bin/sh", arguments: ["-c", "echo landed > \"$1/landed.txt\"", "sh",
                                                                        land.worktree.path],
                                                 stdin: [], environment: [:], timeout: .seconds(30)).check("a file")
            let s = try Served(u)
            defer { s.stop() }
            let code = try u.ok(["serve", "pair", "--quiet"]).trimmingCharacters(in: .whitespacesAndNewlines)
            let out = Self.artifacts + "/serve-work"
            try? FileManager.default.removeItem(atPath: out)
            let run = try MCPServerTests.runHere(Self.browserPython, [
                TestServer.packageRoot + "/Tests/Browser/serve_work.py", "--url", s.url, "--code", code, "--land", "Land me",
                "--out", out,
            ], env: ["PATH": "/usr/bin:/bin", "HOME": u.home, "PYTHONDONTWRITEBYTECODE": "1"], timeout: 420)
            try? run.output.write(toFile: out + "/steps.jsonl", atomically: true, encoding: .utf8)
            let steps = MCPServerTests.Steps()
            steps.take(Data(run.output.utf8))
            #expect(steps.step("error") == nil, "\(run.output)")

            // a new task: the project's agents offered, the agent started with the prompt
            let made = try #require(steps.step("new"), "\(run.output)")
            #expect((made["agents"] as? [String])?.contains("amp") == true, "\(made)")
            #expect((made["screen"] as? String)?.contains("got: hello from the phone") == true, "\(made)")
            let tasks = try await u.store().tasks(projectID: nil)
            let started = try #require(tasks.first { $0.title == "Started from the phone" }, "\(tasks.map(\.title))")
            #expect((made["url"] as? String)?.hasSuffix("/t/" + started.id.rawValue) == true, "\(made)")
            // another agent in its worktree
            let chat = try #require(steps.step("chat"), "\(run.output)")
            #expect((chat["screen"] as? String)?.contains("got: a second opinion") == true, "\(chat)")
            #expect((chat["agents"] as? [String])?.count == 2, "\(chat)")
            #expect(try await u.store().conversations(taskID: started.id).count == 2)
            // its port, through the host's connection, as a link that opens elsewhere
            let port = try #require(steps.step("port"), "\(run.output)")
            #expect(port["port"] as? String == started.port.map(String.init), "\(port)")
            #expect((port["href"] as? String)?.wholeMatch(of: /http:\/\/127\.0\.0\.1:\d+\//) != nil, "\(port)")
            #expect((port["rel"] as? String)?.contains("noopener") == true, "\(port)")
            #expect(port["page"] as? String == "hello from the task's port", "\(port)")

            // landing: commit, a pull request refused as the command refuses it, merge
            #expect((steps.step("commit")?["message"] as? String)?.contains("committed 1 file") == true,
                    "\(String(describing: steps.step("commit")))")
            let pr = try #require(steps.step("pr"), "\(run.output)")
            #expect(pr["bad"] as? Bool == true, "\(pr)")
            let refused = try u.fails(["tasks", "pr", String(land.id.short)], 1)
            #expect(refused.contains(pr["message"] as? String ?? "<none>"), "\(pr) vs \(refused)")
            let merged = try #require(steps.step("merge")?["message"] as? String, "\(run.output)")
            #expect(merged.contains("merged \(land.worktree.branch) into ") && merged.contains("fast-forward"), "\(merged)")
            let base = String(merged.split(separator: " ")[3].dropLast())
            let log = try await u.transport.runProcess("git", arguments: ["-C", repo, "log", "-1", "--format=%s", base], stdin: [],
                                                       environment: [:], timeout: .seconds(30)).check("git log")
            #expect(String(decoding: log.stdout, as: UTF8.self).contains("Land me"), "\(base)")
            #expect((steps.step("merge again")?["message"] as? String)?.contains("has every commit") == true,
                    "\(String(describing: steps.step("merge again")))")

            // attempts side by side, a check in each, the second kept and the first archived
            let attempts = try #require(steps.step("attempts"), "\(run.output)")
            #expect(attempts["labels"] as? [String] == ["amp-1", "amp-2"], "\(attempts)")
            #expect(attempts["checked"] as? String == "2 of 2 passed", "\(attempts)")
            #expect((attempts["passes"] as? [String])?.count == 2, "\(attempts)")
            #expect(attempts["archived"] as? [String] == ["amp-1"], "\(attempts)")
            #expect((attempts["width"] as? Int ?? 999) <= 390, "no sideways scrolling at a phone's width: \(attempts)")
            let both = try await u.store().tasks(projectID: nil).filter { $0.title == "Two ways" }
            let kept = try #require(both.first { $0.attempt?.label == "amp-2" }, "\(both)")
            #expect((attempts["kept"] as? String)?.hasSuffix("/t/" + kept.id.rawValue) == true, "\(attempts)")
            #expect(kept.archivedAt == nil && both.first { $0.attempt?.label == "amp-1" }?.archivedAt != nil, "\(both)")
            for shot in ["new", "new-task", "port", "landed", "attempts", "picked"] {
                #expect(FileManager.default.fileExists(atPath: "\(out)/\(shot).png"), "\(shot).png")
            }
            let audit = try String(contentsOfFile: s.state + "/audit.jsonl", encoding: .utf8)
            for action in ["new task", "new chat", "open port", "commit", "pr", "merge", "check attempts", "pick"] {
                #expect(audit.contains(#""action":"\#(action)""#), "\(action) in \(audit)")
            }

            // what the same routes refuse
            let cookie = try Self.pairByHand(u, s)
            let project = try #require(try await u.store().projects(hostID: nil).first)
            func post(_ path: String, _ body: String, origin: String? = nil, cookie c: String? = nil) throws -> Exchange {
                try Self.http(s.port, "POST", path, headers: ["Cookie": c ?? cookie, "Origin": origin ?? s.url], body: body)
            }
            func refusal(_ r: Exchange, _ status: Int, _ code: String, sourceLocation: SourceLocation = #_sourceLocation) {
                #expect(r.status == status && r.body.contains(#""error":"\#(code)""#), "\(r)", sourceLocation: sourceLocation)
            }
            let newTask = #"{"project":"\#(project.id.rawValue)","title":"X","agent":"amp"}"#
            refusal(try post("/api/tasks", newTask, cookie: "as_device=forged"), 401, "notPaired")
            refusal(try post("/api/tasks", newTask, origin: "http://evil.example"), 403, "forbidden")
            refusal(try post("/api/tasks", "not json"), 400, "invalidArgument")
            refusal(try post("/api/tasks", #"{"project":"\#(project.id.rawValue)","title":"X","agent":"nope"}"#), 400, "unknownProvider")
            refusal(try post("/api/tasks", #"{"project":"\#(project.id.rawValue)","title":"X","agent":"amp","attempts":0}"#),
                    400, "invalidArgument")
            refusal(try post("/api/tasks", #"{"project":"nope","title":"X","agent":"amp"}"#), 404, "notFound")
            refusal(try post("/api/tasks/\(land.id.rawValue)/pick", #"{"attempt":"amp-1"}"#), 409, "notAnAttempt")
            refusal(try post("/api/tasks/\(kept.id.rawValue)/pick", #"{"attempt":"amp-1","others":"burn"}"#), 400, "invalidArgument")
            refusal(try post("/api/tasks/\(kept.id.rawValue)/pick", #"{"attempt":"amp-9"}"#), 404, "notFound")
            let archived = try #require(both.first { $0.attempt?.label == "amp-1" })
            refusal(try post("/api/tasks/\(archived.id.rawValue)/chats", #"{"agent":"amp"}"#), 409, "taskArchived")
            refusal(try post("/api/tasks/\(archived.id.rawValue)/port", "{}"), 409, "taskArchived")
            refusal(try post("/api/tasks/\(kept.id.rawValue)/attempts/check", #"{"text":""}"#), 400, "invalidArgument")
            #expect(try Self.http(s.port, "GET", "/api/projects").status == 401)
            #expect(try Self.http(s.port, "GET", "/new").status == 401)
            // nothing was made by what was refused
            #expect(try await u.store().tasks(projectID: nil).count == tasks.count)
        }
    }

    @Test func everyRouteAndUpgradeRefusesADeviceThatIsNotPaired() async throws {
        try await MCPServerTests.withUser { u, _ in
            let s = try Served(u)
            defer { s.stop() }
            for path in ["/", "/t/abc", "/api/board", "/api/tasks/abc", "/api/tasks/abc/diff", "/api/tasks/abc/patch?path=x",
                         "/static/app.js", "/static/xterm.js", "/static/task.js"] {
                let r = try Self.http(s.port, "GET", path)
                #expect(r.status == 401, "GET \(path): \(r.status)")
                #expect(!r.body.contains("function"), "GET \(path) gave something away")
            }
            for path in ["/api/tasks/abc/stop", "/api/tasks/abc/resume", "/api/tasks/abc/commit", "/api/tasks/abc/push",
                         "/api/chats/abc/send"] {
                let r = try Self.http(s.port, "POST", path, headers: ["Origin": s.url], body: "{}")
                #expect(r.status == 401, "POST \(path): \(r.status)")
            }
            for path in ["/api/board/live", "/api/chats/abc/terminal"] {
                // the WebSocket library answers an upgrade it does not make 400 (and closes)
                let r = try Self.upgrade(s.port, path, headers: ["Origin": s.url])
                #expect(r.status == 400 && r.socket < 0, "upgrade \(path): \(r.status)")
                if r.socket >= 0 { close(r.socket) }
            }
            let audit = try String(contentsOfFile: s.state + "/audit.jsonl", encoding: .utf8)
            #expect(audit.contains(#""action":"upgrade""#) && audit.contains("refused: not paired"), "\(audit)")
            // what pairing needs is open
            #expect(try Self.http(s.port, "GET", "/pair").status == 200)
            #expect(try Self.http(s.port, "GET", "/static/app.css").status == 200)
            // a forged cookie is no device
            #expect(try Self.http(s.port, "GET", "/api/board", headers: ["Cookie": "as_device=forged"]).status == 401)
        }
    }

    @Test func gzipIsSentOnlyWhereTheRequestTakesItAndATagMatchesWeakly() {
        for taken in ["gzip", "gzip, deflate, br, zstd", "br;q=1.0, GZIP;q=0.5", "x-gzip", "*", "br, *;q=0.1", "identity, gzip;q=0.001"] {
            #expect(ServeAssets.takesGzip(taken), "\(taken)")
        }
        for refused in ["", "identity", "br", "gzip;q=0", "gzip; q=0.0, br", "*;q=0", "gzip;q=0, *", "deflate, *;q=0"] {
            #expect(!ServeAssets.takesGzip(refused), "\(refused)")
        }
        let tag = #"W/"0123abcd""#
        for matching in [tag, #""0123abcd""#, #"W/"ffff", W/"0123abcd""#, "*", #" "0123abcd" "#] {
            #expect(ServeAssets.matches(matching, tag: tag), "\(matching)")
        }
        for other in [#"W/"0123abcde""#, #""0123abcd"x"#, "", "0123abcd", #"W/"ffff""#] {
            #expect(!ServeAssets.matches(other, tag: tag), "\(other)")
        }
    }

    @Test func thePagesFilesAreGzippedForABrowserThatTakesItAndRevalidatedByTheirTag() async throws {
        try await MCPServerTests.withUser { u, _ in
            let s = try Served(u)
            defer { s.stop() }
            let cookie = try Self.pairByHand(u, s)
            // a small answer (an empty board) goes as it is, gzip taken or not
            let board = try Self.http(s.port, "GET", "/api/board", headers: ["Cookie": cookie, "Accept-Encoding": "gzip"])
            #expect(board.status == 200 && board.fields["content-encoding"] == nil && board.body.hasPrefix("{"), "\(board)")
            for file in ["task.js", "app.css"] {
                let plain = try Self.http(s.port, "GET", "/static/" + file, headers: ["Cookie": cookie])
                #expect(plain.status == 200 && plain.fields["content-encoding"] == nil, "\(file): \(plain.fields)")
                let tag = try #require(plain.fields["etag"], "\(file): \(plain.fields)")
                #expect(plain.fields["vary"] == "Accept-Encoding", "\(plain.fields)")

                // gzipped for a browser that takes it: what gzip itself unpacks is the same file
                let packed = try Self.http(s.port, "GET", "/static/" + file,
                                           headers: ["Cookie": cookie, "Accept-Encoding": "gzip, deflate, br, zstd"])
                #expect(packed.status == 200 && packed.fields["content-encoding"] == "gzip", "\(file): \(packed.fields)")
                #expect(packed.fields["etag"] == tag && packed.bytes.count * 2 < plain.bytes.count,
                        "\(file): \(packed.bytes.count) bytes gzipped, \(plain.bytes.count) not")
                let gunzip = Process()
                gunzip.executableURL = URL(fileURLWithPath: "/bin/gzip")
                gunzip.arguments = ["-dc"]
                let input = Pipe(), output = Pipe()
                gunzip.standardInput = input
                gunzip.standardOutput = output
                try gunzip.run()
                input.fileHandleForWriting.write(Data(packed.bytes))
                try input.fileHandleForWriting.close()
                let unpacked = output.fileHandleForReading.readDataToEndOfFile()
                gunzip.waitUntilExit()
                #expect(gunzip.terminationStatus == 0 && [UInt8](unpacked) == plain.bytes, "\(file): gzip -dc gave \(unpacked.count) bytes")

                // gzip refused (q=0), or not named: as it is
                for refused in ["gzip;q=0, identity", "identity", "br"] {
                    let r = try Self.http(s.port, "GET", "/static/" + file, headers: ["Cookie": cookie, "Accept-Encoding": refused])
                    #expect(r.status == 200 && r.fields["content-encoding"] == nil && r.bytes == plain.bytes, "\(refused): \(r.fields)")
                }
                // loaded again: its tag, then nothing to send
                let again = try Self.http(s.port, "GET", "/static/" + file,
                                          headers: ["Cookie": cookie, "If-None-Match": tag, "Accept-Encoding": "gzip"])
                #expect(again.status == 304 && again.bytes.isEmpty && again.fields["etag"] == tag, "\(file): \(again)")
                let other = try Self.http(s.port, "GET", "/static/" + file, headers: ["Cookie": cookie, "If-None-Match": #"W/"0000", "abc""#])
                #expect(other.status == 200 && other.bytes == plain.bytes, "\(file): \(other.status)")
                // a device that is not paired learns nothing from a tag either
                #expect(try Self.http(s.port, "GET", "/static/" + file, headers: ["If-None-Match": tag]).status == (file == "app.css" ? 304 : 401))
            }
        }
    }

    @Test func aPairingCodeWorksOnceExpiresAndWrongCodesAreRateLimited() async throws {
        // the codes themselves
        let dir = try TestPaths.makeTemporaryDirectory("serve-state")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = try ServeState(directory: dir + "/serve")
        let now = Date()
        let code = try state.newPairingCode(now: now)
        #expect(code.count == 9 && code.contains("-"), "\(code)")
        let (device, token) = try state.pair(code: code.lowercased().replacingOccurrences(of: "-", with: " "), name: "a", now: now)
        #expect(device.tokenHash != token && device.tokenHash.count == 64)
        #expect(throws: ServeError.self) { try state.pair(code: code, name: "b", now: now) }
        let late = try state.newPairingCode(now: now)
        do {
            _ = try state.pair(code: late, name: "late", now: now + ServeState.codeLifetime + 1)
            Issue.record("an expired code paired")
        } catch {
            #expect(error.message.contains("expired"), "\(error)")
        }
        #expect(try state.devices().map(\.name) == ["a"])
        let mode = try FileManager.default.attributesOfItem(atPath: dir + "/serve")[.posixPermissions] as? Int
        #expect(mode == 0o700)
        for f in ["devices.json", "pairing.json"] {
            #expect(try FileManager.default.attributesOfItem(atPath: "\(dir)/serve/\(f)")[.posixPermissions] as? Int == 0o600, "\(f)")
        }

        // through the server: replayed, forged origin, and too many wrong codes
        try await MCPServerTests.withUser { u, _ in
            let s = try Served(u)
            defer { s.stop() }
            let code = try u.ok(["serve", "pair", "--quiet"]).trimmingCharacters(in: .whitespacesAndNewlines)
            let body = #"{"code":"\#(code)","name":"x"}"#
            #expect(try Self.http(s.port, "POST", "/api/pair", headers: ["Origin": "http://evil.example"], body: body).status == 403)
            #expect(try Self.http(s.port, "POST", "/api/pair", body: body).status == 403, "no Origin at all")
            #expect(try Self.http(s.port, "POST", "/api/pair", headers: ["Origin": s.url], body: body).status == 200)
            let replay = try Self.http(s.port, "POST", "/api/pair", headers: ["Origin": s.url], body: body)
            #expect(replay.status == 401 && replay.body.contains("used already"), "\(replay)")
            var statuses: [Int] = []
            for i in 0..<7 {
                statuses.append(try Self.http(s.port, "POST", "/api/pair", headers: ["Origin": s.url],
                                              body: #"{"code":"WRNG-\#(1000 + i)"}"#).status)
            }
            #expect(statuses.filter { $0 == 429 }.count >= 2, "\(statuses)")
            // a good code is refused too while the limit holds: guessing is what it stops
            let fresh = try u.ok(["serve", "pair", "--quiet"]).trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try Self.http(s.port, "POST", "/api/pair", headers: ["Origin": s.url],
                                  body: #"{"code":"\#(fresh)"}"#).status == 429)
        }
    }

    @Test func aForgedOriginIsRefusedAndARevokedDeviceIsShutOutAtOnce() async throws {
        try await MCPServerTests.withUser { u, _ in
            let s = try Served(u)
            defer { s.stop() }
            let cookie = try Self.pairByHand(u, s)
            #expect(try Self.http(s.port, "GET", "/api/board", headers: ["Cookie": cookie]).status == 200)
            // the page's own origin only, for actions and upgrades
            let forged = try Self.http(s.port, "POST", "/api/tasks/abc/stop", headers: ["Cookie": cookie, "Origin": "http://evil.example"],
                                       body: "{}")
            #expect(forged.status == 403, "\(forged)")
            let noOrigin = try Self.http(s.port, "POST", "/api/tasks/abc/stop", headers: ["Cookie": cookie], body: "{}")
            #expect(noOrigin.status == 403, "\(noOrigin)")
            let forgedUpgrade = try Self.upgrade(s.port, "/api/board/live", headers: ["Cookie": cookie, "Origin": "http://evil.example"])
            #expect(forgedUpgrade.status == 400 && forgedUpgrade.socket < 0, "\(forgedUpgrade)")
            // an unknown task, asked properly: the engine's notFound as 404
            let missing = try Self.http(s.port, "POST", "/api/tasks/abc/stop", headers: ["Cookie": cookie, "Origin": s.url], body: "{}")
            #expect(missing.status == 404 && missing.body.contains("notFound"), "\(missing)")

            // a live board socket ends when its device is revoked
            let live = try Self.upgrade(s.port, "/api/board/live", headers: ["Cookie": cookie, "Origin": s.url])
            #expect(live.status == 101, "\(live)")
            defer { if live.socket >= 0 { close(live.socket) } }
            let id = try #require(try ServeState(directory: s.state).devices().first?.id)
            // a device's id never reads as an option on a command line
            #expect(id.count == 8 && id.allSatisfy { $0.isHexDigit && !$0.isUppercase }, "\(id)")
            #expect(try u.ok(["serve", "devices"]).contains(id))
            #expect(try u.ok(["serve", "devices", "--revoke", String(id.prefix(4))]).contains("revoked \(id)"))
            #expect(Self.closeCode(live.socket) == 1008, "the revoked device's socket ends as a policy violation")
            #expect(try Self.http(s.port, "GET", "/api/board", headers: ["Cookie": cookie]).status == 401)
            let audit = try String(contentsOfFile: s.state + "/audit.jsonl", encoding: .utf8)
            #expect(audit.contains("refused: another origin") && audit.contains(#""action":"revoke""#), "\(audit)")
            #expect(try u.fails(["serve", "devices", "--revoke", "nosuch"], 2).contains("no device"))
        }
    }

    @Test func aHostThatIsDownMarksItsRowsAndThePageStillAnswers() async throws {
        try await MCPServerTests.withRepository { u, repo in
            let proxy = try FaultProxy(target: u.server.port)
            defer { proxy.stop() }
            try u.addHost("far", port: proxy.port)
            try u.ok(["projects", "add", "far", repo, "--name", "app"])
            try u.ok(["tasks", "new", "app", "On a far host", "--agent", "amp", "--prompt", "hi"])
            let s = try Served(u)
            defer { s.stop() }
            let cookie = try Self.pairByHand(u, s)
            let up = try Self.http(s.port, "GET", "/api/board", headers: ["Cookie": cookie])
            #expect(up.status == 200 && up.body.contains("On a far host") && !up.body.contains("hostError"), "\(up)")
            // the host goes away (its connection cut, no new one gets through)
            proxy.stop()
            let down = await eventually(60) { () -> String? in
                guard let r = try? Self.http(s.port, "GET", "/api/board", headers: ["Cookie": cookie]), r.status == 200,
                      r.body.contains(#""hostError""#) else { return nil }
                return r.body
            }
            #expect(down?.contains("On a far host") == true, "the row stays, marked: \(String(describing: down))")
            #expect(try Self.http(s.port, "GET", "/", headers: ["Cookie": cookie]).status == 200, "the page still answers")
        }
    }

    @Test func anAgentThatNeedsYouIsPushedEncryptedToEachSubscriptionFromAHostAddedWhileServing() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.browserPython),
                     "http_ece is missing: bash scripts/install-deps.sh")
        try await MCPServerTests.withRepository { u, repo in
            // the host is added while serve runs: its events are followed from then on (a
            // push comes only from a host's events)
            let s = try Served(u)
            defer { s.stop() }
            try u.addHost()
            try u.ok(["projects", "add", "fixture", repo, "--name", "app"])
            try u.ok(["tasks", "new", "app", "Push me", "--agent", "amp", "--prompt", "hello"])
            let task = try #require(try await u.store().tasks(projectID: nil).first)

            // the stand-in push service, and a subscription as a browser makes one
            let service = Process()
            service.executableURL = URL(fileURLWithPath: Self.browserPython)
            service.arguments = [TestServer.packageRoot + "/Tests/Browser/push_endpoint.py", "--seconds", "180"]
            let pipe = Pipe()
            service.standardOutput = pipe
            service.standardError = FileHandle.nullDevice
            let steps = MCPServerTests.Steps()
            pipe.fileHandleForReading.readabilityHandler = { h in steps.take(h.availableData) }
            try service.run()
            defer { if service.isRunning { service.terminate() } }
            let sub = try #require(await eventually(30) { steps.step("subscription") }, "the push service did not start")
            let endpoint = try #require(sub["endpoint"] as? String), gone = try #require(sub["gone"] as? String)
            let p256dh = try #require(sub["p256dh"] as? String), auth = try #require(sub["auth"] as? String)

            let cookie = try Self.pairByHand(u, s)
            func subscribe(_ endpoint: String, _ p256dh: String, _ auth: String, origin: String? = nil) throws -> Exchange {
                try Self.http(s.port, "POST", "/api/push/subscribe", headers: ["Cookie": cookie, "Origin": origin ?? s.url],
                              body: #"{"endpoint":"\#(endpoint)","keys":{"p256dh":"\#(p256dh)","auth":"\#(auth)"}}"#)
            }
            // what is refused: plain HTTP elsewhere than loopback, a key that is no P-256 point,
            // a short secret, another origin, no device
            #expect(try subscribe("http://push.example/x", p256dh, auth).status == 400)
            #expect(try subscribe(endpoint, "AAAA", auth).status == 400)
            #expect(try subscribe(endpoint, p256dh, "AAAA").status == 400)
            #expect(try subscribe(endpoint, p256dh, auth, origin: "http://evil.example").status == 403)
            #expect(try Self.http(s.port, "POST", "/api/push/subscribe", headers: ["Origin": s.url], body: "{}").status == 401)
            #expect(try subscribe(endpoint, p256dh, auth).status == 200)
            #expect(try subscribe(gone, p256dh, auth).status == 200)
            let state = try ServeState(directory: s.state)
            #expect(try state.pushSubscriptions().count == 2)
            #expect(try FileManager.default.attributesOfItem(atPath: s.state + "/vapid.json")[.posixPermissions] as? Int == 0o600)
            let key = try Self.http(s.port, "GET", "/api/push/key", headers: ["Cookie": cookie])
            #expect(key.status == 200 && key.body.contains("publicKey"), "\(key)")

            // the board follows the host's events; then the agent asks something
            _ = await eventually(30) { () -> Bool? in
                let r = try? Self.http(s.port, "GET", "/api/board", headers: ["Cookie": cookie])
                return r?.body.contains("amp") == true ? true : nil
            }
            try await Task.sleep(for: .seconds(2))
            try u.ok(["send", String(task.id.short), "Continue? (y/n)"])
            let push = try #require(await eventually(60) { steps.step("push") }, "no push came")
            #expect(push["problem"] is NSNull, "the push service's check: \(push)")
            #expect(push["encoding"] as? String == "aes128gcm", "\(push)")
            let payload = try #require(push["payload"] as? [String: Any], "\(push)")
            #expect(Set(payload.keys) == ["task", "title", "host", "agent", "state", "url"], "\(payload)")
            #expect(payload["task"] as? String == task.id.rawValue && payload["title"] as? String == "Push me", "\(payload)")
            #expect(payload["agent"] as? String == "amp" && payload["state"] as? String == "waiting", "\(payload)")
            #expect(payload["url"] as? String == "/t/" + task.id.rawValue, "\(payload)")
            #expect((payload["host"] as? String)?.hasPrefix("fixture") == true, "\(payload)")
            #expect(!"\(payload)".contains("Continue?") && !"\(payload)".contains("got:"), "no screen in a push: \(payload)")
            // an answer is bound to its question: another question, an answer the screen
            // does not offer, and the same answer once the question is gone are refused
            let chat = try #require(try await u.store().conversations(taskID: task.id).first)
            func answer(_ question: String, _ keys: String) throws -> Exchange {
                try Self.http(s.port, "POST", "/api/chats/\(chat.id.rawValue)/answer", headers: ["Cookie": cookie, "Origin": s.url],
                              body: #"{"question":"\#(question)","keys":"\#(keys)"}"#)
            }
            let view = try Self.http(s.port, "GET", "/api/tasks/\(task.id.rawValue)", headers: ["Cookie": cookie])
            let agentView = try #require(
                ((try JSONSerialization.jsonObject(with: Data(view.body.utf8)) as? [String: Any])?["agents"] as? [[String: Any]])?.first,
                "\(view)")
            let asked = try #require(agentView["questionKey"] as? String, "\(agentView)")
            #expect((agentView["choices"] as? [[String: Any]])?.compactMap { $0["label"] as? String } == ["Yes", "No"], "\(agentView)")
            #expect(try answer("0123abcd", "y").status == 409)
            #expect(try answer(asked, "x").status == 409)
            let yes = try answer(asked, "y")
            #expect(yes.status == 200 && yes.body.contains("answered: Yes"), "\(yes)")
            let replay = await eventually(30) { () -> Exchange? in
                let r = try? answer(asked, "y")
                return r?.status == 409 ? r : nil
            }
            #expect(replay?.body.contains("no longer") == true, "\(String(describing: replay))")
            // the subscription its service says is gone is dropped
            #expect(await eventually(30) { steps.step("gone") } != nil)
            #expect(await eventually(30) { () -> Bool? in (try? state.pushSubscriptions().count) == 1 ? true : nil } == true)
            // revoking the device drops its subscriptions too
            let device = try #require(try state.devices().first)
            try u.ok(["serve", "devices", "--revoke", device.id])
            #expect(try state.pushSubscriptions().isEmpty)
        }
    }

    /// Stopping the server (SIGTERM) closes its open sockets, not as a revocation (the page
    /// tries again, it does not go to pairing), and does not wait long for a client that
    /// does not answer the close (this one never does).
    @Test func stoppingTheServerClosesItsSocketsWithoutWaitingForThem() async throws {
        try await MCPServerTests.withUser { u, _ in
            let s = try Served(u)
            defer { s.stop() }
            let cookie = try Self.pairByHand(u, s)
            let live = try Self.upgrade(s.port, "/api/board/live", headers: ["Cookie": cookie, "Origin": s.url])
            #expect(live.status == 101, "\(live)")
            defer { if live.socket >= 0 { close(live.socket) } }
            s.process.terminate()
            // the WebSocket library's own close on a graceful stop (1000), or ours (1001)
            let code = Self.closeCode(live.socket)
            #expect(code == 1000 || code == 1001, "\(String(describing: code))")
            s.stop() // within its bound, or the test fails
        }
    }

    /// The status code of the close frame the server sends on `socket` (nil if the socket
    /// ends without one within 10 s), the messages before it skipped.
    static func closeCode(_ socket: Int32) -> Int? {
        var data: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        let deadline = Date() + 10
        while Date() < deadline {
            // the frames so far: FIN/opcode, a length (7 bits, or 16 or 64 more), no mask from a server
            var i = 0
            while i + 2 <= data.count {
                let opcode = data[i] & 0x0F
                var length = Int(data[i + 1] & 0x7F), header = 2
                if length == 126, i + 4 <= data.count {
                    length = Int(data[i + 2]) << 8 | Int(data[i + 3])
                    header = 4
                } else if length == 127, i + 10 <= data.count {
                    length = data[(i + 2)..<(i + 10)].reduce(0) { $0 << 8 | Int($1) }
                    header = 10
                } else if length >= 126 {
                    break
                }
                guard i + header + length <= data.count else { break }
                if opcode == 0x8 {
                    return length >= 2 ? Int(data[i + header]) << 8 | Int(data[i + header + 1]) : 1005
                }
                i += header + length
            }
            let n = recv(socket, &buf, buf.count, 0)
            if n <= 0 { return nil }
            data += buf[0..<n]
        }
        return nil
    }

    /// Where screenshots and other files a person should look at are kept.
    static var artifacts: String {
        ProcessInfo.processInfo.environment["SSHKIT_ARTIFACTS"] ?? TestServer.packageRoot + "/.build/test-artifacts"
    }
}
