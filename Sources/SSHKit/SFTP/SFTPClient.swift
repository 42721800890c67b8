import Logging
import Synchronization

/// An SFTP session on a connection (`SSHConnection.openSFTP()` / `withSFTP`).
///
/// Requests go out at once and run concurrently: many tasks may use one client, and a
/// connection may have several clients beside its other channels. Every failure is an
/// `SSHError` whose `sftp` names the operation, the path and the server's status;
/// `noSuchFile`, `permissionDenied`, `sftpFailure` and `unsupported` come from the server.
/// Cancelling a call fails it with `cancelled` at once and leaves the session usable.
///
/// This is SFTP version 3 spoken by SSHKit over an "sftp" subsystem channel (not
/// libssh's SFTP code, whose calls block the connection and cannot be pipelined or
/// cancelled on 0.10), with OpenSSH's extensions where the server announces them.
public final class SFTPClient: Sendable {
    let session: SFTPSession
    let connection: SSHConnection
    let logger: Logger
    /// Cleanups still talking to the server after a call was cancelled (a temporary
    /// file's removal), and whether a `close()` waits for them.
    private let cleanups = Mutex<(running: Int, closeWaiting: Bool)>((0, false))
    /// How long `close()` lets such cleanups go on before the session ends regardless.
    static let cleanupGrace: Duration = .seconds(5)

    init(session: SFTPSession, connection: SSHConnection) {
        self.session = session
        self.connection = connection
        self.logger = connection.logger
    }

    /// The protocol version the server speaks (3 for OpenSSH and dropbear).
    public var serverVersion: Int { Int(session.version) }

    /// The extensions the server announced, e.g. "posix-rename@openssh.com".
    public var serverExtensions: [String] { session.extensions.keys.sorted() }

    /// Whether the server announced the extension `name` (e.g. `statvfs@openssh.com`).
    public func supports(extension name: String) -> Bool { session.extensions[name] != nil }

    /// Ends the session (its channel closes); calls still waiting fail with `connectionClosed`.
    /// Dropping the last reference to the client (and its files) does the same.
    ///
    /// When a cancelled upload is still removing its temporary file (the cancelled call
    /// returned at once and left that to a task of its own), the session ends once that
    /// is done, or after 5 s: `defer { sftp.close() }` around a cancelled upload leaves
    /// nothing behind on the server.
    public func close() {
        let now = cleanups.withLock { c -> Bool in
            if c.running == 0 { return true }
            c.closeWaiting = true
            return false
        }
        if now {
            session.close()
            return
        }
        Task { [session] in
            try? await Task.sleep(for: Self.cleanupGrace)
            session.close()
        }
    }

    /// Runs `body` (requests that tidy up after a cancelled call) in a task of its own,
    /// which no caller's cancellation ends; a `close()` meanwhile waits for it.
    func cleanup(_ body: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        cleanups.withLock { $0.running += 1 }
        return Task {
            await body()
            let close = cleanups.withLock { c -> Bool in
                c.running -= 1
                return c.running == 0 && c.closeWaiting
            }
            if close { session.close() }
        }
    }

    deinit { session.close() }

    // MARK: plumbing

    /// Sends one request built by `fill` and returns the reply, a failed status
    /// mapped to an error naming `op` and `path`.
    func call(_ type: UInt8, _ op: String, path: SFTPPath?, capacity: Int = 64,
              _ fill: (inout SFTPWriter) -> Void) async throws(SSHError) -> SFTPReply {
        if let path { try Self.checkSendable(path, op: op) }
        let id = session.makeID()
        var w = SFTPWriter(type: type, id: id, capacity: capacity)
        fill(&w)
        do throws(SSHError) {
            let reply = try await session.request(id: id, w.finish())
            if case .status(let code, let message) = reply, code != SFTPStatusCode.ok, code != SFTPStatusCode.eof {
                throw Self.error(status: code, message: message, op: op, path: path)
            }
            return reply
        } catch {
            var e = error
            if e.sftp == nil { e.context = .sftp(SSHError.SFTPContext(operation: op, path: path)) }
            throw e
        }
    }

