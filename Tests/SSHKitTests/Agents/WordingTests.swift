import AgentSessions
import Foundation
import Testing

@Suite("Counts in sentences", .tags(.pure))
struct WordingTests {
    @Test func oneIsSingularAndEveryOtherCountPlural() {
        #expect(Wording.count(1, "file") == "1 file")
        #expect(Wording.count(0, "file") == "0 files")
        #expect(Wording.count(2, "uncommitted change") == "2 uncommitted changes")
        #expect(Wording.count(1, "match", plural: "matches") == "1 match")
        #expect(Wording.count(3, "match", plural: "matches") == "3 matches")
    }

    /// No message of the tool or the engine writes a count as "(s)": every count goes
    /// through `Wording.count`.
    @Test func noSourceWritesACountWithAParenthesisedS() throws {
        let pattern = try NSRegularExpression(pattern: #"(?<!function)(^|[^.\w])[a-z]+\((s|es)\)[ ,;:)+"-]"#)
        var found: [String] = []
        for dir in ["Sources/AgentSessions", "Sources/AgentCockpit", "Sources/agent-sessions"] {
            for f in LayeringTests.swiftFiles(under: dir) {
                let text = try String(contentsOfFile: f, encoding: .utf8)
                for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    let s = String(line)
                    if pattern.firstMatch(in: s, range: NSRange(s.startIndex..., in: s)) != nil { found.append("\(f):\(n + 1): \(s)") }
                }
            }
        }
        #expect(found.isEmpty, "\(found.joined(separator: "\n"))")
    }
}
