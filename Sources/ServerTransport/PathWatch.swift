import CTransportSupport
import Foundation
import SSHKit
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Which of the watched paths changed (as they were given to `watchPaths`).
public struct PathChange: Sendable, Equatable {
    /// The watched paths that changed, in the order they were given.
    public var paths: [String]
    /// A change of `paths`.
    public init(paths: [String]) {
        self.paths = paths
    }
}

/// An endless async sequence of changes to watched paths. Each iteration is a watch of
/// its own: it starts with the iterator and stops when the iterator is gone (the loop
/// ended) or its task is cancelled. Changes that happen close together arrive as one.
public struct PathWatch: AsyncSequence, Sendable {
    public typealias Element = PathChange
    public typealias Failure = Never
    /// Starts watching: the changes, and how to stop.
    let start: @Sendable () -> (AsyncStream<PathChange>, stop: @Sendable () -> Void)

    public struct AsyncIterator: AsyncIteratorProtocol {
        final class Watching {
            var iterator: AsyncStream<PathChange>.Iterator
            let stop: @Sendable () -> Void
            init(_ stream: AsyncStream<PathChange>, stop: @escaping @Sendable () -> Void) {
                iterator = stream.makeAsyncIterator()
                self.stop = stop
            }
            deinit { stop() }
        }
        let watching: Watching

        /// The next change, once there is one; nil when the task is cancelled.
        public mutating func next() async -> PathChange? {
            await watching.iterator.next(isolation: nil)
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> PathChange? {
            await watching.iterator.next(isolation: actor)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        let (stream, stop) = start()
        return AsyncIterator(watching: AsyncIterator.Watching(stream, stop: stop))
    }
}

extension ServerTransport {
    /// `watchPaths` with the default poll interval of remote transports (3 s).
    public func watchPaths(_ paths: [String]) -> PathWatch {
        watchPaths(paths, pollInterval: .seconds(3))
    }
}

/// Watching by polling a signature of the paths: each path's kind, size, mode and
/// modification time, and for a directory the same of each entry (one level). The
/// first signature is the baseline; each different one is a change. A round that fails
/// because the server is unreachable is skipped, so a transient drop is no change.
enum PollingWatch {
    static func watch(_ paths: [String], every interval: Duration,
                      signature: @escaping @Sendable ([String]) async throws(TransportError) -> [String: String]) -> PathWatch {
        PathWatch { start(paths, every: interval, signature: signature) }
    }

