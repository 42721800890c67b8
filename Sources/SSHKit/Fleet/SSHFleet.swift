import Synchronization

/// One host of a fleet: the name its results carry, and how to connect to it.
public struct SSHFleetHost: Sendable {
    /// The name results and `SSHFleet.cancel(host:)` use; unique in a fleet.
    public var name: String
    /// How to connect: host, user, authentication, and the host-key policy that checks
    /// this host's key (an unknown key fails this host; nothing is accepted silently).
    public var configuration: SSHConfiguration

    /// A host named `name` (by default its configuration's host).
    public init(_ configuration: SSHConfiguration, name: String? = nil) {
        self.configuration = configuration
        self.name = name ?? configuration.host
    }
}

/// The limits of a fleet run: how much goes on at once, and what is retried.
public struct SSHFleetOptions: Sendable {
    /// Hosts worked on at once (connecting or running).
    public var maxConcurrentOperations: Int
    /// Key exchanges in progress at once, across all hosts: below sshd's `MaxStartups`
    /// (10 unauthenticated connections by default), so a fleet never trips it.
    public var maxConcurrentHandshakes: Int
    /// At most this many handshakes start per second (nil: no rate, only the limit).
    public var handshakesPerSecond: Double?
    /// How long one host may take, connecting and running together (nil: no bound).
    /// A host past it fails with `timedOut`.
    public var hostTimeout: Duration?
    /// Connection attempts after the first that failed for a reason worth retrying
    /// (refused, unreachable, timed out, dropped during the handshake). Authentication
    /// and host-key failures are never retried, and neither is an operation that
    /// started: a command is run at most once.
    public var connectRetries: Int
    /// The wait before the first retry; doubled for each further one, with ±25% jitter.
    public var retryBackoff: Duration

    /// Limits for a fleet; the defaults suit a few hundred hosts from one machine.
    public init(maxConcurrentOperations: Int = 64, maxConcurrentHandshakes: Int = 8,
                handshakesPerSecond: Double? = nil, hostTimeout: Duration? = nil,
                connectRetries: Int = 2, retryBackoff: Duration = .milliseconds(250)) {
        self.maxConcurrentOperations = maxConcurrentOperations
        self.maxConcurrentHandshakes = maxConcurrentHandshakes
        self.handshakesPerSecond = handshakesPerSecond
        self.hostTimeout = hostTimeout
        self.connectRetries = connectRetries
        self.retryBackoff = retryBackoff
    }

    func validate() throws(SSHError) {
        guard maxConcurrentOperations >= 1, maxConcurrentHandshakes >= 1 else {
            throw SSHError(.invalidArgument, "fleet limits must be at least 1")
        }
        if let rate = handshakesPerSecond, !(rate > 0) {
            throw SSHError(.invalidArgument, "handshakesPerSecond must be positive")
        }
        guard connectRetries >= 0, retryBackoff >= .zero else {
            throw SSHError(.invalidArgument, "connectRetries and retryBackoff must not be negative")
        }
        if let t = hostTimeout, t <= .zero { throw SSHError(.invalidArgument, "hostTimeout must be positive") }
    }
}

/// What one host gave: its outcome and how long it took.
public struct SSHFleetResult<Value: Sendable>: Sendable {
    /// The host's name (`SSHFleetHost.name`).
    public var host: String
    /// The operation's value, or the typed error that ended this host: a connection
    /// failure after its retries, `hostKeyRejected`, `authenticationFailed`, `timedOut`
    /// past `hostTimeout`, `cancelled`, or what the operation threw.
    public var outcome: Result<Value, SSHError>
    /// Connection attempts made (0 when an open connection was reused). A host whose
    /// jump host could not be reached counts 1: that failure ends its tries.
    public var connectAttempts: Int
    /// Time spent connecting, waits for the handshake limit and retries included.
    public var connectDuration: Duration
    /// Time from the start of this host's turn to its result.
    public var duration: Duration
}

