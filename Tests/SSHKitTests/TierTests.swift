import Foundation
import Testing

/// The tiers hold (Support/Tiers.swift): every suite names its tier, and every test that
/// counts this process's resources sits in an `Exclusive` suite, which scripts/test.sh
/// runs alone before the rest runs in parallel.
@Suite("Test tiers", .tags(.pure))
struct TierTests {
    static let tiers = ["pure", "worker", "integration", "process"]
    static let counters = ["countFDs()", "countThreads()", "countSockets()", "socketsSettle(", "residentKiB()"]

    static var testFiles: [String] {
        LayeringTests.swiftFiles(under: "Tests/SSHKitTests").filter { !$0.contains("/Support/") }
    }

    @Test func everySuiteNamesOneTierAndEverySuiteThatRunsAloneIsMarked() throws {
        var suites = 0
        for f in Self.testFiles {
            let text = try String(contentsOfFile: f, encoding: .utf8)
            for line in text.split(separator: "\n") where line.trimmingCharacters(in: .whitespaces).hasPrefix("@Suite") {
                suites += 1
                // a bare `@Suite` names no tier at all
                #expect(line.trimmingCharacters(in: .whitespaces).hasPrefix("@Suite("), "\(f): a suite names its tier: \(line)")
                let named = Self.tiers.filter { line.contains(".tags(.\($0))") || line.contains(".tags(.\($0), .paced)") }
                if line.contains(".tags(.exclusive)") {
                    #expect(line.contains("(alone)"), "\(f): \(line)")
                } else {
                    #expect(named.count == 1, "\(f): a suite names one tier of \(Self.tiers): \(line)")
                }
            }
        }
        #expect(suites > 60)
    }

    /// scripts/test.sh finds the paced suites by a top-level `@Suite` line with `.paced`
    /// followed by `struct Name`, and runs them apart: a paced suite written any other way
    /// would run with the rest, two at once.
    @Test func everyPacedSuiteIsATopLevelStructTheTestScriptFinds() throws {
        var paced: [String] = []
        for f in Self.testFiles {
            let lines = try String(contentsOfFile: f, encoding: .utf8).components(separatedBy: "\n")
            for (i, line) in lines.enumerated()
            where line.trimmingCharacters(in: .whitespaces).hasPrefix("@Suite(") && line.contains(".paced") {
                #expect(line.hasPrefix("@Suite("), "\(f): a paced suite is a top-level one: \(line)")
                let next = i + 1 < lines.count ? lines[i + 1] : ""
                #expect(next.hasPrefix("struct "), "\(f): the line after a paced @Suite is its struct: \(next)")
                paced.append(next)
            }
        }
        #expect(paced.count >= 3, "the cockpit, the watcher and watch are paced: \(paced)")
        let script = try String(contentsOfFile: "scripts/test.sh", encoding: .utf8)
        #expect(script.contains("\\.paced") && script.contains("--skip \"/Exclusive/|"))
    }

    /// A test's body: from its `@Test` line to the first line that closes at its indentation.
    static func testBodies(_ text: String) -> [(name: String, body: String, exclusive: Bool)] {
        let lines = text.components(separatedBy: "\n")
        var out: [(String, String, Bool)] = []
        var exclusiveDepth: Int?
        for (i, line) in lines.enumerated() {
            let indent = line.prefix { $0 == " " }.count
            if line.trimmingCharacters(in: .whitespaces).hasPrefix("struct Exclusive") { exclusiveDepth = indent }
            else if let d = exclusiveDepth, line == String(repeating: " ", count: d) + "}" { exclusiveDepth = nil }
            guard line.trimmingCharacters(in: .whitespaces).hasPrefix("@Test") else { continue }
            var j = i
            while j < lines.count && !lines[j].contains("func ") { j += 1 }
            guard j < lines.count else { break }
            let name = lines[j].components(separatedBy: "func ").last?.components(separatedBy: "(").first ?? "?"
            let close = String(repeating: " ", count: indent) + "}"
            var k = j + 1
            while k < lines.count && lines[k] != close { k += 1 }
            out.append((name, lines[j..<min(k + 1, lines.count)].joined(separator: "\n"), exclusiveDepth != nil))
        }
        return out
    }

    @Test func everyTestThatCountsThisProcesssResourcesRunsAlone() throws {
        var counting = 0
        for f in Self.testFiles {
            let text = try String(contentsOfFile: f, encoding: .utf8)
            for t in Self.testBodies(text) where Self.counters.contains(where: { t.body.contains($0) }) {
                counting += 1
                #expect(t.exclusive, "\(f): \(t.name) counts this process's resources outside an Exclusive suite")
            }
        }
        #expect(counting >= 12)
    }
}
