import Foundation
import Synchronization

/// A TCP listener on 127.0.0.1 that misbehaves in a chosen way. Its thread
/// accepts connections and keeps them open until the client goes away (then
/// closes them), so hundreds of attempts do not pile up fds.
final class FakeServer: Sendable {
    enum Behaviour: Sendable {
        /// Accepts and never sends a byte.
        case silent
        /// Sends these bytes, then closes.
        case reply([UInt8])
    }

    let port: Int
    private let listenFD: Int32
    private let stopPipe: (Int32, Int32)
    // safe because: Thread is only started once and then only read (isFinished)
    private let thread: Mutex<UncheckedThread?>
    private let done = Atomic<Bool>(false)
    let accepted = Atomic<Int>(0)

    init(_ behaviour: Behaviour) throws {
        let (fd, port) = try loopbackListener(backlog: 1024)
        self.port = port
        listenFD = fd
        var p: [Int32] = [0, 0]
        _ = pipe(&p)
        stopPipe = (p[0], p[1])
        thread = Mutex<UncheckedThread?>(nil)
        let t = Thread { [self] in self.loop(behaviour) }
        t.start()
        let box = UncheckedThread(t)
        thread.withLock { $0 = box }
    }

    private func loop(_ behaviour: Behaviour) {
        var clients: [Int32] = []
        while !done.load(ordering: .acquiring) {
            var fds = [pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: stopPipe.0, events: Int16(POLLIN), revents: 0)]
            fds += clients.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            if poll(&fds, nfds_t(fds.count), 1000) <= 0 { continue }
            if fds[1].revents != 0 { break }
            let polled = clients
            var fresh: [Int32] = []
            if fds[0].revents != 0 {
                let c = accept(listenFD, nil, nil)
                if c >= 0 {
                    accepted.add(1, ordering: .relaxed)
                    switch behaviour {
                    case .silent: fresh.append(c)
                    case .reply(let bytes):
                        _ = bytes.withUnsafeBytes { write(c, $0.baseAddress, $0.count) }
                        close(c)
                    }
                }
            }
            var keep: [Int32] = fresh
            for (i, c) in polled.enumerated() {
                let r = fds[i + 2].revents
                if r == 0 { keep.append(c); continue }
                var buf = [UInt8](repeating: 0, count: 4096)
                if read(c, &buf, buf.count) <= 0 { close(c) } else { keep.append(c) }
            }
            clients = keep
        }
        for c in clients { close(c) }
    }

    /// Stops the thread and closes every fd it holds.
    func stop() {
        guard !done.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // wait (bounded) for the loop to finish closing its clients
        endLoopThread(stopPipe: stopPipe, listenFD: listenFD, ticks: 200) { thread.withLock { $0?.thread.isFinished ?? true } }
    }

    deinit { stop() }
}

/// Ends a one-thread server loop: wakes it through its stop pipe, waits (bounded: `ticks`
/// of 10 ms) until `finished`, then closes the listener and the pipe.
func endLoopThread(stopPipe: (Int32, Int32), listenFD: Int32, ticks: Int, finished: () -> Bool) {
    var b: UInt8 = 1
    _ = write(stopPipe.1, &b, 1)
    for _ in 0..<ticks {
        if finished() { break }
        usleep(10_000)
    }
    close(listenFD)
    close(stopPipe.0)
    close(stopPipe.1)
}

/// A listening TCP socket on 127.0.0.1 with a free port (close-on-exec, SO_REUSEADDR).
/// `receiveBuffer` sets SO_RCVBUF, which the sockets it accepts inherit.
func loopbackListener(backlog: Int32, receiveBuffer: Int? = nil) throws -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    var one: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    if var size = receiveBuffer.map(Int32.init) {
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let ok = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard ok == 0, listen(fd, backlog) == 0 else { close(fd); throw FixtureError("listen failed") }
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
    }
    return (fd, Int(UInt16(bigEndian: addr.sin_port)))
}

/// A port on 127.0.0.1 where nothing listens (bound, then closed).
func closedPort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) }
    }
    _ = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
    }
    return Int(UInt16(bigEndian: addr.sin_port))
}

/// Safe because: the wrapped Thread is only queried (isFinished) after start.
struct UncheckedThread: @unchecked Sendable {
    let thread: Thread
    init(_ t: Thread) { thread = t }
}
