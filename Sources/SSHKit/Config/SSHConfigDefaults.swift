/// OpenSSH's defaults and its late expansions (`fill_default_options` and ssh.c),
/// turning what the files said into an `SSHHostConfig`.
enum SSHConfigDefaults {
    static let identityFiles = ["~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ecdsa_sk", "~/.ssh/id_ed25519",
                                "~/.ssh/id_ed25519_sk", "~/.ssh/id_xmss", "~/.ssh/id_dsa"]
    static let userKnownHostsFiles = ["~/.ssh/known_hosts", "~/.ssh/known_hosts2"]
    static let globalKnownHostsFiles = ["/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"]

    static func finish(_ reader: SSHConfigReader, hostName: String) throws(SSHConfigError) -> SSHHostConfig {
        let s = reader.settings
        let context = reader.context
        let user = s.user ?? context.localUser
        let port = s.port ?? 22
        let alias = s.hostKeyAlias.map(SSHConfigSyntax.lowercased)
        var tokens = reader.localTokens()
        tokens["C"] = SSHConfigExpansion.sha1Hex(context.localHostName + hostName + "\(port)" + user)
        tokens["h"] = hostName
        tokens["k"] = alias ?? reader.hostArgument
        tokens["n"] = reader.hostArgument
        tokens["p"] = "\(port)"
        tokens["r"] = user

        func path(_ raw: String, keyword: String) throws(SSHConfigError) -> String {
            do {
                let t = try SSHConfigExpansion.tilde(raw, home: context.homeDirectory)
                return try SSHConfigExpansion.expand(t, tokens: tokens, environment: context.environment)
            } catch {
                throw SSHConfigError(.invalidValue, "\(keyword): " + SSHConfigExpansion.message(error, in: raw),
                                     file: keyword, line: 0)
            }
        }
        func paths(_ raws: [String], keyword: String) throws(SSHConfigError) -> [String] {
            var out: [String] = []
            for r in raws where r.lowercased() != "none" { out.append(try path(r, keyword: keyword)) }
            return out
        }

        var algorithms: [SSHConfigAlgorithms.Kind: [String]] = [:]
        for kind in [SSHConfigAlgorithms.Kind.cipher, .mac, .kex, .hostKey, .pubkey] {
            guard let list = SSHConfigAlgorithms.assemble(s.algorithms[kind], kind) else {
                throw SSHConfigError(.invalidValue, "\(kind.keyword): invalid argument", file: kind.keyword, line: 0)
            }
            algorithms[kind] = list
        }

        let rawIdentities = s.identityFiles.isEmpty ? identityFiles : s.identityFiles.map(\.path)
        let rawCertificates = s.certificateFiles.map(\.path)
        let clear = s.clearAllForwardings ?? false
        let locals = clear ? [] : s.localForwards
        var identityAgent = s.identityAgent
        if let a = identityAgent, a != "none", a != "SSH_AUTH_SOCK", !(a.hasPrefix("$") && !a.hasPrefix("${")) {
            identityAgent = try path(a, keyword: "IdentityAgent")
        }
        var forwardAgent: String?
        switch s.forwardAgent {
        case nil, "no"?: forwardAgent = nil
        case "yes"?: forwardAgent = ""
        case let p?: forwardAgent = try path(p, keyword: "ForwardAgent")
        }
        var controlPath: String?
        if let c = s.controlPath, c.lowercased() != "none" { controlPath = try path(c, keyword: "ControlPath") }
        var proxyCommand = s.proxyCommand
        if proxyCommand?.lowercased() == "none" { proxyCommand = nil }
        let jump = s.proxyJump == nil || s.proxyJump == "none" ? [] : s.proxyJumpHops
        let batchMode = s.batchMode ?? false

        var config = SSHHostConfig(
            originalHost: reader.hostArgument, hostName: hostName, user: user, port: port,
            rawIdentityFiles: rawIdentities, identityFiles: try paths(rawIdentities, keyword: "IdentityFile"),
            identityFilesConfigured: !s.identityFiles.isEmpty, identitiesOnly: s.identitiesOnly ?? false,
            identityAgent: identityAgent, rawCertificateFiles: rawCertificates,
            certificateFiles: try paths(rawCertificates, keyword: "CertificateFile"),
            proxyJump: jump, proxyCommand: proxyCommand,
            userKnownHostsFiles: try paths(s.userKnownHostsFiles ?? userKnownHostsFiles, keyword: "UserKnownHostsFile"),
            globalKnownHostsFiles: s.globalKnownHostsFiles ?? globalKnownHostsFiles,
            strictHostKeyChecking: s.strictHostKeyChecking ?? .ask, hostKeyAlias: alias,
            hashKnownHosts: s.hashKnownHosts ?? false, connectTimeout: s.connectTimeout,
            serverAliveInterval: s.serverAliveInterval ?? (batchMode ? 300 : 0),
            serverAliveCountMax: s.serverAliveCountMax ?? 3,
            ciphers: algorithms[.cipher]!, kexAlgorithms: algorithms[.kex]!, macs: algorithms[.mac]!,
            hostKeyAlgorithms: algorithms[.hostKey]!, pubkeyAcceptedAlgorithms: algorithms[.pubkey]!,
            localForwards: locals.filter { $0.connect != nil },
            remoteForwards: clear ? [] : s.remoteForwards,
            dynamicForwards: locals.filter { $0.connect == nil },
            forwardAgent: forwardAgent, setEnv: s.setEnv, sendEnv: s.sendEnv,
            requestTTY: s.requestTTY ?? .auto, controlMaster: s.controlMaster ?? .no, controlPath: controlPath,
            controlPersist: s.controlPersist ?? nil, batchMode: batchMode, options: s.other,
            warnings: reader.warnings)
        if let spec = s.proxyJump, spec != "none", let comma = spec.lastIndex(of: ",") {
            config.jumpExtra = String(spec[..<comma])
        }
        config.localForwardOrder = locals
        return config
    }
}

