import Glibc
import Logging

/// Everything needed to open a connection. A value: build it once, reuse it.
public struct SSHConfiguration: Sendable {
    /// The server's host name or IP address (not empty). With `jumpHosts` the last hop
    /// resolves it; with `proxyCommand` it only names the server for host key checks.
    public var host: String
    /// The server's TCP port, 22 by default (1...65535).
    public var port: Int
    /// The user to log in as (not empty).
    public var user: String
    /// How to authenticate: the methods, tried in order.
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
    /// Dead-peer detection (off by default, as in OpenSSH and libssh). With it on,
    /// a silent partition or a frozen server fails the connection with
    /// `.connectionLost` within `keepalive.detectionTime`.
    public var keepalive: SSHKeepalive?
    /// Jump hosts (`ssh -J`), in order: SSHKit connects to the first, reaches each
    /// next one through a `direct-tcpip` channel of the previous connection, and
    /// finally `host:port` the same way. Every hop is a full connection of its own:
    /// its own authentication, host key policy, timeouts and keepalive. Their own
    /// `jumpHosts` must be empty. The names are resolved by the previous hop.
    public var jumpHosts: [SSHConfiguration] = []
    /// Agent forwarding (`ssh -A`, `ForwardAgent`): the local ssh-agent socket whose
    /// keys programs on the server may use, e.g. to authenticate onward to a second
    /// host; nil (the default) forwards nothing. Every command and shell session asks
    /// the server for it (`auth-agent-req@openssh.com`); each agent connection the
    /// server opens is joined to a new connection to this socket. Whoever controls
    /// the server account can use your keys while the connection lasts: forward only
    /// to servers you trust.
    public var agentForwarding: String?
    /// A command whose standard input and output carry the connection instead of a TCP
    /// socket (ssh_config's `ProxyCommand`, with its `%` tokens already expanded):
    /// run as `$SHELL -c "exec <command>"`, stopped (SIGHUP) when the connection
    /// closes. `host` and `port` then only name the server for host key checks. Not
    /// with `jumpHosts` (as in ssh, one or the other); a first jump host may have one.
    public var proxyCommand: String?
    /// An already-connected stream socket to run SSH over instead of connecting to
    /// `host:port` (which then only name the server for host key checks). The
    /// connection takes ownership of the fd. Internal: the worker tests use it with
    /// socketpairs, jump hosts with a socket bridged to the previous hop's channel.
    var connectedSocket: Int32?

    /// A configuration with port 22, a 10 s connect timeout, a 30 s socket timeout, a
    /// logger that discards everything and libssh's logging off unless given; the other
    /// properties start as libssh's default algorithms, no keepalive, no jump hosts, no
    /// agent forwarding and no proxy command. Nothing is checked here:
    /// ``SSHClient/connect(_:)`` throws `invalidArgument` for a value it cannot use.
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

    /// One agent per connection: a libssh 0.10 session has one agent socket path, and
    /// keeps the agent connection it opened for every later agent method, so a second
    /// agent in the list would silently ask the same agent again.
    /// Passwords, passphrases, keys and key paths reach libssh as C strings: one with a
    /// NUL byte would arrive cut short (another password, another file), so it is refused.
    /// (Prompted passwords and keyboard-interactive answers are checked when given.)
    private static func validateSecrets(_ methods: [SSHAuthentication.Method]) throws(SSHError) {
        func check(_ value: String?, _ what: String) throws(SSHError) {
            if let value, value.utf8.contains(0) { throw SSHError(.invalidArgument, "\(what) contains a NUL byte") }
        }
        for method in methods {
            switch method {
            case .password(let p): try check(p, "the password")
            case .privateKeyFile(let path, let passphrase, let certificate):
                try check(path, "the key path")
                try check(passphrase, "the passphrase")
                try check(certificate, "the certificate path")
            case .privateKey(let key, let passphrase):
                try check(key, "the private key")
                try check(passphrase, "the passphrase")
            default: break
            }
        }
    }

    private static func validateAgents(_ methods: [SSHAuthentication.Method]) throws(SSHError) {
        var agents = Set<String>()
        for case .agent(let path) in methods {
            if let path, path.isEmpty || path.utf8.contains(0) {
                throw SSHError(.invalidArgument, "agent socketPath is empty or contains NUL")
            }
            agents.insert(path ?? getenv("SSH_AUTH_SOCK").map { String(cString: $0) } ?? "SSH_AUTH_SOCK")
        }
        if agents.count > 1 {
            throw SSHError(.invalidArgument,
                           "one agent per connection; the methods name \(agents.sorted().joined(separator: " and "))")
        }
    }

