#if canImport(Glibc)
import Glibc
#endif

/// How ssh_config lines split into words, and the small value grammars (ports,
/// times, flags, patterns), exactly as OpenSSH 9.2 reads them. Bytes, not Characters:
/// OpenSSH compares bytes, and a combining mark must not glue onto a quote.
enum SSHConfigSyntax {
    static let space: UInt8 = 0x20, tab: UInt8 = 0x09, cr: UInt8 = 0x0D, lf: UInt8 = 0x0A
    static let quote: UInt8 = 0x22, apostrophe: UInt8 = 0x27, backslash: UInt8 = 0x5C
    static let hash: UInt8 = 0x23, equals: UInt8 = 0x3D

    static func isWhitespace(_ b: UInt8) -> Bool { b == space || b == tab || b == cr || b == lf }

    /// A line split at its keyword (OpenSSH's `strdelim`): the keyword lowercased, and
    /// the rest with leading whitespace removed (nil when nothing follows). nil for a
    /// blank line or a comment.
    static func keyword(of line: [UInt8]) -> (keyword: String, rest: [UInt8]?)? {
        var bytes = line
        // trailing whitespace and form feeds go, down to (not including) the first byte
        while bytes.count > 1, let last = bytes.last, isWhitespace(last) || last == 0x0C { bytes.removeLast() }
        if bytes.isEmpty { return nil }
        var cursor: Int? = 0
        guard var word = strdelim(bytes, &cursor, splitEquals: true) else { return nil }
        if word.isEmpty {
            guard let next = strdelim(bytes, &cursor, splitEquals: true) else { return nil }
            word = next
        }
        if word.isEmpty || word.first == lf || word.first == hash { return nil }
        let keyword = String(decoding: lowercased(word), as: UTF8.self)
        guard var at = cursor else { return (keyword, nil) }
        while at < bytes.count, isWhitespace(bytes[at]) { at += 1 }
        return (keyword, at < bytes.count ? Array(bytes[at...]) : nil)
    }

    /// One token (OpenSSH's `strdelim_internal`): up to whitespace, `"` or (with
    /// `splitEquals`) `=`; a `"` opens a quoted run to the next `"`. Skips the
    /// whitespace after it and at most one `=`. `cursor` becomes nil at the end.
    static func strdelim(_ s: [UInt8], _ cursor: inout Int?, splitEquals: Bool) -> [UInt8]? {
        guard let start = cursor else { return nil }
        var i = start
        while i < s.count, !isWhitespace(s[i]), s[i] != quote, !(splitEquals && s[i] == equals) { i += 1 }
        if i == s.count {
            cursor = nil
            return Array(s[start...])
        }
        if s[i] == quote {
            // the token is what precedes the quote plus the quoted run
            var j = i + 1
            while j < s.count, s[j] != quote { j += 1 }
            if j == s.count { cursor = nil; return nil }
            let token = Array(s[start..<i]) + Array(s[(i + 1)..<j])
            var k = j + 1
            while k < s.count, isWhitespace(s[k]) { k += 1 }
            cursor = k
            return token
        }
        let sawEquals = splitEquals && s[i] == equals
        let token = Array(s[start..<i])
        var k = i + 1
        while k < s.count, isWhitespace(s[k]) { k += 1 }
        if splitEquals, !sawEquals, k < s.count, s[k] == equals {
            k += 1
            while k < s.count, isWhitespace(s[k]) { k += 1 }
        }
        cursor = k
        return token
    }

    /// The rest of a line as words (OpenSSH's `argv_split` with comments): space and tab
    /// separate; `"` and `'` quote and are removed; `\\`, `\"`, `\'` and (unquoted)
    /// `\ ` escape; a `#` that starts a word ends the line. nil on an unclosed quote.
    static func words(_ s: [UInt8]) -> [String]? {
        var out: [String] = []
        var i = 0
        while i < s.count {
            if s[i] == space || s[i] == tab { i += 1; continue }
            if s[i] == hash { break }
            var quoteChar: UInt8 = 0
            var arg: [UInt8] = []
            while i < s.count {
                let c = s[i]
                if c == backslash {
                    let next: UInt8? = i + 1 < s.count ? s[i + 1] : nil
                    if let next, next == apostrophe || next == quote || next == backslash || (quoteChar == 0 && next == space) {
                        i += 1
                        arg.append(next)
                    } else {
                        arg.append(c)
                    }
                } else if quoteChar == 0 && (c == space || c == tab) {
                    break
                } else if quoteChar == 0 && (c == quote || c == apostrophe) {
                    quoteChar = c
                } else if quoteChar != 0 && c == quoteChar {
                    quoteChar = 0
                } else {
                    arg.append(c)
                }
                i += 1
            }
            if i >= s.count && quoteChar != 0 { return nil }
            out.append(String(decoding: arg, as: UTF8.self))
            i += 1
        }
        return out
    }

    /// `Match`'s words: `strdelim` tokens (whitespace and `=` separate, `"…"` quotes,
    /// no escapes); a token starting with `#` ends the line.
    static func matchWords(_ s: [UInt8]) -> [String] {
        var out: [String] = []
        var cursor: Int? = 0
        while cursor != nil, let token = strdelim(s, &cursor, splitEquals: true) {
            if token.isEmpty || token.first == hash { break }
            out.append(String(decoding: token, as: UTF8.self))
        }
        return out
    }

