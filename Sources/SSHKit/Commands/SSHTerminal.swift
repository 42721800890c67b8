/// The size of a terminal: columns and rows (and pixels, for programs that draw).
public struct SSHTerminalSize: Sendable, Hashable {
    /// The terminal's width in columns (1...65535).
    public var columns: Int
    /// The terminal's height in rows (1...65535).
    public var rows: Int
    /// Pixel sizes are part of the protocol, but libssh 0.10 has no way to send
    /// them: servers see 0 (as with `ssh` when the local terminal reports none).
    public var pixelWidth: Int
    /// The height in pixels; not sent either (see `pixelWidth`).
    public var pixelHeight: Int

    /// Columns and rows must be 1...65535 (a programmer error otherwise).
    public init(columns: Int, rows: Int, pixelWidth: Int = 0, pixelHeight: Int = 0) {
        precondition((1...65535).contains(columns) && (1...65535).contains(rows),
                     "terminal size \(columns)x\(rows) out of range 1...65535")
        precondition(pixelWidth >= 0 && pixelHeight >= 0 && pixelWidth <= 1 << 20 && pixelHeight <= 1 << 20,
                     "pixel size out of range")
        self.columns = columns
        self.rows = rows
        self.pixelWidth = pixelWidth
        self.pixelHeight = pixelHeight
    }

    /// The same ranges, for a size whose fields were changed after `init`:
    /// `invalidArgument` when a terminal is requested or resized with it.
    func validate() throws(SSHError) {
        guard (1...65535).contains(columns) && (1...65535).contains(rows) else {
            throw SSHError(.invalidArgument, "terminal size \(columns)x\(rows) out of range 1...65535")
        }
        guard (0...(1 << 20)).contains(pixelWidth) && (0...(1 << 20)).contains(pixelHeight) else {
            throw SSHError(.invalidArgument, "terminal pixel size \(pixelWidth)x\(pixelHeight) out of range")
        }
    }
}

/// A pseudo-terminal requested for a shell or command (`ssh -t`): the remote
/// program sees a terminal, stdout and stderr arrive merged, and closing the
/// channel hangs the terminal up.
public struct SSHTerminal: Sendable, Hashable {
    /// The TERM value, e.g. "xterm-256color" (printable ASCII, under 64 bytes).
    public var term: String
    /// The initial size, sent in the RFC 4254 `pty-req`; change it later with the
    /// command's or shell's `resize(to:)`.
    public var size: SSHTerminalSize
    /// Terminal modes to set on the remote PTY, e.g. `[.echo: 0, .vintr: 3]`; the server's
    /// defaults for the rest. See ``SSHTerminalMode`` for how they are applied.
    public var modes: [SSHTerminalMode: UInt32]

    /// A terminal request: `xterm-256color` at 80 × 24 with the server's default modes
    /// unless given. `term` and `modes` are checked when the command or shell starts
    /// (`invalidArgument`): a flag must be 0 or 1, a character 0...255, a speed
    /// 1...4000000.
    public init(term: String = "xterm-256color", size: SSHTerminalSize = SSHTerminalSize(columns: 80, rows: 24),
                modes: [SSHTerminalMode: UInt32] = [:]) {
        self.term = term
        self.size = size
        self.modes = modes
    }

    func validate() throws(SSHError) {
        try size.validate()
        guard !term.isEmpty, term.utf8.count < 64, term.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw SSHError(.invalidArgument, "terminal type must be 1...63 printable ASCII characters")
        }
        for (mode, value) in modes {
            switch mode.kind {
            case .flag where value > 1:
                throw SSHError(.invalidArgument, "terminal mode \(mode.sttyName) is a flag: 0 or 1, not \(value)")
            case .character where value > 255:
                throw SSHError(.invalidArgument, "terminal mode \(mode.sttyName) is a character: 0...255, not \(value)")
            case .speed where value == 0 || value > 4_000_000:
                throw SSHError(.invalidArgument, "terminal speed \(mode.sttyName) \(value) out of range")
            default: break
            }
        }
    }

    /// `stty` arguments that set `modes`, in opcode order; empty when there are none.
    var sttyArguments: [String] {
        modes.sorted { $0.key.opcode < $1.key.opcode }.flatMap { mode, value -> [String] in
            switch mode.kind {
            case .flag: return [value == 0 ? "-" + mode.sttyName : mode.sttyName]
            case .speed: return [mode.sttyName, String(value)]
            case .character:
                let c: String
                switch value {
                case 255: c = "undef" // RFC 4254: 255 disables the character
                case 127: c = "^?"
                case 0..<32 where value != 28: c = "^" + String(UnicodeScalar(UInt8(value) + 64))
                case 33..<127 where value != 0x5c && value != 0x27: c = String(UnicodeScalar(UInt8(value)))
                // FS (28: its ^ form is a backslash), space, backslash, quote and 8-bit values numerically: no shell reads them differently
                default: c = "0x" + String(value, radix: 16)
                }
                return [mode.sttyName, c]
            }
        }
    }

    /// The command with `stty` setting the modes first (errors ignored, as a server
    /// ignores modes it does not know); the command itself when there are none.
    func applyingModes(to command: String) -> String {
        let args = sttyArguments
        guard !args.isEmpty else { return command }
        return "stty " + args.map(SSHShellQuoting.quote).joined(separator: " ") + " 2>/dev/null; " + command
    }
}

