/// The one error type of SSHKit.
///
/// `code` is stable and meant for `switch`/`==`; `message` is for people. When libssh
/// was involved, `libssh` carries the function that failed and what libssh said at
/// that moment (copied on the connection's worker thread, right after the call).
/// A non-zero exit status of a remote command is a result, not an error.
public struct SSHError: Error, Sendable, CustomStringConvertible {
    /// A stable error code. Codes are added over time; match the ones you handle.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's name, e.g. `"invalidArgument"`; also its `description`.
        public let name: String
        init(_ name: String) { self.name = name }
        public var description: String { name }

        /// A configuration value or argument is invalid (nothing was sent).
        public static let invalidArgument = Code("invalidArgument")
        /// A call was made in a state that does not allow it, e.g. after `close()`.
        public static let invalidState = Code("invalidState")
        /// An allocation failed.
        public static let outOfMemory = Code("outOfMemory")
        /// A system call failed; `systemErrno` says which errno.
        public static let systemError = Code("systemError")
        /// DNS could not resolve the host name.
        public static let nameResolutionFailed = Code("nameResolutionFailed")
        /// The host answered the TCP connect with a reset (nothing listens on the port).
        public static let connectionRefused = Code("connectionRefused")
        /// No route to the host or network.
        public static let hostUnreachable = Code("hostUnreachable")
        /// The connect timeout elapsed (TCP connect, key exchange or authentication).
        public static let connectTimeout = Code("connectTimeout")
        /// Key exchange failed: no common algorithm, a bad banner, a broken peer.
        public static let keyExchangeFailed = Code("keyExchangeFailed")
        /// The host key policy rejected the server's key; see `presentedHostKey`.
        public static let hostKeyRejected = Code("hostKeyRejected")
        /// Every configured method was tried and denied; see `offeredAuthMethods`.
        public static let authenticationFailed = Code("authenticationFailed")
        /// A private key could not be read: missing, unsupported or wrong passphrase.
        public static let privateKeyUnreadable = Code("privateKeyUnreadable")
        /// ssh-agent could not be reached or used.
        public static let agentUnavailable = Code("agentUnavailable")
        /// The server ended the connection.
        public static let disconnected = Code("disconnected")
        /// The connection broke (reset, network failure).
        public static let connectionLost = Code("connectionLost")
        /// The connection was closed by this program while the operation ran.
        public static let connectionClosed = Code("connectionClosed")
        /// The server refused to open a channel (e.g. its MaxSessions is reached).
        public static let channelOpenFailed = Code("channelOpenFailed")
        /// The server refused a channel request (exec, env, ...).
        public static let channelRequestFailed = Code("channelRequestFailed")
        /// Collected output went over the `outputLimit` given to the call.
        public static let outputLimitExceeded = Code("outputLimitExceeded")
        /// The operation was cancelled (task cancellation or an explicit cancel).
        public static let cancelled = Code("cancelled")
        /// The peer violated the SSH protocol or libssh reported an internal error.
        public static let protocolError = Code("protocolError")
        /// A known_hosts file could not be read or written: too large, binary,
        /// an I/O error (`systemErrno`), or a lock that could not be taken.
        public static let knownHostsUnusable = Code("knownHostsUnusable")
        /// The `proxyCommand` could not be started, or it ended before the connection
        /// was established (the message says how: its exit status or signal).
        public static let proxyCommandFailed = Code("proxyCommandFailed")
        /// An operation ran past the timeout given to it; a remote command was
        /// signalled (`TERM`) and its channel closed.
        public static let timedOut = Code("timedOut")
        /// The channel ended before the call could act on it, e.g. a write to a
        /// command that exited, or a signal to a shell that is gone.
        public static let channelClosed = Code("channelClosed")
        /// The server refused a remote forward (`tcpip-forward`): forwarding is off
        /// (`AllowTcpForwarding`), not permitted there (`PermitListen`, `GatewayPorts`),
        /// or the port is taken.
        public static let forwardingRefused = Code("forwardingRefused")
        /// A packet from the server failed its integrity check: a MAC or decryption
        /// error, or a packet length or padding that cannot be right. The bytes were
        /// altered on the way (a broken middlebox, bad memory, an attack); nothing more
        /// can be read from the stream, so the connection is lost and every operation
        /// on it fails with this code. `libssh` has libssh's words ("HMAC error",
        /// "Decryption error", ...). Connect again; never retry on the same connection.
        public static let streamCorrupted = Code("streamCorrupted")

