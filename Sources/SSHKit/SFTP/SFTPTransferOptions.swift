/// How a download or upload runs.
public struct SFTPTransferOptions: Sendable {
    /// Bytes per read or write request; nil: the server's `limits@openssh.com` maximum
    /// (255 KiB for OpenSSH), else 32 KiB. OpenSSH's `sftp -B`.
    public var chunkSize: Int?
    /// Requests in flight at once (OpenSSH's `sftp -R`, default 64 there too).
    public var maxRequestsInFlight: Int
    /// Continue an interrupted transfer. The partial data lives in a fixed temp name
    /// beside the destination (`.NAME.sshkit-partial`), is kept when the transfer fails
    /// or is cancelled, and the next transfer with `resume` continues from its end (it
    /// trusts the bytes already there, like `sftp reget`). Without `resume` the temp file
    /// has a random name and is removed on any failure.
    public var resume: Bool
    /// The destination file's permission bits; nil: the source's (less group/other write
    /// for uploads of files that had none), or 0o644 when the source has none. In a
    /// recursive transfer it applies to the files; directories keep their source's mode
    /// (less set-user-ID).
    public var permissions: UInt32?
    /// Give the destination the source's modification (and access) time.
    public var preserveTimes: Bool
    /// Flush the destination to stable storage before it is renamed into place
    /// (`fsync@openssh.com` on the server, `fsync` locally).
    public var synchronize: Bool

    /// Options for a transfer; checked when it starts, which throws `invalidArgument` for a
    /// `chunkSize` outside 1...1048576, a `maxRequestsInFlight` outside 1...1024, or
    /// `permissions` beyond 0o7777.
    public init(chunkSize: Int? = nil, maxRequestsInFlight: Int = 64, resume: Bool = false,
                permissions: UInt32? = nil, preserveTimes: Bool = false, synchronize: Bool = true) {
        self.chunkSize = chunkSize
        self.maxRequestsInFlight = maxRequestsInFlight
        self.resume = resume
        self.permissions = permissions
        self.preserveTimes = preserveTimes
        self.synchronize = synchronize
    }

    func validate() throws(SSHError) {
        if let c = chunkSize, !(1...(1 << 20)).contains(c) {
            throw SSHError(.invalidArgument, "chunkSize \(c) out of range 1...1048576")
        }
        if !(1...1024).contains(maxRequestsInFlight) {
            throw SSHError(.invalidArgument, "maxRequestsInFlight \(maxRequestsInFlight) out of range 1...1024")
        }
        if let p = permissions, p > 0o7777 {
            throw SSHError(.invalidArgument, "permissions \(String(p, radix: 8)) are more than mode bits")
        }
    }
}

/// How far a transfer got.
public struct SFTPTransferProgress: Sendable, Hashable {
    /// Bytes in the destination so far (including resumed ones).
    public var bytesTransferred: UInt64
    /// The source's size when the transfer started, if known.
    public var totalBytes: UInt64?

    /// 0...1, when the total is known and not zero.
    public var fraction: Double? {
        guard let t = totalBytes, t > 0 else { return nil }
        return min(1, Double(bytesTransferred) / Double(t))
    }
}
