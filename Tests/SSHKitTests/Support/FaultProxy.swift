import Foundation
import Synchronization

/// A TCP proxy on 127.0.0.1 in front of a server, which damages or holds back the
/// bytes at chosen offsets. Each accepted connection is forwarded to `target`; the
/// faults apply to the byte counts of that connection (the latest one, for `arm`).
/// One thread, non-blocking sockets and a 10 ms poll tick; `stop()` ends it.
final class FaultProxy: Sendable {
    struct Faults: Sendable {
        /// Flip bit 4 of the server→client byte at this offset.
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
    }

    let port: Int
    private let target: Int
    private let listenFD: Int32
    private let stopPipe: (Int32, Int32)
    private let faults: Mutex<Faults>
    /// Bytes forwarded on the latest connection, each way.
    private let counts = Mutex<(clientToServer: Int, serverToClient: Int)>((0, 0))
    private let thread = Mutex<UncheckedThread?>(nil)
    private let done = Atomic<Bool>(false)
    let connections = Atomic<Int>(0)

    /// - Parameter clientReceiveBuffer: SO_RCVBUF of the client's side, small to make a
    ///   slow reader back the client's own send queue up quickly.
    init(target: Int, faults: Faults = Faults(), clientReceiveBuffer: Int? = nil) throws {
        self.target = target
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

    /// Bytes forwarded on the latest connection so far.
    var forwarded: (clientToServer: Int, serverToClient: Int) { counts.withLock { $0 } }

    /// Changes the faults; `body` also sees the latest connection's counts, so a fault
    /// can be placed relative to what has passed already.
    func arm(_ body: (inout Faults, _ clientToServer: Int, _ serverToClient: Int) -> Void) {
        let (c2s, s2c) = forwarded
        faults.withLock { body(&$0, c2s, s2c) }
    }

    private final class Pair {
        let client: Int32
        let server: Int32
        var toServer: [UInt8] = []
        var toClient: [UInt8] = []
        var c2s = 0
        var s2c = 0
        var lastClientRead = ContinuousClock.now
        var dead = false
        init(client: Int32, server: Int32) { self.client = client; self.server = server }
        func close() {
            guard !dead else { return }
            dead = true
            Glibc.close(client)
            Glibc.close(server)
        }
    }

    private func connectTarget() -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(target).bigEndian)
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

    /// Writes what `buffer` holds to `fd`; false when the peer is gone.
    private static func flush(_ buffer: inout [UInt8], to fd: Int32) -> Bool {
        guard !buffer.isEmpty else { return true }
        let n = buffer.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if n > 0 { buffer.removeFirst(n); return true }
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
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
                let clientTurn = f.clientBytesPerTick == nil || now - p.lastClientRead >= .milliseconds(10)
                var ce: Int32 = 0, se: Int32 = 0
                if p.toServer.isEmpty && clientTurn { ce |= Int32(POLLIN) }
                if !p.toClient.isEmpty { ce |= Int32(POLLOUT) }
                if p.toClient.isEmpty && !f.holdServerToClient { se |= Int32(POLLIN) }
                if !p.toServer.isEmpty { se |= Int32(POLLOUT) }
                fds.append(pollfd(fd: p.client, events: Int16(ce), revents: 0))
                fds.append(pollfd(fd: p.server, events: Int16(se), revents: 0))
            }
            if poll(&fds, nfds_t(fds.count), 10) < 0 && errno != EINTR { break }
            if fds[1].revents != 0 { break }
            let polled = pairs
            if fds[0].revents != 0 {
                let c = accept(listenFD, nil, nil)
                if c >= 0 {
                    let s = connectTarget()
                    if s < 0 {
                        close(c)
                    } else {
                        Self.nonBlocking(c)
                        Self.nonBlocking(s)
                        pairs.append(Pair(client: c, server: s))
                        counts.withLock { $0 = (0, 0) }
                        connections.add(1, ordering: .relaxed)
                    }
                }
            }
            for (i, p) in polled.enumerated() where !p.dead {
                let cr = fds[2 + 2 * i].revents, sr = fds[3 + 2 * i].revents
                if cr & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                    let want = min(chunk.count, f.clientBytesPerTick ?? chunk.count)
                    let n = read(p.client, &chunk, want)
                    if n <= 0 && !(n < 0 && errno == EAGAIN) { p.close(); continue }
                    if n > 0 {
                        p.toServer += chunk[0..<n]
                        p.c2s += n
                        p.lastClientRead = ContinuousClock.now
                        if let release = f.releaseHoldAtClientBytes, p.c2s >= release {
                            faults.withLock { $0.holdServerToClient = false; $0.releaseHoldAtClientBytes = nil }
                        }
                    }
                }
                if sr & Int16(POLLIN | POLLHUP | POLLERR) != 0 && !f.holdServerToClient {
                    let n = read(p.server, &chunk, chunk.count)
                    if n <= 0 && !(n < 0 && errno == EAGAIN) {
                        _ = Self.flushBlocking(&p.toClient, to: p.client)
                        p.close()
                        continue
                    }
                    if n > 0 {
                        var piece = Array(chunk[0..<n])
                        if let at = f.flipServerToClientAt, at >= p.s2c, at < p.s2c + n {
                            piece[at - p.s2c] ^= 0x10
                        }
                        if let at = f.resetServerToClientAt, at < p.s2c + n {
                            p.toClient += piece[0..<max(0, at - p.s2c)]
                            _ = Self.flushBlocking(&p.toClient, to: p.client)
                            var lin = linger(l_onoff: 1, l_linger: 0)
                            setsockopt(p.client, SOL_SOCKET, SO_LINGER, &lin, socklen_t(MemoryLayout<linger>.size))
                            p.s2c = at
                            p.close()
                            continue
                        }
                        p.toClient += piece
                        p.s2c += n
                    }
                }
                if !Self.flush(&p.toServer, to: p.server) || !Self.flush(&p.toClient, to: p.client) {
                    p.close()
                    continue
                }
                if p === pairs.last { counts.withLock { $0 = (p.c2s, p.s2c) } }
            }
            pairs.removeAll { $0.dead }
        }
        for p in pairs { p.close() }
    }

    /// Delivers what is left before a close (bounded: up to 2 s of a blocked peer).
    private static func flushBlocking(_ buffer: inout [UInt8], to fd: Int32) -> Bool {
        let deadline = ContinuousClock.now + .seconds(2)
        while !buffer.isEmpty && ContinuousClock.now < deadline {
            if !flush(&buffer, to: fd) { return false }
            if !buffer.isEmpty { usleep(1000) }
        }
        return buffer.isEmpty
    }

    /// Stops the thread and closes every socket it holds.
    func stop() {
        guard !done.exchange(true, ordering: .acquiringAndReleasing) else { return }
        endLoopThread(stopPipe: stopPipe, listenFD: listenFD, ticks: 300) { thread.withLock { $0?.thread.isFinished ?? true } }
    }

    deinit { stop() }
}
