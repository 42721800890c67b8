import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A host key store backed by an OpenSSH `known_hosts` file.
///
/// Reads plain and hashed entries, patterns, negation, `[host]:port`, `@revoked` and
/// `@cert-authority` (see `SSHKnownHostsFile`). New entries are written plain or
/// hashed (`hostFormat`). Writers take an exclusive `flock` on the file, so several
/// processes using this store never lose an entry; appends are `O_APPEND` writes and
/// never truncate; `replace` and `remove` write a temporary file in the same
/// directory, `fsync` it and `rename` it over the original (the original's mode is
/// kept). A file larger than `maxFileSize` or holding binary data is refused with
/// `knownHostsUnusable`, and so make every policy using the store reject; so is a file
/// that others could use to add a key: writable by every user, or owned by a user other
/// than this process's (or root). A symbolic link is followed to an existing file and
/// kept by rewrites (the file it names is replaced), but no file is created through a
/// link to a missing one.
public final class SSHKnownHostsStore: SSHHostKeyStore {
    /// How new entries name the host.
    public enum HostFormat: Sendable {
        /// `host` / `[host]:port`, readable, like OpenSSH's `HashKnownHosts no`.
        case plain
        /// `|1|salt|hash`, hides which hosts you connect to, like `HashKnownHosts yes`.
        case hashed
    }

    /// The file's path.
    public let path: String
    /// How new entries name the host: plain or hashed.
    public let hostFormat: HostFormat
    /// The largest file read, in bytes; a larger one is refused with `knownHostsUnusable`.
    public let maxFileSize: Int

    /// A store for the file at `path` (16 MiB at most by default). Nothing is read or
    /// created until it is used; a missing file is an empty one.
    public init(path: String, hostFormat: HostFormat = .hashed, maxFileSize: Int = 16 << 20) {
        self.path = path
        self.hostFormat = hostFormat
        self.maxFileSize = maxFileSize
    }

    /// `~/.ssh/known_hosts` of the current user.
    public static func userKnownHosts(hostFormat: HostFormat = .hashed) -> SSHKnownHostsStore {
        SSHKnownHostsStore(path: NSHomeDirectory() + "/.ssh/known_hosts", hostFormat: hostFormat)
    }

    /// Reads and parses the whole file. A missing file is an empty one.
    public func read() throws(SSHError) -> SSHKnownHostsFile {
        // O_NONBLOCK: a FIFO at the path would block the open until a writer came (the
        // type check that refuses it comes after); a regular file ignores the flag
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        if fd < 0 {
            if errno == ENOENT { return SSHKnownHostsFile(entries: [], skipped: []) }
            throw failure("cannot open", errno: errno)
        }
        defer { close(fd) }
        return try SSHKnownHostsFile.parse(readAll(fd))
    }

    /// What the file says about the host (reads it each time; see `SSHKnownHostsFile.lookup`).
    /// - Throws: `SSHError` (`knownHostsUnusable`) when the file cannot be used.
    public func lookup(host: String, port: Int) async throws -> SSHKnownHostKeys {
        try read().lookup(host: host, port: port)
    }

    /// Appends `key` for the host unless the file already trusts exactly that key.
    public func add(_ key: SSHHostKey, host: String, port: Int) async throws {
        try Self.checkWritable(host)
        try withLockedFile { (fd: Int32) throws(SSHError) in
            let current = SSHKnownHostsFile.parse(try readAll(fd))
            if current.lookup(host: host, port: port).keys.contains(key) { return }
            var line = SSHKnownHostsFile.line(for: key, host: host, port: port, hashed: hostFormat == .hashed) + "\n"
            if try !endsWithNewline(fd) { line = "\n" + line }
            try writeAll(fd, Array(line.utf8))
            if fsync(fd) != 0 { throw failure("fsync failed", errno: errno) }
        }
    }

