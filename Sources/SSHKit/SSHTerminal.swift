/// The size of a terminal: columns and rows (and pixels, for programs that draw).
public struct SSHTerminalSize: Sendable, Hashable {
    public var columns: Int
    public var rows: Int
    /// Pixel sizes are part of the protocol, but libssh 0.10 has no way to send
    /// them: servers see 0 (as with `ssh` when the local terminal reports none).
    public var pixelWidth: Int
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
}

/// A pseudo-terminal requested for a shell or command (`ssh -t`): the remote
/// program sees a terminal, stdout and stderr arrive merged, and closing the
/// channel hangs the terminal up.
public struct SSHTerminal: Sendable, Hashable {
    /// The TERM value, e.g. "xterm-256color" (printable ASCII, under 64 bytes).
    public var term: String
    public var size: SSHTerminalSize

    public init(term: String = "xterm-256color", size: SSHTerminalSize = SSHTerminalSize(columns: 80, rows: 24)) {
        self.term = term
        self.size = size
    }

    func validate() throws(SSHError) {
        guard !term.isEmpty, term.utf8.count < 64, term.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw SSHError(.invalidArgument, "terminal type must be 1...63 printable ASCII characters")
        }
    }
}
