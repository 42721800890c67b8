// ssh-exec: run one command on a server, like `ssh host cmd`: standard input goes to
// the command (then EOF), its output comes back as it is written, and ssh-exec exits
// with the command's status (255 when the connection failed, as ssh).
//
//   echo hello | ssh-exec prod-db tr a-z A-Z            (~/.ssh/config, ~/.ssh/known_hosts)
//   ssh-exec -p 2222 -i ~/.ssh/id_ed25519 -J bastion me@10.0.0.5 uname -a
import ArgumentParser
import CBuildInfo
import ExampleSupport
import Foundation
import SSHKit
import Synchronization

@main
struct SSHExec: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ssh-exec",
        abstract: "Run a command over SSH; stream its input and output and exit with its status.",
        usage: """
            ssh-exec [-nqvA] [-p port] [-l login_name] [-i identity_file] [-F configfile]
                     [-J destination] [-o option] destination command [argument ...]
            """,
        discussion: """
            Reads ~/.ssh/config and /etc/ssh/ssh_config, or the -F file, and the known_hosts files they name, \
            as ssh does. An unknown host key is shown and asked about on the terminal (or through \
            SSH_ASKPASS) and recorded if accepted; with nobody to ask it is refused. Passwords and \
            keyboard-interactive prompts are asked the same way. The destination is [user@]host or \
            ssh://[user@]host[:port]; options go before it or after it, up to the command. Exit status: the \
            command's (141, by SIGPIPE, when the reader of its output went away), or 255 when \
            the connection or the configuration failed.
            """,
        version: String(cString: sshkit_build_version_line()))

    /// Options may also follow the destination, up to the command, as ssh reads them.
    static func main() async {
        if answersParserQuestions(Array(CommandLine.arguments.dropFirst()), configuration, manual: SSHExecManual.self) { return }
        await Self.main(optionsFirst(Array(CommandLine.arguments.dropFirst()), valued: Set("pliFJo")))
    }

    @OptionGroup var ssh: SSHToolOptions
    @OptionGroup var login: SSHLoginOptions
    @OptionGroup var exec: ExecOptions
    @Argument(parsing: .captureForPassthrough, help: Self.argumentsHelp)
    var arguments: [String] = []

    static let argumentsHelp = ArgumentHelp("[user@]host, then the command, run by the remote login shell.",
                                            valueName: "destination command")

    func run() async throws {
        // a reader that went away (`| head`) is an error on write, not a signal that kills us
        signal(SIGPIPE, SIG_IGN)
        let (destination, words) = try splitDestination(arguments)
        guard !words.isEmpty else { throw ValidationError("no command given (ssh-shell opens a login shell)") }
        let tool = try SSHToolConnection(tool: "ssh-exec", options: ssh, destination: destination,
                                         login: login.login, port: login.port)

        let status: SSHExitStatus
        do {
            let options = tool.channelOptions
            status = try await SSHClient.withConnection(tool.configuration) { conn in
                try await conn.withCommand(words.joined(separator: " "), options: options) { [noStdin = exec.noStdin] cmd in
                    try await Self.relay(cmd, forwardInput: !noStdin)
                }
            }
        } catch let closed as OutputClosed {
            // as ssh ends: by the SIGPIPE a write to a pipe nobody reads raises (a shell
            // reports 141), once the channel is closed; a closed stderr alone is 255
            guard closed.fd == STDOUT_FILENO else { throw ExitCode(255) }
            signal(SIGPIPE, SIG_DFL)
            raise(SIGPIPE)
            throw ExitCode(128 + SIGPIPE)
        } catch {
            throw tool.failure(error)
        }
        switch status {
        case .exited(let code): throw ExitCode(code)
        case .signaled(let name, _):
            FileHandle.standardError.write(Data("ssh-exec: remote command killed by SIG\(name)\n".utf8))
            // like a shell: 128 + the signal's number (signal names are the same everywhere)
            let numbers = ["HUP": 1, "INT": 2, "QUIT": 3, "ILL": 4, "ABRT": 6, "FPE": 8, "KILL": 9,
                           "SEGV": 11, "PIPE": 13, "ALRM": 14, "TERM": 15, "USR1": 10, "USR2": 12]
            throw ExitCode(Int32(128 + (numbers[name] ?? 127)))
        case .unknown:
            FileHandle.standardError.write(Data("ssh-exec: the server reported no exit status\n".utf8))
            throw ExitCode(255)
        }
    }

    /// Standard input to the command while its stdout and stderr are copied out as they
    /// arrive; returns its exit status once both outputs ended.
    static func relay(_ cmd: SSHCommand, forwardInput: Bool) async throws -> SSHExitStatus {
        let input = Task {
            if forwardInput {
                await StandardInput.forward(to: cmd)
            } else {
                try? cmd.input.finish()
            }
        }
        defer { input.cancel() } // the command may end before our input does (ssh does not wait)
        // both outputs at once; the first failure (our stdout or stderr closed) ends the
        // other copy too, rather than leaving it waiting on a command that blocked. The
        // other copy then ends with `cancelled`, which may come first: the closed output
        // is what is reported.
        let closed = ClosedOutput()
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await copy(cmd.stdout, to: STDOUT_FILENO, of: cmd, closed: closed) }
                group.addTask { try await copy(cmd.stderr, to: STDERR_FILENO, of: cmd, closed: closed) }
                try await group.waitForAll()
            }
        } catch {
            if let fd = closed.fd.withLock({ $0 }) { throw OutputClosed(fd: fd) }
            throw error
        }
        return try await cmd.exitStatus()
    }

    /// Writes each chunk to `fd` as it comes; a closed `fd` (EPIPE) ends the command at
    /// once (TERM, and its channel closed), which also ends the other output's copy.
    static func copy(_ stream: SSHByteStream, to fd: Int32, of cmd: SSHCommand, closed: ClosedOutput) async throws {
        for try await chunk in stream {
            guard writeAll(chunk, to: fd) else {
                closed.fd.withLock { $0 = $0 ?? fd }
                cmd.cancel()
                throw OutputClosed(fd: fd)
            }
        }
    }
}

