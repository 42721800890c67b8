// A screen as a grid of cells, drawn into by a program and sent to the terminal by
// `ScreenRenderer`, which writes only the cells that changed.

/// One cell of the screen: a character and its style. A wide character fills its cell
/// and the next, which holds a continuation (`width` 0).
public struct ScreenCell: Sendable, Hashable {
    /// What the cell shows (a space for a continuation).
    public var character: Character
    /// How it is drawn.
    public var style: TerminalStyle
    /// 1, or 2 for a wide character; 0 for the cell after a wide one.
    public var width: UInt8

    /// A cell showing `character`.
    public init(_ character: Character = " ", style: TerminalStyle = .plain, width: UInt8 = 1) {
        self.character = character
        self.style = style
        self.width = width
    }

    /// An empty cell.
    public static let blank = ScreenCell()
}

/// A run of text in one style.
public struct StyledText: Sendable, Hashable {
    /// The text (drawn with control characters replaced).
    public var text: String
    /// How it is drawn.
    public var style: TerminalStyle

    /// `text` in `style`.
    public init(_ text: String, _ style: TerminalStyle = .plain) {
        self.text = text
        self.style = style
    }
}

/// A grid of `rows` × `columns` cells, blank at first.
public struct ScreenBuffer: Sendable, Equatable {
    /// The width, in cells.
    public let columns: Int
    /// The height, in cells.
    public let rows: Int
    /// Row after row.
    public private(set) var cells: [ScreenCell]

    /// A blank screen of this size.
    public init(columns: Int, rows: Int) {
        self.columns = max(0, columns)
        self.rows = max(0, rows)
        cells = Array(repeating: .blank, count: self.columns * self.rows)
    }

    /// The cell at (`row`, `column`), both 0-based and inside the screen.
    public subscript(row: Int, column: Int) -> ScreenCell {
        cells[row * columns + column]
    }

    /// Writes `text` at (`row`, `column`) in `style`, no further than column `limit`
    /// (exclusive; the right edge by default), and returns the column after it. Control
    /// characters are drawn as `?` (a tab as a space), so nothing written here can move
    /// the terminal's cursor or change its modes; a wide character that does not fit
    /// before the limit leaves a space.
    @discardableResult
    public mutating func write(_ text: String, row: Int, column: Int, style: TerminalStyle = .plain,
                               limit: Int? = nil) -> Int
    {
        let end = min(limit ?? columns, columns)
        guard row >= 0, row < rows else { return column }
        var col = column
        for var c in text {
            if col >= end { break }
            if c == "\t" { c = " " }
            var w = TerminalWidth.of(c)
            if w == 0 {
                // a lone combining mark or a control character
                if c.unicodeScalars.allSatisfy({ $0.value < 0x20 || ($0.value >= 0x7F && $0.value < 0xA0) }) {
                    c = "?"
                    w = 1
                } else {
                    continue
                }
            }
            if col < 0 { col += w; continue }
            if w == 2 && col + 1 >= end {
                set(row, col, ScreenCell(" ", style: style))
                col += 1
                break
            }
            set(row, col, ScreenCell(c, style: style, width: UInt8(w)))
            if w == 2 { set(row, col + 1, ScreenCell(" ", style: style, width: 0)) }
            col += w
        }
        return col
    }

    /// Writes each run after the one before it; returns the column after the last.
    @discardableResult
    public mutating func write(_ runs: [StyledText], row: Int, column: Int, limit: Int? = nil) -> Int {
        var col = column
        for run in runs { col = write(run.text, row: row, column: col, style: run.style, limit: limit) }
        return col
    }

    /// Fills a rectangle with blanks in `style` (clipped to the screen).
    public mutating func fill(row: Int, column: Int, width: Int, height: Int, style: TerminalStyle = .plain) {
        let r0 = max(0, row), r1 = min(rows, row + height)
        let c0 = max(0, column), c1 = min(columns, column + width)
        guard r0 < r1, c0 < c1 else { return }
        for r in r0..<r1 {
            for c in c0..<c1 { set(r, c, ScreenCell(" ", style: style)) }
        }
    }

    /// The characters of row `row` (continuations left out), for tests and logs.
    public func text(row: Int) -> String {
        var s = ""
        for c in 0..<columns where self[row, c].width > 0 { s.append(self[row, c].character) }
        return s
    }

    /// Every row's characters, trailing spaces cut, joined by newlines.
    public var text: String {
        (0..<rows).map { r in
            var line = text(row: r)
            while line.last == " " { line.removeLast() }
            return line
        }.joined(separator: "\n")
    }

    /// Sets a cell; a wide character that it overwrites half of loses its other half.
    private mutating func set(_ row: Int, _ column: Int, _ cell: ScreenCell) {
        guard column >= 0, column < columns else { return }
        let i = row * columns + column
        let old = cells[i]
        if old.width == 2, column + 1 < columns, cell.width != 2 {
            cells[i + 1] = ScreenCell(" ", style: cells[i + 1].style)
        }
        if old.width == 0, cell.width != 0, column > 0, cells[i - 1].width == 2 {
            cells[i - 1] = ScreenCell(" ", style: cells[i - 1].style)
        }
        cells[i] = cell
    }
}
