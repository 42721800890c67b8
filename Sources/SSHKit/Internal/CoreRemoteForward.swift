internal import SSHCore
import Synchronization

/// What a remote forward op tells its owner, on the connection's worker thread
/// (never blocking there).
struct RemoteForwardHandlers: Sendable {
    var listening: @Sendable (_ port: Int) -> Void = { _ in }
    /// A forwarded connection waits, open; answer with bridge, stream or reject.
    var incoming: @Sendable (_ id: UInt64, _ originator: String, _ originatorPort: Int) -> Void = { _, _, _ in }
    /// The forward ended: nil never (it runs until cancelled), else why.
    var finished: @Sendable (_ error: SSHError) -> Void = { _ in }
}

/// A `tcpip-forward` request and the connections the server forwards for it.
final class CoreRemoteForward: Sendable {
    private let handle = CoreOpHandle()
    let handlers: RemoteForwardHandlers

    private init(handlers: RemoteForwardHandlers) {
        self.handlers = handlers
    }

    static func start(on connection: CoreConnection, address: String, port: Int, acceptTimeout: Duration,
                      handlers: RemoteForwardHandlers) throws(SSHError) -> CoreRemoteForward {
        let forward = CoreRemoteForward(handlers: handlers)
        let ctx = Unmanaged.passRetained(forward).toOpaque()
        var callbacks = sshcore_rforward_callbacks(
            ctx: ctx, listening: coreRForwardListening, incoming: coreRForwardIncoming, released: coreRForwardReleased)
        var err = sshcore_error()
        let op = sshcore_rforward_start(connection.pointer.raw, address, Int32(port),
                                        Int32(clamping: acceptTimeout.milliseconds), &callbacks,
                                        coreRForwardDone, ctx, &err)
        guard let op else {
            Unmanaged<CoreRemoteForward>.fromOpaque(ctx).release()
            throw SSHError(core: err)
        }
        forward.handle.attach(op)
        return forward
    }

    private var op: OpPointer? { handle.op }

    /// Stops the forward: the server is asked to stop listening and waiting
    /// connections are closed. Handed-on connections are not touched.
    func cancel() {
        handle.cancel()
    }

    /// Joins waiting connection `id` to `fd` (owned by the core from here on).
    func bridge(_ id: UInt64, fd: Int32, bufferLimit: Int, handlers: BridgeHandlers) throws(SSHError) -> CoreBridge {
        guard let op else { throw SSHError(.invalidState, "the forward has not started") }
        return try CoreBridge.start(handlers: handlers) { callbacks, ctx, err in
            sshcore_rforward_bridge(op.raw, id, fd, bufferLimit, callbacks, coreBridgeDone, ctx, err)
        }
    }

    /// Takes waiting connection `id` as a stream.
    func stream(_ id: UInt64, bufferLimit: Int) async throws(SSHError) -> StreamChannel {
        guard let op else { throw SSHError(.invalidState, "the forward has not started") }
        let channel = StreamChannel()
        try await channel.start(call: "forwardRemotePort") { ctx, err in
            var callbacks = StreamChannel.callbacks(ctx)
            return sshcore_rforward_stream(op.raw, id, bufferLimit, &callbacks, coreStreamDone, ctx, err)
        }
        return channel
    }

    func reject(_ id: UInt64) {
        if let op { sshcore_rforward_reject(op.raw, id) }
    }

    fileprivate static func from(_ ctx: UnsafeMutableRawPointer?) -> CoreRemoteForward {
        Unmanaged<CoreRemoteForward>.fromOpaque(ctx!).takeUnretainedValue()
    }
}

private let coreRForwardListening: @convention(c) (UnsafeMutableRawPointer?, Int32) -> Void = { ctx, port in
    CoreRemoteForward.from(ctx).handlers.listening(Int(port))
}

private let coreRForwardIncoming: @convention(c) (UnsafeMutableRawPointer?, UInt64, UnsafePointer<CChar>, Int32)
    -> Void = { ctx, id, originator, port in
        CoreRemoteForward.from(ctx).handlers.incoming(id, String(cString: originator), Int(port))
    }

private let coreRForwardReleased: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
    Unmanaged<CoreRemoteForward>.fromOpaque(ctx!).release()
}

private let coreRForwardDone: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer) -> Void = { ctx, op in
    CoreRemoteForward.from(ctx).handlers.finished(SSHError(core: sshcore_op_error(op).pointee))
}
