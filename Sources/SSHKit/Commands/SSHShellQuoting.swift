/// The one quoting function for strings that reach a remote POSIX shell.
///
/// OpenSSH runs every exec request through the user's login shell. Single-quote
/// quoting is correct for sh, bash, dash, zsh, mksh, busybox sh and yash, but
/// not for fish or tcsh; see Docs/ErrorModel.md and the notes on login shells.
public enum SSHShellQuoting {
    /// Quotes `s` as one POSIX shell word: `'it'\''s'`.
    public static func quote(_ s: String) -> String {
        if !s.isEmpty, s.utf8.allSatisfy({ safeByte($0) }) { return s }
        return "'" + s.replacingSingleQuotes() + "'"
    }

    /// Quotes each argument and joins them with spaces.
    public static func command(_ argv: [String]) -> String {
        argv.map(quote).joined(separator: " ")
    }

    /// Whether `name` is a valid environment variable name: `[A-Za-z_][A-Za-z0-9_]*`.
    public static func isValidEnvironmentName(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { return false }
        return name.utf8.allSatisfy { b in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) || b == UInt8(ascii: "_")
        }
    }

    private static func safeByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "/"),
             UInt8(ascii: ","), UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "+"):
            return true
        default:
            return false
        }
    }
}

extension String {
    /// Every `'` byte becomes `'\''`. It works on UTF-8 bytes, not on Characters: a
    /// quote followed by a combining mark is one Character that is not equal to "'",
    /// and a Character loop left that quote unescaped (the quoting proof found it).
    fileprivate func replacingSingleQuotes() -> String {
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count + 8)
        for b in utf8 {
            if b == UInt8(ascii: "'") {
                out += [UInt8(ascii: "'"), UInt8(ascii: "\\"), UInt8(ascii: "'"), UInt8(ascii: "'")]
            } else {
                out.append(b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
