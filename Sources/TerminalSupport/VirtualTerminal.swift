// A terminal's screen kept in memory from the bytes a program writes to it, so that a
// program drawing for a terminal (a `tmux attach` client) can be shown inside another
// one: the VT100/xterm sequences such a program draws with (cursor movement, erasing,
// scroll regions, inserting and deleting, colours and attributes, the alternate screen),
// and nothing it only asks of a terminal (queries, titles, modes of input), which are read
// past.

/// A screen of `columns` × `rows` cells written by the bytes given to `feed`, read back as
/// text with SGR colour sequences (`text`), in the form `tmux capture-pane -e -p` prints.
public struct VirtualTerminal: Sendable {
    /// One cell: what is drawn there and its style, plain values (a row is copied, moved
    /// and cleared as memory). `code` is the character's scalar; 0 in the right half of a
    /// wide character; from `clusterBase` on, a character of several scalars (a letter and
    /// its combining marks, an emoji sequence) kept in `clusters`.
    struct Cell: Sendable, Equatable {
        var code: UInt32
        var style: TerminalStyle
        static func blank(_ style: TerminalStyle = .plain) -> Cell { Cell(code: 0x20, style: style) }
        var isRightHalf: Bool { code == 0 }
        var isBlank: Bool { code == 0x20 || code == 0 }
    }
    private static let clusterBase: UInt32 = 0x110000
    /// The characters of several scalars drawn so far (cleared with the screen when full).
    private var clusters: [String] = []

    private func character(_ cell: Cell) -> String {
        if cell.code >= Self.clusterBase {
            let i = Int(cell.code - Self.clusterBase)
            return i < clusters.count ? clusters[i] : "\u{FFFD}"
        }
        return Unicode.Scalar(cell.code).map { String($0) } ?? ""
    }

    private func width(_ cell: Cell) -> Int {
        if cell.code >= Self.clusterBase { return TerminalWidth.of(Character(character(cell))) }
        return Unicode.Scalar(cell.code).map { TerminalWidth.of($0) } ?? 1
    }

    public private(set) var columns: Int
    public private(set) var rows: Int
    /// The screen drawn on now, and the other one (the main screen while the alternate
    /// one is drawn on): switching screens swaps them.
    private var screen: [[Cell]]
    private var other: [[Cell]]
    /// Whether the program switched to the alternate screen (`ESC[?1049h`), as full-screen
    /// programs and `tmux attach` do while they draw.
    public private(set) var isAlternateScreen = false
    private var x = 0, y = 0
    /// Written into the last column: the next character goes to the next line first.
    private var pendingWrap = false
    private var style = TerminalStyle.plain
    private var saved: (x: Int, y: Int, style: TerminalStyle, graphics: Bool) = (0, 0, .plain, false)
    private var top = 0, bottom: Int
    private var autowrap = true
    private var originMode = false
    private var insertMode = false
    /// G0 is the DEC line-drawing set (`ESC ( 0`).
    private var lineDrawing = false
    private var lastPrinted: String?
    private var parser = Parser.ground
    /// The bytes of the sequence being read: an escape's intermediates, a CSI's parameters.
    private var sequence: [UInt8] = []
    /// A CSI's parameters as numbers, kept from one to the next.
    private var params: [Int] = []
    /// The bytes of a UTF-8 character not yet whole.
    private var utf8: [UInt8] = []

    private enum Parser: Sendable {
        case ground
        case escape
        case csi
        /// OSC, DCS, APC, PM, SOS: read past up to BEL or ST.
        case string
        /// An ESC inside a string: `\` ends it, anything else starts a sequence.
        case stringEscape
    }

    public init(columns: Int, rows: Int) {
        self.columns = max(1, columns)
        self.rows = max(1, rows)
        screen = Self.blankScreen(self.columns, self.rows)
        other = screen
        bottom = self.rows - 1
    }

    private static func blankScreen(_ columns: Int, _ rows: Int) -> [[Cell]] {
        Array(repeating: Array(repeating: .blank(), count: columns), count: rows)
    }


    /// Where the cursor is (0-based column and row).
    public var cursor: (column: Int, row: Int) { (min(x, columns - 1), y) }

    // MARK: reading it back

