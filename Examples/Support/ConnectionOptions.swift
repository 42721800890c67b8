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
    @Option(name: .customLong("jump"),
            help: "Reach the server through this jump host first, [user@]host[:port] (ssh -J); repeatable, in order. Same credentials as the server.")
    public var jumpHosts: [String] = []
    @Option(help: "Accept only this host key for the jump hosts (SHA256:...); repeatable.")
    public var jumpFingerprint: [String] = []

    public init() {}

    /// The configuration these options describe; a missing decision is a usage error.
    public func configuration() throws -> SSHConfiguration {
        var methods: [SSHAuthentication.Method] = []
        if let key {
            // like ssh: a key others can read is ignored, with its warning
            if let warning = Self.unprotectedKeyWarning(key) {
                FileHandle.standardError.write(Data(warning.utf8))
            } else {
                methods.append(.privateKeyFile(path: key, passphrase: passphrase))
            }
        }
        if agent { methods.append(.agent(socketPath: nil)) }
        if passwordFromEnv {
            guard let pw = ProcessInfo.processInfo.environment["SSHKIT_PASSWORD"] else {
                throw ValidationError("--password-from-env given but SSHKIT_PASSWORD is not set")
            }
            methods.append(.password(pw))
        }
        guard !methods.isEmpty else {
            if key != nil {
                // as ssh does when the one key it had was ignored
                FileHandle.standardError.write(Data("no usable authentication method: the private key was ignored\n".utf8))
                throw ExitCode(255)
            }
            throw ValidationError("give --key, --agent or --password-from-env")
        }
        let policy: SSHHostKeyPolicy
        if !fingerprint.isEmpty {
            policy = .pinned(fingerprint)
        } else if insecureAcceptAnyHostKey {
            policy = .insecureAcceptAnyHostKey
        } else {
            throw ValidationError("give --fingerprint SHA256:... or, knowingly, --insecure-accept-any-host-key")
        }
        var config = SSHConfiguration(
            host: host, port: port, user: user, authentication: SSHAuthentication(methods),
            hostKeyPolicy: policy, connectTimeout: .milliseconds(Int64(timeout * 1000)))
        for spec in jumpHosts {
            let jumpPolicy: SSHHostKeyPolicy
            if !jumpFingerprint.isEmpty {
                jumpPolicy = .pinned(jumpFingerprint)
            } else if insecureAcceptAnyHostKey {
                jumpPolicy = .insecureAcceptAnyHostKey
            } else {
                throw ValidationError("give --jump-fingerprint SHA256:... for the jump hosts")
            }
            var hop = config
            hop.hostKeyPolicy = jumpPolicy
            var rest = Substring(spec)
            if let at = rest.lastIndex(of: "@") {
                hop.user = String(rest[..<at])
                rest = rest[rest.index(after: at)...]
            }
            if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
                guard let p = Int(rest[rest.index(after: colon)...]) else { throw ValidationError("bad jump host \(spec)") }
                hop.port = p
                rest = rest[..<colon]
            } else {
                hop.port = 22
            }
            hop.host = String(rest).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
            config.jumpHosts.append(hop)
        }
        return config
    }

    /// OpenSSH's check (sshkey_perm_ok): a private key file owned by this user that its
    /// group or others may access is refused. Returns ssh's warning for such a file.
    public static func unprotectedKeyWarning(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0, st.st_uid == getuid(), st.st_mode & 0o077 != 0 else { return nil }
        let mode = String(UInt32(st.st_mode) & 0o777, radix: 8)
        return """
            @@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
            @         WARNING: UNPROTECTED PRIVATE KEY FILE!          @
            @@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
            Permissions 0\(mode) for '\(path)' are too open.
            It is required that your private key files are NOT accessible by others.
            This private key will be ignored.

            """
    }
}
