import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A running remote forward (`ssh -R`): the server listens, and each connection to
/// its port comes back through its own channel, either bridged to a target this
/// machine reaches or handed to your code as an `SSHTunnel`.
///
/// `close()` asks the server to stop listening (`cancel-tcpip-forward`) and closes
/// every forwarded connection; the forward also stops when its connection ends or the
/// last reference to it is dropped.
public final class SSHRemoteForward: Sendable {
    /// The address the server was asked to bind ("localhost" unless given).
    public let bindAddress: String
    /// The port the server listens on (the one chosen when 0 was asked).
    public let port: Int
    let book: RemoteForwardBook

    init(bindAddress: String, port: Int, book: RemoteForwardBook) {
        self.bindAddress = bindAddress
        self.port = port
        self.book = book
    }

    deinit {
        book.stop(reason: nil)
    }

    /// The counters so far.
    public var statistics: SSHForwardStatistics { book.ledger.statistics }

    /// Stops listening on the server and closes every forwarded connection; returns once
    /// those connections have closed. Idempotent. The server stops listening when its
    /// `cancel-tcpip-forward` arrives: the connection sends it as soon as libssh's one
    /// global-request slot is free (a keepalive probe or another forward's request can
    /// hold it for a round trip), so another client that binds the same port right after
    /// `close()` may still find it taken. A new forward on this connection is ordered
    /// after the cancel.
    public func close() async {
        book.stop(reason: nil)
        _ = await book.waitUntilStopped(cancellable: false)
    }

    /// Waits until the forward has closed: returns after `close()`; throws the error
    /// that ended it otherwise, and `cancelled` at once when the waiting task is
    /// cancelled (the forward goes on).
    public func waitUntilClosed() async throws(SSHError) {
        if let error = await book.waitUntilStopped(cancellable: true) { throw error }
    }
}

extension SSHConnection {
    /// Remote forwarding (`ssh -R`) to a target this machine reaches: the server
    /// listens on `bindAddress`:`port` (0: a free port, reported as `port`), and each
    /// connection to it is bridged, inside the connection's worker, to a new
    /// connection to `target` made from here (a TCP host and port, or a Unix socket).
    ///
    /// A target that refuses closes that forwarded connection (a `failed` event); the
    /// forward goes on. Whether the server binds anything but loopback is up to its
    /// `GatewayPorts`.
    ///
    /// Port 0 picks a random port in 20000...32767 and, for `localhost` (or `""`, `"*"`),
    /// checks that a connection to it on the server's loopback comes back through this
    /// forward, picking another when the server refused it or another process holds
    /// it on one loopback.
    ///
    /// - Throws: `forwardingRefused` (`AllowTcpForwarding no`, `PermitListen`, a port
    ///   in use, no random port that worked), `invalidArgument`, `invalidState`, the
    ///   connection's failure.
    public func forwardRemotePort(bindAddress: String = "localhost", port: Int, to target: SSHForwardTarget,
                                  options: SSHForwardOptions = SSHForwardOptions()) async throws(SSHError) -> SSHRemoteForward {
        try target.validate()
        return try await startRemoteForward(bindAddress: bindAddress, port: port, options: options, mode: .bridge(target))
    }

    /// Remote forwarding with the connections handed to `handler` as tunnels (one task
    /// each). The tunnel is closed when `handler` returns.
    public func forwardRemotePort(bindAddress: String = "localhost", port: Int,
                                  options: SSHForwardOptions = SSHForwardOptions(),
                                  handler: @escaping @Sendable (SSHTunnel) async -> Void) async throws(SSHError) -> SSHRemoteForward {
        try await startRemoteForward(bindAddress: bindAddress, port: port, options: options, mode: .handler(handler))
    }

    private func startRemoteForward(bindAddress: String, port: Int, options: SSHForwardOptions,
                                    mode: RemoteForwardBook.Mode) async throws(SSHError) -> SSHRemoteForward {
        try options.validate()
        guard (0...65535).contains(port) else { throw SSHError(.invalidArgument, "port \(port) out of range 0...65535") }
        guard !bindAddress.utf8.contains(0) else { throw SSHError(.invalidArgument, "bind address contains NUL") }
        guard core.isReady else { throw SSHError(.invalidState, "the connection is closed") }
        if port == 0 {
            return try await startRemoteForwardOnRandomPort(bindAddress: bindAddress, options: options, mode: mode)
        }
        let book = RemoteForwardBook(mode: mode, options: options, logger: logger)
        let bound = try await book.start(on: core, address: bindAddress, port: port)
        logger.debug("remote forward listening", metadata: ["bind": "\(bindAddress):\(bound)"])
        return SSHRemoteForward(bindAddress: bindAddress, port: bound, book: book)
    }
}

