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

    /// Whether the wake-up eventfd is still open (the thread closes it as it exits).
    private let wakeOpen = Mutex(true)
    /// The connection's termination handler, taken back at shutdown.
    private let terminationToken = Mutex<UInt64?>(nil)
    private let wakeFD: Int32
    private let listenFDs: [Int32]
    private let unixPath: String?
    private let mode: Mode
    private let options: SSHForwardOptions
    private let connection: CoreConnection
    private let logger: Logger
    let ledger: ForwardLedger

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
        self.ledger = ForwardLedger(options: options)
    }

    deinit {
        wakeOpen.withLock { open in
            if open { close(wakeFD) } // the thread never ran
        }
    }

    /// Starts the listener's thread; without one, the listener is closed and the error thrown.
    func start() throws(SSHError) {
        // the connection ending stops the forward (taken back when the forward stops first)
        let token = connection.context.onTerminated { [weak self] in
            self?.requestStop(reason: SSHError(.connectionClosed, "the SSH connection ended"))
        }
        terminationToken.withLock { $0 = token }
        do throws(SSHError) {
            try startThread(name: "sshkit-forward") { [self] in
                run()
            }
        } catch {
            shutDown(handshakes: [:])
            throw error
        }
    }

    /// Stops the forward (any thread, never blocks): its connections are closed now, the
    /// listener by its thread.
    func requestStop(reason: SSHError?) {
        guard ledger.requestStop(reason: reason) else { return }
        wakeOpen.withLock { open in
            // under the lock: the thread closes the fd under it as it exits
            var one: UInt64 = 1
            if open { _ = write(wakeFD, &one, 8) }
        }
    }

    func waitUntilStopped(cancellable: Bool) async -> SSHError? {
        await ledger.waitUntilStopped(cancellable: cancellable)
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

        loop: while !ledger.stopRequested {
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
                func turnAway(_ reason: String, reply: [UInt8] = []) {
                    handshakes[fd] = nil
                    ledger.dismiss(h.id, peer: h.peer, reason: reason) // counted before the client can see it
                    ListenSockets.sendAll(fd, reply)
                    close(fd)
                }
                if n <= 0 {
                    turnAway("the client closed during the SOCKS handshake")
                    continue
                }
                switch h.socks.feed(buffer[0..<n]) {
                case .needMore(let reply):
                    if ListenSockets.sendAll(fd, reply) {
                        handshakes[fd] = h
                    } else {
                        turnAway("could not answer the SOCKS client")
                    }
                case .reject(let reply, let reason):
                    turnAway(reason, reply: reply)
                case .connect(let host, let port, let version, let leftover, let reply):
                    guard ListenSockets.sendAll(fd, reply) else {
                        turnAway("could not answer the SOCKS client")
                        continue
                    }
                    handshakes[fd] = nil
                    if !startBridge(fd: fd, id: h.id, peer: h.peer, target: .tcp(host: host, port: port),
                                    firstData: leftover, socks: version) {
                        break loop
                    }
                }
            }
            let later = monotonicMillis()
            for (fd, h) in handshakes where h.deadline <= later {
                handshakes[fd] = nil
                ledger.dismiss(h.id, peer: h.peer, reason: "no SOCKS request within \(options.handshakeTimeout)")
                close(fd)
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
            guard ledger.admit(id) else {
                ledger.rejected(id, peer: peer, reason: "more than \(options.maxConnections) connections open")
                close(fd)
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

    /// Hands `fd` (an admitted connection) to a bridge; false when the connection is
    /// gone (the forward stops).
    private func startBridge(fd: Int32, id: UInt64, peer: String, target: SSHForwardTarget, firstData: [UInt8],
                             socks: SOCKSHandshake.Version?) -> Bool {
        let ledger = self.ledger
        let name = target.description
        let handlers = BridgeHandlers(
            opened: { fd in
                if let socks { ListenSockets.sendAll(fd, SOCKSHandshake.success(socks)) }
                ledger.opened(id, peer: peer, target: name)
            },
            failed: { fd, error in
                if let socks { ListenSockets.sendAll(fd, SOCKSHandshake.failure(socks, error: error)) }
            },
            finished: { error, counts in
                ledger.ended(id, peer: peer, target: name, error: error, counts: counts)
            })
        do {
            let bridge = try CoreBridge.start(on: connection, target: target.direct(originator: peer), fd: fd,
                                              firstData: firstData, bufferLimit: options.bufferLimit, handlers: handlers)
            ledger.attach(id, .bridge(bridge))
            return true
        } catch {
            // the fd is closed; no handler ran
            ledger.ended(id, peer: peer, target: name, error: error)
            logger.debug("forward: cannot open a channel", metadata: ["error": "\(error)"])
            if error.code == .invalidState || error.code == .connectionClosed || error.code == .disconnected
                || error.code == .connectionLost || error.code == .streamCorrupted {
                requestStop(reason: error)
                return false
            }
            return true
        }
    }

    /// Closes the listener and the handshakes; the ledger reports `stopped` once the last
    /// forwarded connection has finished (its socket is then closed).
    private func shutDown(handshakes: [Int32: Handshake]) {
        if let token = terminationToken.withLock({ $0 }) { connection.context.removeTerminationHandler(token) }
        for fd in listenFDs { close(fd) }
        if let unixPath { unlink(unixPath) }
        for (fd, h) in handshakes {
            ledger.dismiss(h.id, peer: h.peer, reason: "the forward stopped")
            close(fd)
        }
        requestStop(reason: nil) // no-op when already stopping; closes what is still open
        wakeOpen.withLock { open in
            if open { close(wakeFD) }
            open = false
        }
        ledger.sourceEnded()
    }
}

func monotonicMillis() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}

/// Runs `body` on a new detached thread with every signal blocked; `systemError` when no
/// thread can be made (a thread or process limit), and `body` then never runs.
func startThread(name: String, _ body: @escaping @Sendable () -> Void) throws(SSHError) {
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
    guard rc == 0 else {
        Unmanaged<AnyObject>.fromOpaque(box).release() // the thread that would have taken it
        throw ListenSockets.systemError("pthread_create", rc)
    }
}
