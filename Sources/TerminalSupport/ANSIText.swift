// Text with SGR colour sequences (what `tmux capture-pane -e` prints) as styled runs, so
// a program's screen can be drawn inside another one with its colours and nothing else:
// every other escape sequence and control character is dropped.

/// Parsing of text that carries SGR (`ESC [ … m`) sequences.
public enum ANSIText {
    /// The lines of `text`, each as styled runs. The style carries over from one line to
    /// the next, as on a terminal; a tab advances to the next multiple of 8 columns.
    public static func lines(_ text: String) -> [[StyledText]] {
        var lines: [[StyledText]] = []
        var runs: [StyledText] = []
        var current = ""
        var style = TerminalStyle.plain
        var column = 0
        func flush() {
            if !current.isEmpty { runs.append(StyledText(current, style)) }
            current = ""
        }
        let scalars = Array(text.unicodeScalars)
        var i = 0
        while i < scalars.count {
            let s = scalars[i]
            switch s.value {
            case 0x1B:
                i += 1
                guard i < scalars.count else { break }
                switch scalars[i] {
                case "[":
                    // CSI: parameters, intermediates, a final byte
                    var params = ""
                    i += 1
                    while i < scalars.count, (0x20...0x3F).contains(scalars[i].value) {
                        params.unicodeScalars.append(scalars[i])
                        i += 1
                    }
                    if i < scalars.count, scalars[i] == "m" {
                        flush()
                        style = apply(params, to: style)
                    }
                    i += 1
                case "]", "P", "_", "^", "X":
                    // OSC, DCS, APC, PM, SOS: up to BEL or ST
                    i += 1
                    while i < scalars.count {
                        if scalars[i].value == 0x07 { i += 1; break }
                        if scalars[i].value == 0x1B, i + 1 < scalars.count, scalars[i + 1] == "\\" { i += 2; break }
                        i += 1
                    }
                default:
                    i += 1  // a two-byte sequence
                }
                continue
            case 0x0A:
                flush()
                lines.append(runs)
                runs = []
                column = 0
            case 0x09:
                let n = 8 - column % 8
                current += String(repeating: " ", count: n)
                column += n
            case 0..<0x20, 0x7F..<0xA0:
                break
            default:
                current.unicodeScalars.append(s)
                column += TerminalWidth.of(s)
            }
            i += 1
        }
        flush()
        if !runs.isEmpty || text.last != "\n" { lines.append(runs) }
        return lines
    }

    /// `style` after the SGR parameters `params` (`1;38;5;208`, `38:2::255:0:0`), as a
    /// terminal reads them (`VirtualTerminal.apply`).
    static func apply(_ params: String, to style: TerminalStyle) -> TerminalStyle {
        VirtualTerminal.apply(params.split(separator: ";", omittingEmptySubsequences: false).map(String.init), to: style)
    }
}
