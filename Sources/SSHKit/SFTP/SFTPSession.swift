import Synchronization

/// A reply to one SFTP request.
enum SFTPReply: Sendable {
    case status(code: UInt32, message: String)
    case handle([UInt8])
    case data([UInt8])
    case name([SFTPDirectoryEntry])
    case attrs(SFTPFileAttributes)
    case extended(SFTPReader)
}

/// The SFTP protocol over one "sftp" subsystem channel: requests go out as soon as they
/// are made (any number at once), a reader task matches replies to them by id.
///
/// Nothing here blocks the connection's worker: the channel is an ordinary streamed
/// channel, so an SFTP request can be cancelled without touching the connection (the
/// reply, when it comes, is dropped; a handle it carries is closed).
final class SFTPSession: Sendable {
    /// The reply size always accepted: the reply to the largest read this client asks
    /// for (1 MiB of data and its 9-byte header), with room to spare. A smaller limit
    /// rejected full 1 MiB reads from servers that allow them (asyncssh: 4 MiB).
    static let minimumReplyLimit = (1 << 20) + 1024
    /// The most a server's `limits@openssh.com` may raise the reply limit to: one packet
    /// is buffered whole, so this bounds the memory a hostile server can make us hold.
    static let maximumReplyLimit = 64 << 20

    private struct Pending {
        var continuation: CheckedContinuation<Result<SFTPReply, SSHError>, Never>
        var sent: ContinuousClock.Instant
    }

    private struct State {
        var nextID: UInt32 = 1
        var pending: [UInt32: Pending] = [:]
        /// Requests whose caller went away; a handle in their reply gets closed.
        var abandoned: Set<UInt32> = []
        var failure: SSHError?
    }

    let channel: StreamChannel
    let version: UInt32
    /// Extensions the server announced (name → data, e.g. "posix-rename@openssh.com" → "1").
    let extensions: [String: [UInt8]]
    private let state = Mutex(State())
    /// The server's `limits@openssh.com` (read and write lengths), once asked.
    let limits = Mutex<(maxReadLength: UInt64, maxWriteLength: UInt64)?>(nil)
    /// Replies larger than this are a protocol error: `minimumReplyLimit`, raised to the
    /// server's max-packet-length once its limits are known (at most `maximumReplyLimit`).
    let replyLimit = Atomic<Int>(SFTPSession.minimumReplyLimit)

    private init(channel: StreamChannel, version: UInt32, extensions: [String: [UInt8]]) {
        self.channel = channel
        self.version = version
        self.extensions = extensions
    }

    /// Opens the subsystem and exchanges versions. With `replyTimeout`, a request left
    /// without a reply that long fails the session with `timedOut` (a stalled server).
    static func start(on connection: CoreConnection, replyTimeout: Duration?) async throws(SSHError) -> SFTPSession {
        let channel = StreamChannel()
        do throws(SSHError) {
            try await channel.start(on: connection, StreamRequest(
                command: "sftp", subsystem: true, fallback: nil, environment: [], pty: nil,
                bufferLimit: 4 << 20, timeout: nil))
        } catch {
            if error.code == .channelRequestFailed {
                var e = SSHError(.sftpUnavailable, "the server has no SFTP subsystem")
                e.libssh = error.libssh
                throw e
            }
            throw error
        }
        var w = SFTPWriter(type: SFTPType.initialize, id: nil)
        w.put(UInt32(3))
        var buffer = PacketBuffer()
        do throws(SSHError) {
            try channel.send(w.finish())
            guard let (type, reader) = try await buffer.nextPacket(from: channel, limit: minimumReplyLimit) else {
                throw SSHError(.sftpUnavailable, "the SFTP server closed the channel before its version")
            }
            guard type == SFTPType.version else {
                throw SSHError(.sftpProtocolError, "the SFTP server answered init with packet type \(type)")
            }
            var r = reader
            let version = try r.uint32()
            guard version >= 3 else {
                throw SSHError(.unsupported, "the SFTP server speaks version \(version); SSHKit needs 3")
            }
            var extensions: [String: [UInt8]] = [:]
            while r.remaining > 0 {
                let name = try r.text()
                extensions[name] = try r.string()
            }
            let session = SFTPSession(channel: channel, version: version, extensions: extensions)
            let leftover = buffer
            Task { await session.readReplies(buffer: leftover) }
            Task { await session.drainStderr() }
            if let replyTimeout { startWatchdog(session, replyTimeout) }
            return session
        } catch {
            channel.cancel()
            throw error
        }
    }

