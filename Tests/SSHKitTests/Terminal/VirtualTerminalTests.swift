import Testing
@testable import TerminalSupport

/// The screen kept from a program's output (what the cockpit's preview draws from a tmux
/// client): each sequence such a client draws with, text and styles read back, and what
/// it only asks of a terminal read past.
@Suite("Virtual terminal", .tags(.pure))
struct VirtualTerminalTests {
    static func screen(_ columns: Int, _ rows: Int, _ bytes: String) -> VirtualTerminal {
        var t = VirtualTerminal(columns: columns, rows: rows)
        t.feed(Array(bytes.utf8))
        return t
    }

    /// The text without its styles, a row per line.
    static func plain(_ t: VirtualTerminal) -> [String] {
        ANSIText.lines(t.text()).map { $0.map(\.text).joined() }
    }

    @Test func textWrapsAtTheLastColumnOnlyWhenMoreComes() {
        // exactly the width: the cursor waits in the last column, a CR LF does not make a blank row
        var t = Self.screen(5, 3, "abcde\r\nfghijk")
        #expect(Self.plain(t) == ["abcde", "fghij", "k"])
        #expect(t.cursor == (1, 2))
        // at the bottom, a line feed scrolls
        t.feed(Array("\r\nlast".utf8))
        #expect(Self.plain(t) == ["fghij", "k", "last"])
        // trailing blanks and blank rows at the bottom are left out
        #expect(Self.plain(Self.screen(10, 4, "a   \r\n")) == ["a"])
        // without autowrap the last column is written over
        #expect(Self.plain(Self.screen(4, 2, "\u{1B}[?7labcdef")) == ["abcf"])
    }

    @Test func theCursorMovesAndErasesAsTmuxDrawsIt() {
        let t = Self.screen(10, 4, "\u{1B}[H\u{1B}[2Jhello\u{1B}[3;4Hmid\u{1B}[1;3H\u{1B}[Kx\u{1B}[2A\u{1B}[5Bz\u{1B}[4;1H\u{1B}[3Cq")
        #expect(Self.plain(t) == ["hex", "", "   mid", "   q"])
        // clearing the start of a line and columns, then the rest of the screen
        var e = Self.screen(6, 3, "abcdef\r\nghijkl\r\nmnopqr\u{1B}[2;3H\u{1B}[1K\u{1B}[3;2H\u{1B}[2X")
        #expect(Self.plain(e) == ["abcdef", "   jkl", "m  pqr"])
        e.feed(Array("\u{1B}[1;5H\u{1B}[J".utf8))
        #expect(Self.plain(e) == ["abcd"])
        // absolute column and row, the line before
        #expect(Self.plain(Self.screen(8, 3, "\u{1B}[5Ga\u{1B}[3dB\u{1B}[Fc\u{1B}[2`d")) == ["    a", "cd", "     B"])
    }

    @Test func scrollRegionsAndInsertingAndDeleting() {
        // a region of rows 2-3: a line feed at its bottom scrolls only it
        var t = Self.screen(6, 4, "top\r\nr2\r\nr3\r\nfoot\u{1B}[2;3r\u{1B}[3;1H\nnew")
        #expect(Self.plain(t) == ["top", "r3", "new", "foot"])
        // a reverse index at its top scrolls it down
        t.feed(Array("\u{1B}[2;1H\u{1B}Mup".utf8))
        #expect(Self.plain(t) == ["top", "up", "r3", "foot"])
        // inserting and deleting lines inside the region
        t.feed(Array("\u{1B}[2;1H\u{1B}[L".utf8))
        #expect(Self.plain(t) == ["top", "", "up", "foot"])
        t.feed(Array("\u{1B}[2;1H\u{1B}[2M".utf8))
        #expect(Self.plain(t) == ["top", "", "", "foot"])
        // inserting, deleting and repeating characters
        let c = Self.screen(8, 1, "abcdef\u{1B}[1;2H\u{1B}[2@XY\u{1B}[1;1H\u{1B}[P\u{1B}[1;8H")
        #expect(Self.plain(c) == ["XYbcdef"])
        #expect(Self.plain(Self.screen(8, 1, "=\u{1B}[4b")) == ["====="])
        // scrolling the whole screen up and down
        #expect(Self.plain(Self.screen(3, 3, "a\r\nb\r\nc\u{1B}[S")) == ["b", "c"])
        #expect(Self.plain(Self.screen(3, 3, "a\r\nb\r\nc\u{1B}[T")) == ["", "a", "b"])
    }