    private static func start(_ paths: [String], every interval: Duration,
                              signature: @escaping @Sendable ([String]) async throws(TransportError) -> [String: String])
        -> (AsyncStream<PathChange>, stop: @Sendable () -> Void)
    {
        let (stream, continuation) = AsyncStream.makeStream(of: PathChange.self, bufferingPolicy: .bufferingNewest(16))
        // a zero (or tiny) interval would poll without pause: one round per 50 ms at most
        let interval = max(interval, .milliseconds(50))
        let task = Task {
            var last: [String: String]?
            while !Task.isCancelled {
                do {
                    let now = try await signature(paths)
                    if let before = last {
                        let changed = paths.filter { before[$0] != now[$0] }
                        if !changed.isEmpty { continuation.yield(PathChange(paths: changed)) }
                    }
                    last = now
                } catch {
                    // unreachable (or any failure of the round): keep the last signature
                }
                try? await Task.sleep(for: interval)
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return (stream, { task.cancel() })
    }

    /// The signature through the protocol's calls: `stat`, and `listDirectory` + `stat`
    /// for the entries of a directory. `hostUnreachable` fails the round; other errors
    /// are part of the signature (a path that became unreadable changed).
    static func signature(_ t: some ServerTransport, _ paths: [String]) async throws(TransportError) -> [String: String] {
        var result: [String: String] = [:]
        for path in paths {
            result[path] = try await describe(t, path)
        }
        return result
    }

    private static func describe(_ t: some ServerTransport, _ path: String) async throws(TransportError) -> String {
        do throws(TransportError) {
            let st = try await t.stat(path)
            var s = "\(st.kind) \(st.size) \(st.permissions) \(st.modificationTime)"
            if st.kind == .directory {
                for entry in try await t.listDirectory(path) {
                    // an entry removed meanwhile is "gone"; a drop fails the whole round, so
                    // it is not taken for a change
                    let e: FileStatus?
                    do throws(TransportError) {
                        e = try await t.stat(path + "/" + entry.name)
                    } catch where error.code == .hostUnreachable {
                        throw error
                    } catch {
                        e = nil
                    }
                    s += "\n\(entry.name) \(e.map { "\($0.kind) \($0.size) \($0.modificationTime)" } ?? "gone")"
                }
            }
            return s
        } catch where error.code == .hostUnreachable {
            throw error
        } catch {
            return error.isNoSuchFile ? "absent" : "error \(String(describing: error.reason))"
        }
    }
}

/// inotify: each path's parent directory is watched for events on its name (so an
/// atomic replace, a create and a delete are all seen), and a path that is a
/// directory is watched itself for changes to its entries. One thread per watch.
final class InotifyWatch: Sendable {
    static func watch(_ paths: [String], resolve: @escaping @Sendable (String) -> String) -> PathWatch {
        PathWatch { start(paths, resolve: resolve) }
    }

    private static func start(_ paths: [String], resolve: @escaping @Sendable (String) -> String)
        -> (AsyncStream<PathChange>, stop: @Sendable () -> Void)
    {
        let (stream, continuation) = AsyncStream.makeStream(of: PathChange.self, bufferingPolicy: .bufferingNewest(16))
        var wake: [Int32] = [-1, -1]
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0, ctransport_pipe2(&wake, O_CLOEXEC) == 0 else {
            if fd >= 0 { close(fd) }
            // no inotify (limits reached): polling is the honest fallback
            return PollingWatch.watch(paths, every: .seconds(1)) { ps throws(TransportError) in
                try await PollingWatch.signature(LocalTransport(), ps)
            }.start()
        }
        let stopPipe = WakePipe(fd: wake[1])
        let stopping: @Sendable () -> Void = { stopPipe.signal() }
        continuation.onTermination = { _ in stopping() }
        let wakeRead = wake[0]
        Thread.detachNewThread {
            run(fd: fd, wake: wakeRead, paths: paths, resolve: resolve, continuation: continuation)
            close(fd)
            // the write end first: a stop() after the read end closed would write into a
            // pipe without a reader (SIGPIPE, which ends an app that does not ignore it)
            stopPipe.close()
            close(wakeRead)
            continuation.finish()
        }
        return (stream, stopping)
    }

    private static let mask = UInt32(IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO
        | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)

    private static func run(fd: Int32, wake: Int32, paths: [String], resolve: (String) -> String,
                            continuation: AsyncStream<PathChange>.Continuation) {
        // watch descriptor -> (watched path as given, the entry name it is about; nil: any)
        var interest: [Int32: [(path: String, name: String?)]] = [:]
        var ownWatch: [String: Int32] = [:]
        func watchDirectory(of path: String) {
            let real = resolve(path)
            let wd = inotify_add_watch(fd, real, mask)
            if wd >= 0 {
                interest[wd, default: []].append((path, nil))
                ownWatch[path] = wd
            }
        }
        for path in paths {
            let real = resolve(path)
            let slash = real.lastIndex(of: "/")
            let parent = slash.map { $0 == real.startIndex ? "/" : String(real[..<$0]) } ?? "."
            let name = slash.map { String(real[real.index(after: $0)...]) } ?? real
            let wd = inotify_add_watch(fd, parent, mask)
            if wd >= 0 { interest[wd, default: []].append((path, name)) }
            var st = Glibc.stat()
            if followingStat(real, &st) == 0, st.st_mode & S_IFMT == S_IFDIR { watchDirectory(of: path) }
        }
        var buf = [UInt8](repeating: 0, count: 64 * 1024)
        var pending: Set<String> = []
        var flushAt: Double?
        while true {
            var pfds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
            let waitMs = flushAt.map { max(0, Int32(($0 - monotonicNow()) * 1000)) } ?? -1
            _ = poll(&pfds, 2, waitMs)
            if pfds[1].revents != 0 { return }
            if pfds[0].revents != 0 {
                let n = Glibc.read(fd, &buf, buf.count)
                var off = 0
                while n > 0 && off + 16 <= n {
                    let wd = buf.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: off, as: Int32.self) }
                    let m = buf.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: off + 4, as: UInt32.self) }
                    let len = Int(buf.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: off + 12, as: UInt32.self) })
                    let nameBytes = buf[(off + 16)..<min(n, off + 16 + len)].prefix { $0 != 0 }
                    let name = String(decoding: nameBytes, as: UTF8.self)
                    off += 16 + len
                    if m & UInt32(IN_Q_OVERFLOW) != 0 {
                        // the kernel's queue overflowed and events were lost: anything may
                        // have changed
                        pending.formUnion(paths)
                        continue
                    }
                    for (path, wanted) in interest[wd] ?? [] where wanted == nil || wanted == name {
                        pending.insert(path)
                        // a watched directory that appeared: watch its entries from now on
                        if wanted != nil, m & UInt32(IN_ISDIR) != 0, m & UInt32(IN_CREATE | IN_MOVED_TO) != 0,
                           ownWatch[path] == nil {
                            watchDirectory(of: path)
                        }
                    }
                    if m & UInt32(IN_IGNORED) != 0 {
                        interest[wd] = nil
                        for (p, w) in ownWatch where w == wd { ownWatch[p] = nil }
                    }
                }
                // gather what follows within 50 ms into one change
                if !pending.isEmpty && flushAt == nil { flushAt = monotonicNow() + 0.05 }
            }
            if let f = flushAt, monotonicNow() >= f {
                continuation.yield(PathChange(paths: paths.filter(pending.contains)))
                pending = []
                flushAt = nil
            }
        }
    }
}

/// The write end of a thread's wake-up pipe (a watch's stop, a streamed process's
/// wake-up): a signal after the thread ended and closed it (a watch's iterator deinit and
/// its stream's termination; `cancel()` after a process exited) writes nowhere, never
/// into a file descriptor number that was reused meanwhile.
final class WakePipe: Sendable {
    private let fd: Mutex<Int32>

    init(fd: Int32) {
        self.fd = Mutex(fd)
    }

    func signal() {
        fd.withLock { fd in
            guard fd >= 0 else { return }
            var b: UInt8 = 1
            _ = Glibc.write(fd, &b, 1)
        }
    }

    func close() {
        fd.withLock { fd in
            if fd >= 0 { _ = Glibc.close(fd) }
            fd = -1
        }
    }
}
