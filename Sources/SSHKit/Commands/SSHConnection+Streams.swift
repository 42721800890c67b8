/// Settings for a streamed command or shell.
public struct SSHChannelOptions: Sendable {
    /// Sent as `env` requests; when the server's `AcceptEnv` refuses one, a command
    /// is re-issued as `export NAME='value'; command`, and a shell is started as
    /// `export ...; exec "$SHELL" -l` (POSIX login shells only).
    public var environment: [String: String]
    /// false: a variable the server's `AcceptEnv` refuses is left unset and the
    /// command or shell starts as given, as `ssh` does with `SendEnv` and `SetEnv`.
    public var exportsRefusedEnvironment: Bool = true
    /// After this long the command is sent `TERM`, its channel is closed, and
    /// readers and `exitStatus()` end with `timedOut`; output read so far stays read.
    public var timeout: Duration?
    /// Output held for readers before the channel stops reading (and the server
    /// stops sending): the memory bound per channel, besides libssh's window.
    public var bufferLimit: Int

    /// Options with the given environment, timeout (none by default) and `bufferLimit`
    /// (1 MiB by default); `exportsRefusedEnvironment` starts true. The values are
    /// checked when the channel starts: a `bufferLimit` outside 1 KiB...1 GiB or a
    /// `timeout` that is not positive throws `invalidArgument`.
    public init(environment: [String: String] = [:], timeout: Duration? = nil, bufferLimit: Int = 1 << 20) {
        self.environment = environment
        self.timeout = timeout
        self.bufferLimit = bufferLimit
    }

    func validate() throws(SSHError) {
        if bufferLimit < 1024 || bufferLimit > 1 << 30 {
            throw SSHError(.invalidArgument, "bufferLimit must be within 1 KiB...1 GiB")
        }
        if let timeout, timeout <= .zero { throw SSHError(.invalidArgument, "timeout must be positive") }
    }
}

extension SSHConnection {
    /// Starts `command` with its output streamed; returns once the server accepted it.
    /// Prefer `withCommand`, which cannot leave a command running by accident.
    ///
    /// - Parameters:
    ///   - command: the command line, run by the user's login shell on the server.
    ///   - options: buffering, timeout and environment of the channel.
    ///   - terminal: request a PTY first (`ssh -t`): stdout and stderr then arrive
    ///     merged on `stdout`, and cancelling hangs the terminal up.
    /// - Throws: `channelOpenFailed` (e.g. the server's MaxSessions), `channelRequestFailed`,
    ///   `cancelled`, `connectionLost`/`disconnected`, `invalidArgument`,
    ///   `invalidState` (after `close()`).
    public func startCommand(
        _ command: String, options: SSHChannelOptions = SSHChannelOptions(), terminal: SSHTerminal? = nil
    ) async throws(SSHError) -> SSHCommand {
        if command.utf8.contains(0) { throw SSHError(.invalidArgument, "command contains a NUL byte") }
        let channel = try await startChannel(command: command, options: options, terminal: terminal)
        return SSHCommand(channel: channel, command: command)
    }

    /// Runs `body` with a started command; if the command still runs when `body`
    /// returns or throws (or the task is cancelled), it is cancelled: `TERM`, then
    /// its channel is closed.
    public func withCommand<R>(
        _ command: String, options: SSHChannelOptions = SSHChannelOptions(), terminal: SSHTerminal? = nil,
        _ body: (SSHCommand) async throws -> R
    ) async throws -> R {
        let cmd = try await startCommand(command, options: options, terminal: terminal)
        defer { if !cmd.channel.isFinished { cmd.cancel() } }
        return try await body(cmd)
    }

    /// Opens the user's login shell on a pseudo-terminal; returns once it started.
    /// Prefer `withShell`.
    /// - Throws: as `startCommand`.
    public func startShell(
        terminal: SSHTerminal = SSHTerminal(), options: SSHChannelOptions = SSHChannelOptions()
    ) async throws(SSHError) -> SSHShell {
        let channel = try await startChannel(command: nil, options: options, terminal: terminal)
        return SSHShell(channel: channel, terminal: terminal)
    }

    /// Runs `body` with an open shell, and hangs it up when `body` ends.
    public func withShell<R>(
        terminal: SSHTerminal = SSHTerminal(), options: SSHChannelOptions = SSHChannelOptions(),
        _ body: (SSHShell) async throws -> R
    ) async throws -> R {
        let shell = try await startShell(terminal: terminal, options: options)
        defer { if !shell.channel.isFinished { shell.cancel() } }
        return try await body(shell)
    }

    /// Validates and starts a streamed channel: `command`, or the login shell when nil
    /// (whose env fallback is `export ...; exec "$SHELL" -l`).
    private func startChannel(command: String?, options: SSHChannelOptions, terminal: SSHTerminal?)
        async throws(SSHError) -> StreamChannel
    {
        let request = try Self.channelRequest(command: command, options: options, terminal: terminal)
        let channel = StreamChannel()
        try await channel.start(on: core, request)
        logger.trace("channel started", metadata: ["shell": "\(command == nil)", "pty": "\(terminal != nil)"])
        return channel
    }

    /// What a session channel is started with: `command` (the login shell when nil)
    /// with its terminal's modes, and the environment as requests or a fallback.
    static func channelRequest(command: String?, options: SSHChannelOptions, terminal: SSHTerminal?)
        throws(SSHError) -> StreamRequest
    {
        try options.validate()
        try terminal?.validate()
        // libssh 0.10 sends no terminal modes: `stty` sets them (see SSHTerminalMode)
        var command = command
        if let terminal, !terminal.modes.isEmpty {
            command = terminal.applyingModes(to: command ?? "exec \"$SHELL\" -l")
        }
        let (env, fallback) = try Self.environmentRequests(
            options.environment, command: command ?? "exec \"$SHELL\" -l")
        return StreamRequest(
            command: command, fallback: options.exportsRefusedEnvironment ? fallback : nil,
            environmentOptional: !options.exportsRefusedEnvironment, environment: env, pty: terminal,
            bufferLimit: options.bufferLimit, timeout: options.timeout)
    }
}
