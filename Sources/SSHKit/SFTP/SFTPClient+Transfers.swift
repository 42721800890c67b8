#if canImport(Glibc)
import Glibc
#endif
import Synchronization

extension SFTPClient {
    /// The request size to use: the caller's, else the server's limit (at most 1 MiB),
    /// else 32 KiB. A caller's size above the server's announced limit is lowered to it:
    /// OpenSSH's sftp-server ends the session on a request over its 256 KiB.
    func chunkSize(_ options: SFTPTransferOptions, reading: Bool) async -> Int {
        let limits = try? await serverLimits()
        let announced = limits.map { reading ? $0.maxReadLength : $0.maxWriteLength } ?? 0
        if let c = options.chunkSize {
            return announced > 0 ? Int(min(UInt64(c), announced)) : c
        }
        return announced > 0 ? Int(min(announced, 1 << 20)) : 32 * 1024
    }

    /// `limits@openssh.com`, asked once per session. Its max-packet-length raises the
    /// size of reply the session accepts (up to `SFTPSession.maximumReplyLimit`).
    func serverLimits() async throws(SSHError) -> (maxReadLength: UInt64, maxWriteLength: UInt64) {
        if let cached = session.limits.withLock({ $0 }) { return cached }
        guard supports(extension: "limits@openssh.com") else { return (0, 0) }
        let reply = try await call(SFTPType.extended, "limits", path: nil) { $0.put(string: "limits@openssh.com") }
        guard case .extended(var r) = reply else { throw Self.unexpected(reply, op: "limits", path: nil) }
        let maxPacket = try r.uint64()
        let limits = (maxReadLength: try r.uint64(), maxWriteLength: try r.uint64())
        let accepted = Int(min(maxPacket, UInt64(SFTPSession.maximumReplyLimit)))
        _ = session.replyLimit.max(accepted, ordering: .relaxed)
        session.limits.withLock { $0 = limits }
        return limits
    }

    // MARK: download

    /// Downloads `remote` to `localPath`: the bytes go to a temporary file beside it,
    /// which is renamed over `localPath` only once complete (and flushed), so a reader
    /// never sees a partial file and a failure or cancellation leaves the old one.
    /// Up to `maxRequestsInFlight` reads are in flight at once. Returns the size.
    @discardableResult
    public func download(_ remote: SFTPPath, to localPath: String, options: SFTPTransferOptions = SFTPTransferOptions(),
                         progress: (@Sendable (SFTPTransferProgress) -> Void)? = nil) async throws(SSHError) -> UInt64 {
        try options.validate()
        try checkLocalPath(localPath, op: "download")
        let chunk = await chunkSize(options, reading: true)
        let file = try await openFile(remote)
        let attrs: SFTPFileAttributes
        do throws(SSHError) {
            attrs = try await file.attributes()
            guard attrs.kind == .regular || attrs.kind == .unknown else {
                var e = SSHError(.invalidArgument, "download \(remote): not a regular file (\(attrs.kind))")
                e.context = .sftp(SSHError.SFTPContext(operation: "download", path: remote))
                throw e
            }
        } catch {
            file.closeWithoutWaiting()
            throw error
        }
        let (dir, name) = splitLocalPath(localPath)
        let partialPath = dir + "/" + String(decoding: temporaryName(Array(name.utf8), suffix: ".sshkit-partial"),
                                             as: UTF8.self)
        let tempPrefix = String(decoding: temporaryName(Array(name.utf8), suffix: ".sshkit-", reserving: 8), as: UTF8.self)
        let local: LocalFile
        do throws(SSHError) {
            local = options.resume
                ? try LocalFile.open(partialPath, O_WRONLY | O_CREAT | O_NOFOLLOW, mode: 0o600, op: "download")
                : try LocalFile.makeTemporary(prefix: dir + "/" + tempPrefix)
        } catch {
            file.closeWithoutWaiting()
            throw error
        }
        var resumeAt: UInt64 = options.resume ? (try? local.size()) ?? 0 : 0
        if let size = attrs.size, resumeAt > size {
            // longer than the source: not a prefix of it, start over
            resumeAt = 0
            try? local.truncate(to: 0)
        }
        var coverage = Coverage(start: resumeAt)
        do throws(SSHError) {
            let end = try await pipelineReads(file, chunk: chunk, options: options, coverage: &coverage,
                                              knownSize: attrs.size, progress: progress) { bytes, offset throws(SSHError) in
                try local.write(bytes, at: offset)
            }
            try local.truncate(to: end)
            try local.setMode(options.permissions ?? (attrs.mode.map { $0 & 0o777 } ?? 0o644))
            if options.preserveTimes, let m = attrs.modificationTime {
                try local.setTimes(access: attrs.accessTime ?? m, modification: m)
            }
            if options.synchronize { try local.sync() }
            guard Glibc.rename(local.path, localPath) == 0 else { throw LocalFile.error("rename into", localPath) }
            await closeDetached(file)
            return end
        } catch {
            if options.resume {
                try? local.truncate(to: coverage.contiguous) // only bytes known to be right stay
                try? local.setMode(0o600) // writable again for the resume (the final mode may not be)
            } else {
                unlink(local.path)
            }
            // not waited for: the reply queues behind every read still in flight, and a
            // cancel must return at once (the session drops the late replies)
            file.closeWithoutWaiting()
            throw error
        }
    }

