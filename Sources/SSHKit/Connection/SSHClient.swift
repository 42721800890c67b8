#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Opens SSH connections.
///
/// ```swift
/// let config = SSHConfiguration(host: "example.com", user: "deploy",
///                               authentication: .privateKey(path: "/home/me/.ssh/id_ed25519"),
///                               hostKeyPolicy: .pinned(["SHA256:..."]))
/// let uname = try await SSHClient.withConnection(config) { conn in
///     try await conn.execute("uname -a").stdoutString
/// }
/// ```
public enum SSHClient {
    /// Connects, verifies the host key with the configured policy and
    /// authenticates. Cancelling the calling task ends the attempt with
    /// `.cancelled` promptly, whatever the server does.
    ///
    /// With `jumpHosts`, the hops are connected in order (see `JumpChain`); a failure
    /// at any hop closes the hops before it, and the error names the hop.
    ///
    /// - Throws: `SSHError` — `nameResolutionFailed`, `connectionRefused`,
    ///   `hostUnreachable`, `connectTimeout`, `keyExchangeFailed`,
    ///   `hostKeyRejected`, `authenticationFailed`, `privateKeyUnreadable`,
    ///   `agentUnavailable`, `disconnected`, `cancelled`, `invalidArgument`.
    public static func connect(_ configuration: SSHConfiguration) async throws(SSHError) -> SSHConnection {
        do {
            try configuration.validate()
        } catch {
            if let fd = configuration.connectedSocket { close(fd) } // owned by this call
            throw error
        }
        if configuration.jumpHosts.isEmpty {
            return try await connectDirectly(configuration)
        }
        return try await JumpChain.connect(configuration)
    }

    /// Connects to `configuration`'s host through `jumpHost`, an open connection that may
    /// carry many others (`ssh -J`, with the jump connection shared): the host is reached
    /// as `jumpHost`'s server sees it, verified and authenticated with `configuration`.
    /// The new connection does not own `jumpHost`: closing it leaves `jumpHost` open.
    /// - Throws: as `connect(_:)`; `invalidArgument` when `configuration` names jump
    ///   hosts of its own; `connectionRefused`, `hostUnreachable` or `channelOpenFailed`
    ///   when `jumpHost`'s server cannot reach the host.
    public static func connect(_ configuration: SSHConfiguration, through jumpHost: SSHConnection)
        async throws(SSHError) -> SSHConnection
    {
        try configuration.validate()
        guard configuration.jumpHosts.isEmpty, configuration.proxyCommand == nil, configuration.connectedSocket == nil
        else {
            throw SSHError(.invalidArgument, "a connection through a jump host takes no jumpHosts, proxyCommand or socket")
        }
        return try await JumpChain.connect(configuration, through: jumpHost)
    }

    /// One connection over TCP, or over its `proxyCommand`'s stdin and stdout.
    static func connectDirectly(_ configuration: SSHConfiguration) async throws(SSHError) -> SSHConnection {
        guard let command = configuration.proxyCommand else {
            return try await CoreConnection.connect(configuration)
        }
        let (proxy, fd) = try ProxyCommandProcess.start(command, logger: configuration.logger)
        var proxied = configuration
        proxied.connectedSocket = fd
        do {
            return try await CoreConnection.connect(proxied, proxy: proxy)
        } catch {
            // a command that failed (nc to a closed port, a typo) ends at once: say so
            // rather than what its closed socket looked like to the SSH layer
            let ended = error.code == .cancelled ? nil : await proxy.exitReason(within: .milliseconds(300))
            proxy.stop()
            guard let ended else { throw error }
            var e = SSHError(.proxyCommandFailed,
                             "ProxyCommand \(command) \(ended) before the connection was established (\(error.message))")
            e.host = configuration.host
            e.port = configuration.port
            e.cause = error
            throw e
        }
    }

    /// Connects, runs `body`, and closes the connection afterwards, also when
    /// `body` throws or the task is cancelled.
    public static func withConnection<R: Sendable>(
        _ configuration: SSHConfiguration,
        _ body: (SSHConnection) async throws -> R
    ) async throws -> R {
        let connection = try await connect(configuration)
        do {
            let result = try await body(connection)
            await connection.close()
            return result
        } catch {
            await connection.close()
            throw error
        }
    }
}
