import Foundation
import SSHKit
import ServerTransport

/// The connection monitor: the hosts a program runs agents on, one shared connection
/// each, at most `policy.maxConnectedHosts` connected at once.
///
/// - Every call on a host goes through `withHost` (or `attach`), which connects the
///   host when needed and marks it in use, so an idle host is what gets dropped when
///   the limit is reached, never one in the middle of a call or attached.
/// - A health check every `policy.healthCheckInterval` lists each connected host's
///   tmux sessions (one round trip): it finds a connection that stopped answering, and
///   how many agents still run there.
/// - A lost connection is retried after 1 s, 5 s and 15 s; then, while the host still
///   has live agent sessions, every `slowRetryInterval` without end (its agents run on
///   in tmux and are worth getting back to); otherwise it is given up as `disconnected`
///   until the next call.
/// - A new connection drops what was cached about the host (the installed agents).
/// - `events()` streams every state change.
///
/// Hosts whose transport has no connection (`LocalTransport`) are always `connected`
/// and do not count against the limit.
actor AgentConnections {
    nonisolated let policy: AgentConnectionPolicy

    private struct Entry {
        let host: AgentHost
        let managed: (any ConnectedTransport)?
        /// Changed only by `transition`.
        private(set) var state: AgentConnectionState
        /// The host holds one of the `slots` (a managed host does while `connecting` or
        /// `connected`).
        var holdsSlot = false
        /// Calls and attached terminals using the connection now.
        var leases = 0
        var lastUsed = ContinuousClock.now
        /// Agent sessions still running there: from the last health check, or as the
        /// caller declared.
        var liveSessions = 0
        /// The transport's `connectionsMade` when last looked at (0: never connected).
        var connectsSeen = 0
        var failedAttempts = 0
        var lastError: AgentError?
        var reconnect: Task<Void, Never>?

        init(host: AgentHost, managed: (any ConnectedTransport)?) {
            self.host = host
            self.managed = managed
            state = managed == nil ? .connected : .disconnected
        }

        /// Only `transition` calls this.
        mutating func setState(_ new: AgentConnectionState) { state = new }

        /// Holding a connection: idle or not, it takes a slot.
        var isHolding: Bool { managed != nil && (state == .connected || state == .connecting) }
    }

    private var entries: [ServerID: Entry] = [:]
    /// One place per connected host; a host that needs one when all are held waits here,
    /// in arrival order, and gets the place an evicted or dropped host leaves.
    private let slots: AdmissionGate
    /// Callers waiting in `slots` now: an idle host is dropped for them as soon as its
    /// last call ends.
    private var slotWaiters = 0
    private var subscribers: [UUID: AsyncStream<AgentConnectionEvent>.Continuation] = [:]
    private var healthLoop: Task<Void, Never>?
    private var isShutDown = false

    init(policy: AgentConnectionPolicy = AgentConnectionPolicy()) {
        self.policy = policy
        slots = AdmissionGate(limit: policy.maxConnectedHosts)
    }

    // MARK: hosts

    /// Adds a host (nothing connects until it is used). A host already added under its
    /// `serverID` is kept; the one that was there is returned.
    @discardableResult
    func add(_ host: AgentHost) -> AgentHost {
        if let e = entries[host.serverID] { return e.host }
        let entry = Entry(host: host, managed: host.transport as? any ConnectedTransport)
        entries[host.serverID] = entry
        emit(host.serverID, entry)
        if healthLoop == nil && !isShutDown {
            let interval = policy.healthCheckInterval
            healthLoop = Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    guard let self, !Task.isCancelled else { return }
                    await self.checkAll()
                }
            }
        }
        return host
    }

    /// Forgets a host: stops retrying it and drops its connection when nothing uses it
    /// (its agents run on). The transport stays open for its owner to close.
    func remove(_ id: ServerID) async {
        guard let e = entries[id] else { return }
        e.reconnect?.cancel()
        transition(id, to: .disconnected)
        entries[id] = nil
        if e.leases == 0, let m = e.managed { await m.disconnect() }
    }

    var hosts: [AgentHost] { entries.values.map(\.host) }

    func host(_ id: ServerID) -> AgentHost? { entries[id]?.host }

    /// The host as messages name it.
    private func name(_ id: ServerID) -> String { entries[id]?.host.displayName ?? id.rawValue }

    func state(of id: ServerID) -> AgentConnectionState? { entries[id]?.state }

    /// Hosts holding a connection now (`connected` or `connecting`), local ones excluded.
    var connectedHosts: [ServerID] {
        entries.filter { $0.value.isHolding }.map(\.key)
    }

    /// How many agent sessions run on the host, as the caller knows it (the health
    /// check updates it from tmux too). A host with live sessions is retried forever.
    func setLiveSessions(_ count: Int, on id: ServerID) {
        update(id) { $0.liveSessions = max(0, count) }
    }

    func liveSessions(on id: ServerID) -> Int { entries[id]?.liveSessions ?? 0 }

    /// Adds `delta` to the host's live sessions (never below 0), inside the monitor: two
    /// starts on one host at once count two, where a read and a later set across an await
    /// would count one.
    func adjustLiveSessions(by delta: Int, on id: ServerID) {
        update(id) { $0.liveSessions = max(0, $0.liveSessions + delta) }
    }

    /// Stops the health checks and the retries, sends away the calls waiting for a
    /// connection slot (`cancelled`) and ends every event stream. Connections stay with
    /// their transports (close those).
    func close() {
        isShutDown = true
        healthLoop?.cancel()
        healthLoop = nil
        for id in entries.keys {
            update(id) {
                $0.reconnect?.cancel()
                $0.reconnect = nil
            }
        }
        slots.close()
        for c in subscribers.values { c.finish() }
        subscribers = [:]
    }

    // MARK: state

    /// Changes the entry in place; nil when the host is not there.
    @discardableResult
    private func update<T>(_ id: ServerID, _ body: (inout Entry) -> T) -> T? {
        guard var e = entries[id] else { return nil }
        let r = body(&e)
        entries[id] = e
        return r
    }

    /// The one place a host's state changes: the connection slot follows the state (a
    /// managed host leaves its slot when it stops holding a connection; it must have
    /// taken one, in `takeSlot`, before it may connect), `lastError` is set or cleared
    /// with it, and every subscriber hears of it.
    private func transition(_ id: ServerID, to state: AgentConnectionState, error: AgentError? = nil,
                            retryIn: Duration? = nil, reconnected: Bool = false) {
        guard var e = entries[id] else { return }
        e.setState(state)
        if state == .connected {
            e.lastError = nil
        } else if let error {
            e.lastError = error
        }
        if e.holdsSlot && !e.isHolding {
            e.holdsSlot = false
            slots.leave()
        }
        assert(!e.isHolding || e.holdsSlot, "\(id.rawValue) went \(state) without a connection slot")
        entries[id] = e
        emit(id, e, retryIn: retryIn, reconnected: reconnected)
    }

    // MARK: events

    /// Every state change from now on, after one event with the current state of each
    /// host. Ends at `close`.
    func events() -> AsyncStream<AgentConnectionEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: AgentConnectionEvent.self,
                                                            bufferingPolicy: .bufferingNewest(1024))
        if isShutDown {
            continuation.finish()
            return stream
        }
        let key = UUID()
        subscribers[key] = continuation
        continuation.onTermination = { [weak self] _ in
            Task { await self?.unsubscribe(key) }
        }
        for (id, e) in entries.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            continuation.yield(event(id, e))
        }
        return stream
    }

    private func unsubscribe(_ key: UUID) { subscribers[key] = nil }

    private func event(_ id: ServerID, _ e: Entry, retryIn: Duration? = nil, reconnected: Bool = false) -> AgentConnectionEvent {
        AgentConnectionEvent(host: id, state: e.state, error: e.state == .connected ? nil : e.lastError,
                             attempt: e.failedAttempts, retryIn: retryIn, reconnected: reconnected, date: Date())
    }

    private func emit(_ id: ServerID, _ e: Entry, retryIn: Duration? = nil, reconnected: Bool = false) {
        let ev = event(id, e, retryIn: retryIn, reconnected: reconnected)
        for c in subscribers.values { c.yield(ev) }
    }

    // MARK: using a host

    /// Runs `body` with the host connected and marked in use (so it is not dropped to
    /// make room for another). A failure of `body` that says the connection was lost
    /// starts the reconnect backoff.
    /// - Throws: `AgentError` (`invalidArgument` for a host that was not added, the
    ///   connect's `transport` error, `cancelled`), or what `body` throws.
    nonisolated func withHost<R>(_ id: ServerID, _ body: (AgentHost) async throws -> R) async throws -> R {
        let host = try await lease(id)
        do {
            let r = try await body(host)
            await release(id, failure: nil)
            return r
        } catch {
            await release(id, failure: error as? AgentError)
            throw error
        }
    }

    /// Attaches to a session (see `AgentHost.attach`); the host counts as in use until
    /// the terminal is detached or its output ended.
    nonisolated func attach(_ session: AgentSession,
                                   size: SSHTerminalSize = SSHTerminalSize(columns: 120, rows: 40))
        async throws(AgentError) -> AgentTerminal
    {
        let host = try await lease(session.host)
        do {
            let terminal = try await host.attach(session, size: size)
            terminal.whenEnded { [weak self] in
                Task { await self?.release(session.host, failure: nil) }
            }
            return terminal
        } catch {
            await release(session.host, failure: error)
            throw error
        }
    }

    /// Attaches a local terminal to a session (see `AgentHost.attach(_:joining:...)`);
    /// the host counts as in use until the terminal ended.
    nonisolated func attach(_ session: AgentSession, joining fd: Int32, size: SSHTerminalSize,
                            detachByte: UInt8?) async throws(AgentError) -> AgentJoinedTerminal
    {
        let host = try await lease(session.host)
        do {
            let terminal = try await host.attach(session, joining: fd, size: size, detachByte: detachByte)
            terminal.whenEnded { [weak self] in
                Task { await self?.release(session.host, failure: nil) }
            }
            return terminal
        } catch {
            await release(session.host, failure: error)
            throw error
        }
    }

    private func lease(_ id: ServerID) async throws(AgentError) -> AgentHost {
        guard !isShutDown else { throw AgentError(.invalidArgument, "the connection monitor was shut down") }
        guard let e = update(id, {
            $0.leases += 1
            $0.lastUsed = .now
            return $0
        }) else {
            throw AgentError(.invalidArgument, "the host \(id.rawValue) was not added to the connection monitor")
        }
        guard let managed = e.managed else { return e.host }
        if e.state == .connected, await managed.isConnected { return e.host }
        do {
            try await connect(id, managed)
            return e.host
        } catch {
            update(id) {
                $0.leases -= 1
                $0.lastError = error
            }
            if error.code != .cancelled, let now = entries[id], now.state == .connecting || now.state == .error {
                if now.liveSessions > 0 || now.connectsSeen > 0 {
                    startReconnecting(id)
                } else {
                    transition(id, to: .error, error: error)
                }
            }
            throw error
        }
    }

    private func release(_ id: ServerID, failure: AgentError?) async {
        guard let e = update(id, {
            $0.leases -= 1
            $0.lastUsed = .now
            return $0
        }) else { return }
        if let failure, Self.isConnectionLoss(failure) {
            await lost(id, failure)
        } else if e.state == .connected {
            await noteConnection(id)
            await leaseEnded(id)
        }
    }

    /// After any use of the host ends (a call, an attach, a health check, a reconnect):
    /// when a caller waits for a slot and this host is now idle and connected, it is
    /// dropped so its place goes to that caller. Every path that ends a lease comes here,
    /// so a waiter never waits on a host that went idle unnoticed.
    private func leaseEnded(_ id: ServerID) async {
        guard slotWaiters > 0, let now = entries[id], now.leases == 0, now.isHolding, now.state == .connected else { return }
        await evict(id)
    }

    /// The transport's own reconnect (a call found the connection gone and made a new
    /// one) counts as a reconnect too.
    private func noteConnection(_ id: ServerID) async {
        guard let m = entries[id]?.managed else { return }
        let made = await m.connectionsMade
        guard let e = entries[id], made != e.connectsSeen, e.holdsSlot else { return }
        let reconnected = e.connectsSeen > 0
        if reconnected { e.host.forgetCachedFacts() }
        update(id) {
            $0.connectsSeen = made
            $0.failedAttempts = 0
            $0.reconnect?.cancel()
            $0.reconnect = nil
        }
        transition(id, to: .connected, reconnected: reconnected)
    }

    static func isConnectionLoss(_ e: AgentError) -> Bool {
        guard e.code == .transport, let t = e.cause as? TransportError, !t.isCancellation else { return false }
        return t.code == .hostUnreachable || t.code == .noAnswer
    }

    // MARK: connecting

    /// Takes a connection slot for `id`, then connects.
    private func connect(_ id: ServerID, _ managed: any ConnectedTransport) async throws(AgentError) {
        try await takeSlot(id)
        // also from `connected`: its transport turned out to be down, and this is a connect again
        if entries[id]?.state != .connecting { transition(id, to: .connecting) }
        do {
            try await managed.connect()
        } catch {
            let e = AgentError(error, while: "connecting to \(name(id))")
            if entries[id]?.state == .connecting { transition(id, to: .error, error: e) }
            throw e
        }
        await noteConnection(id)
        if entries[id]?.state != .connected, entries[id]?.holdsSlot == true { transition(id, to: .connected) }
    }

    /// Gives `id` a connection slot: a free one; else the place of an idle host, which is
    /// dropped for it (hosts without agents first, then the least recently used); else
    /// the first place a host leaves, waited for on the gate. A host that holds one
    /// already (another call is connecting it) shares it.
    private func takeSlot(_ id: ServerID) async throws(AgentError) {
        while true {
            guard !isShutDown else { throw AgentError(.cancelled, "the connection monitor was shut down") }
            guard let e = entries[id] else { throw AgentError(.invalidArgument, "the host \(id.rawValue) was removed") }
            if e.holdsSlot { return }
            if slots.tryEnter() {
                update(id) { $0.holdsSlot = true }
                return
            }
            let idle = entries.filter { $0.key != id && $0.value.isHolding && $0.value.leases == 0 && $0.value.state == .connected }
            if let victim = idle.min(by: { ($0.value.liveSessions > 0 ? 1 : 0, $0.value.lastUsed) < ($1.value.liveSessions > 0 ? 1 : 0, $1.value.lastUsed) }) {
                await evict(victim.key)
                continue
            }
            slotWaiters += 1
            let admitted = await slots.enter()
            slotWaiters -= 1
            guard admitted else {
                if isShutDown { throw AgentError(.cancelled, "the connection monitor was shut down") }
                throw AgentError(.cancelled, "cancelled while waiting for a free connection slot for \(name(id))")
            }
            guard let now = entries[id], !now.holdsSlot else {
                // removed while it waited, or another call took a slot for it meanwhile
                slots.leave()
                if entries[id] == nil { throw AgentError(.invalidArgument, "the host \(id.rawValue) was removed") }
                return
            }
            update(id) { $0.holdsSlot = true }
            return
        }
    }

    /// Drops an idle host's connection: its slot goes to whoever waits for one.
    private func evict(_ id: ServerID) async {
        guard let e = entries[id] else { return }
        update(id) { $0.lastError = nil }
        transition(id, to: .disconnected)
        await e.managed?.disconnect()
    }

    /// The connection was lost (a call or the health check said so).
    private func lost(_ id: ServerID, _ error: AgentError) async {
        guard let e = entries[id], e.state == .connected || e.state == .connecting else { return }
        transition(id, to: .error, error: error)
        // an unanswered connection is dropped only when nothing uses it: the calls on it
        // fail by themselves (keepalive) and must not find it closed under them
        if e.leases == 0, let m = e.managed { await m.disconnect() }
        startReconnecting(id)
    }

    private func startReconnecting(_ id: ServerID) {
        guard !isShutDown, let e = entries[id], e.reconnect == nil else { return }
        update(id) { $0.reconnect = Task { [weak self] in await self?.reconnectLoop(id) } }
    }

    private func reconnectLoop(_ id: ServerID) async {
        while !Task.isCancelled {
            guard let e = entries[id], let managed = e.managed else { return }
            if e.state == .connected { break }
            let delay: Duration
            if e.failedAttempts < policy.backoff.count {
                delay = policy.backoff[e.failedAttempts]
            } else if e.liveSessions > 0 {
                delay = policy.slowRetryInterval
            } else {
                update(id) { $0.reconnect = nil }
                transition(id, to: .disconnected)
                return
            }
            transition(id, to: .error, retryIn: delay)
            do { try await Task.sleep(for: delay) } catch { return }
            guard let before = entries[id], before.state != .connected else { break }
            update(id) { $0.leases += 1 }
            do {
                try await connect(id, managed)
                update(id) { $0.leases -= 1 }
                await leaseEnded(id)
            } catch {
                update(id) { $0.leases -= 1 }
                if error.code == .cancelled { return }
                update(id) {
                    $0.failedAttempts += 1
                    $0.lastError = error
                }
                if entries[id]?.state == .connecting { transition(id, to: .error, error: error) }
            }
        }
        update(id) { $0.reconnect = nil }
    }

    // MARK: health

    /// Checks every connected host now, concurrently (the loop does it on its interval).
    func checkAll() async {
        let ids = entries.filter { $0.value.managed != nil && $0.value.state == .connected }.map(\.key)
        await withTaskGroup(of: Void.self) { group in
            for id in ids {
                group.addTask { await self.check(id) }
            }
        }
    }

    private func check(_ id: ServerID) async {
        guard let e = entries[id], e.state == .connected, let m = e.managed else { return }
        update(id) { $0.leases += 1 }
        var failure: AgentError?
        if await m.isConnected {
            let host = e.host
            let result = await Deadline.run(policy.healthCheckTimeout) { () async throws(AgentError) -> Int in
                try await host.tmux.sessions().filter(\.isRunning).count
            }
            switch result {
            case .success(let live): update(id) { $0.liveSessions = live }
            case .failure(let error) where error.code == .transport: failure = error
            case .failure: break // the connection answered (tmux failed, or the host has none)
            case nil:
                failure = AgentError(.transport, "the health check of \(name(id)) got no answer in \(policy.healthCheckTimeout)",
                                     cause: TransportError(.noAnswer, "no answer in \(policy.healthCheckTimeout)"))
            }
        } else {
            failure = AgentError(.transport, "the connection to \(name(id)) dropped",
                                 cause: TransportError(.hostUnreachable, "the connection dropped"))
        }
        guard update(id, { $0.leases -= 1 }) != nil else { return }
        if let failure {
            await lost(id, failure)
        } else {
            await noteConnection(id)
            await leaseEnded(id)
        }
    }
}

/// Runs an operation with a time limit; nil when the limit passed first (the operation
/// is cancelled and awaited).
enum Deadline {
    static func run<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws(AgentError) -> T)
        async -> Result<T, AgentError>?
    {
        await withTaskGroup(of: Result<T, AgentError>?.self) { group in
            group.addTask {
                do throws(AgentError) { return .success(try await body()) } catch { return .failure(error) }
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
}
