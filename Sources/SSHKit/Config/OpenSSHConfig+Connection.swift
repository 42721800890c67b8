import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What a configuration file cannot say: the answers a person gives `ssh` at the
/// terminal, and the choices a program must make explicitly.
public struct SSHConfigInteraction: Sendable {
    /// `StrictHostKeyChecking ask` (ssh's default) for a host no known_hosts file
    /// knows: shown the key, returns true to trust it (it is then recorded, as ssh
    /// records it). nil, or `BatchMode yes`: an unknown host is refused, as ssh refuses
    /// it without a terminal. A changed key is refused whatever this answers.
    public var confirmUnknownHostKey: (@Sendable (SSHHostKeyPrompt) async -> Bool)?
    /// Keyboard-interactive prompts (password and one-time codes on most servers),
    /// tried after the keys; nil, or `BatchMode yes`: no such prompts.
    public var keyboardInteractive: (@Sendable (SSHKeyboardInteractiveChallenge) async throws -> [String])?
    /// Password authentication, last, as ssh asks "user@host's password:" (up to
    /// `NumberOfPasswordPrompts` times); nil, `PasswordAuthentication no` or
    /// `BatchMode yes`: no password is asked for. Return nil to skip it.
    public var password: (@Sendable (SSHPasswordRequest) async throws -> String?)?
    /// The passphrase of an encrypted identity file, asked when ssh would ask it
    /// (when its turn in the order comes; `NumberOfPasswordPrompts` times while it is
    /// wrong); nil, or `BatchMode yes`: such a key is skipped, as ssh skips it then.
    public var passphrase: (@Sendable (SSHPassphraseRequest) async throws -> String?)?
    /// `StrictHostKeyChecking no` verifies nothing that matters: it records unknown
    /// keys and accepts changed ones. A configuration that says so is refused unless
    /// this is true (a tool that does what the user's ssh_config says may set it).
    public var allowsInsecureHostKeyChecking: Bool
    /// The connection's logger, also for the warnings of `StrictHostKeyChecking no`;
    /// discards everything by default.
    public var logger: Logger
    /// libssh's own log verbosity for the connection (and its jump hosts).
    public var libsshVerbosity: Int

    /// The answers and choices for one configuration; by default nobody is asked
    /// anything and `StrictHostKeyChecking no` is refused.
    public init(
        confirmUnknownHostKey: (@Sendable (SSHHostKeyPrompt) async -> Bool)? = nil,
        keyboardInteractive: (@Sendable (SSHKeyboardInteractiveChallenge) async throws -> [String])? = nil,
        password: (@Sendable (SSHPasswordRequest) async throws -> String?)? = nil,
        passphrase: (@Sendable (SSHPassphraseRequest) async throws -> String?)? = nil,
        allowsInsecureHostKeyChecking: Bool = false,
        logger: Logger = Logger(label: "SSHKit", factory: { _ in SwiftLogNoOpLogHandler() }),
        libsshVerbosity: Int = 0
    ) {
        self.confirmUnknownHostKey = confirmUnknownHostKey
        self.keyboardInteractive = keyboardInteractive
        self.password = password
        self.passphrase = passphrase
        self.allowsInsecureHostKeyChecking = allowsInsecureHostKeyChecking
        self.logger = logger
        self.libsshVerbosity = libsshVerbosity
    }
}

/// An unknown host key, as `ssh` shows it before asking "Are you sure you want to
/// continue connecting (yes/no/[fingerprint])?".
public struct SSHHostKeyPrompt: Sendable {
    /// The name the key is looked up and recorded under: `HostKeyAlias`, or the host
    /// (written `[host]:port` in known_hosts when `port` is not 22).
    public let hostName: String
    /// The port the key is looked up and recorded under: 22 with `HostKeyAlias`, otherwise
    /// the connection's port.
    public let port: Int
    /// The key the server presented.
    public let key: SSHHostKey
    /// Where the key will be recorded if accepted (nil: nowhere).
    public let knownHostsFile: String?
}

