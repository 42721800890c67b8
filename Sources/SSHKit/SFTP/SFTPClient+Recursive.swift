#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// What a recursive transfer did.
public struct SFTPTreeTransferSummary: Sendable, Hashable {
    /// Regular files copied.
    public var files = 0
    /// Directories created or merged into, the top one included.
    public var directories = 0
    /// The sizes of the files copied, added up.
    public var bytes: UInt64 = 0
    /// Entries left out: symbolic links (never followed, never recreated), devices,
    /// sockets, FIFOs, and remote names that are not UTF-8; relative to the source.
    public var skipped: [String] = []
}

extension SFTPClient {
    /// Downloads the directory tree at `remote` into `localPath` (created if missing;
    /// an existing directory is merged into, its files replaced atomically). Modes and
    /// times are kept. Symbolic links and special files are skipped (`skipped`). A name
    /// from the server that could leave the destination (`..`, `/`, empty) fails the
    /// transfer with `sftpProtocolError` before anything is written under it, and a local
    /// symbolic link on the way is never followed.
    @discardableResult
    public func downloadDirectory(_ remote: SFTPPath, to localPath: String,
                                  options: SFTPTransferOptions = SFTPTransferOptions()) async throws(SSHError) -> SFTPTreeTransferSummary {
        try checkLocalPath(localPath, op: "downloadDirectory")
        var summary = SFTPTreeTransferSummary()
        var fileOptions = options
        fileOptions.preserveTimes = true
        try await downloadTree(remote, withoutTrailingSlashes(localPath), relative: "", fileOptions, &summary)
        return summary
    }

    private func downloadTree(_ remote: SFTPPath, _ local: String, relative: String,
                              _ options: SFTPTransferOptions, _ summary: inout SFTPTreeTransferSummary) async throws(SSHError) {
        let attrs = try await attributes(at: remote)
        guard attrs.kind == .directory else {
            throw SSHError(.invalidArgument, "downloadDirectory: \(remote) is not a directory")
        }
        try Self.makeLocalDirectory(local)
        summary.directories += 1
        for entry in try await listDirectory(at: remote) {
            guard entry.name.isPlainName else {
                var e = SSHError(.sftpProtocolError, "the server listed an unsafe name \(entry.name.bytes) in \(remote)")
                e.context = .sftp(SSHError.SFTPContext(operation: "readdir", path: remote))
                throw e
            }
            // a name that is not UTF-8 has no faithful local String path here: skipped
            let name = String(decoding: entry.name.bytes, as: UTF8.self)
            guard entry.name.isValidUTF8 else {
                summary.skipped.append(relative + name)
                continue
            }
            let child = remote.appending(entry.name)
            switch entry.attributes.kind {
            case .directory:
                try await downloadTree(child, local + "/" + name, relative: relative + name + "/", options, &summary)
            case .regular:
                summary.bytes += try await download(child, to: local + "/" + name, options: options)
                summary.files += 1
            default:
                summary.skipped.append(relative + name)
            }
        }
        // the directory's own mode and times last (its contents changed its mtime)
        // `permissions` is for files; a directory keeps its own mode, without set-user-ID
        // (as OpenSSH's sftp: a server does not make local directories set-user-ID)
        let dir = try LocalFile.open(local, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, op: "downloadDirectory")
        try dir.setMode(attrs.mode.map { $0 & 0o1777 } ?? 0o755)
        if let m = attrs.modificationTime { try dir.setTimes(access: attrs.accessTime ?? m, modification: m) }
    }

    /// mkdir, or accept an existing real directory (never a symlink to one).
    private static func makeLocalDirectory(_ path: String) throws(SSHError) {
        if mkdir(path, 0o700) == 0 { return }
        let e = errno
        var st = stat()
        guard e == EEXIST, lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else {
            throw LocalFile.error(e == EEXIST ? "not a directory (or a symlink):" : "create the directory", path,
                                  errno: e == EEXIST ? ENOTDIR : e)
        }
    }

    /// Uploads the local directory tree at `localPath` to `remote` (created if missing;
    /// files replaced atomically), keeping modes and times. Local symbolic links and
    /// special files are skipped, never followed.
    @discardableResult
    public func uploadDirectory(_ localPath: String, to remote: SFTPPath,
                                options: SFTPTransferOptions = SFTPTransferOptions()) async throws(SSHError) -> SFTPTreeTransferSummary {
        try checkLocalPath(localPath, op: "uploadDirectory")
        var summary = SFTPTreeTransferSummary()
        var fileOptions = options
        fileOptions.preserveTimes = true
        try await uploadTree(withoutTrailingSlashes(localPath), remote, relative: "", fileOptions, &summary)
        return summary
    }

    private func uploadTree(_ local: String, _ remote: SFTPPath, relative: String,
                            _ options: SFTPTransferOptions, _ summary: inout SFTPTreeTransferSummary) async throws(SSHError) {
        var st = stat()
        guard lstat(local, &st) == 0 else { throw LocalFile.error("stat", local) }
        guard (st.st_mode & S_IFMT) == S_IFDIR else {
            throw SSHError(.invalidArgument, "uploadDirectory: \(local) is not a directory")
        }
        do throws(SSHError) {
            try await createDirectory(at: remote, mode: 0o700)
        } catch {
            // an existing directory is merged into
            guard (try? await linkAttributes(at: remote))?.kind == .directory else { throw error }
        }
        summary.directories += 1
        for entry in try Self.localDirectoryNames(local) {
            // a name that is not UTF-8 has no faithful String path here: skipped
            guard let name = entry.name else {
                summary.skipped.append(relative + String(decoding: entry.bytes, as: UTF8.self))
                continue
            }
            let path = local + "/" + name
            var cst = stat()
            guard lstat(path, &cst) == 0 else { throw LocalFile.error("stat", path) }
            switch cst.st_mode & S_IFMT {
            case S_IFDIR:
                try await uploadTree(path, remote.appending(name), relative: relative + name + "/", options, &summary)
            case S_IFREG:
                summary.bytes += try await upload(path, to: remote.appending(name), options: options)
                summary.files += 1
            default:
                summary.skipped.append(relative + name)
            }
        }
        // `permissions` is for files; a directory keeps its own mode, without set-user-ID
        try await setAttributes(SFTPFileAttributes(
            permissions: UInt32(st.st_mode) & 0o1777,
            accessTime: UInt32(clamping: st.st_atim.tv_sec), modificationTime: UInt32(clamping: st.st_mtim.tv_sec)), at: remote)
    }

    /// The names in a local directory, sorted by their bytes; `name` is nil for one
    /// that is not UTF-8. ("." and ".." left out.)
    private static func localDirectoryNames(_ path: String) throws(SSHError) -> [(name: String?, bytes: [UInt8])] {
        guard let dir = opendir(path) else { throw LocalFile.error("list", path) }
        defer { closedir(dir) }
        var out: [(name: String?, bytes: [UInt8])] = []
        while true {
            errno = 0
            guard let entry = readdir(dir) else {
                if errno != 0 { throw LocalFile.error("list", path) }
                break
            }
            let bytes = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                Array(raw.prefix { $0 != 0 })
            }
            if bytes == [0x2e] || bytes == [0x2e, 0x2e] { continue }
            out.append((String(validating: bytes, as: UTF8.self), bytes))
        }
        return out.sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) }
    }
}

/// "a/b/" as "a/b" (a trailing slash would make lstat follow a symbolic link); "/" stays.
func withoutTrailingSlashes(_ path: String) -> String {
    var p = Substring(path)
    while p.count > 1 && p.hasSuffix("/") { p = p.dropLast() }
    return String(p)
}
