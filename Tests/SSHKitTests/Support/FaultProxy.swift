import Foundation
import Synchronization

/// A TCP proxy on 127.0.0.1 in front of a server, which damages or holds back the
/// bytes at chosen offsets. Each accepted connection is forwarded to `target`; the
/// faults apply to the byte counts of each connection (`arm` sees the latest one's).
/// One thread, non-blocking sockets and a 10 ms poll tick; `stop()` (or deinit) ends
/// it and closes every socket it holds.
final class FaultProxy: Sendable {
    /// Which bytes an `InjectedFault` counts and acts on.
    enum Direction: String, Sendable, CaseIterable {
        /// The server's bytes only; the client's pass untouched.
        case serverToClient = "s2c"
        /// Bytes either way, counted together in the order the proxy reads them; the
        /// fault acts on whichever direction crosses the offset (close, reset, stall,
        /// delay and throttle then act on both).
        case both
    }

    /// What happens at the offset.
    enum Kind: Sendable, CustomStringConvertible {
        /// Deliver the bytes before the offset, then send FIN (the server's side for
        /// `serverToClient`, both sides for `both`) and read and drop whatever follows.
        case close
        /// Deliver the bytes before the offset, then reset the client's socket (RST)
        /// and close the server's (`both`: reset both).
        case reset
        /// Flip bit 4 of the byte at the offset.
        case flip
        /// Deliver the bytes before the offset, then forward nothing more in the
        /// affected directions; the sockets stay open.
        case stall
        /// From the offset on, hold each piece this long before it is delivered.
        case delay(Duration)
        /// From the offset on, forward at most this many bytes per second.
        case throttle(bytesPerSecond: Int)

        var description: String {
            switch self {
            case .close: "close"
            case .reset: "reset"
            case .flip: "flip"
            case .stall: "stall"
            case .delay(let d): "delay \(d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000)ms"
            case .throttle(let rate): "throttle \(rate / 1024)KiB/s"
            }
        }
    }

    /// One fault at one offset (the reliability matrix's unit).
    struct InjectedFault: Sendable, CustomStringConvertible {
        var kind: Kind
        var direction: Direction
        var offset: Int
        var description: String { "\(kind) \(direction.rawValue)@\(offset)" }
    }

    struct Faults: Sendable {
        /// Flip bit 4 of the server→client byte at this offset; when bytes went past it while
        /// the fault was being armed (the loop relays with the faults it read before), the
        /// next byte from the server instead. Once per connection.
        var flipServerToClientAt: Int?
        /// When the server→client count reaches this offset, reset the client's socket
        /// (RST) and close the server's; the bytes before it are delivered.
        var resetServerToClientAt: Int?
        /// Forward nothing from the server while set (its bytes wait in TCP).
        var holdServerToClient = false
        /// End `holdServerToClient` once the client→server count reaches this offset.
        var releaseHoldAtClientBytes: Int?
        /// Read at most this many bytes from the client per 10 ms (a slow server).
        var clientBytesPerTick: Int?
        /// A fault of the matrix, applied to every connection from its start.
        var injected: InjectedFault?
    }

    let port: Int
    /// Where new connections go (`retarget` changes it: another server on the same
    /// address, as a man in the middle would be).
    private let target: Mutex<Int>
    private let listenFD: Int32
    private let stopPipe: (Int32, Int32)
    private let faults: Mutex<Faults>
    /// Bytes forwarded on the latest connection, each way.
    private let counts = Mutex<(clientToServer: Int, serverToClient: Int)>((0, 0))
    private let thread = Mutex<UncheckedThread?>(nil)
    private let done = Atomic<Bool>(false)
    let connections = Atomic<Int>(0)
    /// How many times the injected fault fired (once per connection at most).
    let fired = Atomic<Int>(0)

