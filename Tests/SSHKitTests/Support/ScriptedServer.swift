import Foundation
import Synchronization

/// A TCP listener on 127.0.0.1 that runs `script` for each connection it accepts, on a
/// thread of its own, then closes the socket: a server that misbehaves in a way a test
/// writes out byte by byte (an endless banner, lines before the version). `stop()` ends
/// the scripts (they poll `stopped`), waits for them (bounded) and closes the listener.
final class ScriptedServer: Sendable {
    typealias Script = @Sendable (_ fd: Int32, _ stopped: @Sendable () -> Bool) -> Void

    let port: Int
    private let listenFD: Int32
    private let done = Atomic<Bool>(false)
    private let running = Atomic<Int>(0)
    private let acceptorDone = Atomic<Bool>(false)
    let accepted = Atomic<Int>(0)

    init(_ script: @escaping Script) throws {
        let (fd, port) = try loopbackListener(backlog: 64)
        listenFD = fd
        self.port = port
        Thread.detachNewThread { [self] in acceptLoop(script) }
    }

    deinit { stop() }

    private func acceptLoop(_ script: @escaping Script) {
        defer { acceptorDone.store(true, ordering: .releasing) }
        while !done.load(ordering: .acquiring) {
            var p = pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 50) > 0 else { continue }
            let c = accept(listenFD, nil, nil)
            guard c >= 0 else { continue }
            _ = fcntl(c, F_SETFD, FD_CLOEXEC)
            accepted.add(1, ordering: .relaxed)
            running.add(1, ordering: .acquiringAndReleasing)
            Thread.detachNewThread { [self] in
                script(c, { [self] in done.load(ordering: .acquiring) })
                close(c)
                running.subtract(1, ordering: .acquiringAndReleasing)
            }
        }
    }

    func stop() {
        guard !done.exchange(true, ordering: .acquiringAndReleasing) else { return }
        for _ in 0..<500 where !acceptorDone.load(ordering: .acquiring) || running.load(ordering: .acquiring) > 0 {
            usleep(10_000)
        }
        close(listenFD)
    }

    // MARK: helpers for scripts

    /// Writes all of `bytes`, waiting for room in 100 ms steps; false on an error or a stop.
    static func send(_ fd: Int32, _ bytes: [UInt8], _ stopped: () -> Bool) -> Bool {
        var sent = 0
        while sent < bytes.count {
            if stopped() { return false }
            var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            if poll(&p, 1, 100) <= 0 { continue }
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
            if n < 0 {
                if errno == EAGAIN || errno == EINTR { continue }
                return false
            }
            sent += n
        }
        return true
    }

    /// Waits up to `ms` for the peer to hang up; true if it did (or on a stop).
    static func peerGone(_ fd: Int32, waiting ms: Int32, _ stopped: () -> Bool) -> Bool {
        if stopped() { return true }
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, ms) > 0 else { return false }
        var buf = [UInt8](repeating: 0, count: 4096)
        return recv(fd, &buf, buf.count, Int32(MSG_DONTWAIT)) <= 0
    }

    /// Copies bytes both ways between `a` and `b` until either side ends (or a stop).
    static func splice(_ a: Int32, _ b: Int32, _ stopped: () -> Bool) {
        var buf = [UInt8](repeating: 0, count: 64 << 10)
        while !stopped() {
            var fds = [pollfd(fd: a, events: Int16(POLLIN), revents: 0), pollfd(fd: b, events: Int16(POLLIN), revents: 0)]
            guard poll(&fds, 2, 100) > 0 else { continue }
            for (from, to) in [(0, 1), (1, 0)] where fds[from].revents != 0 {
                let n = recv(fds[from].fd, &buf, buf.count, Int32(MSG_DONTWAIT))
                if n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) { return }
                if n > 0 && !send(fds[to].fd, Array(buf[0..<n]), stopped) { return }
            }
        }
    }
}
