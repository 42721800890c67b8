import Foundation
import Testing

/// The package's layers (Docs/Architecture.md): only SSHCore calls libssh; only
/// Sources/SSHKit/Internal imports SSHCore; the agent tool reaches the engine through its door.
@Suite("Layering", .tags(.pure))
struct LayeringTests {
    static func swiftFiles(under dir: String) -> [String] {
        let root = TestServer.packageRoot + "/" + dir
        guard let e = FileManager.default.enumerator(atPath: root) else { return [] }
        return e.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") && !$0.contains(".build") }
            .map { root + "/" + $0 }
    }

    static func importLines(_ file: String, module: String) -> [String] {
        let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
        let pattern = try! NSRegularExpression(
            pattern: "^\\s*(@_exported\\s+|@testable\\s+|internal\\s+|public\\s+|package\\s+)?import\\s+(struct\\s+|func\\s+|enum\\s+)?\(module)\\b",
            options: [.anchorsMatchLines])
        return pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)).map {
            String(text[Range($0.range, in: text)!])
        }
    }

    @Test func noSwiftCodeImportsLibssh() {
        let files = ["Sources", "Tests", "Examples", "Benchmarks"].flatMap { Self.swiftFiles(under: $0) }
        #expect(files.count > 10)
        for f in files { #expect(Self.importLines(f, module: "CLibSSH").isEmpty, "\(f) imports CLibSSH") }
    }

    @Test func onlySSHKitInternalImportsSSHCore() {
        let files = Self.swiftFiles(under: "Sources") + Self.swiftFiles(under: "Examples")
        var importers: [String] = []
        for f in files where !Self.importLines(f, module: "SSHCore").isEmpty {
            importers.append(f)
            #expect(f.contains("/Sources/SSHKit/Internal/"), "\(f) imports SSHCore outside SSHKit/Internal")
            // internal: the compiler then refuses any C type in a public signature
            for line in Self.importLines(f, module: "SSHCore") {
                #expect(line.trimmingCharacters(in: .whitespaces).hasPrefix("internal import"), "\(f): \(line)")
            }
        }
        #expect(!importers.isEmpty, "the check found no importer at all; is it still looking at the right files?")
    }

    @Test func noSwiftCodeCallsLibsshFunctions() throws {
        let call = try NSRegularExpression(pattern: "\\b(ssh|sftp)_[a-z_]+\\s*\\(")
        for f in Self.swiftFiles(under: "Sources") + Self.swiftFiles(under: "Examples") {
            let text = try String(contentsOfFile: f, encoding: .utf8)
            for line in text.split(separator: "\n") where !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") {
                let s = String(line)
                #expect(call.firstMatch(in: s, range: NSRange(s.startIndex..., in: s)) == nil, "\(f): \(s)")
            }
        }
    }

    /// Lines of `file` (comments included) that match `pattern`.
    static func lines(of file: String, matching pattern: NSRegularExpression) throws -> [String] {
        try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n").map(String.init).filter {
            pattern.firstMatch(in: $0, range: NSRange($0.startIndex..., in: $0)) != nil
        }
    }

    /// The terminal layer (screen, renderer, keys) knows nothing of agents, so that the
    /// example tools can use it.
    @Test func theTerminalLayerIsIndependentOfTheAgentCode() throws {
        let agentModules = try NSRegularExpression(pattern: "^\\s*(@[\\w.]+\\s+)*import\\s+(AgentSessions|AgentSessionsSQLite|ServerTransport)\\b")
        let files = Self.swiftFiles(under: "Sources/TerminalSupport")
        #expect(files.count >= 5, "\(files)")
        for f in files {
            #expect(try Self.lines(of: f, matching: agentModules).isEmpty, "\(f) imports the agent code")
        }
        // the check sees what it looks for
        for sample in ["import AgentSessions", "@testable import ServerTransport"] {
            #expect(agentModules.firstMatch(in: sample, range: NSRange(sample.startIndex..., in: sample)) != nil)
        }
    }

    /// The agent tool, its cockpit and its page's server reach the engine only through its door,
    /// `AgentOrchestrator` and its handles: no file of theirs names the host type, the
    /// connection pool or the store (records are read through `records` and written by the
    /// engine). The command's `Context` alone makes the SQLite store it hands the engine.
    @Test func theAgentToolReachesTheEngineOnlyThroughItsDoor() throws {
        let behind = try NSRegularExpression(
            pattern: #"\b(AgentHost|AgentConnections|AgentStore|InMemoryAgentStore|SQLiteAgentStore)\b|\b(orchestrator|engine)\.store\b"#)
        // the check itself sees what it looks for
        #expect(try Self.lines(of: #filePath, matching: behind).count >= 2)
        for sample in ["let s = engine.store", "try await store.save(r) // any AgentStore", "host: AgentHost"] {
            #expect(behind.firstMatch(in: sample, range: NSRange(sample.startIndex..., in: sample)) != nil, "\(sample)")
        }
        let files = Self.swiftFiles(under: "Sources/agent-sessions") + Self.swiftFiles(under: "Sources/AgentCockpit")
            + Self.swiftFiles(under: "Sources/AgentServe")
        #expect(files.count >= 13, "\(files)")
        #expect(files.contains { $0.hasSuffix("/AgentServe/ServeServer.swift") }, "the page's server is checked too")
        // where the command makes its store and hands it to the engine
        let composition = ["let store = try SQLiteAgentStore(path: path)",
                           "SQLiteAgentStore.defaultPath(tool: Self.tool, environment: environment)"]
        var composed = 0
        for f in files {
            var found = try Self.lines(of: f, matching: behind)
            if f.hasSuffix("/agent-sessions/Context.swift") {
                let before = found.count
                found.removeAll { line in composition.contains { line.contains($0) } }
                composed += before - found.count
            }
            #expect(found.isEmpty, "\(f) goes around the engine's door: \(found)")
        }
        #expect(composed == 2, "the command makes the engine's store in Context.swift")
        // the door uses them; a sign the check looks at the right names
        let door = Self.swiftFiles(under: "Sources/AgentSessions/Door")
        #expect(door.contains { !((try? Self.lines(of: $0, matching: behind)) ?? []).isEmpty })
    }

    /// The layout in Docs/Architecture.md names every module under Sources/ (a line of its
    /// diagram) and every folder of the engine.
    @Test func theArchitectureDocNamesEverySourceFolder() throws {
        let doc = try String(contentsOfFile: TestServer.packageRoot + "/Docs/Architecture.md", encoding: .utf8)
        let diagram = doc.components(separatedBy: "```")[1]
        let starts = Set(diagram.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) })
        let fm = FileManager.default
        func folders(_ dir: String) throws -> [String] {
            try fm.contentsOfDirectory(atPath: TestServer.packageRoot + "/" + dir).filter {
                var isDir: ObjCBool = false
                return fm.fileExists(atPath: TestServer.packageRoot + "/\(dir)/\($0)", isDirectory: &isDir) && isDir.boolValue
            }
        }
        let modules = try folders("Sources")
        #expect(modules.count >= 11, "\(modules)")
        for m in modules { #expect(starts.contains(m), "the diagram of Docs/Architecture.md has no line for \(m)") }
        let parts = try folders("Sources/AgentSessions")
        #expect(parts.count >= 5, "\(parts)")
        for p in parts { #expect(doc.contains("`\(p)/`"), "Docs/Architecture.md does not describe Sources/AgentSessions/\(p)/") }
        // the engine's files are in its folders, none left at the top
        let loose = try fm.contentsOfDirectory(atPath: TestServer.packageRoot + "/Sources/AgentSessions").filter { $0.hasSuffix(".swift") }
        #expect(loose.isEmpty, "\(loose)")
    }

    /// The door takes tasks, chats, hosts and projects by their typed ids or through their
    /// handles, never as strings: no public function of the engine has a `String` id.
    @Test func theDoorTakesNoStringIDs() throws {
        let stringID = try NSRegularExpression(
            pattern: #"public (func|init|subscript)[^{]*\b(task|conversation|chat|host|project)IDs?\s*:\s*(String|\[String\]|Set<String>)"#)
        let sample = "public func stop(taskID: String) async throws(AgentError) {"
        #expect(stringID.firstMatch(in: sample, range: NSRange(sample.startIndex..., in: sample)) != nil)
        let files = Self.swiftFiles(under: "Sources/AgentSessions")
        #expect(files.count >= 40, "\(files)")
        for f in files {
            // whole signatures, over several lines too
            let text = try String(contentsOfFile: f, encoding: .utf8)
            let found = stringID.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
                Range($0.range, in: text).map { String(text[$0]) }
            }
            #expect(found.isEmpty, "\(f) takes an id as a string: \(found)")
        }
    }

    /// The engine dispatches providers by what they are (`sessionTracking`, the registry),
    /// never by comparing their ids (`if provider.id == "claude"`): a new provider needs a
    /// registry entry, not a branch.
    @Test func theEngineComparesNoProviderID() throws {
        let comparison = try NSRegularExpression(pattern: #"(\.id|providerID)\s*[!=]=\s*""#)
        let files = Self.swiftFiles(under: "Sources/AgentSessions").filter {
            $0.contains("/Door/") || $0.contains("/Landing/") || $0.contains("/Connections/")
        }
        #expect(files.count >= 4, "\(files)")
        for f in files {
            let found = try Self.lines(of: f, matching: comparison)
            #expect(found.isEmpty, "\(f) compares a provider id: \(found)")
        }
        #expect(try Self.lines(of: #filePath, matching: comparison).count >= 1, "the pattern finds the example above")
    }

    @Test func onlySSHCoreIncludesLibsshHeaders() throws {
        let root = TestServer.packageRoot + "/Sources"
        let e = FileManager.default.enumerator(atPath: root)!
        for case let rel as String in e where rel.hasSuffix(".c") || rel.hasSuffix(".h") {
            let text = try String(contentsOfFile: root + "/" + rel, encoding: .utf8)
            if text.contains("#include <libssh/") {
                #expect(rel.hasPrefix("SSHCore/") || rel.hasPrefix("CLibSSH/"), "\(rel) includes libssh")
                #expect(!rel.hasPrefix("SSHCore/include/"), "the public header must not include libssh")
            }
        }
    }

    /// The core's names say public or internal: `sshcore__…` is internal, declared in an
    /// internal header under the name of the file that defines it (`/* sshcore_auth.c …`),
    /// or defined there as a `static inline` helper; the public headers declare no
    /// `sshcore__` name.
    @Test func theCoresInternalCallsAreDeclaredUnderTheFileThatDefinesThem() throws {
        let core = TestServer.packageRoot + "/Sources/SSHCore"
        let files = try FileManager.default.contentsOfDirectory(atPath: core).filter { $0.hasSuffix(".c") }
        var definedIn: [String: String] = [:]
        let definition = try NSRegularExpression(pattern: #"\b(sshcore__[a-z0-9_]+)\(([^;{}()]|\([^;{}()]*\))*\)\s*\{"#)
        // an object's apply made by SSHCORE_APPLIER (sshcore_internal.h) from its machine's list
        let applier = try NSRegularExpression(pattern: #"SSHCORE_APPLIER\((sshcore__[a-z0-9_]+),"#)
        for f in files {
            let text = try String(contentsOfFile: core + "/" + f, encoding: .utf8)
            for pattern in [definition, applier] {
                for m in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                    definedIn[String(text[Range(m.range(at: 1), in: text)!])] = f
                }
            }
        }
        #expect(definedIn.count > 80, "the definitions were found: \(definedIn.count)")
        var declared = 0
        for header in ["sshcore_internal.h", "sshcore_session.h"] {
            var section: String?
            let text = try String(contentsOfFile: core + "/" + header, encoding: .utf8)
            let inline = try NSRegularExpression(pattern: #"static inline\s+\w+\s*\**\s*(sshcore__[a-z0-9_]+)\("#)
            let helpers = Set(inline.matches(in: text, range: NSRange(text.startIndex..., in: text))
                .map { String(text[Range($0.range(at: 1), in: text)!]) })
            for line in text.split(separator: "\n") {
                if line.hasPrefix("/* sshcore_"), let file = line.dropFirst(3).split(separator: " ").first,
                   file.hasSuffix(".c") || file.hasSuffix(".c:") {
                    section = String(file.hasSuffix(":") ? file.dropLast() : file)
                }
                for name in line.matches(of: /\b(sshcore__[a-z0-9_]+)\s*\(/).map({ String($0.output.1) })
                where !helpers.contains(name) {
                    declared += 1
                    #expect(section != nil && definedIn[name] == section,
                            "\(header): \(name) is under \(section ?? "no file"), defined in \(definedIn[name] ?? "no file")")
                }
            }
        }
        #expect(declared > 80)
        let include = core + "/include"
        for h in try FileManager.default.contentsOfDirectory(atPath: include) {
            #expect(!(try String(contentsOfFile: include + "/" + h, encoding: .utf8)).contains("sshcore__"), "\(h) declares an internal name")
        }
    }

    // MARK: The C core's two groups

    /// The C core's files in their groups (Docs/Architecture.md). The connection's files own the
    /// session, its socket and its worker; the channel's files are the ops on it. The op
    /// interface (`sshcore_op.c`, and the vtables the worker calls through) is between them, with
    /// the files both use.
    static let connectionGroup: Set<String> = [
        "sshcore_conn.c", "sshcore_conn_fail.c", "sshcore_connect.c", "sshcore_auth.c",
        "sshcore_auth_key.c", "sshcore_cert_agent.c", "sshcore_keys.c", "sshcore_keepalive.c",
        "sshcore_orphan.c", "sshcore_registry.c", "sshcore_teardown.c", "sshcore_worker.c",
        "sshcore_socket.c", "sshcore_proxy.c",
    ]
    static let channelGroup: Set<String> = [
        "sshcore_session.c", "sshcore_session_new.c", "sshcore_session_setup.c",
        "sshcore_session_input.c", "sshcore_session_output.c", "sshcore_session_close.c",
        "sshcore_exec.c", "sshcore_bridge.c", "sshcore_terminal.c", "sshcore_rforward.c",
    ]
    static let between: Set<String> = ["sshcore_op.c", "sshcore_error.c", "sshcore_fsm.c"]

    /// C source without comments, strings and character literals (newlines kept).
    static func cCode(_ text: String) -> String {
        var out = ""
        var i = text.startIndex
        func at(_ s: String) -> Bool { text[i...].hasPrefix(s) }
        while i < text.endIndex {
            if at("/*") {
                let end = text[text.index(i, offsetBy: 2)...].range(of: "*/")?.upperBound ?? text.endIndex
                out += String(repeating: "\n", count: text[i..<end].filter { $0 == "\n" }.count)
                i = end
            } else if at("//") {
                i = text[i...].firstIndex(of: "\n") ?? text.endIndex
            } else if text[i] == "\"" || text[i] == "'" {
                let quote = text[i]
                var j = text.index(after: i)
                while j < text.endIndex, text[j] != quote {
                    if text[j] == "\\" { j = text.index(after: j) }
                    if j < text.endIndex { j = text.index(after: j) }
                }
                out += "\"\""
                i = j < text.endIndex ? text.index(after: j) : j
            } else {
                out.append(text[i])
                i = text.index(after: i)
            }
        }
        return out
    }

    /// The functions a C file defines at file scope (a name and its parameters before a `{`).
    static func cDefinitions(_ code: String) -> Set<String> {
        let definition = try! NSRegularExpression(
            pattern: #"(?m)^(?:[A-Za-z_][\w \t\*]*[\s\*])?([A-Za-z_]\w*)\(([^;{}()]|\([^;{}()]*\))*\)\s*\{"#)
        let applier = try! NSRegularExpression(pattern: #"SSHCORE_APPLIER\((\w+),"#)
        var names = Set<String>()
        for pattern in [definition, applier] {
            for m in pattern.matches(in: code, range: NSRange(code.startIndex..., in: code)) {
                names.insert(String(code[Range(m.range(at: 1), in: code)!]))
            }
        }
        return names.subtracting(["if", "while", "for", "switch", "return", "sizeof"])
    }

    /// The names a C file calls by name (not through a pointer or a struct's member).
    static func cCalls(_ code: String) -> Set<String> {
        let call = try! NSRegularExpression(pattern: #"(?<![\w.>])([A-Za-z_]\w*)\s*\("#)
        return Set(call.matches(in: code, range: NSRange(code.startIndex..., in: code))
            .map { String(code[Range($0.range(at: 1), in: code)!]) })
    }

    /// Where a connection file calls a channel file's function: "file: name (defined in file)".
    static func crossings(connection: [String: String], channel: [String: String]) -> [String] {
        var definedIn: [String: String] = [:]
        for (file, text) in channel {
            for name in cDefinitions(cCode(text)) { definedIn[name] = file }
        }
        var found: [String] = []
        for (file, text) in connection.sorted(by: { $0.key < $1.key }) {
            let code = cCode(text)
            let own = cDefinitions(code)
            for name in cCalls(code).subtracting(own).sorted() {
                if let home = definedIn[name] { found.append("\(file): \(name) (defined in \(home))") }
            }
            if code.contains("sshcore_session.h") || text.contains("#include \"sshcore_session.h\"") {
                found.append("\(file): includes sshcore_session.h")
            }
        }
        return found
    }

    @Test func theConnectionReachesChannelsOnlyThroughTheOpInterface() throws {
        let core = TestServer.packageRoot + "/Sources/SSHCore"
        let files = try FileManager.default.contentsOfDirectory(atPath: core).filter { $0.hasSuffix(".c") }
        for f in files {
            #expect([Self.connectionGroup, Self.channelGroup, Self.between].filter { $0.contains(f) }.count == 1,
                    "\(f) is in no group or in more than one (LayeringTests and Docs/Architecture.md)")
        }
        func read(_ group: Set<String>) throws -> [String: String] {
            var texts: [String: String] = [:]
            for f in group { texts[f] = try String(contentsOfFile: core + "/" + f, encoding: .utf8) }
            return texts
        }
        let connection = try read(Self.connectionGroup)
        let channel = try read(Self.channelGroup)
        let channelDefinitions = channel.values.reduce(into: Set<String>()) { $0.formUnion(Self.cDefinitions(Self.cCode($1))) }
        #expect(channelDefinitions.contains("sshcore__session_submit") && channelDefinitions.count > 60,
                "the channel's functions were found: \(channelDefinitions.count)")
        #expect(Self.crossings(connection: connection, channel: channel) == [])
        // and it would see one: a connection file that makes an op itself
        let planted = ["sshcore_connect.c": (connection["sshcore_connect.c"] ?? "")
            + "\nstatic void f(sshcore_conn *c) { (void)sshcore__session_submit(c, 0, 0, 0, 0, 0); }\n"]
        #expect(Self.crossings(connection: planted, channel: channel)
            == ["sshcore_connect.c: sshcore__session_submit (defined in sshcore_session_new.c)"])
    }

    /// No C file of the core is over 650 lines, nor a source with the header of its own name.
    @Test func noCoreFileIsOver650Lines() throws {
        let core = TestServer.packageRoot + "/Sources/SSHCore"
        var lines: [String: Int] = [:]
        for dir in [core, core + "/include"] {
            for f in try FileManager.default.contentsOfDirectory(atPath: dir) where f.hasSuffix(".c") || f.hasSuffix(".h") {
                let text = try String(contentsOfFile: dir + "/" + f, encoding: .utf8)
                lines[dir == core ? f : "include/" + f] = text.split(separator: "\n", omittingEmptySubsequences: false).count - 1
            }
        }
        #expect(lines.count > 30)
        for (f, n) in lines.sorted(by: { $0.key < $1.key }) {
            #expect(n <= 650, "\(f) has \(n) lines")
            if f.hasSuffix(".c"), let header = lines[String(f.dropLast()) + "h"] {
                #expect(n + header <= 650, "\(f) has \(n) lines, with its header \(n + header)")
            }
        }
    }
}
