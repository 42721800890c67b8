// The connection options every example takes, and the configuration they make.
import ArgumentParser
import Foundation
import SSHKit

public struct ConnectionOptions: ParsableArguments {
    @Option(help: "Server host name or address.") public var host: String
    @Option(help: "Server port.") public var port: Int = 22
    @Option(help: "User to log in as.") public var user: String
    @Option(help: "Private key file (OpenSSH or PEM).") public var key: String?
    @Option(help: "Passphrase of the private key.") public var passphrase: String?
    @Flag(help: "Read a password from the SSHKIT_PASSWORD environment variable.") public var passwordFromEnv = false
    @Flag(help: "Use the keys in ssh-agent (SSH_AUTH_SOCK).") public var agent = false
    @Option(help: "Accept only this host key (SHA256:... as ssh-keygen -l prints it); repeatable.")
    public var fingerprint: [String] = []
    @Flag(help: "Accept any host key. Insecure: anyone on the path can impersonate the server.")
    public var insecureAcceptAnyHostKey = false
    @Option(help: "Connect timeout in seconds.") public var timeout: Double = 10

    public init() {}

    /// The configuration these options describe; a missing decision is a usage error.
    public func configuration() throws -> SSHConfiguration {
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
        return SSHConfiguration(
            host: host, port: port, user: user, authentication: SSHAuthentication(methods),
            hostKeyPolicy: policy, connectTimeout: .milliseconds(Int64(timeout * 1000)))
    }
}
