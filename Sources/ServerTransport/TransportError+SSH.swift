import SSHKit

extension TransportError {
    /// Classifies one of SSHKit's errors for a UI. `path` names the file an SFTP
    /// failure is about (the caller's spelling, not the resolved one).
    public init(_ error: SSHError, path: String? = nil) {
        let code: Code
        var reason: FileIOReason?
        switch error.code {
        case .nameResolutionFailed, .connectionRefused, .hostUnreachable, .connectTimeout,
             .disconnected, .connectionLost, .connectionClosed, .keyExchangeFailed, .streamCorrupted:
            code = .hostUnreachable
        case .authenticationFailed, .privateKeyUnreadable, .agentUnavailable:
            code = .authenticationFailed
        case .hostKeyRejected:
            code = .hostKeyRejected
        case .timedOut:
            code = .timedOut
        case .cancelled:
            code = .cancelled
        case .invalidArgument:
            code = .invalidArgument
        case .noSuchFile:
            (code, reason) = (.fileIO, .noSuchFile)
        case .permissionDenied:
            (code, reason) = (.fileIO, .permissionDenied)
        case .sftpFailure, .localFileError:
            (code, reason) = (.fileIO, .other)
        case .outputLimitExceeded where path != nil || error.sftp != nil:
            (code, reason) = (.fileIO, .other) // a file larger than its read allows
        case .outputLimitExceeded:
            code = .other // a process's output: not a file operation
        default:
            code = .other
        }
        self.init(code, error.message, path: path ?? error.sftp?.path?.string,
                  context: reason.map { .fileIO(reason: $0, systemErrno: error.systemErrno) } ?? .none, cause: error)
    }

    /// The transport's error for a cancelled call (the same for every transport).
    static var cancelled: TransportError { TransportError(.cancelled, "cancelled", cause: CancellationError()) }

    /// Whether the calling task was cancelled (`code == .cancelled`).
    public var isCancellation: Bool { code == .cancelled }

    static func fileError(_ message: String, _ path: String, _ reason: FileIOReason) -> TransportError {
        TransportError(.fileIO, message, path: path, context: .fileIO(reason: reason))
    }
}
