/// Where a local forward listens.
public enum SSHListenAddress: Sendable, Hashable, CustomStringConvertible {
    /// A TCP address: every address `host` resolves to, on `port` (0: the system
    /// picks one; the forward reports it).
    case tcp(host: String, port: Int)
    /// A Unix socket path, created mode 0600.
    case unixSocket(path: String)

    /// 127.0.0.1 on `port` (0: any free port). `ssh -L port:...` binds `localhost`, which
    /// is ::1 as well where it resolves so: `.tcp(host: "localhost", port:)` does the same.
    public static func loopback(port: Int = 0) -> SSHListenAddress { .tcp(host: "127.0.0.1", port: port) }

    public var description: String {
        switch self {
        case .tcp(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .unixSocket(let path): path
        }
    }
}

/// Where forwarded connections go, as the server sees it.
public enum SSHForwardTarget: Sendable, Hashable, CustomStringConvertible {
    /// `direct-tcpip` to host:port, resolved and connected by the server.
    case tcp(host: String, port: Int)
    /// `direct-streamlocal@openssh.com` to a Unix socket on the server.
    case unixSocket(path: String)

    public var description: String {
        switch self {
        case .tcp(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .unixSocket(let path): path
        }
    }

    func validate() throws(SSHError) {
        switch self {
        case .tcp(let host, let port):
            guard !host.isEmpty, !host.utf8.contains(0) else { throw SSHError(.invalidArgument, "target host must not be empty") }
            guard (1...65535).contains(port) else { throw SSHError(.invalidArgument, "target port \(port) out of range 1...65535") }
        case .unixSocket(let path):
            guard !path.isEmpty, !path.utf8.contains(0) else { throw SSHError(.invalidArgument, "target socket path must not be empty") }
        }
    }

    func direct(originator: String) -> DirectTarget {
        let (host, port) = Self.splitPeer(originator)
        switch self {
        case .tcp(let h, let p):
            return DirectTarget(unixSocket: false, host: h, port: p, originatorHost: host, originatorPort: port)
        case .unixSocket(let path):
            return DirectTarget(unixSocket: true, host: path, port: 0, originatorHost: host, originatorPort: port)
        }
    }

    /// "1.2.3.4:5" or "[::1]:5" into host and port; anything else is 127.0.0.1:0.
    static func splitPeer(_ peer: String) -> (String, Int) {
        guard let colon = peer.lastIndex(of: ":"), let port = Int(peer[peer.index(after: colon)...]) else {
            return ("127.0.0.1", 0)
        }
        var host = String(peer[..<colon])
        if host.hasPrefix("[") { host = String(host.dropFirst().dropLast()) }
        return (host, port)
    }
}

/// Settings of a forward.
public struct SSHForwardOptions: Sendable {
    /// Connections open at once; more are accepted and closed at once (and reported).
    public var maxConnections: Int
    /// Data from the server held per connection while its client reads slowly, before
    /// the channel stops reading (the SSH window closes).
    public var bufferLimit: Int
    /// SOCKS only: how long a client may take to send its request.
    public var handshakeTimeout: Duration
    /// Unix socket listeners: replace a socket left at the path (never another file).
    public var removeExistingSocket: Bool
    /// listen(2) backlog.
    public var backlog: Int
    /// Called for every forwarded connection's events, on an internal thread, one call at
    /// a time; keep it short. Events arrive in the order things happened (a connection's
    /// `opened` never after its end), and all of them before `close()` or
    /// `waitUntilClosed()` returns.
    public var eventHandler: (@Sendable (SSHForwardEvent) -> Void)?
    /// Remote forwards of port 0: the ports to try first, before random ones (tests
    /// make a pick land on a port they hold).
    var firstRandomPorts: [Int] = []

    /// Settings with these values; checked when the forward starts, which throws
    /// `invalidArgument` for `maxConnections` outside 1...100000, `bufferLimit` outside
    /// 1 KiB...1 GiB, a `handshakeTimeout` that is not positive, or `backlog` outside 1...65535.
    public init(maxConnections: Int = 1024, bufferLimit: Int = 512 * 1024, handshakeTimeout: Duration = .seconds(10),
                removeExistingSocket: Bool = false, backlog: Int = 128,
                eventHandler: (@Sendable (SSHForwardEvent) -> Void)? = nil) {
        self.maxConnections = maxConnections
        self.bufferLimit = bufferLimit
        self.handshakeTimeout = handshakeTimeout
        self.removeExistingSocket = removeExistingSocket
        self.backlog = backlog
        self.eventHandler = eventHandler
    }

