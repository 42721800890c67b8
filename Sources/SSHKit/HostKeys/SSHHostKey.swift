
/// A server's public host key.
///
/// Two keys are the same key when their type and blob are equal; the SHA256
/// fingerprint is for people and for pinning.
public struct SSHHostKey: Sendable, Hashable, CustomStringConvertible {
    /// The key type name, e.g. `ssh-ed25519`, `ecdsa-sha2-nistp256`, `ssh-rsa`.
    public let type: String
    /// The public key blob, base64 (as in `known_hosts` and `.pub` files).
    public let base64: String
    /// `SHA256:` followed by unpadded base64, as `ssh-keygen -l` prints it.
    public let sha256Fingerprint: String

    init(type: String, base64: String, sha256Fingerprint: String) {
        self.type = type
        self.base64 = base64
        self.sha256Fingerprint = sha256Fingerprint
    }

    /// Parses a key in OpenSSH public key format: `type base64 [comment]`.
    /// Throws `invalidArgument` when the text is not a public key libssh can read.
    public init(openSSH line: String) throws(SSHError) {
        let parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard parts.count >= 2 else {
            throw SSHError(.invalidArgument, "not an OpenSSH public key: expected 'type base64 [comment]'")
        }
        let type = String(parts[0]), blob = String(parts[1])
        guard let fp = CoreKeys.fingerprint(type: type, base64: blob) else {
            throw SSHError(.invalidArgument, "not a valid \(type) public key")
        }
        self.init(type: type, base64: blob, sha256Fingerprint: fp)
    }

    /// The key as one line of an OpenSSH `.pub` / `authorized_keys` file.
    public var openSSHString: String { "\(type) \(base64)" }

    public var description: String { "\(type) \(sha256Fingerprint)" }

    /// Equal when type and blob are equal.
    public static func == (a: SSHHostKey, b: SSHHostKey) -> Bool {
        a.type == b.type && a.base64 == b.base64
    }

    public func hash(into h: inout Hasher) {
        h.combine(type)
        h.combine(base64)
    }

    /// Normalizes a fingerprint for comparison: accepts `SHA256:xxx` or bare
    /// `xxx`, with or without base64 padding. Returns nil for other hash kinds.
    static func normalizedSHA256(_ fp: String) -> String? {
        var s = Substring(fp.trimmingWhitespace())
        if s.hasPrefix("SHA256:") { s = s.dropFirst(7) } else if s.contains(":") { return nil }
        while s.hasSuffix("=") { s = s.dropLast() }
        guard !s.isEmpty else { return nil }
        return "SHA256:" + s
    }
}

extension String {
    func trimmingWhitespace() -> String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s = s.dropFirst() }
        while let l = s.last, l.isWhitespace { s = s.dropLast() }
        return String(s)
    }
}
