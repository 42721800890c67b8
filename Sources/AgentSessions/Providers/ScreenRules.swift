import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What the screens of agents look like in each state: rules as data, evaluated on the
/// host by the status watcher (with the host's `awk`), for the agents and the states
/// their hooks do not report.
///
/// The text form, one rule per line:
///
///     # a comment
///     [kimi]                                  the agent the rules below are for (* for every agent)
///     waiting   is requesting approval to     a question or dialog that waits for the user
///     question  requesting approval to (.*)   the line shown as the question (else the waiting line)
///     limit     Rate limit(s)? exceeded       a usage limit: waiting, with the message as the question
///     working   ^(🌑|🌒|🌓|🌔) Thinking          busy with a turn
///     idle      ^── input ──                  at its prompt
///     ignore    ^ *[0-9]+:[0-9]+ *$           a line that changes by itself (a clock, a spinner, a logo)
///     lines     15                            how many lines from the bottom the rules look at
///     title-working  ^>>                      the pane's title (OSC 0/2) says working (also
///                                             title-waiting, title-idle)
///
/// A pattern is the rest of the line after the kind and its spaces: a POSIX extended
/// regular expression (ERE, what `awk` and `grep -E` take), matched against each
/// non-empty line of the screen's plain text with trailing spaces removed. Of the last
/// `lines` non-empty lines (15 unless set), the first kind that matches decides, in the
/// order waiting, limit, working, idle; within a kind, the user's rules come before the
/// shipped ones, in file order. A screen no rule matches is working while it changes and
/// idle once it has not changed for 3 seconds, the `ignore` lines left out of the
/// comparison, so an animated logo or a clock does not read as work.
public struct AgentScreenRules: Sendable, Hashable {
    public enum Kind: String, Sendable, CaseIterable {
        case waiting, question, limit, working, idle, ignore, lines
        /// Matched against the pane's title (what the agent set with OSC 0/2), before the
        /// screen's rules of the same state.
        case titleWaiting = "title-waiting", titleWorking = "title-working", titleIdle = "title-idle"
    }

    public struct Rule: Sendable, Hashable {
        /// The provider id, or `*` for every agent.
        public var provider: String
        public var kind: Kind
        /// The ERE (for `lines`, the number).
        public var pattern: String
        /// Where the rule was written: `shipped:12`, `user:3`.
        public var id: String
    }

    public var rules: [Rule]

    public init(rules: [Rule] = []) {
        self.rules = rules
    }

    /// The rules shipped with the engine.
    public static let shipped: AgentScreenRules = {
        do {
            return try parse(shippedText, origin: "shipped")
        } catch {
            preconditionFailure("the shipped screen rules do not parse: \(error)")
        }
    }()

    /// Parses the text form; `origin` names the source in rule ids and errors.
    /// - Throws: `invalidArgument`, naming the line: a rule before any `[agent]`, an
    ///   unknown agent or kind, a missing or invalid pattern, a tab in a pattern.
    public static func parse(_ text: String, origin: String) throws(AgentError) -> AgentScreenRules {
        var rules: [Rule] = []
        var provider: String?
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let n = index + 1
            func fail(_ why: String) -> AgentError {
                AgentError(.invalidArgument, "\(origin) screen rules, line \(n): \(why)", detail: String(raw.prefix(200)))
            }
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]"), line.count > 2 else { throw fail("a section is written [agent]") }
                let id = String(line.dropFirst().dropLast()).trimmingCharacters(in: .whitespaces)
                guard id == "*" || AgentProvider.all.contains(where: { $0.id == id }) else {
                    throw fail("no agent is called '\(id)' (known agents: \(AgentProvider.all.map(\.id).joined(separator: ", ")), or *)")
                }
                provider = id
                continue
            }
            let word = line.prefix { !$0.isWhitespace }
            guard let kind = Kind(rawValue: String(word)) else {
                throw fail("'\(word)' is no kind of rule (\(Kind.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            guard let provider else { throw fail("a rule comes after an [agent] line") }
            let pattern = String(line.dropFirst(word.count)).trimmingCharacters(in: .whitespaces)
            guard !pattern.isEmpty else { throw fail("the \(kind.rawValue) rule has no pattern") }
            guard !pattern.contains("\t") else { throw fail("a pattern cannot contain a tab (write [[:blank:]])") }
            if kind == .lines {
                guard let count = Int(pattern), (1...200).contains(count) else { throw fail("lines takes a number from 1 to 200") }
            } else if let problem = POSIXRegex.problem(pattern) {
                throw fail("the pattern is not a POSIX extended regular expression: \(problem)")
            }
            rules.append(Rule(provider: provider, kind: kind, pattern: pattern, id: "\(origin):\(n)"))
        }
        return AgentScreenRules(rules: rules)
    }

    /// These rules first, then `other`'s.
    public func followed(by other: AgentScreenRules) -> AgentScreenRules {
        AgentScreenRules(rules: rules + other.rules)
    }

    /// The rule with this id.
    public func rule(id: String) -> Rule? { rules.first { $0.id == id } }

    /// The form the watcher reads: `provider TAB kind TAB id TAB pattern` per line.
    var hostText: String {
        rules.map { "\($0.provider)\t\($0.kind.rawValue)\t\($0.id)\t\($0.pattern)\n" }.joined()
    }
}

/// POSIX extended regular expressions (`regcomp`), the dialect of the host's `awk`: a
/// pattern accepted here is one the watcher can use.
enum POSIXRegex {
    /// Why `pattern` does not compile, or nil.
    static func problem(_ pattern: String) -> String? {
        var re = regex_t()
        let rc = regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB)
        defer { if rc == 0 { regfree(&re) } }
        guard rc != 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: 256)
        regerror(rc, &re, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
