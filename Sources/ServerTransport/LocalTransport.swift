import CTransportSupport
import Foundation
import SSHKit
#if canImport(Glibc)
import Glibc
#endif

/// This machine: the file system and processes directly.
public struct LocalTransport: ServerTransport {
    /// Always `ServerID.local`.
    public let serverID = ServerID.local
    /// Always `false`.
    public let isRemote = false
    /// The file names `writeFile` keeps at 0600.
    public let secrets: SecretFiles

    /// This machine; `secrets` adds to the default secret file names.
    public init(secrets: SecretFiles = SecretFiles()) {
        self.secrets = secrets
    }

    /// `~/` expanded to `$HOME`.
    func resolve(_ path: String) -> String {
        guard path == "~" || path.byteHasPrefix("~/") else { return path }
        let home = ProcessInfo.processInfo.environment["HOME"] ?? NSHomeDirectory()
        return home + path.byteDropFirst(1)
    }

    static func ioError(_ what: String, _ path: String, _ e: Int32) -> TransportError {
        let reason: TransportError.FileIOReason = switch e {
        case ENOENT: .noSuchFile
        case EACCES, EPERM, EROFS: .permissionDenied
        case ENOTDIR: .notADirectory
        case EISDIR: .isADirectory
        case EEXIST: .alreadyExists
        case ENOTEMPTY: .directoryNotEmpty
        case ENOSPC, EDQUOT: .noSpace
        default: .other
        }
        return TransportError(.fileIO, "\(what): \(String(cString: strerror(e)))", path: path,
                              context: .fileIO(reason: reason, systemErrno: e))
    }

