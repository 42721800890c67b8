extension SSHConnection {
    /// Local forwarding (`ssh -L`): listens on `listen` and sends every client that
    /// connects through its own channel to `target`, as the server resolves and
    /// reaches it.
    ///
    /// ```swift
    /// let forward = try connection.forwardLocalPort(to: .tcp(host: "db.internal", port: 5432))
    /// print("postgres is at 127.0.0.1:\(forward.port!)")
    /// ```
    ///
    /// A target that refuses closes that client's socket (and reports a `failed`
    /// event with `channelOpenFailed`); the listener goes on. A connection cut before
    /// the target's end of stream reached the client (the SSH connection lost, the
    /// forward stopped) is reset (RST), never closed with a FIN that the client would
    /// take for a complete stream; the `failed` event says why. The forward keeps the
    /// connection alive while it runs, and stops when the connection ends.
    ///
    /// - Throws: `invalidArgument`, `invalidState` (the connection is closed),
    ///   `nameResolutionFailed` (the listen host), `systemError` (e.g. the address is
    ///   in use: `systemErrno` is `EADDRINUSE`).
    public func forwardLocalPort(_ listen: SSHListenAddress = .loopback(), to target: SSHForwardTarget,
                                 options: SSHForwardOptions = SSHForwardOptions()) throws(SSHError) -> SSHPortForward {
        try target.validate()
        return try startForward(listen, mode: .direct(target), kind: .local(target), options: options)
    }

    /// Dynamic forwarding (`ssh -D`): a SOCKS4, SOCKS4a and SOCKS5 proxy (CONNECT,
    /// no authentication) on `listen`, whose connections go out through channels
    /// to the hosts the clients name. Names are resolved by the server (SOCKS4a,
    /// SOCKS5 with a domain name), as with OpenSSH.
    ///
    /// A bad request gets the protocol's error reply and is closed; a target the
    /// server cannot reach gets SOCKS5 "connection refused" (5), "host unreachable"
    /// (4), "not allowed" (2) or "general failure" (1), or SOCKS4 "rejected" (0x5B).
    /// Bind it to loopback: anyone who can reach the proxy can use the connection.
    public func forwardDynamicPort(_ listen: SSHListenAddress = .loopback(),
                                   options: SSHForwardOptions = SSHForwardOptions()) throws(SSHError) -> SSHPortForward {
        try startForward(listen, mode: .socks, kind: .dynamic, options: options)
    }

    private func startForward(_ listen: SSHListenAddress, mode: ForwardListener.Mode, kind: SSHPortForward.Kind,
                              options: SSHForwardOptions) throws(SSHError) -> SSHPortForward {
        try options.validate()
        guard core.isReady else { throw SSHError(.invalidState, "the connection is closed") }
        let backlog = Int32(options.backlog)
        let fds: [Int32]
        let addresses: [SSHListenAddress]
        var unixPath: String?
        switch listen {
        case .tcp(let host, let port):
            let bound = try ListenSockets.listenTCP(host: host, port: port, backlog: backlog)
            fds = bound.map(\.fd)
            addresses = bound.map(\.address)
        case .unixSocket(let path):
            fds = [try ListenSockets.listenUnix(path: path, removeExisting: options.removeExistingSocket, backlog: backlog)]
            addresses = [listen]
            unixPath = path
        }
        let listener: ForwardListener
        do {
            listener = try ForwardListener(listenFDs: fds, unixPath: unixPath, mode: mode, options: options,
                                           connection: core, logger: logger)
        } catch {
            if let unixPath { _ = unlinkPath(unixPath) }
            throw error
        }
        try listener.start()
        logger.debug("forward listening", metadata: ["listen": "\(addresses)", "kind": "\(kind)"])
        return SSHPortForward(kind: kind, listenAddresses: addresses, listener: listener)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

private func unlinkPath(_ path: String) -> Int32 { unlink(path) }
