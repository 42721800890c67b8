internal import SSHCore
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What a bridge tells its owner, on the connection's worker thread. The handlers
/// must not block: `opened` and `failed` may write a short reply to the socket
/// (a SOCKS answer) and return.
struct BridgeHandlers: Sendable {
    /// The channel is open; nothing has moved yet. The fd is the bridged socket.
    var opened: @Sendable (_ fd: Int32) -> Void = { _ in }
    /// The channel never opened; the socket is closed right after this returns.
    var failed: @Sendable (_ fd: Int32, _ error: SSHError) -> Void = { _, _ in }
    /// The bridge ended (after `opened` or `failed`): nil when it closed normally
    /// (both sides done, or the socket's client went away), else why it ended.
    var finished: @Sendable (_ error: SSHError?, _ counts: BridgeCounts) -> Void = { _, _ in }
    /// A terminal bridge ended (after `opened` or `failed`): how, or why it failed.
    var ended: @Sendable (Result<SSHJoinedTerminal.End, SSHError>) -> Void = { _ in }
}

/// Bytes one bridge moved: from the channel to the socket and back.
struct BridgeCounts: Sendable, Equatable {
    var toSocket: UInt64 = 0
    var fromSocket: UInt64 = 0
}

/// A direct channel joined to a socket inside the core: the bytes never reach Swift.
/// The core owns the fd from `start` on and closes it when the bridge ends.
final class CoreBridge: Sendable {
    private let handle = CoreOpHandle()
    let handlers: BridgeHandlers

    private init(handlers: BridgeHandlers) {
        self.handlers = handlers
    }

    /// Starts a bridge of `fd` to `target` through `connection`. On a thrown error
    /// the fd is already closed and no handler runs.
    static func start(on connection: CoreConnection, target: DirectTarget, fd: Int32, firstData: [UInt8] = [],
                      bufferLimit: Int, handlers: BridgeHandlers) throws(SSHError) -> CoreBridge {
        let storage = StreamSpecStorage(StreamRequest(
            command: nil, direct: target, fallback: nil, environment: [], pty: nil,
            bufferLimit: bufferLimit, timeout: nil))
        defer { withExtendedLifetime(storage) {} }
        return try start(handlers: handlers) { callbacks, ctx, err in
            firstData.withUnsafeBufferPointer { first in
                sshcore_bridge_start(connection.pointer.raw, &storage.spec, fd, first.baseAddress, first.count,
                                     callbacks, coreBridgeDone, ctx, err)
            }
        }
    }

    /// Starts `request` (a session with a PTY) joined to `fd` inside the core; `ended`
    /// runs once, on the worker, with how it ended. On a thrown error the fd is
    /// already closed and no handler runs.
    static func startTerminal(on connection: CoreConnection, _ request: StreamRequest, fd: Int32, detachByte: UInt8?,
                              handlers: BridgeHandlers) throws(SSHError) -> CoreBridge {
        let storage = StreamSpecStorage(request)
        defer { withExtendedLifetime(storage) {} }
        return try start(handlers: handlers) { callbacks, ctx, err in
            sshcore_bridge_terminal_start(connection.pointer.raw, &storage.spec, fd, detachByte.map(Int32.init) ?? -1,
                                          callbacks, coreTerminalDone, ctx, err)
        }
    }

    /// Tells the PTY of a terminal bridge its new size.
    func resize(_ size: SSHTerminalSize) throws(SSHError) {
        try size.validate()
        guard let op = handle.op else { throw SSHError(.invalidState, "the terminal has not started") }
        var err = sshcore_error()
        if sshcore_stream_resize(op.raw, UInt32(size.columns), UInt32(size.rows), UInt32(size.pixelWidth),
                                 UInt32(size.pixelHeight), &err) != 0 {
            throw SSHError(core: err)
        }
    }

    /// Starts a bridge through `open`, which calls the core with the callbacks and
    /// the context the core hands back; on a thrown error no handler runs.
    static func start(handlers: BridgeHandlers,
                      _ open: (UnsafeMutablePointer<sshcore_bridge_callbacks>, UnsafeMutableRawPointer,
                               UnsafeMutablePointer<sshcore_error>) -> OpaquePointer?) throws(SSHError) -> CoreBridge {
        let bridge = CoreBridge(handlers: handlers)
        // the core holds this reference until `released`
        let ctx = Unmanaged.passRetained(bridge).toOpaque()
        var callbacks = sshcore_bridge_callbacks(
            ctx: ctx, opened: coreBridgeOpened, failed: coreBridgeFailed, released: coreBridgeReleased)
        var err = sshcore_error()
        guard let op = open(&callbacks, ctx, &err) else {
            Unmanaged<CoreBridge>.fromOpaque(ctx).release()
            throw SSHError(core: err)
        }
        bridge.handle.attach(op)
        return bridge
    }

    /// Ends the bridge at once (any thread, never blocks): the channel and the socket close.
    func cancel() {
        handle.cancel()
    }

    /// Waits for the open that the handlers report to `opened`; cancelling the calling
    /// task cancels the bridge, and so does a failure, which is returned.
    func waitUntilOpen(_ opened: OpenWaiter) async -> Result<Void, SSHError> {
        let r = await withTaskCancellationHandler {
            await opened.wait()
        } onCancel: {
            cancel()
        }
        if case .failure = r { cancel() }
        return r
    }

