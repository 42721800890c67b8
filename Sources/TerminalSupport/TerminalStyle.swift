// Colours and attributes of a terminal cell, and how many colours a terminal shows.

/// A colour as a terminal names it.
public enum TerminalColor: Sendable, Hashable {
    /// The terminal's own foreground or background.
    case `default`
    /// One of the 256 palette colours (0–7 the basic ones, 8–15 their bright forms).
    case indexed(UInt8)
    /// A 24-bit colour.
    case rgb(UInt8, UInt8, UInt8)

    /// The nearest palette colour of an RGB one (the 6×6×6 cube or the grey ramp).
    public var indexed256: TerminalColor {
        guard case .rgb(let r, let g, let b) = self else { return self }
        func level(_ v: UInt8) -> Int { v < 48 ? 0 : v < 115 ? 1 : (Int(v) - 35) / 40 }
        let (lr, lg, lb) = (level(r), level(g), level(b))
        let cube = 16 + 36 * lr + 6 * lg + lb
        let values = [0, 95, 135, 175, 215, 255]
        func distance(_ a: (Int, Int, Int)) -> Int {
            let d = (a.0 - Int(r), a.1 - Int(g), a.2 - Int(b))
            return d.0 * d.0 + d.1 * d.1 + d.2 * d.2
        }
        let average = (Int(r) + Int(g) + Int(b)) / 3
        let greyIndex = average > 238 ? 23 : max(0, (average - 3) / 10)
        let grey = 8 + 10 * greyIndex
        let cubeDistance = distance((values[lr], values[lg], values[lb]))
        return distance((grey, grey, grey)) < cubeDistance ? .indexed(UInt8(232 + greyIndex)) : .indexed(UInt8(cube))
    }
}

/// How a cell is drawn: its colours and attributes.
public struct TerminalStyle: Sendable, Hashable {
    /// The text's colour.
    public var foreground: TerminalColor
    /// The cell's colour.
    public var background: TerminalColor
    /// Bold (or bright, on some terminals).
    public var bold: Bool
    /// Faint.
    public var dim: Bool
    /// Italic.
    public var italic: Bool
    /// Underlined.
    public var underline: Bool
    /// Foreground and background swapped (a selection that shows without colours too).
    public var reverse: Bool

    /// A style; the defaults are the terminal's own.
    public init(foreground: TerminalColor = .default, background: TerminalColor = .default, bold: Bool = false,
                dim: Bool = false, italic: Bool = false, underline: Bool = false, reverse: Bool = false)
    {
        self.foreground = foreground
        self.background = background
        self.bold = bold
        self.dim = dim
        self.italic = italic
        self.underline = underline
        self.reverse = reverse
    }

    /// The terminal's default: no colour, no attribute.
    public static let plain = TerminalStyle()
}

/// The colours a terminal is drawn with.
public enum TerminalColors: Sendable, Hashable {
    /// None (`NO_COLOR`): attributes only (bold, reverse, underline …).
    case none
    /// The 256-colour palette; RGB colours become their nearest palette colour.
    case palette256
    /// 24-bit colour (`COLORTERM=truecolor`).
    case trueColor

    /// What the environment asks for: `NO_COLOR` (any value but empty) turns colours
    /// off, `COLORTERM` of `truecolor` or `24bit` turns 24-bit colour on, and a `TERM`
    /// of `dumb` has no colour; else the 256-colour palette.
    public static func from(environment: [String: String]) -> TerminalColors {
        if let no = environment["NO_COLOR"], !no.isEmpty { return .none }
        if environment["TERM"] == "dumb" { return .none }
        if let c = environment["COLORTERM"]?.lowercased(), c == "truecolor" || c == "24bit" { return .trueColor }
        return .palette256
    }
}

extension TerminalStyle {
    /// The SGR parameters that set this style from the default (`0` first), for `colors`.
    func sgr(_ colors: TerminalColors) -> String {
        var p = ["0"]
        if bold { p.append("1") }
        if dim { p.append("2") }
        if italic { p.append("3") }
        if underline { p.append("4") }
        if reverse { p.append("7") }
        if colors != .none {
            if let f = Self.parameters(foreground, base: 30, colors: colors) { p.append(f) }
            if let b = Self.parameters(background, base: 40, colors: colors) { p.append(b) }
        }
        return p.joined(separator: ";")
    }

    private static func parameters(_ color: TerminalColor, base: Int, colors: TerminalColors) -> String? {
        switch colors == .palette256 ? color.indexed256 : color {
        case .default: return nil
        case .indexed(let i) where i < 8: return String(base + Int(i))
        case .indexed(let i) where i < 16: return String(base + 60 + Int(i) - 8)
        case .indexed(let i): return "\(base + 8);5;\(i)"
        case .rgb(let r, let g, let b): return "\(base + 8);2;\(r);\(g);\(b)"
        }
    }
}
