import Foundation
import Synchronization

/// An echo server for tunnel tests, on 127.0.0.1 (random free port) or a Unix socket:
/// every connection gets back what it sends, and the server closes its side after the
/// client's EOF. Threads of its own; `stop()` closes the listener (connection threads end
/// with their clients).
final class EchoServer: Sendable {
    let port: Int
    let socketPath: String?
    private let listener: Int32
    private let accepted = Mutex(0)

    /// How many connections it has accepted.
    var connections: Int { accepted.withLock { $0 } }

    /// TCP on 127.0.0.1.
    init() throws {
        (listener, port) = try listenOnLoopback()
        socketPath = nil
        start()
    }

    /// A Unix socket at `path`, writable by everyone (the test user connects to it).
    init(unixSocket path: String) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { throw FixtureError("socket path too long") }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        unlink(path)
        let ok = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 && listen(fd, 64) == 0
            }
        }
        guard ok else { close(fd); throw FixtureError("echo server: bind \(path) failed, errno \(errno)") }
        chmod(path, 0o777)
        listener = fd
        port = 0
        socketPath = path
        start()
    }

    private func start() {
        let fd = listener
        Thread.detachNewThread { [self] in
            while true {
                let c = accept(fd, nil, nil)
                if c < 0 { if errno == EINTR { continue }; return }
                accepted.withLock { $0 += 1 }
                Thread.detachNewThread { Self.echo(c) }
            }
        }
    }

    private static func echo(_ fd: Int32) {
        var buf = [UInt8](repeating: 0, count: 65536)
        loop: while true {
            let n = read(fd, &buf, buf.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            var off = 0
            while off < n {
                let w = buf[off..<n].withUnsafeBytes { send(fd, $0.baseAddress!, n - off, Int32(MSG_NOSIGNAL)) }
                if w < 0 && errno == EINTR { continue }
                if w <= 0 { break loop }
                off += w
            }
        }
        shutdown(fd, Int32(SHUT_WR))
        close(fd)
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        if let socketPath { unlink(socketPath) }
    }
}
