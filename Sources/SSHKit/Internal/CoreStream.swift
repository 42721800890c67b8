internal import SSHCore
import Synchronization

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

/// One streamed session channel: the bridge between the core's callbacks (on the
/// worker) and the async sequences, writer and exit status of SSHCommand and SSHShell.
///
/// Output chunks are queued per stream with an arrival number, so the merged view
/// can replay arrival order and the separate views can be read independently. Every
/// chunk handed out is reported to the core as consumed, which is what lets the
/// core read more: a slow consumer closes the SSH window.
final class StreamChannel: Sendable {
    enum Kind: Int { case stdout = 0, stderr = 1, merged = 2 }

    struct Item {
        var seq: UInt64
        var bytes: [UInt8]
    }

    private struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<Result<(Int, [UInt8])?, SSHError>, Never>
    }

    private struct State {
        var queues: [[Item]] = [[], []]
        var heads: [Int] = [0, 0]
        var nextSeq: UInt64 = 0
        var waiters: [Waiter?] = [nil, nil, nil]
        var nextWaiterID: UInt64 = 0
        var start: CheckedContinuation<Result<Bool, SSHError>, Never>?
        var startResult: Result<Bool, SSHError>?
        /// Set when the core completed the operation.
        var end: Result<SSHExitStatus, SSHError>?
        var exitWaiters = WaitList<Result<SSHExitStatus, SSHError>>()
        var op: OpPointer?
        var cancelRequested = false
        /// The peer sent EOF: readers end once the queues are drained.
        var eof = false
    }

    private let state = Mutex(State())

    deinit {
        if let op = state.withLock({ $0.op }) { sshcore_op_release(op.raw) }
    }

    // MARK: starting

    /// Starts the channel and waits until the command or shell runs (or failed).
    func start(on connection: CoreConnection, _ request: StreamRequest) async throws(SSHError) {
        try await start(call: request.command == nil ? "startShell" : "startCommand") { ctx, err in
            connection.startStream(request, ctx: ctx, err: err)
        }
    }

    /// Starts the channel through `open` (which calls the core with the context the
    /// core hands back to every callback) and waits until it runs or failed.
    func start(call: String,
               _ open: (UnsafeMutableRawPointer, UnsafeMutablePointer<sshcore_error>) -> OpaquePointer?)
        async throws(SSHError)
    {
        let result: Result<Bool, SSHError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                state.withLock { $0.start = continuation }
                // the core holds this box until `released`
                let ctx = Unmanaged.passRetained(self).toOpaque()
                var err = sshcore_error()
                guard let op = open(ctx, &err) else {
                    Unmanaged<StreamChannel>.fromOpaque(ctx).release()
                    let e = SSHMisuse.check(SSHError(core: err), call: call)
                    resumeStart(.failure(e))
                    return
                }
                let cancelNow = state.withLock { s -> Bool in
                    s.op = OpPointer(raw: op)
                    return s.cancelRequested
                }
                if cancelNow { sshcore_op_cancel(op) }
            }
        } onCancel: {
            cancel()
        }
        if case .failure(let e) = result { throw e }
    }

    private func resumeStart(_ r: Result<Bool, SSHError>) {
        let c = state.withLock { s -> CheckedContinuation<Result<Bool, SSHError>, Never>? in
            guard s.startResult == nil else { return nil }
            s.startResult = r
            defer { s.start = nil }
            return s.start
        }
        c?.resume(returning: r)
    }

    var usedEnvironmentFallback: Bool {
        state.withLock { if case .success(true) = $0.startResult { true } else { false } }
    }

    // MARK: core callbacks (worker thread, or a cancelling thread for `finished`)

    fileprivate func started(fallback: Bool) {
        resumeStart(.success(fallback))
    }

    fileprivate func received(stream: Int, bytes: [UInt8]) {
        let handOff = state.withLock { s -> (CheckedContinuation<Result<(Int, [UInt8])?, SSHError>, Never>, Int)? in
            guard s.end == nil else { return nil } // a late chunk after a cancel: dropped
            let seq = s.nextSeq
            s.nextSeq += 1
            // a waiting reader takes it directly when nothing older is queued for it
            if let w = s.waiters[stream], s.heads[stream] == s.queues[stream].count {
                s.waiters[stream] = nil
                return (w.continuation, stream)
            }
            if let w = s.waiters[Kind.merged.rawValue], s.heads[0] == s.queues[0].count,
               s.heads[1] == s.queues[1].count {
                s.waiters[Kind.merged.rawValue] = nil
                return (w.continuation, stream)
            }
            s.queues[stream].append(Item(seq: seq, bytes: bytes))
            return nil
        }
        if let (continuation, stream) = handOff {
            consumed(bytes.count)
            continuation.resume(returning: .success((stream, bytes)))
        }
    }

    fileprivate func receivedEOF() {
        let waiters = state.withLock { s -> [Waiter] in
            s.eof = true
            let w = s.waiters.compactMap { $0 }
            s.waiters = [nil, nil, nil]
            return w
        }
        // they look again, drain what is queued, then see the end
        for w in waiters { w.continuation.resume(returning: .success(nil)) }
    }

    fileprivate func finished(_ result: Result<SSHExitStatus, SSHError>) {
        let (waiters, exitWaiters) = state.withLock { s -> ([Waiter], [CheckedContinuation<Result<SSHExitStatus, SSHError>, Never>]) in
            guard s.end == nil else { return ([], []) }
            s.end = result
            let w = s.waiters.compactMap { $0 }
            s.waiters = [nil, nil, nil]
            return (w, s.exitWaiters.removeAll())
        }
        if case .failure(let e) = result { resumeStart(.failure(e)) }
        // readers drain what is queued before they see the end: let them ask again
        for w in waiters { w.continuation.resume(returning: .success(nil)) }
        for e in exitWaiters { e.resume(returning: result) }
    }

    // MARK: reading

    /// The next chunk of `kind`, or nil at the end; throws the failure that ended it.
    func next(_ kind: Kind) async throws(SSHError) -> (stream: Int, bytes: [UInt8])? {
        while true {
            // fast path: something is queued, or it is over
            enum Step { case item(Int, [UInt8]), end(SSHError?), wait }
            let step = state.withLock { s -> Step in
                if let (stream, bytes) = Self.dequeue(&s, kind) { return .item(stream, bytes) }
                if let end = s.end {
                    if case .failure(let e) = end { return .end(e) }
                    return .end(nil)
                }
                if s.eof { return .end(nil) }
                return .wait
            }
            switch step {
            case .item(let stream, let bytes):
                consumed(bytes.count)
                return (stream, bytes)
            case .end(let e):
                if let e { throw e }
                return nil
            case .wait:
                break
            }
            if Task.isCancelled { throw SSHError(.cancelled, "reading was cancelled") }
            let id = state.withLock { s -> UInt64 in s.nextWaiterID += 1; return s.nextWaiterID }
            let r: Result<(Int, [UInt8])?, SSHError> = await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let ready = state.withLock { s -> Bool in
                        if s.end != nil || s.eof || Self.hasQueued(s, kind) { return true }
                        precondition(s.waiters[kind.rawValue] == nil,
                                     "two tasks read the same output stream of one SSH channel at once")
                        s.waiters[kind.rawValue] = Waiter(id: id, continuation: continuation)
                        return false
                    }
                    if ready { continuation.resume(returning: .success(nil)) }
                }
            } onCancel: {
                let w = state.withLock { s -> Waiter? in
                    guard let w = s.waiters[kind.rawValue], w.id == id else { return nil }
                    s.waiters[kind.rawValue] = nil
                    return w
                }
                w?.continuation.resume(returning: .failure(SSHError(.cancelled, "reading was cancelled")))
            }
            switch r {
            case .success(let item?): return item
            case .success(nil): continue // woken: look again
            case .failure(let e): throw e
            }
        }
    }

    private static func hasQueued(_ s: State, _ kind: Kind) -> Bool {
        switch kind {
        case .stdout: s.heads[0] < s.queues[0].count
        case .stderr: s.heads[1] < s.queues[1].count
        case .merged: s.heads[0] < s.queues[0].count || s.heads[1] < s.queues[1].count
        }
    }

    private static func dequeue(_ s: inout State, _ kind: Kind) -> (Int, [UInt8])? {
        let stream: Int
        switch kind {
        case .stdout, .stderr:
            stream = kind.rawValue
            guard s.heads[stream] < s.queues[stream].count else { return nil }
        case .merged:
            let a = s.heads[0] < s.queues[0].count ? s.queues[0][s.heads[0]].seq : nil
            let b = s.heads[1] < s.queues[1].count ? s.queues[1][s.heads[1]].seq : nil
            switch (a, b) {
            case (nil, nil): return nil
            case (.some, nil): stream = 0
            case (nil, .some): stream = 1
            case (let x?, let y?): stream = x < y ? 0 : 1
            }
        }
        let bytes = s.queues[stream][s.heads[stream]].bytes
        s.queues[stream][s.heads[stream]].bytes = []
        s.heads[stream] += 1
        if s.heads[stream] == s.queues[stream].count {
            s.queues[stream].removeAll(keepingCapacity: true)
            s.heads[stream] = 0
        }
        return (stream, bytes)
    }

    private func consumed(_ n: Int) {
        guard n > 0, let op = state.withLock({ $0.op }) else { return }
        sshcore_stream_consumed(op.raw, n)
    }

    // MARK: end, input and control

    /// The channel's end. A cancel of the waiting task ends the wait at once with
    /// `cancelled`; the channel goes on (a later call still gets its status).
    func exitStatus() async throws(SSHError) -> SSHExitStatus {
        let cancelled = Result<SSHExitStatus, SSHError>.failure(
            SSHError(.cancelled, "waiting for the exit status was cancelled; the channel goes on"))
        let r = await waitInList(cancelled: cancelled) { c, id in
            state.withLock { s -> Result<SSHExitStatus, SSHError>? in
                if let end = s.end { return end }
                return s.exitWaiters.insert(c, id: id) ? nil : cancelled
            }
        } leave: { [self] id in
            state.withLock { $0.exitWaiters.remove(id) }
        }
        return try r.get()
    }

    var isFinished: Bool { state.withLock { $0.end != nil } }

    /// Cancels the channel (any thread, never blocks): it completes with `cancelled`,
    /// and the core signals the remote command and closes the channel.
    func cancel() {
        let op = state.withLock { s -> OpPointer? in
            s.cancelRequested = true
            return s.op
        }
        if let op { sshcore_op_cancel(op.raw) } // before the op exists, start() cancels it
    }

    private func requireOp(_ call: String) throws(SSHError) -> OpaquePointer {
        guard let op = state.withLock({ $0.op }) else {
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
        let op = try requireOp("resize")
        var err = sshcore_error()
        if sshcore_stream_resize(op, UInt32(size.columns), UInt32(size.rows), UInt32(size.pixelWidth),
                                 UInt32(size.pixelHeight), &err) != 0 {
            throw SSHError(core: err)
        }
    }

    // MARK: callbacks from C

    /// The core callbacks of a streamed channel whose context is a retained StreamChannel.
    static func callbacks(_ ctx: UnsafeMutableRawPointer) -> sshcore_stream_callbacks {
        sshcore_stream_callbacks(ctx: ctx, started: coreStreamStarted, data: coreStreamData, released: coreStreamReleased,
                                 eof: coreStreamEOF)
    }

    fileprivate static func from(_ ctx: UnsafeMutableRawPointer?) -> StreamChannel {
        Unmanaged<StreamChannel>.fromOpaque(ctx!).takeUnretainedValue()
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
    if code == Int32(sshcore_err.SSHCORE_E_OK.rawValue) {
        box.finish(.success(()))
    } else {
        var e = sshcore_error()
        e.code = code
        box.finish(.failure(SSHError(core: e)))
    }
}

private let coreStreamStarted: @convention(c) (UnsafeMutableRawPointer?, Int32) -> Void = { ctx, fallback in
    StreamChannel.from(ctx).started(fallback: fallback != 0)
}

private let coreStreamData: @convention(c) (UnsafeMutableRawPointer?, Int32, UnsafePointer<UInt8>, Int) -> Void = {
    ctx, stream, bytes, len in
    guard len > 0 else { return }
    StreamChannel.from(ctx).received(stream: Int(stream), bytes: Array(UnsafeBufferPointer(start: bytes, count: len)))
}

private let coreStreamEOF: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
    StreamChannel.from(ctx).receivedEOF()
}

private let coreStreamReleased: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
    // the core's reference, taken in start(); the core never calls back after this
    Unmanaged<StreamChannel>.fromOpaque(ctx!).release()
}

let coreStreamDone: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer) -> Void = { ctx, op in
    let channel = StreamChannel.from(ctx)
    let err = sshcore_op_error(op).pointee
    guard err.code == Int32(sshcore_err.SSHCORE_E_OK.rawValue) else {
        channel.finished(.failure(SSHError(core: err)))
        return
    }
    var info = sshcore_exit_info()
    sshcore_stream_get_exit(op, &info)
    let status: SSHExitStatus
    switch info.kind {
    case SSHCORE_EXIT_STATUS: status = .exited(info.status)
    case SSHCORE_EXIT_SIGNAL: status = .signaled(CoreStrings.string(info.signal), coreDumped: info.core_dumped != 0)
    default: status = .unknown
    }
    channel.finished(.success(status))
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