/// A terminal mode of RFC 4254 §8: a flag (value 0 or 1), a control character (its byte,
/// 255 to disable it) or a line speed (baud).
///
/// libssh 0.10 can only send an empty mode list with its `pty-req`, so SSHKit applies the
/// modes with `stty` on the remote PTY before the program starts: a command runs as
/// `stty <modes> 2>/dev/null; <command>`, and a shell with modes becomes the command
/// `stty <modes> 2>/dev/null; exec "$SHELL" -l` (a login shell, as sshd starts it, but
/// through an exec request, so sshd prints no message of the day). The remote login
/// shell runs that line: POSIX shells and fish accept it, csh and tcsh do not (their
/// `2>` differs), and there the modes are not set.
public struct SSHTerminalMode: Sendable, Hashable {
    /// The RFC 4254 opcode.
    public let opcode: UInt8
    let sttyName: String
    let kind: Kind

    enum Kind: Sendable { case character, flag, speed }

    init(_ opcode: UInt8, _ sttyName: String, _ kind: Kind) {
        self.opcode = opcode
        self.sttyName = sttyName
        self.kind = kind
    }

    // control characters
    /// `VINTR` (stty `intr`): the interrupt character, which sends `SIGINT` (usually Ctrl-C).
    public static let vintr = SSHTerminalMode(1, "intr", .character)
    /// `VQUIT` (stty `quit`): the quit character, which sends `SIGQUIT`.
    public static let vquit = SSHTerminalMode(2, "quit", .character)
    /// `VERASE` (stty `erase`): erases the character left of the cursor.
    public static let verase = SSHTerminalMode(3, "erase", .character)
    /// `VKILL` (stty `kill`): erases the current input line.
    public static let vkill = SSHTerminalMode(4, "kill", .character)
    /// `VEOF` (stty `eof`): the end-of-file character (usually Ctrl-D).
    public static let veof = SSHTerminalMode(5, "eof", .character)
    /// `VEOL` (stty `eol`): an end-of-line character besides newline.
    public static let veol = SSHTerminalMode(6, "eol", .character)
    /// `VEOL2` (stty `eol2`): another end-of-line character.
    public static let veol2 = SSHTerminalMode(7, "eol2", .character)
    /// `VSTART` (stty `start`): resumes paused output (usually Ctrl-Q).
    public static let vstart = SSHTerminalMode(8, "start", .character)
    /// `VSTOP` (stty `stop`): pauses output (usually Ctrl-S).
    public static let vstop = SSHTerminalMode(9, "stop", .character)
    /// `VSUSP` (stty `susp`): suspends the foreground program (usually Ctrl-Z).
    public static let vsusp = SSHTerminalMode(10, "susp", .character)
    /// `VREPRINT` (stty `rprnt`): reprints the current input line.
    public static let vreprint = SSHTerminalMode(12, "rprnt", .character)
    /// `VWERASE` (stty `werase`): erases the word left of the cursor.
    public static let vwerase = SSHTerminalMode(13, "werase", .character)
    /// `VLNEXT` (stty `lnext`): takes the next character literally.
    public static let vlnext = SSHTerminalMode(14, "lnext", .character)
    /// `VDISCARD` (stty `discard`): toggles discarding of output.
    public static let vdiscard = SSHTerminalMode(18, "discard", .character)
    // input flags
    /// `IGNPAR`: ignore characters with parity errors.
    public static let ignpar = SSHTerminalMode(30, "ignpar", .flag)
    /// `PARMRK`: mark parity and framing errors.
    public static let parmrk = SSHTerminalMode(31, "parmrk", .flag)
    /// `INPCK`: check input parity.
    public static let inpck = SSHTerminalMode(32, "inpck", .flag)
    /// `ISTRIP`: strip the eighth bit of input characters.
    public static let istrip = SSHTerminalMode(33, "istrip", .flag)
    /// `INLCR`: map NL to CR on input.
    public static let inlcr = SSHTerminalMode(34, "inlcr", .flag)
    /// `IGNCR`: ignore CR on input.
    public static let igncr = SSHTerminalMode(35, "igncr", .flag)
    /// `ICRNL`: map CR to NL on input.
    public static let icrnl = SSHTerminalMode(36, "icrnl", .flag)
    /// `IXON`: output flow control (`VSTOP` and `VSTART`).
    public static let ixon = SSHTerminalMode(38, "ixon", .flag)
    /// `IXANY`: any character restarts stopped output.
    public static let ixany = SSHTerminalMode(39, "ixany", .flag)
    /// `IXOFF`: input flow control.
    public static let ixoff = SSHTerminalMode(40, "ixoff", .flag)
    /// `IMAXBEL`: ring the bell when the input queue is full.
    public static let imaxbel = SSHTerminalMode(41, "imaxbel", .flag)
    /// `IUTF8` (RFC 8160): input is UTF-8, so erasing removes whole characters.
    public static let iutf8 = SSHTerminalMode(42, "iutf8", .flag)
    // local flags
    /// `ISIG`: the `VINTR`, `VQUIT` and `VSUSP` characters send their signals.
    public static let isig = SSHTerminalMode(50, "isig", .flag)
    /// `ICANON`: canonical mode, input is edited and delivered by lines.
    public static let icanon = SSHTerminalMode(51, "icanon", .flag)
    /// `ECHO`: echo input characters.
    public static let echo = SSHTerminalMode(53, "echo", .flag)
    /// `ECHOE`: `VERASE` visibly erases the character.
    public static let echoe = SSHTerminalMode(54, "echoe", .flag)
    /// `ECHOK`: echo a newline after `VKILL`.
    public static let echok = SSHTerminalMode(55, "echok", .flag)
    /// `ECHONL`: echo NL even when `ECHO` is off.
    public static let echonl = SSHTerminalMode(56, "echonl", .flag)
    /// `NOFLSH`: do not flush the queues after an interrupt or quit.
    public static let noflsh = SSHTerminalMode(57, "noflsh", .flag)
    /// `TOSTOP`: stop background jobs that write to the terminal (`SIGTTOU`).
    public static let tostop = SSHTerminalMode(58, "tostop", .flag)
    /// `IEXTEN`: implementation-defined input processing (e.g. `VLNEXT`, `VWERASE`).
    public static let iexten = SSHTerminalMode(59, "iexten", .flag)
    /// `ECHOCTL`: echo control characters as `^X`.
    public static let echoctl = SSHTerminalMode(60, "echoctl", .flag)
    /// `ECHOKE`: `VKILL` visibly erases the line.
    public static let echoke = SSHTerminalMode(61, "echoke", .flag)
    // output flags
    /// `OPOST`: process output (needed by the other output flags).
    public static let opost = SSHTerminalMode(70, "opost", .flag)
    /// `ONLCR`: map NL to CR-NL on output.
    public static let onlcr = SSHTerminalMode(72, "onlcr", .flag)
    /// `OCRNL`: map CR to NL on output.
    public static let ocrnl = SSHTerminalMode(73, "ocrnl", .flag)
    /// `ONOCR`: output no CR in column 0.
    public static let onocr = SSHTerminalMode(74, "onocr", .flag)
    /// `ONLRET`: NL also does a carriage return on output.
    public static let onlret = SSHTerminalMode(75, "onlret", .flag)
    // control flags
    /// `PARENB`: generate and check parity.
    public static let parenb = SSHTerminalMode(92, "parenb", .flag)
    /// `PARODD`: odd parity (even when off).
    public static let parodd = SSHTerminalMode(93, "parodd", .flag)
    // line speeds
    /// The input speed in baud (RFC 4254 `TTY_OP_ISPEED`, stty `ispeed`).
    public static let inputSpeed = SSHTerminalMode(128, "ispeed", .speed)
    /// The output speed in baud (RFC 4254 `TTY_OP_OSPEED`, stty `ospeed`).
    public static let outputSpeed = SSHTerminalMode(129, "ospeed", .speed)
}
