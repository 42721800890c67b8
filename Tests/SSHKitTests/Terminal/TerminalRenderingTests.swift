import Foundation
import Testing
@testable import TerminalSupport

/// The full-screen rendering layer: widths, the screen buffer, the diffing renderer
/// (replayed on a small terminal model), key decoding and SGR text.
@Suite("Terminal rendering", .tags(.pure))
struct TerminalRenderingTests {
    @Test(arguments: [
        ("a", 1), ("中", 2), ("e\u{301}", 1), ("👍", 2), ("❤️", 2), ("🇫🇷", 2), ("Ａ", 2), ("ｱ", 1),
        ("1️⃣", 2), ("👩‍💻", 2), ("\u{1B}", 0), ("한", 2), ("─", 1), ("❯", 1),
    ])
    func widths(_ text: String, _ width: Int) {
        #expect(TerminalWidth.of(Character(text)) == width, "\(text.unicodeScalars.map { String($0.value, radix: 16) })")
    }

    @Test func truncateAndPadCountColumns() {
        #expect(TerminalWidth.truncate("hello world", to: 8) == "hello w…")
        #expect(TerminalWidth.truncate("中文字符", to: 5) == "中文…")
        #expect(TerminalWidth.truncate("short", to: 8) == "short")
        #expect(TerminalWidth.pad("中文", to: 6) == "中文  ")
        #expect(TerminalWidth.pad("abcdefgh", to: 4) == "abc…")
        #expect(TerminalWidth.truncate("abc", to: 0).isEmpty)
    }

    @Test func theBufferKeepsWideCharactersWholeAndControlsOut() {
        var s = ScreenBuffer(columns: 6, rows: 2)
        #expect(s.write("a中b", row: 0, column: 0) == 4)
        #expect(s.text(row: 0) == "a中b  ")
        #expect(s[0, 2].width == 0 && s[0, 1].width == 2)
        // overwriting half of a wide character clears the other half
        s.write("x", row: 0, column: 2)
        #expect(s.text(row: 0) == "a xb  ")
        #expect(s[0, 1] == ScreenCell(" "))
        // a wide character that does not fit leaves a space; the limit cuts
        s.write("abcde中", row: 1, column: 0)
        #expect(s.text(row: 1) == "abcde ")
        s.write("\u{1B}[2J\tz", row: 1, column: 0, limit: 4)
        #expect(s.text(row: 1) == "?[2Je ", "an escape is drawn, never sent")
        s.fill(row: 0, column: 4, width: 10, height: 10, style: TerminalStyle(reverse: true))
        #expect(s[1, 5].style.reverse && s[0, 4].character == " ")
    }

