// How many columns a character takes on a terminal: East Asian wide characters and
// emoji take two, combining marks none; the rest one.

/// Column widths of characters and strings, as terminals draw them.
public enum TerminalWidth {
    /// The columns `character` (a grapheme) takes: 0, 1 or 2. Control characters are 0.
    public static func of(_ character: Character) -> Int {
        let scalars = character.unicodeScalars
        guard let first = scalars.first else { return 0 }
        // an emoji sequence (a text-style emoji with VS16, a keycap, a ZWJ sequence,
        // a flag) is drawn as one wide emoji
        if scalars.count > 1, first.properties.isEmoji,
           scalars.contains(where: { $0.value == 0xFE0F || $0.value == 0x200D || $0.value == 0x20E3 })
        {
            return 2
        }
        return of(first)
    }

    /// The columns one scalar takes: 0, 1 or 2.
    public static func of(_ scalar: Unicode.Scalar) -> Int {
        let v = scalar.value
        if v < 0x20 || (v >= 0x7F && v < 0xA0) { return 0 }
        if v < 0x300 { return 1 }
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: break
        }
        if (0x1160...0x11FF).contains(v) { return 0 }  // Hangul vowels and finals join the syllable
        if scalar.properties.isEmojiPresentation { return 2 }
        return wide.contains { $0.contains(v) } ? 2 : 1
    }

    /// The columns `text` takes.
    public static func of(_ text: String) -> Int { text.reduce(0) { $0 + of($1) } }

    /// The longest start of `text` that fits in `columns`, with an ellipsis (`…`) as its
    /// last column when it had to be cut (and `ellipsis` is true).
    public static func truncate(_ text: String, to columns: Int, ellipsis: Bool = true) -> String {
        guard columns > 0 else { return "" }
        if of(text) <= columns { return text }
        let room = ellipsis ? columns - 1 : columns
        var out = ""
        var used = 0
        for c in text {
            let w = of(c)
            if used + w > room { break }
            out.append(c)
            used += w
        }
        return ellipsis ? out + "…" : out
    }

    /// `text` in lines of at most `columns`, broken at spaces where it can be (a word
    /// longer than a line is cut where the line ends).
    public static func wrap(_ text: String, to columns: Int) -> [String] {
        guard columns > 0 else { return [] }
        var lines: [String] = []
        var line = "", used = 0
        for word in text.split(separator: " ", omittingEmptySubsequences: false) {
            var word = String(word)
            var w = of(word)
            if used > 0 && used + 1 + w > columns {
                lines.append(line)
                (line, used) = ("", 0)
            } else if used > 0 {
                line += " "
                used += 1
            }
            // a word wider than a line: as much as fits, the rest on the next
            while w > columns - used {
                let head = truncate(word, to: columns - used, ellipsis: false)
                guard !head.isEmpty else { break }
                lines.append(line + head)
                word = String(word.dropFirst(head.count))
                w = of(word)
                (line, used) = ("", 0)
            }
            line += word
            used += w
        }
        if used > 0 || lines.isEmpty { lines.append(line) }
        return lines
    }

    /// `text` cut or padded with spaces to exactly `columns`.
    public static func pad(_ text: String, to columns: Int) -> String {
        let cut = truncate(text, to: columns)
        return cut + String(repeating: " ", count: max(0, columns - of(cut)))
    }

    /// East Asian Wide and Fullwidth ranges (Unicode 15) that are not emoji presentation.
    private static let wide: [ClosedRange<UInt32>] = [
        0x1100...0x115F, 0x2329...0x232A, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF,
        0xA000...0xA4CF, 0xA960...0xA97F, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE10...0xFE19, 0xFE30...0xFE6F,
        0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x16FE0...0x16FE4, 0x17000...0x18AFF, 0x1B000...0x1B2FF,
        0x1F200...0x1F202, 0x1F210...0x1F23B, 0x1F240...0x1F248, 0x1F250...0x1F251, 0x1F260...0x1F265,
        0x20000...0x2FFFD, 0x30000...0x3FFFD,
    ]
}
