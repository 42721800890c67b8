#if canImport(Glibc)
import Glibc
#endif

/// `%` tokens, `${VAR}` and `~`, expanded where and as OpenSSH 9.2 expands them.
enum SSHConfigExpansion {
    enum Failure: Error, Equatable {
        case unknownToken(Character)
        case trailingPercent
        case unsetVariable(String)
        case unclosedVariable
        case emptyVariable
        case unknownUser(String)
    }

    /// `%x` replaced from `tokens` (`%%` is `%`); with `environment`, `${NAME}` too.
    /// Single pass: what a token expands to is not scanned again.
    static func expand(_ s: String, tokens: [Character: String], environment: [String: String]? = nil)
        throws(Failure) -> String
    {
        let b = Array(s.utf8)
        var out: [UInt8] = []
        var i = 0
        while i < b.count {
            if let environment, b[i] == 0x24, i + 1 < b.count, b[i + 1] == 0x7B {
                guard let close = b[(i + 2)...].firstIndex(of: 0x7D) else { throw .unclosedVariable }
                let name = String(decoding: b[(i + 2)..<close], as: UTF8.self)
                if name.isEmpty { throw .emptyVariable }
                guard let value = environment[name] else { throw .unsetVariable(name) }
                out += Array(value.utf8)
                i = close + 1
                continue
            }
            if b[i] == 0x25 {
                guard i + 1 < b.count else { throw .trailingPercent }
                let key = b[i + 1]
                if key == 0x25 {
                    out.append(0x25)
                } else {
                    let c = Character(Unicode.Scalar(key))
                    guard let value = tokens[c] else { throw .unknownToken(c) }
                    out += Array(value.utf8)
                }
                i += 2
                continue
            }
            out.append(b[i])
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `~` and `~user` at the start, from the password database (OpenSSH's
    /// `tilde_expand_filename`): `~` is `home + "/"`, `~/x` is `home/x`.
    static func tilde(_ s: String, home: String) throws(Failure) -> String {
        guard s.utf8.first == 0x7E else { return s }
        let rest = s.utf8.dropFirst()
        let slash = rest.firstIndex(of: 0x2F)
        let user = String(decoding: rest[..<(slash ?? rest.endIndex)], as: UTF8.self)
        let tail = slash.map { String(decoding: rest[rest.index(after: $0)...], as: UTF8.self) } ?? ""
        var dir = home
        if !user.isEmpty {
            guard let pw = getpwnam(user), let d = pw.pointee.pw_dir else { throw .unknownUser(user) }
            dir = String(cString: d)
        }
        if dir.hasSuffix("/") { dir.removeLast() }
        return dir + "/" + tail
    }

    /// What a failure says, in OpenSSH's words.
    static func message(_ f: Failure, in value: String) -> String {
        switch f {
        case .unknownToken(let c): "unknown key %\(c) in \"\(value)\""
        case .trailingPercent: "invalid format (a trailing %) in \"\(value)\""
        case .unsetVariable(let name): "env var ${\(name)} has no value"
        case .unclosedVariable: "missing closing '}' in \"\(value)\""
        case .emptyVariable: "zero-length environment variable in \"\(value)\""
        case .unknownUser(let u): "tilde_expand: No such user \(u)"
        }
    }

    /// Lowercase hex SHA-1 (ControlPath's `%C`: the local host name, host, port and
    /// user, concatenated).
    static func sha1Hex(_ s: String) -> String {
        CoreDigest.sha1(Array(s.utf8)).map { b in
            let h = String(b, radix: 16)
            return h.count == 1 ? "0" + h : h
        }.joined()
    }

    /// A numeric address in the form `getnameinfo` prints it (`127.1` is `127.0.0.1`),
    /// or nil when `host` is not one. Names are never looked up.
    static func canonicalAddress(_ host: String) -> String? {
        var hints = addrinfo()
        hints.ai_flags = AI_NUMERICHOST
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var res: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &res) == 0, let ai = res else { return nil }
        defer { freeaddrinfo(res) }
        var buf = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        guard getnameinfo(ai.pointee.ai_addr, ai.pointee.ai_addrlen, &buf, socklen_t(buf.count), nil, 0, NI_NUMERICHOST) == 0
        else { return nil }
        return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// OpenSSH's `is_addr` (without the lookup): contains `%` or `:`, or only digits
    /// and dots, or parses as a numeric address.
    static func isAddress(_ host: String) -> Bool {
        if host.utf8.contains(0x25) || host.utf8.contains(0x3A) { return true }
        if !host.isEmpty && host.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E }) { return true }
        return canonicalAddress(host) != nil
    }
}
