import SSHKit

/// The one error of the transports, with codes a UI can act on.
public struct TransportError: Error, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The server cannot be reached (name, refused, unreachable, timed out, lost).
        public static let hostUnreachable = Code("hostUnreachable")
        public static let authenticationFailed = Code("authenticationFailed")
        public static let hostKeyMismatch = Code("hostKeyMismatch")
        /// A process exited non-zero where success was required (`exitCode`, `stderr`).
        public static let commandFailed = Code("commandFailed")
        /// A file operation failed (`path`; the cause says why).
        public static let fileIO = Code("fileIO")
        /// A process ran past its timeout (`seconds`, `partialStdout`).
        public static let timeout = Code("timeout")
        public static let other = Code("other")
    }

    /// Why a file operation failed, the same for every transport (an errno locally, an
    /// SFTP status remotely).
    public enum FileIOReason: Sendable, Equatable {
        case noSuchFile, permissionDenied, notADirectory, isADirectory, alreadyExists
        case directoryNotEmpty, noSpace, other
    }

    public var code: Code
    public var message: String
    /// For `fileIO`: why.
    public var reason: FileIOReason?
    public var path: String?
    public var exitCode: Int32?
    public var stderr: String?
    public var seconds: Double?
    public var partialStdout: [UInt8]?
    /// For `fileIO` on this machine: the errno.
    public var systemErrno: Int32?
    public var cause: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, path: String? = nil, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.cause = cause
    }

    /// A process stopped after `after`, having printed `partialStdout` (what every
    /// transport throws; for scripts of `MockTransport` too).
    public static func timeout(after: Duration, partialStdout: [UInt8] = [], stderr: String = "") -> TransportError {
        var e = TransportError(.timeout, "the process ran longer than \(after) and was stopped")
        e.seconds = Double(after.components.seconds) + Double(after.components.attoseconds) / 1e18
        e.partialStdout = partialStdout
        e.stderr = stderr
        return e
    }

    /// Whether a missing file caused it.
    public var isNoSuchFile: Bool { code == .fileIO && reason == .noSuchFile }

    public var description: String {
        var s = "TransportError.\(code): \(message)"
        if let path { s += " [\(path)]" }
        if let cause { s += "; cause: \(cause)" }
        return s
    }
}