    func validate() throws(SSHError) {
        if host.isEmpty || host.utf8.contains(0) { throw SSHError(.invalidArgument, "host is empty or contains NUL") }
        if !(1...65535).contains(port) { throw SSHError(.invalidArgument, "port \(port) is out of range 1...65535") }
        if user.isEmpty || user.utf8.contains(0) { throw SSHError(.invalidArgument, "user is empty or contains NUL") }
        if connectTimeout <= .zero { throw SSHError(.invalidArgument, "connectTimeout must be positive") }
        // the core keeps it in whole seconds and hands TCP_USER_TIMEOUT milliseconds in an int
        if socketTimeout < .seconds(1) || socketTimeout > .seconds(86_400) {
            throw SSHError(.invalidArgument, "socketTimeout must be within 1 s...24 h")
        }
        if authentication.methods.isEmpty { throw SSHError(.invalidArgument, "no authentication method configured") }
        try Self.validateAgents(authentication.methods)
        try Self.validateSecrets(authentication.methods)
        let unsupported = algorithms.unsupportedNames
        if !unsupported.isEmpty {
            throw SSHError(.invalidArgument, "algorithms this libssh does not support: " + unsupported.joined(separator: ", "))
        }
        if let keepalive {
            if keepalive.interval < .milliseconds(100) || keepalive.interval > .seconds(86_400) {
                throw SSHError(.invalidArgument, "keepalive interval must be within 100 ms...24 h")
            }
            if !(1...1000).contains(keepalive.maxMissed) {
                throw SSHError(.invalidArgument, "keepalive maxMissed \(keepalive.maxMissed) is out of range 1...1000")
            }
        }
        if let bits = algorithms.minimumRSABits, bits < 768 || bits > 16384 {
            throw SSHError(.invalidArgument, "minimumRSABits \(bits) is out of range 768...16384")
        }
        if let agentForwarding, agentForwarding.isEmpty || agentForwarding.utf8.count > 107 || agentForwarding.utf8.contains(0) {
            throw SSHError(.invalidArgument, "agentForwarding must be a Unix socket path (1...107 bytes)")
        }
        if let proxyCommand {
            if proxyCommand.allSatisfy(\.isWhitespace) || proxyCommand.utf8.contains(0) {
                throw SSHError(.invalidArgument, "proxyCommand is empty or contains NUL")
            }
            if !jumpHosts.isEmpty {
                throw SSHError(.invalidArgument,
                               "proxyCommand and jumpHosts exclude each other (as in ssh); give the first jump host the proxyCommand")
            }
        }
        for (i, hop) in jumpHosts.enumerated() {
            if i > 0 && hop.proxyCommand != nil {
                throw SSHError(.invalidArgument, "jump host \(i + 1) (\(hop.host)) has a proxyCommand: only the first hop may have one")
            }
            guard hop.jumpHosts.isEmpty else {
                throw SSHError(.invalidArgument, "jump host \(i + 1) (\(hop.host)) has jump hosts of its own: list every hop in order instead")
            }
            do {
                try hop.validate()
            } catch {
                throw SSHError(.invalidArgument, "jump host \(i + 1) (\(hop.host)): \(error.message)")
            }
        }
    }
}

/// Keepalive settings: SSHKit's ServerAliveInterval and ServerAliveCountMax.
///
/// Any packet from the server counts as a sign of life. After `interval` without
/// one, SSHKit sends a `keepalive@openssh.com` global request with want-reply (both
/// OpenSSH and dropbear answer it), and again after each further interval of
/// silence. When `maxMissed` probes have gone unanswered and the last one has had
/// min(interval / 2, 1 s) to be answered, the connection fails with
/// `.connectionLost`, and so does every operation still open on it.
///
/// That catches what TCP alone does not: a frozen server whose kernel still ACKs,
/// and a silent partition while nothing is in flight. A healthy idle connection is
/// never dropped: it answers every probe. With `maxMissed: 1` the single probe has
/// only the grace period to be answered, so prefer 2 or more on slow links.
public struct SSHKeepalive: Sendable, Hashable {
    /// Silence before a probe, and between probes (at least 100 ms).
    public var interval: Duration
    /// Unanswered probes before the connection is lost (1...1000).
    public var maxMissed: Int

    /// Keepalive probes after `interval` of silence (15 s by default), the connection
    /// lost after `maxMissed` unanswered ones (3 by default). Checked when connecting:
    /// an interval outside 100 ms...24 h or a `maxMissed` outside 1...1000 throws
    /// `invalidArgument`.
    public init(interval: Duration = .seconds(15), maxMissed: Int = 3) {
        self.interval = interval
        self.maxMissed = maxMissed
    }

    /// The longest silence tolerated: interval × maxMissed + min(interval / 2, 1 s).
    /// A dead peer is detected at most this long after it last spoke.
    public var detectionTime: Duration {
        interval * maxMissed + min(interval / 2, .seconds(1))
    }
}

extension Duration {
    /// Whole milliseconds, saturated at about 2^60 (36 million years) either way, so that
    /// a huge timeout added to a clock reading cannot overflow (and trap).
    var milliseconds: Int64 {
        let (s, atto) = components
        let cap: Int64 = 1 << 60
        if s >= cap / 1000 { return cap }
        if s <= -cap / 1000 { return -cap }
        return s * 1000 + atto / 1_000_000_000_000_000
    }
}
