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
        "terminate", "hangUp", "stop", "kill", "shutdown", "sendEOF", "finishInput", "wait", "closed",
        "waitUntilStopped", "waitUntilFinished", "waitForExit", "end", "abort", "dispose", "teardown",
    ]

    static func publicFunctionNames(_ file: String) -> [String] {
        let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
        let pattern = try! NSRegularExpression(pattern: "public\\s+(?:static\\s+|mutating\\s+|nonisolated\\s+)*func\\s+(\\w+)")
        return pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)).map {
            String(text[Range($0.range(at: 1), in: text)!])
        }
    }

    @Test func noPublicFunctionUsesASynonymOfTheTablesVerbs() {
        let files = LayeringTests.swiftFiles(under: "Sources/SSHKit") + LayeringTests.swiftFiles(under: "Sources/ServerTransport")
        #expect(files.count > 40)
        var seen = 0
        for f in files {
            for name in Self.publicFunctionNames(f) {
                seen += 1
                #expect(!Self.synonyms.contains(name), "\(f): public func \(name) — use the verbs of Docs/Architecture.md")
            }
        }
        #expect(seen > 150)
    }

    /// The table's spellings, type by type: this does not compile when one is renamed,
    /// and fails when the table in the docs no longer names the type and the verb.
    @Test func theTablesSpellingsExistAndTheDocsTableNamesThem() throws {
        let cancels: [(String, Any)] = [
            ("SSHCommand.cancel", SSHCommand.cancel), ("SSHShell.cancel", SSHShell.cancel),
            ("SSHTunnel.cancel", SSHTunnel.cancel), ("TransportProcess.cancel", TransportProcess.cancel),
            ("TransportTerminal.cancel", TransportTerminal.cancel),
        ]
        let waits: [(String, Any)] = [
            ("SSHCommand.exitStatus", SSHCommand.exitStatus), ("SSHShell.exitStatus", SSHShell.exitStatus),
            ("SSHTunnel.waitUntilClosed", SSHTunnel.waitUntilClosed),
            ("SSHPortForward.waitUntilClosed", SSHPortForward.waitUntilClosed),
            ("SSHRemoteForward.waitUntilClosed", SSHRemoteForward.waitUntilClosed),
            ("TransportProcess.exitStatus", TransportProcess.exitStatus),
            ("TransportTerminal.exitStatus", TransportTerminal.exitStatus),
        ]
        let closes: [(String, Any)] = [
            ("SSHConnection.close", SSHConnection.close), ("SFTPClient.close", SFTPClient.close),
            ("SFTPFile.close", SFTPFile.close), ("SSHPortForward.close", SSHPortForward.close),
            ("SSHRemoteForward.close", SSHRemoteForward.close), ("SSHTransport.close", SSHTransport.close),
            ("OpenSSHTransport.close", OpenSSHTransport.close),
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
        for (name, _) in cancels + waits + closes + inputs {
            let parts = name.split(separator: ".")
            let (type, verb) = (String(parts[0]), String(parts[1]))
            let row = rows.first { ($0.contains("`\(verb)") || $0.contains(".\(verb)(")) && $0.contains("`\(type)`") }
            #expect(row != nil, "the vocabulary table has no row naming `\(verb)` on `\(type)`")
        }
    }
}
