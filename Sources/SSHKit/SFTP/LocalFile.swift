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

    static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o600) throws(SSHError) -> LocalFile {
        let fd = Glibc.open(path, flags | O_CLOEXEC, mode)
        guard fd >= 0 else { throw error("open", path) }
        return LocalFile(fd: fd, path: path)
    }

    /// A new file named `prefix` + 8 random characters, created 0600 with O_EXCL.
    static func makeTemporary(prefix: String) throws(SSHError) -> LocalFile {
        var template = Array((prefix + "XXXXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw error("create a temporary file beside", prefix) }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return LocalFile(fd: fd, path: String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self))
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

/// Splits "dir/name" into ("dir", "name"); "name" gives (".", "name").
func splitLocalPath(_ path: String) -> (directory: String, name: String) {
    guard let slash = path.lastIndex(of: "/") else { return (".", path) }
    let dir = String(path[..<slash])
    return (dir.isEmpty ? "/" : dir, String(path[path.index(after: slash)...]))
}