/// Work on many hosts at once: a command or any operation on every host of a
/// fleet, with separate limits for operations and for handshakes (so a fleet never trips
/// sshd's `MaxStartups` or loads the hosts with key exchanges), per-host timeouts,
/// retries of connection failures only, and results as they finish.
///
/// Open connections are kept and reused by the next run; `close()` closes them. Hosts
/// behind the same jump hosts (`SSHConfiguration.jumpHosts`) share one connection to them.
/// Cancelling the task that reads the results ends the run: hosts not started are
/// skipped and running operations are cancelled (their commands get TERM).
public final class SSHFleet: Sendable {
    /// The hosts, in the order given.
    public let hosts: [SSHFleetHost]
    /// The limits every run uses.
    public let options: SSHFleetOptions
    private let connections = Mutex<[String: SSHConnection]>([:])
    /// Connections to jump hosts, one per chain, shared by every host behind it.
    private let jumps = Mutex<[String: JumpAttempt]>([:])
    /// Ids of runs, so a jump host's failure holds for the rest of its run only.
    private let runs = Atomic<UInt64>(0)
    /// How to cancel each running turn, by host.
    private let running = Mutex<[String: [UInt64: @Sendable () -> Void]]>([:])
    private let turns = Atomic<UInt64>(0)

    /// A fleet of `hosts` (names must be unique).
    /// - Throws: `invalidArgument` for a repeated name or a limit below 1.
    public init(hosts: [SSHFleetHost], options: SSHFleetOptions = SSHFleetOptions()) throws(SSHError) {
        try options.validate()
        var seen = Set<String>()
        for h in hosts where !seen.insert(h.name).inserted {
            throw SSHError(.invalidArgument, "two hosts of the fleet are named \(h.name)")
        }
        self.hosts = hosts
        self.options = options
    }

    /// Runs `command` on every host (collected output, as `SSHConnection.execute`).
    public func execute(_ command: String) -> AsyncStream<SSHFleetResult<SSHCommandResult>> {
        run { _, conn throws(SSHError) in try await conn.execute(command) }
    }

    /// Uploads `localPath` to `remote` on every host (SFTP, atomically as
    /// `SFTPClient.upload`: a host that fails keeps its old file). Each result is the size.
    public func upload(_ localPath: String, to remote: SFTPPath,
                       options: SFTPTransferOptions = SFTPTransferOptions()) -> AsyncStream<SSHFleetResult<UInt64>> {
        run { _, conn throws(SSHError) in
            let sftp = try await conn.openSFTP()
            defer { sftp.close() }
            return try await sftp.upload(localPath, to: remote, options: options)
        }
    }

    /// Downloads `remote` from every host to the local path `destination` gives for it
    /// (a directory per host, say: hosts share one remote name), atomically as
    /// `SFTPClient.download`; the path's directory must exist. `destination` is called
    /// once the host is connected. Each result is the size.
    public func download(_ remote: SFTPPath, options: SFTPTransferOptions = SFTPTransferOptions(),
                         to destination: @escaping @Sendable (SSHFleetHost) throws(SSHError) -> String)
        -> AsyncStream<SSHFleetResult<UInt64>>
    {
        run { host, conn throws(SSHError) in
            let path = try destination(host)
            let sftp = try await conn.openSFTP()
            defer { sftp.close() }
            return try await sftp.download(remote, to: path, options: options)
        }
    }

