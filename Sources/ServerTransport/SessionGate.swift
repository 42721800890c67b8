import Synchronization

/// Admits at most `limit` sessions at once on one SSH connection, so a transport never
/// asks a server for more channels than its `MaxSessions` allows (OpenSSH's default is
/// 10; the channel past it is refused). Waiters are admitted in the order they came; a
/// cancelled waiter leaves the line at once with `cancelled`.
final class SessionGate: Sendable {
    private struct State {
        var free: Int
        var nextID: UInt64 = 0
        var waiters: [(id: UInt64, c: CheckedContinuation<Bool, Never>)] = []
    }

    let limit: Int
    private let state: Mutex<State>

    init(limit: Int) {
        precondition(limit >= 1, "a session gate admits at least one session")
        self.limit = limit
        state = Mutex(State(free: limit))
    }

    /// Waits for a free session. - Throws: `cancelled` when the task is cancelled first.
    func enter() async throws(TransportError) -> SessionPermit {
        let id = state.withLock { s -> UInt64 in
            defer { s.nextID += 1 }
            return s.nextID
        }
        let admitted = await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
                // under the lock: a cancel either came before (the flag is set) or finds
                // this waiter in the line
                let answer = state.withLock { s -> Bool? in
                    if s.free > 0 {
                        s.free -= 1
                        return true
                    }
                    if Task.isCancelled { return false }
                    s.waiters.append((id, c))
                    return nil
                }
                if let answer { c.resume(returning: answer) }
            }
        } onCancel: {
            let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
                guard let i = s.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return s.waiters.remove(at: i).c
            }
            waiter?.resume(returning: false)
        }
        guard admitted else { throw .cancelled }
        return SessionPermit(gate: self)
    }

    /// Runs `body` holding a session.
    func withSession<R>(_ body: () async throws(TransportError) -> R) async throws(TransportError) -> R {
        let permit = try await enter()
        defer { permit.release() }
        return try await body()
    }

    /// Hands the session to the first waiter, or frees it.
    fileprivate func leave() {
        let next = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            if s.waiters.isEmpty {
                s.free += 1
                return nil
            }
            return s.waiters.removeFirst().c
        }
        next?.resume(returning: true)
    }

    /// Sessions in use now (for tests and diagnostics).
    var inUse: Int { state.withLock { limit - $0.free } }
}

/// One admitted session: released once, by `release()` or when the permit is dropped.
final class SessionPermit: Sendable {
    private let gate: SessionGate
    private let released = Atomic(false)

    fileprivate init(gate: SessionGate) {
        self.gate = gate
    }

    func release() {
        if !released.exchange(true, ordering: .acquiringAndReleasing) { gate.leave() }
    }

    deinit {
        release()
    }
}