    /// The screen's rows with their colours as SGR sequences, each row from the plain
    /// style and its trailing blank cells left out, rows joined by `\n`, blank rows at the
    /// bottom left out.
    public func text() -> String {
        var lines: [String] = []
        for row in screen {
            var line = ""
            var current = TerminalStyle.plain
            // trailing cells that draw nothing: a space with no background and no reverse
            var end = row.count
            while end > 0, row[end - 1].isBlank,
                  row[end - 1].style.background == .default, !row[end - 1].style.reverse, !row[end - 1].style.underline
            {
                end -= 1
            }
            for cell in row[..<end] where !cell.isRightHalf {
                if cell.style != current {
                    line += "\u{1B}[" + cell.style.sgr(.trueColor) + "m"
                    current = cell.style
                }
                if cell.code < Self.clusterBase, let scalar = Unicode.Scalar(cell.code) {
                    line.unicodeScalars.append(scalar)
                } else {
                    line += character(cell)
                }
            }
            if current != .plain { line += "\u{1B}[0m" }
            lines.append(line)
        }
        while lines.last?.isEmpty == true { lines.removeLast() }
        return lines.joined(separator: "\n")
    }

    // MARK: writing to it

    /// Draws `bytes` as a terminal would: UTF-8 text and the sequences it carries. A
    /// sequence or character split across calls is joined.
    public mutating func feed(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { buffer in
            for b in buffer { feedByte(b) }
        }
    }

    private mutating func feedByte(_ b: UInt8) {
        switch parser {
        case .ground:
            if b >= 0x20 && b < 0x7F && utf8.isEmpty {
                put(Unicode.Scalar(b))
            } else if b >= 0x80 {
                decode(b)
            } else if b >= 0x20 && b != 0x7F {
                decode(b)  // ASCII after an unfinished character: one replacement, then it
            } else if b < 0x20 {
                if !utf8.isEmpty { utf8.removeAll(keepingCapacity: true); put("\u{FFFD}") }
                control(b)
            }
        case .escape:
            if b == 0x18 || b == 0x1A { parser = .ground; return }
            if b == 0x1B { sequence.removeAll(keepingCapacity: true); return }
            if b < 0x20 { control(b); return }
            if (0x20...0x2F).contains(b) { if sequence.count < 16 { sequence.append(b) }; return }
            parser = .ground
            escape(b)
        case .csi:
            if b == 0x18 || b == 0x1A { parser = .ground; return }
            if b == 0x1B { parser = .escape; sequence.removeAll(keepingCapacity: true); return }
            if b < 0x20 { control(b); return }
            if (0x20...0x3F).contains(b) {
                if sequence.count < 256 { sequence.append(b) }
                return
            }
            parser = .ground
            csi(final: b)
        case .string:
            if b == 0x07 || b == 0x18 || b == 0x1A { parser = .ground } else if b == 0x1B { parser = .stringEscape }
        case .stringEscape:
            if b == UInt8(ascii: "\\") {
                parser = .ground
            } else {
                // ESC followed by anything but `\` ends the string and starts a sequence
                parser = .escape
                sequence.removeAll(keepingCapacity: true)
                feedByte(b)
            }
        }
    }

    /// Takes a byte of a UTF-8 character and draws the character once it is whole (a
    /// malformed one as U+FFFD).
    private mutating func decode(_ b: UInt8) {
        if !utf8.isEmpty && b & 0xC0 != 0x80 {
            // a new start before the character ended
            utf8.removeAll(keepingCapacity: true)
            put("\u{FFFD}")
        }
        if utf8.isEmpty && b < 0x80 {
            put(Unicode.Scalar(b))
            return
        }
        utf8.append(b)
        let first = utf8[0]
        let need = first >> 5 == 0b110 ? 2 : first >> 4 == 0b1110 ? 3 : first >> 3 == 0b11110 ? 4 : 0
        if need == 0 {
            utf8.removeAll(keepingCapacity: true)
            put("\u{FFFD}")
            return
        }
        guard utf8.count == need else { return }
        var value = UInt32(first) & (need == 2 ? 0x1F : need == 3 ? 0x0F : 0x07)
        for c in utf8.dropFirst() { value = value << 6 | UInt32(c & 0x3F) }
        utf8.removeAll(keepingCapacity: true)
        let least: UInt32 = need == 2 ? 0x80 : need == 3 ? 0x800 : 0x10000
        if value >= least, let scalar = Unicode.Scalar(value) { put(scalar) } else { put("\u{FFFD}") }
    }

