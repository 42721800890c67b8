import Logging

/// Everything needed to open a connection. A value: build it once, reuse it.
public struct SSHConfiguration: Sendable {
    public var host: String
    public var port: Int
    public var user: String
    public var authentication: SSHAuthentication
    /// Required: there is no default, so that skipping verification is explicit.
    public var hostKeyPolicy: SSHHostKeyPolicy
    /// Bounds TCP connect, key exchange and authentication together (an absolute
    /// deadline). Time spent in your host key policy or keyboard-interactive
    /// responder does not count.
    public var connectTimeout: Duration
    /// A finite backstop for libssh's own waits, and the socket's
    /// TCP_USER_TIMEOUT: how long unacknowledged data may stay in flight.
    public var socketTimeout: Duration
    /// Where SSHKit logs; it never configures logging globally.
    public var logger: Logger
    /// libssh's own log verbosity (0 = off); libssh writes to stderr.
    public var libsshVerbosity: Int
    /// Which algorithms may be negotiated (presets: `.modern`, `.compatible`).
    public var algorithms: SSHAlgorithms = .libsshDefaults
    /// An already-connected stream socket to run SSH over instead of connecting to
    /// `host:port` (which then only name the server for host key checks). The
    /// connection takes ownership of the fd. Internal for now: the worker tests use
    /// it with socketpairs; jump hosts will build on it.
    var connectedSocket: Int32?

    public init(
        host: String,
        port: Int = 22,
        user: String,
        authentication: SSHAuthentication,
        hostKeyPolicy: SSHHostKeyPolicy,
        connectTimeout: Duration = .seconds(10),
        socketTimeout: Duration = .seconds(30),
        logger: Logger = Logger(label: "SSHKit", factory: { _ in SwiftLogNoOpLogHandler() }),
        libsshVerbosity: Int = 0
    ) {
        self.host = host
        self.port = port
        self.user = user
        self.authentication = authentication
        self.hostKeyPolicy = hostKeyPolicy
        self.connectTimeout = connectTimeout
        self.socketTimeout = socketTimeout
        self.logger = logger
        self.libsshVerbosity = libsshVerbosity
    }

    func validate() throws(SSHError) {
        if host.isEmpty || host.utf8.contains(0) { throw SSHError(.invalidArgument, "host is empty or contains NUL") }
        if !(1...65535).contains(port) { throw SSHError(.invalidArgument, "port \(port) is out of range 1...65535") }
        if user.isEmpty || user.utf8.contains(0) { throw SSHError(.invalidArgument, "user is empty or contains NUL") }
        if connectTimeout <= .zero { throw SSHError(.invalidArgument, "connectTimeout must be positive") }
        if socketTimeout < .seconds(1) { throw SSHError(.invalidArgument, "socketTimeout must be at least 1 s") }
        if authentication.methods.isEmpty { throw SSHError(.invalidArgument, "no authentication method configured") }
        let unsupported = algorithms.unsupportedNames
        if !unsupported.isEmpty {
            throw SSHError(.invalidArgument, "algorithms this libssh does not support: " + unsupported.joined(separator: ", "))
        }
        if let bits = algorithms.minimumRSABits, bits < 768 || bits > 16384 {
            throw SSHError(.invalidArgument, "minimumRSABits \(bits) is out of range 768...16384")
        }
    }
}

extension Duration {
    var milliseconds: Int64 {
        let (s, atto) = components
        return s * 1000 + atto / 1_000_000_000_000_000
    }
}
