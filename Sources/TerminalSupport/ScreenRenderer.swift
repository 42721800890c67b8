// Sends a `ScreenBuffer` to the terminal: the first frame whole, every later one as the
// cells that changed since the one before (nothing at all when none did), inside the
// terminal's synchronized output, so that a slow link carries little and nothing flickers.

/// The bytes that bring the terminal from the last frame to the next.
///
/// It assumes the terminal is in the state `FullScreen` sets up (the alternate screen,
/// automatic wrap off), so writing the last column never scrolls.
public struct ScreenRenderer: Sendable {
    /// The colours the terminal is drawn with.
    public var colors: TerminalColors
    private var previous: ScreenBuffer?
    private var previousCursor: Cursor?

    /// Where the terminal's cursor is shown after a frame; nil hides it.
    public struct Cursor: Sendable, Hashable {
        /// 0-based row.
        public var row: Int
        /// 0-based column.
        public var column: Int
        /// The cursor at (`row`, `column`).
        public init(row: Int, column: Int) {
            self.row = row
            self.column = column
        }
    }

    /// A renderer whose first frame is drawn whole.
    public init(colors: TerminalColors) {
        self.colors = colors
    }

    /// The next frame is drawn whole (after a resize, or when something else wrote to
    /// the terminal, such as an attached program).
    public mutating func invalidate() {
        previous = nil
        previousCursor = nil
    }

    /// The bytes for `screen`, with the cursor shown at `cursor` (hidden when nil);
    /// empty when nothing changed since the last frame.
    public mutating func frame(_ screen: ScreenBuffer, cursor: Cursor? = nil) -> [UInt8] {
        var out = ""
        var pen: TerminalStyle?
        var at: (row: Int, column: Int)?
        func move(_ row: Int, _ column: Int) {
            if let a = at, a.row == row, a.column == column { return }
            out += "\u{1B}[\(row + 1);\(column + 1)H"
            at = (row, column)
        }
        func put(_ cell: ScreenCell, _ row: Int, _ column: Int) {
            move(row, column)
            if pen != cell.style {
                out += "\u{1B}[\(cell.style.sgr(colors))m"
                pen = cell.style
            }
            out.append(cell.character)
            at = (row, column + Int(max(1, cell.width)))
        }

        if let old = previous, old.columns == screen.columns, old.rows == screen.rows {
            for row in 0..<screen.rows {
                var column = 0
                while column < screen.columns {
                    let cell = screen[row, column]
                    var changed = cell != old[row, column]
                    // a wide character is drawn whole when either half changed
                    if cell.width == 2, column + 1 < screen.columns, screen[row, column + 1] != old[row, column + 1] {
                        changed = true
                    }
                    if changed && cell.width == 0 && column > 0 {
                        // its wide character was drawn (or is drawn) from the cell before
                        if screen[row, column - 1].width != 2 { put(ScreenCell(" ", style: cell.style), row, column) }
                        column += 1
                        continue
                    }
                    if changed { put(cell, row, column) }
                    column += cell.width == 2 ? 2 : 1
                }
            }
        } else {
            out += "\u{1B}[0m\u{1B}[H\u{1B}[2J"
            pen = .plain
            at = (0, 0)
            for row in 0..<screen.rows {
                // trailing blanks are already blank after the clear
                var last = screen.columns - 1
                while last >= 0, screen[row, last] == .blank { last -= 1 }
                var column = 0
                while column <= last {
                    let cell = screen[row, column]
                    if cell.width == 0 {
                        column += 1
                        continue
                    }
                    if cell != .blank || pen != .plain { put(cell, row, column) }
                    column += cell.width == 2 ? 2 : 1
                }
            }
        }
        let drew = !out.isEmpty
        if drew || cursor != previousCursor || previous == nil {
            if pen != nil && pen != .plain { out += "\u{1B}[0m" }
            if let cursor {
                out += "\u{1B}[\(cursor.row + 1);\(cursor.column + 1)H\u{1B}[?25h"
            } else if drew || previousCursor != nil || previous == nil {
                out += "\u{1B}[?25l"
            }
        }
        previous = screen
        previousCursor = cursor
        guard !out.isEmpty else { return [] }
        return Array(("\u{1B}[?2026h" + out + "\u{1B}[?2026l").utf8)
    }
}
