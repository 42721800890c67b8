import Synchronization

/// One connection to a chain of jump hosts, opened once (with the fleet's retries) for
/// every host of a fleet behind it. Each host waits for it on its own: a host whose task is
/// cancelled stops waiting at once, and the attempt goes on for the others. The fleet keeps
/// the attempt: its connection for the next runs, its failure for the rest of the run that
/// made it, so the hosts behind a jump host that cannot be reached all fail with its error
/// instead of each trying it again.
final class JumpAttempt: Sendable {
    typealias Outcome = Result<SSHConnection, SSHError>

    /// The run (`SSHFleet.run`) that started it.
    let run: UInt64
    private struct State {
        var outcome: Outcome?
        var waiting = WaitList<Outcome>()
    }

    private let state = Mutex(State())
    private static let cancelled = Outcome.failure(SSHError(.cancelled, "waiting for the jump host was cancelled"))

    /// Starts `connect`, in a task of its own: no host's cancellation ends it.
    init(run: UInt64, connect: @escaping @Sendable () async throws(SSHError) -> SSHConnection) {
        self.run = run
        Task { [self] in
            let outcome: Outcome
            do throws(SSHError) {
                outcome = .success(try await connect())
            } catch {
                outcome = .failure(error)
            }
            let waiters = state.withLock { s in
                s.outcome = outcome
                return s.waiting.removeAll()
            }
            for w in waiters { w.resume(returning: outcome) }
        }
    }

    /// The outcome, once known.
    var outcome: Outcome? { state.withLock { $0.outcome } }

    /// Waits for the outcome; `cancelled` at once when the waiting task is cancelled.
    func value() async -> Outcome {
        await waitInList(cancelled: Self.cancelled, enter: { c, id in
            state.withLock { s in
                if let outcome = s.outcome { return outcome }
                return s.waiting.insert(c, id: id) ? nil : Self.cancelled
            }
        }, leave: { [self] id in
            state.withLock { $0.waiting.remove(id) }
        })
    }
}
