/// The server side of a SOCKS4, SOCKS4a or SOCKS5 handshake (CONNECT only, SOCKS5
/// without authentication), fed the client's bytes as they arrive.
///
/// Pure: it reads bytes and says what to send and what to do; the listener does the
/// I/O. Bad input gets the protocol's error reply where the version has one
/// (SOCKS4 `0x5B`, SOCKS5 `0x07` command not supported, `0x08` address type not
/// supported, `0xFF` no acceptable method) and then the connection is closed.
struct SOCKSHandshake {
    enum Version: Sendable, Equatable { case socks4, socks4a, socks5 }

    enum Step: Equatable {
        /// Wait for more bytes (after sending `reply`, if any).
        case needMore(reply: [UInt8])
        /// The request is complete: send `reply` (a SOCKS5 method selection when the
        /// greeting and the request came together; else empty), open a channel to
        /// host:port, then answer with `SOCKSHandshake.success` or `failure`.
        /// `leftover` are bytes the client sent after its request (early data), to
        /// pass on once the channel is open.
        case connect(host: String, port: Int, version: Version, leftover: [UInt8], reply: [UInt8])
        /// Send `reply` (possibly empty) and close: `reason` says what was wrong.
        case reject(reply: [UInt8], reason: String)
    }

    /// Longest handshake accepted (a SOCKS4 user id is the only unbounded field).
    static let maxLength = 1024

    private var buffer: [UInt8] = []
    private var greeted = false // SOCKS5: the method selection was answered

    /// Adds bytes from the client and says what to do next. After `connect` or
    /// `reject` it must not be called again.
    mutating func feed(_ bytes: some Sequence<UInt8>) -> Step {
        buffer.append(contentsOf: bytes)
        guard let version = buffer.first else { return .needMore(reply: []) }
        switch version {
        case 4: return parse4()
        case 5: return greeted ? parse5Request() : parse5Greeting()
        default: return .reject(reply: [], reason: "not a SOCKS request (first byte \(version))")
        }
    }

    // MARK: SOCKS4 / 4a

    private mutating func parse4() -> Step {
        // VN CD DSTPORT(2) DSTIP(4) USERID NUL [HOST NUL]
        guard buffer.count >= 8 else { return tooLong() ?? .needMore(reply: []) }
        let port = Int(buffer[2]) << 8 | Int(buffer[3])
        let ip = Array(buffer[4..<8])
        guard let userEnd = buffer[8...].firstIndex(of: 0) else { return tooLong() ?? .needMore(reply: []) }
        guard buffer[1] == 1 else {
            return .reject(reply: Self.reply4(granted: false), reason: "SOCKS4 command \(buffer[1]) is not CONNECT")
        }
        let host: String
        var end = userEnd + 1
        if ip[0] == 0, ip[1] == 0, ip[2] == 0, ip[3] != 0 {
            // SOCKS4a: the name follows the user id
            guard let nameEnd = buffer[end...].firstIndex(of: 0) else { return tooLong() ?? .needMore(reply: []) }
            let name = buffer[end..<nameEnd]
            guard let valid = Self.hostName(name) else {
                return .reject(reply: Self.reply4(granted: false), reason: "SOCKS4a host name is empty or not printable")
            }
            host = valid
            end = nameEnd + 1
            return finish(host: host, port: port, version: .socks4a, end: end, rejectReply: Self.reply4(granted: false))
        }
        host = ip.map(String.init).joined(separator: ".")
        return finish(host: host, port: port, version: .socks4, end: end, rejectReply: Self.reply4(granted: false))
    }

    private func finish(host: String, port: Int, version: Version, end: Int, rejectReply: [UInt8]) -> Step {
        guard port != 0 else { return .reject(reply: rejectReply, reason: "port 0 requested") }
        return .connect(host: host, port: port, version: version, leftover: Array(buffer[end...]), reply: [])
    }

    private func tooLong() -> Step? {
        guard buffer.count > Self.maxLength else { return nil }
        let reply = buffer.first == 4 ? Self.reply4(granted: false) : Self.reply5(0x01)
        return .reject(reply: reply, reason: "SOCKS request longer than \(Self.maxLength) bytes")
    }

    // MARK: SOCKS5