    @Test func stylesAreReadBackAsSGRFromThePlainStyleOnEachRow() {
        let t = Self.screen(20, 2, "\u{1B}[1;31mred\u{1B}[0m plain \u{1B}[38;5;208mo\u{1B}[38:2::1:2:3mr\u{1B}[48;2;4;5;6mb\r\n"
            + "\u{1B}[4:0;3mi\u{1B}[23;7mv")
        let lines = ANSIText.lines(t.text())
        #expect(lines.count == 2)
        #expect(lines[0].first == StyledText("red", TerminalStyle(foreground: .indexed(1), bold: true)))
        #expect(lines[0][1] == StyledText(" plain ", .plain))
        #expect(lines[0][2] == StyledText("o", TerminalStyle(foreground: .indexed(208))))
        #expect(lines[0][3] == StyledText("r", TerminalStyle(foreground: .rgb(1, 2, 3))))
        #expect(lines[0][4] == StyledText("b", TerminalStyle(foreground: .rgb(1, 2, 3), background: .rgb(4, 5, 6))))
        // the second row starts plain however the first ended
        #expect(lines[1].first == StyledText("i", TerminalStyle(foreground: .rgb(1, 2, 3), background: .rgb(4, 5, 6), italic: true)))
        #expect(lines[1][1] == StyledText("v", TerminalStyle(foreground: .rgb(1, 2, 3), background: .rgb(4, 5, 6), reverse: true)))
        // an erase leaves the background (bce): a coloured bar is kept, not trimmed
        let bar = ANSIText.lines(Self.screen(6, 1, "\u{1B}[44m\u{1B}[K\u{1B}[0m").text())
        #expect(bar.first?.first == StyledText("      ", TerminalStyle(background: .indexed(4))))
        // the underline's colour is read past, not taken for a colour of the text
        let u = ANSIText.lines(Self.screen(6, 1, "\u{1B}[58;5;9;1mx").text())
        #expect(u.first?.first == StyledText("x", TerminalStyle(bold: true)))
    }

    @Test func wideAndCombiningCharacters() {
        let t = Self.screen(6, 2, "日本e\u{301}")
        #expect(Self.plain(t) == ["日本e\u{301}"])
        #expect(t.cursor == (5, 0))
        // a wide character that does not fit in the last column goes to the next line
        #expect(Self.plain(Self.screen(5, 2, "abcd日")) == ["abcd", "日"])
        // writing over half of one blanks the other half
        #expect(Self.plain(Self.screen(6, 1, "日本\u{1B}[1;2Hx")) == [" x本"])
        // line drawing from the DEC set
        #expect(Self.plain(Self.screen(6, 1, "\u{1B}(0lqk\u{1B}(Bx")) == ["┌─┐x"])
    }

    @Test func theAlternateScreenComesAndGoes() {
        var t = Self.screen(12, 3, "shell$ ")
        #expect(!t.isAlternateScreen)
        t.feed(Array("\u{1B}[?1049h\u{1B}[H\u{1B}[2Jfull".utf8))
        #expect(t.isAlternateScreen)
        #expect(Self.plain(t) == ["full"])
        t.feed(Array("\u{1B}[?1049lback".utf8))
        #expect(!t.isAlternateScreen)
        #expect(Self.plain(t) == ["shell$ back"])
    }

    /// What a tmux client asks of its terminal and sets in it, and titles and the like:
    /// read past, whole, however they are split; a malformed byte is one replacement.
    @Test func queriesTitlesAndSplitSequencesAreReadPast() {
        let text = "\u{1B}[?1h\u{1B}=\u{1B}[>c\u{1B}[>q\u{1B}]0;title\u{7}\u{1B}]11;?\u{1B}\\\u{1B}P+q544e\u{1B}\\"
            + "\u{1B}[2 q\u{1B}[?2004h\u{1B}[22;0;0tA\u{1B}[1;32mB\u{1B}[m\u{1B}(Bé"
        let bytes = Array(text.utf8) + [0xFF] + Array("z".utf8)
        var whole = VirtualTerminal(columns: 20, rows: 2)
        whole.feed(bytes)
        #expect(Self.plain(whole) == ["ABé\u{FFFD}z"])
        // the same bytes one at a time
        var split = VirtualTerminal(columns: 20, rows: 2)
        for b in bytes { split.feed([b]) }
        #expect(split.text() == whole.text())
        // a reset starts over
        var r = Self.screen(5, 2, "abc\u{1B}[?1049h")
        r.feed(Array("\u{1B}c".utf8))
        #expect(!r.isAlternateScreen && r.text().isEmpty)
    }
}
