#if canImport(Glibc)
import Glibc
#endif

/// A local file descriptor for transfers, closed when the value goes away; every
/// failure is `localFileError` with errno.
final class LocalFile {
    let fd: Int32
    let path: String

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    static func error(_ what: String, _ path: String, errno e: Int32 = errno) -> SSHError {
        var err = SSHError(.localFileError, "\(what) \(path): \(String(cString: strerror(e)))")
        err.systemErrno = e
        return err
    }

    static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o600, op: String) throws(SSHError) -> LocalFile {
        try checkLocalPath(path, op: op)
        let fd = Glibc.open(path, flags | O_CLOEXEC, mode)
        guard fd >= 0 else { throw error("open", path) }
        return LocalFile(fd: fd, path: path)
    }

    /// A new file named `prefix` + 8 random characters, created 0600 with O_EXCL and
    /// close-on-exec from the start (mkstemp's fd would be inheritable until an fcntl, and
    /// Glibc's module here has no mkostemp).
    static func makeTemporary(prefix: String) throws(SSHError) -> LocalFile {
        let letters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        for _ in 0..<100 {
            let path = prefix + String((0..<8).map { _ in letters.randomElement()! })
            let fd = Glibc.open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
            if fd >= 0 { return LocalFile(fd: fd, path: path) }
            if errno != EEXIST { break }
        }
        throw error("create a temporary file beside", prefix)
    }

    func size() throws(SSHError) -> UInt64 {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw Self.error("stat", path) }
        return UInt64(st.st_size)
    }

    func status() throws(SSHError) -> stat {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw Self.error("stat", path) }
        return st
    }

    /// Reads exactly `count` bytes at `offset`, fewer only at the end of the file.
    func read(at offset: UInt64, count: Int) throws(SSHError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = out.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + got, count - got, off_t(offset) + off_t(got)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Self.error("read", path)
            }
            if n == 0 { break }
            got += n
        }
        out.removeLast(count - got)
        return out
    }

    func write(_ bytes: [UInt8], at offset: UInt64) throws(SSHError) {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Self.error("write", path)
            }
            done += n
        }
    }

    func truncate(to size: UInt64) throws(SSHError) {
        guard ftruncate(fd, off_t(size)) == 0 else { throw Self.error("truncate", path) }
    }

    func sync() throws(SSHError) {
        guard fsync(fd) == 0 else { throw Self.error("fsync", path) }
    }

    func setMode(_ mode: UInt32) throws(SSHError) {
        guard fchmod(fd, mode_t(mode)) == 0 else { throw Self.error("chmod", path) }
    }

    func setTimes(access: UInt32, modification: UInt32) throws(SSHError) {
        var times = [timespec(tv_sec: Int(access), tv_nsec: 0), timespec(tv_sec: Int(modification), tv_nsec: 0)]
        guard futimens(fd, &times) == 0 else { throw Self.error("set the times of", path) }
    }

    deinit { Glibc.close(fd) }
}

/// A local path with a NUL byte would reach the system cut short at the NUL (another
/// file): refused.
func checkLocalPath(_ path: String, op: String) throws(SSHError) {
    guard !path.utf8.contains(0) else {
        throw SSHError(.invalidArgument, "\(op): the local path \(path.debugDescription) contains a NUL byte")
    }
}

/// The name of a temporary file beside `name`: "." + name + `suffix`. Where that would
/// pass NAME_MAX (255 bytes), the name is cut (not inside a UTF-8 sequence) and a hash
/// of the whole name keeps it apart from its neighbours and the same on every run (a
/// resumed transfer finds its partial file again).
/// `reserving` bytes are left free after the suffix (for random characters added later).
func temporaryName(_ name: [UInt8], suffix: String, reserving: Int = 0) -> [UInt8] {
    let tail = Array(suffix.utf8)
    guard 1 + name.count + tail.count + reserving > 255 else { return [0x2e] + name + tail }
    var hash: UInt32 = 2_166_136_261 // FNV-1a
    for b in name { hash = (hash ^ UInt32(b)) &* 16_777_619 }
    let hex = String(hash, radix: 16)
    let tag = Array(("~" + String(repeating: "0", count: 8 - hex.count) + hex).utf8)
    var keep = 255 - 1 - tail.count - tag.count - reserving
    while keep > 0 && (name[keep] & 0xC0) == 0x80 { keep -= 1 }
    return [0x2e] + name[..<keep] + tag + tail
}

/// Splits "dir/name" into ("dir", "name"); "name" gives (".", "name").
func splitLocalPath(_ path: String) -> (directory: String, name: String) {
    guard let slash = path.lastIndex(of: "/") else { return (".", path) }
    let dir = String(path[..<slash])
    return (dir.isEmpty ? "/" : dir, String(path[path.index(after: slash)...]))
}
