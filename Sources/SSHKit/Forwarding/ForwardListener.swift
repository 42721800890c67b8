import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The accepting side of a local or dynamic forward: one thread per forward polls the
/// listening sockets, a wake-up eventfd and the sockets still in a SOCKS handshake.
/// Each client, once its target is known, becomes a `CoreBridge` on the connection's
/// worker, and the listener is done with it.
final class ForwardListener: Sendable {
    enum Mode: Sendable {
        case direct(SSHForwardTarget)
        case socks
    }

    private struct Entry {
        var bridge: CoreBridge?
    }

    private struct Shared {
        var stats = SSHForwardStatistics()
        var entries: [UInt64: Entry] = [:]
        var stopRequested = false
        var stopReason: SSHError?
        var threadExited = false
        var stopped = false
        var waiters: [CheckedContinuation<SSHError?, Never>] = []
    }

    private let shared = Mutex(Shared())
    private let wakeFD: Int32
    private let listenFDs: [Int32]
    private let unixPath: String?
    private let mode: Mode
    private let options: SSHForwardOptions
    private let connection: CoreConnection
    private let logger: Logger

    /// Takes ownership of `listenFDs` (closed when the listener stops).
    init(listenFDs: [Int32], unixPath: String?, mode: Mode, options: SSHForwardOptions,
         connection: CoreConnection, logger: Logger) throws(SSHError) {
        let wake = CoreSockets.eventFD()
        guard wake >= 0 else {
            let e = errno
            for fd in listenFDs { close(fd) }
            throw ListenSockets.systemError("eventfd", e)
        }
        self.wakeFD = wake
        self.listenFDs = listenFDs
        self.unixPath = unixPath
        self.mode = mode
        self.options = options
        self.connection = connection
        self.logger = logger
    }

    deinit {
        shared.withLock { s in
            if !s.threadExited { close(wakeFD) } // never started
        }
    }

    var statistics: SSHForwardStatistics { shared.withLock { $0.stats } }

    func start() {
        startThread(name: "sshkit-forward") { [self] in
            run()
        }
        // the connection ending stops the forward
        let context = connection.context
        Task { [weak self] in
            await context.waitUntilTerminated()
            self?.requestStop(reason: SSHError(.connectionClosed, "the SSH connection ended"))
        }
    }

    /// Asks the thread to stop (any thread, never blocks).
    func requestStop(reason: SSHError?) {
        shared.withLock { s in
            guard !s.stopRequested else { return }
            s.stopRequested = true
            s.stopReason = reason
            // under the lock: the thread closes the fd under it once it saw the request
            var one: UInt64 = 1
            _ = write(wakeFD, &one, 8)
        }
    }

    func waitUntilStopped() async -> SSHError? {
        await withCheckedContinuation { c in
            let done = shared.withLock { s -> SSHError?? in
                if s.stopped { return .some(s.stopReason) }
                s.waiters.append(c)
                return nil
            }
            if let done { c.resume(returning: done) }
        }
    }

    // MARK: the thread

    private struct Handshake {
        var socks = SOCKSHandshake()
        var deadline: Int64
        var id: UInt64
        var peer: String
    }

