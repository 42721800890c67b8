import Synchronization

extension SFTPClient {
    /// The entries of a directory (without "." and ".."), read to the end. For huge
    /// directories use `directoryEntries(at:)`, which streams. More than `limit`
    /// entries is `invalidArgument` rather than unbounded memory.
    public func listDirectory(at path: SFTPPath, limit: Int = 1_000_000) async throws(SSHError) -> [SFTPDirectoryEntry] {
        var entries: [SFTPDirectoryEntry] = []
        var it = directoryEntries(at: path).makeAsyncIterator()
        while let e = try await it.next() {
            if entries.count == limit {
                var err = SSHError(.invalidArgument, "readdir \(path): more than \(limit) entries")
                err.context = .sftp(SSHError.SFTPContext(operation: "readdir", path: path))
                throw err
            }
            entries.append(e)
        }
        return entries
    }

    /// The entries of a directory as they arrive (one `readdir` request per batch, ~100
    /// entries with OpenSSH), without "." and "..". The directory handle is closed at
    /// the end, on an error, or when the iterator is dropped early.
    public func directoryEntries(at path: SFTPPath) -> SFTPDirectoryStream {
        SFTPDirectoryStream(client: self, path: path)
    }
}

/// A directory listing, streamed.
public struct SFTPDirectoryStream: AsyncSequence, Sendable {
    public typealias Element = SFTPDirectoryEntry
    public typealias Failure = SSHError
    let client: SFTPClient
    let path: SFTPPath

    public struct AsyncIterator: AsyncIteratorProtocol {
        let reader: DirectoryReader

        /// The next entry ("." and ".." skipped), or nil at the end of the directory.
        /// - Throws: `SSHError` from `opendir`, `readdir` or `close` (e.g. `noSuchFile`,
        ///   `permissionDenied`, `cancelled`); the listing then ends.
        public mutating func next() async throws(SSHError) -> SFTPDirectoryEntry? {
            try await reader.next()
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(SSHError) -> SFTPDirectoryEntry? {
            try await reader.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(reader: DirectoryReader(client: client, path: path))
    }
}

/// The state of one listing; closes its handle when it ends or is dropped.
final class DirectoryReader: Sendable {
    private struct State {
        var handle: [UInt8]?
        var batch: [SFTPDirectoryEntry] = []
        var index = 0
        var done = false
    }

    let client: SFTPClient
    let path: SFTPPath
    private let state = Mutex(State())

    init(client: SFTPClient, path: SFTPPath) {
        self.client = client
        self.path = path
    }

    deinit {
        if let h = state.withLock({ $0.handle }) { client.session.closeQuietly(handle: h) }
    }

    func next() async throws(SSHError) -> SFTPDirectoryEntry? {
        while true {
            enum Step { case entry(SFTPDirectoryEntry), done, open, read([UInt8]) }
            let step = state.withLock { s -> Step in
                if s.index < s.batch.count {
                    defer { s.index += 1 }
                    return .entry(s.batch[s.index])
                }
                if s.done { return .done }
                guard let h = s.handle else { return .open }
                return .read(h)
            }
            switch step {
            case .entry(let e):
                if e.name.bytes == [0x2e] || e.name.bytes == [0x2e, 0x2e] { continue }
                return e
            case .done:
                return nil
            case .open:
                let reply = try await finishing { () async throws(SSHError) -> SFTPReply in
                    try await client.call(SFTPType.opendir, "opendir", path: path) { $0.put(string: path.bytes) }
                }
                guard case .handle(let h) = reply else {
                    throw finish(SFTPClient.unexpected(reply, op: "opendir", path: path))
                }
                state.withLock { $0.handle = h }
            case .read(let h):
                let reply = try await finishing { () async throws(SSHError) -> SFTPReply in
                    try await client.call(SFTPType.readdir, "readdir", path: path) { $0.put(string: h) }
                }
                switch reply {
                case .name(let entries):
                    state.withLock {
                        $0.batch = entries
                        $0.index = 0
                    }
                case .status(SFTPStatusCode.eof, _):
                    state.withLock {
                        $0.done = true
                        $0.handle = nil
                    }
                    try await client.callStatus(SFTPType.close, "close", path: path) { $0.put(string: h) }
                default:
                    throw finish(SFTPClient.unexpected(reply, op: "readdir", path: path))
                }
            }
        }
    }

    /// Runs a request; on failure the listing ends (its handle is closed) and rethrows.
    private func finishing(_ body: () async throws(SSHError) -> SFTPReply) async throws(SSHError) -> SFTPReply {
        do throws(SSHError) {
            return try await body()
        } catch {
            throw finish(error)
        }
    }

    private func finish(_ error: SSHError) -> SSHError {
        let h = state.withLock { s -> [UInt8]? in
            s.done = true
            s.batch = []
            defer { s.handle = nil }
            return s.handle
        }
        if let h { client.session.closeQuietly(handle: h) }
        return error
    }
}
