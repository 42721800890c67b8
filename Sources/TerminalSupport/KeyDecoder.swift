// Keystrokes from a terminal in raw mode: the bytes of keys, escape sequences (xterm's,
// VT100's, the modifiers of both), bracketed paste and SGR mouse reports, decoded into
// key presses. A sequence cut between two reads waits for the rest.

/// A key a terminal sends.
public enum Key: Sendable, Hashable {
    /// A printable character (with `.control` for Ctrl+letter, whose byte it stands for).
    case character(Character)
    case enter, tab, backspace, escape
    case up, down, left, right
    case home, end, pageUp, pageDown, insert, delete
    /// F1 to F12.
    case function(Int)
    /// Text pasted while bracketed paste is on (`ESC [ ? 2004 h`), as one press.
    case paste(String)
    /// A mouse report (SGR form, `ESC [ ? 1006 h`).
    case mouse(MouseEvent)
    /// A sequence this decoder does not know, as it came.
    case unknown([UInt8])
}

/// A mouse button, wheel or click, at a 0-based cell.
public struct MouseEvent: Sendable, Hashable {
    /// What the mouse did (buttons 0–2: left, middle, right).
    public enum Kind: Sendable, Hashable {
        case press(button: Int)
        case release(button: Int)
        case wheelUp, wheelDown
        case drag(button: Int)
    }

    /// What happened.
    public var kind: Kind
    /// 0-based row of the cell.
    public var row: Int
    /// 0-based column of the cell.
    public var column: Int
}

/// The modifier keys held with a key.
public struct KeyModifiers: OptionSet, Sendable, Hashable {
    /// The bits: 1 shift, 2 alt, 4 control (xterm's modifier parameter minus one).
    public let rawValue: UInt8
    /// Modifiers from their bits.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// Shift.
    public static let shift = KeyModifiers(rawValue: 1)
    /// Alt (Meta, Option).
    public static let alt = KeyModifiers(rawValue: 2)
    /// Control.
    public static let control = KeyModifiers(rawValue: 4)
}

/// One key press.
public struct KeyPress: Sendable, Hashable, CustomStringConvertible {
    /// The key.
    public var key: Key
    /// The modifiers held with it.
    public var modifiers: KeyModifiers

    /// A press of `key` with `modifiers`.
    public init(_ key: Key, _ modifiers: KeyModifiers = []) {
        self.key = key
        self.modifiers = modifiers
    }

    /// `ctrl+c`, `alt+x`, `shift+tab`, `enter`, `a`: how help screens name it.
    public var description: String {
        var parts: [String] = []
        if modifiers.contains(.control) { parts.append("ctrl") }
        if modifiers.contains(.alt) { parts.append("alt") }
        if modifiers.contains(.shift) { parts.append("shift") }
        switch key {
        case .character(" "): parts.append("space")
        case .character(let c): parts.append(String(c))
        case .function(let n): parts.append("f\(n)")
        case .paste: parts.append("paste")
        case .mouse: parts.append("mouse")
        case .unknown(let b): parts.append("unknown(\(b.map { String($0, radix: 16) }.joined(separator: " ")))")
        case .pageUp: parts.append("pgup")
        case .pageDown: parts.append("pgdn")
        default: parts.append("\(key)")
        }
        return parts.joined(separator: "+")
    }
}

/// Decodes a terminal's input bytes into key presses.
///
/// A lone `ESC` cannot be told from the start of a sequence until more bytes come or
/// none do: `decode` keeps it, and the caller calls `flush()` when no byte followed for
/// a short while (25–50 ms) to have it as the Escape key.
public struct KeyDecoder: Sendable {
    private var pending: [UInt8] = []

    /// A decoder with nothing pending.
    public init() {}

    /// Whether bytes wait for the rest of their sequence (call `flush()` after a pause).
    public var hasPending: Bool { !pending.isEmpty }

    /// The presses in `bytes` (with what was pending before).
    public mutating func decode(_ bytes: [UInt8]) -> [KeyPress] {
        pending += bytes
        var out: [KeyPress] = []
        var i = 0
        while i < pending.count {
            guard let (press, used) = Self.one(pending, at: i, final: false) else { break }
            if let press { out.append(press) }
            i += used
        }
        pending.removeFirst(i)
        // a paste that never ends would hold everything after it: at 1 MiB it is taken
        if pending.count > 1 << 20 { out += flush() }
        return out
    }

