import Synchronization

/// At most `limit` holders at once, admitted in arrival order; a waiter whose task is
/// cancelled leaves the line at once (`SSHError.cancelled`). With `interval`, admissions
/// are also spaced at least that far apart (a rate: handshakes per second).
final class FleetGate: Sendable {
    private struct State {
        var free: Int
        var line: [(id: UInt64, c: CheckedContinuation<Bool, Never>)] = []
        var nextID: UInt64 = 0
        /// The earliest moment the next admission may start (rate limiting).
        var nextSlot: ContinuousClock.Instant
    }

    private let state: Mutex<State>
    private let interval: Duration?

    init(limit: Int, interval: Duration? = nil) {
        precondition(limit >= 1)
        state = Mutex(State(free: limit, nextSlot: .now))
        self.interval = interval
    }

    /// Waits for a place, then (with a rate) for its slot; returns holding it.
    func enter() async throws(SSHError) {
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1
            return s.nextID
        }
        let admitted = await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
                let answer = state.withLock { s -> Bool? in
                    if Task.isCancelled { return false }
                    if s.free > 0 && s.line.isEmpty {
                        s.free -= 1
                        return true
                    }
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
        guard admitted else { throw SSHError(.cancelled, "waiting for a place in the fleet's limit was cancelled") }
        guard let interval else { return }
        let slot = state.withLock { s -> ContinuousClock.Instant in
            let slot = max(ContinuousClock.now, s.nextSlot)
            s.nextSlot = slot + interval
            return slot
        }
        do {
            try await Task.sleep(until: slot, clock: .continuous)
        } catch {
            leave()
            throw SSHError(.cancelled, "waiting for a handshake slot was cancelled")
        }
    }

    /// Gives the place to the next in line.
    func leave() {
        let next = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            if s.line.isEmpty {
                s.free += 1
                return nil
            }
            return s.line.removeFirst().c
        }
        next?.resume(returning: true)
    }

    /// Runs `body` holding a place.
    func withPlace<T>(_ body: () async throws(SSHError) -> T) async throws(SSHError) -> T {
        try await enter()
        defer { leave() }
        return try await body()
    }
}