extension SSHHostConfig {
    /// The lines `ssh -G` prints for the fields this type has, in its format (`yes`
    /// as `true` where ssh prints that, forwards as `[host]:port`), in ssh's order.
    /// What `ssh -G` prints beyond these is in `options` as written.
    public var sshGLines: [String] {
        func yn(_ b: Bool) -> String { b ? "yes" : "no" }
        var out = ["user \(user)", "hostname \(hostName)", "port \(port)", "batchmode \(yn(batchMode))"]
        let master = switch controlMaster {
        case .no: "false"
        case .yes: "true"
        case .auto: "auto"
        case .ask: "ask"
        case .autoask: "autoask"
        }
        out.append("controlmaster \(master)")
        out.append("hashknownhosts \(yn(hashKnownHosts))")
        out.append("identitiesonly \(yn(identitiesOnly))")
        let tty = switch requestTTY {
        case .yes: "true"
        case .no: "false"
        case .force: "force"
        case .auto: "auto"
        }
        out.append("requesttty \(tty)")
        let strict = switch strictHostKeyChecking {
        case .yes: "true"
        case .no: "false"
        case .ask: "ask"
        case .acceptNew: "accept-new"
        }
        out.append("stricthostkeychecking \(strict)")
        out.append("serveralivecountmax \(serverAliveCountMax)")
        out.append("serveraliveinterval \(serverAliveInterval)")
        out.append("ciphers \(ciphers.joined(separator: ","))")
        if let controlPath { out.append("controlpath \(controlPath)") }
        out.append("hostkeyalgorithms \(hostKeyAlgorithms.joined(separator: ","))")
        if let hostKeyAlias { out.append("hostkeyalias \(hostKeyAlias)") }
        if let identityAgent { out.append("identityagent \(identityAgent)") }
        out.append("kexalgorithms \(kexAlgorithms.joined(separator: ","))")
        out.append("macs \(macs.joined(separator: ","))")
        out.append("pubkeyacceptedalgorithms \(pubkeyAcceptedAlgorithms.joined(separator: ","))")
        func end(_ e: SSHConfigForward.End) -> String {
            switch e {
            case .path(let p): p
            case .port(host: nil, port: let port): "\(port)"
            case .port(host: let host?, port: let port): "[\(host)]:\(port)"
            }
        }
        // ssh keeps local and dynamic forwards in one list; one whose target is a
        // socket path is printed as a dynamic forward too (9.2)
        for f in localForwardOrder {
            if case .port? = f.connect { continue }
            out.append("dynamicforward \(end(f.listen))")
        }
        for f in localForwardOrder {
            guard let c = f.connect else { continue }
            out.append("localforward \(end(f.listen)) \(end(c))")
        }
        for f in remoteForwards {
            out.append("remoteforward \(end(f.listen)) \(f.connect.map(end) ?? "[socks]:0")")
        }
        out += rawIdentityFiles.map { "identityfile \($0)" }
        out += rawCertificateFiles.map { "certificatefile \($0)" }
        out.append("globalknownhostsfile " + (globalKnownHostsFiles.isEmpty ? "none" : globalKnownHostsFiles.joined(separator: " ")))
        out.append("userknownhostsfile " + (userKnownHostsFiles.isEmpty ? "none" : userKnownHostsFiles.joined(separator: " ")))
        out += sendEnv.map { "sendenv \($0)" }
        out += setEnv.map { "setenv \($0)" }
        out.append("forwardagent " + (forwardAgent.map { $0.isEmpty ? "yes" : $0 } ?? "no"))
        out.append("connecttimeout " + (connectTimeout.map(String.init) ?? "none"))
        out.append("controlpersist " + (controlPersist.map { $0 == 0 ? "yes" : "\($0)" } ?? "no"))
        if let last = proxyJump.last {
            out.append("proxyjump " + (jumpExtra.map { $0 + "," } ?? "") + last.description)
        } else if let proxyCommand {
            out.append("proxycommand \(proxyCommand)")
        }
        return out
    }
}