/// Our own stdout or stderr is gone (the reader of a pipe exited).
struct OutputClosed: Error {
    var fd: Int32
}

/// Which of our outputs went away first, if one did.
final class ClosedOutput: Sendable {
    let fd = Mutex<Int32?>(nil)
}

func writeAll(_ bytes: [UInt8], to fd: Int32) -> Bool {
    var offset = 0
    while offset < bytes.count {
        let n = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { return false }
        offset += n
    }
    return true
}

/// Standard input, read on a thread of its own (a blocking read must not hold one of the
/// concurrency pool's threads) and handed over a chunk at a time: the next read waits
/// until the command took the last chunk, so a slow command slows the reading down.
enum StandardInput {
    static func forward(to cmd: SSHCommand) async {
        let (chunks, continuation) = AsyncStream<[UInt8]>.makeStream()
        let taken = DispatchSemaphore(value: 0)
        Thread {
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            while true {
                let n = read(STDIN_FILENO, &buffer, buffer.count)
                if n < 0 && errno == EINTR { continue }
                if n < 0 && errno == EAGAIN {
                    // a parent left our stdin non-blocking: wait for data, not EOF
                    var p = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
                    _ = poll(&p, 1, -1)
                    continue
                }
                if n <= 0 { break }
                continuation.yield(Array(buffer[0..<n]))
                taken.wait()
            }
            continuation.finish()
        }.start()
        for await chunk in chunks {
            // the command exited without reading everything: like ssh, stop sending
            guard (try? await cmd.input.write(chunk)) != nil else { return }
            taken.signal()
        }
        if !Task.isCancelled { try? cmd.input.finish() }
    }
}

/// ssh-exec's own options.
struct ExecOptions: ParsableArguments {
    @Flag(name: .customShort("n"), help: "Send no standard input (EOF at once), like ssh -n.")
    var noStdin = false
}

/// ssh-exec as its manual describes it (`--experimental-dump-help`): the same options, the
/// destination and command as a plain argument.
struct SSHExecManual: ParsableCommand {
    static let configuration = SSHExec.configuration
    @OptionGroup var ssh: SSHToolOptions
    @OptionGroup var login: SSHLoginOptions
    @OptionGroup var exec: ExecOptions
    @Argument(help: SSHExec.argumentsHelp) var arguments: [String] = []
}
