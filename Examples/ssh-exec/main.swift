// ssh-exec: run one command on a server and exit with its status, like `ssh host cmd`.
//
//   ssh-exec --host 127.0.0.1 --port 2222 --user me --key ~/.ssh/id_ed25519 \
//            --fingerprint SHA256:... -- uname -a
import ArgumentParser
import Foundation
import SSHKit

@main
struct SSHExec: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ssh-exec",
        abstract: "Run a command over SSH; print its output and exit with its status.")

    @Option(help: "Server host name or address.") var host: String
    @Option(help: "Server port.") var port: Int = 22
    @Option(help: "User to log in as.") var user: String
    @Option(help: "Private key file (OpenSSH or PEM).") var key: String?
    @Option(help: "Passphrase of the private key.") var passphrase: String?
    @Flag(help: "Read a password from the SSHKIT_PASSWORD environment variable.") var passwordFromEnv = false
    @Flag(help: "Use the keys in ssh-agent (SSH_AUTH_SOCK).") var agent = false
    @Option(help: "Accept only this host key (SHA256:... as ssh-keygen -l prints it); repeatable.")
    var fingerprint: [String] = []
    @Flag(help: "Accept any host key. Insecure: anyone on the path can impersonate the server.")
    var insecureAcceptAnyHostKey = false
    @Option(help: "Connect timeout in seconds.") var timeout: Double = 10
    @Argument(parsing: .captureForPassthrough, help: "The command, run by the remote login shell.")
    var command: [String]

    func run() async throws {
        var methods: [SSHAuthentication.Method] = []
        if let key { methods.append(.privateKeyFile(path: key, passphrase: passphrase)) }
        if agent { methods.append(.agent(socketPath: nil)) }
        if passwordFromEnv {
            guard let pw = ProcessInfo.processInfo.environment["SSHKIT_PASSWORD"] else {
                throw ValidationError("--password-from-env given but SSHKIT_PASSWORD is not set")
            }
            methods.append(.password(pw))
        }
        guard !methods.isEmpty else { throw ValidationError("give --key, --agent or --password-from-env") }
        let policy: SSHHostKeyPolicy
        if !fingerprint.isEmpty {
            policy = .pinned(fingerprint)
        } else if insecureAcceptAnyHostKey {
            policy = .insecureAcceptAnyHostKey
        } else {
            throw ValidationError("give --fingerprint SHA256:... or, knowingly, --insecure-accept-any-host-key")
        }
        let words = command.first == "--" ? Array(command.dropFirst()) : command
        guard !words.isEmpty else { throw ValidationError("no command given") }

        let config = SSHConfiguration(
            host: host, port: port, user: user, authentication: SSHAuthentication(methods),
            hostKeyPolicy: policy, connectTimeout: .milliseconds(Int64(timeout * 1000)))
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