    private mutating func put(_ scalar: Unicode.Scalar) {
        var scalar = scalar
        if lineDrawing, let mapped = Self.lineDrawingSet[scalar] { scalar = mapped }
        let width = TerminalWidth.of(scalar)
        if width == 0 {
            // a combining mark, a joiner or a variation selector: joined to the cell before
            let (cx, cy) = pendingWrap ? (columns - 1, y) : (x - 1, y)
            guard cx >= 0 else { return }
            var c = cx
            if screen[cy][c].isRightHalf, c > 0 { c -= 1 }
            var joined = character(screen[cy][c])
            joined.unicodeScalars.append(scalar)
            if clusters.count >= 65536 { clusters.removeAll() }
            clusters.append(joined)
            screen[cy][c].code = Self.clusterBase + UInt32(clusters.count - 1)
            return
        }
        if pendingWrap || (width == 2 && x == columns - 1) {
            if autowrap {
                pendingWrap = false
                x = 0
                lineFeed()
            } else {
                x = columns - width
            }
        }
        if insertMode { insertCells(width) }
        clearWide(at: x)
        if width == 2 { clearWide(at: x + 1) }
        screen[y][x] = Cell(code: scalar.value, style: style)
        if width == 2, x + 1 < columns { screen[y][x + 1] = Cell(code: 0, style: style) }
        lastPrinted = String(scalar)
        if x + width >= columns {
            x = columns - 1
            pendingWrap = autowrap
        } else {
            x += width
        }
    }

    /// Overwriting half of a wide character blanks its other half.
    private mutating func clearWide(at column: Int) {
        guard column < columns else { return }
        if screen[y][column].isRightHalf, column > 0 {
            screen[y][column - 1] = .blank(screen[y][column - 1].style)
        } else if column + 1 < columns, screen[y][column + 1].isRightHalf, width(screen[y][column]) == 2 {
            screen[y][column + 1] = .blank(screen[y][column + 1].style)
        }
    }

    // MARK: control bytes and sequences

    private mutating func control(_ b: UInt8) {
        switch b {
        case 0x08: // BS
            if pendingWrap { pendingWrap = false } else if x > 0 { x -= 1 }
        case 0x09: // HT
            pendingWrap = false
            x = min(columns - 1, (x / 8 + 1) * 8)
        case 0x0A, 0x0B, 0x0C: // LF, VT, FF
            pendingWrap = false
            lineFeed()
        case 0x0D: // CR
            pendingWrap = false
            x = 0
        case 0x0E, 0x0F: // SO, SI: G1/G0 shifts, not drawn with
            break
        case 0x1B:
            parser = .escape
            sequence.removeAll(keepingCapacity: true)
        case 0x18, 0x1A:
            parser = .ground
        default:
            break
        }
    }

    private mutating func escape(_ final: UInt8) {
        if let i = sequence.first {
            // ESC ( 0: G0 is line drawing; ESC ( B: ASCII; other sets and G1-G3 are not drawn with
            if i == UInt8(ascii: "(") { lineDrawing = final == UInt8(ascii: "0") }
            return
        }
        switch final {
        case UInt8(ascii: "["):
            parser = .csi
            sequence.removeAll(keepingCapacity: true)
        case UInt8(ascii: "]"), UInt8(ascii: "P"), UInt8(ascii: "_"), UInt8(ascii: "^"), UInt8(ascii: "X"):
            parser = .string
        case UInt8(ascii: "7"): saveCursor()
        case UInt8(ascii: "8"): restoreCursor()
        case UInt8(ascii: "D"): pendingWrap = false; lineFeed()
        case UInt8(ascii: "E"): pendingWrap = false; x = 0; lineFeed()
        case UInt8(ascii: "M"): pendingWrap = false; reverseIndex()
        case UInt8(ascii: "c"): self = VirtualTerminal(columns: columns, rows: rows)
        default: break
        }
    }

