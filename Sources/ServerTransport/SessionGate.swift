import SSHKit
import Synchronization

/// Admits at most `limit` sessions at once on one SSH connection, so a transport never
/// asks a server for more channels than its `MaxSessions` allows (OpenSSH's default is
/// 10; the channel past it is refused). Waiters are admitted in the order they came; a
/// cancelled waiter leaves the line at once with `cancelled`. (SSHKit's `AdmissionGate`,
/// with permits and transport errors.)
final class SessionGate: Sendable {
    private let places: AdmissionGate

    var limit: Int { places.limit }

    init(limit: Int) {
        precondition(limit >= 1, "a session gate admits at least one session")
        places = AdmissionGate(limit: limit)
    }

    /// Waits for a free session. - Throws: `cancelled` when the task is cancelled first.
    func enter() async throws(TransportError) -> SessionPermit {
        guard await places.enter() else { throw .cancelled }
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
        places.leave()
    }

    /// Sessions in use now (for tests and diagnostics).
    var inUse: Int { places.inUse }
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
