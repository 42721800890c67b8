import SSHKit

extension SSHTransport: TerminalTransport {
    /// A PTY exec channel on the shared connection (`ssh -t host cmd`). It holds one of
    /// the `maxSessions` until it ended or was hung up.
    public func startTerminal(_ executable: String, arguments: [String], environment: [String: String],
                              terminal: SSHTerminal) async throws(TransportError) -> TransportTerminal
    {
        try TransportError.checkProcess(executable, arguments, environment)
        let permit = try await processes.enter()
        do {
            return try await withLive(retry: false, path: nil) { live in
                let command = try await Self.retryingRefusedOpen {
                    try await live.connection.startCommand(Self.commandLine(executable, arguments, home: live.home),
                                                           options: SSHChannelOptions(environment: environment),
                                                           terminal: terminal)
                }
                return TransportTerminal(backend: SSHProcess(command: command, permit: permit))
            }
        } catch {
            permit.release()
            throw error
        }
    }
}

extension SSHProcess: TerminalBackend {
    func resize(_ size: SSHTerminalSize) throws(TransportError) {
        do {
            try command.resize(to: size)
        } catch {
            throw TransportError(error)
        }
    }
}
