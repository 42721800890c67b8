import Synchronization

/// How to open a remote file: SFTP's `pflags`.
public struct SFTPOpenFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// SSH_FXF_READ (`O_RDONLY`).
    public static let read = SFTPOpenFlags(rawValue: 0x01)
    /// SSH_FXF_WRITE (`O_WRONLY`; with `.read`, `O_RDWR`).
    public static let write = SFTPOpenFlags(rawValue: 0x02)
    /// SSH_FXF_APPEND (`O_APPEND`: writes go to the end, whatever their offset).
    public static let append = SFTPOpenFlags(rawValue: 0x04)
    /// SSH_FXF_CREAT (`O_CREAT`).
    public static let create = SFTPOpenFlags(rawValue: 0x08)
    /// SSH_FXF_TRUNC (`O_TRUNC`).
    public static let truncate = SFTPOpenFlags(rawValue: 0x10)
    /// SSH_FXF_EXCL (`O_EXCL`: with `.create`, fail if the name exists, even as a
    /// dangling symbolic link).
    public static let exclusive = SFTPOpenFlags(rawValue: 0x20)
}

/// An open remote file. Reads and writes name their offset, so several may be in
/// flight at once (that is how transfers are pipelined). Close it when done;
/// `SFTPClient.withFile` does that for you.
public final class SFTPFile: Sendable {
    let client: SFTPClient
    let handle: [UInt8]
    /// The path it was opened with (for errors).
    public let path: SFTPPath
    private let closed = Mutex(false)

    init(client: SFTPClient, handle: [UInt8], path: SFTPPath) {
        self.client = client
        self.handle = handle
        self.path = path
    }

    deinit {
        // a handle nobody closed: close it without waiting (the session may be gone)
        if !closed.withLock({ $0 }) { client.session.closeQuietly(handle: handle) }
    }

    private func requireOpen(_ op: String) throws(SSHError) {
        if closed.withLock({ $0 }) {
            var e = SSHError(.invalidState, "\(op): the file \(path) is closed")
            e.context = .sftp(SSHError.SFTPContext(operation: op, path: path))
            throw e
        }
    }

    /// Reads up to `count` bytes at `offset`; fewer near the end (servers may also
    /// return fewer anywhere), empty at or past the end.
    public func read(at offset: UInt64, count: Int) async throws(SSHError) -> [UInt8] {
        try requireOpen("read")
        guard count >= 0 && count <= Int(UInt32.max) else {
            var e = SSHError(.invalidArgument, "read: a count of \(count) bytes is out of range")
            e.context = .sftp(SSHError.SFTPContext(operation: "read", path: path))
            throw e
        }
        let reply = try await client.call(SFTPType.read, "read", path: path) {
            $0.put(string: handle)
            $0.put(offset)
            $0.put(UInt32(count))
        }
        switch reply {
        case .data(let bytes):
            guard bytes.count <= count else {
                throw SFTPClient.unexpected(reply, op: "read", path: path)
            }
            return bytes
        case .status(SFTPStatusCode.eof, _):
            return []
        default:
            throw SFTPClient.unexpected(reply, op: "read", path: path)
        }
    }

    /// Writes `bytes` at `offset` (one request; keep it under the server's limit,
    /// 255 KiB for OpenSSH's sftp-server).
    public func write(_ bytes: some Collection<UInt8>, at offset: UInt64) async throws(SSHError) {
        try requireOpen("write")
        try await client.callStatus(SFTPType.write, "write", path: path) {
            $0.put(string: handle)
            $0.put(offset)
            $0.put(string: bytes)
        }
    }

    /// `fstat`.
    public func attributes() async throws(SSHError) -> SFTPFileAttributes {
        try requireOpen("fstat")
        let reply = try await client.call(SFTPType.fstat, "fstat", path: path) { $0.put(string: handle) }
        guard case .attrs(let a) = reply else { throw SFTPClient.unexpected(reply, op: "fstat", path: path) }
        return a
    }

    /// `fsetstat`: sets the fields that are not nil (e.g. the size, to truncate).
    public func setAttributes(_ attributes: SFTPFileAttributes) async throws(SSHError) {
        try requireOpen("fsetstat")
        try await client.callStatus(SFTPType.fsetstat, "fsetstat", path: path) {
            $0.put(string: handle)
            $0.put(attributes)
        }
    }

    /// Flushes the file to stable storage on the server (`fsync@openssh.com`).
    public func synchronize() async throws(SSHError) {
        try requireOpen("fsync")
        try client.requireExtension("fsync@openssh.com", op: "fsync", path: path)
        try await client.callStatus(SFTPType.extended, "fsync", path: path) {
            $0.put(string: "fsync@openssh.com")
            $0.put(string: handle)
        }
    }

    /// Closes the handle. Idempotent; a failure to close is reported (for a written
    /// file it can mean the data did not make it).
    public func close() async throws(SSHError) {
        let already = closed.withLock { c -> Bool in
            defer { c = true }
            return c
        }
        if already { return }
        try await client.callStatus(SFTPType.close, "close", path: path) { $0.put(string: handle) }
    }

    /// Sends the close and returns at once; the session drops its reply when it comes.
    /// For a read handle after a failed or cancelled transfer: its reply waits behind
    /// every read still in flight, and nothing depends on it.
    func closeWithoutWaiting() {
        let already = closed.withLock { c -> Bool in
            defer { c = true }
            return c
        }
        if !already { client.session.closeQuietly(handle: handle) }
    }
}

extension SFTPClient {
    /// Opens `path`. With `.create`, a new file gets `permissions` (less the server's
    /// umask) from its creation on, so a secret is never readable by others.
    public func openFile(_ path: SFTPPath, flags: SFTPOpenFlags = .read,
                         permissions: UInt32? = nil) async throws(SSHError) -> SFTPFile {
        let reply = try await call(SFTPType.open, "open", path: path) {
            $0.put(string: path.bytes)
            $0.put(flags.rawValue)
            $0.put(SFTPFileAttributes(permissions: permissions.map { $0 & 0o7777 }))
        }
        guard case .handle(let h) = reply else { throw Self.unexpected(reply, op: "open", path: path) }
        return SFTPFile(client: self, handle: h, path: path)
    }

    /// Opens `path`, runs `body`, and closes the file whatever happens.
    public func withFile<R>(_ path: SFTPPath, flags: SFTPOpenFlags = .read, permissions: UInt32? = nil,
                            _ body: (SFTPFile) async throws -> R) async throws -> R {
        let file = try await openFile(path, flags: flags, permissions: permissions)
        let result: R
        do {
            result = try await body(file)
        } catch {
            try? await file.close()
            throw error
        }
        try await file.close()
        return result
    }
}
