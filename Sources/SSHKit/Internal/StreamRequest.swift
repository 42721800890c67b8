internal import SSHCore

/// What a streamed channel is started with (validated by the public layer).
struct DirectTarget: Sendable {
    var unixSocket: Bool
    var host: String
    var port: Int
    var originatorHost: String
    var originatorPort: Int
}

struct StreamRequest: Sendable {
    var command: String?
    /// `command` names a subsystem (e.g. "sftp") rather than a command line.
    var subsystem = false
    /// A direct channel instead of a session: where it goes (host and port, or a
    /// Unix socket path with port 0) and where it claims to come from.
    var direct: DirectTarget?
    var fallback: String?
    /// Without a fallback: a variable the server refuses is skipped.
    var environmentOptional = false
    var environment: [(key: String, value: String)]
    var pty: SSHTerminal?
    var bufferLimit: Int
    var timeout: Duration?
}

/// The C spec of a streamed channel, with storage that lives as long as this value.
final class StreamSpecStorage {
    let arena = CStringArena()
    let env: UnsafeMutableBufferPointer<sshcore_env_var>
    let pty: UnsafeMutablePointer<sshcore_pty_spec>?
    var spec = sshcore_stream_spec()

    init(_ r: StreamRequest) {
        env = .allocate(capacity: max(1, r.environment.count))
        for (i, e) in r.environment.enumerated() {
            env.baseAddress!.advanced(by: i).initialize(to: sshcore_env_var(name: arena.dup(e.key)!, value: arena.dup(e.value)!))
        }
        if let t = r.pty {
            pty = .allocate(capacity: 1)
            pty!.initialize(to: sshcore_pty_spec(
                term: arena.dup(t.term)!, cols: UInt32(t.size.columns), rows: UInt32(t.size.rows),
                px_width: UInt32(t.size.pixelWidth), px_height: UInt32(t.size.pixelHeight)))
        } else {
            pty = nil
        }
        spec.command = arena.dup(r.command)
        spec.subsystem = r.subsystem ? 1 : 0
        if let d = r.direct {
            spec.kind = d.unixSocket ? SSHCORE_CHANNEL_DIRECT_STREAMLOCAL : SSHCORE_CHANNEL_DIRECT_TCPIP
            spec.target_host = arena.dup(d.host)
            spec.target_port = Int32(clamping: d.port)
            spec.originator_host = arena.dup(d.originatorHost)
            spec.originator_port = Int32(clamping: d.originatorPort)
        }
        spec.fallback_command = arena.dup(r.fallback)
        spec.env_optional = r.environmentOptional ? 1 : 0
        spec.env = r.environment.isEmpty ? nil : UnsafePointer(env.baseAddress)
        spec.env_count = r.environment.count
        spec.pty = UnsafePointer(pty)
        spec.buffer_limit = r.bufferLimit
        if let t = r.timeout { spec.timeout_ms = Int32(clamping: max(1, t.milliseconds)) }
    }

    deinit {
        pty?.deallocate()
        env.deallocate()
        arena.wipeAndFree()
    }
}

extension CoreConnection {
    /// Starts a streamed channel; `ctx` is a retained StreamChannel the core hands back
    /// to every callback and releases through `released`.
    func startStream(_ r: StreamRequest, ctx: UnsafeMutableRawPointer, err: UnsafeMutablePointer<sshcore_error>)
        -> OpaquePointer?
    {
        let storage = StreamSpecStorage(r)
        var callbacks = StreamChannel.callbacks(ctx)
        let op = sshcore_stream_start(pointer.raw, &storage.spec, &callbacks, coreStreamDone, ctx, err)
        withExtendedLifetime(storage) {}
        return op
    }
}
