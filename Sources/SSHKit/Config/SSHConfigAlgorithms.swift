/// The algorithm lists of OpenSSH 9.2p1 as Debian 12 builds it (OpenSSL 3, no XMSS),
/// and its rules for `Ciphers`, `MACs`, `KexAlgorithms`, `HostKeyAlgorithms` and
/// `PubkeyAcceptedAlgorithms` values: a list replaces the default, `+list` appends,
/// `-list` removes (patterns allowed), `^list` puts first.
///
/// These are what `ssh` would offer. What SSHKit can offer is libssh's subset
/// (`SSHHostConfig.algorithms` keeps only those).
enum SSHConfigAlgorithms {
    enum Kind: Sendable {
        case cipher, mac, kex, hostKey, pubkey

        var keyword: String {
            switch self {
            case .cipher: "ciphers"
            case .mac: "macs"
            case .kex: "kexalgorithms"
            case .hostKey: "hostkeyalgorithms"
            case .pubkey: "pubkeyacceptedalgorithms"
            }
        }

        /// OpenSSH's default list (`myproposal.h`; Debian puts sntrup761x25519-sha512 first).
        var defaults: [String] {
            switch self {
            case .cipher:
                ["chacha20-poly1305@openssh.com", "aes128-ctr", "aes192-ctr", "aes256-ctr",
                 "aes128-gcm@openssh.com", "aes256-gcm@openssh.com"]
            case .mac:
                ["umac-64-etm@openssh.com", "umac-128-etm@openssh.com", "hmac-sha2-256-etm@openssh.com",
                 "hmac-sha2-512-etm@openssh.com", "hmac-sha1-etm@openssh.com", "umac-64@openssh.com",
                 "umac-128@openssh.com", "hmac-sha2-256", "hmac-sha2-512", "hmac-sha1"]
            case .kex:
                ["sntrup761x25519-sha512", "sntrup761x25519-sha512@openssh.com", "curve25519-sha256",
                 "curve25519-sha256@libssh.org", "ecdh-sha2-nistp256", "ecdh-sha2-nistp384", "ecdh-sha2-nistp521",
                 "diffie-hellman-group-exchange-sha256", "diffie-hellman-group16-sha512",
                 "diffie-hellman-group18-sha512", "diffie-hellman-group14-sha256"]
            case .hostKey, .pubkey:
                ["ssh-ed25519-cert-v01@openssh.com", "ecdsa-sha2-nistp256-cert-v01@openssh.com",
                 "ecdsa-sha2-nistp384-cert-v01@openssh.com", "ecdsa-sha2-nistp521-cert-v01@openssh.com",
                 "sk-ssh-ed25519-cert-v01@openssh.com", "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com",
                 "rsa-sha2-512-cert-v01@openssh.com", "rsa-sha2-256-cert-v01@openssh.com", "ssh-ed25519",
                 "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "sk-ssh-ed25519@openssh.com",
                 "sk-ecdsa-sha2-nistp256@openssh.com", "rsa-sha2-512", "rsa-sha2-256"]
            }
        }

