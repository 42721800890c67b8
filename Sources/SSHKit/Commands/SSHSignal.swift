/// A signal to send to a remote command or shell (RFC 4254 §6.9: the name
/// without "SIG"). OpenSSH delivers it to the process the session started;
/// dropbear does too. Servers may ignore signal requests.
public struct SSHSignal: Sendable, Hashable, CustomStringConvertible {
    /// The protocol name, e.g. "TERM".
    public let name: String

    private init(_ name: String) { self.name = name }

    /// `SIGABRT`: abort, as `abort(3)` raises it.
    public static let abrt = SSHSignal("ABRT")
    /// `SIGALRM`: a timer (`alarm(2)`) expired.
    public static let alrm = SSHSignal("ALRM")
    /// `SIGFPE`: an erroneous arithmetic operation.
    public static let fpe = SSHSignal("FPE")
    /// `SIGHUP`: the terminal hung up.
    public static let hup = SSHSignal("HUP")
    /// `SIGILL`: an illegal instruction.
    public static let ill = SSHSignal("ILL")
    /// `SIGINT`: an interrupt, as Ctrl-C at a terminal sends.
    public static let int = SSHSignal("INT")
    /// `SIGKILL`: kill; it cannot be caught or ignored.
    public static let kill = SSHSignal("KILL")
    /// `SIGPIPE`: a write to a pipe that nobody reads.
    public static let pipe = SSHSignal("PIPE")
    /// `SIGQUIT`: quit, as `Ctrl-\` at a terminal sends; it usually dumps core.
    public static let quit = SSHSignal("QUIT")
    /// `SIGSEGV`: an invalid memory reference.
    public static let segv = SSHSignal("SEGV")
    /// `SIGTERM`: a request to terminate.
    public static let term = SSHSignal("TERM")
    /// `SIGUSR1`: user-defined signal 1.
    public static let usr1 = SSHSignal("USR1")
    /// `SIGUSR2`: user-defined signal 2.
    public static let usr2 = SSHSignal("USR2")

    /// The signals RFC 4254 names.
    public static let all: [SSHSignal] = [.abrt, .alrm, .fpe, .hup, .ill, .int, .kill, .pipe, .quit, .segv, .term, .usr1, .usr2]

    public var description: String { name }
}