    func validate() throws(SSHError) {
        if !(1...100_000).contains(maxConnections) { throw SSHError(.invalidArgument, "maxConnections must be within 1...100000") }
        if bufferLimit < 1024 || bufferLimit > 1 << 30 { throw SSHError(.invalidArgument, "bufferLimit must be within 1 KiB...1 GiB") }
        if handshakeTimeout <= .zero { throw SSHError(.invalidArgument, "handshakeTimeout must be positive") }
        if !(1...65535).contains(backlog) { throw SSHError(.invalidArgument, "backlog must be within 1...65535") }
    }
}

/// One forwarded connection's news.
public struct SSHForwardEvent: Sendable, CustomStringConvertible {
    /// What happened to the connection.
    public enum Kind: Sendable {
        /// The channel opened; bytes flow.
        case opened
        /// The connection ended normally, having moved these bytes.
        case closed(toClient: UInt64, fromClient: UInt64)
        /// The channel could not be opened (e.g. the target refused: `channelOpenFailed`
        /// with the server's reason), or the connection ended abnormally. The client's
        /// socket is closed (a SOCKS client first gets the matching error reply).
        case failed(SSHError)
        /// Turned away before any channel: a bad SOCKS request, a handshake timeout,
        /// or too many open connections.
        case rejected(reason: String)
    }

    /// Unique within the forward, in accept order.
    public var connectionID: UInt64
    /// The client's address, "host:port", or "unix".
    public var peer: String
    /// Where it goes ("host:port" or a path); nil before a SOCKS request named it.
    public var target: String?
    /// What happened.
    public var kind: Kind

    public var description: String {
        let to = target.map { " -> \($0)" } ?? ""
        switch kind {
        case .opened: return "#\(connectionID) \(peer)\(to): open"
        case .closed(let a, let b): return "#\(connectionID) \(peer)\(to): closed (\(a) bytes to client, \(b) from)"
        case .failed(let e): return "#\(connectionID) \(peer)\(to): failed: \(e)"
        case .rejected(let reason): return "#\(connectionID) \(peer): rejected: \(reason)"
        }
    }
}

/// Counters of a forward.
public struct SSHForwardStatistics: Sendable, Equatable {
    /// Client connections accepted.
    public var accepted: Int = 0
    /// Connections whose channel is open or opening now.
    public var active: Int = 0
    /// Ended normally.
    public var completed: Int = 0
    /// Channel open failed or ended abnormally.
    public var failed: Int = 0
    /// Turned away before a channel (bad SOCKS input, timeouts, over the limit).
    public var rejected: Int = 0
    /// Bytes moved by connections that have ended.
    public var bytesToClients: UInt64 = 0
    /// Bytes read from the socket on this machine (a local or dynamic forward's client, a
    /// remote forward's target), by connections that have ended.
    public var bytesFromClients: UInt64 = 0
}

/// A running local (`ssh -L`) or dynamic (`ssh -D`, SOCKS) forward.
///
/// It listens until `close()`, until its connection ends, or until the last reference to
/// it is dropped; each closes the listener and every forwarded connection. Each accepted client gets its own
/// channel, bridged to the client's socket inside the connection's worker: the
/// bytes never pass through Swift, and no thread is started per connection.
public final class SSHPortForward: Sendable {
    /// What the forward does with each connection.
    public enum Kind: Sendable, Hashable {
        /// `ssh -L`: every connection goes to this target.
        case local(SSHForwardTarget)
        /// `ssh -D`: a SOCKS proxy; each client names its target.
        case dynamic
    }

    /// Local or dynamic, and where to.
    public let kind: Kind
    /// The addresses actually bound (with the chosen port when 0 was asked).
    public let listenAddresses: [SSHListenAddress]
    let listener: ForwardListener

    init(kind: Kind, listenAddresses: [SSHListenAddress], listener: ForwardListener) {
        self.kind = kind
        self.listenAddresses = listenAddresses
        self.listener = listener
    }

    deinit {
        listener.requestStop(reason: nil)
    }

    /// The bound TCP port (nil for a Unix socket listener).
    public var port: Int? {
        for case .tcp(_, let port) in listenAddresses { return port }
        return nil
    }

    /// The counters so far.
    public var statistics: SSHForwardStatistics { listener.ledger.statistics }

    /// Stops listening and closes every forwarded connection; returns once the
    /// listener is closed (a Unix socket path is removed). Idempotent.
    public func close() async {
        listener.requestStop(reason: nil)
        _ = await listener.waitUntilStopped(cancellable: false)
    }

    /// Waits until the forward has closed: returns after `close()`; throws the error
    /// that ended its SSH connection otherwise, and `cancelled` at once when the
    /// waiting task is cancelled (the forward goes on).
    public func waitUntilClosed() async throws(SSHError) {
        if let error = await listener.waitUntilStopped(cancellable: true) { throw error }
    }
}
