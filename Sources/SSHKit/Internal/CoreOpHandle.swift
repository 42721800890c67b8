internal import SSHCore
import Synchronization

/// An operation handle from the core. Safe because: only passed to the
/// thread-safe sshcore_op_* functions, and released once after completion.
struct OpPointer: @unchecked Sendable {
    let raw: OpaquePointer
}

/// The caller's reference to one core operation, and a cancel that may come before the
/// operation exists: `attach` then cancels it at once. Releases the reference on deinit.
/// Every kind of operation holds one: exec, streamed channels, bridges, remote forwards.
final class CoreOpHandle: Sendable {
    private struct State {
        var op: OpPointer?
        var cancelRequested = false
    }

    private let state = Mutex(State())

    deinit {
        if let op = state.withLock({ $0.op }) { sshcore_op_release(op.raw) }
    }

    var op: OpPointer? { state.withLock { $0.op } }

    /// Takes the caller's reference to `op` (once).
    func attach(_ op: OpaquePointer) {
        let cancelNow = state.withLock { s -> Bool in
            s.op = OpPointer(raw: op)
            return s.cancelRequested
        }
        if cancelNow { sshcore_op_cancel(op) }
    }

    /// Cancels the operation (any thread, never blocks), now or as soon as it is attached.
    func cancel() {
        let op = state.withLock { s -> OpPointer? in
            s.cancelRequested = true
            return s.op
        }
        if let op { sshcore_op_cancel(op.raw) }
    }
}
