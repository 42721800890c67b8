import Synchronization

/// The bookkeeping every forward shares: the connections it handed on (so stopping can
/// close them), statistics, events, and "stopped" once the forward's source (listener
/// thread or remote-forward op) has ended and every connection has finished.
final class ForwardLedger: Sendable {
    /// What closes one forwarded connection.
    enum Handle: Sendable {
        case pending // being handed on: closed by whoever hands it on, after `attach`
        case bridge(CoreBridge)
        case tunnel(SSHTunnel)

        func close() {
            switch self {
            case .pending: break
            case .bridge(let b): b.cancel()
            case .tunnel(let t): t.cancel()
            }
        }
    }

    private struct State {
        var stats = SSHForwardStatistics()
        var live: [UInt64: Handle] = [:]
        var stopRequested = false
        var stopReason: SSHError?
        var sourceEnded = false
        var stopped = false
        var waiters = WaitList<SSHError?>()
    }

    private let state = Mutex(State())
    let eventHandler: (@Sendable (SSHForwardEvent) -> Void)?
    let maxConnections: Int

    init(options: SSHForwardOptions) {
        eventHandler = options.eventHandler
        maxConnections = options.maxConnections
    }

    var statistics: SSHForwardStatistics { state.withLock { $0.stats } }
    var stopRequested: Bool { state.withLock { $0.stopRequested } }

    /// Counts an accepted connection and admits it unless the forward is stopping or
    /// `maxConnections` are open (connections in a SOCKS handshake count).
    func admit(_ id: UInt64) -> Bool {
        state.withLock { s in
            s.stats.accepted += 1
            guard !s.stopRequested, s.live.count < maxConnections else { return false }
            s.live[id] = .pending
            s.stats.active += 1
            return true
        }
    }

    /// An admitted connection turned away before any channel (bad SOCKS input, a
    /// handshake timeout, the forward stopping).
    func dismiss(_ id: UInt64, peer: String, reason: String) {
        let waiters = state.withLock { s -> [CheckedContinuation<SSHError?, Never>]? in
            guard s.live.removeValue(forKey: id) != nil else { return nil }
            s.stats.active -= 1
            s.stats.rejected += 1
            return Self.markStoppedIfIdle(&s)
        }
        guard let waiters else { return }
        eventHandler?(SSHForwardEvent(connectionID: id, peer: peer, target: nil, kind: .rejected(reason: reason)))
        resume(waiters)
    }

    /// Records what closes connection `id`; closes it at once when the forward is
    /// stopping (or it already ended: then nothing happens).
    func attach(_ id: UInt64, _ handle: Handle) {
        let closeNow = state.withLock { s -> Bool in
            guard s.live[id] != nil else { return false } // already over
            s.live[id] = handle
            return s.stopRequested
        }
        if closeNow { handle.close() }
    }

    /// Connection `id` ended (nil: normally); reports the event.
    func ended(_ id: UInt64, peer: String, target: String?, error: SSHError?, counts: BridgeCounts = BridgeCounts()) {
        let waiters = state.withLock { s -> [CheckedContinuation<SSHError?, Never>]? in
            guard s.live.removeValue(forKey: id) != nil else { return nil }
            s.stats.active -= 1
            if error == nil { s.stats.completed += 1 } else { s.stats.failed += 1 }
            s.stats.bytesToClients += counts.toSocket
            s.stats.bytesFromClients += counts.fromSocket
            return Self.markStoppedIfIdle(&s)
        }
        guard let waiters else { return }
        let kind: SSHForwardEvent.Kind = error.map { .failed($0) }
            ?? .closed(toClient: counts.toSocket, fromClient: counts.fromSocket)
        eventHandler?(SSHForwardEvent(connectionID: id, peer: peer, target: target, kind: kind))
        resume(waiters)
    }

    /// Connection `id`'s channel opened (skipped when it already ended: a cancel can
    /// complete it on another thread first, and its events stay in order).
    func opened(_ id: UInt64, peer: String, target: String?) {
        guard state.withLock({ $0.live[id] != nil }) else { return }
        eventHandler?(SSHForwardEvent(connectionID: id, peer: peer, target: target, kind: .opened))
    }

    /// A connection turned away at once (never admitted).
    func rejected(_ id: UInt64, peer: String, reason: String) {
        state.withLock { $0.stats.rejected += 1 }
        eventHandler?(SSHForwardEvent(connectionID: id, peer: peer, target: nil, kind: .rejected(reason: reason)))
    }

    /// Marks the forward stopping (the first reason wins) and closes every connection it
    /// handed on. Returns false when it was already stopping.
    @discardableResult
    func requestStop(reason: SSHError?) -> Bool {
        let handles = state.withLock { s -> [Handle]? in
            guard !s.stopRequested else { return nil }
            s.stopRequested = true
            s.stopReason = reason
            return Array(s.live.values)
        }
        guard let handles else { return false }
        // outside the lock: a cancel completes synchronously and calls `ended`
        for h in handles { h.close() }
        return true
    }

    /// The source ended (the listener thread exited, the remote forward's op ended).
    func sourceEnded() {
        let waiters = state.withLock { s -> [CheckedContinuation<SSHError?, Never>] in
            s.sourceEnded = true
            return Self.markStoppedIfIdle(&s)
        }
        resume(waiters)
    }

    /// Waits until the forward stopped: nil after a stop, else the error that ended
    /// it. When `cancellable`, a cancel of the waiting task ends the wait at once with
    /// `cancelled` (the forward goes on); `close()` waits for its own closing, which
    /// needs no network, regardless.
    func waitUntilStopped(cancellable: Bool) async -> SSHError? {
        let cancelled = SSHError(.cancelled, "waiting for the forward to stop was cancelled; it goes on")
        return await waitInList(cancelled: cancelled) { c, id -> SSHError?? in
            state.withLock { s -> SSHError?? in
                if s.stopped { return .some(s.stopReason) }
                return s.waiters.insert(c, id: id, honoringCancellation: cancellable) ? nil : .some(cancelled)
            }
        } leave: { [self] id in
            cancellable ? state.withLock { $0.waiters.remove(id) } : nil
        }
    }

    private static func markStoppedIfIdle(_ s: inout State) -> [CheckedContinuation<SSHError?, Never>] {
        guard s.sourceEnded, s.live.isEmpty, !s.stopped else { return [] }
        s.stopped = true
        return s.waiters.removeAll()
    }

    private func resume(_ waiters: [CheckedContinuation<SSHError?, Never>]) {
        guard !waiters.isEmpty else { return }
        let reason = state.withLock { $0.stopReason }
        for w in waiters { w.resume(returning: reason) }
    }
}
