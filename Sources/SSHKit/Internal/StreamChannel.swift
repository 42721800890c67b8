internal import SSHCore
import Synchronization

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
        /// Output of the current I/O pass, gathered packet by packet (one stream).
        var pending: [UInt8] = []
        var pendingStream = 0
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
        /// The peer sent EOF: readers end once the queues are drained.
        var eof = false
    }

    private let state = Mutex(State())
    /// The core's operation, and a cancel that may come before it exists.
    let handle = CoreOpHandle()

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
                handle.attach(op)
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

    func started(fallback: Bool) {
        resumeStart(.success(fallback))
    }

    /// Output is handed to readers in chunks of up to this much: one wake-up of the
    /// reader per chunk, not per packet.
    static let chunkLimit = 256 * 1024
    /// Packets this large (OpenSSH sends 32 KiB) start a chunk with room for `chunkLimit`.
    static let bulkPacket = 16 * 1024

    private typealias HandOff = (CheckedContinuation<Result<(Int, [UInt8])?, SSHError>, Never>, Int, [UInt8])

    /// A packet of output (worker): gathered into the pending chunk, which goes to the
    /// reader when the pass ends (`flushed`), the stream changes or it is full.
    func received(stream: Int, bytes: UnsafeBufferPointer<UInt8>) {
        let handOff = state.withLock { s -> HandOff? in
            guard s.end == nil else { return nil } // a late chunk after a cancel: dropped
            var out: HandOff?
            if !s.pending.isEmpty && (s.pendingStream != stream || s.pending.count + bytes.count > Self.chunkLimit) {
                out = Self.commit(&s)
            }
            if s.pending.isEmpty {
                s.pendingStream = stream
                // a full packet means bulk data: room for a whole chunk, gathered
                // without regrowing; a keystroke's echo takes what it needs
                s.pending.reserveCapacity(bytes.count >= Self.bulkPacket ? Self.chunkLimit : bytes.count)
            }
            s.pending.append(contentsOf: bytes)
            return out
        }
        hand(handOff)
    }

    /// The end of an I/O pass (worker): the pending chunk goes to the reader.
    func flushed() {
        hand(state.withLock { s -> HandOff? in s.end == nil ? Self.commit(&s) : nil })
    }

    private func hand(_ handOff: HandOff?) {
        guard let (continuation, stream, bytes) = handOff else { return }
        consumed(bytes.count)
        continuation.resume(returning: .success((stream, bytes)))
    }

    /// Queues the pending chunk, or returns it with the reader to resume when one waits
    /// and nothing older is queued for it.
    private static func commit(_ s: inout State) -> HandOff? {
        guard !s.pending.isEmpty else { return nil }
        let stream = s.pendingStream
        let waiter: Waiter?
        if let w = s.waiters[stream], s.heads[stream] == s.queues[stream].count {
            s.waiters[stream] = nil
            waiter = w
        } else if let w = s.waiters[Kind.merged.rawValue], s.heads[0] == s.queues[0].count,
                  s.heads[1] == s.queues[1].count {
            s.waiters[Kind.merged.rawValue] = nil
            waiter = w
        } else {
            waiter = nil
        }
        guard let waiter else {
            enqueuePending(&s)
            return nil
        }
        var bytes: [UInt8] = []
        swap(&bytes, &s.pending)
        // the reader may keep the chunk: not with more than 4x its bytes in room
        if bytes.capacity > 4 * bytes.count {
            bytes = bytes.withUnsafeBufferPointer { Array($0) }
        }
        s.nextSeq += 1
        return (waiter.continuation, stream, bytes)
    }

    /// Queues the pending chunk behind what the readers have not taken.
    private static func enqueuePending(_ s: inout State) {
        guard !s.pending.isEmpty else { return }
        var bytes: [UInt8] = []
        swap(&bytes, &s.pending)
        // a queued chunk waits for a slow reader: it keeps only the memory its bytes need
        // (the buffer limit counts bytes, so room reserved for a chunk must not pile up)
        if bytes.capacity > 2 * bytes.count + 4096 {
            bytes = bytes.withUnsafeBufferPointer { Array($0) }
        }
        s.queues[s.pendingStream].append(Item(seq: s.nextSeq, bytes: bytes))
        s.nextSeq += 1
    }

    func receivedEOF() {
        let waiters = state.withLock { s -> [Waiter] in
            Self.enqueuePending(&s)
            s.eof = true
            let w = s.waiters.compactMap { $0 }
            s.waiters = [nil, nil, nil]
            return w
        }
        // they look again, drain what is queued, then see the end
        for w in waiters { w.continuation.resume(returning: .success(nil)) }
    }

    func finished(_ result: Result<SSHExitStatus, SSHError>) {
        let (waiters, exitWaiters) = state.withLock { s -> ([Waiter], [CheckedContinuation<Result<SSHExitStatus, SSHError>, Never>]) in
            guard s.end == nil else { return ([], []) }
            // what a reader was not given yet stays readable before the end
            Self.enqueuePending(&s)
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
                    enum Entry { case waiting, lookAgain, cancelled }
                    let entry = state.withLock { s -> Entry in
                        if s.end != nil || s.eof || Self.hasQueued(s, kind) { return .lookAgain }
                        // under the lock the cancel handler takes too: a cancel that came
                        // before this point found no waiter to resume, and must not be missed
                        if Task.isCancelled { return .cancelled }
                        precondition(s.waiters[kind.rawValue] == nil,
                                     "two tasks read the same output stream of one SSH channel at once")
                        s.waiters[kind.rawValue] = Waiter(id: id, continuation: continuation)
                        return .waiting
                    }
                    switch entry {
                    case .waiting: break
                    case .lookAgain: continuation.resume(returning: .success(nil))
                    case .cancelled: continuation.resume(returning: .failure(SSHError(.cancelled, "reading was cancelled")))
                    }
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
        guard n > 0, let op = handle.op else { return }
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
        handle.cancel() // before the op exists, start() cancels it
    }
}