    /// A path with a NUL byte would be cut short on the wire (SFTP strings are C strings
    /// to the server): refused before anything is sent.
    static func checkSendable(_ path: SFTPPath, op: String) throws(SSHError) {
        guard !path.bytes.contains(0) else {
            var e = SSHError(.invalidArgument, "\(op): the path \(path.string.debugDescription) contains a NUL byte")
            e.context = .sftp(SSHError.SFTPContext(operation: op, path: path))
            throw e
        }
    }

    /// A request whose success is a plain OK status.
    func callStatus(_ type: UInt8, _ op: String, path: SFTPPath?,
                    _ fill: (inout SFTPWriter) -> Void) async throws(SSHError) {
        let reply = try await call(type, op, path: path, fill)
        guard case .status(SFTPStatusCode.ok, _) = reply else {
            throw Self.unexpected(reply, op: op, path: path)
        }
    }

    static func error(status: UInt32, message: String, op: String, path: SFTPPath?) -> SSHError {
        let code: SSHError.Code
        let what: String
        switch status {
        case SFTPStatusCode.noSuchFile: (code, what) = (.noSuchFile, "no such file")
        case SFTPStatusCode.permissionDenied: (code, what) = (.permissionDenied, "permission denied")
        case SFTPStatusCode.failure: (code, what) = (.sftpFailure, "failed")
        case SFTPStatusCode.unsupported: (code, what) = (.unsupported, "not supported by the server")
        case SFTPStatusCode.badMessage: (code, what) = (.sftpProtocolError, "the server called the request malformed")
        case SFTPStatusCode.noConnection, SFTPStatusCode.connectionLost: (code, what) = (.connectionLost, "the server lost its connection")
        default: (code, what) = (.sftpFailure, "failed with status \(status)")
        }
        var e = SSHError(code, "\(op)\(path.map { " \($0)" } ?? ""): \(what)\(message.isEmpty ? "" : " (\(message))")")
        e.context = .sftp(SSHError.SFTPContext(operation: op, path: path, status: status, serverMessage: message))
        return e
    }

    static func unexpected(_ reply: SFTPReply, op: String, path: SFTPPath?) -> SSHError {
        var e = SSHError(.sftpProtocolError, "\(op): unexpected reply \(reply.kindName)")
        e.context = .sftp(SSHError.SFTPContext(operation: op, path: path))
        return e
    }

    func requireExtension(_ name: String, op: String, path: SFTPPath?) throws(SSHError) {
        guard supports(extension: name) else {
            var e = SSHError(.unsupported, "\(op): the server does not offer \(name)")
            e.context = .sftp(SSHError.SFTPContext(operation: op, path: path))
            throw e
        }
    }

    // MARK: attributes

    /// `stat` (follows symbolic links).
    public func attributes(at path: SFTPPath) async throws(SSHError) -> SFTPFileAttributes {
        try await attrs(SFTPType.stat, "stat", path)
    }

    /// `lstat`: a symbolic link's own attributes.
    public func linkAttributes(at path: SFTPPath) async throws(SSHError) -> SFTPFileAttributes {
        try await attrs(SFTPType.lstat, "lstat", path)
    }

    /// Whether something exists at `path` (following links); other failures throw.
    public func exists(_ path: SFTPPath) async throws(SSHError) -> Bool {
        do {
            _ = try await attributes(at: path)
            return true
        } catch {
            if error.code == .noSuchFile { return false }
            throw error
        }
    }

    private func attrs(_ type: UInt8, _ op: String, _ path: SFTPPath) async throws(SSHError) -> SFTPFileAttributes {
        let reply = try await call(type, op, path: path) { $0.put(string: path.bytes) }
        guard case .attrs(let a) = reply else { throw Self.unexpected(reply, op: op, path: path) }
        return a
    }

    /// `setstat`: sets the fields that are not nil. SFTP sends the two times together: when
    /// only one is given, the other is read first (`stat`) so that it stays as it is. A
    /// `uid` without `gid` (or the reverse) sends the other as -1, which POSIX servers
    /// (OpenSSH's `chown`) leave unchanged.
    public func setAttributes(_ attributes: SFTPFileAttributes, at path: SFTPPath) async throws(SSHError) {
        var attributes = attributes
        if (attributes.accessTime == nil) != (attributes.modificationTime == nil) {
            let now = try await self.attributes(at: path)
            attributes.accessTime = attributes.accessTime ?? now.accessTime
            attributes.modificationTime = attributes.modificationTime ?? now.modificationTime
        }
        try await callStatus(SFTPType.setstat, "setstat", path: path) { [attributes] in
            $0.put(string: path.bytes)
            $0.put(attributes)
        }
    }