extension OpenSSHConfig {
    /// The connection `ssh host` would make, from this configuration: `HostName`,
    /// `User`, `Port`; the agent, then each identity file (and its certificates), in
    /// OpenSSH's order, keys that cannot be used skipped as ssh skips them; the host
    /// key checked against `UserKnownHostsFile` and `GlobalKnownHostsFile` under
    /// `StrictHostKeyChecking`; `ProxyJump` hops each resolved from this configuration
    /// too, or `ProxyCommand`; `ConnectTimeout`, `ServerAliveInterval` and
    /// `ServerAliveCountMax`; algorithm lists the configuration changed.
    ///
    /// ```swift
    /// let config = try OpenSSHConfig().connectionConfiguration(for: "prod-db")
    /// let conn = try await SSHClient.connect(config)
    /// ```
    ///
    /// See the OpenSSH guide for the mapping of each keyword and what is not supported.
    /// - Throws: `SSHConfigError`: what `resolve` throws; `.insecure` for
    ///   `StrictHostKeyChecking no` unless allowed; `.invalidValue` for an algorithm
    ///   list with nothing this libssh supports, or a `ProxyJump` chain deeper than 8.
    public func connectionConfiguration(for host: String, user: String? = nil, port: Int? = nil,
                                        interaction: SSHConfigInteraction = .init()) throws(SSHConfigError)
        -> SSHConfiguration
    {
        try resolveConnection(for: host, user: user, port: port, interaction: interaction).configuration
    }

    /// `connectionConfiguration(for:)` and the resolved settings it was made from, from
    /// one resolution (a `Match exec` command runs once): for a tool that also acts on
    /// what a connection does not use by itself (`SetEnv`/`SendEnv`, the forwards,
    /// `RequestTTY`, `ExitOnForwardFailure`).
    public func resolveConnection(for host: String, user: String? = nil, port: Int? = nil,
                                  interaction: SSHConfigInteraction = .init()) throws(SSHConfigError)
        -> (host: SSHHostConfig, configuration: SSHConfiguration)
    {
        try connectionConfiguration(resolving: host, user: user, port: port, interaction: interaction, depth: 0)
    }

    private func connectionConfiguration(resolving host: String, user: String?, port: Int?,
                                         interaction: SSHConfigInteraction, depth: Int) throws(SSHConfigError)
        -> (host: SSHHostConfig, configuration: SSHConfiguration)
    {
        let resolved = try resolve(host, user: user, port: port)
        var config = try resolved.connectionConfiguration(context: context, interaction: interaction)
        guard !resolved.proxyJump.isEmpty else { return (resolved, config) }
        // `ssh -J a,b,c target` runs `ssh -J a,b -W target c`, and so on: only the first
        // hop's own ProxyJump or ProxyCommand applies, the others' are overridden; the
        // hops are resolved without the `-o` options, as ssh passes only `-F` on
        var hopConfig = self
        hopConfig.options = []
        var hops: [SSHConfiguration] = []
        for (i, hop) in resolved.proxyJump.enumerated() {
            guard depth + resolved.proxyJump.count <= 8 else {
                throw SSHConfigError(.invalidValue, "ProxyJump: more than 8 hops to \(host) (a loop?)",
                                     file: "ProxyJump", line: 0)
            }
            var c = try hopConfig.connectionConfiguration(resolving: hop.host, user: hop.user, port: hop.port,
                                                          interaction: interaction,
                                                          depth: depth + resolved.proxyJump.count).configuration
            if i == 0 {
                hops += c.jumpHosts
            } else {
                c.proxyCommand = nil
            }
            c.jumpHosts = []
            hops.append(c)
        }
        config.proxyCommand = nil
        config.jumpHosts = hops
        return (resolved, config)
    }
}

