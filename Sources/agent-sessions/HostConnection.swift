import AgentSessions
import Foundation
import SSHKit
import Synchronization
import TerminalSupport

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

    /// Whether a passphrase, password or keyboard-interactive answer may be asked for (on
    /// the terminal, or through `SSH_ASKPASS`). Off where nobody is there to answer or
    /// the screen is the tool's (the cockpit, `watch`): `BatchMode yes` semantics, a
    /// key that needs a passphrase is skipped and no password is asked.
    static let asks = Atomic<Bool>(true)

    /// Passwords and passphrases typed this run, per host id and per key file (asked once
    /// per run; never written anywhere).
    private static let passwords = Mutex<[HostID: String]>([:])
    private static let passphrases = Mutex<[String: String]>([:])

    /// The connection's configuration.
    ///
    /// A host given by address: its pinned key, else known_hosts (strict); its key files
    /// (a passphrase asked for), ssh-agent or a password asked for.
    ///
    /// A host known by its ssh alias: what `ssh ALIAS` would do (`OpenSSHConfig`), with the
    /// record's own settings winning; `firstUse` answers for a host key no known_hosts file
    /// has (when the configuration's `StrictHostKeyChecking` would ask).
    ///
    /// Either way, a keepalive that notices a dead link within 15 s unless the
    /// configuration sets `ServerAliveInterval`.
    static func configuration(for record: HostRecord, environment: [String: String],
                              hostKeyPolicy: SSHHostKeyPolicy? = nil, jumpHostKeyPolicy: SSHHostKeyPolicy? = nil,
                              firstUse: (@Sendable (SSHHostKeyPrompt) async -> Bool)? = nil)
        throws -> SSHConfiguration
    {
        if let reference = record.openSSH {
            return try openSSHConfiguration(for: record, reference, hostKeyPolicy: hostKeyPolicy,
                                            jumpHostKeyPolicy: jumpHostKeyPolicy, firstUse: firstUse)
        }
        let policy = hostKeyPolicy ?? (record.hostKeyFingerprint.map { .pinned([$0]) } ?? .strict(knownHosts(environment: environment)))
        var config = SSHConfiguration(host: record.address, port: record.port, user: record.user,
                                      authentication: authentication(for: record), hostKeyPolicy: policy,
                                      connectTimeout: .seconds(10))
        config.keepalive = SSHKeepalive(interval: .seconds(5), maxMissed: 3)
        if let jump = record.jumpHost {
            config.jumpHosts = [try jumpHost(jump, of: config, policy: jumpHostKeyPolicy ?? .strict(knownHosts(environment: environment)))]
        }
        return config
    }

    private static func jumpHost(_ jump: String, of config: SSHConfiguration, policy: SSHHostKeyPolicy) throws
        -> SSHConfiguration
    {
        let spec = try HostSpec(parsing: jump, defaultUser: config.user)
        var hop = config
        hop.host = spec.address
        hop.port = spec.port
        hop.user = spec.user
        hop.hostKeyPolicy = policy
        hop.jumpHosts = []
        hop.proxyCommand = nil
        return hop
    }

    /// The configuration `ssh ALIAS` resolves, read again now.
    private static func openSSHConfiguration(for record: HostRecord, _ reference: OpenSSHHostReference,
                                             hostKeyPolicy: SSHHostKeyPolicy?, jumpHostKeyPolicy: SSHHostKeyPolicy?,
                                             firstUse: (@Sendable (SSHHostKeyPrompt) async -> Bool)?) throws
        -> SSHConfiguration
    {
        let files = OpenSSHConfig(configFile: reference.configFile, options: reference.options,
                                  allowsMatchExec: reference.allowsMatchExec)
        let prompts = responders(for: record)
        let interaction = SSHConfigInteraction(
            confirmUnknownHostKey: firstUse, keyboardInteractive: prompts.keyboardInteractive,
            password: prompts.password, passphrase: prompts.passphrase,
            // the user's own configuration says so: do what ssh does with it
            allowsInsecureHostKeyChecking: true)
        let resolved: (host: SSHHostConfig, configuration: SSHConfiguration)
        do throws(SSHConfigError) {
            resolved = try files.resolveConnection(for: reference.alias, user: record.user.isEmpty ? nil : record.user,
                                                   port: record.port == 0 ? nil : record.port, interaction: interaction)
        } catch {
            throw Failure(.usage, "\(record.name): the OpenSSH configuration for \(reference.alias): \(error)")
        }
        var config = resolved.configuration
        if record.authentication != .openSSH { config.authentication = authentication(for: record) }
        if let pinned = record.hostKeyFingerprint { config.hostKeyPolicy = .pinned([pinned]) }
        if let hostKeyPolicy { config.hostKeyPolicy = hostKeyPolicy }
        if let jump = record.jumpHost {
            let policy = jumpHostKeyPolicy ?? config.hostKeyPolicy
            config.jumpHosts = [try jumpHost(jump, of: config, policy: policy)]
            config.proxyCommand = nil
        }
        if resolved.host.serverAliveInterval <= 0 {
            config.keepalive = SSHKeepalive(interval: .seconds(5), maxMissed: 3)
        }
        if resolved.host.connectTimeout == nil { config.connectTimeout = .seconds(10) }
        return config
    }

    /// A host given by address: its own choice of credentials, with what must be typed
    /// asked for when it is needed.
    static func authentication(for record: HostRecord) -> SSHAuthentication {
        let prompts = responders(for: record)
        switch record.authentication {
        case .keyFiles(let paths):
            return SSHAuthentication(paths.map { .privateKeyFile(path: ($0 as NSString).expandingTildeInPath, passphrase: nil) },
                                     passphrase: prompts.passphrase)
        case .sshAgent:
            return .agent()
        case .passwordPrompt:
            guard let password = prompts.password else {
                // nobody to ask: the method is there, so the failure says what was missing
                return SSHAuthentication([.passwordPrompt(attempts: 1) { _ in throw NobodyToAsk(what: "a password") }])
            }
            return SSHAuthentication([.passwordPrompt(attempts: 3, password)])
        case .openSSH:
            return .agent()
        }
    }

    struct NobodyToAsk: Error, CustomStringConvertible {
        var what: String
        var description: String { "\(what) is needed and there is nobody to ask (no terminal, and no SSH_ASKPASS)" }
    }

    /// What the connection asks, on the terminal or through `SSH_ASKPASS`, one question at
    /// a time; nil each when nobody can be asked (see `asks`).
    static func responders(for record: HostRecord) -> (
        passphrase: (@Sendable (SSHPassphraseRequest) async throws -> String?)?,
        password: (@Sendable (SSHPasswordRequest) async throws -> String?)?,
        keyboardInteractive: (@Sendable (SSHKeyboardInteractiveChallenge) async throws -> [String])?
    ) {
        guard asks.load(ordering: .relaxed), TerminalPrompt.canAsk else { return (nil, nil, nil) }
        let id = record.id
        let passphrase: @Sendable (SSHPassphraseRequest) async throws -> String? = { request in
            let key = request.keyPath ?? ""
            if request.attempt == 1, let known = passphrases.withLock({ $0[key] }) { return known }
            passphrases.withLock { $0[key] = nil }
            guard let typed = await TerminalPrompt.ask(request.prompt, echo: false), !typed.isEmpty else { return nil }
            passphrases.withLock { $0[key] = typed }
            return typed
        }
        let password: @Sendable (SSHPasswordRequest) async throws -> String? = { request in
            if request.attempt == 1, let known = passwords.withLock({ $0[id] }) { return known }
            passwords.withLock { $0[id] = nil }
            if request.attempt > 1 { TerminalPrompt.show("Permission denied, please try again.\n") }
            guard let typed = await TerminalPrompt.ask(request.prompt, echo: false) else { return nil }
            passwords.withLock { $0[id] = typed }
            return typed
        }
        let keyboardInteractive: @Sendable (SSHKeyboardInteractiveChallenge) async throws -> [String] = { challenge in
            if !challenge.name.isEmpty { TerminalPrompt.show(challenge.name + "\n") }
            if !challenge.instruction.isEmpty { TerminalPrompt.show(challenge.instruction + "\n") }
            var answers: [String] = []
            for prompt in challenge.prompts {
                guard let answer = await TerminalPrompt.ask(prompt.text, echo: prompt.echo) else {
                    throw NobodyToAsk(what: "an answer to \"\(prompt.text)\"")
                }
                answers.append(answer)
            }
            return answers
        }
        return (passphrase, password, keyboardInteractive)
    }
}

/// Name lookups, as ssh makes them before connecting.
enum HostLookup {
    /// Why `name` does not resolve to an address (getaddrinfo's message, as ssh gives it:
    /// "Name or service not known"), or nil when it does or when the lookup could not be
    /// made for another reason (the connection then says what went wrong).
    static func problem(resolving name: String) -> String? {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(name, nil, &hints, &list)
        if let list { freeaddrinfo(list) }
        switch rc {
        case 0, EAI_MEMORY, EAI_SYSTEM: return nil
        default: return String(cString: gai_strerror(rc))
        }
    }
}