        // SFTP (see `sftp` for the operation, path and the server's status)
        /// The server has no SFTP subsystem (or refused to start it).
        public static let sftpUnavailable = Code("sftpUnavailable")
        /// SSH_FX_NO_SUCH_FILE: the path (or a directory on the way) does not exist.
        public static let noSuchFile = Code("noSuchFile")
        /// SSH_FX_PERMISSION_DENIED.
        public static let permissionDenied = Code("permissionDenied")
        /// SSH_FX_FAILURE: the server's catch-all, e.g. a directory that is not empty,
        /// or a file that exists where `O_EXCL` asked for a new one.
        public static let sftpFailure = Code("sftpFailure")
        /// SSH_FX_OP_UNSUPPORTED, or an extension the server did not announce.
        public static let unsupported = Code("unsupported")
        /// SSH_FX_BAD_MESSAGE, or a reply that breaks the SFTP protocol.
        public static let sftpProtocolError = Code("sftpProtocolError")
        /// A file on this machine could not be read or written (`systemErrno`).
        public static let localFileError = Code("localFileError")
    }

    /// Where an SFTP failure happened.
    public struct SFTPContext: Sendable, Equatable {
        /// The request, e.g. "open", "stat", "rename".
        public var operation: String
        /// The remote path it named, if any.
        public var path: SFTPPath?
        /// The server's SSH_FX_* status code and message, when it sent a status.
        public var status: UInt32?
        /// The message the server sent with its status, when it sent one.
        public var serverMessage: String?
    }

    /// What libssh reported when it was the source of the failure.
    public struct LibSSHDiagnostic: Sendable, Equatable {
        /// The libssh function that failed, e.g. `ssh_connect`.
        public var function: String
        /// libssh's error code (`ssh_get_error_code`), or for a key or certificate that
        /// did not load, the import call's return value; 0 if none.
        public var code: Int
        /// libssh's text (from `ssh_get_error`), copied right after the failed call; empty
        /// when libssh gave none (e.g. a key file import).
        public var message: String
    }

    /// What a failure carries beside its code and message. Each case belongs to the
    /// code it is named after; `sftp` to the codes of SFTP requests (`noSuchFile`,
    /// `permissionDenied`, `sftpFailure`, `sftpProtocolError`, and a read over its limit).
    public enum Context: Sendable {
        /// Nothing beyond the message and the general fields.
        case none
        /// `hostKeyRejected`: what the host key policy expected (fingerprints), when it
        /// said.
        case hostKeyRejected(expected: [String])
        /// `authenticationFailed`: the methods the server offers.
        case authenticationFailed(offered: SSHAuthMethods)
        /// An SFTP request's failure: the operation, path and server status.
        case sftp(SFTPContext)
    }

    /// What went wrong; stable, so compare it with `==` or `switch` over it.
    public var code: Code
    /// A description for people; match on `code`, not on this text.
    public var message: String
    /// What libssh reported, when it was involved.
    public var libssh: LibSSHDiagnostic?
    /// The `errno` of a failed system call, or the `getaddrinfo` code for
    /// `nameResolutionFailed`; nil when none.
    public var systemErrno: Int32?
    /// The server's address, for connection-level errors.
    public var host: String?
    /// The server's port, with `host`.
    public var port: Int?
    /// The key the server presented, when the failure happened after key exchange.
    public var presentedHostKey: SSHHostKey?
    /// What this code carries: what a rejected host key was expected to be, the methods
    /// a server offers when authentication failed, an SFTP request's operation and path.
    public var context: Context
    /// The underlying error, e.g. what a policy closure or responder threw.
    public var cause: (any Error & Sendable)?

    /// What the host key policy expected (fingerprints), for `hostKeyRejected`.
    public var expectedHostKeys: [String] {
        if case .hostKeyRejected(let expected) = context { return expected }
        return []
    }

    /// The methods the server offers, for `authenticationFailed`.
    public var offeredAuthMethods: SSHAuthMethods? {
        if case .authenticationFailed(let offered) = context { return offered }
        return nil
    }

    /// For SFTP errors: the operation, path and server status.
    public var sftp: SFTPContext? {
        if case .sftp(let sftp) = context { return sftp }
        return nil
    }

    /// An error with `code`, `message`, what the code carries and, optionally, the
    /// underlying `cause`; the other properties start empty.
    public init(_ code: Code, _ message: String, context: Context = .none, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.context = context
        self.cause = cause
    }

    public var description: String {
        var s = "SSHError.\(code): \(message)"
        if let host { s += " [\(host):\(port ?? 22)]" }
        if let lib = libssh, !lib.message.isEmpty { s += " (libssh \(lib.function): \(lib.message))" }
        if let key = presentedHostKey, code == .hostKeyRejected {
            s += "; presented \(key.type) \(key.sha256Fingerprint)"
            if !expectedHostKeys.isEmpty { s += ", expected \(expectedHostKeys.joined(separator: " or "))" }
        }
        if let sftp {
            s += " [sftp \(sftp.operation)"
            if let path = sftp.path { s += " \(path)" }
            if let status = sftp.status { s += ", status \(status)" }
            if let m = sftp.serverMessage, !m.isEmpty { s += ": \(m)" }
            s += "]"
        }
        if let cause { s += "; cause: \(cause)" }
        return s
    }
}