    /// Replaces every key trusted for the host by `key` (rewrites the file atomically).
    public func replace(host: String, port: Int, with key: SSHHostKey) async throws {
        try Self.checkWritable(host)
        _ = try rewrite(removing: host, port: port,
                        adding: SSHKnownHostsFile.line(for: key, host: host, port: port, hashed: hostFormat == .hashed))
    }

    /// Removes every line trusting a key for the host (whole lines, like
    /// `ssh-keygen -R`; `@revoked` and `@cert-authority` lines stay). Returns how many.
    @discardableResult
    public func remove(host: String, port: Int) async throws -> Int {
        try rewrite(removing: host, port: port, adding: nil)
    }

    /// A host name that would read back as something else: a list (`,`), a pattern
    /// (`*`, `?`, `!`), another field (white space), a marker or hashed entry (`@`, `|`
    /// first), a `[host]:port` form, or another line. Written plainly, `a,*` would trust
    /// the key for every host.
    static func checkWritable(_ host: String) throws(SSHError) {
        let bad = host.isEmpty || host.first == "@" || host.first == "|"
            || host.unicodeScalars.contains { " \t\r\n,*?![]#".unicodeScalars.contains($0) || $0.value < 0x20 }
        if bad {
            throw SSHError(.invalidArgument, "the host name \(host.debugDescription) cannot be written to a known_hosts file")
        }
    }

    // MARK: - file handling

    private func failure(_ what: String, errno e: Int32? = nil) -> SSHError {
        var err = SSHError(.knownHostsUnusable, "\(path): \(what)" + (e.map { ": " + String(cString: strerror($0)) } ?? ""))
        err.systemErrno = e
        return err
    }