    @Test func anUnchangedFrameSendsNothingAndAChangeOnlyItself() {
        var r = ScreenRenderer(colors: .palette256)
        var s = ScreenBuffer(columns: 20, rows: 3)
        s.write("hello", row: 0, column: 0)
        s.write("world", row: 2, column: 3, style: TerminalStyle(foreground: .indexed(2)))
        let first = String(decoding: r.frame(s), as: UTF8.self)
        #expect(first.hasPrefix("\u{1B}[?2026h") && first.hasSuffix("\u{1B}[?2026l"))
        #expect(first.contains("\u{1B}[2J") && first.contains("hello") && first.contains("\u{1B}[0;32mworld"))
        #expect(r.frame(s).isEmpty, "nothing changed: no byte")
        s.write("J", row: 0, column: 0)
        let second = String(decoding: r.frame(s), as: UTF8.self)
        #expect(second == "\u{1B}[?2026h\u{1B}[1;1H\u{1B}[0mJ\u{1B}[?25l\u{1B}[?2026l")
        #expect(r.frame(s).isEmpty)
        // a cursor shown, then the same: nothing; moved: only the move
        #expect(!r.frame(s, cursor: .init(row: 1, column: 2)).isEmpty)
        #expect(r.frame(s, cursor: .init(row: 1, column: 2)).isEmpty)
        #expect(String(decoding: r.frame(s, cursor: .init(row: 1, column: 3)), as: UTF8.self)
            == "\u{1B}[?2026h\u{1B}[2;4H\u{1B}[?25h\u{1B}[?2026l")
        r.invalidate()
        #expect(String(decoding: r.frame(s), as: UTF8.self).contains("\u{1B}[2J"), "drawn whole after invalidate")
    }

    @Test func noColorKeepsAttributesAndThePaletteTakesRGB() {
        var s = ScreenBuffer(columns: 10, rows: 1)
        s.write("sel", row: 0, column: 0, style: TerminalStyle(foreground: .rgb(255, 0, 0), bold: true, reverse: true))
        var none = ScreenRenderer(colors: .none)
        let plain = String(decoding: none.frame(s), as: UTF8.self)
        #expect(plain.contains("\u{1B}[0;1;7msel") && !plain.contains("38;"))
        var palette = ScreenRenderer(colors: .palette256)
        #expect(String(decoding: palette.frame(s), as: UTF8.self).contains("\u{1B}[0;1;7;38;5;196msel"))
        var rgb = ScreenRenderer(colors: .trueColor)
        #expect(String(decoding: rgb.frame(s), as: UTF8.self).contains("38;2;255;0;0"))
        #expect(TerminalColor.rgb(128, 128, 128).indexed256 == .indexed(244))
        #expect(TerminalColors.from(environment: ["NO_COLOR": "1", "COLORTERM": "truecolor"]) == .none)
        #expect(TerminalColors.from(environment: ["COLORTERM": "truecolor"]) == .trueColor)
        #expect(TerminalColors.from(environment: ["TERM": "xterm-256color"]) == .palette256)
    }

    /// Random frames, each replayed from the renderer's bytes on a model terminal: the
    /// model shows exactly the frame, every time.
    @Test func everyFrameReplaysToItsScreen() {
        var rng = SplitMix(seed: 7)
        let words = ["agent", "中文", "👍", "done", "─────", "é", "x", " ", "waiting ❯", "ｱｲ"]
        let styles = [TerminalStyle.plain, TerminalStyle(foreground: .indexed(1)), TerminalStyle(bold: true, reverse: true),
                      TerminalStyle(background: .indexed(236)), TerminalStyle(foreground: .rgb(10, 200, 30), underline: true)]
        for (columns, rows) in [(30, 8), (61, 20), (7, 3)] {
            var renderer = ScreenRenderer(colors: .trueColor)
            var model = ModelTerminal(columns: columns, rows: rows)
            var screen = ScreenBuffer(columns: columns, rows: rows)
            for round in 0..<200 {
                for _ in 0..<Int(rng.next() % 6) {
                    let word = words[Int(rng.next() % UInt64(words.count))]
                    let style = styles[Int(rng.next() % UInt64(styles.count))]
                    screen.write(word, row: Int(rng.next() % UInt64(rows)), column: Int(rng.next() % UInt64(columns)), style: style)
                }
                if round % 37 == 0 { screen.fill(row: 1, column: 2, width: 5, height: 2, style: styles[3]) }
                model.apply(renderer.frame(screen))
                #expect(model.cells == screen.cells.map { $0.width == 0 ? nil : ModelTerminal.Cell(character: $0.character, style: $0.style) },
                        "\(columns)x\(rows) round \(round):\n\(model.text)\n---\n\(screen.text)")
                if model.cells != screen.cells.map({ $0.width == 0 ? nil : ModelTerminal.Cell(character: $0.character, style: $0.style) }) { return }
            }
        }
    }

    @Test(arguments: [
        ([0x61], [KeyPress(.character("a"))]),
        ([0x41], [KeyPress(.character("A"))]),
        ([0x0D], [KeyPress(.enter)]),
        ([0x09], [KeyPress(.tab)]),
        ([0x1B, 0x5B, 0x5A], [KeyPress(.tab, .shift)]),
        ([0x7F], [KeyPress(.backspace)]),
        ([0x03], [KeyPress(.character("c"), .control)]),
        ([0x11], [KeyPress(.character("q"), .control)]),
        ([0x1B, 0x5B, 0x41], [KeyPress(.up)]),
        ([0x1B, 0x4F, 0x42], [KeyPress(.down)]),
        ([0x1B, 0x5B, 0x31, 0x3B, 0x35, 0x43], [KeyPress(.right, .control)]),
        ([0x1B, 0x5B, 0x31, 0x3B, 0x32, 0x41], [KeyPress(.up, .shift)]),
        ([0x1B, 0x5B, 0x35, 0x7E], [KeyPress(.pageUp)]),
        ([0x1B, 0x5B, 0x33, 0x7E], [KeyPress(.delete)]),
        ([0x1B, 0x5B, 0x31, 0x35, 0x7E], [KeyPress(.function(5))]),
        ([0x1B, 0x4F, 0x50], [KeyPress(.function(1))]),
        ([0x1B, 0x78], [KeyPress(.character("x"), .alt)]),
        ([0xE4, 0xB8, 0xAD, 0x61], [KeyPress(.character("中")), KeyPress(.character("a"))]),
        ([0x1B, 0x5B, 0x3C, 0x36, 0x34, 0x3B, 0x31, 0x30, 0x3B, 0x35, 0x4D], [KeyPress(.mouse(MouseEvent(kind: .wheelUp, row: 4, column: 9)))]),
        ([0x1B, 0x5B, 0x3C, 0x30, 0x3B, 0x33, 0x3B, 0x32, 0x6D], [KeyPress(.mouse(MouseEvent(kind: .release(button: 0), row: 1, column: 2)))]),
        ([0x1B, 0x5B, 0x39, 0x37, 0x3B, 0x35, 0x75], [KeyPress(.character("a"), .control)]),
        ([0x1B, 0x5B, 0x49], []),
    ] as [([UInt8], [KeyPress])])
    func keys(_ bytes: [UInt8], _ presses: [KeyPress]) {
        var d = KeyDecoder()
        #expect(d.decode(bytes) == presses)
        #expect(!d.hasPending)
        // byte by byte, the same presses
        var one = KeyDecoder()
        var got: [KeyPress] = []
        for b in bytes { got += one.decode([b]) }
        if bytes.count == 2 && bytes[0] == 0x1B { got += one.flush() }
        #expect(got == presses)
    }

    @Test func escapeWaitsForWhatFollowsAndPasteIsOnePress() {
        var d = KeyDecoder()
        #expect(d.decode([0x1B]).isEmpty && d.hasPending)
        #expect(d.flush() == [KeyPress(.escape)])
        #expect(d.decode([0x1B, 0x5B]).isEmpty)
        #expect(d.decode([0x42]) == [KeyPress(.down)])
        let paste = Array("\u{1B}[200~line 1\nq\u{1B}[A".utf8)
        #expect(d.decode(paste).isEmpty, "a paste waits for its end")
        #expect(d.decode(Array("\u{1B}[201~j".utf8)) == [KeyPress(.paste("line 1\nq\u{1B}[A")), KeyPress(.character("j"))])
        #expect(d.decode([0xE4, 0xB8]).isEmpty)
        #expect(d.decode([0xAD]) == [KeyPress(.character("中"))])
        #expect(KeyPress(.character("c"), .control).description == "ctrl+c")
        #expect(KeyPress(.tab, .shift).description == "shift+tab")
    }

    @Test func sgrTextKeepsColoursAndDropsEveryOtherSequence() {
        let text = "\u{1B}[1;31mred\u{1B}[0m plain\u{1B}]0;title\u{07}\u{1B}[38;5;208mo\u{1B}[38;2;1;2;3mr\u{1B}[2K\n\tx\u{1B}[7m"
        let lines = ANSIText.lines(text)
        #expect(lines.count == 2)
        #expect(lines[0] == [
            StyledText("red", TerminalStyle(foreground: .indexed(1), bold: true)), StyledText(" plain"),
            StyledText("o", TerminalStyle(foreground: .indexed(208))), StyledText("r", TerminalStyle(foreground: .rgb(1, 2, 3))),
        ])
        #expect(lines[1] == [StyledText("        x", TerminalStyle(foreground: .rgb(1, 2, 3)))], "the style carries to the next line")
        #expect(ANSIText.lines("a\n").count == 1)
        #expect(ANSIText.apply("39;49;22", to: TerminalStyle(foreground: .indexed(1), background: .indexed(2), bold: true)) == .plain)
        #expect(ANSIText.apply("94;103", to: .plain) == TerminalStyle(foreground: .indexed(12), background: .indexed(11)))
    }
}