    /// - Parameter clientReceiveBuffer: SO_RCVBUF of the client's side, small to make a
    ///   slow reader back the client's own send queue up quickly.
    init(target: Int, faults: Faults = Faults(), clientReceiveBuffer: Int? = nil) throws {
        self.target = Mutex(target)
        self.faults = Mutex(faults)
        let (fd, port) = try loopbackListener(backlog: 64, receiveBuffer: clientReceiveBuffer)
        self.port = port
        listenFD = fd
        var p: [Int32] = [0, 0]
        _ = pipe(&p)
        stopPipe = (p[0], p[1])
        let t = Thread { [self] in self.loop() }
        t.start()
        thread.withLock { $0 = UncheckedThread(t) }
    }

    convenience init(target: Int, injecting fault: InjectedFault) throws {
        try self.init(target: target, faults: Faults(injected: fault))
    }

    /// Bytes forwarded on the latest connection so far.
    var forwarded: (clientToServer: Int, serverToClient: Int) { counts.withLock { $0 } }

    /// The first bytes each way (up to `captureLimit`) of the latest connection: the
    /// plaintext of the version exchange and of the first key exchange.
    var captured: (clientToServer: [UInt8], serverToClient: [UInt8]) { capture.withLock { $0 } }
    static let captureLimit = 64 << 10
    private let capture = Mutex<(clientToServer: [UInt8], serverToClient: [UInt8])>(([], []))

    /// Sends the connections accepted from now on to `port` instead.
    func retarget(_ port: Int) { target.withLock { $0 = port } }

    /// Changes the faults; `body` also sees the latest connection's counts, so a fault
    /// can be placed relative to what has passed already.
    func arm(_ body: (inout Faults, _ clientToServer: Int, _ serverToClient: Int) -> Void) {
        let (c2s, s2c) = forwarded
        faults.withLock { body(&$0, c2s, s2c) }
    }

    // MARK: the forwarding loop

    /// One direction of a connection.
    private final class Flow {
        let from: Int32
        let to: Int32
        let serverToClient: Bool
        /// Read but not yet written, in order, each piece with the time it may go.
        var pending: [(due: ContinuousClock.Instant, bytes: [UInt8])] = []
        var pendingBytes = 0
        /// Bytes read from `from`.
        var count = 0
        /// The first bytes read (up to `captureLimit`).
        var captured: [UInt8] = []
        var readEOF = false
        var shutDown = false
        /// The `flipServerToClientAt` already applied to this connection.
        var flipped: Int?
        var lastRead = ContinuousClock.now
        /// Token bucket of a throttle (bytes that may be read now).
        var allowance = 0.0
        var lastRefill = ContinuousClock.now
        init(from: Int32, to: Int32, serverToClient: Bool) {
            self.from = from
            self.to = to
            self.serverToClient = serverToClient
        }
    }

    private final class Pair {
        let client: Int32
        let server: Int32
        let c2s: Flow
        let s2c: Flow
        /// Bytes read either way (the position of a `.both` fault).
        var position = 0
        /// The injected fault has fired; for close and stall, which directions it stopped.
        var fired = false
        var stalledClientToServer = false
        var stalledServerToClient = false
        /// After an injected close: reading and dropping until EOF or this deadline.
        var drainingUntil: ContinuousClock.Instant?
        var dead = false
        init(client: Int32, server: Int32) {
            self.client = client
            self.server = server
            c2s = Flow(from: client, to: server, serverToClient: false)
            s2c = Flow(from: server, to: client, serverToClient: true)
        }
        func flow(serverToClient: Bool) -> Flow { serverToClient ? s2c : c2s }
        func close(resetClient: Bool = false, resetServer: Bool = false) {
            guard !dead else { return }
            dead = true
            if resetClient { FaultProxy.setLingerZero(client) }
            if resetServer { FaultProxy.setLingerZero(server) }
            Glibc.close(client)
            Glibc.close(server)
        }
    }

    /// POLLRDHUP (Linux; not exported to Swift by Glibc's module): the peer shut its
    /// writing side.
    private static let pollRDHUP: Int32 = 0x2000

