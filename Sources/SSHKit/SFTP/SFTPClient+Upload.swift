#if canImport(Glibc)
import Glibc
#endif

extension SFTPClient {
    /// Uploads `localPath` to `remote`, atomically: the bytes go to a new temporary file
    /// in the same remote directory, created with `O_EXCL` and no permissions for group
    /// and others (so a secret is never readable by others, and a planted symlink is never
    /// followed), given its final permissions once complete, flushed, then renamed over
    /// `remote` (posix-rename, else `mv -f`). On any
    /// failure or cancellation the temporary file is removed and `remote` is untouched
    /// (after a cancel, the removal finishes in the background: a cancelled call never
    /// waits for the server), with one exception no client can rule out: when the
    /// connection is lost (or the call cancelled) after the rename was sent, the server
    /// may have renamed, and `remote` then holds the whole new file; the error's message
    /// says so. It never holds a part of it.
    /// Returns the size.
    @discardableResult
    public func upload(_ localPath: String, to remote: SFTPPath, options: SFTPTransferOptions = SFTPTransferOptions(),
                       progress: (@Sendable (SFTPTransferProgress) -> Void)? = nil) async throws(SSHError) -> UInt64 {
        try options.validate()
        // O_NONBLOCK: opening a FIFO for reading would wait for a writer (a hang the
        // type check below could not catch); a regular file ignores the flag
        let local = try LocalFile.open(localPath, O_RDONLY | O_NONBLOCK, op: "upload")
        let st = try local.status()
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            throw SSHError(.invalidArgument, "upload \(localPath): not a regular file")
        }
        let size = UInt64(st.st_size)
        var times: (UInt32, UInt32)?
        if options.preserveTimes { times = (UInt32(clamping: st.st_atim.tv_sec), UInt32(clamping: st.st_mtim.tv_sec)) }
        return try await writeAtomically(to: remote, size: size, mode: options.permissions ?? (UInt32(st.st_mode) & 0o777),
                                         times: times, options: options, progress: progress) { offset, count throws(SSHError) in
            try local.read(at: offset, count: count)
        }
    }

    /// Writes `bytes` to `remote` atomically, like `upload` (a temporary file with
    /// `permissions` from its creation, then a rename over `remote`).
    public func write(_ bytes: [UInt8], to remote: SFTPPath, permissions: UInt32 = 0o644,
                      options: SFTPTransferOptions = SFTPTransferOptions()) async throws(SSHError) {
        try options.validate()
        _ = try await writeAtomically(to: remote, size: UInt64(bytes.count), mode: permissions, times: nil,
                                      options: options, progress: nil) { offset, count throws(SSHError) in
            let start = Int(offset)
            return Array(bytes[start..<min(bytes.count, start + count)])
        }
    }

    /// The temp-file-and-rename recipe, fed by `source(offset, count)`.
    private func writeAtomically(to remote: SFTPPath, size: UInt64, mode: UInt32, times: (UInt32, UInt32)?,
                                 options: SFTPTransferOptions, progress: (@Sendable (SFTPTransferProgress) -> Void)?,
                                 source: (UInt64, Int) throws(SSHError) -> [UInt8]) async throws(SSHError) -> UInt64 {
        let chunk = await chunkSize(options, reading: false)
        let name = remote.lastComponent
        guard name.isPlainName else {
            throw SSHError(.invalidArgument, "upload: \(remote) does not name a file")
        }
        try Self.checkSendable(remote, op: "upload")
        // the owner can write it (a resumed upload opens it again), nobody else can read
        // it; the final mode comes with the last attributes, before the rename
        let createMode = (mode & 0o700) | 0o600
        let temp: SFTPPath
        let file: SFTPFile
        var start: UInt64 = 0
        if options.resume {
            temp = remote.parent.appending(SFTPPath(bytes: temporaryName(name.bytes, suffix: ".sshkit-partial")))
            // never write through whatever else may sit at that name (a planted symlink)
            if let a = try? await linkAttributes(at: temp), a.kind != .regular {
                var e = SSHError(.sftpFailure, "upload: \(temp) exists and is not a regular file")
                e.context = .sftp(SSHError.SFTPContext(operation: "upload", path: temp))
                throw e
            }
            file = try await openFile(temp, flags: [.write, .create], permissions: createMode)
            start = (try? await file.attributes().size) ?? 0
            if start > size { start = 0 } // a different source: start over
        } else {
            let tag = (0..<8).map { _ in "0123456789abcdef".randomElement()! }
            temp = remote.parent.appending(SFTPPath(bytes: temporaryName(name.bytes, suffix: ".sshkit-\(String(tag))")))
            do throws(SSHError) {
                file = try await openFile(temp, flags: [.write, .create, .exclusive], permissions: createMode)
            } catch {
                // cancelled or timed out with the open on its way: the server may have
                // created the file (its name is ours alone: random, and O_EXCL)
                if error.code == .cancelled || error.code == .timedOut {
                    _ = self.cleanup { try? await self.removeFile(at: temp) }
                }
                throw error
            }
        }
        var coverage = Coverage(start: start)
        do throws(SSHError) {
            try await pipelineWrites(file, size: size, chunk: chunk, options: options, coverage: &coverage,
                                     progress: progress, source: source)
            // the mode again: the server's umask applied at creation, and chmod does not
            var attrs = SFTPFileAttributes(size: size, permissions: mode)
            if let (a, m) = times { (attrs.accessTime, attrs.modificationTime) = (a, m) }
            try await file.setAttributes(attrs)
            if options.synchronize && supports(extension: "fsync@openssh.com") { try await file.synchronize() }
            try await file.close()
            do throws(SSHError) {
                try await rename(temp, to: remote, replacing: true)
            } catch where Self.outcomeUnknown(error) {
                // the rename went out and its answer did not come back: the server may
                // have renamed (a whole file) or not; say so rather than "untouched"
                var e = error
                e.message += "; the rename of the complete file was sent, so \(remote) holds either what it held before or the whole new file (never a part)"
                throw e
            }
            return size
        } catch {
            // cleanup runs even when this task is cancelled
            let keep = options.resume ? coverage.contiguous : nil
            let cleanup = self.cleanup {
                if let keep { try? await file.setAttributes(SFTPFileAttributes(size: keep)) }
                try? await file.close()
                if keep == nil { try? await self.removeFile(at: temp) }
            }
            // A cancelled caller does not wait for the server to remove the temporary
            // file: that goes on without it (a later upload picks another name). A
            // resumable partial is cut to its complete prefix before this returns, so a
            // resume that follows can trust its size.
            if keep != nil || !Task.isCancelled { await cleanup.value }
            throw error
        }
    }

    /// Whether a request may have been carried out although it failed: the connection
    /// ended, the call was cancelled or timed out after it was sent.
    static func outcomeUnknown(_ error: SSHError) -> Bool {
        [.connectionLost, .connectionClosed, .disconnected, .cancelled, .timedOut, .streamCorrupted].contains(error.code)
    }

    /// Writes `[coverage.start, size)` from `source` with up to `maxRequestsInFlight`
    /// write requests in flight.
    private func pipelineWrites(_ file: SFTPFile, size: UInt64, chunk: Int, options: SFTPTransferOptions,
                                coverage: inout Coverage, progress: (@Sendable (SFTPTransferProgress) -> Void)?,
                                source: (UInt64, Int) throws(SSHError) -> [UInt8]) async throws(SSHError) {
        var next = coverage.start
        var inFlight = 0
        var written = coverage.start
        progress?(SFTPTransferProgress(bytesTransferred: written, totalBytes: size))
        do {
            try await withThrowingTaskGroup(of: (UInt64, Int).self) { group in
                while true {
                    try Task.checkCancellation()
                    while inFlight < options.maxRequestsInFlight && next < size {
                        let offset = next
                        let bytes = try source(offset, Int(min(UInt64(chunk), size - offset)))
                        guard !bytes.isEmpty else {
                            throw SSHError(.localFileError, "upload: the source ended at \(offset) of \(size) bytes")
                        }
                        next += UInt64(bytes.count)
                        inFlight += 1
                        group.addTask {
                            try await file.write(bytes, at: offset)
                            return (offset, bytes.count)
                        }
                    }
                    guard let (offset, count) = try await group.next() else { break }
                    inFlight -= 1
                    coverage.add(offset, offset + UInt64(count))
                    written += UInt64(count)
                    progress?(SFTPTransferProgress(bytesTransferred: written, totalBytes: size))
                }
            }
        } catch let error as SSHError {
            throw error
        } catch {
            throw SSHError(.cancelled, "the transfer was cancelled", cause: error)
        }
    }
}
