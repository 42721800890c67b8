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
}

/// The one reader of standard input, and who gets what it reads.
final class InputHub: @unchecked Sendable {  // safe because: state behind `lock`
    static let shared = InputHub()
    private let lock = NSLock()
    private var subscribers: [(id: Int, continuation: AsyncStream<[UInt8]>.Continuation)] = []
    private var nextID = 0
    private var started = false
    private var ended = false

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