    /// The raw rest of a line for the `*Command` keywords and ProxyJump: leading
    /// whitespace and `=` skipped, everything else kept (quotes, `#`).
    static func rawValue(_ s: [UInt8]) -> String {
        var i = 0
        while i < s.count, isWhitespace(s[i]) || s[i] == equals { i += 1 }
        return String(decoding: s[i...], as: UTF8.self)
    }

    // MARK: values

    /// A port as `a2port`: a decimal 0...65535, else a TCP service name; nil otherwise.
    static func port(_ s: String) -> Int? {
        if let n = decimal(s, max: 65535) { return n }
        guard let entry = getservbyname(s, "tcp") else { return nil }
        return Int(UInt16(bigEndian: UInt16(truncatingIfNeeded: entry.pointee.s_port)))
    }

    /// `strtonum`: optional leading whitespace and sign, decimal digits, nothing after.
    static func decimal(_ s: String, max: Int) -> Int? {
        var bytes = Substring(s).utf8.drop { $0 == space || $0 == tab || $0 == lf || $0 == cr || $0 == 0x0B || $0 == 0x0C }
        var negative = false
        if let f = bytes.first, f == 0x2B || f == 0x2D { negative = f == 0x2D; bytes = bytes.dropFirst() }
        guard !bytes.isEmpty, bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        var n = 0
        for b in bytes {
            n = n * 10 + Int(b - 0x30)
            if n > max { return nil }
        }
        if negative { return n == 0 ? 0 : nil }
        return n
    }

    /// A time as `convtime`: `<n>[smhdw]…` (`1h30m`), seconds; nil when malformed.
    static func seconds(_ s: String) -> Int? {
        let b = Array(s.utf8)
        if b.isEmpty { return nil }
        var i = 0, total = 0
        while i < b.count {
            var j = i
            while j < b.count, b[j] == space || b[j] == tab { j += 1 }
            if j < b.count, b[j] == 0x2B { j += 1 }
            let digitsStart = j
            var value = 0
            while j < b.count, b[j] >= 0x30, b[j] <= 0x39 {
                value = value * 10 + Int(b[j] - 0x30)
                if value > Int(Int32.max) { return nil }
                j += 1
            }
            if j == digitsStart { return nil }
            var multiplier = 1
            if j < b.count {
                switch b[j] {
                case 0x73, 0x53: multiplier = 1
                case 0x6D, 0x4D: multiplier = 60
                case 0x68, 0x48: multiplier = 3600
                case 0x64, 0x44: multiplier = 86400
                case 0x77, 0x57: multiplier = 604_800
                default: return nil
                }
                j += 1
            }
            if value > Int(Int32.max) / multiplier { return nil }
            total += value * multiplier
            if total > Int(Int32.max) { return nil }
            i = j
        }
        return total
    }

    /// yes/true → true, no/false → false (any case).
    static func flag(_ s: String) -> Bool? {
        switch s.lowercased() {
        case "yes", "true": true
        case "no", "false": false
        default: nil
        }
    }

    // MARK: patterns (OpenSSH's match.c)

    /// `*` is any run of bytes, `?` one byte; the whole string must match; case matters.
    static func match(_ string: String, _ pattern: String) -> Bool {
        match(Array(string.utf8), Array(pattern.utf8))
    }

    static func match(_ s: [UInt8], _ p: [UInt8]) -> Bool {
        var si = 0, pi = 0
        var star: Int? = nil, mark = 0
        while si < s.count {
            if pi < p.count && (p[pi] == 0x3F || p[pi] == s[si]) && p[pi] != 0x2A {
                si += 1; pi += 1
            } else if pi < p.count && p[pi] == 0x2A {
                star = pi; mark = si; pi += 1
            } else if let st = star {
                pi = st + 1; mark += 1; si = mark
            } else {
                return false
            }
        }
        while pi < p.count && p[pi] == 0x2A { pi += 1 }
        return pi == p.count
    }

    /// A comma-separated pattern list with `!` negation: 1 when a pattern matches and
    /// no negated one does, -1 when a negated one matches, 0 otherwise. With
    /// `lowercasePatterns` the patterns are lowercased (the string is the caller's).
    static func matchList(_ string: String, _ list: String, lowercasePatterns: Bool) -> Int {
        let s = Array(string.utf8)
        var positive = false
        for var sub in list.utf8.split(separator: 0x2C, omittingEmptySubsequences: false).map(Array.init) {
            var negated = false
            if sub.first == 0x21 { negated = true; sub.removeFirst() }
            if lowercasePatterns { sub = lowercased(sub) }
            if match(s, sub) {
                if negated { return -1 }
                positive = true
            }
        }
        return positive ? 1 : 0
    }

    /// ASCII lowercase, as OpenSSH's `lowercase()`.
    static func lowercased(_ s: String) -> String {
        String(decoding: lowercased(Array(s.utf8)), as: UTF8.self)
    }

    static func lowercased(_ b: [UInt8]) -> [UInt8] {
        b.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
    }
}
