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
        /// A process ran past its timeout (`timeout`, `partialStdout`). The server answered
        /// all along: this is the process's time, not the connection's.
        public static let timedOut = Code("timedOut")
        /// The server did not answer a check in time (a frozen server, a silent network): the
        /// connection may still be open, but nothing comes back on it.
        public static let noAnswer = Code("noAnswer")
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

    /// What a failure carries beside its code and message. Each case belongs to the code
    /// it is named after; `ssh` to the codes classified from `ssh`'s own messages.
    public enum Context: Sendable, Equatable {
        /// Nothing beyond the message (and `cause`).
        case none
        /// `fileIO`: why; on this machine, the errno of the call that failed; for a file
        /// command run on a host (the OpenSSH transport), how it ended and its stderr.
        case fileIO(reason: FileIOReason, systemErrno: Int32? = nil, exitCode: Int32? = nil, stderr: String? = nil)
        /// `commandFailed`: the exit code (nil when a signal ended the process) and what
        /// it wrote to standard error.
        case commandFailed(exitCode: Int32?, stderr: String)
        /// `timedOut`: the timeout that passed, and what the process wrote before it was
        /// stopped.
        case timedOut(after: Duration, partialStdout: [UInt8], stderr: String)
        /// `cancelled`, where the transport kept it: what the process wrote to standard
        /// output before it was stopped.
        case cancelled(partialStdout: [UInt8])
        /// A failure of `ssh` itself (it exited 255; `hostUnreachable`,
        /// `authenticationFailed`, `hostKeyRejected`, or `other` for a refused session):
        /// what it wrote to standard error.
        case ssh(stderr: String)
    }

    /// What kind of failure; what a UI acts on.
    public var code: Code
    /// What happened, for people.
    public var message: String
    /// The path the failure is about (for `fileIO`, as it was given to the call).
    public var path: String?
    /// What this code carries: the reason of a `fileIO`, the exit code of a
    /// `commandFailed`, the partial output of a `timedOut`.
    public var context: Context
    /// The underlying error: the `SSHError` an SSHKit failure came from, or the
    /// `CancellationError` of a cancelled call.
    public var cause: (any Error & Sendable)?

    /// An error with `code`, `message` and what the code carries.
    public init(_ code: Code, _ message: String, path: String? = nil, context: Context = .none,
                cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.context = context
        self.cause = cause
    }

    /// A process stopped after `after`, having printed `partialStdout` (what every
    /// transport throws; for scripts of `MockTransport` too).
    public static func timedOut(after: Duration, partialStdout: [UInt8] = [], stderr: String = "") -> TransportError {
        TransportError(.timedOut, "the process ran longer than \(after) and was stopped",
                       context: .timedOut(after: after, partialStdout: partialStdout, stderr: stderr))
    }

    /// For `fileIO`: why.
    public var reason: FileIOReason? {
        if case .fileIO(let reason, _, _, _) = context { return reason }
        return nil
    }

    /// For `fileIO` on this machine: the errno.
    public var systemErrno: Int32? {
        if case .fileIO(_, let errno, _, _) = context { return errno }
        return nil
    }

    /// The exit code of the process that failed (`commandFailed`; `fileIO` over OpenSSH);
    /// nil when a signal ended it, or for other codes.
    public var exitCode: Int32? {
        switch context {
        case .fileIO(_, _, let exitCode, _), .commandFailed(let exitCode, _): exitCode
        default: nil
        }
    }

    /// What the process, or `ssh` itself, wrote to standard error (`commandFailed`,
    /// `timedOut`, `fileIO` over OpenSSH, and failures classified from `ssh`'s messages).
    public var stderr: String? {
        switch context {
        case .fileIO(_, _, _, let stderr): stderr
        case .commandFailed(_, let stderr), .timedOut(_, _, let stderr), .ssh(let stderr): stderr
        case .none, .cancelled: nil
        }
    }

    /// For `timedOut`: the timeout that passed.
    public var timeout: Duration? {
        if case .timedOut(let after, _, _) = context { return after }
        return nil
    }

    /// For `timedOut` (and `cancelled`, where the transport kept it): what the process
    /// wrote to standard output before it was stopped.
    public var partialStdout: [UInt8]? {
        switch context {
        case .timedOut(_, let out, _), .cancelled(let out): out
        default: nil
        }
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
        throw TransportError(.fileIO, "the path \(path.debugDescription) contains a NUL byte", path: path,
                             context: .fileIO(reason: .other))
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