    private mutating func csi(final: UInt8) {
        var marker: UInt8?
        var body = sequence[...]
        if let first = body.first, (0x3C...0x3F).contains(first) {
            marker = first
            body = body.dropFirst()
        }
        // intermediates (` q`, `$p`, …) make sequences this screen does not draw
        if body.contains(where: { (0x20...0x2F).contains($0) }) { return }
        if marker == nil && final == UInt8(ascii: "m") {
            // colours and attributes, with the parts of a parameter (`38:2::r:g:b`)
            let text = String(decoding: body, as: UTF8.self)
            style = Self.apply(text.split(separator: ";", omittingEmptySubsequences: false).map { String($0) }, to: style)
            return
        }
        // the parameters as numbers (-1 for an empty one; the parts after a `:` left out)
        params.removeAll(keepingCapacity: true)
        var current = -1
        var inPart = false
        for c in body {
            if c == UInt8(ascii: ";") {
                params.append(current)
                current = -1
                inPart = false
            } else if c == UInt8(ascii: ":") {
                inPart = true
            } else if !inPart, (0x30...0x39).contains(c) {
                current = min(100_000, max(0, current) * 10 + Int(c - 0x30))
            }
        }
        params.append(current)
        func n(_ i: Int, _ fallback: Int = 1) -> Int {
            i < params.count && params[i] > 0 ? params[i] : fallback
        }
        if marker == UInt8(ascii: "?") {
            if final == UInt8(ascii: "h") || final == UInt8(ascii: "l") {
                for p in params { privateMode(p, on: final == UInt8(ascii: "h")) }
            }
            return
        }
        guard marker == nil else { return }
        switch final {
        case UInt8(ascii: "@"): insertCells(n(0))
        case UInt8(ascii: "A"): moveTo(x, y - n(0), clampToRegion: true)
        case UInt8(ascii: "B"), UInt8(ascii: "e"): moveTo(x, y + n(0), clampToRegion: true)
        case UInt8(ascii: "C"), UInt8(ascii: "a"): moveTo(x + n(0), y)
        case UInt8(ascii: "D"): moveTo(x - n(0), y)
        case UInt8(ascii: "E"): moveTo(0, y + n(0), clampToRegion: true)
        case UInt8(ascii: "F"): moveTo(0, y - n(0), clampToRegion: true)
        case UInt8(ascii: "G"), UInt8(ascii: "`"): moveTo(n(0) - 1, y)
        case UInt8(ascii: "H"), UInt8(ascii: "f"):
            moveTo(n(1) - 1, (originMode ? top : 0) + n(0) - 1, clampToRegion: originMode)
        case UInt8(ascii: "I"):
            pendingWrap = false
            for _ in 0..<n(0) { x = min(columns - 1, (x / 8 + 1) * 8) }
        case UInt8(ascii: "Z"):
            pendingWrap = false
            for _ in 0..<n(0) { x = max(0, (x - 1) / 8 * 8) }
        case UInt8(ascii: "J"): eraseInDisplay(n(0, 0))
        case UInt8(ascii: "K"): eraseInLine(n(0, 0))
        case UInt8(ascii: "L"): insertLines(n(0))
        case UInt8(ascii: "M"): deleteLines(n(0))
        case UInt8(ascii: "P"): deleteCells(n(0))
        case UInt8(ascii: "S"): scrollUp(n(0))
        case UInt8(ascii: "T"): scrollDown(n(0))
        case UInt8(ascii: "X"):
            pendingWrap = false
            blank(row: y, x ..< min(columns, x + n(0)))
        case UInt8(ascii: "b"):
            if let last = lastPrinted {
                for _ in 0..<min(n(0), columns * rows) { for s in last.unicodeScalars { put(s) } }
            }
        case UInt8(ascii: "d"): moveTo(x, (originMode ? top : 0) + n(0) - 1, clampToRegion: originMode)
        case UInt8(ascii: "r"):
            let t = n(0) - 1, b = min(rows, n(1, rows)) - 1
            if t < b {
                top = t
                bottom = b
                moveTo(0, originMode ? top : 0, clampToRegion: originMode)
            }
        case UInt8(ascii: "s"): saveCursor()
        case UInt8(ascii: "u"): restoreCursor()
        case UInt8(ascii: "h"), UInt8(ascii: "l"):
            if params.contains(4) { insertMode = final == UInt8(ascii: "h") }
        default: break
        }
    }