        /// Everything this OpenSSH knows (`ssh -Q cipher|mac|kex|key-sig`), in its order.
        var all: [String] {
            switch self {
            case .cipher:
                ["3des-cbc", "aes128-cbc", "aes192-cbc", "aes256-cbc", "aes128-ctr", "aes192-ctr", "aes256-ctr",
                 "aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com"]
            case .mac:
                ["hmac-sha1", "hmac-sha1-96", "hmac-sha2-256", "hmac-sha2-512", "hmac-md5", "hmac-md5-96",
                 "umac-64@openssh.com", "umac-128@openssh.com", "hmac-sha1-etm@openssh.com",
                 "hmac-sha1-96-etm@openssh.com", "hmac-sha2-256-etm@openssh.com", "hmac-sha2-512-etm@openssh.com",
                 "hmac-md5-etm@openssh.com", "hmac-md5-96-etm@openssh.com", "umac-64-etm@openssh.com",
                 "umac-128-etm@openssh.com"]
            case .kex:
                ["diffie-hellman-group1-sha1", "diffie-hellman-group14-sha1", "diffie-hellman-group14-sha256",
                 "diffie-hellman-group16-sha512", "diffie-hellman-group18-sha512",
                 "diffie-hellman-group-exchange-sha1", "diffie-hellman-group-exchange-sha256", "ecdh-sha2-nistp256",
                 "ecdh-sha2-nistp384", "ecdh-sha2-nistp521", "curve25519-sha256", "curve25519-sha256@libssh.org",
                 "sntrup761x25519-sha512", "sntrup761x25519-sha512@openssh.com"]
            case .hostKey, .pubkey:
                ["ssh-ed25519", "ssh-ed25519-cert-v01@openssh.com", "sk-ssh-ed25519@openssh.com",
                 "sk-ssh-ed25519-cert-v01@openssh.com", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp256-cert-v01@openssh.com",
                 "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp384-cert-v01@openssh.com", "ecdsa-sha2-nistp521",
                 "ecdsa-sha2-nistp521-cert-v01@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com",
                 "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com", "webauthn-sk-ecdsa-sha2-nistp256@openssh.com",
                 "ssh-dss", "ssh-dss-cert-v01@openssh.com", "ssh-rsa", "ssh-rsa-cert-v01@openssh.com",
                 "rsa-sha2-256", "rsa-sha2-256-cert-v01@openssh.com", "rsa-sha2-512",
                 "rsa-sha2-512-cert-v01@openssh.com"]
            }
        }

        /// Key and signature lists take patterns; the others only exact names.
        var allowsPatterns: Bool { self == .hostKey || self == .pubkey }

        /// OpenSSH's complaint about a bad value.
        func badValue(_ value: String) -> String {
            switch self {
            case .cipher: "Bad SSH2 cipher spec '\(value)'."
            case .mac: "Bad SSH2 MAC spec '\(value)'."
            case .kex: "Bad SSH2 KexAlgorithms '\(value)'."
            case .hostKey, .pubkey: "Bad key types '\(value)'."
            }
        }
    }

    /// Checks a value as `ssh` does when it reads the line (in any block, active or
    /// not); nil when valid, else OpenSSH's message. A `-` list is not checked.
    static func validate(_ value: String, _ kind: Kind) -> String? {
        var v = Substring(value)
        if v.first == "-" { return nil }
        if v.first == "+" || v.first == "^" { v = v.dropFirst() }
        if v.isEmpty { return kind.badValue(value) }
        let all = kind.all
        for item in v.split(separator: ",", omittingEmptySubsequences: false) {
            // OpenSSH stops at the first empty item
            if item.isEmpty { break }
            if all.contains(String(item)) { continue }
            guard kind.allowsPatterns else { return kind.badValue(value) }
            var pattern = String(item)
            if pattern.hasPrefix("!") { pattern.removeFirst() }
            if !all.contains(where: { SSHConfigSyntax.match($0, pattern) }) { return kind.badValue(value) }
        }
        return nil
    }

    /// The list `ssh` ends up with (`kex_assemble_names`); nil when nothing is left of
    /// an explicit list, which ssh refuses.
    static func assemble(_ value: String?, _ kind: Kind) -> [String]? {
        let all = kind.all
        let defaults = kind.defaults.filter { all.contains($0) }
        guard let value, !value.isEmpty else { return defaults }
        var list: [String]
        switch value.first {
        case "-":
            let patterns = String(value.dropFirst())
            return defaults.filter { SSHConfigSyntax.matchList($0, patterns, lowercasePatterns: false) != 1 }
        case "+":
            list = concatenate(defaults, items(value.dropFirst()))
        case "^":
            list = concatenate(items(value.dropFirst()), defaults)
        default:
            list = items(Substring(value))
        }
        var result: [String] = []
        for pattern in list {
            if pattern.hasPrefix("!") { return nil }
            result = concatenate(result, all.filter { SSHConfigSyntax.match($0, pattern) })
        }
        return result.isEmpty ? nil : result
    }

    private static func items(_ s: Substring) -> [String] {
        s.split(separator: ",", omittingEmptySubsequences: true).map(String.init)
    }

    /// `a` followed by what of `b` is not in it yet.
    private static func concatenate(_ a: [String], _ b: [String]) -> [String] {
        var out = a
        for x in b where !out.contains(x) { out.append(x) }
        return out
    }
}
