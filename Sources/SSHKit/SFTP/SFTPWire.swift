// SFTP version 3 on the wire (draft-ietf-secsh-filexfer-02, plus OpenSSH's
// extensions): packet types, flags, and a writer and a reader for packets.

enum SFTPType {
    static let initialize: UInt8 = 1
    static let version: UInt8 = 2
    static let open: UInt8 = 3
    static let close: UInt8 = 4
    static let read: UInt8 = 5
    static let write: UInt8 = 6
    static let lstat: UInt8 = 7
    static let fstat: UInt8 = 8
    static let setstat: UInt8 = 9
    static let fsetstat: UInt8 = 10
    static let opendir: UInt8 = 11
    static let readdir: UInt8 = 12
    static let remove: UInt8 = 13
    static let mkdir: UInt8 = 14
    static let rmdir: UInt8 = 15
    static let realpath: UInt8 = 16
    static let stat: UInt8 = 17
    static let rename: UInt8 = 18
    static let readlink: UInt8 = 19
    static let symlink: UInt8 = 20
    static let status: UInt8 = 101
    static let handle: UInt8 = 102
    static let data: UInt8 = 103
    static let name: UInt8 = 104
    static let attrs: UInt8 = 105
    static let extended: UInt8 = 200
    static let extendedReply: UInt8 = 201
}

enum SFTPStatusCode {
    static let ok: UInt32 = 0
    static let eof: UInt32 = 1
    static let noSuchFile: UInt32 = 2
    static let permissionDenied: UInt32 = 3
    static let failure: UInt32 = 4
    static let badMessage: UInt32 = 5
    static let noConnection: UInt32 = 6
    static let connectionLost: UInt32 = 7
    static let unsupported: UInt32 = 8
}

enum SFTPAttrFlag {
    static let size: UInt32 = 0x1
    static let uidgid: UInt32 = 0x2
    static let permissions: UInt32 = 0x4
    static let acmodtime: UInt32 = 0x8
    static let extended: UInt32 = 0x8000_0000
}

/// Builds one packet: length, type, then fields; `finish()` fills in the length.
struct SFTPWriter {
    private(set) var bytes: [UInt8]

    init(type: UInt8, id: UInt32?, capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity + 9)
        bytes.append(contentsOf: [0, 0, 0, 0, type])
        if let id { put(id) }
    }

    mutating func put(_ v: UInt32) {
        bytes.append(UInt8(truncatingIfNeeded: v >> 24))
        bytes.append(UInt8(truncatingIfNeeded: v >> 16))
        bytes.append(UInt8(truncatingIfNeeded: v >> 8))
        bytes.append(UInt8(truncatingIfNeeded: v))
    }

    mutating func put(_ v: UInt64) {
        put(UInt32(truncatingIfNeeded: v >> 32))
        put(UInt32(truncatingIfNeeded: v))
    }

    mutating func put<C: Collection<UInt8>>(string s: C) {
        put(UInt32(s.count))
        bytes.append(contentsOf: s)
    }

    mutating func put(string s: String) { put(string: Array(s.utf8)) }

    mutating func put(_ a: SFTPFileAttributes) {
        var flags: UInt32 = 0
        if a.size != nil { flags |= SFTPAttrFlag.size }
        if a.uid != nil || a.gid != nil { flags |= SFTPAttrFlag.uidgid }
        if a.permissions != nil { flags |= SFTPAttrFlag.permissions }
        if a.accessTime != nil || a.modificationTime != nil { flags |= SFTPAttrFlag.acmodtime }
        if !a.extended.isEmpty { flags |= SFTPAttrFlag.extended }
        put(flags)
        if let size = a.size { put(size) }
        if flags & SFTPAttrFlag.uidgid != 0 {
            // both or neither on the wire: an unset one is sent as "unchanged" (UInt32.max)
            put(a.uid ?? UInt32.max)
            put(a.gid ?? UInt32.max)
        }
        if let p = a.permissions { put(p) }
        if flags & SFTPAttrFlag.acmodtime != 0 {
            put(a.accessTime ?? a.modificationTime ?? 0)
            put(a.modificationTime ?? a.accessTime ?? 0)
        }
        if !a.extended.isEmpty {
            put(UInt32(a.extended.count))
            for e in a.extended {
                put(string: e.name)
                put(string: e.data)
            }
        }
    }

    /// The finished packet, its length filled in.
    mutating func finish() -> [UInt8] {
        let n = UInt32(bytes.count - 4)
        bytes[0] = UInt8(truncatingIfNeeded: n >> 24)
        bytes[1] = UInt8(truncatingIfNeeded: n >> 16)
        bytes[2] = UInt8(truncatingIfNeeded: n >> 8)
        bytes[3] = UInt8(truncatingIfNeeded: n)
        return bytes
    }
}

/// Reads the fields of one packet's payload; running past its end is a protocol error.
struct SFTPReader: Sendable {
    let bytes: [UInt8]
    private(set) var offset: Int
    let end: Int

    init(_ bytes: [UInt8], from start: Int = 0, to end: Int? = nil) {
        self.bytes = bytes
        self.offset = start
        self.end = end ?? bytes.count
    }

    var remaining: Int { end - offset }

    private func need(_ n: Int) throws(SSHError) {
        if n < 0 || n > end - offset {
            throw SSHError(.sftpProtocolError, "truncated SFTP packet")
        }
    }

    mutating func byte() throws(SSHError) -> UInt8 {
        try need(1)
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func uint32() throws(SSHError) -> UInt32 {
        try need(4)
        defer { offset += 4 }
        return UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16
            | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }

    mutating func uint64() throws(SSHError) -> UInt64 {
        let hi = try uint32()
        let lo = try uint32()
        return UInt64(hi) << 32 | UInt64(lo)
    }

    /// A length-prefixed string's bytes.
    mutating func string() throws(SSHError) -> [UInt8] {
        let n = Int(try uint32())
        try need(n)
        defer { offset += n }
        return Array(bytes[offset..<offset + n])
    }

    mutating func text() throws(SSHError) -> String {
        String(decoding: try string(), as: UTF8.self)
    }

    mutating func attributes() throws(SSHError) -> SFTPFileAttributes {
        let flags = try uint32()
        var a = SFTPFileAttributes()
        if flags & SFTPAttrFlag.size != 0 { a.size = try uint64() }
        if flags & SFTPAttrFlag.uidgid != 0 {
            a.uid = try uint32()
            a.gid = try uint32()
        }
        if flags & SFTPAttrFlag.permissions != 0 { a.permissions = try uint32() }
        if flags & SFTPAttrFlag.acmodtime != 0 {
            a.accessTime = try uint32()
            a.modificationTime = try uint32()
        }
        if flags & SFTPAttrFlag.extended != 0 {
            let count = try uint32()
            guard count <= 1024 else { throw SSHError(.sftpProtocolError, "\(count) extended attributes") }
            for _ in 0..<count {
                let name = try text()
                a.extended.append(SFTPExtensionPair(name: name, data: try string()))
            }
        }
        return a
    }
}