extension SSHHostConfig {
    /// This host's `SSHConfiguration` (without resolving `ProxyJump` hops, which need
    /// the configuration files: use `OpenSSHConfig.connectionConfiguration`).
    func connectionConfiguration(context: OpenSSHConfig.Context, interaction: SSHConfigInteraction)
        throws(SSHConfigError) -> SSHConfiguration
    {
        let logger = interaction.logger
        // an accepted changed key (StrictHostKeyChecking no) turns the prompts off, as
        // ssh turns password authentication off then: a server that may be an impostor
        // gets no password
        let keyChanged = ChangedKeyFlag()
        var config = SSHConfiguration(
            host: hostName, port: port, user: user,
            authentication: authentication(context: context, interaction: interaction, keyChanged: keyChanged),
            hostKeyPolicy: try hostKeyPolicy(interaction: interaction, keyChanged: keyChanged),
            // ConnectTimeout 0 is ssh's "no timeout of its own" (the kernel's, about two
            // minutes for an unanswered SYN): SSHKit needs one, and takes that
            connectTimeout: .seconds(connectTimeout.map { $0 > 0 ? $0 : 120 } ?? 30),
            logger: logger, libsshVerbosity: interaction.libsshVerbosity)
        if serverAliveInterval > 0 {
            // SSHKit's probes go up to a day apart (a longer interval would never fire anyway)
            config.keepalive = SSHKeepalive(interval: .seconds(min(serverAliveInterval, 86_400)),
                                            maxMissed: min(1000, max(1, serverAliveCountMax)))
        }
        config.algorithms = try algorithms()
        // ForwardAgent yes: the agent of IdentityAgent (or SSH_AUTH_SOCK); a path: that one
        if let forward = forwardAgent {
            config.agentForwarding = forward.isEmpty ? agentSocket(environment: context.environment) : forward
        }
        if proxyJump.isEmpty {
            config.proxyCommand = try expandedProxyCommand()
        }
        return config
    }

    /// The agent first (unless `IdentitiesOnly`), then each identity file with its
    /// certificates: `CertificateFile`s (a certificate not for the key is skipped) and
    /// `<file>-cert.pub`, then the bare key (an encrypted one's passphrase asked for
    /// then); then keyboard-interactive, then a password prompt (ssh's
    /// `PreferredAuthentications` order).
    func authentication(context: OpenSSHConfig.Context, interaction: SSHConfigInteraction,
                        keyChanged: ChangedKeyFlag) -> SSHAuthentication
    {
        var methods: [SSHAuthentication.Method] = []
        if !identitiesOnly, let socket = agentSocket(environment: context.environment) {
            methods.append(.agent(socketPath: socket))
        }
        for file in identityFiles {
            // ssh's default list is tried only where a file exists; a configured file
            // that is missing is skipped too (ssh only logs it)
            guard access(file, F_OK) == 0 else {
                if identityFilesConfigured {
                    interaction.logger.debug("identity file not found", metadata: ["path": "\(file)"])
                }
                continue
            }
            for certificate in certificateFiles where access(certificate, R_OK) == 0 {
                methods.append(.privateKeyFile(path: file, passphrase: nil, certificate: certificate))
            }
            let beside = file + "-cert.pub"
            if !certificateFiles.contains(beside), access(beside, R_OK) == 0 {
                methods.append(.privateKeyFile(path: file, passphrase: nil, certificate: beside))
            }
            methods.append(.privateKeyFile(path: file, passphrase: nil))
        }
        if !batchMode, option("kbdinteractiveauthentication", default: true),
           let responder = interaction.keyboardInteractive
        {
            methods.append(.keyboardInteractive { challenge in
                if keyChanged.isSet {
                    throw SSHError(.authenticationFailed,
                                   "keyboard-interactive authentication is disabled to avoid man-in-the-middle attacks "
                                   + "(the host key changed; StrictHostKeyChecking no)")
                }
                return try await responder(challenge)
            })
        }
        let attempts = options["numberofpasswordprompts"]?.first.flatMap(Int.init) ?? 3
        if !batchMode, option("passwordauthentication", default: true), let responder = interaction.password {
            if attempts > 0 {
                methods.append(.passwordPrompt(attempts: attempts) { request in
                    if keyChanged.isSet {
                        throw SSHError(.authenticationFailed,
                                       "password authentication is disabled to avoid man-in-the-middle attacks "
                                       + "(the host key changed; StrictHostKeyChecking no)")
                    }
                    return try await responder(request)
                })
            }
        }
        // ssh asks for a key's passphrase even with NumberOfPasswordPrompts 0 (once)
        return SSHAuthentication(methods, skipsUnusableMethods: true,
                                 passphrase: batchMode ? nil : interaction.passphrase,
                                 passphraseAttempts: max(1, attempts))
    }

