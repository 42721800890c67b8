/// A remote command whose output streams while it runs (`ssh host cmd` with pipes).
///
/// Start one with `SSHConnection.withCommand` (scoped: the command is cancelled if the
/// body returns or throws while it still runs) or `startCommand`. Read `stdout` and
/// `stderr` (each at most one reader at a time), or `mergedOutput` for both in the order
/// they arrived; write to `input` and `finish()` it; send signals; then `exitStatus()`.
/// `cancel()` ends it early. The verbs are the same on every operation of SSHKit and
/// ServerTransport (Docs/Architecture.md, "One vocabulary").
///
/// Backpressure: at most `bufferLimit` bytes of output that nobody has read yet are
/// held. Beyond that SSHKit stops reading the channel, the SSH window closes and the
/// server stops the command's output (the command blocks writing). Output you do not
/// read therefore stalls the command once the limit is reached: read both streams
/// concurrently, read `mergedOutput`, or read one to the end while the other stays small.
public final class SSHCommand: Sendable {
    let channel: StreamChannel
    /// The command as given.
    public let command: String

    init(channel: StreamChannel, command: String) {
        self.channel = channel
        self.command = command
    }

    /// Standard output as chunks of bytes, in order; ends when the command's channel
    /// closes, or throws what ended it (`connectionLost`, `timedOut`, `cancelled`...).
    public var stdout: SSHByteStream { SSHByteStream(channel: channel, kind: .stdout) }
    /// Standard error, like `stdout`.
    public var stderr: SSHByteStream { SSHByteStream(channel: channel, kind: .stderr) }
    /// Both streams, merged in the order the chunks arrived, each chunk tagged with its
    /// stream. Read this or `stdout` and `stderr`, not both.
    public var mergedOutput: SSHMergedOutput { SSHMergedOutput(channel: channel) }
    /// The command's standard input: `input.write(_:)`, then `input.finish()` for EOF.
    public var input: SSHByteWriter { SSHByteWriter(channel: channel) }

    /// True when the server refused an environment variable (AcceptEnv) and the
    /// command was started with `export NAME=value; command` instead.
    public var usedEnvironmentFallback: Bool { channel.usedEnvironmentFallback }

    /// Sends a signal to the remote process. Throws `channelClosed` when it has ended.
    public func send(_ signal: SSHSignal) throws(SSHError) {
        try channel.signal(signal.name)
    }

    /// Tells the terminal of a command started with `terminal:` its new size.
    /// Throws `invalidState` for a command without a terminal.
    public func resize(to size: SSHTerminalSize) throws(SSHError) {
        try channel.resize(size)
    }

    /// Waits for the end: the exit status or signal once the channel closed and all
    /// output was read (unread output beyond `bufferLimit` keeps it waiting). Throws
    /// what ended it otherwise: `timedOut`, `cancelled`, `connectionLost`... A cancel
    /// of the waiting task throws `cancelled` at once; the command goes on.
    public func exitStatus() async throws(SSHError) -> SSHExitStatus {
        try await channel.exitStatus()
    }

    /// Stops the command (never blocks): it is sent `TERM` and its channel closed;
    /// readers and `exitStatus()` end with `cancelled`. Other channels are untouched.
    public func cancel() {
        channel.cancel()
    }
}

/// A chunk of a command's output, tagged with its stream.
public enum SSHCommandOutput: Sendable, Hashable {
    /// A chunk the command wrote to standard output.
    case stdout([UInt8])
    /// A chunk the command wrote to standard error.
    case stderr([UInt8])
}

/// Bytes from the other side of a channel, as an async sequence of chunks: a command's
/// `stdout` or `stderr`, a shell's `output`, a tunnel's `output`. One reader at a time.
/// Ends when the other side sent EOF; throws what ended the channel otherwise
/// (`cancelled`, `connectionLost`, `timedOut`...), and `cancelled` when the reading task
/// is cancelled.
public struct SSHByteStream: AsyncSequence, Sendable {
    public typealias Element = [UInt8]
    public typealias Failure = SSHError
    let channel: StreamChannel
    let kind: StreamChannel.Kind

    public struct AsyncIterator: AsyncIteratorProtocol {
        let channel: StreamChannel
        let kind: StreamChannel.Kind

        /// The next chunk, or nil at the end; throws as the stream does.
        public mutating func next() async throws(SSHError) -> [UInt8]? {
            try await channel.next(kind)?.bytes
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(SSHError) -> [UInt8]? {
            try await channel.next(kind)?.bytes
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(channel: channel, kind: kind) }

    /// Reads the stream to its end, keeping at most `limit` bytes
    /// (`outputLimitExceeded` beyond).
    public func collect(upTo limit: Int) async throws(SSHError) -> [UInt8] {
        var all: [UInt8] = []
        var it = makeAsyncIterator()
        while let chunk = try await it.next() {
            if all.count + chunk.count > limit {
                throw SSHError(.outputLimitExceeded, "more than \(limit) bytes of output")
            }
            all += chunk
        }
        return all
    }
}

/// A command's stdout and stderr merged in arrival order, each chunk tagged with its
/// stream. Ends and throws as `SSHByteStream` does.
public struct SSHMergedOutput: AsyncSequence, Sendable {
    public typealias Element = SSHCommandOutput
    public typealias Failure = SSHError
    let channel: StreamChannel

    public struct AsyncIterator: AsyncIteratorProtocol {
        let channel: StreamChannel

        /// The next tagged chunk, or nil at the end; throws as the stream does.
        public mutating func next() async throws(SSHError) -> SSHCommandOutput? {
            guard let (stream, bytes) = try await channel.next(.merged) else { return nil }
            return stream == 0 ? .stdout(bytes) : .stderr(bytes)
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(SSHError) -> SSHCommandOutput? {
            guard let (stream, bytes) = try await channel.next(.merged) else { return nil }
            return stream == 0 ? .stdout(bytes) : .stderr(bytes)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(channel: channel) }
}

/// Bytes to the other side of a channel: a command's or shell's standard input, what a
/// tunnel sends to its far end. `finish()` sends EOF (a half-close: the other side may
/// still answer).
public struct SSHByteWriter: Sendable {
    let channel: StreamChannel

    /// Returns once every byte went out within the peer's window (so a writer is
    /// paced by the remote reader). Throws `channelClosed` when the command no
    /// longer reads, `cancelled` when the task is cancelled (a prefix may have gone).
    public func write(_ bytes: [UInt8]) async throws(SSHError) {
        if bytes.isEmpty { return }
        try await channel.write(bytes)
    }

    /// Writes the string's UTF-8 bytes, like `write(_:)` with bytes.
    public func write(_ string: String) async throws(SSHError) {
        try await write(Array(string.utf8))
    }

    /// Sends EOF after what was written; later writes are a programmer error.
    /// Idempotent.
    public func finish() throws(SSHError) {
        try channel.finishInput()
    }
}
