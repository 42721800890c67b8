/// How a remote command ended.
public enum SSHExitStatus: Sendable, Equatable, CustomStringConvertible {
    /// The command exited with this status.
    case exited(Int32)
    /// The command was killed by a signal, named without `SIG` ("TERM", "KILL").
    case signaled(String, coreDumped: Bool)
    /// The server closed the channel without reporting either (e.g. its
    /// ChannelTimeout fired). Never reported as a made-up 0.
    case unknown

    public var description: String {
        switch self {
        case .exited(let c): "exited(\(c))"
        case .signaled(let s, let core): "signaled(\(s)\(core ? ", core dumped" : ""))"
        case .unknown: "unknown"
        }
    }
}

/// The outcome of `SSHConnection.execute`. A non-zero exit is a result, not an error.
public struct SSHCommandResult: Sendable {
    /// Everything the command wrote to standard output.
    public var stdout: [UInt8]
    /// Everything the command wrote to standard error.
    public var stderr: [UInt8]
    /// How the command ended: `.exited(status)`, `.signaled(name, coreDumped:)` or `.unknown`.
    public var exitStatus: SSHExitStatus
    /// True when the server refused the environment requests and the variables
    /// were set by prefixing the command instead (see `execute`).
    public var usedEnvironmentFallback: Bool

    /// stdout decoded as UTF-8 (invalid sequences replaced).
    public var stdoutString: String { String(decoding: stdout, as: UTF8.self) }
    /// stderr decoded as UTF-8 (invalid sequences replaced).
    public var stderrString: String { String(decoding: stderr, as: UTF8.self) }
    /// True when the command exited with status 0.
    public var succeeded: Bool { exitStatus == .exited(0) }
}