    /// chmod: the permission bits (`0o644`).
    public func setPermissions(_ mode: UInt32, at path: SFTPPath) async throws(SSHError) {
        try await setAttributes(SFTPFileAttributes(permissions: mode & 0o7777), at: path)
    }

    /// chown.
    public func setOwner(uid: UInt32, gid: UInt32, at path: SFTPPath) async throws(SSHError) {
        try await setAttributes(SFTPFileAttributes(uid: uid, gid: gid), at: path)
    }

    /// Sets access and modification times (seconds since 1970).
    public func setTimes(access: UInt32, modification: UInt32, at path: SFTPPath) async throws(SSHError) {
        try await setAttributes(SFTPFileAttributes(accessTime: access, modificationTime: modification), at: path)
    }

    // MARK: names

    /// The canonical absolute path (`realpath`; "." is the login directory).
    public func canonicalPath(_ path: SFTPPath) async throws(SSHError) -> SFTPPath {
        try await singleName(SFTPType.realpath, "realpath", path)
    }

    /// A symbolic link's target.
    public func destinationOfSymbolicLink(at path: SFTPPath) async throws(SSHError) -> SFTPPath {
        try await singleName(SFTPType.readlink, "readlink", path)
    }

    private func singleName(_ type: UInt8, _ op: String, _ path: SFTPPath) async throws(SSHError) -> SFTPPath {
        let reply = try await call(type, op, path: path) { $0.put(string: path.bytes) }
        guard case .name(let entries) = reply, entries.count == 1 else {
            throw Self.unexpected(reply, op: op, path: path)
        }
        return entries[0].name
    }

    /// Creates a symbolic link at `path` pointing to `target`. (OpenSSH's server takes
    /// the two in the reverse of the draft's order; SSHKit sends them its way.)
    public func createSymbolicLink(at path: SFTPPath, pointingTo target: SFTPPath) async throws(SSHError) {
        try Self.checkSendable(target, op: "symlink")
        try await callStatus(SFTPType.symlink, "symlink", path: path) {
            $0.put(string: target.bytes)
            $0.put(string: path.bytes)
        }
    }

    /// A hard link (`hardlink@openssh.com`).
    public func createHardLink(at path: SFTPPath, to existing: SFTPPath) async throws(SSHError) {
        try requireExtension("hardlink@openssh.com", op: "hardlink", path: path)
        try Self.checkSendable(existing, op: "hardlink")
        try await callStatus(SFTPType.extended, "hardlink", path: path) {
            $0.put(string: "hardlink@openssh.com")
            $0.put(string: existing.bytes)
            $0.put(string: path.bytes)
        }
    }

    /// Removes a file (not a directory).
    public func removeFile(at path: SFTPPath) async throws(SSHError) {
        try await callStatus(SFTPType.remove, "remove", path: path) { $0.put(string: path.bytes) }
    }

    /// Removes an empty directory.
    public func removeDirectory(at path: SFTPPath) async throws(SSHError) {
        try await callStatus(SFTPType.rmdir, "rmdir", path: path) { $0.put(string: path.bytes) }
    }

    /// Creates a directory with `mode` (less the server's umask). With `parents`, creates
    /// the missing ones on the way and accepts a directory that already exists (`mkdir -p`).
    public func createDirectory(at path: SFTPPath, mode: UInt32 = 0o755, parents: Bool = false) async throws(SSHError) {
        do {
            try await callStatus(SFTPType.mkdir, "mkdir", path: path) {
                $0.put(string: path.bytes)
                $0.put(SFTPFileAttributes(permissions: mode & 0o7777))
            }
        } catch {
            guard parents else { throw error }
            if error.code == .noSuchFile, path.parent != path, path.parent.bytes != [0x2e] {
                try await createDirectory(at: path.parent, mode: mode, parents: true)
                return try await createDirectory(at: path, mode: mode, parents: false)
            }
            // the server says "failure" for an existing name: fine if it is a directory
            if let a = try? await attributes(at: path), a.kind == .directory { return }
            throw error
        }
    }