    private mutating func privateMode(_ mode: Int, on: Bool) {
        switch mode {
        case 6:
            originMode = on
            moveTo(0, on ? top : 0, clampToRegion: on)
        case 7: autowrap = on
        case 47, 1047, 1049:
            guard on != isAlternateScreen else { return }
            if on {
                if mode == 1049 { saveCursor() }
                isAlternateScreen = true
                swap(&screen, &other)
                screen = Self.blankScreen(columns, rows)
            } else {
                isAlternateScreen = false
                swap(&screen, &other)
                if mode == 1049 { restoreCursor() }
            }
        default: break
        }
    }

    // MARK: moving and scrolling

    /// The style an erase leaves: the current background, as terminals with `bce` do.
    private var erased: TerminalStyle { TerminalStyle(background: style.background) }

    private mutating func moveTo(_ column: Int, _ row: Int, clampToRegion: Bool = false) {
        pendingWrap = false
        x = min(max(0, column), columns - 1)
        if clampToRegion && y >= top && y <= bottom {
            y = min(max(top, row), bottom)
        } else {
            y = min(max(0, row), rows - 1)
        }
    }

    private mutating func lineFeed() {
        if y == bottom { scrollUp(1) } else if y < rows - 1 { y += 1 }
    }

    private mutating func reverseIndex() {
        if y == top { scrollDown(1) } else if y > 0 { y -= 1 }
    }

    private mutating func scrollUp(_ count: Int) {
        let n = min(count, bottom - top + 1)
        guard n > 0 else { return }
        let blank = Array(repeating: Cell.blank(erased), count: columns)
        screen.removeSubrange(top ..< top + n)
        screen.insert(contentsOf: Array(repeating: blank, count: n), at: bottom - n + 1)
    }

    private mutating func scrollDown(_ count: Int) {
        let n = min(count, bottom - top + 1)
        guard n > 0 else { return }
        let blank = Array(repeating: Cell.blank(erased), count: columns)
        screen.removeSubrange(bottom - n + 1 ... bottom)
        screen.insert(contentsOf: Array(repeating: blank, count: n), at: top)
    }

    private mutating func insertLines(_ count: Int) {
        guard y >= top && y <= bottom else { return }
        pendingWrap = false
        let n = min(count, bottom - y + 1)
        let blank = Array(repeating: Cell.blank(erased), count: columns)
        screen.removeSubrange(bottom - n + 1 ... bottom)
        screen.insert(contentsOf: Array(repeating: blank, count: n), at: y)
        x = 0
    }

    private mutating func deleteLines(_ count: Int) {
        guard y >= top && y <= bottom else { return }
        pendingWrap = false
        let n = min(count, bottom - y + 1)
        let blank = Array(repeating: Cell.blank(erased), count: columns)
        screen.removeSubrange(y ..< y + n)
        screen.insert(contentsOf: Array(repeating: blank, count: n), at: bottom - n + 1)
        x = 0
    }

    private mutating func insertCells(_ count: Int) {
        pendingWrap = false
        let n = min(count, columns - x)
        screen[y].removeSubrange(columns - n ..< columns)
        screen[y].insert(contentsOf: Array(repeating: Cell.blank(erased), count: n), at: x)
    }

    private mutating func deleteCells(_ count: Int) {
        pendingWrap = false
        let n = min(count, columns - x)
        screen[y].removeSubrange(x ..< x + n)
        screen[y].append(contentsOf: Array(repeating: Cell.blank(erased), count: n))
    }

    private mutating func blank(row: Int, _ range: Range<Int>) {
        let b = Cell.blank(erased)
        screen[row].withUnsafeMutableBufferPointer { cells in
            for c in range { cells[c] = b }
        }
    }

    private mutating func eraseInLine(_ mode: Int) {
        let range: Range<Int>
        switch mode {
        case 0: range = x ..< columns
        case 1: range = 0 ..< min(columns, x + 1)
        default: range = 0 ..< columns
        }
        blank(row: y, range)
        if mode != 1 { pendingWrap = false }
    }