    /// The environment `ssh` sends with each session: the `SetEnv` pairs, and each
    /// variable of `local` (this process's environment, usually) that a `SendEnv`
    /// pattern names. A name in both takes its `SetEnv` value. The server's
    /// `AcceptEnv` decides what it keeps (see `SSHChannelOptions.environment`).
    public func sessionEnvironment(local: [String: String]) -> [String: String] {
        var environment: [String: String] = [:]
        for (name, value) in local where sendEnv.contains(where: { SSHConfigSyntax.match(name, $0) }) {
            environment[name] = value
        }
        for pair in setEnv {
            guard let eq = pair.firstIndex(of: "=") else { continue }
            let name = String(pair[..<eq])
            if !setEnv.prefix(while: { $0 != pair }).contains(where: { $0.hasPrefix(name + "=") }) {
                environment[name] = String(pair[pair.index(after: eq)...])
            }
        }
        return environment
    }

    /// A yes/no keyword's first value, `default` when the files do not set it.
    public func option(_ keyword: String, default value: Bool) -> Bool {
        guard let word = options[keyword]?.first?.lowercased() else { return value }
        return word == "yes" || word == "true"
    }

    /// `IdentityAgent` (`none`, `SSH_AUTH_SOCK`, `$VAR` or a path), else `SSH_AUTH_SOCK`.
    func agentSocket(environment: [String: String]) -> String? {
        switch identityAgent {
        case "none"?: return nil
        case nil, "SSH_AUTH_SOCK"?: return environment["SSH_AUTH_SOCK"].flatMap { $0.isEmpty ? nil : $0 }
        case let v? where v.hasPrefix("$"): return environment[String(v.dropFirst())].flatMap { $0.isEmpty ? nil : $0 }
        case let path?: return path.isEmpty ? nil : path // `${VAR}` of an empty variable: no agent, as ssh
        }
    }

    func knownHostsStore() -> SSHKnownHostsFiles {
        SSHKnownHostsFiles(userFiles: userKnownHostsFiles, globalFiles: globalKnownHostsFiles,
                           hostFormat: hashKnownHosts ? .hashed : .plain, hostKeyAlias: hostKeyAlias)
    }