    /// Reads the whole of `path` into memory; more than `limit` bytes is
    /// `outputLimitExceeded` (checked against the size first, then while reading).
    public func contentsOfFile(_ path: SFTPPath, limit: Int = 16 << 20,
                               options: SFTPTransferOptions = SFTPTransferOptions()) async throws(SSHError) -> [UInt8] {
        try options.validate()
        guard limit >= 0 else {
            var e = SSHError(.invalidArgument, "read \(path): a limit of \(limit) bytes is negative")
            e.context = .sftp(SSHError.SFTPContext(operation: "read", path: path))
            throw e
        }
        let chunk = await chunkSize(options, reading: true)
        let file = try await openFile(path)
        let buffer = Mutex([UInt8]())
        do throws(SSHError) {
            let attrs = try await file.attributes()
            if let size = attrs.size, size > UInt64(limit) { throw Self.tooBig(path, limit) }
            var coverage = Coverage(start: 0)
            let end = try await pipelineReads(file, chunk: chunk, options: options, coverage: &coverage,
                                              knownSize: attrs.size, progress: nil) { bytes, offset throws(SSHError) in
                let fits = buffer.withLock { b -> Bool in
                    let needed = Int(offset) + bytes.count
                    guard needed <= limit else { return false }
                    if b.count < needed { b += [UInt8](repeating: 0, count: needed - b.count) }
                    // one copy of the piece into place (an element-wise replaceSubrange
                    // took 25 ms per 256 KiB in a debug build: a cancel waited for it)
                    b.withUnsafeMutableBytes { dst in
                        bytes.withUnsafeBytes { src in
                            (dst.baseAddress! + Int(offset)).copyMemory(from: src.baseAddress!, byteCount: src.count)
                        }
                    }
                    return true
                }
                if !fits { throw Self.tooBig(path, limit) }
            }
            await closeDetached(file)
            return buffer.withLock { Array($0.prefix(Int(end))) }
        } catch {
            file.closeWithoutWaiting()
            throw error
        }
    }

    private static func tooBig(_ path: SFTPPath, _ limit: Int) -> SSHError {
        var e = SSHError(.outputLimitExceeded, "read \(path): more than \(limit) bytes")
        e.context = .sftp(SSHError.SFTPContext(operation: "read", path: path))
        return e
    }

    /// Closes a handle even when the calling task is cancelled (cleanup must still run).
    func closeDetached(_ file: SFTPFile) async {
        await Task { try? await file.close() }.value
    }

    /// Reads `file` from `coverage.start` to its end with up to `maxRequestsInFlight`
    /// requests in flight, handing each piece to `sink` (any order); returns the size.
    func pipelineReads(_ file: SFTPFile, chunk: Int, options: SFTPTransferOptions, coverage: inout Coverage,
                       knownSize: UInt64?, progress: (@Sendable (SFTPTransferProgress) -> Void)?,
                       sink: (_ bytes: [UInt8], _ offset: UInt64) throws(SSHError) -> Void) async throws(SSHError) -> UInt64 {
        let size = knownSize ?? 0
        var next = coverage.start
        var holes: [(UInt64, Int)] = []
        var eof: UInt64?
        var probing = false // one read past the known size, to see the end (or growth)
        var inFlight = 0
        var written = coverage.start
        progress?(SFTPTransferProgress(bytesTransferred: written, totalBytes: knownSize))
        do {
            try await withThrowingTaskGroup(of: (UInt64, Int, [UInt8]).self) { group in
                func schedule() {
                    while inFlight < options.maxRequestsInFlight {
                        let offset: UInt64, count: Int
                        if let h = holes.popLast() {
                            if let e = eof, h.0 >= e { continue }
                            (offset, count) = h
                        } else if eof == nil && (next < size || !probing) {
                            if next >= size { probing = true }
                            (offset, count) = (next, chunk)
                            next += UInt64(chunk)
                        } else {
                            return
                        }
                        inFlight += 1
                        group.addTask { (offset, count, try await file.read(at: offset, count: count)) }
                    }
                }
                schedule()
                while let (offset, count, bytes) = try await group.next() {
                    inFlight -= 1
                    if bytes.isEmpty {
                        eof = min(eof ?? offset, offset)
                    } else {
                        try sink(bytes, offset)
                        coverage.add(offset, offset + UInt64(bytes.count))
                        written += UInt64(bytes.count)
                        progress?(SFTPTransferProgress(bytesTransferred: written, totalBytes: knownSize))
                        if bytes.count < count { holes.append((offset + UInt64(bytes.count), count - bytes.count)) }
                        if offset >= size { probing = false } // the file grew: read on
                    }
                    try Task.checkCancellation()
                    schedule()
                }
            }
        } catch let error as SSHError {
            throw error
        } catch {
            throw SSHError(.cancelled, "the transfer was cancelled", cause: error)
        }
        let end = eof ?? next
        guard coverage.contiguous >= end else {
            var e = SSHError(.sftpProtocolError, "read \(file.path): the server's replies left a gap at \(coverage.contiguous)")
            e.context = .sftp(SSHError.SFTPContext(operation: "read", path: file.path))
            throw e
        }
        return end
    }
}

/// Which bytes of a transfer are done: everything below `contiguous`, and ranges above it.
struct Coverage {
    let start: UInt64
    private(set) var contiguous: UInt64
    private var ranges: [UInt64: UInt64] = [:] // start -> end, all above `contiguous`

    init(start: UInt64) {
        self.start = start
        self.contiguous = start
    }

    mutating func add(_ from: UInt64, _ to: UInt64) {
        guard to > contiguous else { return }
        if from <= contiguous {
            contiguous = to
        } else {
            ranges[from] = max(ranges[from] ?? 0, to)
        }
        while let end = ranges.removeValue(forKey: contiguous) { contiguous = max(contiguous, end) }
    }
}
