// known-hosts: scan a server's host keys and manage an OpenSSH known_hosts file.
//
//   known-hosts scan 127.0.0.1 -p 2222
//   known-hosts add    --file ~/.ssh/known_hosts 127.0.0.1 -p 2222 [--plain]
//   known-hosts check  --file ~/.ssh/known_hosts 127.0.0.1 -p 2222   (exit 0 known, 1 changed, 2 unknown)
//   known-hosts remove --file ~/.ssh/known_hosts 127.0.0.1 -p 2222
import ArgumentParser
import CBuildInfo
import Foundation
import SSHKit

@main
struct KnownHosts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "known-hosts",
        abstract: "Scan SSH host keys and manage known_hosts files.",
        version: String(cString: sshkit_build_version_line()),
        subcommands: [Scan.self, Add.self, Check.self, Remove.self])
}

struct Target: ParsableArguments {
    @Argument(help: "Server host name or address.") var host: String
    @Option(name: .shortAndLong, help: "Server port.") var port: Int = 22
    @Option(help: "Timeout per connection attempt, seconds.") var timeout: Double = 5
}

struct FileOption: ParsableArguments {
    @Option(help: "The known_hosts file.") var file: String = NSHomeDirectory() + "/.ssh/known_hosts"
}

/// Fetches the server's key for each host key type, without authenticating: the
/// policy records the presented key and rejects it.
func scan(_ t: Target) async throws -> [SSHHostKey] {
    var keys: [SSHHostKey] = []
    for type in ["ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "rsa-sha2-512"] {
        var config = SSHConfiguration(
            host: t.host, port: t.port, user: "known-hosts-scan", authentication: .password(""),
            hostKeyPolicy: .custom { _ in .reject(reason: "scanning") },
            connectTimeout: .milliseconds(Int64(t.timeout * 1000)))
        config.algorithms.hostKey = [type]
        do throws(SSHError) {
            let conn = try await SSHClient.connect(config)
            await conn.close() // cannot happen: the policy rejects
        } catch {
            switch error.code {
            case .hostKeyRejected:
                if let key = error.presentedHostKey, !keys.contains(key) { keys.append(key) }
            case .keyExchangeFailed:
                continue // the server has no key of this type
            default:
                throw error
            }
        }
    }
    guard !keys.isEmpty else { throw ValidationError("no host key obtained from \(t.host):\(t.port)") }
    return keys
}

extension KnownHosts {
    struct Scan: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the server's host keys and fingerprints.")
        @OptionGroup var target: Target
        @Flag(help: "Print known_hosts lines instead of fingerprints.") var lines = false

        func run() async throws {
            let name = SSHKnownHostsFile.lookupName(host: target.host, port: target.port)
            for key in try await scan(target) {
                print(lines ? "\(name) \(key.openSSHString)" : "\(name) \(key.type) \(key.sha256Fingerprint)")
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Scan the server and add its keys to the file.")
        @OptionGroup var target: Target
        @OptionGroup var file: FileOption
        @Flag(help: "Write the host name in clear instead of hashed.") var plain = false

        func run() async throws {
            let store = SSHKnownHostsStore(path: file.file, hostFormat: plain ? .plain : .hashed)
            for key in try await scan(target) {
                try await store.add(key, host: target.host, port: target.port)
                print("added \(key.type) \(key.sha256Fingerprint)")
            }
        }
    }

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Compare the server's keys with the file: exit 0 known, 1 changed or revoked, 2 unknown.")
        @OptionGroup var target: Target
        @OptionGroup var file: FileOption

        func run() async throws {
            let known = try await SSHKnownHostsStore(path: file.file).lookup(host: target.host, port: target.port)
            let presented = try await scan(target)
            if presented.contains(where: { known.revoked.contains($0) }) {
                print("REVOKED: the server presents a revoked key")
                throw ExitCode(1)
            }
            if known.keys.isEmpty {
                print("unknown host")
                throw ExitCode(2)
            }
            let matching = presented.filter { known.keys.contains($0) }
            let knownTypes = Set(known.keys.map(\.type))
            let changed = presented.filter { knownTypes.contains($0.type) && !known.keys.contains($0) }
            for key in changed { print("CHANGED: \(key.type) is now \(key.sha256Fingerprint)") }
            if !changed.isEmpty || matching.isEmpty { throw ExitCode(1) }
            for key in matching { print("ok \(key.type) \(key.sha256Fingerprint)") }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove the host's entries from the file.")
        @OptionGroup var target: Target
        @OptionGroup var file: FileOption

        func run() async throws {
            let n = try await SSHKnownHostsStore(path: file.file).remove(host: target.host, port: target.port)
            print("removed \(n) line\(n == 1 ? "" : "s")")
        }
    }
}