/// One remote forward: its core op, and the connections it hands on (in a ledger).
final class RemoteForwardBook: Sendable {
    enum Mode: Sendable {
        case bridge(SSHForwardTarget)
        case handler(@Sendable (SSHTunnel) async -> Void)
    }

    private let forward = Mutex<CoreRemoteForward?>(nil)
    private let started = OpenWaiter()
    private let boundPort = Mutex(0)
    private let handlerTasks = Mutex<[UInt64: Task<Void, Never>]>([:])
    /// While a reach check is out: what each forwarded connection answers with.
    private let checkNonce = Mutex<[UInt8]?>(nil)
    let ledger: ForwardLedger
    let mode: Mode
    let options: SSHForwardOptions
    let logger: Logger

    init(mode: Mode, options: SSHForwardOptions, logger: Logger) {
        self.mode = mode
        self.options = options
        self.logger = logger
        self.ledger = ForwardLedger(options: options)
    }

    var statistics: SSHForwardStatistics { ledger.statistics }

    func start(on core: CoreConnection, address: String, port: Int) async throws(SSHError) -> Int {
        let op = try CoreRemoteForward.start(
            on: core, address: address, port: port, acceptTimeout: .seconds(30),
            handlers: RemoteForwardHandlers(
                listening: { [weak self] port in
                    self?.boundPort.withLock { $0 = port }
                    self?.started.resume(.success(()))
                },
                incoming: { [weak self] id, originator, originatorPort in
                    self?.incoming(id, peer: originator.contains(":") ? "[\(originator)]:\(originatorPort)" : "\(originator):\(originatorPort)")
                },
                finished: { [weak self] error in
                    self?.started.resume(.failure(error))
                    // the op runs until cancelled or the connection ends
                    self?.ledger.requestStop(reason: error.code == .cancelled ? nil : error)
                    self?.cancelHandlers()
                    self?.ledger.sourceEnded()
                }))
        forward.withLock { $0 = op }
        let r = await withTaskCancellationHandler {
            await started.wait()
        } onCancel: {
            op.cancel()
        }
        if case .failure(let e) = r {
            stop(reason: e)
            throw e
        }
        return boundPort.withLock { $0 }
    }

    private func incoming(_ id: UInt64, peer: String) {
        guard let op = forward.withLock({ $0 }) else { return }
        if let nonce = checkNonce.withLock({ $0 }) {
            answerReachCheck(id, nonce: nonce, op: op)
            return
        }
        guard ledger.admit(id) else {
            op.reject(id)
            ledger.rejected(id, peer: peer, reason: "the forward is stopping or more than \(options.maxConnections) connections are open")
            return
        }
        switch mode {
        case .bridge(let target):
            // connecting may take a while: not on the worker
            do throws(SSHError) {
                try startThread(name: "sshkit-rfwd") { [self] in
                    connectAndBridge(id, peer: peer, target: target, op: op)
                }
            } catch {
                // no thread to spare (a thread or process limit): this connection only
                op.reject(id)
                ledger.ended(id, peer: peer, target: target.description, error: error)
            }
        case .handler(let handler):
            // kept, so that stopping the forward cancels a handler that awaits something
            // other than its tunnel (close() waits for every connection to end)
            handlerTasks.withLock { tasks in
                tasks[id] = Task { [self] in
                    defer { _ = handlerTasks.withLock { $0.removeValue(forKey: id) } }
                    let channel: StreamChannel
                    do throws(SSHError) {
                        channel = try await op.stream(id, bufferLimit: options.bufferLimit)
                    } catch {
                        ledger.ended(id, peer: peer, target: nil, error: error)
                        return
                    }
                    let tunnel = SSHTunnel(channel: channel, target: peer)
                    ledger.attach(id, .tunnel(tunnel))
                    ledger.opened(id, peer: peer, target: nil)
                    await handler(tunnel)
                    tunnel.cancel()
                    ledger.ended(id, peer: peer, target: nil, error: nil)
                }
            }
        }
    }

    func beginReachCheck(_ nonce: [UInt8]) { checkNonce.withLock { $0 = nonce } }
    func endReachCheck() { checkNonce.withLock { $0 = nil } }

    /// A connection that arrived while a reach check was out (RemoteForwardRandomPort):
    /// answered with the check's bytes and closed, never handed on or counted.
    private func answerReachCheck(_ id: UInt64, nonce: [UInt8], op: CoreRemoteForward) {
        handlerTasks.withLock { tasks in
            tasks[id] = Task { [self] in
                defer { _ = handlerTasks.withLock { $0.removeValue(forKey: id) } }
                guard let channel = try? await op.stream(id, bufferLimit: 64 * 1024) else { return }
                defer { channel.cancel() }
                do throws(SSHError) {
                    try await channel.write(nonce)
                    try channel.finishInput()
                    _ = try await channel.exitStatus() // the check closes its end once it has read
                } catch {}
            }
        }
    }

