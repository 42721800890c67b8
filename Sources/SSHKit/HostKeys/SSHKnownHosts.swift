import Foundation

/// The OpenSSH `known_hosts` format: parsing, host matching and formatting.
///
/// A line is `[@marker] hosts keytype base64 [comment]`. `hosts` is either a
/// comma-separated list of patterns (`*` and `?` wildcards, `!` negation,
/// `[host]:port` for ports other than 22) or one hashed name `|1|salt|hash`
/// (HMAC-SHA1 of the name under the salt). Markers: `@revoked` (the key must be
/// refused) and `@cert-authority` (a CA key, not a host key). Lines that do not
/// parse are skipped, as OpenSSH skips them, and reported in `skipped`.
public struct SSHKnownHostsFile: Sendable {
    /// The `@` marker that starts a line, if any.
    public enum Marker: Sendable, Equatable {
        /// No marker: a trusted host key.
        case none
        /// `@revoked`: the key must be refused for the matching hosts.
        case revoked
        /// `@cert-authority`: a CA key, not a host key; it never makes a key trusted
        /// (see `SSHKnownHostKeys.certificateAuthorities`).
        case certAuthority
    }

    /// The hosts field of a line.
    public enum Hosts: Sendable, Equatable {
        /// Comma-separated patterns as written.
        case patterns([String])
        /// `|1|salt|hash`, salt and hash decoded.
        case hashed(salt: [UInt8], hash: [UInt8])
    }

    /// One line that parsed.
    public struct Entry: Sendable, Equatable {
        /// The line's marker; `.none` for a plain entry.
        public var marker: Marker
        /// The hosts the line applies to.
        public var hosts: Hosts
        /// The key type as written (`ssh-ed25519`, …).
        public var keyType: String
        /// The key blob, base64, as written.
        public var keyBase64: String
        /// The words after the key, joined by single spaces; empty when none.
        public var comment: String
        /// 1-based line number in the file it was read from.
        public var line: Int

        /// The key, if libssh can read it (unknown or broken keys give nil).
        public var key: SSHHostKey? {
            guard let fp = CoreKeys.fingerprint(type: keyType, base64: keyBase64) else { return nil }
            return SSHHostKey(type: keyType, base64: keyBase64, sha256Fingerprint: fp)
        }
    }

    /// The lines that parsed, in file order.
    public var entries: [Entry]
    /// Line numbers of lines that were neither entries, comments nor blank.
    public var skipped: [Int]

    /// The name OpenSSH matches for a host: `host` on port 22, `[host]:port` otherwise,
    /// lowercased.
    public static func lookupName(host: String, port: Int) -> String {
        let h = host.lowercased()
        return port == 22 ? h : "[\(h)]:\(port)"
    }