    /// Renames `source` to `destination`. Without `replacing`, an existing destination
    /// is an error (`sftpFailure`: plain SFTP rename never overwrites). With it, the
    /// destination is replaced atomically by `posix-rename@openssh.com`, or, where the
    /// server lacks it, by `mv -f` over an exec channel.
    public func rename(_ source: SFTPPath, to destination: SFTPPath, replacing: Bool = false) async throws(SSHError) {
        try Self.checkSendable(source, op: "rename")
        try Self.checkSendable(destination, op: "rename")
        if !replacing {
            return try await callStatus(SFTPType.rename, "rename", path: source) {
                $0.put(string: source.bytes)
                $0.put(string: destination.bytes)
            }
        }
        if supports(extension: "posix-rename@openssh.com") {
            do throws(SSHError) {
                return try await callStatus(SFTPType.extended, "posix-rename", path: source) {
                    $0.put(string: "posix-rename@openssh.com")
                    $0.put(string: source.bytes)
                    $0.put(string: destination.bytes)
                }
            } catch {
                // announced but refused as unsupported (e.g. an sftp-server -P denylist)
                guard error.code == .unsupported else { throw error }
            }
        }
        try await replaceWithMove(source, destination)
    }

    /// `mv -f -- src dst` for servers without posix-rename (needs a POSIX login shell).
    func replaceWithMove(_ source: SFTPPath, _ destination: SFTPPath) async throws(SSHError) {
        guard source.isValidUTF8, destination.isValidUTF8 else {
            var e = SSHError(.unsupported, "rename: no posix-rename on the server, and the names are not UTF-8 for mv")
            e.context = .sftp(SSHError.SFTPContext(operation: "rename", path: source))
            throw e
        }
        let q = SSHShellQuoting.quote
        let (src, dst) = (q(source.string), q(destination.string))
        // mv moves into a directory (or a link to one) at the destination, where
        // posix-rename fails: refuse it the same way
        let result = try await connection.execute(
            "if [ -d \(dst) ]; then echo \(q(destination.string + ": is a directory")) >&2; exit 1; fi; mv -f -- \(src) \(dst)")
        guard result.exitStatus == .exited(0) else {
            var e = SSHError(.sftpFailure, "rename \(source): mv failed: \(result.stderrString)")
            e.context = .sftp(SSHError.SFTPContext(operation: "rename", path: source, serverMessage: result.stderrString))
            throw e
        }
        // a server that runs no commands (ForceCommand internal-sftp) can end the exec
        // with status 0 and move nothing
        if (try? await linkAttributes(at: source)) != nil {
            var e = SSHError(.sftpFailure, "rename \(source): the server's mv left it in place")
            e.context = .sftp(SSHError.SFTPContext(operation: "rename", path: source))
            throw e
        }
    }

    /// File system statistics of the file system holding `path` (`statvfs@openssh.com`).
    public func fileSystemStats(at path: SFTPPath) async throws(SSHError) -> SFTPFileSystemStats {
        try requireExtension("statvfs@openssh.com", op: "statvfs", path: path)
        let reply = try await call(SFTPType.extended, "statvfs", path: path) {
            $0.put(string: "statvfs@openssh.com")
            $0.put(string: path.bytes)
        }
        guard case .extended(var r) = reply else { throw Self.unexpected(reply, op: "statvfs", path: path) }
        return SFTPFileSystemStats(
            blockSize: try r.uint64(), fragmentSize: try r.uint64(), blocks: try r.uint64(),
            freeBlocks: try r.uint64(), availableBlocks: try r.uint64(), files: try r.uint64(),
            freeFiles: try r.uint64(), availableFiles: try r.uint64(), fileSystemID: try r.uint64(),
            flags: try r.uint64(), maxNameLength: try r.uint64())
    }
}

extension SFTPReply {
    var kindName: String {
        switch self {
        case .status(let code, _): "status \(code)"
        case .handle: "handle"
        case .data: "data"
        case .name: "name"
        case .attrs: "attrs"
        case .extended: "extended reply"
        }
    }
}
