// Questions to the person at the terminal, where ssh asks them: /dev/tty, or the
// SSH_ASKPASS program.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Reads answers as ssh's `read_passphrase` does: from the controlling terminal
/// (`/dev/tty`, so a command's piped stdin is left alone), or from `SSH_ASKPASS` when
/// `SSH_ASKPASS_REQUIRE=force`, or `prefer` or no terminal with a display
/// (`DISPLAY`, `WAYLAND_DISPLAY`). `SSH_ASKPASS_REQUIRE=never` never runs it.
public enum TerminalPrompt {
    enum Source {
        case terminal
        case askpass(String)
    }

    /// Where answers come from; nil when nobody can be asked (no terminal: a
    /// daemon, `setsid`, a CI job), and then the tools fail closed.
    static var source: Source? {
        let env = ProcessInfo.processInfo.environment
        let require = env["SSH_ASKPASS_REQUIRE"] ?? ""
        let askpass = env["SSH_ASKPASS"].flatMap { $0.isEmpty ? nil : $0 }
        let display = env["DISPLAY"] != nil || env["WAYLAND_DISPLAY"] != nil
        let fd = open("/dev/tty", O_RDWR | O_CLOEXEC)
        let terminal = fd >= 0
        if fd >= 0 { close(fd) }
        if let askpass, require != "never" {
            if require == "force" || (display && (require == "prefer" || !terminal)) { return .askpass(askpass) }
        }
        return terminal ? .terminal : nil
    }

    /// Whether someone can be asked: a terminal, or an askpass program that will be used.
    public static var canAsk: Bool { source != nil }

    private static let askLock = NSLock()

    /// Shows `prompt` and returns the line typed (without its newline); nil when
    /// nobody can be asked, at end of input, or on Ctrl-C. With `echo` false the
    /// answer is not shown (passwords).
    public static func ask(_ prompt: String, echo: Bool) async -> String? {
        guard let source else { return nil }
        // a blocking read must not hold one of the concurrency pool's threads
        return await withCheckedContinuation { (c: CheckedContinuation<String?, Never>) in
            Thread {
                // one question at a time: connections made at once ask one after the other
                askLock.lock()
                defer { askLock.unlock() }
                switch source {
                case .terminal: c.resume(returning: readTerminal(prompt, echo: echo))
                case .askpass(let program): c.resume(returning: runAskpass(program, prompt))
                }
            }.start()
        }
    }

    /// Writes `text` to the terminal (ssh's messages beside a prompt); to stderr when
    /// there is no terminal.
    public static func show(_ text: String) {
        let fd = open("/dev/tty", O_WRONLY | O_CLOEXEC)
        let target = fd >= 0 ? fd : STDERR_FILENO
        _ = Array(text.utf8).withUnsafeBytes { write(target, $0.baseAddress, $0.count) }
        if fd >= 0 { close(fd) }
    }

    private static func readTerminal(_ prompt: String, echo: Bool) -> String? {
        let fd = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        func put(_ s: String) { _ = Array(s.utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } }
        put(prompt)
        var saved = termios()
        let isTerminal = tcgetattr(fd, &saved) == 0
        if echo || !isTerminal {
            return readLine(fd)
        }
        // no echo and no signals while the password is typed, so that a Ctrl-C
        // cannot leave the terminal without echo: the keys are handled here
        var raw = saved
        raw.c_lflag &= ~tcflag_t(ECHO | ICANON | ISIG)
        withUnsafeMutableBytes(of: &raw.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        tcsetattr(fd, TCSAFLUSH, &raw)
        defer {
            tcsetattr(fd, TCSAFLUSH, &saved)
            put("\n")
        }
        var line: [UInt8] = []
        defer { for i in line.indices { line[i] = 0 } }
        var byte: UInt8 = 0
        while true {
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            switch byte {
            case 0x0A, 0x0D: return String(decoding: line, as: UTF8.self)
            case 0x03: return nil                                  // Ctrl-C
            case 0x04 where line.isEmpty: return nil               // Ctrl-D
            case 0x7F, 0x08: if !line.isEmpty { line.removeLast() } // erase
            case 0x15: line.removeAll()                            // Ctrl-U
            default: line.append(byte)
            }
        }
    }

    private static func readLine(_ fd: Int32) -> String? {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return line.isEmpty ? nil : String(decoding: line, as: UTF8.self) }
            if byte == 0x0A { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
    }

    /// `program prompt`; its first line of output is the answer (nil if it failed).
    private static func runAskpass(_ program: String, _ prompt: String) -> String? {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: program)
        p.arguments = [prompt]
        let out = Pipe()
        p.standardOutput = out
        p.standardInput = FileHandle.nullDevice
        do { try p.run() } catch { return nil }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationReason == .exit, p.terminationStatus == 0 else { return nil }
        let text = String(decoding: data, as: UTF8.self)
        return String(text.prefix { $0 != "\n" && $0 != "\r\n" })
    }
}
