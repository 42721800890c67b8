import Foundation
import SSHKit

/// A plain TCP or Unix socket client for forwarding tests: each call runs on a thread
/// of its own with poll(), sending and receiving at the same time, so a large payload
/// through an echo cannot deadlock and many clients can run at once.
enum SocketClient {
    /// Connects to 127.0.0.1:`port` (or a Unix socket `path`); -1 with errno on failure.
    static func connect(port: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if rc != 0 { let e = errno; close(fd); errno = e; return -1 }
        return fd
    }

    static func connect(unixSocket path: String) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if rc != 0 { let e = errno; close(fd); errno = e; return -1 }
        return fd
    }

    struct Outcome: Sendable {
        var received: [UInt8]
        /// The peer closed (EOF) rather than the deadline passing.
        var sawEOF: Bool
        /// A read failed with this errno (e.g. ECONNRESET).
        var readError: Int32?
    }

    /// On its own thread: sends `first` (then `data`), half-closes after it if `finish`,
    /// and reads until EOF or `timeout`. `first` is read back separately when
    /// `firstReply` > 0 (a SOCKS exchange): that many bytes are read before `data` goes.
    static func exchange(_ fd: Int32, send data: [UInt8], finish: Bool = true, timeout: Duration = .seconds(60))
        async -> Outcome
    {
        await withCheckedContinuation { c in
            Thread.detachNewThread {
                c.resume(returning: run(fd, data, finish: finish, timeout: timeout))
            }
        }
    }

    /// Blocking read of exactly `n` bytes (or fewer at EOF), with a deadline.
    static func readExactly(_ fd: Int32, _ n: Int, timeout: Duration = .seconds(10)) -> [UInt8] {
        var out: [UInt8] = []
        let deadline = ContinuousClock.now + timeout
        var buf = [UInt8](repeating: 0, count: n)
        while out.count < n && ContinuousClock.now < deadline {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 200) >= 0 else { break }
            if p.revents == 0 { continue }
            let r = read(fd, &buf, n - out.count)
            if r <= 0 { break }
            out += buf[0..<r]
        }
        return out
    }

    /// How a socket's stream ended, read with a deadline (bytes before the end dropped).
    enum End: Equatable { case eof, error(Int32), timeout }

    static func readEnd(_ fd: Int32, timeout: Duration = .seconds(10)) -> End {
        let deadline = ContinuousClock.now + timeout
        var buf = [UInt8](repeating: 0, count: 65536)
        while ContinuousClock.now < deadline {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 200) >= 0 else { return .error(errno) }
            if p.revents == 0 { continue }
            let r = read(fd, &buf, buf.count)
            if r == 0 { return .eof }
            if r < 0 && errno != EINTR && errno != EAGAIN { return .error(errno) }
        }
        return .timeout
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var off = 0
        while off < bytes.count {
            let w = bytes[off...].withUnsafeBytes { send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
            if w < 0 && errno == EINTR { continue }
            if w <= 0 { return false }
            off += w
        }
        return true
    }

    private static func run(_ fd: Int32, _ data: [UInt8], finish: Bool, timeout: Duration) -> Outcome {
        defer { close(fd) }
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        var out = Outcome(received: [], sawEOF: false, readError: nil)
        var off = 0
        var shut = false
        var buf = [UInt8](repeating: 0, count: 65536)
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if off == data.count && finish && !shut {
                shutdown(fd, Int32(SHUT_WR))
                shut = true
            }
            var p = pollfd(fd: fd, events: Int16(POLLIN) | (off < data.count ? Int16(POLLOUT) : 0), revents: 0)
            if poll(&p, 1, 200) < 0 && errno != EINTR { break }
            if p.revents & Int16(POLLOUT) != 0 && off < data.count {
                let w = data[off...].withUnsafeBytes { send(fd, $0.baseAddress!, min($0.count, 65536), Int32(MSG_NOSIGNAL)) }
                if w > 0 { off += w }
                // a reset reported here is consumed: a read after it would see a clean end
                if w < 0 && errno != EAGAIN && errno != EINTR {
                    out.readError = errno
                    return out
                }
            }
            if p.revents & (Int16(POLLIN) | Int16(POLLHUP) | Int16(POLLERR)) != 0 {
                let r = read(fd, &buf, buf.count)
                if r > 0 {
                    out.received += buf[0..<r]
                } else if r == 0 {
                    out.sawEOF = true
                    return out
                } else if errno != EAGAIN && errno != EINTR {
                    out.readError = errno
                    return out
                }
            }
        }
        return out
    }
}

/// A minimal HTTP/1.0 server on 127.0.0.1 (random port) answering every GET with
/// `body`; threads of its own, stopped by `stop()`.
final class TinyHTTPServer: Sendable {
    let port: Int
    private let listener: Int32

    init(body: [UInt8]) throws {
        let (fd, port) = try listenOnLoopback(backlog: 64)
        listener = fd
        self.port = port
        Thread.detachNewThread {
            while true {
                let c = accept(fd, nil, nil)
                if c < 0 { if errno == EINTR { continue }; return }
                Thread.detachNewThread {
                    var request: [UInt8] = []
                    var buf = [UInt8](repeating: 0, count: 4096)
                    while !request.ends(with: Array("\r\n\r\n".utf8)) && request.count < 65536 {
                        let n = read(c, &buf, buf.count)
                        if n <= 0 { break }
                        request += buf[0..<n]
                    }
                    let head = "HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
                    _ = SocketClient.writeAll(c, Array(head.utf8) + body)
                    shutdown(c, Int32(SHUT_WR))
                    close(c)
                }
            }
        }
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }
}

extension Array where Element == UInt8 {
    func ends(with suffix: [UInt8]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}

extension SSHTunnel {
    /// Sends `data` (in 100 KB writes), half-closes, and reads everything back until the
    /// far end's EOF, at the same time.
    static func roundTrip(_ tunnel: SSHTunnel, _ data: [UInt8]) async throws -> [UInt8] {
        async let sent: Void = {
            var off = 0
            while off < data.count {
                let end = min(off + 100_000, data.count)
                try await tunnel.input.write(Array(data[off..<end]))
                off = end
            }
            try tunnel.input.finish()
        }()
        var back: [UInt8] = []
        for try await chunk in tunnel.output { back += chunk }
        try await sent
        return back
    }
}

/// A TCP socket listening on `address` (127.0.0.1 by default) at a free port.
func listenOnLoopback(address: String = "127.0.0.1", backlog: Int32 = 256) throws -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr(address)
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, len) == 0 && listen(fd, backlog) == 0 && getsockname(fd, $0, &len) == 0
        }
    }
    guard ok else { close(fd); throw FixtureError("bind \(address) failed, errno \(errno)") }
    return (fd, Int(UInt16(bigEndian: addr.sin_port)))
}
