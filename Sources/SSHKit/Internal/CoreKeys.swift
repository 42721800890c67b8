internal import SSHCore

enum CoreKeys {
    /// The SHA256 fingerprint of a public key, computed by libssh; nil if the
    /// key does not parse.
    static func fingerprint(type: String, base64: String) -> String? {
        var out = [CChar](repeating: 0, count: 128)
        let rc = sshcore_key_fingerprint_sha256(type, base64, &out, out.count)
        guard rc == Int32(sshcore_code.SSHCORE_E_OK.rawValue) else { return nil }
        return String(decoding: out.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

extension CoreKeys {
    /// HMAC-SHA1 (hashed known_hosts entries), computed by the core with OpenSSL.
    static func hmacSHA1(key: [UInt8], data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 20)
        // a non-nil pointer even for empty input
        let k = key.isEmpty ? [0] : key, d = data.isEmpty ? [0] : data
        let rc = sshcore_hmac_sha1(k, key.count, d, data.count, &out)
        precondition(rc == Int32(sshcore_code.SSHCORE_E_OK.rawValue), "HMAC-SHA1 failed")
        return out
    }
}

/// SHA-1 and SHA-256, computed by the core with OpenSSL: the package's one implementation
/// of each (OpenSSH's `%C` token, the agents' session UUIDs).
package enum CoreDigest {
    package static func sha1(_ data: [UInt8]) -> [UInt8] { digest(data, sha256: false) }
    package static func sha256(_ data: [UInt8]) -> [UInt8] { digest(data, sha256: true) }

    private static func digest(_ data: [UInt8], sha256: Bool) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: sha256 ? 32 : 20)
        // a non-nil pointer even for empty input
        let d = data.isEmpty ? [0] : data
        let rc = sshcore_digest(sha256 ? 1 : 0, d, data.count, &out)
        precondition(rc == Int32(sshcore_code.SSHCORE_E_OK.rawValue), "the digest failed")
        return out
    }
}

/// Switches of the C core that only tests use.
@_spi(Testing) public enum SSHCoreTesting {
    /// Offers every Ed25519 user certificate through the core's in-process agent, as
    /// the core must on libssh 0.11.0–0.11.3, so that this path runs on any libssh.
    /// Affects keys loaded after the call.
    public static func offerEd25519CertificatesThroughAgent(_ on: Bool) {
        sshcore_testing_force_cert_agent(on ? 1 : 0)
    }

    /// Calls `probe` in every connection's worker at teardown with libssh's fd number,
    /// once libssh is done with it and before the worker decides whether that fd is
    /// still its own to close; nil calls nothing. Only for tests that run alone: a
    /// probe may open a file at that number, as another thread might.
    public static func setTeardownProbe(_ probe: (@convention(c) (Int32) -> Void)?) {
        sshcore_testing_set_teardown_probe(probe)
    }
}
