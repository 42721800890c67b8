/// A signal to send to a remote command or shell (RFC 4254 §6.9: the name
/// without "SIG"). OpenSSH delivers it to the process the session started;
/// dropbear does too. Servers may ignore signal requests.
public struct SSHSignal: Sendable, Hashable, CustomStringConvertible {
    /// The protocol name, e.g. "TERM".
    public let name: String

    private init(_ name: String) { self.name = name }

    public static let abrt = SSHSignal("ABRT")
    public static let alrm = SSHSignal("ALRM")
    public static let fpe = SSHSignal("FPE")
    public static let hup = SSHSignal("HUP")
    public static let ill = SSHSignal("ILL")
    public static let int = SSHSignal("INT")
    public static let kill = SSHSignal("KILL")
    public static let pipe = SSHSignal("PIPE")
    public static let quit = SSHSignal("QUIT")
    public static let segv = SSHSignal("SEGV")
    public static let term = SSHSignal("TERM")
    public static let usr1 = SSHSignal("USR1")
    public static let usr2 = SSHSignal("USR2")

    /// The signals RFC 4254 names.
    public static let all: [SSHSignal] = [.abrt, .alrm, .fpe, .hup, .ill, .int, .kill, .pipe, .quit, .segv, .term, .usr1, .usr2]

    public var description: String { name }
}