    private static func setLingerZero(_ fd: Int32) {
        var lin = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lin, socklen_t(MemoryLayout<linger>.size))
    }

    private func connectTarget() -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(target.withLock { $0 }).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if rc != 0 { close(fd); return -1 }
        return fd
    }

    private static func nonBlocking(_ fd: Int32) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    /// Up to this much read ahead of the slower side, per direction.
    private static let pendingLimit = 256 << 10

    /// Whether `flow` may read now (room, no hold, no stall, throttle allowance).
    private func canRead(_ flow: Flow, in p: Pair, _ f: Faults, now: ContinuousClock.Instant) -> Bool {
        if flow.readEOF || p.drainingUntil != nil { return p.drainingUntil != nil && !flow.readEOF }
        if flow.pendingBytes >= Self.pendingLimit { return false }
        if flow.serverToClient {
            if f.holdServerToClient || p.stalledServerToClient { return false }
        } else {
            if p.stalledClientToServer { return false }
            if f.clientBytesPerTick != nil && now - flow.lastRead < .milliseconds(10) { return false }
        }
        if let rate = throttleRate(for: flow, in: p, f) {
            refill(flow, rate: rate, now: now)
            return flow.allowance >= 1
        }
        return true
    }

    /// The throttle that applies to `flow` now, if any.
    private func throttleRate(for flow: Flow, in p: Pair, _ f: Faults) -> Int? {
        guard let inj = f.injected, case .throttle(let rate) = inj.kind, p.fired else { return nil }
        return inj.direction == .both || flow.serverToClient ? rate : nil
    }

    private func refill(_ flow: Flow, rate: Int, now: ContinuousClock.Instant) {
        let elapsed = now - flow.lastRefill
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        flow.allowance = min(Double(rate) / 20, flow.allowance + seconds * Double(rate))
        flow.lastRefill = now
    }

    /// Applies the faults to a piece just read from `flow`; queues what is to be
    /// delivered. Returns false when the pair was closed (close or reset).
    private func receive(_ piece: [UInt8], on flow: Flow, in p: Pair, _ f: Faults, now: ContinuousClock.Instant) -> Bool {
        var piece = piece
        let n = piece.count
        let start = flow.count
        flow.count += n
        if flow.captured.count < Self.captureLimit {
            flow.captured += piece.prefix(Self.captureLimit - flow.captured.count)
        }
        let pairStart = p.position
        p.position += n
        flow.lastRead = now
        if flow.serverToClient {
            if let at = f.flipServerToClientAt, at < start + n, flow.flipped != at, n > 0 {
                piece[max(at, start) - start] ^= 0x10
                flow.flipped = at
            }
            if let at = f.resetServerToClientAt, at < start + n {
                enqueue(Array(piece[0..<max(0, at - start)]), on: flow, due: now)
                _ = Self.flushBlocking(flow)
                p.close(resetClient: true)
                return false
            }
        } else if let release = f.releaseHoldAtClientBytes, flow.count >= release {
            faults.withLock { $0.holdServerToClient = false; $0.releaseHoldAtClientBytes = nil }
        }
        var due = now
        if let inj = f.injected, inj.direction == .both || flow.serverToClient {
            let base = inj.direction == .both ? pairStart : start
            let cut = inj.offset - base  // index in `piece` where the fault starts
            if !p.fired && cut < n {
                p.fired = true
                fired.add(1, ordering: .relaxed)
                let before = Array(piece[0..<max(0, cut)])
                switch inj.kind {
                case .flip:
                    if cut >= 0 { piece[cut] ^= 0x10 }
                case .close:
                    enqueue(before, on: flow, due: now)
                    beginClose(p, both: inj.direction == .both, now: now)
                    return true
                case .reset:
                    enqueue(before, on: flow, due: now)
                    _ = Self.flushBlocking(flow)
                    p.close(resetClient: true, resetServer: inj.direction == .both)
                    return false
                case .stall:
                    enqueue(before, on: flow, due: now)
                    p.stalledServerToClient = true
                    p.stalledClientToServer = inj.direction == .both
                    return true
                case .delay(let d):
                    enqueue(before, on: flow, due: now)
                    enqueue(Array(piece[max(0, cut)...]), on: flow, due: now + d)
                    return true
                case .throttle:
                    flow.lastRefill = now
                }
            } else if p.fired, case .delay(let d) = inj.kind {
                due = now + d
            }
            if p.fired, case .throttle = inj.kind { flow.allowance -= Double(n) }
        }
        enqueue(piece, on: flow, due: due)
        return true
    }

    private func enqueue(_ bytes: [UInt8], on flow: Flow, due: ContinuousClock.Instant) {
        guard !bytes.isEmpty else { return }
        flow.pending.append((due, bytes))
        flow.pendingBytes += bytes.count
    }

    /// An injected close: what is queued goes out, then FIN to the client (and to the
    /// server for `both`); from then on both sides are read and dropped (so no unread
    /// data turns the FIN into a reset) until they end or 5 s pass.
    private func beginClose(_ p: Pair, both: Bool, now: ContinuousClock.Instant) {
        _ = Self.flushBlocking(p.s2c)
        shutdown(p.client, Int32(SHUT_WR))
        p.s2c.shutDown = true
        if both {
            _ = Self.flushBlocking(p.c2s)
            shutdown(p.server, Int32(SHUT_WR))
            p.c2s.shutDown = true
        }
        p.s2c.pending.removeAll()
        p.s2c.pendingBytes = 0
        if both {
            p.c2s.pending.removeAll()
            p.c2s.pendingBytes = 0
        }
        p.drainingUntil = now + .seconds(5)
    }

    /// Writes the pieces of `flow` that are due; false when the peer is gone.
    private static func flush(_ flow: Flow, now: ContinuousClock.Instant) -> Bool {
        while let first = flow.pending.first, first.due <= now {
            let n = first.bytes.withUnsafeBytes { send(flow.to, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 { return errno == EAGAIN || errno == EWOULDBLOCK }
            flow.pendingBytes -= n
            if n == first.bytes.count {
                flow.pending.removeFirst()
            } else {
                flow.pending[0].bytes.removeFirst(n)
                return true
            }
        }
        return true
    }

    /// Delivers what is queued before a close (bounded: up to 2 s of a blocked peer).
    private static func flushBlocking(_ flow: Flow) -> Bool {
        let deadline = ContinuousClock.now + .seconds(2)
        while !flow.pending.isEmpty && ContinuousClock.now < deadline {
            for i in flow.pending.indices { flow.pending[i].due = .now }
            if !flush(flow, now: .now) { return false }
            if !flow.pending.isEmpty { usleep(1000) }
        }
        return flow.pending.isEmpty
    }

    private func loop() {
        var pairs: [Pair] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while !done.load(ordering: .acquiring) {
            let f = faults.withLock { $0 }
            var fds = [pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: stopPipe.0, events: Int16(POLLIN), revents: 0)]
            let now = ContinuousClock.now
            for p in pairs {
                var ce: Int32 = p.stalledClientToServer ? Self.pollRDHUP : 0
                var se: Int32 = p.stalledServerToClient ? Self.pollRDHUP : 0
                if canRead(p.c2s, in: p, f, now: now) { ce |= Int32(POLLIN) }
                if canRead(p.s2c, in: p, f, now: now) { se |= Int32(POLLIN) }
                if let d = p.s2c.pending.first?.due, d <= now { ce |= Int32(POLLOUT) }
                if let d = p.c2s.pending.first?.due, d <= now { se |= Int32(POLLOUT) }
                fds.append(pollfd(fd: p.client, events: Int16(ce), revents: 0))
                fds.append(pollfd(fd: p.server, events: Int16(se), revents: 0))
            }
            if poll(&fds, nfds_t(fds.count), 10) < 0 && errno != EINTR { break }
            if fds[1].revents != 0 { break }
            let polled = pairs
            if fds[0].revents != 0 { accept(into: &pairs) }
            let now2 = ContinuousClock.now
            for (i, p) in polled.enumerated() where !p.dead {
                let revents = [fds[2 + 2 * i].revents, fds[3 + 2 * i].revents]
                service(p, clientEvents: revents[0], serverEvents: revents[1], f, now: now2, chunk: &chunk)
                if !p.dead && p === pairs.last {
                    counts.withLock { $0 = (p.c2s.count, p.s2c.count) }
                    if capture.withLock({ $0.clientToServer.count != p.c2s.captured.count || $0.serverToClient.count != p.s2c.captured.count }) {
                        capture.withLock { $0 = (p.c2s.captured, p.s2c.captured) }
                    }
                }
            }
            pairs.removeAll { $0.dead }
        }
        for p in pairs { p.close() }
    }

    private func accept(into pairs: inout [Pair]) {
        let c = Glibc.accept(listenFD, nil, nil)
        guard c >= 0 else { return }
        let s = connectTarget()
        guard s >= 0 else { close(c); return }
        Self.nonBlocking(c)
        Self.nonBlocking(s)
        pairs.append(Pair(client: c, server: s))
        counts.withLock { $0 = (0, 0) }
        capture.withLock { $0 = ([], []) }
        connections.add(1, ordering: .relaxed)
    }

    /// One tick of one connection: reads what polled ready (through the faults), writes
    /// what is due, passes an end on, and closes the pair when both directions ended.
    private func service(_ p: Pair, clientEvents: Int16, serverEvents: Int16, _ f: Faults,
                         now: ContinuousClock.Instant, chunk: inout [UInt8]) {
        let gone = Int16(POLLHUP | POLLERR)
        let hangUp = gone | Int16(Self.pollRDHUP)
        if let until = p.drainingUntil {
            // after an injected close: read and drop until the client's side ends
            for flow in [p.c2s, p.s2c] where !flow.readEOF {
                while true {
                    let n = read(flow.from, &chunk, chunk.count)
                    if n > 0 { continue }
                    if n == 0 { flow.readEOF = true }
                    if n < 0 && errno != EAGAIN && errno != EINTR { flow.readEOF = true }
                    break
                }
            }
            if now >= until || p.c2s.readEOF { p.close() }
            return
        }
        // a stalled direction whose source hangs up (the client giving up, the server
        // gone): nothing more can pass, so the connection ends
        if (p.stalledClientToServer && clientEvents & hangUp != 0) || (p.stalledServerToClient && serverEvents & hangUp != 0)
            || (p.stalledServerToClient && clientEvents & gone != 0)
        {
            p.close()
            return
        }
        for (flow, events) in [(p.c2s, clientEvents), (p.s2c, serverEvents)] where !p.dead {
            guard events & (Int16(POLLIN) | gone) != 0, canRead(flow, in: p, f, now: now) else { continue }
            var want = chunk.count
            if !flow.serverToClient, let perTick = f.clientBytesPerTick { want = min(want, perTick) }
            if throttleRate(for: flow, in: p, f) != nil { want = max(1, min(want, Int(flow.allowance))) }
            let n = read(flow.from, &chunk, want)
            if n < 0 && (errno == EAGAIN || errno == EINTR) { continue }
            if n < 0 {
                p.close()
                return
            }
            if n == 0 {
                flow.readEOF = true
                continue
            }
            if !receive(Array(chunk[0..<n]), on: flow, in: p, f, now: now) { return }
            if p.drainingUntil != nil { return }
        }
        for flow in [p.c2s, p.s2c] {
            if !Self.flush(flow, now: now) {
                p.close()
                return
            }
            // an end read on one side goes on to the other once its bytes are out
            if flow.readEOF && flow.pending.isEmpty && !flow.shutDown {
                flow.shutDown = true
                shutdown(flow.to, Int32(SHUT_WR))
            }
        }
        if p.c2s.shutDown && p.s2c.shutDown { p.close() }
    }

    /// Stops the thread and closes every socket it holds.
    func stop() {
        guard !done.exchange(true, ordering: .acquiringAndReleasing) else { return }
        endLoopThread(stopPipe: stopPipe, listenFD: listenFD, ticks: 300) { thread.withLock { $0?.thread.isFinished ?? true } }
    }

    deinit { stop() }
}