    private mutating func eraseInDisplay(_ mode: Int) {
        switch mode {
        case 0:
            eraseInLine(0)
            for r in (y + 1) ..< rows { screen[r] = Array(repeating: .blank(erased), count: columns) }
        case 1:
            eraseInLine(1)
            for r in 0 ..< y { screen[r] = Array(repeating: .blank(erased), count: columns) }
        case 2, 3:
            for r in 0 ..< rows { screen[r] = Array(repeating: .blank(erased), count: columns) }
        default: break
        }
    }

    private mutating func saveCursor() {
        saved = (x, y, style, lineDrawing)
    }

    private mutating func restoreCursor() {
        x = min(saved.x, columns - 1)
        y = min(saved.y, rows - 1)
        style = saved.style
        lineDrawing = saved.graphics
        pendingWrap = false
    }

    // MARK: styles

    /// `style` after the SGR parameters (`1`, `38;5;208`, `38:2::255:0:0`, `4:3`).
    static func apply(_ params: [String], to style: TerminalStyle) -> TerminalStyle {
        var s = style
        let p = params.isEmpty ? [""] : params
        var i = 0
        // the parts of one parameter in the newer form (38:2::r:g:b), or the next parameters
        func color(_ parts: [Substring]) -> TerminalColor? {
            if parts.count > 1 {
                guard let kind = Int(parts[1]) else { return nil }
                if kind == 5, parts.count > 2, let v = Int(parts[2]) { return .indexed(UInt8(clamping: v)) }
                if kind == 2 {
                    // 38:2:colourspace:r:g:b, or 38:2:r:g:b
                    let rgb = parts.count >= 6 ? Array(parts[3...5]) : Array(parts.dropFirst(2).prefix(3))
                    guard rgb.count == 3 else { return nil }
                    let v = rgb.map { UInt8(clamping: Int($0) ?? 0) }
                    return .rgb(v[0], v[1], v[2])
                }
                return nil
            }
            guard i + 1 < p.count, let kind = Int(p[i + 1]) else { return nil }
            if kind == 5, i + 2 < p.count {
                defer { i += 2 }
                return .indexed(UInt8(clamping: Int(p[i + 2]) ?? 0))
            }
            if kind == 2, i + 4 < p.count {
                defer { i += 4 }
                return .rgb(UInt8(clamping: Int(p[i + 2]) ?? 0), UInt8(clamping: Int(p[i + 3]) ?? 0),
                            UInt8(clamping: Int(p[i + 4]) ?? 0))
            }
            i = p.count
            return nil
        }
        while i < p.count {
            let parts = p[i].split(separator: ":", omittingEmptySubsequences: false)
            let code = Int(parts.first ?? "") ?? 0
            switch code {
            case 0: s = .plain
            case 1: s.bold = true
            case 2: s.dim = true
            case 3: s.italic = true
            case 4: s.underline = parts.count < 2 || parts[1] != "0"
            case 7: s.reverse = true
            case 21: s.underline = true
            case 22: s.bold = false; s.dim = false
            case 23: s.italic = false
            case 24: s.underline = false
            case 27: s.reverse = false
            case 30...37: s.foreground = .indexed(UInt8(code - 30))
            case 38: if let c = color(parts) { s.foreground = c }
            case 39: s.foreground = .default
            case 40...47: s.background = .indexed(UInt8(code - 40))
            case 48: if let c = color(parts) { s.background = c }
            case 49: s.background = .default
            case 58: _ = color(parts)  // the underline's colour: read past, not drawn
            case 90...97: s.foreground = .indexed(UInt8(code - 90 + 8))
            case 100...107: s.background = .indexed(UInt8(code - 100 + 8))
            default: break
            }
            i += 1
        }
        return s
    }

    /// The DEC line-drawing set (`ESC ( 0`) as the Unicode characters it draws.
    private static let lineDrawingSet: [Unicode.Scalar: Unicode.Scalar] = [
        "`": "◆", "a": "▒", "f": "°", "g": "±", "j": "┘", "k": "┐", "l": "┌", "m": "└", "n": "┼",
        "o": "⎺", "p": "⎻", "q": "─", "r": "⎼", "s": "⎽", "t": "├", "u": "┤", "v": "┴", "w": "┬",
        "x": "│", "y": "≤", "z": "≥", "{": "π", "|": "≠", "}": "£", "~": "·",
    ]
}