/// A small terminal that applies what `ScreenRenderer` sends: cursor moves, clears, SGR,
/// printable characters (wide ones over two cells), with automatic wrap off.
struct ModelTerminal {
    struct Cell: Equatable {
        var character: Character
        var style: TerminalStyle
    }

    let columns: Int
    let rows: Int
    /// nil: the right half of a wide character.
    var cells: [Cell?]
    var row = 0, column = 0
    var pen = TerminalStyle.plain

    init(columns: Int, rows: Int) {
        self.columns = columns
        self.rows = rows
        cells = Array(repeating: Cell(character: " ", style: .plain), count: columns * rows)
    }

    var text: String {
        (0..<rows).map { r in String((0..<columns).compactMap { cells[r * columns + $0]?.character }) }.joined(separator: "\n")
    }

    mutating func apply(_ bytes: [UInt8]) {
        let s = Array(String(decoding: bytes, as: UTF8.self))
        var i = 0
        while i < s.count {
            if s[i] == "\u{1B}" {
                #expect(i + 1 < s.count && s[i + 1] == "[", "only CSI sequences")
                var j = i + 2
                var params = ""
                while j < s.count, !s[j].isLetter { params.append(s[j]); j += 1 }
                switch s[j] {
                case "H":
                    let p = params.split(separator: ";").map { Int($0) ?? 1 }
                    row = (p.first ?? 1) - 1
                    column = (p.count > 1 ? p[1] : 1) - 1
                case "J":
                    cells = Array(repeating: Cell(character: " ", style: .plain), count: columns * rows)
                case "m":
                    pen = ANSIText.apply(params, to: .plain)
                case "h", "l":
                    break
                default:
                    Issue.record("unexpected sequence \(params)\(s[j])")
                }
                i = j + 1
                continue
            }
            let w = TerminalWidth.of(s[i])
            #expect(row < rows && column + w <= columns, "a character drawn past the edge")
            if row < rows && column < columns {
                // as terminals do: half of a wide character overwritten blanks the other half
                let at = row * columns + column
                if cells[at] == nil, column > 0 { cells[at - 1]?.character = " " }
                if w == 1, column + 1 < columns, cells[at + 1] == nil { cells[at + 1] = Cell(character: " ", style: cells[at]?.style ?? pen) }
                cells[at] = Cell(character: s[i], style: pen)
                if w == 2 && column + 1 < columns { cells[row * columns + column + 1] = nil }
            }
            column += w
            i += 1
        }
    }
}

/// A small deterministic generator for the replay test.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
