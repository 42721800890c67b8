import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An OpenSSH certificate (`ssh-keygen -s` makes them; PROTOCOL.certkeys): what it
/// says about itself. Read to explain a refusal before or after the server gives
/// one (an expired certificate, a principal that is not the user); the server
/// checks the CA's signature, this type does not.
public struct SSHCertificate: Sendable, Equatable {
    /// Whom a certificate speaks for: a user or a host.
    public enum Kind: Sendable, Equatable {
        /// A user certificate, for authenticating to servers (type 1 in PROTOCOL.certkeys).
        case user
        /// A host certificate, for a server's host key (type 2).
        case host
    }

    /// `ssh-ed25519-cert-v01@openssh.com` and the like.
    public var type: String
    /// Whether it is a user or a host certificate.
    public var kind: Kind
    /// The serial number the CA gave it (`ssh-keygen -z`).
    public var serial: UInt64
    /// The key identity the CA gave it (`ssh-keygen -I`).
    public var keyID: String
    /// Empty: valid for every principal.
    public var principals: [String]
    /// Seconds since 1970 (UTC); `validBefore` is `UInt64.max` for "forever".
    public var validAfter: UInt64
    /// The end of the validity period, in seconds since 1970 (UTC): valid before this
    /// moment, not at it; `UInt64.max` for "forever".
    public var validBefore: UInt64
    /// The names of the critical options (e.g. `force-command`, `source-address`),
    /// without their values.
    public var criticalOptions: [String]
    /// The names of the extensions (e.g. `permit-pty`), without their values.
    public var extensions: [String]

    /// The certificate in a `*-cert.pub` line (`type base64 [comment]`); nil when it is
    /// not one.
    public init?(line: String) {
        let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" })
        guard words.count >= 2, words[0].hasSuffix("-cert-v01@openssh.com"),
              let blob = Data(base64Encoded: String(words[1])) else { return nil }
        var r = Reader(bytes: [UInt8](blob))
        guard let type = r.string(), type == String(words[0]), r.data() != nil /* nonce */ else { return nil }
        // the public key's own fields, by type
        let fields: Int
        switch type {
        case "ssh-ed25519-cert-v01@openssh.com": fields = 1
        case "ssh-rsa-cert-v01@openssh.com", "sk-ssh-ed25519-cert-v01@openssh.com": fields = 2
        case "ssh-dss-cert-v01@openssh.com": fields = 4
        case let t where t.hasPrefix("ecdsa-sha2-"): fields = 2
        case let t where t.hasPrefix("sk-ecdsa-sha2-"): fields = 3
        default: return nil
        }
        for _ in 0..<fields { guard r.data() != nil else { return nil } }
        guard let serial = r.uint64(), let kind = r.uint32(), kind == 1 || kind == 2, let keyID = r.string(),
              let principals = r.data().flatMap(Reader.strings), let after = r.uint64(), let before = r.uint64(),
              let critical = r.data().flatMap(Reader.names), let extensions = r.data().flatMap(Reader.names)
        else { return nil }
        self.type = type
        self.kind = kind == 1 ? .user : .host
        self.serial = serial
        self.keyID = keyID
        self.principals = principals
        validAfter = after
        validBefore = before
        criticalOptions = critical
        self.extensions = extensions
    }

    /// The certificate in a file; nil when it cannot be read or is not one.
    public init?(contentsOfFile path: String) {
        guard let text = Self.readText(path) else { return nil }
        self.init(line: text)
    }

    /// A small file's text (up to 1 MiB), with `open` and `read` tried again when a
    /// signal interrupts them: a child's SIGCHLD during the read must not make a
    /// certificate look missing.
    static func readText(_ path: String) -> String? {
        var fd: Int32
        repeat { fd = open(path, O_RDONLY | O_CLOEXEC) } while fd < 0 && errno == EINTR
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while bytes.count < 1 << 20 {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { break }
            bytes += chunk[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Why a server would refuse this certificate for `user` at `date`, or nil when it
    /// looks valid (the CA's signature and the server's trust are not checked here).
    public func problem(user: String, at date: Date = Date()) -> String? {
        let now = UInt64(max(0, date.timeIntervalSince1970))
        if kind != .user { return "it is a host certificate, not a user certificate" }
        if now < validAfter { return "it is not valid before \(Self.format(validAfter))" }
        if now >= validBefore { return "it expired at \(Self.format(validBefore))" }
        if !principals.isEmpty && !principals.contains(user) {
            return "it is for the principals \(principals.joined(separator: ", ")), not for \(user)"
        }
        return nil
    }

    static func format(_ seconds: UInt64) -> String {
        let f = ISO8601DateFormatter()
        return f.string(from: Date(timeIntervalSince1970: TimeInterval(min(seconds, 253_402_300_799))))
    }

    /// SSH wire format: uint32 big-endian lengths before strings.
    private struct Reader {
        let bytes: [UInt8]
        var offset = 0

        mutating func uint32() -> UInt32? {
            guard offset + 4 <= bytes.count else { return nil }
            defer { offset += 4 }
            return bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
        }

        mutating func uint64() -> UInt64? {
            guard offset + 8 <= bytes.count else { return nil }
            defer { offset += 8 }
            return bytes[offset..<offset + 8].reduce(0) { $0 << 8 | UInt64($1) }
        }

        mutating func data() -> [UInt8]? {
            guard let n = uint32(), Int(n) <= bytes.count - offset else { return nil }
            defer { offset += Int(n) }
            return Array(bytes[offset..<offset + Int(n)])
        }

        mutating func string() -> String? { data().map { String(decoding: $0, as: UTF8.self) } }

        /// A packed list of strings (principals).
        static func strings(_ packed: [UInt8]) -> [String]? {
            var r = Reader(bytes: packed)
            var out: [String] = []
            while r.offset < packed.count {
                guard let s = r.string() else { return nil }
                out.append(s)
            }
            return out
        }

        /// Options and extensions: name, then a data string, repeated.
        static func names(_ packed: [UInt8]) -> [String]? {
            var r = Reader(bytes: packed)
            var out: [String] = []
            while r.offset < packed.count {
                guard let s = r.string(), r.data() != nil else { return nil }
                out.append(s)
            }
            return out
        }
    }
}
