import Foundation
import ServerTransport
import SSHCore
@testable import SSHKit
import Testing

func setCString<T>(_ field: inout T, _ value: String) {
    withUnsafeMutableBytes(of: &field) { dst in
        let bytes = Array(value.utf8) + [0]
        for (i, b) in bytes.enumerated() where i < dst.count { dst[i] = b }
    }
}

@Suite("Error mapping", .tags(.pure))
struct ErrorMappingTests {
    static let allCore: [sshcore_code] = (0..<sshcore_code_count()).map { sshcore_code(rawValue: UInt32($0))! }

    @Test func everyCoreErrorHasANameAMessageAndADistinctCode() {
        #expect(Self.allCore.count == 27)
        var seen = Set<SSHError.Code>()
        for c in Self.allCore where c != .SSHCORE_E_OK {
            let name = String(cString: sshcore_code_name(Int32(c.rawValue)))
            let message = String(cString: sshcore_code_message(Int32(c.rawValue)))
            #expect(name != "?" && !message.isEmpty && message != "?")
            let code = SSHError.Code(core: c)
            #expect(!seen.contains(code), "two core errors map to \(code)")
            seen.insert(code)
        }
        #expect(String(cString: sshcore_code_name(999)) == "?")
        var bogus = sshcore_error()
        bogus.code = 999
        #expect(SSHError(core: bogus).code == .protocolError)
    }

    /// A corrupted stream lost the connection: transports treat it like any other loss.
    @Test func aCorruptedStreamIsALostHostForTransports() {
        let e = SSHError(core: {
            var c = sshcore_error()
            c.code = Int32(sshcore_code.SSHCORE_E_STREAM_CORRUPTED.rawValue)
            setCString(&c.lib_message, "HMAC error")
            return c
        }())
        #expect(e.code == .streamCorrupted && e.libssh?.message == "HMAC error")
        #expect(TransportError(e).code == .hostUnreachable)
    }

    /// Too much output is a file error only when it is a file's: a read over its limit,
    /// not a process that printed more than `runProcess` keeps.
    @Test func tooMuchOutputIsAFileErrorOnlyForAFile() {
        let output = SSHError(.outputLimitExceeded, "more than 1073741824 bytes of output")
        #expect(TransportError(output).code == .other)
        #expect(TransportError(output).reason == nil)
        var read = SSHError(.outputLimitExceeded, "read /etc/big: more than 10 bytes")
        read.context = .sftp(SSHError.SFTPContext(operation: "read", path: SFTPPath("/etc/big")))
        #expect(TransportError(read).code == .fileIO)
        #expect(TransportError(read).reason == .other)
        #expect(TransportError(read).path == "/etc/big")
        #expect(TransportError(output, path: "/tmp/x").code == .fileIO)
    }

    @Test func coreErrorCarriesLibsshDiagnosticAndDetail() {
        var e = sshcore_error()
        e.code = Int32(sshcore_code.SSHCORE_E_AUTH_DENIED.rawValue)
        setCString(&e.lib_function, "ssh_userauth_password")
        setCString(&e.lib_message, "Access denied")
        setCString(&e.detail, "tried: password")
        e.lib_code = 1
        let err = SSHError(core: e)
        #expect(err.code == .authenticationFailed)
        #expect(err.message == "authentication failed: tried: password")
        #expect(err.libssh == .init(function: "ssh_userauth_password", code: 1, message: "Access denied"))
        #expect("\(err)".contains("Access denied"))
    }

    @Test func errorWithoutLibsshHasNoDiagnostic() {
        var e = sshcore_error()
        e.code = Int32(sshcore_code.SSHCORE_E_CANCELLED.rawValue)
        let err = SSHError(core: e)
        #expect(err.code == .cancelled)
        #expect(err.libssh == nil)
        #expect(err.systemErrno == nil)
    }
}
