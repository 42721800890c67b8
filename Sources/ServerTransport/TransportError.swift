import SSHKit

/// The one error of the transports, with codes a UI can act on.
public struct TransportError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure it was; compare with `==` (`error.code == .hostUnreachable`).
    /// A struct, so new codes can come without breaking a `switch`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's name, e.g. "fileIO".
        public let name: String
        init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The server cannot be reached (name, refused, unreachable, timed out, lost).
        public static let hostUnreachable = Code("hostUnreachable")
        /// The server accepted none of the credentials, or a key or the agent could not be used.
        public static let authenticationFailed = Code("authenticationFailed")
        /// The server's host key was refused (the host key policy or known_hosts).
        public static let hostKeyRejected = Code("hostKeyRejected")
        /// A process exited non-zero where success was required (`exitCode`, `stderr`).
        public static let commandFailed = Code("commandFailed")
        /// A file operation failed (`path`; `reason` says why).
        public static let fileIO = Code("fileIO")
        /// A process ran past its timeout (`timeout`, `partialStdout`).
        public static let timedOut = Code("timedOut")
        /// The calling task was cancelled (`isCancellation`); the operation may have
        /// happened (a process may still run, see the call).
        public static let cancelled = Code("cancelled")
        /// An argument the transport refuses before acting: a NUL byte in a command, an
        /// invalid environment variable name, a destination ssh would misread.
        public static let invalidArgument = Code("invalidArgument")
        /// Anything else: a closed transport, a server without SFTP, an unsafe control
        /// directory, … (`message`, `cause`).
        public static let other = Code("other")
    }

    /// Why a file operation failed, the same for every transport (an errno locally, an
    /// SFTP status remotely).
    public enum FileIOReason: Sendable, Equatable {
        /// The path, or a directory on the way to it, does not exist.
        case noSuchFile
        /// Not permitted (locally and over OpenSSH, a read-only file system too).
        case permissionDenied
        /// A directory was needed and something else is there.
        case notADirectory
        /// The path is a directory where a file was needed (`readFile`, `writeFile`, `removeFile`).
        case isADirectory
        /// Something already exists at the path.
        case alreadyExists
        /// A directory that had to be empty is not.
        case directoryNotEmpty
        /// The disk, or the user's quota, is full.
        case noSpace
        /// Anything else (over SFTP, also the server's catch-all failure status); see `message`.
        case other
    }

    /// What kind of failure; what a UI acts on.
    public var code: Code
    /// What happened, for people.
    public var message: String
    /// For `fileIO`: why.
    public var reason: FileIOReason?
    /// The path the failure is about (for `fileIO`, as it was given to the call).
    public var path: String?
    /// The exit code of the process that failed (`commandFailed`; `fileIO` over OpenSSH);
    /// nil when a signal ended it.
    public var exitCode: Int32?
    /// What the process, or `ssh` itself, wrote to standard error (`commandFailed`,
    /// `timedOut`, `fileIO` over OpenSSH, and failures classified from `ssh`'s messages).
    public var stderr: String?
    /// For `timedOut`: the timeout that passed.
    public var timeout: Duration?
    /// For `timedOut` (and `cancelled`, where the transport kept it): what the process
    /// wrote to standard output before it was stopped.
    public var partialStdout: [UInt8]?
    /// For `fileIO` on this machine: the errno.
    public var systemErrno: Int32?
    /// The underlying error: the `SSHError` an SSHKit failure came from, or the
    /// `CancellationError` of a cancelled call.
    public var cause: (any Error & Sendable)?

    /// An error with `code` and `message`; set the other fields the code calls for.
    public init(_ code: Code, _ message: String, path: String? = nil, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.cause = cause
    }

    /// A process stopped after `after`, having printed `partialStdout` (what every
    /// transport throws; for scripts of `MockTransport` too).
    public static func timedOut(after: Duration, partialStdout: [UInt8] = [], stderr: String = "") -> TransportError {
        var e = TransportError(.timedOut, "the process ran longer than \(after) and was stopped")
        e.timeout = after
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

extension TransportError {
    /// A path with a NUL byte would reach the system, or the server, cut short at the NUL:
    /// another file. Every transport refuses it (`fileIO`, reason `other`) before it acts.
    static func checkPath(_ path: String) throws(TransportError) {
        guard path.utf8.contains(0) else { return }
        var e = TransportError(.fileIO, "the path \(path.debugDescription) contains a NUL byte", path: path)
        e.reason = .other
        throw e
    }

    /// The same for a process's executable, arguments and environment (`invalidArgument`).
    static func checkProcess(_ executable: String, _ arguments: [String], _ environment: [String: String]) throws(TransportError) {
        let parts = [executable] + arguments + environment.flatMap { [$0.key, $0.value] }
        if parts.contains(where: { $0.utf8.contains(0) }) {
            throw TransportError(.invalidArgument, "\(executable.debugDescription): an argument or environment entry contains a NUL byte")
        }
        // the remote transports pass names through a shell: every transport takes the same ones
        if let bad = environment.keys.first(where: { !SSHShellQuoting.isValidEnvironmentName($0) }) {
            throw TransportError(.invalidArgument, "invalid environment variable name \(bad.debugDescription)")
        }
    }
}
