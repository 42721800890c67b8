import Foundation
import Testing

/// Every public symbol of SSHKit and ServerTransport has a doc comment.
/// `swift package generate-documentation --warnings-as-errors` (scripts/test.sh) checks the
/// links and parameters; DocC does not report a symbol without a comment, so this does.
@Suite("API documentation", .tags(.pure))
struct DocumentationTests {
    /// Members that implement a standard protocol requirement: DocC shows the protocol's
    /// documentation for them.
    static let exempt = try! NSRegularExpression(pattern:
        "\\b(description|debugDescription|rawValue|hash\\(into|static func ==|static func <|makeAsyncIterator|next\\(|"
            + "typealias Element|typealias Failure|struct AsyncIterator|errorDescription|allCases|encode\\(to|"
            + "init\\(from|init\\(rawValue|testDescription)")
    static let publicDeclaration = try! NSRegularExpression(pattern:
        "^(@[\\w.]+(\\([^)]*\\))?\\s+)*(nonisolated\\s+|indirect\\s+)?public\\s")

    static func matches(_ re: NSRegularExpression, _ s: String) -> Bool {
        re.firstMatch(in: s, range: NSRange(s.startIndex..., in: s)) != nil
    }

    static func documented(_ lines: [String], _ i: Int) -> Bool {
        var j = i - 1
        while j >= 0, lines[j].trimmingCharacters(in: .whitespaces).hasPrefix("@") { j -= 1 }
        let previous = j >= 0 ? lines[j].trimmingCharacters(in: .whitespaces) : ""
        return previous.hasPrefix("///") || previous.hasSuffix("*/")
    }

    /// Undocumented public declarations of `file`, and cases of its public enums.
    static func undocumented(_ file: String) -> [String] {
        let lines = ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").components(separatedBy: "\n")
        var missing: [String] = []
        var depth = 0
        var enums: [Int] = [] // the depth of the bodies of the public enums we are in
        for (i, line) in lines.enumerated() {
            let text = line.trimmingCharacters(in: .whitespaces)
            let code = text.replacingOccurrences(of: "\"(\\\\.|[^\"\\\\])*\"", with: "\"\"", options: .regularExpression)
                .components(separatedBy: "//")[0]
            let isPublic = matches(publicDeclaration, text)
            if isPublic, !text.hasPrefix("public import"), !text.hasPrefix("public extension"), !matches(exempt, text),
               !documented(lines, i) {
                missing.append("\(file):\(i + 1): \(text)")
            }
            if let inner = enums.last, depth == inner, text.hasPrefix("case "), !documented(lines, i) {
                missing.append("\(file):\(i + 1): \(text)")
            }
            let opens = code.filter { $0 == "{" }.count, closes = code.filter { $0 == "}" }.count
            if isPublic, code.components(separatedBy: "{")[0].range(of: "\\benum\\s", options: .regularExpression) != nil,
               opens > closes {
                enums.append(depth + 1)
            }
            depth += opens - closes
            while let inner = enums.last, depth < inner { enums.removeLast() }
        }
        return missing
    }

    @Test func everyPublicSymbolHasADocComment() {
        let files = LayeringTests.swiftFiles(under: "Sources/SSHKit") + LayeringTests.swiftFiles(under: "Sources/ServerTransport")
        #expect(files.count > 80)
        let missing = files.flatMap(Self.undocumented)
        #expect(missing.isEmpty, "undocumented:\n\(missing.joined(separator: "\n"))")
    }

    /// The check itself: it finds a missing comment on a declaration and on an enum case.
    @Test func theCheckFindsWhatIsMissing() throws {
        let file = NSTemporaryDirectory() + "doc-check-\(getpid()).swift"
        defer { unlink(file) }
        try """
        /// Documented.
        public enum Mode {
            /// Documented.
            case a
            case b
        }
        public struct Bare {
            /// Documented.
            public var x: Int
            public var description: String { "" }
            public func undocumented() {}
        }
        """.write(toFile: file, atomically: true, encoding: .utf8)
        let missing = Self.undocumented(file).map { $0.components(separatedBy: ": ").last ?? "" }
        #expect(missing == ["case b", "public struct Bare {", "public func undocumented() {}"], "\(missing)")
    }
}
