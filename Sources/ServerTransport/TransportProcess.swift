import SSHKit
import Synchronization

/// A long-running process started by `startProcess`: write to its `input`, read its
/// `stdout` and `stderr` as they come, `cancel()` it, wait for how it ended with
/// `exitStatus()`: the verbs of `SSHCommand` (Docs/Architecture.md, "One vocabulary").
///
/// Read both outputs (or at least the ones it writes a lot to): each holds a bounded
/// amount, and a process whose output nobody reads stops when that is full, as with a
/// pipe. The outputs end at EOF; how the process ended is `exitStatus()`'s answer.
public final class TransportProcess: Sendable {
    /// Standard input: `input.write(_:)`, then `input.finish()` for EOF.
    public let input: TransportInput
    /// Standard output, as chunks in order; one reader at a time.
    public let stdout: ProcessOutput
    /// Standard error, as chunks in order; one reader at a time.
    public let stderr: ProcessOutput
    let backend: any ProcessBackend

    init(backend: any ProcessBackend) {
        self.backend = backend
        input = TransportInput(backend: backend)
        stdout = ProcessOutput(backend: backend, stream: .stdout)
        stderr = ProcessOutput(backend: backend, stream: .stderr)
    }

    /// Stops the process (never blocks): TERM, then (locally) KILL a second later, for
    /// its whole process group; over SSHKit, TERM and the channel is closed. Idempotent.
    public func cancel() {
        backend.cancel()
    }

    /// Waits for how the process ended. After `cancel()`, `.signaled("TERM")` when the
    /// server closed the channel without reporting a status.
    /// - Throws: `hostUnreachable` when the connection was lost first; a cancellation
    ///   (`isCancellation`) at once when the waiting task is cancelled: the process goes on.
    public func exitStatus() async throws(TransportError) -> SSHExitStatus {
        try await backend.exitStatus()
    }
}

/// What a process reads: a `TransportProcess`'s standard input, or the keystrokes of a
/// `TransportTerminal`.
public struct TransportInput: Sendable {
    let backend: any ProcessBackend

    /// Returns once the bytes were handed to the process (paced by how fast it reads).
    /// - Throws: `other` when the process no longer reads its input (it exited or closed
    ///   it); a cancellation (`isCancellation`) when the writing task is cancelled (the
    ///   bytes may still reach the process).
    public func write(_ bytes: [UInt8]) async throws(TransportError) {
        if bytes.isEmpty { return }
        try await backend.write(bytes)
    }

    /// Writes the text's UTF-8 bytes, like `write(_:)` with bytes.
    public func write(_ text: String) async throws(TransportError) {
        try await write(Array(text.utf8))
    }

    /// Closes the input (EOF) after what was written. Idempotent.
    public func finish() {
        backend.finishInput()
    }
}

/// One output of a `TransportProcess`: chunks of bytes until EOF.
public struct ProcessOutput: AsyncSequence, Sendable {
    public typealias Element = [UInt8]
    public typealias Failure = Never
    enum Stream: Sendable { case stdout, stderr }
    let backend: any ProcessBackend
    let stream: Stream

    public struct AsyncIterator: AsyncIteratorProtocol {
        let backend: any ProcessBackend
        let stream: Stream
        /// The next chunk; nil at EOF (or when the reading task is cancelled).
        public mutating func next() async -> [UInt8]? { await backend.read(stream) }
        public mutating func next(isolation actor: isolated (any Actor)?) async -> [UInt8]? { await backend.read(stream) }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(backend: backend, stream: stream) }

    /// Everything up to EOF.
    public func collect() async -> [UInt8] {
        var all: [UInt8] = []
        for await chunk in self { all += chunk }
        return all
    }
}

