/// File attributes as SFTP version 3 carries them; a field is nil when the server did
/// not send it (or, when setting, when it should stay as it is).
public struct SFTPFileAttributes: Sendable, Hashable {
    /// `size` (`SSH_FILEXFER_ATTR_SIZE`): the file's length in bytes; setting it changes
    /// the length (OpenSSH's server calls `truncate`).
    public var size: UInt64?
    /// `uid` (`SSH_FILEXFER_ATTR_UIDGID`): the numeric owner. Sent together with `gid`:
    /// when setting only one, the other is sent as `UInt32.max` (`-1`, which `chown`
    /// leaves unchanged).
    public var uid: UInt32?
    /// `gid` (`SSH_FILEXFER_ATTR_UIDGID`): the numeric group; see `uid`.
    public var gid: UInt32?
    /// The full `st_mode`: file type bits and permission bits.
    public var permissions: UInt32?
    /// Seconds since 1970 (SFTP v3 carries whole seconds, 32 bits).
    public var accessTime: UInt32?
    /// `mtime` (`SSH_FILEXFER_ATTR_ACMODTIME`): seconds since 1970, 32 bits. Sent together
    /// with `accessTime`: `SFTPClient.setAttributes` reads the one not given first, so it
    /// stays as it is.
    public var modificationTime: UInt32?
    /// Vendor attributes (name, data).
    public var extended: [SFTPExtensionPair]

    /// Attributes with these fields; nil ones are left out when setting (but see `uid`
    /// and `modificationTime` for the fields sent in pairs).
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

/// The type of a file, from the `S_IFMT` bits of its permissions.
public enum SFTPFileKind: Sendable, Hashable {
    /// A regular file (`S_IFREG`).
    case regular
    /// A directory (`S_IFDIR`).
    case directory
    /// A symbolic link (`S_IFLNK`).
    case symlink
    /// A character device (`S_IFCHR`).
    case characterDevice
    /// A block device (`S_IFBLK`).
    case blockDevice
    /// A named pipe (`S_IFIFO`).
    case fifo
    /// A Unix domain socket (`S_IFSOCK`).
    case socket
    /// No permissions were sent, or their type bits name no known type.
    case unknown
}

/// A (name, data) pair: an extension in the server's version reply, or a vendor attribute.
public struct SFTPExtensionPair: Sendable, Hashable {
    /// The extension's or attribute's name (`name@domain` for vendor ones).
    public var name: String
    /// Its data, as the server's bytes.
    public var data: [UInt8]

    /// A pair of `name` and `data`.
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
    /// The attributes the server sent with the name; fields it did not send are nil.
    public var attributes: SFTPFileAttributes
}

/// File system statistics (`statvfs@openssh.com`).
public struct SFTPFileSystemStats: Sendable, Hashable {
    /// `f_bsize`: the file system's block size, in bytes.
    public var blockSize: UInt64
    /// `f_frsize`: the fundamental block size, in bytes (the unit of the block counts).
    public var fragmentSize: UInt64
    /// `f_blocks`: the file system's size, in `fragmentSize` units.
    public var blocks: UInt64
    /// `f_bfree`: free blocks, in `fragmentSize` units.
    public var freeBlocks: UInt64
    /// `f_bavail`: blocks free for an unprivileged user, in `fragmentSize` units.
    public var availableBlocks: UInt64
    /// `f_files`: inodes in total.
    public var files: UInt64
    /// `f_ffree`: free inodes.
    public var freeFiles: UInt64
    /// `f_favail`: inodes free for an unprivileged user.
    public var availableFiles: UInt64
    /// `f_fsid`: the file system ID.
    public var fileSystemID: UInt64
    /// `f_flag`: `0x1` read-only (`SSH_FXE_STATVFS_ST_RDONLY`), `0x2` no set-user-ID
    /// (`SSH_FXE_STATVFS_ST_NOSUID`).
    public var flags: UInt64
    /// `f_namemax`: the longest file name, in bytes.
    public var maxNameLength: UInt64

    /// Bytes available to an unprivileged user.
    public var availableBytes: UInt64 { availableBlocks &* fragmentSize }
}
