extension SSHConnection {
    /// Starts an SFTP session on a new channel of this connection. Throws
    /// `sftpUnavailable` when the server has no SFTP subsystem. Close it with
    /// `SFTPClient.close()`, or use `withSFTP`.
    public func openSFTP() async throws(SSHError) -> SFTPClient {
        let session = try await SFTPSession.start(on: core)
        logger.debug("sftp session started", metadata: [
            "version": "\(session.version)", "extensions": "\(session.extensions.keys.sorted())"])
        return SFTPClient(session: session, connection: self)
    }

    /// Runs `body` with an SFTP session and closes it when `body` ends.
    public func withSFTP<R>(_ body: (SFTPClient) async throws -> R) async throws -> R {
        let sftp = try await openSFTP()
        defer { sftp.close() }
        return try await body(sftp)
    }
}
