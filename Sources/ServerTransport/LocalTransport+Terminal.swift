import CTransportSupport
import SSHKit
#if canImport(Glibc)
import Glibc
#endif

extension LocalTransport: TerminalTransport {
    /// A program on a new pseudo-terminal of this machine, as `ssh -t` gives one on a
    /// server: a session of its own with the terminal as its controlling terminal, `TERM`
    /// set from `terminal.term`. The terminal's modes are the system's defaults
    /// (`terminal.modes` is for SSH servers). A program that cannot be started ends at
    /// once with status 127 and the reason on its screen.
    public func startTerminal(_ executable: String, arguments: [String], environment: [String: String],
                              terminal: SSHTerminal) async throws(TransportError) -> TransportTerminal
    {
        try TransportError.checkProcess(executable, arguments, environment)
        return try LocalProcessStream.startTerminal(resolve(executable), arguments, environment: environment, terminal: terminal)
    }
}

extension LocalProcessStream: TerminalBackend {
    func resize(_ size: SSHTerminalSize) throws(TransportError) {
        guard let fd = terminalFD else { throw TransportError(.other, "the process has no terminal") }
        if ctransport_set_window_size(fd, UInt16(clamping: size.rows), UInt16(clamping: size.columns)) != 0 {
            throw TransportError(.other, "cannot resize the terminal: \(String(cString: strerror(errno)))")
        }
    }
}

extension FinishedProcess: TerminalBackend {
    /// A program that never started has nothing to resize.
    func resize(_ size: SSHTerminalSize) throws(TransportError) {}
}
