import SSHCore

enum CoreKeys {
    /// The SHA256 fingerprint of a public key, computed by libssh; nil if the
    /// key does not parse.
    static func fingerprint(type: String, base64: String) -> String? {
        var out = [CChar](repeating: 0, count: 128)
        let rc = sshcore_key_fingerprint_sha256(type, base64, &out, out.count)
        guard rc == Int32(sshcore_err.SSHCORE_E_OK.rawValue) else { return nil }
        return String(decoding: out.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
