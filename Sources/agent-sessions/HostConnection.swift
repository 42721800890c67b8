import AgentSessions
import Foundation
import SSHKit
import Synchronization

/// `user@host[:port]`, as ssh and scp take it (`[::1]:2222` for an IPv6 address).
struct HostSpec: Equatable, CustomStringConvertible {
    var user: String
    var address: String
    var port: Int

    init(user: String, address: String, port: Int) {
        self.user = user
        self.address = address
        self.port = port
    }

    /// - Throws: `Failure.usage` naming what is wrong.
    init(parsing text: String, defaultUser: String? = nil) throws {
        var rest = Substring(text)
        var user = defaultUser
        if let at = rest.lastIndex(of: "@") {
            user = String(rest[..<at])
            rest = rest[rest.index(after: at)...]
        }
        guard let user, !user.isEmpty else { throw Failure.usage("\(text): give the user, as user@host[:port]") }
        var port = 22
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw Failure.usage("\(text): unclosed [ in the address") }
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") {
                guard let p = Int(after.dropFirst()), (1...65535).contains(p) else {
                    throw Failure.usage("\(text): the port must be a number from 1 to 65535")
                }
                port = p
            } else if !after.isEmpty {
                throw Failure.usage("\(text): unexpected text after ]")
            }
            rest = rest[rest.index(after: rest.startIndex)..<close]
        } else if let colon = rest.lastIndex(of: ":"), rest.firstIndex(of: ":") == colon {
            guard let p = Int(rest[rest.index(after: colon)...]), (1...65535).contains(p) else {
                throw Failure.usage("\(text): the port must be a number from 1 to 65535")
            }
            port = p
            rest = rest[..<colon]
        }
        guard !rest.isEmpty, !rest.contains(where: { $0.isWhitespace || $0 == "/" }) else {
            throw Failure.usage("\(text): not a host name or address")
        }
        self.init(user: user, address: String(rest), port: port)
    }

    var description: String {
        let host = address.contains(":") ? "[\(address)]" : address
        return port == 22 ? "\(user)@\(host)" : "\(user)@\(host):\(port)"
    }
}

/// How the tool connects to a host record: its credentials, its host key check, its jump host.
enum HostConnection {
    /// The user's known_hosts (OpenSSH's): `~/.ssh/known_hosts`, hashed like
    /// `HashKnownHosts yes`.
    static func knownHosts(environment: [String: String]) -> SSHKnownHostsStore {
        let home = environment["HOME"] ?? NSHomeDirectory()
        return SSHKnownHostsStore(path: home + "/.ssh/known_hosts", hostFormat: .hashed)
    }

    /// Passwords typed this run, per host id (asked once; never written anywhere).
    private static let passwords = Mutex<[String: String]>([:])

    /// The connection's configuration: the host's pinned key, else known_hosts (strict);
    /// its key files, ssh-agent or a password asked on the terminal; a keepalive that
    /// notices a dead link within 15 s.
    static func configuration(for record: HostRecord, environment: [String: String],
                              hostKeyPolicy: SSHHostKeyPolicy? = nil, jumpHostKeyPolicy: SSHHostKeyPolicy? = nil)
        throws -> SSHConfiguration
    {
        let policy = hostKeyPolicy ?? (record.hostKeyFingerprint.map { .pinned([$0]) } ?? .strict(knownHosts(environment: environment)))
        var config = SSHConfiguration(host: record.address, port: record.port, user: record.user,
                                      authentication: try authentication(for: record), hostKeyPolicy: policy,
                                      connectTimeout: .seconds(10))
        config.keepalive = SSHKeepalive(interval: .seconds(5), maxMissed: 3)
        if let jump = record.jumpHost {
            let spec = try HostSpec(parsing: jump, defaultUser: record.user)
            var hop = config
            hop.host = spec.address
            hop.port = spec.port
            hop.user = spec.user
            hop.hostKeyPolicy = jumpHostKeyPolicy ?? .strict(knownHosts(environment: environment))
            hop.jumpHosts = []
            config.jumpHosts = [hop]
        }
        return config
    }

    static func authentication(for record: HostRecord) throws -> SSHAuthentication {
        switch record.authentication {
        case .keyFiles(let paths):
            return SSHAuthentication(paths.map { .privateKeyFile(path: ($0 as NSString).expandingTildeInPath, passphrase: nil) })
        case .sshAgent:
            return .agent()
        case .passwordPrompt:
            if let known = passwords.withLock({ $0[record.id] }) { return .password(known) }
            let password = try askPassword("\(record.user)@\(record.address)'s password: ")
            passwords.withLock { $0[record.id] = password }
            return .password(password)
        }
    }

    /// Reads a password from the terminal (/dev/tty) without echo.
    static func askPassword(_ prompt: String) throws -> String {
        let fd = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard fd >= 0 else {
            throw Failure(.connection, "the host authenticates with a password and there is no terminal to ask it on")
        }
        defer { close(fd) }
        var saved = termios()
        let isTerminal = tcgetattr(fd, &saved) == 0
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        if isTerminal { tcsetattr(fd, TCSAFLUSH, &silent) }
        defer {
            if isTerminal { tcsetattr(fd, TCSAFLUSH, &saved) }
            _ = Glibc.write(fd, "\n", 1)
        }
        _ = prompt.withCString { Glibc.write(fd, $0, strlen($0)) }
        var bytes: [UInt8] = []
        var c: UInt8 = 0
        while read(fd, &c, 1) == 1, c != UInt8(ascii: "\n"), c != UInt8(ascii: "\r") {
            bytes.append(c)
            if bytes.count > 4096 { break }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