    func readFileBlocking(_ path: String) throws(TransportError) -> [UInt8] {
        let p = resolve(path)
        let fd = open(p, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Self.ioError("open", path, errno) }
        defer { close(fd) }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = read(fd, &buf, buf.count)
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw Self.ioError("read", path, errno) }
            if n == 0 { return out }
            out += buf[0..<n]
        }
    }

    func writeFileBlocking(_ path: String, contents: [UInt8]) throws(TransportError) {
        var p = resolve(path)
        var link = Glibc.stat()
        if lstat(p, &link) == 0, link.st_mode & S_IFMT == S_IFLNK {
            // write the file the link points to, and keep the link
            guard let real = realpath(p, nil) else { throw Self.ioError("resolve the symlink", path, errno) }
            p = String(cString: real)
            free(real)
        }
        let slash = p.lastIndex(of: "/")
        let dir = slash.map { String(p[..<$0]) } ?? "."
        let name = slash.map { String(p[p.index(after: $0)...]) } ?? p
        guard !name.isEmpty else {
            throw TransportError(.fileIO, "not a file name", path: path, context: .fileIO(reason: .isADirectory))
        }
        var template = Array("\(dir.isEmpty ? "" : dir)/.\(name).tmp-XXXXXX".utf8CString)
        // close-on-exec from the start: a process spawned meanwhile must not inherit it
        let fd = template.withUnsafeMutableBufferPointer { ctransport_mkostemp($0.baseAddress!, O_CLOEXEC) }
        guard fd >= 0 else { throw Self.ioError("create a temporary file", path, errno) }
        let temp = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var ok = false
        defer { if !ok { unlink(temp) } }
        var existing = Glibc.stat()
        let mode: mode_t
        if secrets.isSecret(p) {
            mode = 0o600
        } else if lstat(p, &existing) == 0 {
            mode = existing.st_mode & 0o7777
        } else {
            mode = 0o644
        }
        guard fchmod(fd, mode) == 0 else { let e = errno; close(fd); throw Self.ioError("chmod", path, e) }
        var off = 0
        while off < contents.count {
            let n = contents[off...].withUnsafeBytes { write(fd, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { let e = errno; close(fd); throw Self.ioError("write", path, e) }
            off += n
        }
        guard fsync(fd) == 0 else { let e = errno; close(fd); throw Self.ioError("fsync", path, e) }
        close(fd)
        guard Glibc.rename(temp, p) == 0 else { throw Self.ioError("rename", path, errno) }
        ok = true
        // the rename is durable once the directory is synced
        let dfd = open(dir.isEmpty ? "/" : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 {
            fsync(dfd)
            close(dfd)
        }
    }

    /// `writeFile` without suspending: for a caller that must not let other work in
    /// between (an actor updating the file it caches). Same rules: atomic (a temporary
    /// file in the same directory, fsync, rename, the directory synced), the mode kept or
    /// 0600 for a secret, a symlink written through.
    public func writeFileSynchronously(_ path: String, contents: [UInt8]) throws(TransportError) {
        try writeFileBlocking(path, contents: contents)
    }

    func fileExistsBlocking(_ path: String) throws(TransportError) -> Bool {
        var st = Glibc.stat()
        if lstat(resolve(path), &st) == 0 { return true }
        if errno == ENOENT || errno == ENOTDIR { return false }
        throw Self.ioError("stat", path, errno)
    }

    static func kind(_ mode: mode_t) -> FileKind {
        switch mode & S_IFMT {
        case S_IFREG: .file
        case S_IFDIR: .directory
        case S_IFLNK: .symlink
        default: .other
        }
    }

    func statBlocking(_ path: String) throws(TransportError) -> FileStatus {
        var st = Glibc.stat()
        guard lstat(resolve(path), &st) == 0 else { throw Self.ioError("stat", path, errno) }
        return FileStatus(size: UInt64(st.st_size),
                          modificationTime: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9,
                          kind: Self.kind(st.st_mode), permissions: UInt16(st.st_mode & 0o7777))
    }

    func listDirectoryBlocking(_ path: String) throws(TransportError) -> [DirectoryEntry] {
        let p = resolve(path)
        guard let d = opendir(p) else { throw Self.ioError("open directory", path, errno) }
        defer { closedir(d) }
        var entries: [DirectoryEntry] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name == "." || name == ".." { continue }
            var st = Glibc.stat()
            let kind = lstat(p + "/" + name, &st) == 0 ? Self.kind(st.st_mode) : .other
            entries.append(DirectoryEntry(name: name, kind: kind))
        }
        return entries.sorted { $0.name < $1.name }
    }

    func createDirectoryBlocking(_ path: String) throws(TransportError) {
        let p = resolve(path)
        var prefix = p.byteHasPrefix("/") ? "" : "."
        for part in p.byteComponents(separatedBy: UInt8(ascii: "/")) {
            prefix += "/" + part
            var st = Glibc.stat()
            if followingStat(prefix, &st) == 0 { continue } // only what is missing is made
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST { throw Self.ioError("mkdir", path, errno) }
        }
        var st = Glibc.stat()
        guard followingStat(p, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else {
            throw TransportError(.fileIO, "exists and is not a directory", path: path,
                                 context: .fileIO(reason: .notADirectory))
        }
    }

    func removeFileBlocking(_ path: String) throws(TransportError) {
        if unlink(resolve(path)) != 0 && errno != ENOENT { throw Self.ioError("remove", path, errno) }
    }

    // The calls below block (open, read, fsync, readdir): each runs on a queue of its own,
    // never on the cooperative pool that every task shares.
    private static let io = DispatchQueue(label: "ServerTransport.LocalTransport.io", attributes: .concurrent)

    private static func offload<T: Sendable>(_ body: @escaping @Sendable () throws(TransportError) -> T)
        async throws(TransportError) -> T
    {
        let r: Result<T, TransportError> = await withCheckedContinuation { c in
            io.async {
                do throws(TransportError) { c.resume(returning: .success(try body())) } catch { c.resume(returning: .failure(error)) }
            }
        }
        return try r.get()
    }

    /// `open` and `read`, on a queue of its own. A missing file is `fileIO` with reason
    /// `noSuchFile`, a directory `isADirectory`; `systemErrno` holds the errno.
    public func readFile(_ path: String) async throws(TransportError) -> [UInt8] {
        try TransportError.checkPath(path)
        return try await Self.offload { () throws(TransportError) in try self.readFileBlocking(path) }
    }

    /// A temporary file beside the target (`mkostemp`), given the mode, written, `fsync`ed
    /// and renamed over it; then the directory is synced. A symlink is written through. A
    /// failure is `fileIO` with the errno's reason, and no temporary file stays.
    public func writeFile(_ path: String, contents: [UInt8]) async throws(TransportError) {
        try TransportError.checkPath(path)
        try await Self.offload { () throws(TransportError) in try self.writeFileBlocking(path, contents: contents) }
    }

    /// `lstat`: `ENOENT` and `ENOTDIR` are `false`; another errno (e.g. `EACCES`) is `fileIO`.
    public func fileExists(_ path: String) async throws(TransportError) -> Bool {
        try TransportError.checkPath(path)
        return try await Self.offload { () throws(TransportError) in try self.fileExistsBlocking(path) }
    }

    /// `lstat`, with nanosecond modification times. A missing path is `fileIO` with reason
    /// `noSuchFile`.
    public func stat(_ path: String) async throws(TransportError) -> FileStatus {
        try TransportError.checkPath(path)
        return try await Self.offload { () throws(TransportError) in try self.statBlocking(path) }
    }

    /// `readdir`, each entry's kind from `lstat` (`.other` when that fails). A missing
    /// directory is `fileIO` with reason `noSuchFile`, a file `notADirectory`.
    public func listDirectory(_ path: String) async throws(TransportError) -> [DirectoryEntry] {
        try TransportError.checkPath(path)
        return try await Self.offload { () throws(TransportError) in try self.listDirectoryBlocking(path) }
    }

    /// `mkdir` (0755, less the umask) for each missing component; a link to a directory
    /// counts as one. Something at `path` that is not a directory is `fileIO` with reason
    /// `notADirectory`.
    public func createDirectory(_ path: String) async throws(TransportError) {
        try TransportError.checkPath(path)
        try await Self.offload { () throws(TransportError) in try self.createDirectoryBlocking(path) }
    }

    /// `unlink`; `ENOENT` is success. A directory is `fileIO` with reason `isADirectory`.
    public func removeFile(_ path: String) async throws(TransportError) {
        try TransportError.checkPath(path)
        try await Self.offload { () throws(TransportError) in try self.removeFileBlocking(path) }
    }

    /// `posix_spawnp` (a name without a slash is looked up in `PATH`; `~/` is the home) in
    /// a process group of its own, with `environment` added to this process's. A program
    /// that cannot be started is exit status 127. On timeout or cancellation the group gets
    /// TERM, then KILL a second later; a cancelled call throws `cancelled`.
    public func runProcess(_ executable: String, arguments: [String], stdin: [UInt8],
                           environment: [String: String], timeout: Duration?) async throws(TransportError) -> ProcessResult {
        try TransportError.checkProcess(executable, arguments, environment)
        let run = LocalProcessRun(executable: resolve(executable), arguments: arguments, stdin: stdin,
                                  environment: environment, timeout: timeout)
        let r = await withTaskCancellationHandler {
            await run.run()
        } onCancel: {
            run.cancel()
        }
        return try r.get()
    }

    /// The database itself: it is on this machine.
    public func snapshotSQLite(_ path: String) async throws(TransportError) -> SQLiteSnapshot {
        try TransportError.checkPath(path)
        let p = resolve(path)
        // a link to the database is fine: SQLite opens what it points to
        var real = Glibc.stat()
        let st = try await stat(p)
        if st.kind == .symlink, let target = realpath(p, nil) {
            defer { free(target) }
            if lstat(target, &real) == 0, real.st_mode & S_IFMT == S_IFREG {
                return SQLiteSnapshot(path: p, takenAt: Date())
            }
        }
        guard st.kind == .file else {
            throw TransportError.fileError("not a database file", path, st.kind == .directory ? .isADirectory : .other)
        }
        return SQLiteSnapshot(path: p, takenAt: Date())
    }

    /// inotify; `pollInterval` is not used (events arrive at once).
    public func watchPaths(_ paths: [String], pollInterval: Duration) -> PathWatch {
        InotifyWatch.watch(paths) { [self] in resolve($0) }
    }

    /// `posix_spawnp` as for `runProcess`, the pipes driven by a thread of its own. A
    /// program that cannot be started ends at once with status 127 and the reason on
    /// stderr.
    /// - Throws: `other` when the pipes cannot be made.
    public func startProcess(_ executable: String, arguments: [String], environment: [String: String])
        async throws(TransportError) -> TransportProcess
    {
        try TransportError.checkProcess(executable, arguments, environment)
        return try LocalProcessStream.start(resolve(executable), arguments, environment: environment)
    }
}

/// stat(2), which follows symlinks (inside LocalTransport the name means its method).
func followingStat(_ path: String, _ st: inout Glibc.stat) -> Int32 {
    stat(path, &st)
}
