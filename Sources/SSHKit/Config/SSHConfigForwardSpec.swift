extension SSHConfigForward {
    /// Which of ssh's options a forward argument is read as.
    public enum Kind: Sendable {
        /// `-L`: listen here, connect from the server.
        case local
        /// `-R`: the server listens, connections come here (one field: a SOCKS
        /// proxy on the server, which SSHKit does not offer).
        case remote
        /// `-D`: a SOCKS proxy here.
        case dynamic
    }

    /// An `-L`, `-R` or `-D` argument as `ssh` reads it (`[bind:]port:host:hostport`,
    /// `[bind:]port:/socket`, `/socket:host:hostport`, `[bind:]port`; IPv6 in
    /// `[…]`); nil where ssh says "Bad forwarding specification".
    /// - Parameters:
    ///   - spec: the argument after `-L`, `-R` or `-D`.
    ///   - kind: which of the three it came with.
    ///   - allowsPortZero: a local listening port of 0 (the system picks a free one),
    ///     which ssh refuses for `-L` and `-D`.
    public init?(commandLine spec: String, kind: Kind, allowsPortZero: Bool = false) {
        // as ssh: -R is a forward, else (one field) a remote SOCKS proxy
        func parse(dynamic: Bool) -> SSHConfigForward? {
            SSHConfigForwardSpec.parse(spec, dynamic: dynamic, remote: kind == .remote, environment: [:],
                                       allowsPortZero: allowsPortZero)
        }
        guard let forward = parse(dynamic: kind == .dynamic) ?? (kind == .remote ? parse(dynamic: true) : nil)
        else { return nil }
        self = forward
    }
}

/// `LocalForward`, `RemoteForward` and `DynamicForward` values, as OpenSSH's
/// `parse_forward` reads them: fields separated by `:`, a field in `[…]` taken as is
/// (an IPv6 address), `\` escaping, a field with a `/` a Unix socket path.
enum SSHConfigForwardSpec {
    /// nil when ssh would say "Bad forwarding specification".
    static func parse(_ spec0: String, dynamic: Bool, remote: Bool, environment: [String: String],
                      allowsPortZero: Bool = false) -> SSHConfigForward? {
        guard let spec = try? SSHConfigExpansion.expand(spec0.doublingPercents, tokens: [:], environment: environment)
        else { return nil }
        var b = Array(spec.utf8)[...]
        while let f = b.first, f == 0x20 || (f >= 0x09 && f <= 0x0D) { b = b.dropFirst() }
        var fields: [(arg: String, isPath: Bool)] = []
        var failed = false
        while fields.count < 4 {
            if b.isEmpty { break }
            guard let (field, rest) = Self.field(b) else { failed = true; break }
            fields.append(field)
            b = rest
        }
        if failed || !b.isEmpty { return nil }

        typealias End = SSHConfigForward.End
        var listen: End?
        var connect: End?
        var connectPort = 0
        func port(_ s: String) -> Int { SSHConfigSyntax.port(s) ?? -1 }
        switch fields.count {
        case 1:
            listen = fields[0].isPath ? .path(fields[0].arg) : .port(host: nil, port: port(fields[0].arg))
        case 2:
            if fields[0].isPath && fields[1].isPath {
                listen = .path(fields[0].arg)
                connect = .path(fields[1].arg)
            } else if fields[1].isPath {
                listen = .port(host: nil, port: port(fields[0].arg))
                connect = .path(fields[1].arg)
            } else {
                listen = .port(host: fields[0].arg, port: port(fields[1].arg))
            }
        case 3:
            if fields[0].isPath {
                listen = .path(fields[0].arg)
                connectPort = port(fields[2].arg)
                connect = .port(host: fields[1].arg, port: connectPort)
            } else if fields[2].isPath {
                listen = .port(host: fields[0].arg, port: port(fields[1].arg))
                connect = .path(fields[2].arg)
            } else {
                listen = .port(host: nil, port: port(fields[0].arg))
                connectPort = port(fields[2].arg)
                connect = .port(host: fields[1].arg, port: connectPort)
            }
        case 4:
            listen = .port(host: fields[0].arg, port: port(fields[1].arg))
            connectPort = port(fields[3].arg)
            connect = .port(host: fields[2].arg, port: connectPort)
        default:
            return nil
        }
        guard let listen else { return nil }
        if dynamic {
            guard fields.count == 1 || fields.count == 2, connect == nil else { return nil }
        } else {
            guard let connect else { return nil }
            if case .port = connect, connectPort <= 0 { return nil }
        }
        if case .port(host: _, port: let p) = listen, p < 0 || (!remote && p == 0 && !allowsPortZero) { return nil }
        return SSHConfigForward(listen: listen, connect: dynamic ? nil : connect)
    }

    /// One field and what follows its `:`; nil when malformed.
    private static func field(_ b: ArraySlice<UInt8>) -> ((arg: String, isPath: Bool), ArraySlice<UInt8>)? {
        if b.first == 0x5B {
            guard let close = b.firstIndex(of: 0x5D) else { return nil }
            let inner = b[(b.startIndex + 1)..<close]
            var rest = b[(close + 1)...]
            if let f = rest.first {
                guard f == 0x3A else { return nil }
                rest = rest.dropFirst()
            }
            return ((String(decoding: inner, as: UTF8.self), inner.contains(0x2F)), rest)
        }
        var out: [UInt8] = []
        var isPath = false
        var i = b.startIndex
        while i < b.endIndex {
            let c = b[i]
            if c == 0x5C {
                i += 1
                guard i < b.endIndex else { return nil }
                // the escaped byte is taken as it is: neither a separator nor a path's `/`
                out.append(b[i])
            } else if c == 0x2F {
                isPath = true
                out.append(c)
            } else if c == 0x3A {
                return ((String(decoding: out, as: UTF8.self), isPath), b[(i + 1)...])
            } else {
                out.append(c)
            }
            i += 1
        }
        return ((String(decoding: out, as: UTF8.self), isPath), b[b.endIndex...])
    }
}

extension String {
    /// `%` doubled, so that an expansion with no tokens leaves it alone.
    var doublingPercents: String {
        String(decoding: utf8.flatMap { $0 == 0x25 ? [0x25, 0x25] : [$0] }, as: UTF8.self)
    }
}
