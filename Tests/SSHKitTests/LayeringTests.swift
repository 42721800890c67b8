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
        for f in files {
            let text = try String(contentsOfFile: core + "/" + f, encoding: .utf8)
            for m in definition.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                definedIn[String(text[Range(m.range(at: 1), in: text)!])] = f
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
}