    private func readAll(_ fd: Int32) throws(SSHError) -> String {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw failure("cannot stat", errno: errno) }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw failure("not a regular file") }
        // what decides whom to trust must not be writable by others (group-writable is
        // allowed: user-private groups make it common, and OpenSSH checks nothing here)
        if st.st_mode & S_IWOTH != 0 {
            throw failure(String(format: "writable by every user (mode %04o): anyone could add a host key", st.st_mode & 0o7777))
        }
        if st.st_uid != geteuid() && st.st_uid != 0 {
            throw failure("owned by another user (uid \(st.st_uid)), who could add a host key")
        }
        guard Int(st.st_size) <= maxFileSize else {
            throw failure("\(st.st_size) bytes, more than the limit of \(maxFileSize)")
        }
        var bytes: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        var offset: off_t = 0
        while true {
            let n = pread(fd, &buf, buf.count, offset)
            if n < 0 {
                if errno == EINTR { continue }
                throw failure("read failed", errno: errno)
            }
            if n == 0 { break }
            bytes.append(contentsOf: buf[0..<n])
            offset += off_t(n)
            guard bytes.count <= maxFileSize else { throw failure("grew beyond the limit of \(maxFileSize) bytes") }
        }
        guard !bytes.contains(0) else { throw failure("contains binary data (NUL bytes)") }
        return String(decoding: bytes, as: UTF8.self)
    }

    private func endsWithNewline(_ fd: Int32) throws(SSHError) -> Bool {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw failure("cannot stat", errno: errno) }
        if st.st_size == 0 { return true }
        var last: UInt8 = 0
        guard pread(fd, &last, 1, st.st_size - 1) == 1 else { throw failure("read failed", errno: errno) }
        return last == UInt8(ascii: "\n")
    }

    private func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(SSHError) {
        var done = 0
        while done < bytes.count {
            let n = bytes[done...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw failure("write failed", errno: errno)
            }
            done += n
        }
    }

    /// Opens the file for appending (creating it 0600), takes the exclusive lock, and
    /// makes sure the path still names the locked file (a rewrite may have replaced
    /// it while we waited); then runs `body`. A symbolic link is followed to an existing
    /// file (as ssh does), but no file is created through one: a link to a missing file
    /// is refused, so a planted link cannot make this create a file elsewhere.
    private func withLockedFile<T>(_ body: (Int32) throws(SSHError) -> T) throws(SSHError) -> T {
        for _ in 0..<100 {
            var fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC)
            if fd < 0 && errno == ENOENT {
                // O_EXCL never follows a link: a dangling one fails with EEXIST
                fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
                if fd < 0 && errno == EEXIST {
                    var st = stat()
                    if lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK && stat(path, &st) != 0 {
                        throw failure("a symbolic link to a missing file: no file is created through a link")
                    }
                    continue // created by another writer meanwhile
                }
            }
            guard fd >= 0 else { throw failure("cannot open for writing", errno: errno) }
            defer { close(fd) }
            while flock(fd, LOCK_EX) != 0 {
                if errno != EINTR { throw failure("cannot lock", errno: errno) }
            }
            var locked = stat(), named = stat()
            guard fstat(fd, &locked) == 0 else { throw failure("cannot stat", errno: errno) }
            if stat(path, &named) == 0 && named.st_ino == locked.st_ino && named.st_dev == locked.st_dev {
                return try body(fd) // the lock goes with the close
            }
        }
        throw failure("the file kept being replaced while waiting for its lock")
    }

    private func rewrite(removing host: String, port: Int, adding newLine: String?) throws(SSHError) -> Int {
        try withLockedFile { (fd: Int32) throws(SSHError) -> Int in
            let text = try readAll(fd)
            let name = SSHKnownHostsFile.lookupName(host: host, port: port)
            var kept: [Substring] = []
            var removed = 0
            var number = 0
            for raw in SSHKnownHostsFile.lines(text) {
                number += 1
                // a CRLF file: the line without its \r, as lookups read it (a kept line
                // keeps its ending)
                var line = raw
                if line.hasSuffix("\r") { line = line.dropLast() }
                let trimmed = line.drop { $0 == " " || $0 == "\t" }
                if !trimmed.isEmpty, !trimmed.hasPrefix("#"),
                   let e = SSHKnownHostsFile.parseLine(trimmed, number: number), e.marker == .none,
                   SSHKnownHostsFile.matches(e.hosts, name: name) {
                    removed += 1
                    continue
                }
                kept.append(raw)
            }
            while let last = kept.last, last.isEmpty || last == "\r" { kept.removeLast() }
            var out = kept.joined(separator: "\n")
            if !out.isEmpty { out += "\n" }
            if let newLine { out += newLine + "\n" }
            var st = stat()
            guard fstat(fd, &st) == 0 else { throw failure("cannot stat", errno: errno) }
            try replaceFile(with: Array(out.utf8), mode: st.st_mode & 0o7777)
            return removed
        }
    }

    /// Temp file in the same directory (O_EXCL, final mode at creation), fsync,
    /// rename over the original, fsync the directory. The temp is removed on failure.
    /// A symbolic link is kept: the file it names is the one replaced.
    private func replaceFile(with bytes: [UInt8], mode: mode_t) throws(SSHError) {
        guard let resolved = realpath(path, nil) else { throw failure("cannot resolve the path", errno: errno) }
        let path = String(cString: resolved)
        free(resolved)
        let dir = (path as NSString).deletingLastPathComponent
        let base = (path as NSString).lastPathComponent
        let tmp = (dir.isEmpty ? "." : dir) + "/.\(base).sshkit-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw failure("cannot create a temporary file", errno: errno) }
        do throws(SSHError) {
            // the original's mode exactly: open's mode is reduced by the umask
            if fchmod(fd, mode) != 0 { throw failure("cannot set the mode", errno: errno) }
            try writeAll(fd, bytes)
            if fsync(fd) != 0 { throw failure("fsync failed", errno: errno) }
            close(fd)
            if rename(tmp, path) != 0 { throw failure("rename failed", errno: errno) }
        } catch {
            close(fd) // harmless EBADF when already closed
            unlink(tmp)
            throw error
        }
        let dfd = open(dir.isEmpty ? "." : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 {
            _ = fsync(dfd)
            close(dfd)
        }
    }
}
