import Foundation
import ServerTransport

/// Where a host's connection is, as the connection monitor sees it.
public enum AgentConnectionState: String, Sendable, Hashable, CustomStringConvertible {
    /// No connection: never made, given up on, or dropped to stay under the limit of
    /// connected hosts. The next call on the host connects.
    case disconnected
    /// A connect is under way.
    case connecting
    /// Connected and answering.
    case connected
    /// The connection was lost or could not be made; a retry is scheduled when
    /// `AgentConnectionEvent.retryIn` says so.
    case error

    public var description: String { rawValue }
}

/// One change of a host's connection state.
public struct AgentConnectionEvent: Sendable, CustomStringConvertible {
    public var host: ServerID
    public var state: AgentConnectionState
    /// What failed, for `error` and for a `disconnected` that gave up.
    public var error: AgentError?
    /// Reconnect attempts that failed so far (0 before the first).
    public var attempt: Int
    /// When the next reconnect attempt runs; nil when none is scheduled.
    public var retryIn: Duration?
    /// For `connected`: a new connection replaced an earlier one, so what was cached
    /// about the host (the installed agents) was dropped.
    public var reconnected: Bool
    public var date: Date

    public var description: String {
        var s = "\(host.rawValue): \(state)"
        if reconnected { s += " (reconnected)" }
        if attempt > 0 { s += ", \(attempt) failed attempt\(attempt == 1 ? "" : "s")" }
        if let retryIn { s += ", retrying in \(retryIn)" }
        if let error { s += ": \(error.message)" }
        return s
    }
}

/// How the connection monitor treats hosts. The defaults are Emdash's, with one
/// change: a host whose agents still run is never given up on.
public struct AgentConnectionPolicy: Sendable {
    /// At most this many hosts hold a connection at once. Connecting one more drops
    /// the least recently used idle one (its agents run on in tmux); when every
    /// connected host is in use, the call waits for one to become idle.
    public var maxConnectedHosts: Int
    /// How often a connected host is checked (one round trip: its tmux sessions),
    /// beside the SSH keepalive.
    public var healthCheckInterval: Duration
    /// A check that takes longer than this counts as a lost connection.
    public var healthCheckTimeout: Duration
    /// Waits before the reconnect attempts after a loss: Emdash's 1 s, 5 s, 15 s.
    public var backoff: [Duration]
    /// After `backoff` is used up, a host that still has live agent sessions is
    /// retried this often, without end; other hosts are given up (`disconnected`).
    public var slowRetryInterval: Duration

    public init(maxConnectedHosts: Int = 10, healthCheckInterval: Duration = .seconds(30),
                healthCheckTimeout: Duration = .seconds(20),
                backoff: [Duration] = [.seconds(1), .seconds(5), .seconds(15)],
                slowRetryInterval: Duration = .seconds(60)) {
        precondition(maxConnectedHosts >= 1, "at least one host must be allowed to connect")
        self.maxConnectedHosts = maxConnectedHosts
        self.healthCheckInterval = healthCheckInterval
        self.healthCheckTimeout = healthCheckTimeout
        self.backoff = backoff
        self.slowRetryInterval = slowRetryInterval
    }
}
