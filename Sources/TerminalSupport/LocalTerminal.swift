// The local terminal of a command-line tool: its size, raw mode, window-size changes and
// keystrokes (ssh-shell and agent-sessions).
import Foundation
import SSHKit

/// The local terminal: size, raw mode, SIGWINCH, keystrokes.
public enum LocalTerminal {
    public static func size() -> SSHTerminalSize? {
        var ws = winsize()
        guard isatty(1) == 1, ioctl(1, UInt(TIOCGWINSZ), &ws) == 0, ws.ws_col > 0, ws.ws_row > 0 else { return nil }
        return SSHTerminalSize(columns: Int(ws.ws_col), rows: Int(ws.ws_row),
                               pixelWidth: Int(ws.ws_xpixel), pixelHeight: Int(ws.ws_ypixel))
    }

    public struct Saved {
        let attributes: termios
        public func restore() {
            var a = attributes
            tcsetattr(0, TCSADRAIN, &a)
        }
    }

    /// Raw mode on stdin if it is a terminal (nil otherwise); restore() undoes it.
    public static func enterRawMode() -> Saved? {
        var original = termios()
        guard isatty(0) == 1, tcgetattr(0, &original) == 0 else { return nil }
        var raw = original
        cfmakeraw(&raw)
        tcsetattr(0, TCSADRAIN, &raw)
        return Saved(attributes: original)
    }

    public static func onResize(_ handler: @escaping @Sendable () -> Void) -> DispatchSourceSignal {
        signal(SIGWINCH, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGWINCH, queue: .global())
        source.setEventHandler(handler: handler)
        source.resume()
        return source
    }

    /// What is typed on standard input, as it comes. One thread reads standard input for
    /// the whole process and hands each read to the newest stream that is still being
    /// read, so a program inside another (an attach inside the cockpit) takes the keys
    /// while it runs and gives them back when its stream ends; nothing typed is read by
    /// a thread left over from an earlier stream. The streams end when input ends.
    public static func keystrokes() -> AsyncStream<[UInt8]> {
        InputHub.shared.subscribe()
    }

    /// Runs `body` while this process reads nothing from standard input: a reader of
    /// the terminal of its own (a joined terminal, which the SSH connection's worker
    /// reads) gets every key. Nests; the keystroke streams resume after.
    public static func withInputPaused<R, E: Error>(_ body: () async throws(E) -> R) async throws(E) -> R {
        InputHub.shared.pause()
        defer { InputHub.shared.resume() }
        return try await body()
    }

    /// Inside `withInputPaused`: runs `body` with standard input read again (the
    /// keystroke streams get keys), and pauses it again after.
    public static func withInputResumed<R, E: Error>(_ body: () async throws(E) -> R) async throws(E) -> R {
        InputHub.shared.resume()
        defer { InputHub.shared.pause() }
        return try await body()
    }

    /// A descriptor of the controlling terminal of its own (a fresh `/dev/tty`, read
    /// and write; close-on-exec) when standard input and output are that terminal, else
    /// nil. Making it non-blocking leaves standard input and output as they are.
    public static func openOwnDescriptor() -> Int32? {
        guard isatty(0) == 1, isatty(1) == 1 else { return nil }
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        return fd >= 0 ? fd : nil
    }
}

/// The one reader of standard input, and who gets what it reads.
final class InputHub: @unchecked Sendable {  // safe because: state behind `lock`, the pause behind `gate`
    static let shared = InputHub()
    private let lock = NSLock()
    private var subscribers: [(id: Int, continuation: AsyncStream<[UInt8]>.Continuation)] = []
    private var nextID = 0
    private var started = false
    private var ended = false
    /// Pauses in force, and whether the reading thread is parked (reads nothing).
    private let gate = NSCondition()
    private var pauses = 0
    private var parked = false
    /// Wakes the reading thread out of its poll to park.
    private let wake: (read: Int32, write: Int32) = {
        var p: [Int32] = [-1, -1]
        _ = pipe(&p)
        for fd in p where fd >= 0 {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        }
        return (p[0], p[1])
    }()

    /// Returns once the reading thread reads nothing more until `resume()`.
    func pause() {
        gate.lock()
        defer { gate.unlock() }
        pauses += 1
        guard lock.withLock({ started && !ended }) else { return }
        var b: UInt8 = 1
        _ = write(wake.write, &b, 1)
        while !parked { gate.wait() }
    }

    func resume() {
        gate.lock()
        pauses -= 1
        gate.broadcast()
        gate.unlock()
    }

    /// The reading thread: waits while paused.
    private func parkWhilePaused() {
        gate.lock()
        while pauses > 0 {
            if !parked {
                parked = true
                gate.broadcast()
            }
            gate.wait()
        }
        parked = false
        gate.unlock()
    }

    func subscribe() -> AsyncStream<[UInt8]> {
        AsyncStream { continuation in
            let id: Int = lock.withLock {
                nextID += 1
                subscribers.append((nextID, continuation))
                return nextID
            }
            continuation.onTermination = { [weak self] _ in
                self?.lock.withLock { self?.subscribers.removeAll { $0.id == id } }
            }
            let (isEnded, start): (Bool, Bool) = lock.withLock {
                defer { started = true }
                return (ended, !started)
            }
            if isEnded { continuation.finish() }
            if start { Thread { self.readLoop() }.start() }
        }
    }

    private func readLoop() {
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            parkWhilePaused()
            var fds = [pollfd(fd: 0, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            if poll(&fds, 2, -1) < 0 { continue }
            if fds[1].revents != 0 {
                var drain = [UInt8](repeating: 0, count: 64)
                while read(wake.read, &drain, drain.count) > 0 {}
                continue
            }
            let n = read(0, &buf, buf.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            let bytes = Array(buf[0..<n])
            lock.withLock { subscribers.last?.continuation }?.yield(bytes)
        }
        let all: [AsyncStream<[UInt8]>.Continuation] = lock.withLock {
            ended = true
            return subscribers.map(\.continuation)
        }
        for c in all { c.finish() }
        gate.lock()
        parked = true // reads nothing any more: a pause need not wait
        gate.broadcast()
        gate.unlock()
    }
}

extension LocalTerminal {
    /// Writes all of `bytes` to standard output (unbuffered; a closed output ends it).
    public static func writeOut(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { p in
            var off = 0
            while off < p.count {
                let n = Foundation.write(1, p.baseAddress! + off, p.count - off)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                off += n
            }
        }
    }
}
