extension SSHConnection {
    /// Starts an SFTP session on a new channel of this connection. Throws
    /// `sftpUnavailable` when the server has no SFTP subsystem. Close it with
    /// `SFTPClient.close()`, or use `withSFTP`.
    public func openSFTP(options: SFTPOptions = SFTPOptions()) async throws(SSHError) -> SFTPClient {
        if let t = options.replyTimeout, t <= .zero {
            throw SSHError(.invalidArgument, "replyTimeout must be positive")
        }
        let session = try await SFTPSession.start(on: core, replyTimeout: options.replyTimeout)
        logger.debug("sftp session started", metadata: [
            "version": "\(session.version)", "extensions": "\(session.extensions.keys.sorted())"])
        return SFTPClient(session: session, connection: self)
    }

    /// Runs `body` with an SFTP session and closes it when `body` ends.
    public func withSFTP<R>(options: SFTPOptions = SFTPOptions(), _ body: (SFTPClient) async throws -> R) async throws -> R {
        let sftp = try await openSFTP(options: options)
        defer { sftp.close() }
        return try await body(sftp)
    }
}

/// Settings of one SFTP session.
public struct SFTPOptions: Sendable {
    /// A request left without a reply this long means the server is stalled: the session
    /// fails with `timedOut` (every waiting call, a transfer's temp file removed) and its
    /// channel closes; the connection stays. nil waits forever. A dead connection is
    /// found sooner by `SSHConfiguration.keepalive`.
    public var replyTimeout: Duration?

    /// Session settings; `openSFTP` throws `invalidArgument` for a `replyTimeout` that is
    /// not positive.
    public init(replyTimeout: Duration? = .seconds(60)) {
        self.replyTimeout = replyTimeout
    }
}