    /// What is pending, taken as it is: a lone `ESC` is the Escape key, an unfinished
    /// sequence its keys.
    public mutating func flush() -> [KeyPress] {
        var out: [KeyPress] = []
        var i = 0
        while i < pending.count {
            guard let (press, used) = Self.one(pending, at: i, final: true) else { break }
            if let press { out.append(press) }
            i += max(1, used)
        }
        pending = []
        return out
    }

    /// The press at `i` and the bytes it took; nil when the bytes end inside it (unless
    /// `final`). A nil press with a count: bytes that are no key.
    static func one(_ b: [UInt8], at i: Int, final: Bool) -> (KeyPress?, Int)? {
        let c = b[i]
        switch c {
        case 0x1B:
            guard i + 1 < b.count else { return final ? (KeyPress(.escape), 1) : nil }
            let n = b[i + 1]
            if n == UInt8(ascii: "[") { return csi(b, at: i, final: final) }
            if n == UInt8(ascii: "O") {
                guard i + 2 < b.count else { return final ? (KeyPress(.character("O"), .alt), 2) : nil }
                let key: Key? = switch b[i + 2] {
                case UInt8(ascii: "A"): .up
                case UInt8(ascii: "B"): .down
                case UInt8(ascii: "C"): .right
                case UInt8(ascii: "D"): .left
                case UInt8(ascii: "H"): .home
                case UInt8(ascii: "F"): .end
                case UInt8(ascii: "M"): .enter
                case UInt8(ascii: "P"): .function(1)
                case UInt8(ascii: "Q"): .function(2)
                case UInt8(ascii: "R"): .function(3)
                case UInt8(ascii: "S"): .function(4)
                default: nil
                }
                return (KeyPress(key ?? .unknown(Array(b[i...i + 2]))), 3)
            }
            if n == 0x1B { return (KeyPress(.escape), 1) }
            // Alt (Meta) sends ESC before the key
            guard let (inner, used) = one(b, at: i + 1, final: final) else { return nil }
            guard var press = inner else { return (nil, used + 1) }
            press.modifiers.insert(.alt)
            return (press, used + 1)
        case 0x0D, 0x0A: return (KeyPress(.enter), 1)
        case 0x09: return (KeyPress(.tab), 1)
        case 0x7F, 0x08: return (KeyPress(.backspace), 1)
        case 0x00: return (KeyPress(.character(" "), .control), 1)
        case 0x01...0x1A: return (KeyPress(.character(Character(Unicode.Scalar(c + 0x60))), .control), 1)
        case 0x1C...0x1F: return (KeyPress(.character(Character(Unicode.Scalar(c + 0x40))), .control), 1)
        case 0x20...0x7E: return (KeyPress(.character(Character(Unicode.Scalar(c)))), 1)
        default:
            // UTF-8
            let need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1
            if need == 1 { return (KeyPress(.unknown([c])), 1) }
            guard i + need <= b.count else { return final ? (KeyPress(.unknown(Array(b[i...]))), b.count - i) : nil }
            let bytes = Array(b[i..<i + need])
            guard let s = String(validating: bytes, as: UTF8.self), let ch = s.first else {
                return (KeyPress(.unknown(bytes)), need)
            }
            return (KeyPress(.character(ch)), need)
        }
    }

