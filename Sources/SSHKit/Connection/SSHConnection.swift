import Logging

/// An authenticated SSH connection. Many operations may run on it at once
/// (each command gets its own channel), from any task.
///
/// Close it with `close()`; dropping the last reference closes it too.
public final class SSHConnection: Sendable {
    let core: CoreConnection
    /// The server's host, as configured.
    public let host: String
    /// The server's port, as configured.
    public let port: Int
    /// The user this connection is logged in as.
    public let user: String
    /// The key the server presented and the policy accepted.
    public let hostKey: SSHHostKey
    /// The server's identification string, e.g. `SSH-2.0-OpenSSH_9.2p1 Debian-2`.
    public let serverBanner: String
    /// The methods the server offered when authentication began.
    public let offeredAuthMethods: SSHAuthMethods
    /// What key exchange settled on.
    public let negotiatedAlgorithms: SSHNegotiatedAlgorithms
    let logger: Logger
    /// The jump hosts this connection runs through, first hop first (kept open by it).
    public let jumpConnections: [SSHConnection]
    /// The bridges carrying this connection's socket through the last jump host.
    let jumpBridges: [CoreBridge]
    /// The `proxyCommand` carrying this connection, stopped when it closes.
    let proxy: ProxyCommandProcess?

    init(core: CoreConnection, configuration: SSHConfiguration, hostKey: SSHHostKey,
         negotiatedAlgorithms: SSHNegotiatedAlgorithms, serverBanner: String, offeredAuthMethods: SSHAuthMethods,
         jumpConnections: [SSHConnection] = [], jumpBridges: [CoreBridge] = [], proxy: ProxyCommandProcess? = nil) {
        self.jumpConnections = jumpConnections
        self.proxy = proxy
        self.jumpBridges = jumpBridges
        self.negotiatedAlgorithms = negotiatedAlgorithms
        self.core = core
        self.host = configuration.host
        self.port = configuration.port
        self.user = configuration.user
        self.hostKey = hostKey
        self.serverBanner = serverBanner
        self.offeredAuthMethods = offeredAuthMethods
        self.logger = configuration.logger
    }

    /// True while the connection is usable (not closed, not failed).
    public var isConnected: Bool { core.isReady }

    /// Runs `command` on a new channel and collects its output.
    ///
    /// stdout and stderr are drained together, so a command that floods stderr
    /// cannot stall its stdout. A non-zero exit is a result, not an error.
    ///
    /// - Parameters:
    ///   - command: run by the user's login shell on the server. Quote
    ///     arguments with `SSHShellQuoting.quote`.
    ///   - stdin: bytes sent to the command's stdin, followed by EOF.
    ///   - environment: sent as `env` requests; if the server's `AcceptEnv`
    ///     refuses one, the command is re-issued as `export NAME='value'; command`
    ///     instead (POSIX login shells only) and `usedEnvironmentFallback` is set.
    ///   - outputLimit: the most stdout + stderr bytes to collect; beyond it the
    ///     channel is closed and `outputLimitExceeded` thrown.
    /// - Throws: `SSHError` — `channelOpenFailed` (e.g. MaxSessions reached),
    ///   `channelRequestFailed`, `outputLimitExceeded`, `cancelled` (this channel
    ///   only: the connection and its other commands continue), `disconnected` /
    ///   `connectionLost`, `invalidArgument`, `invalidState` (after `close()`).
    public func execute(
        _ command: String,
        stdin: [UInt8] = [],
        environment: [String: String] = [:],
        outputLimit: Int = 16 * 1024 * 1024
    ) async throws(SSHError) -> SSHCommandResult {
        if command.utf8.contains(0) { throw SSHError(.invalidArgument, "command contains a NUL byte") }
        if outputLimit < 0 { throw SSHError(.invalidArgument, "outputLimit must not be negative") }
        let (env, fallback) = try Self.environmentRequests(environment, command: command)
        let request = ExecRequest(command: command, fallback: fallback, stdin: stdin,
                                  environment: env, outputLimit: outputLimit)
        return try await core.execute(request, logger: logger)
    }

    /// Validated env requests, sorted, and the command to run instead when the server
    /// refuses one (`export NAME='value' ...; command`, quoted for POSIX shells).
    static func environmentRequests(_ environment: [String: String], command: String) throws(SSHError)
        -> (env: [(key: String, value: String)], fallback: String?)
    {
        let env = environment.sorted { $0.key < $1.key }
        for (name, value) in env {
            guard SSHShellQuoting.isValidEnvironmentName(name) else {
                throw SSHError(.invalidArgument, "invalid environment variable name \(SSHShellQuoting.quote(name))")
            }
            if value.utf8.contains(0) { throw SSHError(.invalidArgument, "environment value of \(name) contains NUL") }
        }
        guard !env.isEmpty else { return (env, nil) }
        let assignments = env.map { "\($0.key)=\(SSHShellQuoting.quote($0.value))" }.joined(separator: " ")
        return (env, "export \(assignments); \(command)")
    }

    /// Closes the connection: open operations fail with `connectionClosed`,
    /// the socket and worker thread are gone when this returns. Idempotent.
    /// Jump hosts it runs through are closed after it, last hop first.
    public func close() async {
        await core.close()
        proxy?.stop()
        for hop in jumpConnections.reversed() { await hop.close() }
    }
}
