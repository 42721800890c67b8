// ssh-exec: run one command on a server and exit with its status, like `ssh host cmd`.
//
//   ssh-exec --host 127.0.0.1 --port 2222 --user me --key ~/.ssh/id_ed25519 \
//            --fingerprint SHA256:... -- uname -a
import ArgumentParser
import ExampleSupport
import Foundation
import SSHKit

@main
struct SSHExec: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ssh-exec",
        abstract: "Run a command over SSH; print its output and exit with its status.")

    @OptionGroup var connection: ConnectionOptions
    @Argument(parsing: .captureForPassthrough, help: "The command, run by the remote login shell.")
    var command: [String]

    func run() async throws {
        let config = try connection.configuration()
        let words = command.first == "--" ? Array(command.dropFirst()) : command
        guard !words.isEmpty else { throw ValidationError("no command given") }

        do {
            let result = try await SSHClient.withConnection(config) { conn in
                try await conn.execute(words.joined(separator: " "), outputLimit: 1 << 30)
            }
            FileHandle.standardOutput.write(Data(result.stdout))
            FileHandle.standardError.write(Data(result.stderr))
            switch result.exitStatus {
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
        } catch let error as SSHError {
            FileHandle.standardError.write(Data("ssh-exec: \(error)\n".utf8))
            throw ExitCode(255)
        }
    }
}
