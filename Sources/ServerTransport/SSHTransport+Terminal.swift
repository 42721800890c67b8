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

extension SSHTransport: TerminalJoiningTransport {
    /// A PTY exec channel on the shared connection, its bytes carried between `fd` and
    /// the channel by the connection's worker (`ssh -t host cmd` in a terminal). It holds
    /// one of the `maxSessions` until it ended.
    public func startJoinedTerminal(_ executable: String, arguments: [String], environment: [String: String],
                                    terminal: SSHTerminal, joining fd: Int32, detachByte: UInt8?)
        async throws(TransportError) -> TransportJoinedTerminal
    {
        try TransportError.checkProcess(executable, arguments, environment)
        let permit = try await processes.enter()
        do {
            return try await withLive(retry: false, path: nil) { live in
                let joined = try await Self.retryingRefusedOpen {
                    try await live.connection.startJoinedTerminal(
                        Self.commandLine(executable, arguments, home: live.home), terminal: terminal, joining: fd,
                        detachByte: detachByte, options: SSHChannelOptions(environment: environment))
                }
                return TransportJoinedTerminal(joined: joined, permit: permit)
            }
        } catch {
            permit.release()
            throw error
        }
    }
}