    private func run() {
        var handshakes: [Int32: Handshake] = [:]
        var nextID: UInt64 = 0
        var pausedUntil: Int64 = 0 // out of fds: stop accepting for a moment
        var buffer = [UInt8](repeating: 0, count: 2048)

        loop: while !shared.withLock({ $0.stopRequested }) {
            var pfds = [pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
            let now = monotonicMillis()
            if now >= pausedUntil {
                for fd in listenFDs { pfds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0)) }
            }
            let listenCount = pfds.count - 1
            let handshakeFDs = Array(handshakes.keys)
            for fd in handshakeFDs { pfds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0)) }
            var timeout: Int64 = -1
            if let soonest = handshakes.values.map(\.deadline).min() { timeout = max(0, soonest - now) }
            if pausedUntil > now { timeout = timeout < 0 ? pausedUntil - now : min(timeout, pausedUntil - now) }
            let rc = poll(&pfds, nfds_t(pfds.count), Int32(clamping: timeout))
            if rc < 0 && errno != EINTR { break loop }

            if pfds[0].revents != 0 {
                var v: UInt64 = 0
                _ = read(wakeFD, &v, 8)
            }
            for i in 0..<listenCount where pfds[1 + i].revents != 0 {
                acceptAll(pfds[1 + i].fd, handshakes: &handshakes, nextID: &nextID, pausedUntil: &pausedUntil)
            }
            for (k, fd) in handshakeFDs.enumerated() where pfds[1 + listenCount + k].revents != 0 {
                guard var h = handshakes[fd] else { continue }
                let n = recv(fd, &buffer, buffer.count, 0)
                if n < 0 && (errno == EAGAIN || errno == EINTR) { continue }
                if n <= 0 {
                    handshakes[fd] = nil
                    close(fd)
                    reject(h.id, peer: h.peer, reason: "the client closed during the SOCKS handshake")
                    continue
                }
                switch h.socks.feed(buffer[0..<n]) {
                case .needMore(let reply):
                    if !ListenSockets.sendAll(fd, reply) {
                        handshakes[fd] = nil
                        close(fd)
                        reject(h.id, peer: h.peer, reason: "could not answer the SOCKS client")
                    } else {
                        handshakes[fd] = h
                    }
                case .reject(let reply, let reason):
                    handshakes[fd] = nil
                    ListenSockets.sendAll(fd, reply)
                    close(fd)
                    reject(h.id, peer: h.peer, reason: reason)
                case .connect(let host, let port, let version, let leftover, let reply):
                    handshakes[fd] = nil
                    if !ListenSockets.sendAll(fd, reply) {
                        close(fd)
                        reject(h.id, peer: h.peer, reason: "could not answer the SOCKS client")
                        continue
                    }
                    let target = SSHForwardTarget.tcp(host: host, port: port)
                    if !startBridge(fd: fd, id: h.id, peer: h.peer, target: target, firstData: leftover,
                                    socks: version) {
                        break loop
                    }
                }
            }
            let later = monotonicMillis()
            for (fd, h) in handshakes where h.deadline <= later {
                handshakes[fd] = nil
                close(fd)
                reject(h.id, peer: h.peer, reason: "no SOCKS request within \(options.handshakeTimeout)")
            }
        }
        shutDown(handshakes: handshakes)
    }

    private func acceptAll(_ listener: Int32, handshakes: inout [Int32: Handshake], nextID: inout UInt64,
                           pausedUntil: inout Int64) {
        for _ in 0..<64 {
            guard let accepted = ListenSockets.accept(listener) else {
                // EMFILE and the like: the pending client stays queued; try again soon
                logger.warning("accept failed", metadata: ["errno": "\(errno)"])
                pausedUntil = monotonicMillis() + 100
                return
            }
            guard let (fd, peer) = accepted else { return }
            nextID += 1
            let id = nextID
            let admitted = shared.withLock { s -> Bool in
                s.stats.accepted += 1
                guard s.entries.count + handshakes.count < options.maxConnections else { return false }
                return true
            }
            guard admitted else {
                close(fd)
                reject(id, peer: peer, reason: "more than \(options.maxConnections) connections open")
                continue
            }
            switch mode {
            case .direct(let target):
                if !startBridge(fd: fd, id: id, peer: peer, target: target, firstData: [], socks: nil) { return }
            case .socks:
                handshakes[fd] = Handshake(deadline: monotonicMillis() + options.handshakeTimeout.milliseconds,
                                           id: id, peer: peer)
            }
        }
    }

    /// Hands `fd` to a bridge; false when the connection is gone (the forward stops).
    private func startBridge(fd: Int32, id: UInt64, peer: String, target: SSHForwardTarget, firstData: [UInt8],
                             socks: SOCKSHandshake.Version?) -> Bool {
        let handler = options.eventHandler
        let name = target.description
        shared.withLock { s in
            s.entries[id] = Entry(bridge: nil)
            s.stats.active += 1
        }
        let handlers = BridgeHandlers(
            opened: { fd in
                if let socks { ListenSockets.sendAll(fd, SOCKSHandshake.success(socks)) }
                handler?(SSHForwardEvent(connectionID: id, peer: peer, target: name, kind: .opened))
            },
            failed: { fd, error in
                if let socks { ListenSockets.sendAll(fd, SOCKSHandshake.failure(socks, error: error)) }
            },
            finished: { [weak self] error, counts in
                self?.finished(id: id, error: error, counts: counts)
                if let error {
                    handler?(SSHForwardEvent(connectionID: id, peer: peer, target: name, kind: .failed(error)))
                } else {
                    handler?(SSHForwardEvent(connectionID: id, peer: peer, target: name,
                                             kind: .closed(toClient: counts.toSocket, fromClient: counts.fromSocket)))
                }
            })
        do {
            let bridge = try CoreBridge.start(on: connection, target: target.direct(originator: peer), fd: fd,
                                              firstData: firstData, bufferLimit: options.bufferLimit, handlers: handlers)
            let cancelNow = shared.withLock { s -> Bool in
                guard s.entries[id] != nil else { return false } // already over
                s.entries[id]?.bridge = bridge
                return s.stopRequested
            }
            if cancelNow { bridge.cancel() }
            return true
        } catch {
            // the fd is closed; no handler ran
            shared.withLock { s in
                s.entries[id] = nil
                s.stats.active -= 1
                s.stats.failed += 1
            }
            handler?(SSHForwardEvent(connectionID: id, peer: peer, target: name, kind: .failed(error)))
            logger.debug("forward: cannot open a channel", metadata: ["error": "\(error)"])
            if error.code == .invalidState || error.code == .connectionClosed || error.code == .disconnected
                || error.code == .connectionLost {
                requestStop(reason: error)
                return false
            }
            return true
        }
    }

    private func finished(id: UInt64, error: SSHError?, counts: BridgeCounts) {
        let waiters = shared.withLock { s -> [CheckedContinuation<SSHError?, Never>] in
            guard s.entries.removeValue(forKey: id) != nil else { return [] }
            s.stats.active -= 1
            if error == nil { s.stats.completed += 1 } else { s.stats.failed += 1 }
            s.stats.bytesToClients += counts.toSocket
            s.stats.bytesFromClients += counts.fromSocket
            return markStoppedIfIdle(&s)
        }
        for w in waiters { w.resume(returning: shared.withLock { $0.stopReason }) }
    }

    private func reject(_ id: UInt64, peer: String, reason: String) {
        shared.withLock { $0.stats.rejected += 1 }
        logger.debug("forward: rejected", metadata: ["peer": "\(peer)", "reason": "\(reason)"])
        options.eventHandler?(SSHForwardEvent(connectionID: id, peer: peer, target: nil, kind: .rejected(reason: reason)))
    }

    /// Closes the listener and the handshakes, cancels every bridge; `stopped` once
    /// the last bridge has finished (its socket is then closed).
    private func shutDown(handshakes: [Int32: Handshake]) {
        for fd in listenFDs { close(fd) }
        if let unixPath { unlink(unixPath) }
        for (fd, h) in handshakes {
            close(fd)
            reject(h.id, peer: h.peer, reason: "the forward stopped")
        }
        let bridges = shared.withLock { s -> [CoreBridge] in
            s.stopRequested = true
            s.threadExited = true
            close(wakeFD)
            return s.entries.values.compactMap(\.bridge)
        }
        for b in bridges { b.cancel() }
        let (waiters, reason) = shared.withLock { s in (markStoppedIfIdle(&s), s.stopReason) }
        for w in waiters { w.resume(returning: reason) }
    }

    private func markStoppedIfIdle(_ s: inout Shared) -> [CheckedContinuation<SSHError?, Never>] {
        guard s.threadExited, s.entries.isEmpty, !s.stopped else { return [] }
        s.stopped = true
        defer { s.waiters = [] }
        return s.waiters
    }
}

func monotonicMillis() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}

/// Runs `body` on a new detached thread with every signal blocked.
func startThread(name: String, _ body: @escaping @Sendable () -> Void) {
    final class Box: @unchecked Sendable {
        let body: @Sendable () -> Void
        let name: String
        init(_ body: @escaping @Sendable () -> Void, name: String) { self.body = body; self.name = name }
    }
    let box = Unmanaged.passRetained(Box(body, name: name)).toOpaque()
    var attr = pthread_attr_t()
    pthread_attr_init(&attr)
    pthread_attr_setdetachstate(&attr, Int32(PTHREAD_CREATE_DETACHED))
    var all = sigset_t()
    var old = sigset_t()
    sigfillset(&all)
    pthread_sigmask(SIG_BLOCK, &all, &old) // the new thread inherits the mask
    var thread = pthread_t()
    let rc = pthread_create(&thread, &attr, { raw in
        let b = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
        CoreSockets.setThreadName(b.name)
        b.body()
        return nil
    }, box)
    pthread_sigmask(SIG_SETMASK, &old, nil)
    pthread_attr_destroy(&attr)
    precondition(rc == 0, "pthread_create failed: \(rc)")
}
