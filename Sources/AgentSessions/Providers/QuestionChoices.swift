import Foundation

/// The answers an agent's question offers, as its screen shows them, and the keys that
/// give each: a numbered menu (Claude Code's and Codex's approval dialogs: `❯ 1. Yes`,
/// `2. Yes, and don't ask again`, `3. No`) is answered by its digit; a `(y/n)` or `[Y/n]`
/// prompt by `y` or `n` and Enter. A front end shows one button per choice and sends its
/// keys; nothing here guesses an answer the screen does not offer.
public struct AgentAnswerChoice: Sendable, Hashable, Codable {
    /// What the screen says for it ("Yes", "No, and tell Claude what to do differently").
    public var label: String
    /// The keys that choose it.
    public var keys: String
    /// Whether Enter follows the keys (a `y/n` prompt reads a line; a menu takes the digit).
    public var enter: Bool

    public init(label: String, keys: String, enter: Bool) {
        self.label = label
        self.keys = keys
        self.enter = enter
    }

    /// The choices `screen` offers for `question` (the question line and the lines after
    /// it, else the screen's last lines), in the order shown; empty when it offers none
    /// this recognises.
    public static func offered(question: String?, screen: String) -> [AgentAnswerChoice] {
        let tail = asked(question, on: screen)
        var numbered: [AgentAnswerChoice] = []
        var seen = Set<String>()
        for line in tail {
            guard let (digit, label) = menuItem(line), !seen.contains(digit) else { continue }
            seen.insert(digit)
            numbered.append(AgentAnswerChoice(label: label, keys: digit, enter: false))
        }
        // a menu is 1, 2, … in order
        if numbered.count >= 2, numbered.map(\.keys) == (1...numbered.count).map(String.init) { return numbered }
        let text = ([question ?? ""] + tail.suffix(3)).joined(separator: "\n").lowercased()
        for pattern in ["(y/n)", "[y/n]", "(yes/no)", "[yes/no]"] where text.contains(pattern) {
            return [AgentAnswerChoice(label: "Yes", keys: "y", enter: true), AgentAnswerChoice(label: "No", keys: "n", enter: true)]
        }
        return []
    }

    /// What identifies the question as the screen shows it now: a hash of the question's
    /// line and every non-empty line after it. An answer given for one key is refused once
    /// the screen has moved on (the question answered, another asked), even when the same
    /// words are still in view.
    public static func questionKey(question: String?, screen: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325 // FNV-1a
        for line in asked(question, on: screen) where !line.isEmpty {
            for b in line.utf8 + [0x0A] {
                hash ^= UInt64(b)
                hash = hash &* 0x100_0000_01b3
            }
        }
        return String(hash, radix: 16)
    }

    /// Where the question is on the screen: its line and the lines after it (the last
    /// time it shows), else the screen's last 20 lines; trailing blanks taken off.
    static func asked(_ question: String?, on screen: String) -> [String] {
        let lines = screen.split(separator: "\n", omittingEmptySubsequences: false)
            .map { String($0).replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression) }
        var start = max(0, lines.count - 20)
        if let q = question?.trimmingCharacters(in: .whitespaces), !q.isEmpty,
           let i = lines.lastIndex(where: { $0.contains(q) }) {
            start = i
        }
        return Array(lines[start...])
    }

    /// `❯ 1. Yes`, `  2) No`, `│ 3. No, and tell…` → ("1", "Yes").
    static func menuItem(_ line: String) -> (String, String)? {
        var s = Substring(line)
        // box edges, the selection arrow and spaces before the number
        while let c = s.first, c == " " || c == "│" || c == "|" || c == "❯" || c == ">" || c == "›" || c == "▶" || c == "→" {
            s = s.dropFirst()
        }
        guard let digit = s.first, digit.isASCII, digit.isNumber, digit != "0" else { return nil }
        s = s.dropFirst()
        guard let mark = s.first, mark == "." || mark == ")" else { return nil }
        s = s.dropFirst()
        guard s.first == " " else { return nil }
        var label = s.trimmingCharacters(in: .whitespaces)
        while let last = label.last, last == "│" || last == "|" { label = String(label.dropLast()).trimmingCharacters(in: .whitespaces) }
        guard !label.isEmpty, label.count <= 120 else { return nil }
        return (String(digit), label)
    }
}
