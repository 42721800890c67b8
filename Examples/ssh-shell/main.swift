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
import TerminalSupport

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
        for try await chunk in output { LocalTerminal.writeOut(chunk) }
        return try await exit()
    }
}