    var counts: BridgeCounts {
        guard let op = handle.op else { return BridgeCounts() }
        var c = BridgeCounts()
        sshcore_bridge_get_counts(op.raw, &c.toSocket, &c.fromSocket)
        return c
    }

    fileprivate static func from(_ ctx: UnsafeMutableRawPointer?) -> CoreBridge {
        Unmanaged<CoreBridge>.fromOpaque(ctx!).takeUnretainedValue()
    }
}

private let coreBridgeOpened: @convention(c) (UnsafeMutableRawPointer?, Int32) -> Void = { ctx, fd in
    CoreBridge.from(ctx).handlers.opened(fd)
}

private let coreBridgeFailed: @convention(c) (UnsafeMutableRawPointer?, Int32, UnsafePointer<sshcore_error>) -> Void = {
    ctx, fd, err in
    CoreBridge.from(ctx).handlers.failed(fd, SSHError(core: err.pointee))
}

private let coreBridgeReleased: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
    Unmanaged<CoreBridge>.fromOpaque(ctx!).release()
}

let coreBridgeDone: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer) -> Void = { ctx, op in
    let bridge = CoreBridge.from(ctx)
    let err = sshcore_op_error(op).pointee
    var c = BridgeCounts()
    sshcore_bridge_get_counts(op, &c.toSocket, &c.fromSocket)
    bridge.handlers.finished(err.code == Int32(sshcore_code.SSHCORE_E_OK.rawValue) ? nil : SSHError(core: err), c)
}

let coreTerminalDone: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer) -> Void = { ctx, op in
    let bridge = CoreBridge.from(ctx)
    let err = sshcore_op_error(op).pointee
    guard err.code == Int32(sshcore_code.SSHCORE_E_OK.rawValue) else {
        bridge.handlers.ended(.failure(SSHError(core: err)))
        return
    }
    switch sshcore_bridge_end_of(op) {
    case SSHCORE_BRIDGE_END_DETACHED: bridge.handlers.ended(.success(.detached))
    case SSHCORE_BRIDGE_END_FD: bridge.handlers.ended(.success(.terminalClosed))
    default: bridge.handlers.ended(.success(.exited(CoreExit.status(of: op))))
    }
}

extension CoreConnection {
    /// A socket pair whose one end is bridged to `target` through this connection;
    /// returns the other end once the channel is open (the caller owns it).
    /// Cancelling the calling task cancels the open.
    func openBridgedSocket(to target: DirectTarget, bufferLimit: Int) async throws(SSHError) -> (fd: Int32, bridge: CoreBridge) {
        var sv: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &sv) == 0 else {
            var e = SSHError(.systemError, "socketpair failed")
            e.systemErrno = errno
            throw e
        }
        let local = sv[1]
        let opened = OpenWaiter()
        let bridge: CoreBridge
        do {
            bridge = try CoreBridge.start(
                on: self, target: target, fd: sv[0], bufferLimit: bufferLimit,
                handlers: BridgeHandlers(
                    opened: { _ in opened.resume(.success(())) },
                    failed: { _, error in opened.resume(.failure(error)) },
                    finished: { error, _ in opened.resume(.failure(error ?? SSHError(.channelClosed, "the channel closed"))) }))
        } catch {
            Glibc.close(local)
            throw error
        }
        if case .failure(let e) = await bridge.waitUntilOpen(opened) {
            Glibc.close(local)
            throw e
        }
        return (local, bridge)
    }
}

/// A one-shot result that a worker callback delivers and any number of tasks await.
/// A waiting task that is cancelled gets `cancelled` at once; the result stays for
/// the others and for later waits.
final class ResultWaiter<Value: Sendable>: Sendable {
    private struct S {
        var result: Result<Value, SSHError>?
        var waiters: [UInt64: CheckedContinuation<Result<Value, SSHError>, Never>] = [:]
        var cancelled: Set<UInt64> = []
        var nextID: UInt64 = 0
    }
    private let s = Mutex(S())

    func resume(_ r: Result<Value, SSHError>) {
        let all = s.withLock { st -> [CheckedContinuation<Result<Value, SSHError>, Never>] in
            guard st.result == nil else { return [] }
            st.result = r
            defer { st.waiters = [:] }
            return Array(st.waiters.values)
        }
        for c in all { c.resume(returning: r) }
    }

    func wait() async -> Result<Value, SSHError> {
        let id = s.withLock { st -> UInt64 in
            st.nextID += 1
            return st.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { c in
                let done = s.withLock { st -> Result<Value, SSHError>? in
                    if let r = st.result { return r }
                    // a cancel that came before the continuation was stored
                    if st.cancelled.remove(id) != nil { return .failure(SSHError(.cancelled, "the wait was cancelled")) }
                    st.waiters[id] = c
                    return nil
                }
                if let done { c.resume(returning: done) }
            }
        } onCancel: {
            let c = s.withLock { st -> CheckedContinuation<Result<Value, SSHError>, Never>? in
                guard let c = st.waiters.removeValue(forKey: id) else {
                    if st.result == nil { st.cancelled.insert(id) }
                    return nil
                }
                return c
            }
            c?.resume(returning: .failure(SSHError(.cancelled, "the wait was cancelled")))
        }
    }
}

typealias OpenWaiter = ResultWaiter<Void>
