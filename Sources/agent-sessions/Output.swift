import AgentSessions
import Foundation

/// A table of left-aligned columns, as `docker ps` and `git worktree list` print them.
struct Table {
    let header: [String]
    private(set) var rows: [[String]] = []

    init(_ header: [String]) { self.header = header }

    mutating func add(_ row: [String]) { rows.append(row) }

    func lines(maxWidth: Int? = nil) -> [String] {
        var widths = header.map(\.count)
        for r in rows {
            for (i, cell) in r.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) }
        }
        return ([header] + rows).map { r in
            var line = r.enumerated().map { i, cell in
                i == r.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
            if let maxWidth, line.count > maxWidth { line = String(line.prefix(max(1, maxWidth - 1))) + "…" }
            return line
        }
    }

    func print() {
        for line in lines() { Swift.print(line) }
    }
}

/// A JSON value built by hand, so the output's shape is the documented one.
indirect enum JSONValue {
    case string(String)
    case int(Int)
    case bool(Bool)
    case date(Date)
    case null
    case array([JSONValue])
    case object([String: JSONValue])

    /// A record's id, as its text.
    static func id(_ id: some RecordIdentity) -> JSONValue { .string(id.rawValue) }

    var any: Any {
        switch self {
        case .string(let s): return s
        case .int(let i): return i
        case .bool(let b): return b
        case .date(let d): return iso8601(d)
        case .null: return NSNull()
        case .array(let a): return a.map(\.any)
        case .object(let o): return o.mapValues(\.any)
        }
    }
}

func iso8601(_ date: Date) -> String {
    let f = ISO8601DateFormatter()
    f.formatOptions = [.withInternetDateTime]
    return f.string(from: date)
}

/// Prints `value` as JSON (keys sorted, so the output is stable).
func printJSON(_ value: JSONValue) {
    let data = (try? JSONSerialization.data(withJSONObject: value.any, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]))
        ?? Data("null".utf8)
    print(String(decoding: data, as: UTF8.self))
}

/// "12s ago", "5m ago", "3h ago", "2d ago".
func ago(_ date: Date, now: Date = Date()) -> String {
    let s = max(0, Int(now.timeIntervalSince(date)))
    if s < 60 { return "\(s)s ago" }
    if s < 3600 { return "\(s / 60)m ago" }
    if s < 86400 { return "\(s / 3600)h ago" }
    return "\(s / 86400)d ago"
}

/// Removes terminal escape sequences (colours, cursor moves) from captured screen text.
func stripEscapes(_ text: String) -> String {
    var out = ""
    var it = text.unicodeScalars.makeIterator()
    while let c = it.next() {
        guard c == "\u{1B}" else {
            out.unicodeScalars.append(c)
            continue
        }
        guard let next = it.next() else { break }
        if next == "[" {
            // CSI: parameters, then one final byte in @...~
            while let p = it.next(), !(0x40...0x7E).contains(p.value) {}
        } else if next == "]" {
            // OSC: up to BEL or ST
            var prev: Unicode.Scalar = " "
            while let p = it.next(), p != "\u{07}", !(prev == "\u{1B}" && p == "\\") { prev = p }
        }
    }
    return out
}
