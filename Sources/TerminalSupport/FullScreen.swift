// A full-screen terminal program's hold on the terminal: raw mode, the alternate screen,
// the cursor hidden, automatic wrap off, bracketed paste (and the mouse when asked), and
// all of it undone on every way out: a normal return, `exit`, SIGTERM, SIGHUP, SIGINT,
// SIGQUIT, and a crash (SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGABRT, SIGFPE).
import Foundation

/// The terminal held full screen by this process, until `leave()`.
public final class FullScreen: Sendable {
    private let mouse: Bool

    /// Takes the terminal (standard input and output must both be one); nil otherwise,
    /// or when another `FullScreen` holds it.
    public static func enter(mouse: Bool = false) -> FullScreen? {
        guard isatty(0) == 1, isatty(1) == 1 else { return nil }
        var original = termios()
        guard tcgetattr(0, &original) == 0 else { return nil }
        let taken: Bool = FullScreenState.lock.withLock {
            if FullScreenState.active { return false }
            FullScreenState.active = true
            FullScreenState.original = original
            return true
        }
        guard taken else { return nil }
        FullScreenState.setLeaveBytes(mouse: mouse)
        FullScreenState.installHandlers()
        let screen = FullScreen(mouse: mouse)
        screen.resume()
        return screen
    }

    private init(mouse: Bool) {
        self.mouse = mouse
    }

    /// Raw mode and the full screen again (after `suspend()`); the caller redraws whole.
    public func resume() {
        var raw = FullScreenState.lock.withLock { FullScreenState.original }
        cfmakeraw(&raw)
        tcsetattr(0, TCSADRAIN, &raw)
        // the alternate screen, cursor hidden, wrap off, bracketed paste, focus reports off
        var enter = "\u{1B}[?1049h\u{1B}[?25l\u{1B}[?7l\u{1B}[?2004h\u{1B}[H\u{1B}[2J"
        if mouse { enter += "\u{1B}[?1000h\u{1B}[?1002h\u{1B}[?1006h" }
        LocalTerminal.writeOut(Array(enter.utf8))
    }

    /// The terminal as it was, for a while (a program attached in it); `resume()` takes
    /// it back.
    public func suspend() {
        FullScreenState.restoreTerminal()
    }

    /// The terminal as it was, for good. Safe to call more than once.
    public func leave() {
        FullScreenState.restoreTerminal()
        FullScreenState.lock.withLock { FullScreenState.active = false }
    }

    deinit { leave() }
}

/// What the signal handlers need, kept where a handler can read it without locks or
/// allocation: the terminal's attributes and the bytes that undo the full screen.
enum FullScreenState {
    static let lock = NSLock()
    // safe because: written under `lock` before the handlers are installed and while
    // the screen is held; the handlers only read them
    nonisolated(unsafe) static var active = false
    nonisolated(unsafe) static var original = termios()
    nonisolated(unsafe) static var leaveBytes: UnsafeMutableBufferPointer<UInt8> = .allocate(capacity: 128)
    nonisolated(unsafe) static var leaveCount = 0
    nonisolated(unsafe) static var installed = false

    static func setLeaveBytes(mouse: Bool) {
        var s = "\u{1B}[?2026l\u{1B}[0m"
        if mouse { s += "\u{1B}[?1006l\u{1B}[?1002l\u{1B}[?1000l" }
        s += "\u{1B}[?2004l\u{1B}[?7h\u{1B}[?25h\u{1B}[?1049l"
        let bytes = Array(s.utf8)
        leaveCount = min(bytes.count, leaveBytes.count)
        for i in 0..<leaveCount { leaveBytes[i] = bytes[i] }
    }

    /// Writes the leave bytes and restores the attributes: only async-signal-safe calls.
    static func restoreTerminal() {
        _ = write(1, leaveBytes.baseAddress, leaveCount)
        var a = original
        tcsetattr(0, TCSADRAIN, &a)
    }

    static func installHandlers() {
        let first: Bool = lock.withLock {
            defer { installed = true }
            return !installed
        }
        guard first else { return }
        for sig in [SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGABRT, SIGFPE] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { sig in
                if FullScreenState.active { FullScreenState.restoreTerminal() }
                // the signal's own effect: the default action, raised again
                signal(sig, SIG_DFL)
                raise(sig)
            }
            sigemptyset(&action.sa_mask)
            action.sa_flags = Int32(bitPattern: UInt32(truncatingIfNeeded: SA_RESETHAND))
            sigaction(sig, &action, nil)
        }
        atexit {
            if FullScreenState.active { FullScreenState.restoreTerminal() }
        }
    }
}
