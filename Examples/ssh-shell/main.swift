// ssh-shell: an interactive shell over SSH, like `ssh -t host [command]`.
//
//   ssh-shell prod-db                  (~/.ssh/config, ~/.ssh/known_hosts)
//   ssh-shell -p 2222 -i ~/.ssh/id_ed25519 me@10.0.0.5 top
//
// The local terminal goes into raw mode (keys go to the server as typed, Ctrl-C included),
// window size changes are forwarded, and the terminal is restored on exit. On a terminal,
// the connection's worker carries the bytes (SSHConnection.startJoinedTerminal), as ssh's
// own loop does; on pipes, they go through the shell's streams. The exit
// status is the remote shell's, 255 when the connection failed.
import ArgumentParser
import CBuildInfo
import ExampleSupport
import Foundation
import SSHKit
import TerminalSupport

@main
struct SSHShellCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ssh-shell",
        abstract: "Open an interactive shell (or run a command) on a remote terminal.",
        usage: """
            ssh-shell [-qvA] [-p port] [-l login_name] [-i identity_file] [-F configfile]
                      [-J destination] [-o option] destination [command [argument ...]]
            """,
        discussion: """
            Reads ~/.ssh/config and the known_hosts files as ssh does (see ssh-exec --help); \
            SetEnv and SendEnv variables are sent with the session.
            """,
        version: String(cString: sshkit_build_version_line()))

    /// Options may also follow the destination, up to the command, as ssh reads them.
    static func main() async {
        if answersParserQuestions(Array(CommandLine.arguments.dropFirst()), configuration, manual: SSHShellManual.self) { return }
        await Self.main(optionsFirst(Array(CommandLine.arguments.dropFirst()), valued: Set("pliFJo")))
    }

    @OptionGroup var ssh: SSHToolOptions
    @OptionGroup var login: SSHLoginOptions
    @Argument(parsing: .captureForPassthrough, help: Self.argumentsHelp)
    var arguments: [String] = []

    static let argumentsHelp = ArgumentHelp("[user@]host, then a command to run on the terminal instead of the login shell.",
                                            valueName: "destination command")

    func run() async throws {
        let (destination, words) = try splitDestination(arguments)
        let tool = try SSHToolConnection(tool: "ssh-shell", options: ssh, destination: destination,
                                         login: login.login, port: login.port)
        let terminal = SSHTerminal(term: ProcessInfo.processInfo.environment["TERM"] ?? "xterm-256color",
                                   size: LocalTerminal.size() ?? SSHTerminalSize(columns: 80, rows: 24))
        let status: SSHExitStatus
        do {
            let options = tool.channelOptions
            status = try await SSHClient.withConnection(tool.configuration) { conn in
                if let tty = LocalTerminal.openOwnDescriptor() {
                    // a terminal: the connection's worker carries it, as ssh's own loop does
                    defer { close(tty) }
                    return try await Self.join(tty, words.isEmpty ? nil : words.joined(separator: " "),
                                               conn: conn, terminal: terminal, options: options)
                }
                if words.isEmpty {
                    let shell = try await conn.startShell(terminal: terminal, options: options)
                    return try await Self.attach(output: shell.output, input: shell.input,
                                                 resize: { try? shell.resize(to: $0) }, exit: shell.exitStatus)
                }
                let cmd = try await conn.startCommand(words.joined(separator: " "), options: options, terminal: terminal)
                return try await Self.attach(output: cmd.stdout, input: cmd.input,
                                             resize: { try? cmd.resize(to: $0) }, exit: cmd.exitStatus)
            }
        } catch {
            throw tool.failure(error)
        }
        switch status {
        case .exited(let code): throw ExitCode(code)
        case .signaled(let name, _):
            FileHandle.standardError.write(Data("ssh-shell: remote shell killed by SIG\(name)\n".utf8))
            throw ExitCode(255)
        case .unknown: throw ExitCode(255)
        }
    }

    /// Joins the local terminal to the remote one until the remote side ends.
    static func join(_ tty: Int32, _ command: String?, conn: SSHConnection, terminal: SSHTerminal,
                     options: SSHChannelOptions) async throws -> SSHExitStatus {
        let raw = LocalTerminal.enterRawMode()
        defer { raw?.restore() }
        let joined = try await conn.startJoinedTerminal(command, terminal: terminal, joining: tty, options: options)
        defer { joined.cancel() }
        let winch = LocalTerminal.onResize { if let size = LocalTerminal.size() { try? joined.resize(to: size) } }
        defer { winch.cancel() }
        switch try await joined.waitUntilEnded() {
        case .exited(let status): return status
        case .detached, .terminalClosed: return .unknown // no detach byte; the terminal hung up
        }
    }

    /// Wires standard input and output (not a terminal) to the remote terminal until the
    /// remote side ends.
    static func attach(
        output: SSHByteStream, input: SSHByteWriter, resize: @escaping @Sendable (SSHTerminalSize) -> Void,
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

/// ssh-shell as its manual describes it (`--experimental-dump-help`): the same options, the
/// destination and command as a plain argument.
struct SSHShellManual: ParsableCommand {
    static let configuration = SSHShellCommand.configuration
    @OptionGroup var ssh: SSHToolOptions
    @OptionGroup var login: SSHLoginOptions
    @Argument(help: SSHShellCommand.argumentsHelp) var arguments: [String] = []
}
