import AgentSessions
import Foundation
import SSHKit
import ServerTransport
import Testing

/// The public API speaks one vocabulary (Docs/Architecture.md, "One vocabulary"): start,
/// open, write, finish input, signal, cancel, wait for the end, close.
@Suite("Vocabulary", .tags(.pure))
struct VocabularyTests {
    /// Verbs that end or wait for things under another name than the table's. A public
    /// function spelled so in SSHKit or ServerTransport fails this test.
    static let synonyms: Set<String> = [
        "terminate", "hangUp", "stop", "kill", "shutdown", "shutDown", "sendEOF", "finishInput", "wait", "closed",
        "waitUntilStopped", "waitUntilFinished", "waitForExit", "end", "abort", "dispose", "teardown", "detach",
    ]
    /// The agent engine has one verb more: `stop` ends an agent's process and keeps what it
    /// made, to be resumed (the table's row "stop").
    static let agentSynonyms = synonyms.subtracting(["stop"])

    static func publicFunctionNames(_ file: String) -> [String] {
        let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
        let pattern = try! NSRegularExpression(pattern: "public\\s+(?:static\\s+|mutating\\s+|nonisolated\\s+)*func\\s+(\\w+)")
        return pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)).map {
            String(text[Range($0.range(at: 1), in: text)!])
        }
    }

    /// The public functions of `files` that are spelled as one of `synonyms`, and how
    /// many public functions there are.
    static func synonymsUsed(in files: [String], _ synonyms: Set<String>) -> (used: [String], seen: Int) {
        var used: [String] = [], seen = 0
        for f in files {
            for name in publicFunctionNames(f) {
                seen += 1
                if synonyms.contains(name) { used.append("\(f): public func \(name)") }
            }
        }
        return (used, seen)
    }

    @Test func noPublicFunctionUsesASynonymOfTheTablesVerbs() {
        let files = LayeringTests.swiftFiles(under: "Sources/SSHKit") + LayeringTests.swiftFiles(under: "Sources/ServerTransport")
        #expect(files.count > 40)
        let library = Self.synonymsUsed(in: files, Self.synonyms)
        #expect(library.used.isEmpty, "use the verbs of Docs/Architecture.md: \(library.used)")
        #expect(library.seen > 150)
        let agentFiles = LayeringTests.swiftFiles(under: "Sources/AgentSessions")
        #expect(agentFiles.count > 30)
        let agents = Self.synonymsUsed(in: agentFiles, Self.agentSynonyms)
        #expect(agents.used.isEmpty, "use the verbs of Docs/Architecture.md: \(agents.used)")
        #expect(agents.seen > 100)
    }

    /// The table's spellings, type by type: this does not compile when one is renamed,
    /// and fails when the table in the docs no longer names the type and the verb.
    @Test func theTablesSpellingsExistAndTheDocsTableNamesThem() throws {
        let cancels: [(String, Any)] = [
            ("SSHCommand.cancel", SSHCommand.cancel), ("SSHShell.cancel", SSHShell.cancel),
            ("SSHTunnel.cancel", SSHTunnel.cancel), ("TransportProcess.cancel", TransportProcess.cancel),
            ("TransportTerminal.cancel", TransportTerminal.cancel),
            ("SSHJoinedTerminal.cancel", SSHJoinedTerminal.cancel),
            ("TransportJoinedTerminal.cancel", TransportJoinedTerminal.cancel),
            ("AgentJoinedTerminal.cancel", AgentJoinedTerminal.cancel),
        ]
        let waits: [(String, Any)] = [
            ("SSHCommand.exitStatus", SSHCommand.exitStatus), ("SSHShell.exitStatus", SSHShell.exitStatus),
            ("SSHTunnel.waitUntilClosed", SSHTunnel.waitUntilClosed),
            ("SSHPortForward.waitUntilClosed", SSHPortForward.waitUntilClosed),
            ("SSHRemoteForward.waitUntilClosed", SSHRemoteForward.waitUntilClosed),
            ("TransportProcess.exitStatus", TransportProcess.exitStatus),
            ("TransportTerminal.exitStatus", TransportTerminal.exitStatus),
            ("SSHJoinedTerminal.waitUntilEnded", SSHJoinedTerminal.waitUntilEnded),
            ("TransportJoinedTerminal.waitUntilEnded", TransportJoinedTerminal.waitUntilEnded),
            ("AgentJoinedTerminal.waitUntilEnded", AgentJoinedTerminal.waitUntilEnded),
        ]
        let closes: [(String, Any)] = [
            ("SSHConnection.close", SSHConnection.close), ("SFTPClient.close", SFTPClient.close),
            ("SFTPFile.close", SFTPFile.close), ("SSHPortForward.close", SSHPortForward.close),
            ("SSHRemoteForward.close", SSHRemoteForward.close), ("SSHTransport.close", SSHTransport.close),
            ("OpenSSHTransport.close", OpenSSHTransport.close), ("AgentOrchestrator.close", AgentOrchestrator.close),
        ]
        let agents: [(String, Any)] = [
            ("AgentTerminal.input", \AgentTerminal.input), ("AgentTerminalInput.write", AgentTerminalInput.write),
            ("AgentTerminal.cancel", AgentTerminal.cancel),
            ("ChatHandle.stop", ChatHandle.stop), ("TaskHandle.stop", TaskHandle.stop),
            ("AgentHost.stop", AgentHost.stop), ("AgentTmuxServer.stop", AgentTmuxServer.stop),
        ]
        let inputs: [(String, Any)] = [
            ("SSHCommand.input", \SSHCommand.input), ("SSHShell.input", \SSHShell.input),
            ("SSHTunnel.input", \SSHTunnel.input), ("TransportProcess.input", \TransportProcess.input),
            ("TransportTerminal.input", \TransportTerminal.input),
            ("SSHByteWriter.finish", SSHByteWriter.finish), ("TransportInput.finish", TransportInput.finish),
        ]
        let doc = try String(contentsOfFile: TestServer.packageRoot + "/Docs/Architecture.md", encoding: .utf8)
        let start = try #require(doc.range(of: "## One vocabulary"))
        let table = doc[start.upperBound...].prefix { _ in true }.split(separator: "\n## ", maxSplits: 1).first ?? ""
        let rows = table.split(separator: "\n").filter { $0.hasPrefix("|") }
        for (name, _) in cancels + waits + closes + inputs + agents {
            let parts = name.split(separator: ".")
            let (type, verb) = (String(parts[0]), String(parts[1]))
            let row = rows.first { ($0.contains("`\(verb)") || $0.contains(".\(verb)(")) && $0.contains("`\(type)`") }
            #expect(row != nil, "the vocabulary table has no row naming `\(verb)` on `\(type)`")
        }
    }

    // MARK: error codes

    /// The code names an error type declares (`static let name = Code("name")`, or the
    /// cases of an enum `Code`).
    static func codeNames(_ file: String) -> [String] {
        let text = (try? String(contentsOfFile: TestServer.packageRoot + "/" + file, encoding: .utf8)) ?? ""
        let lets = try! NSRegularExpression(pattern: #"static let (\w+) = Code\("(\w+)"\)"#)
        var names = lets.matches(in: text, range: NSRange(text.startIndex..., in: text)).map { m -> String in
            let name = String(text[Range(m.range(at: 1), in: text)!])
            #expect(name == String(text[Range(m.range(at: 2), in: text)!]), "\(file): \(name) is spelled otherwise in its text")
            return name
        }
        if let start = text.range(of: "public enum Code") {
            // up to the enum's closing brace, alone on its line (comments may hold braces)
            let lines = text[start.upperBound...].split(separator: "\n").dropFirst()
                .prefix { $0.trimmingCharacters(in: .whitespaces) != "}" }
            names += lines.compactMap { line in
                let t = line.trimmingCharacters(in: .whitespaces)
                return t.hasPrefix("case ") ? String(t.dropFirst(5)) : nil
            }
        }
        return names
    }

    static let errorFiles = ["Sources/SSHKit/SSHError.swift", "Sources/SSHKit/Config/SSHConfigError.swift",
                             "Sources/ServerTransport/TransportError.swift", "Sources/AgentSessions/Door/Errors.swift"]

    /// The word each meaning has in every error type, and the words it must not have.
    static let codeSynonyms: [String: [String]] = [
        "timedOut": ["timeout", "timeOut", "timedout", "expired", "deadlineExceeded"],
        "hostKeyRejected": ["hostKeyMismatch", "hostKeyChanged", "hostKeyUnknown", "badHostKey"],
        "cancelled": ["canceled", "cancellation", "interrupted", "aborted"],
        "invalidArgument": ["badArgument", "invalidArguments", "invalidInput", "badInput", "illegalArgument"],
        "authenticationFailed": ["authFailed", "permissionDeniedAuth", "accessDenied", "loginFailed"],
        "hostUnreachable": ["unreachable", "connectionFailed", "noRoute"],
    ]

    @Test func everyErrorTypeUsesOneWordForOneMeaning() {
        var all: [String: [String]] = [:]
        for f in Self.errorFiles {
            let names = Self.codeNames(f)
            #expect(names.count >= 4, "\(f): its codes were not found")
            all[f] = names
            for (word, others) in Self.codeSynonyms {
                for name in names where others.contains(name) {
                    Issue.record("\(f): the code \(name) means what the others call \(word)")
                }
            }
        }
        // cancellation is a code wherever a call can be cancelled
        for f in Self.errorFiles where !f.hasSuffix("SSHConfigError.swift") {
            #expect(all[f]?.contains("cancelled") == true, "\(f): no cancelled code")
        }
        #expect(all["Sources/ServerTransport/TransportError.swift"]?.contains("timedOut") == true)
        #expect(all["Sources/ServerTransport/TransportError.swift"]?.contains("hostKeyRejected") == true)
    }

    /// The wrapped error is `cause` in every error type, and a length of time a `Duration`.
    @Test func theWrappedErrorIsTheCauseAndTimeIsADuration() throws {
        let wrapped = try NSRegularExpression(pattern: #"public var (\w+): \(?(any Error|SSHError|TransportError|AgentError)"#)
        let seconds = try NSRegularExpression(pattern: #"public var (\w+): (Double|TimeInterval|Int)\?"#)
        for f in Self.errorFiles {
            let text = try String(contentsOfFile: TestServer.packageRoot + "/" + f, encoding: .utf8)
            for m in wrapped.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                let name = String(text[Range(m.range(at: 1), in: text)!])
                #expect(name == "cause", "\(f): the wrapped error is called \(name)")
            }
            for m in seconds.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                let name = String(text[Range(m.range(at: 1), in: text)!])
                #expect(!name.lowercased().contains("second") && !name.lowercased().contains("timeout"),
                        "\(f): \(name) is a number of seconds; use Duration")
            }
        }
        // the spellings, compiled: renaming one breaks this test
        let t = TransportError.timedOut(after: .milliseconds(1500))
        #expect(t.code == .timedOut && t.timeout == .milliseconds(1500))
        let a = AgentError(t, while: "running")
        #expect(a.code == .transport && (a.cause as? TransportError)?.code == .timedOut)
        let c = AgentError(TransportError(SSHError(.cancelled, "cancelled")), while: "waiting")
        #expect(c.code == .cancelled && (c.cause as? TransportError)?.isCancellation == true)
        #expect(TransportError(SSHError(.hostKeyRejected, "no")).code == .hostKeyRejected)
        #expect(TransportError(SSHError(.invalidArgument, "no")).code == .invalidArgument)
    }

    /// The cases of `public enum Context` in an error type's file.
    static func contextCases(_ text: String) -> [String] {
        guard let start = text.range(of: "public enum Context") else { return [] }
        let lines = text[start.upperBound...].split(separator: "\n").dropFirst()
            .prefix { $0.trimmingCharacters(in: .whitespaces) != "}" }
        return lines.compactMap { line in
            let t = line.trimmingCharacters(in: .whitespaces)
            guard t.hasPrefix("case ") else { return nil }
            return String(t.dropFirst(5).prefix { $0.isLetter || $0.isNumber })
        }
    }

    /// The stored public properties of a type's body (`public var name: Type` with no body).
    static func storedProperties(_ text: String, of type: String) -> [String] {
        guard let start = text.range(of: "public struct \(type)") else { return [] }
        let stored = try! NSRegularExpression(pattern: #"^    public var (\w+): [^{\n]*$"#, options: .anchorsMatchLines)
        let body = String(text[start.upperBound...])
        return stored.matches(in: body, range: NSRange(body.startIndex..., in: body)).map {
            String(body[Range($0.range(at: 1), in: body)!])
        }
    }

    /// What only one code carries is the error's `context`, in a case named after that code;
    /// the stored fields are the ones that apply to many codes.
    @Test func whatOneCodeCarriesIsItsContextNamedAfterTheCode() throws {
        let general = [
            "Sources/SSHKit/SSHError.swift": ("SSHError", ["code", "message", "libssh", "systemErrno", "host", "port",
                                                           "presentedHostKey", "context", "cause"]),
            "Sources/ServerTransport/TransportError.swift": ("TransportError", ["code", "message", "path", "context",
                                                                              "cause"]),
        ]
        for (f, (type, fields)) in general {
            let text = try String(contentsOfFile: TestServer.packageRoot + "/" + f, encoding: .utf8)
            let codes = Self.codeNames(f)
            let cases = Self.contextCases(text)
            #expect(cases.count >= 3 && cases.contains("none"), "\(f): the context's cases were not found")
            for c in cases where !["none", "ssh", "sftp"].contains(c) {
                #expect(codes.contains(c), "\(f): the context case \(c) is named after no code")
            }
            #expect(Self.storedProperties(text, of: type).sorted() == fields.sorted(),
                    "\(f): a field for one code belongs in its context")
        }
        // and the readers follow the context
        let missing = TransportError(.fileIO, "gone", path: "/x", context: .fileIO(reason: .noSuchFile, systemErrno: 2))
        #expect(missing.isNoSuchFile && missing.systemErrno == 2 && missing.exitCode == nil && missing.timeout == nil)
        let failed = TransportError(.commandFailed, "exit 3", context: .commandFailed(exitCode: 3, stderr: "no"))
        #expect(failed.exitCode == 3 && failed.stderr == "no" && failed.reason == nil)
        let sftp = TransportError(SSHError(.noSuchFile, "no such file"), path: "/y")
        #expect(sftp.context == .fileIO(reason: .noSuchFile) && sftp.path == "/y")
        let refused = SSHError(.authenticationFailed, "no", context: .authenticationFailed(offered: .publicKey))
        #expect(refused.offeredAuthMethods == .publicKey && refused.expectedHostKeys.isEmpty && refused.sftp == nil)
    }
}