    /// Runs `operation` with every host and its connection; results arrive as hosts
    /// finish. The stream ends once every host has a result.
    public func run<Value: Sendable>(
        _ operation: @escaping @Sendable (SSHFleetHost, SSHConnection) async throws(SSHError) -> Value
    ) -> AsyncStream<SSHFleetResult<Value>> {
        let (stream, continuation) = AsyncStream<SSHFleetResult<Value>>.makeStream()
        let operations = FleetGate(limit: options.maxConcurrentOperations)
        let handshakes = FleetGate(limit: options.maxConcurrentHandshakes,
                                   interval: options.handshakesPerSecond.map { .seconds(1 / $0) })
        let runID = runs.add(1, ordering: .relaxed).newValue
        let driver = Task {
            await withTaskGroup(of: Void.self) { group in
                for host in hosts {
                    group.addTask {
                        let result = await self.turn(host, run: runID, operations: operations, handshakes: handshakes,
                                                     operation)
                        continuation.yield(result)
                    }
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in driver.cancel() }
        return stream
    }

    /// Cancels what runs on `host` (its connection attempts or its operation); that host
    /// ends with `cancelled`, the others go on.
    public func cancel(host: String) {
        let cancels = running.withLock { $0[host].map { Array($0.values) } ?? [] }
        for cancel in cancels { cancel() }
    }

    /// Closes every open connection of the fleet, the hosts' first, then the jump hosts'.
    public func close() async {
        let open = connections.withLock { c -> [SSHConnection] in
            defer { c = [:] }
            return Array(c.values)
        }
        for conn in open { await conn.close() }
        let jumpAttempts = jumps.withLock { j -> [JumpAttempt] in
            defer { j = [:] }
            return Array(j.values)
        }
        // one still connecting is left to end on its own: its connection then has no user
        for a in jumpAttempts {
            if case .success(let conn) = a.outcome { await conn.close() }
        }
    }

    // MARK: one host

    private func turn<Value: Sendable>(
        _ host: SSHFleetHost, run: UInt64, operations: FleetGate, handshakes: FleetGate,
        _ operation: @escaping @Sendable (SSHFleetHost, SSHConnection) async throws(SSHError) -> Value
    ) async -> SSHFleetResult<Value> {
        let start = ContinuousClock.now
        let work = Task { () -> SSHFleetResult<Value> in
            var attempts = 0
            var connected = start
            let outcome: Result<Value, SSHError>
            do throws(SSHError) {
                try await operations.enter()
                defer { operations.leave() }
                let conn = try await self.connection(host, run: run, handshakes: handshakes, attempts: &attempts)
                connected = .now
                outcome = .success(try await operation(host, conn))
            } catch {
                outcome = .failure(error)
            }
            return SSHFleetResult(host: host.name, outcome: outcome, connectAttempts: attempts,
                                  connectDuration: connected - start, duration: .now - start)
        }
        // the host's task: cancelled by cancel(host:), by the run's cancellation, or at its timeout
        let id = turns.add(1, ordering: .relaxed).newValue
        running.withLock { $0[host.name, default: [:]][id] = { work.cancel() } }
        defer { running.withLock { $0[host.name]?[id] = nil } }
        let expired = ExpiryFlag()
        let timer: Task<Void, Never>? = options.hostTimeout.map { limit in
            Task {
                guard (try? await Task.sleep(for: limit)) != nil else { return }
                expired.set()
                work.cancel()
            }
        }
        defer { timer?.cancel() }
        var result = await withTaskCancellationHandler {
            await work.value
        } onCancel: {
            work.cancel()
        }
        if case .failure(let e) = result.outcome, e.code == .cancelled, expired.isSet, let limit = options.hostTimeout {
            result.outcome = .failure(SSHError(.timedOut, "\(host.name) took longer than \(limit)", cause: e))
        }
        return result
    }

    /// The open connection to `configuration`'s jump hosts (the last hop, through the
    /// others), opened once for every host behind the same chain, with the fleet's retries.
    /// Its failure is every such host's failure for the rest of this run (none tries it
    /// again); a later run, or a host that finds the connection closed, opens it again.
    private func jumpConnection(_ configuration: SSHConfiguration, run: UInt64, handshakes: FleetGate)
        async throws(SSHError) -> SSHConnection
    {
        let key = configuration.jumpHosts.map { "\($0.user)@\($0.host):\($0.port)" }.joined(separator: ",")
        let jump = {
            var last = configuration.jumpHosts[configuration.jumpHosts.count - 1]
            last.jumpHosts = Array(configuration.jumpHosts.dropLast())
            return last
        }()
        // a connection found closed is opened again once
        for _ in 0..<2 {
            let attempt = jumps.withLock { j -> JumpAttempt in
                if let a = j[key] {
                    switch a.outcome {
                    case .failure where a.run != run: break
                    case .success(let conn) where !conn.isConnected: break
                    default: return a
                    }
                }
                let a = JumpAttempt(run: run) { [self] () async throws(SSHError) -> SSHConnection in
                    var attempts = 0
                    return try await retrying("the jump host \(key)", attempts: &attempts) {
                        () async throws(SSHError) -> SSHConnection in
                        try await handshakes.withPlace { () async throws(SSHError) -> SSHConnection in
                            try await SSHClient.connect(jump)
                        }
                    }
                }
                j[key] = a
                return a
            }
            switch await attempt.value() {
            case .success(let conn) where conn.isConnected: return conn
            case .success: continue
            // an earlier run's attempt that was still going when this run joined it:
            // its failure is that run's, this run tries once of its own
            case .failure where attempt.run != run: continue
            case .failure(let e): throw e
            }
        }
        throw SSHError(.connectionClosed, "the connection to the jump host \(key) has closed")
    }

    /// Failures of a connection attempt worth another one.
    static let retryable: Set<SSHError.Code> = [
        .nameResolutionFailed, .connectionRefused, .hostUnreachable, .connectTimeout,
        .disconnected, .connectionLost, .connectionClosed,
    ]

    /// `attempt`, tried again after a failure worth it (and that `final` does not call
    /// final), up to `connectRetries` times, with a doubling backoff and jitter;
    /// `attempts` counts the tries.
    private func retrying<T>(_ what: String, attempts: inout Int, final: (SSHError) -> Bool = { _ in false },
                             _ attempt: () async throws(SSHError) -> T) async throws(SSHError) -> T
    {
        var backoff = options.retryBackoff
        while true {
            attempts += 1
            do throws(SSHError) {
                return try await attempt()
            } catch {
                guard Self.retryable.contains(error.code), attempts <= options.connectRetries, !Task.isCancelled,
                      !final(error) else {
                    throw error
                }
                let jitter = Double.random(in: 0.75...1.25)
                do {
                    try await Task.sleep(for: backoff * jitter)
                } catch {
                    throw SSHError(.cancelled, "connecting to \(what) was cancelled")
                }
                backoff *= 2
            }
        }
    }

    /// The host's open connection, or a new one (under the handshake limit, retried).
    private func connection(_ host: SSHFleetHost, run: UInt64, handshakes: FleetGate, attempts: inout Int)
        async throws(SSHError) -> SSHConnection
    {
        if let open = connections.withLock({ $0[host.name] }), open.isConnected { return open }
        // hosts behind the same jump hosts share one connection to them, tried for all of
        // them at once: its failure ends this host's tries. Each try looks it up again, so
        // a jump connection that dropped is opened again.
        var jumpFailed = false
        let conn = try await retrying(host.name, attempts: &attempts, final: { _ in jumpFailed }) {
            () async throws(SSHError) -> SSHConnection in
            var target = host.configuration
            var via: SSHConnection?
            if !target.jumpHosts.isEmpty {
                do throws(SSHError) {
                    via = try await jumpConnection(target, run: run, handshakes: handshakes)
                } catch {
                    jumpFailed = true
                    throw error
                }
                target.jumpHosts = []
            }
            return try await handshakes.withPlace { [target, via] () async throws(SSHError) -> SSHConnection in
                if let via { return try await SSHClient.connect(target, through: via) }
                return try await SSHClient.connect(target)
            }
        }
        let replaced = connections.withLock { c -> SSHConnection? in
            defer { c[host.name] = conn }
            return c[host.name]
        }
        if let replaced { await replaced.close() }
        return conn
    }
}

/// Set once when a host's time is up.
private final class ExpiryFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}