    private mutating func parse5Greeting() -> Step {
        // VER NMETHODS METHODS...
        guard buffer.count >= 2 else { return .needMore(reply: []) }
        let n = Int(buffer[1])
        guard buffer.count >= 2 + n else { return .needMore(reply: []) }
        guard buffer[2..<(2 + n)].contains(0x00) else {
            return .reject(reply: [5, 0xFF], reason: "the client offers no SOCKS5 method without authentication")
        }
        buffer.removeFirst(2 + n)
        greeted = true
        if buffer.isEmpty { return .needMore(reply: [5, 0x00]) }
        // the client sent its request right behind the greeting
        switch parse5Request() {
        case .needMore: return .needMore(reply: [5, 0x00])
        case .connect(let h, let p, let v, let l, _): return .connect(host: h, port: p, version: v, leftover: l, reply: [5, 0x00])
        case .reject(let reply, let reason): return .reject(reply: [5, 0x00] + reply, reason: reason)
        }
    }

    private func parse5Request() -> Step {
        // VER CMD RSV ATYP DST.ADDR DST.PORT(2)
        guard buffer.count >= 4 else { return .needMore(reply: []) }
        guard buffer[0] == 5 else { return .reject(reply: Self.reply5(0x01), reason: "SOCKS5 request version \(buffer[0])") }
        guard buffer[1] == 1 else {
            return .reject(reply: Self.reply5(0x07), reason: "SOCKS5 command \(buffer[1]) is not CONNECT")
        }
        let host: String
        let addrEnd: Int
        switch buffer[3] {
        case 1:
            addrEnd = 8
            guard buffer.count >= addrEnd + 2 else { return .needMore(reply: []) }
            host = buffer[4..<8].map(String.init).joined(separator: ".")
        case 3:
            guard buffer.count >= 5 else { return .needMore(reply: []) }
            addrEnd = 5 + Int(buffer[4])
            guard buffer.count >= addrEnd + 2 else { return .needMore(reply: []) }
            guard let name = Self.hostName(buffer[5..<addrEnd]) else {
                return .reject(reply: Self.reply5(0x01), reason: "SOCKS5 host name is empty or not printable")
            }
            host = name
        case 4:
            addrEnd = 20
            guard buffer.count >= addrEnd + 2 else { return .needMore(reply: []) }
            host = Self.ipv6(Array(buffer[4..<20]))
        default:
            return .reject(reply: Self.reply5(0x08), reason: "SOCKS5 address type \(buffer[3]) is not supported")
        }
        let port = Int(buffer[addrEnd]) << 8 | Int(buffer[addrEnd + 1])
        return finish(host: host, port: port, version: .socks5, end: addrEnd + 2, rejectReply: Self.reply5(0x01))
    }

    // MARK: replies

    /// The answer once the channel is open.
    static func success(_ version: Version) -> [UInt8] {
        version == .socks5 ? reply5(0x00) : reply4(granted: true)
    }

    /// The answer when the channel could not be opened, chosen from what the server said.
    static func failure(_ version: Version, error: SSHError) -> [UInt8] {
        guard version == .socks5 else { return reply4(granted: false) }
        let text = (error.message + " " + (error.libssh?.message ?? "")).lowercased()
        if text.contains("connection refused") { return reply5(0x05) }
        // reason 1, SSH_OPEN_ADMINISTRATIVELY_PROHIBITED: OpenSSH's text for it is only
        // "open failed" (PermitOpen, AllowTcpForwarding no); libssh writes "error (1)"
        if text.contains("administratively prohibited") || text.contains("prohibited")
            || text.contains(" error (1) ") {
            return reply5(0x02)
        }
        if text.contains("network is unreachable") { return reply5(0x03) }
        if text.contains("no route") || text.contains("unreachable") || text.contains("name or service")
            || text.contains("name resolution") || text.contains("timed out") {
            return reply5(0x04)
        }
        return reply5(0x01)
    }

    static func reply4(granted: Bool) -> [UInt8] { [0, granted ? 0x5A : 0x5B, 0, 0, 0, 0, 0, 0] }

    static func reply5(_ code: UInt8) -> [UInt8] { [5, code, 0, 1, 0, 0, 0, 0, 0, 0] }

    private static func hostName(_ bytes: ArraySlice<UInt8>) -> String? {
        guard !bytes.isEmpty, bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func ipv6(_ b: [UInt8]) -> String {
        stride(from: 0, to: 16, by: 2).map { String(Int(b[$0]) << 8 | Int(b[$0 + 1]), radix: 16) }.joined(separator: ":")
    }
}
