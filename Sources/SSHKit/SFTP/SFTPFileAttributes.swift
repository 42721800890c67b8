/// File attributes as SFTP version 3 carries them; a field is nil when the server did
/// not send it (or, when setting, when it should stay as it is).
public struct SFTPFileAttributes: Sendable, Hashable {
    public var size: UInt64?
    public var uid: UInt32?
    public var gid: UInt32?
    /// The full `st_mode`: file type bits and permission bits.
    public var permissions: UInt32?
    /// Seconds since 1970 (SFTP v3 carries whole seconds, 32 bits).
    public var accessTime: UInt32?
    public var modificationTime: UInt32?
    /// Vendor attributes (name, data).
    public var extended: [SFTPExtensionPair]

    public init(size: UInt64? = nil, uid: UInt32? = nil, gid: UInt32? = nil, permissions: UInt32? = nil,
                accessTime: UInt32? = nil, modificationTime: UInt32? = nil, extended: [SFTPExtensionPair] = []) {
        self.size = size
        self.uid = uid
        self.gid = gid
        self.permissions = permissions
        self.accessTime = accessTime
        self.modificationTime = modificationTime
        self.extended = extended
    }

    /// The kind of file, from the type bits of `permissions` (`.unknown` without them).
    public var kind: SFTPFileKind {
        guard let p = permissions else { return .unknown }
        switch p & 0o170000 {
        case 0o100000: return .regular
        case 0o040000: return .directory
        case 0o120000: return .symlink
        case 0o020000: return .characterDevice
        case 0o060000: return .blockDevice
        case 0o010000: return .fifo
        case 0o140000: return .socket
        default: return .unknown
        }
    }

    /// The permission bits only (`permissions & 0o7777`).
    public var mode: UInt32? { permissions.map { $0 & 0o7777 } }
}

public enum SFTPFileKind: Sendable, Hashable {
    case regular, directory, symlink, characterDevice, blockDevice, fifo, socket, unknown
}

/// A (name, data) pair: an extension in the server's version reply, or a vendor attribute.
public struct SFTPExtensionPair: Sendable, Hashable {
    public var name: String
    public var data: [UInt8]

    public init(name: String, data: [UInt8]) {
        self.name = name
        self.data = data
    }
}

/// One entry of a directory listing.
public struct SFTPDirectoryEntry: Sendable, Hashable {
    /// The name within the directory, as the server's bytes.
    public var name: SFTPPath
    /// The server's `ls -l` style line (informational; its format is not specified).
    public var longName: String
    public var attributes: SFTPFileAttributes
}

/// File system statistics (`statvfs@openssh.com`).
public struct SFTPFileSystemStats: Sendable, Hashable {
    public var blockSize: UInt64
    public var fragmentSize: UInt64
    public var blocks: UInt64
    public var freeBlocks: UInt64
    public var availableBlocks: UInt64
    public var files: UInt64
    public var freeFiles: UInt64
    public var availableFiles: UInt64
    public var fileSystemID: UInt64
    public var flags: UInt64
    public var maxNameLength: UInt64

    /// Bytes available to an unprivileged user.
    public var availableBytes: UInt64 { availableBlocks &* fragmentSize }
}