/// What each transport provides behind a `TransportProcess`.
protocol ProcessBackend: Sendable {
    /// The next chunk of `stream`, nil at its end (or when the reading task is cancelled).
    func read(_ stream: ProcessOutput.Stream) async -> [UInt8]?
    func write(_ bytes: [UInt8]) async throws(TransportError)
    func finishInput()
    func cancel()
    func exitStatus() async throws(TransportError) -> SSHExitStatus
}

extension ServerTransport {
    /// Runs `body` with a started process; if it still runs when `body` ends (returns,
    /// throws or is cancelled), it is cancelled.
    public func withProcess<R>(_ executable: String, arguments: [String], environment: [String: String] = [:],
                               _ body: (TransportProcess) async throws -> R) async throws -> R {
        let process = try await startProcess(executable, arguments: arguments, environment: environment)
        do {
            let r = try await body(process)
            process.cancel()
            return r
        } catch {
            process.cancel()
            throw error
        }
    }
}

/// Output chunks between a producer and one reader, bounded: `isFull` tells the
/// producer to stop reading its source until the reader took some.
final class ChunkQueue: Sendable {
    private struct State {
        var chunks: [[UInt8]] = []
        var head = 0
        var bytes = 0
        var ended = false
        var waiters: [CheckedContinuation<[UInt8]?, Never>] = []
    }
    private let state = Mutex(State())
    let capacity: Int
    /// Called after a read made room (to wake the producer).
    private let onRoom: @Sendable () -> Void

    init(capacity: Int = 1 << 20, onRoom: @escaping @Sendable () -> Void = {}) {
        self.capacity = capacity
        self.onRoom = onRoom
    }

    var isFull: Bool { state.withLock { $0.bytes >= capacity } }

    func push(_ chunk: [UInt8]) {
        guard !chunk.isEmpty else { return }
        let waiter = state.withLock { s -> CheckedContinuation<[UInt8]?, Never>? in
            if s.ended { return nil }
            if !s.waiters.isEmpty { return s.waiters.removeFirst() }
            s.chunks.append(chunk)
            s.bytes += chunk.count
            return nil
        }
        waiter?.resume(returning: chunk)
    }

    /// EOF: readers get what is queued, then nil. Idempotent.
    func end() {
        let waiters = state.withLock { s -> [CheckedContinuation<[UInt8]?, Never>] in
            s.ended = true
            defer { s.waiters = [] }
            return s.waiters // only waiting while nothing is queued
        }
        for w in waiters { w.resume(returning: nil) }
    }

    private enum Take {
        case chunk([UInt8], wasFull: Bool)
        case end
        case empty
    }

    private func take(_ s: inout State) -> Take {
        if s.head < s.chunks.count {
            let wasFull = s.bytes >= capacity
            let c = s.chunks[s.head]
            s.chunks[s.head] = []
            s.head += 1
            s.bytes -= c.count
            if s.head >= 64 && s.head * 2 > s.chunks.count {
                s.chunks.removeFirst(s.head)
                s.head = 0
            }
            return .chunk(c, wasFull: wasFull)
        }
        return s.ended ? .end : .empty
    }

    /// The next chunk; nil at the end, or when the reading task is cancelled.
    func next() async -> [UInt8]? {
        switch state.withLock({ take(&$0) }) {
        case .chunk(let c, let wasFull):
            if wasFull { onRoom() }
            return c
        case .end:
            return nil
        case .empty:
            break
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<[UInt8]?, Never>) in
                let t = state.withLock { s -> Take in
                    let t = take(&s)
                    if case .empty = t {
                        if Task.isCancelled { return .end }
                        s.waiters.append(c)
                    }
                    return t
                }
                switch t {
                case .chunk(let x, let wasFull):
                    if wasFull { onRoom() }
                    c.resume(returning: x)
                case .end:
                    c.resume(returning: nil)
                case .empty:
                    break
                }
            }
        } onCancel: {
            let waiters = state.withLock { s in
                defer { s.waiters = [] }
                return s.waiters
            }
            for w in waiters { w.resume(returning: nil) }
        }
    }
}