    /// Checks the oldest unanswered request every so often; holds the session weakly.
    private static func startWatchdog(_ session: SFTPSession, _ timeout: Duration) {
        let tick = min(.seconds(1), timeout / 4)
        Task { [weak session] in
            while true {
                try? await Task.sleep(for: tick)
                guard let s = session, !s.isClosed else { return }
                if let oldest = s.state.withLock({ $0.pending.values.map(\.sent).min() }),
                   ContinuousClock.now - oldest > timeout {
                    s.fail(SSHError(.timedOut, "the SFTP server sent no reply for \(timeout)"))
                    s.channel.cancel()
                    return
                }
            }
        }
    }

    // MARK: requests

    func makeID() -> UInt32 {
        state.withLock { s in
            defer { s.nextID = s.nextID == UInt32.max ? 1 : s.nextID + 1 }
            return s.nextID
        }
    }

    /// Sends a finished packet carrying `id` and waits for its reply. Cancelling the
    /// waiting task completes it with `cancelled` at once; the server still runs it.
    func request(id: UInt32, _ packet: [UInt8]) async throws(SSHError) -> SFTPReply {
        let r: Result<SFTPReply, SSHError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let failed = state.withLock { s -> SSHError? in
                    if let f = s.failure { return f }
                    s.pending[id] = Pending(continuation: continuation, sent: .now)
                    return nil
                }
                if let failed { return continuation.resume(returning: .failure(failed)) }
                // A task cancelled before it got here ran onCancel before the request
                // was registered: nothing would cancel it, so do not send it at all.
                if Task.isCancelled {
                    if let p = state.withLock({ $0.pending.removeValue(forKey: id) }) {
                        p.continuation.resume(returning: .failure(SSHError(.cancelled, "the SFTP request was cancelled")))
                    }
                    return
                }
                do throws(SSHError) {
                    try channel.send(packet)
                } catch {
                    if let p = state.withLock({ $0.pending.removeValue(forKey: id) }) {
                        p.continuation.resume(returning: .failure(error))
                    }
                }
            }
        } onCancel: {
            let p = state.withLock { s -> Pending? in
                guard let p = s.pending.removeValue(forKey: id) else { return nil }
                s.abandoned.insert(id)
                return p
            }
            p?.continuation.resume(returning: .failure(SSHError(.cancelled, "the SFTP request was cancelled")))
        }
        return try r.get()
    }

    /// Ends the session: pending requests fail with `connectionClosed`, the channel closes.
    func close() {
        fail(SSHError(.connectionClosed, "the SFTP session was closed"))
        channel.cancel()
    }

    var isClosed: Bool { state.withLock { $0.failure != nil } }

    private func fail(_ error: SSHError) {
        let pending = state.withLock { s -> [Pending] in
            if s.failure == nil { s.failure = error }
            defer { s.pending = [:] }
            return Array(s.pending.values)
        }
        for p in pending { p.continuation.resume(returning: .failure(error)) }
    }

    // MARK: replies

    private func readReplies(buffer start: PacketBuffer) async {
        var buffer = start
        do {
            while let (type, payload) = try await buffer.nextPacket(from: channel, limit: replyLimit.load(ordering: .relaxed)) {
                try dispatch(type: type, payload)
            }
            // (each payload is read in place, in the buffer, and released before the next)
            let end: SSHError
            do {
                _ = try await channel.exitStatus()
                end = SSHError(.channelClosed, "the SFTP server ended the session")
            } catch {
                end = error
            }
            fail(end)
        } catch {
            fail(error)
            channel.cancel()
        }
    }

    private func drainStderr() async {
        while let chunk = try? await channel.next(.stderr), !chunk.bytes.isEmpty {}
    }

    private func dispatch(type: UInt8, _ payload: SFTPReader) throws(SSHError) {
        let (id, reply) = try Self.decode(type: type, payload)
        let (pending, wasAbandoned) = state.withLock { s in
            (s.pending.removeValue(forKey: id), s.abandoned.remove(id) != nil)
        }
        if let pending {
            pending.continuation.resume(returning: .success(reply))
        } else if wasAbandoned {
            if case .handle(let h) = reply { closeQuietly(handle: h) }
        } else {
            throw SSHError(.sftpProtocolError, "an SFTP reply for unknown request \(id)")
        }
    }

    /// One reply packet (its type and the payload after it): the request id and the
    /// reply. Pure, so the fuzzer can feed it anything (Tests/Fuzz).
    static func decode(type: UInt8, _ payload: [UInt8]) throws(SSHError) -> (id: UInt32, reply: SFTPReply) {
        try decode(type: type, SFTPReader(payload))
    }

    /// `decode` of a payload read in place (`r` spans it, inside a larger buffer).
    static func decode(type: UInt8, _ payload: SFTPReader) throws(SSHError) -> (id: UInt32, reply: SFTPReply) {
        var r = payload
        let id = try r.uint32()
        let reply: SFTPReply
        switch type {
        case SFTPType.status:
            let code = try r.uint32()
            // OpenSSH always sends the message; very old servers may not
            let message = r.remaining >= 4 ? try r.text() : ""
            reply = .status(code: code, message: message)
        case SFTPType.handle:
            reply = .handle(try r.string())
        case SFTPType.data:
            reply = .data(try r.string())
        case SFTPType.name:
            let count = try r.uint32()
            guard Int(count) <= r.remaining / 12 else {
                throw SSHError(.sftpProtocolError, "a name reply claims \(count) entries")
            }
            var entries: [SFTPDirectoryEntry] = []
            entries.reserveCapacity(Int(count))
            for _ in 0..<count {
                let name = try r.string()
                let long = try r.text()
                let attrs = try r.attributes()
                guard !name.contains(0) else { throw SSHError(.sftpProtocolError, "a file name contains NUL") }
                entries.append(SFTPDirectoryEntry(name: SFTPPath(bytes: name), longName: long, attributes: attrs))
            }
            reply = .name(entries)
        case SFTPType.attrs:
            reply = .attrs(try r.attributes())
        case SFTPType.extendedReply:
            // kept by the caller: its own bytes, not a view of the receive buffer
            reply = .extended(SFTPReader(Array(r.bytes[r.offset..<r.end])))
        default:
            throw SSHError(.sftpProtocolError, "unexpected SFTP packet type \(type)")
        }
        return (id, reply)
    }

    /// Closes a handle nobody waits for (its opener was cancelled).
    func closeQuietly(handle: [UInt8]) {
        let id = makeID()
        var w = SFTPWriter(type: SFTPType.close, id: id)
        w.put(string: handle)
        state.withLock { _ = $0.abandoned.insert(id) }
        try? channel.send(w.finish())
    }
}

