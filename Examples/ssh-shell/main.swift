// ssh-shell: an interactive shell over SSH, like `ssh -t host [command]`.
//
//   ssh-shell --host 127.0.0.1 --port 2222 --user me --key ~/.ssh/id_ed25519 --fingerprint SHA256:...
//
// The local terminal goes into raw mode (keys go to the server as typed, Ctrl-C included),
// window size changes are forwarded, and the terminal is restored on exit. The exit
// status is the remote shell's.
import ArgumentParser
import ExampleSupport
import Foundation
import SSHKit

@main
struct SSHShellCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ssh-shell", abstract: "Open an interactive shell (or run a command) on a remote terminal.")

    @OptionGroup var connection: ConnectionOptions
    @Argument(parsing: .captureForPassthrough, help: "A command to run on the terminal instead of the login shell.")
    var command: [String] = []

    func run() async throws {
        let config = try connection.configuration()
        let words = command.first == "--" ? Array(command.dropFirst()) : command
        let terminal = SSHTerminal(term: ProcessInfo.processInfo.environment["TERM"] ?? "xterm-256color",
                                   size: LocalTerminal.size() ?? SSHTerminalSize(columns: 80, rows: 24))
        let status: SSHExitStatus
        do {
            status = try await SSHClient.withConnection(config) { conn in
                if words.isEmpty {
                    let shell = try await conn.openShell(terminal: terminal)
                    return try await Self.attach(output: shell.output, input: shell.input,
                                                 resize: { try? shell.resize(to: $0) }, exit: shell.exitStatus)
                }
                let cmd = try await conn.startCommand(words.joined(separator: " "), terminal: terminal)
                return try await Self.attach(output: cmd.stdout, input: cmd.stdin,
                                             resize: { try? cmd.resize(to: $0) }, exit: cmd.exitStatus)
            }
        } catch let error as SSHError {
            FileHandle.standardError.write(Data("ssh-shell: \(error)\n".utf8))
            throw ExitCode(255)
        }
        switch status {
        case .exited(let code): throw ExitCode(code)
        case .signaled(let name, _):
            FileHandle.standardError.write(Data("ssh-shell: remote shell killed by SIG\(name)\n".utf8))
            throw ExitCode(255)
        case .unknown: throw ExitCode(255)
        }
    }

    /// Wires the local terminal to the remote one until the remote side ends.
    static func attach(
        output: SSHOutputStream, input: SSHInputWriter, resize: @escaping @Sendable (SSHTerminalSize) -> Void,
        exit: () async throws(SSHError) -> SSHExitStatus
    ) async throws -> SSHExitStatus {
        let raw = LocalTerminal.enterRawMode()
        defer { raw?.restore() }
        let winch = LocalTerminal.onResize { if let size = LocalTerminal.size() { resize(size) } }
        defer { winch.cancel() }
        // keystrokes: a thread blocks in read(0) so no task does
        let keys = LocalTerminal.keystrokes()
        let forward = Task {
            for await bytes in keys { try await input.write(bytes) }
            try input.finish() // local EOF (a pipe, not a terminal): EOF remotely too
        }
        defer { forward.cancel() }
        for try await chunk in output {
            chunk.withUnsafeBytes { p in
                var off = 0
                while off < p.count {
                    let n = Foundation.write(1, p.baseAddress! + off, p.count - off)
                    if n <= 0 { break }
                    off += n
                }
            }
        }
        return try await exit()
    }
}

/// The local terminal: size, raw mode, SIGWINCH, keystrokes.
enum LocalTerminal {
    static func size() -> SSHTerminalSize? {
        var ws = winsize()
        guard isatty(1) == 1, ioctl(1, UInt(TIOCGWINSZ), &ws) == 0, ws.ws_col > 0, ws.ws_row > 0 else { return nil }
        return SSHTerminalSize(columns: Int(ws.ws_col), rows: Int(ws.ws_row),
                               pixelWidth: Int(ws.ws_xpixel), pixelHeight: Int(ws.ws_ypixel))
    }

    struct Saved {
        let attributes: termios
        func restore() {
            var a = attributes
            tcsetattr(0, TCSADRAIN, &a)
        }
    }

    /// Raw mode on stdin if it is a terminal (nil otherwise); restore() undoes it.
    static func enterRawMode() -> Saved? {
        var original = termios()
        guard isatty(0) == 1, tcgetattr(0, &original) == 0 else { return nil }
        var raw = original
        cfmakeraw(&raw)
        tcsetattr(0, TCSADRAIN, &raw)
        return Saved(attributes: original)
    }

    static func onResize(_ handler: @escaping @Sendable () -> Void) -> DispatchSourceSignal {
        signal(SIGWINCH, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGWINCH, queue: .global())
        source.setEventHandler(handler: handler)
        source.resume()
        return source
    }

    static func keystrokes() -> AsyncStream<[UInt8]> {
        AsyncStream { continuation in
            let thread = Thread {
                var buf = [UInt8](repeating: 0, count: 4096)
                while true {
                    let n = read(0, &buf, buf.count)
                    if n <= 0 { break }
                    continuation.yield(Array(buf[0..<n]))
                }
                continuation.finish()
            }
            thread.start()
        }
    }
}