    /// `ESC [ params intermediates final`, and a bracketed paste up to `ESC [ 201 ~`.
    private static func csi(_ b: [UInt8], at i: Int, final: Bool) -> (KeyPress?, Int)? {
        var j = i + 2
        while j < b.count, (0x20...0x3F).contains(b[j]) { j += 1 }
        guard j < b.count else { return final ? (KeyPress(.unknown(Array(b[i...]))), b.count - i) : nil }
        let finalByte = b[j]
        let used = j - i + 1
        let paramText = String(decoding: b[(i + 2)..<j], as: UTF8.self)
        if paramText.hasPrefix("<") && (finalByte == UInt8(ascii: "M") || finalByte == UInt8(ascii: "m")) {
            return (mouse(paramText.dropFirst(), release: finalByte == UInt8(ascii: "m")).map { KeyPress($0.0, $0.1) }
                ?? KeyPress(.unknown(Array(b[i..<i + used]))), used)
        }
        let params = paramText.split(separator: ";", omittingEmptySubsequences: false).map { Int($0) }
        let first = params.first.flatMap { $0 } ?? 1
        var modifiers: KeyModifiers = []
        if params.count > 1, let m = params[1], m > 1 { modifiers = KeyModifiers(rawValue: UInt8(clamping: (m - 1) & 7)) }
        if finalByte == UInt8(ascii: "~") && first == 200 {
            // the pasted text, up to the end marker
            let end: [UInt8] = [0x1B, 0x5B, 0x32, 0x30, 0x31, 0x7E]
            var k = i + used
            while k + end.count <= b.count {
                if Array(b[k..<k + end.count]) == end {
                    let text = String(decoding: b[(i + used)..<k], as: UTF8.self)
                    return (KeyPress(.paste(text)), k + end.count - i)
                }
                k += 1
            }
            if final { return (KeyPress(.paste(String(decoding: b[(i + used)...], as: UTF8.self))), b.count - i) }
            return nil
        }
        let key: Key?
        switch finalByte {
        case UInt8(ascii: "A"): key = .up
        case UInt8(ascii: "B"): key = .down
        case UInt8(ascii: "C"): key = .right
        case UInt8(ascii: "D"): key = .left
        case UInt8(ascii: "H"): key = .home
        case UInt8(ascii: "F"): key = .end
        case UInt8(ascii: "P"): key = .function(1)
        case UInt8(ascii: "Q"): key = .function(2)
        case UInt8(ascii: "R"): key = .function(3)
        case UInt8(ascii: "S"): key = .function(4)
        case UInt8(ascii: "Z"):
            key = .tab
            modifiers.insert(.shift)
        case UInt8(ascii: "u"):
            // CSI codepoint ; modifiers u (the fixterms/kitty form)
            key = Unicode.Scalar(UInt32(clamping: first)).map { scalar in
                switch scalar.value {
                case 13: .enter
                case 9: .tab
                case 27: .escape
                case 127: .backspace
                default: .character(Character(scalar))
                }
            }
        case UInt8(ascii: "~"):
            switch first {
            case 1, 7: key = .home
            case 2: key = .insert
            case 3: key = .delete
            case 4, 8: key = .end
            case 5: key = .pageUp
            case 6: key = .pageDown
            case 11...15: key = .function(first - 10)
            case 17...21: key = .function(first - 11)
            case 23, 24: key = .function(first - 12)
            default: key = nil
            }
        case UInt8(ascii: "I"), UInt8(ascii: "O"):
            return (nil, used)  // focus in/out reports
        default: key = nil
        }
        guard let key else { return (KeyPress(.unknown(Array(b[i..<i + used]))), used) }
        return (KeyPress(key, modifiers), used)
    }

    /// `Cb;Cx;Cy` of an SGR mouse report.
    private static func mouse(_ text: Substring, release: Bool) -> (Key, KeyModifiers)? {
        let p = text.split(separator: ";").compactMap { Int($0) }
        guard p.count == 3 else { return nil }
        let (cb, x, y) = (p[0], p[1] - 1, p[2] - 1)
        var modifiers: KeyModifiers = []
        if cb & 4 != 0 { modifiers.insert(.shift) }
        if cb & 8 != 0 { modifiers.insert(.alt) }
        if cb & 16 != 0 { modifiers.insert(.control) }
        let button = cb & 3
        let kind: MouseEvent.Kind
        if cb & 64 != 0 {
            kind = button == 0 ? .wheelUp : .wheelDown
        } else if cb & 32 != 0 {
            kind = .drag(button: button)
        } else {
            kind = release ? .release(button: button) : .press(button: button)
        }
        return (.mouse(MouseEvent(kind: kind, row: y, column: x)), modifiers)
    }
}
