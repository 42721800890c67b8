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
        /// Events not handed to `eventHandler` yet, queued under this lock with the change
        /// they report, so that they leave in the order the changes happened.
        var events: [SSHForwardEvent] = []
        /// A thread is handing events out (one at a time, never under the lock).
        var handingOut = false
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
        state.withLock { s in
            guard s.live.removeValue(forKey: id) != nil else { return }
            s.stats.active -= 1
            s.stats.rejected += 1
            s.events.append(SSHForwardEvent(connectionID: id, peer: peer, target: nil, kind: .rejected(reason: reason)))
            Self.markStoppedIfIdle(&s)
        }
        handOut()
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
        let kind: SSHForwardEvent.Kind = error.map { .failed($0) }
            ?? .closed(toClient: counts.toSocket, fromClient: counts.fromSocket)
        state.withLock { s in
            guard s.live.removeValue(forKey: id) != nil else { return }
            s.stats.active -= 1
            if error == nil { s.stats.completed += 1 } else { s.stats.failed += 1 }
            s.stats.bytesToClients += counts.toSocket
            s.stats.bytesFromClients += counts.fromSocket
            s.events.append(SSHForwardEvent(connectionID: id, peer: peer, target: target, kind: kind))
            Self.markStoppedIfIdle(&s)
        }
        handOut()
    }

    /// Connection `id`'s channel opened (skipped when it already ended: a cancel can
    /// complete it on another thread first, and its events stay in order).
    func opened(_ id: UInt64, peer: String, target: String?) {
        state.withLock { s in
            guard s.live[id] != nil else { return }
            s.events.append(SSHForwardEvent(connectionID: id, peer: peer, target: target, kind: .opened))
        }
        handOut()
    }

    /// A connection turned away at once (never admitted).
    func rejected(_ id: UInt64, peer: String, reason: String) {
        state.withLock { s in
            s.stats.rejected += 1
            s.events.append(SSHForwardEvent(connectionID: id, peer: peer, target: nil, kind: .rejected(reason: reason)))
        }
        handOut()
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
        state.withLock { s in
            s.sourceEnded = true
            Self.markStoppedIfIdle(&s)
        }
        handOut()
    }

    /// Waits until the forward stopped: nil after a stop, else the error that ended
    /// it. When `cancellable`, a cancel of the waiting task ends the wait at once with
    /// `cancelled` (the forward goes on); `close()` waits for its own closing, which
    /// needs no network, regardless.
    func waitUntilStopped(cancellable: Bool) async -> SSHError? {
        let cancelled = SSHError(.cancelled, "waiting for the forward to stop was cancelled; it goes on")
        return await waitInList(cancelled: cancelled) { c, id -> SSHError?? in
            state.withLock { s -> SSHError?? in
                // stopped, and every event handed out: the wait is over (while events are
                // still going out, it ends after them)
                if s.stopped && !s.handingOut && s.events.isEmpty { return .some(s.stopReason) }
                return s.waiters.insert(c, id: id, honoringCancellation: cancellable) ? nil : .some(cancelled)
            }
        } leave: { [self] id in
            cancellable ? state.withLock { $0.waiters.remove(id) } : nil
        }
    }

    /// Stopped once the source ended and no connection is left; the waiters are released
    /// by `handOut`, after the events that came before.
    private static func markStoppedIfIdle(_ s: inout State) {
        if s.sourceEnded, s.live.isEmpty { s.stopped = true }
    }

    /// Hands the queued events to `eventHandler` in order, outside the lock, then (once
    /// stopped) releases the waiters. One thread at a time: another that queues events
    /// meanwhile leaves them to it. A handler that closes the forward from inside gets
    /// its events after the one it is handling.
    private func handOut() {
        var mine = false
        while true {
            let (batch, released, reason) = state.withLock { s -> ([SSHForwardEvent], [CheckedContinuation<SSHError?, Never>], SSHError?) in
                if !mine {
                    if s.handingOut { return ([], [], nil) }
                    s.handingOut = true
                    mine = true
                }
                let batch = s.events
                s.events = []
                if !batch.isEmpty { return (batch, [], nil) }
                s.handingOut = false
                return ([], s.stopped ? s.waiters.removeAll() : [], s.stopReason)
            }
            for w in released { w.resume(returning: reason) }
            if batch.isEmpty { return }
            if let eventHandler { for e in batch { eventHandler(e) } }
        }
    }
}
