import Synchronization

/// At most `limit` holders at once, admitted in arrival order (an `AdmissionGate`); a task
/// that is cancelled before or while it waits gets `SSHError.cancelled`. With `interval`,
/// admissions are also spaced at least that far apart (a rate: handshakes per second).
final class FleetGate: Sendable {
    private let places: AdmissionGate
    private let interval: Duration?
    /// The earliest moment the next admission may start (rate limiting).
    private let nextSlot: Mutex<ContinuousClock.Instant>

    init(limit: Int, interval: Duration? = nil) {
        places = AdmissionGate(limit: limit)
        self.interval = interval
        nextSlot = Mutex(.now)
    }

    /// Waits for a place, then (with a rate) for its slot; returns holding it.
    func enter() async throws(SSHError) {
        // a fleet's task that was cancelled starts nothing new, even with a place free
        guard !Task.isCancelled, await places.enter() else {
            throw SSHError(.cancelled, "waiting for a place in the fleet's limit was cancelled")
        }
        guard let interval else { return }
        let slot = nextSlot.withLock { next -> ContinuousClock.Instant in
            let slot = max(ContinuousClock.now, next)
            next = slot + interval
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
        places.leave()
    }

    /// Runs `body` holding a place.
    func withPlace<T>(_ body: () async throws(SSHError) -> T) async throws(SSHError) -> T {
        try await enter()
        defer { leave() }
        return try await body()
    }
}