    /// The lines of `text`, split at each "\n" with a "\r" before it kept in the line.
    /// (Split by Characters, a CRLF file would be one line: "\r\n" is one Character.)
    static func lines(_ text: String) -> [Substring] {
        text.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false).map { Substring($0) }
    }

    /// Parses file contents. Never throws: bad lines are skipped.
    public static func parse(_ text: String) -> SSHKnownHostsFile {
        var entries: [Entry] = []
        var skipped: [Int] = []
        var number = 0
        for raw in lines(text) {
            number += 1
            var line = raw
            if line.hasSuffix("\r") { line = line.dropLast() }
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            if let e = parseLine(trimmed, number: number) { entries.append(e) } else { skipped.append(number) }
        }
        return SSHKnownHostsFile(entries: entries, skipped: skipped)
    }

    static func parseLine(_ line: Substring, number: Int) -> Entry? {
        var fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        var marker = Marker.none
        if let first = fields.first, first.hasPrefix("@") {
            switch first {
            case "@revoked": marker = .revoked
            case "@cert-authority": marker = .certAuthority
            default: return nil
            }
            fields.removeFirst()
        }
        guard fields.count >= 3 else { return nil }
        let hostField = fields[0], type = fields[1], blob = fields[2]
        guard !type.isEmpty, blob.utf8.allSatisfy(Self.isBase64Byte), Data(base64Encoded: blob) != nil else { return nil }
        let hosts: Hosts
        if hostField.hasPrefix("|1|") {
            let parts = hostField.split(separator: "|", omittingEmptySubsequences: false)
            guard parts.count == 4, let salt = Data(base64Encoded: String(parts[2])),
                  let hash = Data(base64Encoded: String(parts[3])), salt.count == 20, hash.count == 20
            else { return nil }
            hosts = .hashed(salt: Array(salt), hash: Array(hash))
        } else {
            let patterns = hostField.split(separator: ",").map(String.init)
            guard !patterns.isEmpty, !patterns.contains(where: { $0.isEmpty || $0 == "!" }) else { return nil }
            hosts = .patterns(patterns)
        }
        return Entry(marker: marker, hosts: hosts, keyType: type, keyBase64: blob,
                     comment: fields.dropFirst(3).joined(separator: " "), line: number)
    }

    private static func isBase64Byte(_ b: UInt8) -> Bool {
        (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39)
            || b == UInt8(ascii: "+") || b == UInt8(ascii: "/") || b == UInt8(ascii: "=")
    }

    /// Whether the entry's hosts match `name` (from `lookupName`), with OpenSSH's
    /// rules: a matching negated pattern excludes the line whatever else matches.
    public static func matches(_ hosts: Hosts, name: String) -> Bool {
        switch hosts {
        case .hashed(let salt, let hash):
            return CoreKeys.hmacSHA1(key: salt, data: Array(name.utf8)) == hash
        case .patterns(let patterns):
            var positive = false
            for p in patterns {
                if p.hasPrefix("!") {
                    if glob(Array(p.dropFirst().lowercased().utf8), Array(name.utf8)) { return false }
                } else if glob(Array(p.lowercased().utf8), Array(name.utf8)) {
                    positive = true
                }
            }
            return positive
        }
    }

    /// `*` matches any run of bytes, `?` one byte (OpenSSH's match_pattern).
    static func glob(_ p: [UInt8], _ s: [UInt8]) -> Bool {
        var pi = 0, si = 0, star = -1, mark = 0
        while si < s.count {
            if pi < p.count && (p[pi] == UInt8(ascii: "?") || p[pi] == s[si]) {
                pi += 1; si += 1
            } else if pi < p.count && p[pi] == UInt8(ascii: "*") {
                star = pi; mark = si; pi += 1
            } else if star >= 0 {
                pi = star + 1; mark += 1; si = mark
            } else {
                return false
            }
        }
        while pi < p.count && p[pi] == UInt8(ascii: "*") { pi += 1 }
        return pi == p.count
    }

    /// What the file says about one host: trusted keys, revoked keys, and the
    /// certificate authorities of `@cert-authority` lines (not host keys themselves).
    public func lookup(host: String, port: Int) -> SSHKnownHostKeys {
        let name = Self.lookupName(host: host, port: port)
        var result = SSHKnownHostKeys()
        for e in entries where Self.matches(e.hosts, name: name) {
            guard let key = e.key else { continue }
            switch e.marker {
            case .none: if !result.keys.contains(key) { result.keys.append(key) }
            case .revoked: result.revoked.append(key)
            case .certAuthority:
                if !result.certificateAuthorities.contains(key) { result.certificateAuthorities.append(key) }
            }
        }
        return result
    }

    /// One line for `key` at `host:port`, plain or hashed (with a fresh random salt).
    public static func line(for key: SSHHostKey, host: String, port: Int, hashed: Bool) -> String {
        let name = lookupName(host: host, port: port)
        guard hashed else { return "\(name) \(key.type) \(key.base64)" }
        var rng = SystemRandomNumberGenerator()
        let salt = (0..<20).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let hash = CoreKeys.hmacSHA1(key: salt, data: Array(name.utf8))
        return "|1|\(Data(salt).base64EncodedString())|\(Data(hash).base64EncodedString()) \(key.type) \(key.base64)"
    }
}
