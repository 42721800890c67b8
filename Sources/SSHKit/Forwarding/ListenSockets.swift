#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Listening sockets for forwards, and the little socket I/O the listener does
/// itself (SOCKS handshakes). Everything is non-blocking and close-on-exec.
enum ListenSockets {
    /// Binds and listens on every address `host` resolves to, all on one port (the
    /// first bound one when `port` is 0, as OpenSSH does). Succeeds when at least one
    /// address could be bound; throws the first failure otherwise.
    static func listenTCP(host: String, port: Int, backlog: Int32) throws(SSHError) -> [(fd: Int32, address: SSHListenAddress)] {
        guard (0...65535).contains(port) else { throw SSHError(.invalidArgument, "listen port \(port) out of range 0...65535") }
        guard !host.isEmpty, !host.utf8.contains(0) else { throw SSHError(.invalidArgument, "listen host must not be empty") }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let first = list else {
            throw SSHError(.nameResolutionFailed, "cannot resolve listen address \(host): \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(list) }
        var bound: [(fd: Int32, address: SSHListenAddress)] = []
        var firstError: SSHError?
        var chosenPort = port
        var cur: UnsafeMutablePointer<addrinfo>? = first
        while let ai = cur {
            cur = ai.pointee.ai_next
            let family = ai.pointee.ai_family
            guard family == AF_INET || family == AF_INET6 else { continue }
            let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else {
                firstError = firstError ?? systemError("socket", errno)
                continue
            }
            var one: Int32 = 1
            _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            if family == AF_INET6 {
                _ = setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
            }
            setPort(ai.pointee.ai_addr, chosenPort)
            if bind(fd, ai.pointee.ai_addr, ai.pointee.ai_addrlen) != 0 || listen(fd, backlog) != 0 {
                let e = errno
                close(fd)
                firstError = firstError ?? systemError("listen on \(host):\(chosenPort)", e)
                continue
            }
            let (name, actual) = localAddress(fd)
            chosenPort = actual
            bound.append((fd, .tcp(host: name, port: actual)))
        }
        if bound.isEmpty {
            throw firstError ?? SSHError(.invalidArgument, "\(host) has no IPv4 or IPv6 address to listen on")
        }
        return bound
    }

    /// Binds and listens on a Unix socket path (mode 0600 for the owner only, like
    /// OpenSSH's StreamLocalBindMask default 0177). An existing path is an error unless
    /// `removeExisting` (and then only a socket is removed).
    static func listenUnix(path: String, removeExisting: Bool, backlog: Int32) throws(SSHError) -> Int32 {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: addr.sun_path)
        guard !bytes.isEmpty, !bytes.contains(0), bytes.count < capacity else {
            throw SSHError(.invalidArgument, "Unix socket path is empty, contains NUL or is longer than \(capacity - 1) bytes")
        }
        if removeExisting {
            var st = stat()
            if lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFSOCK { unlink(path) }
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw systemError("socket", errno) }
        // Linux gives the socket's file the mode of the socket's inode (less the umask):
        // set on the fd, that reaches no other thread's files, as a umask(0177) around
        // bind would (the umask is the whole process's)
        _ = fchmod(fd, 0o600)
        let rc = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0, listen(fd, backlog) == 0 else {
            let e = errno
            close(fd)
            throw systemError("listen on \(path)", e)
        }
        return fd
    }

    /// Accepts one pending connection (non-blocking, close-on-exec): the fd and the
    /// peer as "host:port", nil when none is pending; throws on other errors.
    static func accept(_ listener: Int32) -> (fd: Int32, peer: String)?? {
        let fd = CoreSockets.accept(listener)
        if fd < 0 {
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED ? .some(nil) : nil
        }
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &len) }
        }
        return .some((fd, describe(&storage)))
    }

    /// Sends a short reply on a fresh non-blocking socket; false when it did not all go.
    @discardableResult
    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        guard !bytes.isEmpty else { return true }
        let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        return n == bytes.count
    }

    private static func cString(_ chars: [CChar]) -> String {
        String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func systemError(_ what: String, _ e: Int32) -> SSHError {
        var err = SSHError(.systemError, "\(what): \(String(cString: strerror(e)))")
        err.systemErrno = e
        return err
    }

    private static func setPort(_ sa: UnsafeMutablePointer<sockaddr>?, _ port: Int) {
        guard let sa else { return }
        let p = in_port_t(UInt16(port).bigEndian)
        if Int32(sa.pointee.sa_family) == AF_INET {
            sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_port = p }
        } else if Int32(sa.pointee.sa_family) == AF_INET6 {
            sa.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_port = p }
        }
    }

    private static func localAddress(_ fd: Int32) -> (String, Int) {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        let text = describe(&storage)
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]) else { return (text, 0) }
        var host = String(text[..<colon])
        if host.hasPrefix("[") { host = String(host.dropFirst().dropLast()) }
        return (host, port)
    }

    /// "a.b.c.d:port", "[v6]:port" or "unix".
    static func describe(_ storage: inout sockaddr_storage) -> String {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var serv = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let family = Int32(storage.ss_family)
        guard family == AF_INET || family == AF_INET6 else { return "unix" }
        let len = socklen_t(family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
        let rc = withUnsafePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, len, &host, socklen_t(host.count), &serv, socklen_t(serv.count), NI_NUMERICHOST | NI_NUMERICSERV)
            }
        }
        guard rc == 0 else { return "?" }
        let h = cString(host)
        return family == AF_INET6 ? "[\(h)]:\(cString(serv))" : "\(h):\(cString(serv))"
    }
}
