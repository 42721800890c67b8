import Synchronization

/// At most `limit` holders at once, admitted in arrival order. Only the wait is
/// cancellable: a waiter whose task is cancelled leaves the line at once, while a task
/// that finds a free place takes it even when cancelled (cleanup that needs a place
/// still gets one). The base of a fleet's limits (`FleetGate`) and of a transport's
/// session limit (ServerTransport's `SessionGate`).
package final class AdmissionGate: Sendable {
    private struct State {
        var free: Int
        var nextID: UInt64 = 0
        var line: [(id: UInt64, c: CheckedContinuation<Bool, Never>)] = []
        var isClosed = false
    }

    package let limit: Int
    private let state: Mutex<State>

    package init(limit: Int) {
        precondition(limit >= 1, "a gate admits at least one holder")
        self.limit = limit
        state = Mutex(State(free: limit))
    }

    /// Waits for a place: true once holding it, false when the task was cancelled while
    /// it waited or the gate was closed (it then holds nothing).
    package func enter() async -> Bool {
        let id = state.withLock { s -> UInt64 in
            defer { s.nextID += 1 }
            return s.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
                // under the lock: a cancel either came before (the flag is set) or finds
                // this waiter in the line
                let answer = state.withLock { s -> Bool? in
                    if s.isClosed { return false }
                    if s.free > 0 {
                        s.free -= 1
                        return true
                    }
                    if Task.isCancelled { return false }
                    s.line.append((id, c))
                    return nil
                }
                if let answer { c.resume(returning: answer) }
            }
        } onCancel: {
            let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
                guard let i = s.line.firstIndex(where: { $0.id == id }) else { return nil }
                return s.line.remove(at: i).c
            }
            waiter?.resume(returning: false)
        }
    }

    /// Takes a free place without waiting: false when none is free or others wait for
    /// one (they come first).
    package func tryEnter() -> Bool {
        state.withLock { s in
            guard !s.isClosed, s.free > 0, s.line.isEmpty else { return false }
            s.free -= 1
            return true
        }
    }

    /// Sends every waiter away (its `enter` returns false) and refuses new ones; places
    /// held stay held until left.
    package func close() {
        let waiters = state.withLock { s -> [CheckedContinuation<Bool, Never>] in
            s.isClosed = true
            defer { s.line = [] }
            return s.line.map(\.c)
        }
        for w in waiters { w.resume(returning: false) }
    }

    /// Hands the place to the first in line, or frees it.
    package func leave() {
        let next = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            if s.line.isEmpty {
                s.free += 1
                return nil
            }
            return s.line.removeFirst().c
        }
        next?.resume(returning: true)
    }

    /// Places held now (for tests and diagnostics).
    package var inUse: Int { state.withLock { limit - $0.free } }
}