    private func connectAndBridge(_ id: UInt64, peer: String, target: SSHForwardTarget, op: CoreRemoteForward) {
        let name = target.description
        let fd: Int32
        switch LocalConnector.connect(target, timeout: .seconds(10)) {
        case .failure(let e):
            op.reject(id)
            ledger.ended(id, peer: peer, target: name, error: e)
            return
        case .success(let s):
            fd = s
        }
        let ledger = self.ledger
        do {
            let bridge = try op.bridge(id, fd: fd, bufferLimit: options.bufferLimit, handlers: BridgeHandlers(
                opened: { _ in ledger.opened(id, peer: peer, target: name) },
                finished: { error, counts in ledger.ended(id, peer: peer, target: name, error: error, counts: counts) }))
            ledger.attach(id, .bridge(bridge))
        } catch {
            ledger.ended(id, peer: peer, target: name, error: error)
        }
    }

    /// Cancels the forward op and every connection it handed on (any thread).
    func stop(reason: SSHError?) {
        ledger.requestStop(reason: reason)
        forward.withLock { $0 }?.cancel()
        cancelHandlers()
    }

    private func cancelHandlers() {
        for task in handlerTasks.withLock({ Array($0.values) }) { task.cancel() }
    }

    func waitUntilStopped(cancellable: Bool) async -> SSHError? {
        await ledger.waitUntilStopped(cancellable: cancellable)
    }
}

/// Blocking connects to a forward's local target, with a deadline (called on a
/// thread of its own, never on a worker or the cooperative pool).
enum LocalConnector {
    static func connect(_ target: SSHForwardTarget, timeout: Duration) -> Result<Int32, SSHError> {
        switch target {
        case .unixSocket(let path):
            var addr = sockaddr_un()
            addr.sun_family = sa_family_t(AF_UNIX)
            let bytes = Array(path.utf8)
            guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
                return .failure(SSHError(.invalidArgument, "socket path too long"))
            }
            withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: bytes) }
            // non-blocking: a blocking connect to a server whose backlog is full waits
            // for as long as it stays full. Non-blocking, that is EAGAIN at once (Unix
            // sockets have no connect in progress to poll for): tried again until the deadline.
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { return .failure(ListenSockets.systemError("socket", errno)) }
            let deadline = monotonicMillis() + timeout.milliseconds
            while true {
                let rc = withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                    }
                }
                if rc == 0 { return .success(fd) }
                let e = errno
                if e == EINTR { continue }
                if e == EAGAIN && monotonicMillis() < deadline {
                    usleep(10_000)
                    continue
                }
                close(fd)
                return .failure(connectError(target, e == EAGAIN ? ETIMEDOUT : e))
            }
        case .tcp(let host, let port):
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            hints.ai_flags = AI_NUMERICSERV
            var list: UnsafeMutablePointer<addrinfo>?
            let rc = getaddrinfo(host, String(port), &hints, &list)
            guard rc == 0, let first = list else {
                return .failure(SSHError(.nameResolutionFailed, "cannot resolve \(host): \(String(cString: gai_strerror(rc)))"))
            }
            defer { freeaddrinfo(list) }
            var lastErrno: Int32 = ECONNREFUSED
            let deadline = monotonicMillis() + timeout.milliseconds
            var cur: UnsafeMutablePointer<addrinfo>? = first
            while let ai = cur {
                cur = ai.pointee.ai_next
                let fd = socket(ai.pointee.ai_family,
                                Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                guard fd >= 0 else { lastErrno = errno; continue }
                if Glibc.connect(fd, ai.pointee.ai_addr, ai.pointee.ai_addrlen) == 0 { return .success(fd) }
                guard errno == EINPROGRESS else { lastErrno = errno; close(fd); continue }
                var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                let left = max(0, deadline - monotonicMillis())
                if poll(&p, 1, Int32(clamping: left)) == 1 {
                    var err: Int32 = 0
                    var len = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)
                    if err == 0 {
                        var one: Int32 = 1
                        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                        return .success(fd)
                    }
                    lastErrno = err
                } else {
                    lastErrno = ETIMEDOUT
                }
                close(fd)
            }
            return .failure(connectError(target, lastErrno))
        }
    }

    private static func connectError(_ target: SSHForwardTarget, _ e: Int32) -> SSHError {
        let code: SSHError.Code = switch e {
        case ECONNREFUSED, ENOENT: .connectionRefused
        case EHOSTUNREACH, ENETUNREACH: .hostUnreachable
        case ETIMEDOUT: .connectTimeout
        default: .systemError
        }
        var err = SSHError(code, "cannot connect to \(target): \(String(cString: strerror(e)))")
        err.systemErrno = e
        return err
    }
}
