import Synchronization

/// Ids of waiters, unique in the process.
private let waiterIDs = Atomic<UInt64>(0)

/// Tasks waiting for one outcome (a channel's exit status, a forward's end), kept in
/// the owner's locked state. A waiter whose task is cancelled leaves at once with the
/// owner's "cancelled" value; the others wait for `removeAll()`. `package`: the
/// transports' processes wait the same way.
package struct WaitList<T: Sendable>: Sendable {
    private var waiting: [UInt64: CheckedContinuation<T, Never>] = [:]

    package init() {}

    /// Adds a waiter, unless its task is cancelled already: checked here, under the
    /// owner's lock, so a cancel cannot fall between the check and the insertion (the
    /// cancel handler takes the same lock to remove it).
    package mutating func insert(_ c: CheckedContinuation<T, Never>, id: UInt64, honoringCancellation: Bool = true) -> Bool {
        if honoringCancellation && Task.isCancelled { return false }
        waiting[id] = c
        return true
    }

    package mutating func remove(_ id: UInt64) -> CheckedContinuation<T, Never>? {
        waiting.removeValue(forKey: id)
    }

    /// Every waiter, to be resumed with the outcome (outside the lock).
    package mutating func removeAll() -> [CheckedContinuation<T, Never>] {
        defer { waiting = [:] }
        return Array(waiting.values)
    }
}

/// Waits in a `WaitList` that lives under the caller's lock, and leaves it with
/// `cancelled` as soon as the task is cancelled: no wait for the network outlives its
/// task. `enter` runs under that lock: it returns the outcome when it is known already,
/// `cancelled` when `insert` refused, else nil after inserting `c` with `id`. `leave`
/// removes `id` under the lock.
package func waitInList<T: Sendable>(cancelled: T,
                             enter: (_ c: CheckedContinuation<T, Never>, _ id: UInt64) -> T?,
                             leave: @escaping @Sendable (_ id: UInt64) -> CheckedContinuation<T, Never>?) async -> T {
    let id = waiterIDs.add(1, ordering: .relaxed).newValue
    return await withTaskCancellationHandler {
        await withCheckedContinuation { c in
            if let outcome = enter(c, id) { c.resume(returning: outcome) }
        }
    } onCancel: {
        leave(id)?.resume(returning: cancelled)
    }
}
