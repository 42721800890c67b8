/// A byte stream through the server to a host and port as the server sees them
/// (`direct-tcpip`, what `ssh -L` and `ssh -W` use) or to one of the server's Unix
/// sockets (`direct-streamlocal@openssh.com`).
///
/// `output` is what the far end sends, with backpressure: a reader that falls behind
/// closes the SSH window (`SSHChannelOptions.bufferLimit`). `input` writes to the far
/// end, and its `finish()` half-closes: the far end reads EOF and may still answer.
/// `cancel()` closes both ways at once; readers and writers then fail with `cancelled`.
public final class SSHTunnel: Sendable {
    let channel: StreamChannel
    /// "host:port" or the socket path, for messages.
    public let target: String

    init(channel: StreamChannel, target: String) {
        self.channel = channel
        self.target = target
    }

    /// Bytes from the far end as they arrive; ends when the far end closes its side.
    public var output: SSHByteStream { SSHByteStream(channel: channel, kind: .stdout) }

    /// Writes to the far end; `input.finish()` sends EOF (half-close).
    public var input: SSHByteWriter { SSHByteWriter(channel: channel) }

    /// Closes the channel at once, both directions (never blocks). Idempotent.
    public func cancel() { channel.cancel() }

    /// Waits until the channel has closed: normally once both sides sent EOF and the
    /// server closed it; throws what ended it otherwise (`cancelled` after `cancel()`).
    /// A cancel of the waiting task throws `cancelled` at once; the tunnel stays open.
    public func waitUntilClosed() async throws(SSHError) {
        _ = try await channel.exitStatus()
    }
}

extension SSHConnection {
    /// Opens a tunnel to `host`:`port` as the server resolves and reaches them. A target
    /// that refuses or cannot be reached is `channelOpenFailed` (the server's reason is in
    /// the message); the connection is unaffected. `originator` is what the server is told
    /// the connection came from (it may log it).
    public func openTunnel(
        toHost host: String, port: Int, options: SSHChannelOptions = SSHChannelOptions(),
        originator: (host: String, port: Int) = ("127.0.0.1", 0)
    ) async throws(SSHError) -> SSHTunnel {
        guard !host.isEmpty, !host.utf8.contains(0) else { throw SSHError(.invalidArgument, "tunnel host must not be empty") }
        guard (1...65535).contains(port) else { throw SSHError(.invalidArgument, "tunnel port \(port) out of range 1...65535") }
        guard (0...65535).contains(originator.port), !originator.host.utf8.contains(0) else {
            throw SSHError(.invalidArgument, "bad originator \(originator.host):\(originator.port)")
        }
        return try await startTunnel(DirectTarget(unixSocket: false, host: host, port: port, originatorHost: originator.host,
                                                  originatorPort: originator.port), name: "\(host):\(port)", options: options)
    }

    /// Opens a tunnel to the server's Unix socket at `path` (OpenSSH's
    /// `direct-streamlocal@openssh.com`; sshd allows it unless `AllowStreamLocalForwarding no`).
    public func openTunnel(toUnixSocket path: String, options: SSHChannelOptions = SSHChannelOptions())
        async throws(SSHError) -> SSHTunnel
    {
        guard !path.isEmpty, !path.utf8.contains(0) else { throw SSHError(.invalidArgument, "socket path must not be empty") }
        return try await startTunnel(DirectTarget(unixSocket: true, host: path, port: 0, originatorHost: "127.0.0.1",
                                                  originatorPort: 0), name: path, options: options)
    }

    /// Runs `body` with a tunnel to `host`:`port` and cancels it when `body` ends.
    public func withTunnel<R>(toHost host: String, port: Int, options: SSHChannelOptions = SSHChannelOptions(),
                              _ body: (SSHTunnel) async throws -> R) async throws -> R {
        let tunnel = try await openTunnel(toHost: host, port: port, options: options)
        defer { tunnel.cancel() }
        return try await body(tunnel)
    }

    private func startTunnel(_ target: DirectTarget, name: String, options: SSHChannelOptions)
        async throws(SSHError) -> SSHTunnel
    {
        try options.validate()
        let channel = StreamChannel()
        try await channel.start(on: core, StreamRequest(
            command: nil, direct: target, fallback: nil, environment: [], pty: nil,
            bufferLimit: options.bufferLimit, timeout: options.timeout))
        logger.trace("tunnel open", metadata: ["target": "\(name)"])
        return SSHTunnel(channel: channel, target: name)
    }
}
