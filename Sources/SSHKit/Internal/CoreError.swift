internal import SSHCore
import Synchronization

extension SSHError.Code {
    /// The one mapping from the core's error table; exhaustive by construction.
    init(core: sshcore_code) {
        switch core {
        case .SSHCORE_E_OK: self = .protocolError // never mapped: OK is not an error
        case .SSHCORE_E_INVALID_ARGUMENT: self = .invalidArgument
        case .SSHCORE_E_INVALID_STATE: self = .invalidState
        case .SSHCORE_E_OUT_OF_MEMORY: self = .outOfMemory
        case .SSHCORE_E_SYSTEM: self = .systemError
        case .SSHCORE_E_NAME_RESOLUTION: self = .nameResolutionFailed
        case .SSHCORE_E_CONNECTION_REFUSED: self = .connectionRefused
        case .SSHCORE_E_HOST_UNREACHABLE: self = .hostUnreachable
        case .SSHCORE_E_CONNECT_TIMEOUT: self = .connectTimeout
        case .SSHCORE_E_KEY_EXCHANGE: self = .keyExchangeFailed
        case .SSHCORE_E_HOST_KEY_REJECTED: self = .hostKeyRejected
        case .SSHCORE_E_AUTH_DENIED: self = .authenticationFailed
        case .SSHCORE_E_PRIVATE_KEY: self = .privateKeyUnreadable
        case .SSHCORE_E_AGENT: self = .agentUnavailable
        case .SSHCORE_E_DISCONNECTED: self = .disconnected
        case .SSHCORE_E_CONNECTION_LOST: self = .connectionLost
        case .SSHCORE_E_CLOSED: self = .connectionClosed
        case .SSHCORE_E_CHANNEL_OPEN_REFUSED: self = .channelOpenFailed
        case .SSHCORE_E_CHANNEL_REQUEST_FAILED: self = .channelRequestFailed
        case .SSHCORE_E_OUTPUT_LIMIT: self = .outputLimitExceeded
        case .SSHCORE_E_CANCELLED: self = .cancelled
        case .SSHCORE_E_PROTOCOL: self = .protocolError
        case .SSHCORE_E_KNOWN_HOSTS: self = .knownHostsUnusable
        case .SSHCORE_E_TIMED_OUT: self = .timedOut
        case .SSHCORE_E_CHANNEL_CLOSED: self = .channelClosed
        case .SSHCORE_E_FORWARD_REFUSED: self = .forwardingRefused
        case .SSHCORE_E_STREAM_CORRUPTED: self = .streamCorrupted
        }
    }
}

extension SSHError {
    /// Builds an SSHError from what the core filled in on its worker.
    init(core e: sshcore_error) {
        // imported C enums accept any raw value: range-check before the exhaustive switch
        let valid = e.code >= 0 && e.code < sshcore_code_count()
        let raw = valid ? sshcore_code(rawValue: UInt32(e.code))! : .SSHCORE_E_PROTOCOL
        var message = String(cString: sshcore_code_message(e.code))
        let detail = CoreStrings.string(e.detail)
        // a detail that only repeats the code's words ("connection refused: Connection
        // refused", strerror's text of the same errno) is said once
        if !detail.isEmpty && detail.lowercased() != message.lowercased() { message += ": " + detail }
        self.init(Code(core: raw), message)
        let function = CoreStrings.string(e.lib_function)
        let libMessage = CoreStrings.string(e.lib_message)
        if !function.isEmpty || !libMessage.isEmpty {
            libssh = LibSSHDiagnostic(function: function, code: Int(e.lib_code), message: libMessage)
        }
        if e.sys_errno != 0 { systemErrno = e.sys_errno }
    }
}

/// Turns "call not allowed in this state" into the documented programmer-error
/// behaviour: a trap in debug builds naming the call and state, a thrown
/// `invalidState` in release builds.
enum SSHMisuse {
    /// Tests switch this off to check the release-build behaviour.
    static let trapsInDebugBuilds = Atomic<Bool>(true)

    static func check(_ error: SSHError, call: String) -> SSHError {
        guard error.code == .invalidState else { return error }
        var e = error
        e.message = "\(call): \(error.message)"
        if trapsInDebugBuilds.load(ordering: .relaxed) {
            assertionFailure("SSHKit misuse: \(e.message)")
        }
        return e
    }
}