    func hostKeyPolicy(interaction: SSHConfigInteraction, keyChanged: ChangedKeyFlag) throws(SSHConfigError)
        -> SSHHostKeyPolicy
    {
        let store = knownHostsStore()
        switch strictHostKeyChecking {
        case .yes:
            return .strict(store)
        case .acceptNew:
            return .acceptNew(store)
        case .no:
            guard interaction.allowsInsecureHostKeyChecking else {
                throw SSHConfigError(
                    .insecure,
                    "StrictHostKeyChecking no accepts any changed host key; refused unless the caller allows "
                        + "insecure host key checking (SSHConfigInteraction.allowsInsecureHostKeyChecking)",
                    file: "StrictHostKeyChecking", line: 0)
            }
            let logger = interaction.logger
            return .custom { context in
                let known = try await store.lookup(host: context.host, port: context.port)
                let key = context.presentedKey
                if known.revoked.contains(key) { return .reject(reason: "key is revoked") }
                if known.keys.contains(key) { return .accept }
                if known.keys.isEmpty {
                    try await store.add(key, host: context.host, port: context.port)
                    logger.warning("permanently added the host key", metadata: [
                        "host": "\(context.host)", "key": "\(key)",
                    ])
                } else {
                    keyChanged.set()
                    logger.warning("REMOTE HOST IDENTIFICATION HAS CHANGED; accepted because StrictHostKeyChecking is no", metadata: [
                        "host": "\(context.host)", "key": "\(key)",
                        "expected": "\(known.keys.map(\.sha256Fingerprint).joined(separator: ","))",
                    ])
                }
                return .accept
            }
        case .ask:
            let confirm = batchMode ? nil : interaction.confirmUnknownHostKey
            let recordIn = store.userFiles.first.map(\.path)
            return .custom { context in
                let known = try await store.lookup(host: context.host, port: context.port)
                let key = context.presentedKey
                if known.revoked.contains(key) { return .reject(reason: "key is revoked") }
                if known.keys.contains(key) { return .accept }
                if !known.keys.isEmpty {
                    return .reject(reason: "host key changed: the host is known with another key ("
                                   + known.keys.map(\.sha256Fingerprint).joined(separator: ", ") + ")")
                }
                if !known.certificateAuthorities.isEmpty {
                    return .reject(reason: SSHHostKeyPolicy.certificateOnlyReason)
                }
                let name = store.lookupName(host: context.host, port: context.port)
                guard let confirm else {
                    return .reject(reason: "host is not known and there is nobody to ask (StrictHostKeyChecking ask"
                                   + (batchMode ? ", BatchMode yes)" : ", no prompt given)"))
                }
                let prompt = SSHHostKeyPrompt(hostName: name.host, port: name.port, key: key, knownHostsFile: recordIn)
                guard await confirm(prompt) else { return .reject(reason: "host key not accepted") }
                try await store.add(key, host: context.host, port: context.port)
                return .accept
            }
        }
    }

    /// Algorithm lists the configuration changed, without the names libssh 0.10 does
    /// not implement; lists left at OpenSSH's defaults stay at libssh's (close to them).
    func algorithms() throws(SSHConfigError) -> SSHAlgorithms {
        var algorithms = SSHAlgorithms()
        func list(_ keyword: String, _ names: [String], _ category: String) throws(SSHConfigError) -> [String]? {
            guard options[keyword] != nil else { return nil }
            var probe = SSHAlgorithms()
            switch category {
            case "kex": probe.keyExchange = names
            case "hostkey": probe.hostKey = names
            case "cipher": probe.ciphersClientToServer = names
            case "mac": probe.macsClientToServer = names
            default: probe.publicKeyAcceptedTypes = names
            }
            let unsupported = Set(probe.unsupportedNames.compactMap { $0.split(separator: " ").last.map(String.init) })
            let kept = names.filter { !unsupported.contains($0) }
            guard !kept.isEmpty else {
                throw SSHConfigError(.invalidValue,
                                     "\(keyword): none of \(names.joined(separator: ",")) is supported by this libssh",
                                     file: keyword, line: 0)
            }
            return kept
        }
        algorithms.keyExchange = try list("kexalgorithms", kexAlgorithms, "kex")
        algorithms.hostKey = try list("hostkeyalgorithms", hostKeyAlgorithms, "hostkey")
        if let c = try list("ciphers", ciphers, "cipher") {
            algorithms.ciphersClientToServer = c
            algorithms.ciphersServerToClient = c
        }
        if let m = try list("macs", macs, "mac") {
            algorithms.macsClientToServer = m
            algorithms.macsServerToClient = m
        }
        algorithms.publicKeyAcceptedTypes = try list("pubkeyacceptedalgorithms", pubkeyAcceptedAlgorithms, "pubkey")
        if let bits = options["requiredrsasize"]?.first.flatMap(Int.init) {
            algorithms.minimumRSABits = bits
        }
        return algorithms
    }
}

/// Set once `StrictHostKeyChecking no` accepted a changed host key with a
/// configuration: from then on its keyboard-interactive prompts stay unanswered, for
/// every connection made with it (a flag per connection could be cleared by another
/// connection made at the same time; resolve the host again for a fresh one).
final class ChangedKeyFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}
