internal import SSHCore
import Synchronization

/// Input and controls of a streamed channel: writes paced by the peer's window (each
/// cancellable on its own), queued sends, EOF, signals and window changes.
extension StreamChannel {
    func requireOp(_ call: String) throws(SSHError) -> OpaquePointer {
        guard let op = handle.op else {
            throw SSHMisuse.check(SSHError(.invalidState, "the channel has not started"), call: call)
        }
        return op.raw
    }

    func write(_ bytes: [UInt8]) async throws(SSHError) {
        let op = try requireOp("write")
        let box = WriteBox()
        let r: Result<Void, SSHError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                box.set(continuation)
                let ctx = Unmanaged.passRetained(box).toOpaque()
                var err = sshcore_error()
                var id: UInt64 = 0
                let rc = bytes.withUnsafeBufferPointer { buf in
                    sshcore_stream_write(op, buf.baseAddress, buf.count, coreWriteDone, ctx, &id, &err)
                }
                if rc != 0 {
                    Unmanaged<WriteBox>.fromOpaque(ctx).release()
                    box.finish(.failure(SSHError(core: err)))
                } else {
                    box.started(op: OpPointer(raw: op), id: id)
                }
            }
        } onCancel: {
            box.cancel()
        }
        try r.get()
    }

    /// Queues bytes for stdin without waiting for them to go out (protocols that keep
    /// their own bound on what is in flight, like SFTP). Queued bytes always go out
    /// whole and in order: nothing cancels them halfway through.
    func send(_ bytes: [UInt8]) throws(SSHError) {
        let op = try requireOp("send")
        var err = sshcore_error()
        var id: UInt64 = 0
        let rc = bytes.withUnsafeBufferPointer { buf in
            sshcore_stream_write(op, buf.baseAddress, buf.count, nil, nil, &id, &err)
        }
        if rc != 0 { throw SSHError(core: err) }
    }

    func finishInput() throws(SSHError) {
        let op = try requireOp("finish")
        var err = sshcore_error()
        if sshcore_stream_send_eof(op, &err) != 0 { throw SSHError(core: err) }
    }

    func signal(_ name: String) throws(SSHError) {
        let op = try requireOp("signal")
        var err = sshcore_error()
        if sshcore_stream_signal(op, name, &err) != 0 { throw SSHError(core: err) }
    }

    func resize(_ size: SSHTerminalSize) throws(SSHError) {
        try size.validate()
        let op = try requireOp("resize")
        var err = sshcore_error()
        if sshcore_stream_resize(op, UInt32(size.columns), UInt32(size.rows), UInt32(size.pixelWidth),
                                 UInt32(size.pixelHeight), &err) != 0 {
            throw SSHError(core: err)
        }
    }
}

/// One write's continuation and its cancel handle.
final class WriteBox: Sendable {
    private struct S {
        var continuation: CheckedContinuation<Result<Void, SSHError>, Never>?
        var op: OpPointer?
        var id: UInt64 = 0
        var cancelled = false
        var done = false
    }
    private let s = Mutex(S())

    func set(_ c: CheckedContinuation<Result<Void, SSHError>, Never>) { s.withLock { $0.continuation = c } }

    func started(op: OpPointer, id: UInt64) {
        let cancelNow = s.withLock { st -> Bool in
            st.op = op
            st.id = id
            return st.cancelled && !st.done
        }
        if cancelNow { sshcore_stream_write_cancel(op.raw, id) }
    }

    func cancel() {
        let target = s.withLock { st -> (OpPointer, UInt64)? in
            st.cancelled = true
            guard let op = st.op, !st.done else { return nil }
            return (op, st.id)
        }
        if let (op, id) = target { sshcore_stream_write_cancel(op.raw, id) }
    }

    func finish(_ r: Result<Void, SSHError>) {
        let c = s.withLock { st -> CheckedContinuation<Result<Void, SSHError>, Never>? in
            guard !st.done else { return nil }
            st.done = true
            defer { st.continuation = nil }
            return st.continuation
        }
        c?.resume(returning: r)
    }
}

private let coreWriteDone: @convention(c) (UnsafeMutableRawPointer?, Int32) -> Void = { ctx, code in
    let box = Unmanaged<WriteBox>.fromOpaque(ctx!).takeRetainedValue()
    if code == Int32(sshcore_code.SSHCORE_E_OK.rawValue) {
        box.finish(.success(()))
    } else {
        var e = sshcore_error()
        e.code = code
        box.finish(.failure(SSHError(core: e)))
    }
}