/// Bytes from the channel, cut into SFTP packets.
struct PacketBuffer {
    private var buf: [UInt8] = []
    private var start = 0

    /// The next whole packet: its type, and a reader over its payload in place (no copy:
    /// the buffer is not changed until the next call). Reads from `channel` as needed; nil
    /// at the channel's clean end between packets. A packet longer than `limit` (its
    /// length field: type, id and body) is an `sftpProtocolError`.
    mutating func nextPacket(from channel: StreamChannel, limit: Int) async throws(SSHError) -> (UInt8, SFTPReader)? {
        // the previous packet's reader is gone: its bytes can go (the buffer is unique
        // again, so nothing is copied)
        if start > 0 && start == buf.count {
            buf.removeAll(keepingCapacity: true)
            start = 0
        }
        while true {
            if let p = try take(limit: limit) { return p }
            guard let chunk = try await channel.next(.stdout) else {
                if buf.count > start { throw SSHError(.sftpProtocolError, "the SFTP channel ended inside a packet") }
                return nil
            }
            if start == buf.count {
                buf = chunk.bytes
                start = 0
            } else {
                if start > 0 && start >= buf.count / 2 {
                    buf.removeSubrange(0..<start)
                    start = 0
                }
                buf.append(contentsOf: chunk.bytes)
            }
        }
    }

    private mutating func take(limit: Int) throws(SSHError) -> (UInt8, SFTPReader)? {
        let avail = buf.count - start
        guard avail >= 5 else { return nil }
        let n = Int(buf[start]) << 24 | Int(buf[start + 1]) << 16 | Int(buf[start + 2]) << 8 | Int(buf[start + 3])
        guard n >= 1, n <= limit else {
            throw SSHError(.sftpProtocolError, "an SFTP packet of \(n) bytes (the limit is \(limit))")
        }
        guard avail >= 4 + n else { return nil }
        let type = buf[start + 4]
        let payload = SFTPReader(buf, from: start + 5, to: start + 4 + n)
        start += 4 + n
        return (type, payload)
    }
}
