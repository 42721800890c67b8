/// The keywords of OpenSSH 9.2's client (Debian's build) and how each value is read.
enum SSHConfigKeywords {
    /// Every keyword ssh accepts, by its canonical name.
    static let known: Set<String> = [
        "protocol", "cipher", "fallbacktorsh", "globalknownhostsfile2", "rhostsauthentication", "useblacklistedkeys",
        "userknownhostsfile2", "useroaming", "usersh", "useprivilegedport", "afstokenpassing",
        "kerberosauthentication", "kerberostgtpassing", "rsaauthentication", "rhostsrsaauthentication",
        "compressionlevel", "gssapiauthentication", "gssapikeyexchange", "gssapidelegatecredentials",
        "gssapitrustdns", "gssapiclientidentity", "gssapiserveridentity", "gssapirenewalforcesrekey",
        "gssapikexalgorithms", "pkcs11provider", "forwardagent", "forwardx11", "forwardx11trusted",
        "forwardx11timeout", "exitonforwardfailure", "xauthlocation", "gatewayports", "passwordauthentication",
        "kbdinteractiveauthentication", "kbdinteractivedevices", "pubkeyauthentication", "hostbasedauthentication",
        "identityfile", "identitiesonly", "certificatefile", "addkeystoagent", "identityagent", "hostname",
        "hostkeyalias", "proxycommand", "port", "ciphers", "macs", "remoteforward", "localforward",
        "permitremoteopen", "user", "host", "match", "escapechar", "globalknownhostsfile", "userknownhostsfile",
        "connectionattempts", "batchmode", "checkhostip", "stricthostkeychecking", "compression", "tcpkeepalive",
        "numberofpasswordprompts", "syslogfacility", "loglevel", "logverbose", "dynamicforward",
        "preferredauthentications", "hostkeyalgorithms", "casignaturealgorithms", "bindaddress", "bindinterface",
        "clearallforwardings", "enablesshkeysign", "verifyhostkeydns", "nohostauthenticationforlocalhost",
        "rekeylimit", "connecttimeout", "addressfamily", "serveraliveinterval", "serveralivecountmax", "sendenv",
        "setenv", "controlpath", "controlmaster", "controlpersist", "hashknownhosts", "include", "tunnel",
        "tunneldevice", "localcommand", "permitlocalcommand", "remotecommand", "visualhostkey", "kexalgorithms",
        "ipqos", "requesttty", "sessiontype", "stdinnull", "forkafterauthentication", "proxyusefdpass",
        "canonicaldomains", "canonicalizefallbacklocal", "canonicalizehostname", "canonicalizemaxdots",
        "canonicalizepermittedcnames", "streamlocalbindmask", "streamlocalbindunlink", "revokedhostkeys",
        "fingerprinthash", "updatehostkeys", "hostbasedacceptedalgorithms", "pubkeyacceptedalgorithms",
        "ignoreunknown", "proxyjump", "securitykeyprovider", "knownhostscommand", "requiredrsasize",
        "enableescapecommandline",
    ]

    /// Other spellings ssh accepts, to the canonical name.
    static let aliases: [String: String] = [
        "identityfile2": "identityfile", "keepalive": "tcpkeepalive",
        "challengeresponseauthentication": "kbdinteractiveauthentication",
        "skeyauthentication": "kbdinteractiveauthentication", "tisauthentication": "kbdinteractiveauthentication",
        "dsaauthentication": "pubkeyauthentication", "hostbasedkeytypes": "hostbasedacceptedalgorithms",
        "pubkeyacceptedkeytypes": "pubkeyacceptedalgorithms", "smartcarddevice": "pkcs11provider",
        // Debian's names for ServerAliveInterval
        "protocolkeepalives": "serveraliveinterval", "setuptimeout": "serveraliveinterval",
    ]

    /// Accepted and ignored by ssh without a word.
    static let deprecated: Set<String> = [
        "protocol", "cipher", "fallbacktorsh", "globalknownhostsfile2", "rhostsauthentication", "useblacklistedkeys",
        "userknownhostsfile2", "useroaming", "usersh", "useprivilegedport",
    ]

    /// Accepted by ssh with a message that it does not support them.
    static let unsupported: Set<String> = [
        "afstokenpassing", "kerberosauthentication", "kerberostgtpassing", "rsaauthentication",
        "rhostsrsaauthentication", "compressionlevel",
    ]

    typealias Fail = (SSHConfigError.Code, String) -> SSHConfigError

    /// Reads one line's `words` for `keyword` (checked whether or not the block is
    /// active, as ssh does) and stores it when `active` and still unset.
    static func apply(_ keyword: String, _ words: [String], to s: inout SSHConfigReader.Settings, active: Bool,
                      userConfig: Bool, environment: [String: String], fail: Fail) throws(SSHConfigError)
    {
        /// The one argument of a single-valued keyword.
        func single() throws(SSHConfigError) -> String {
            guard let first = words.first, !first.isEmpty else { throw fail(.syntax, "Missing argument.") }
            if words.count > 1 { throw fail(.syntax, "keyword \(keyword) extra arguments at end of line") }
            return first
        }
        func flag() throws(SSHConfigError) -> Bool {
            let v = try single()
            guard let b = SSHConfigSyntax.flag(v) else { throw fail(.invalidValue, "unsupported option \"\(v)\".") }
            return b
        }
        func time() throws(SSHConfigError) -> Int? {
            let v = try single()
            if v == "none" { return nil }
            guard let t = SSHConfigSyntax.seconds(v) else { throw fail(.invalidValue, "invalid time value.") }
            return t
        }
        func agentPath() throws(SSHConfigError) -> String {
            let v = try single()
            if v.hasPrefix("$") && !v.hasPrefix("${") {
                let name = v.dropFirst()
                if name.isEmpty || !name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) {
                    throw fail(.invalidValue, "Invalid environment name \(v)")
                }
            } else if v.contains("${") {
                do {
                    _ = try SSHConfigExpansion.expand(v.doublingPercents, tokens: [:], environment: environment)
                } catch {
                    throw fail(.invalidValue, "Invalid environment expansion \(v)")
                }
            }
            return v
        }

        switch keyword {
        case "hostname":
            let v = try single()
            if active && s.hostName == nil { s.hostName = v }
        case "user":
            let v = try single()
            if active && s.user == nil { s.user = v }
        case "port":
            let v = try single()
            guard let p = SSHConfigSyntax.port(v), p > 0 else { throw fail(.invalidValue, "Bad port '\(v)'.") }
            if active && s.port == nil { s.port = p }
        case "identityfile", "certificatefile":
            let v = try single()
            let isIdentity = keyword == "identityfile"
            var list = isIdentity ? s.identityFiles : s.certificateFiles
            if active {
                if list.count >= 100 {
                    throw fail(.invalidValue, "Too many \(isIdentity ? "identity" : "certificate") files specified (max 100)")
                }
                if !list.contains(where: { $0.path == v && $0.userProvided == userConfig }) {
                    list.append((v, userConfig))
                }
                if isIdentity { s.identityFiles = list } else { s.certificateFiles = list }
            }
        case "identitiesonly":
            let v = try flag()
            if active && s.identitiesOnly == nil { s.identitiesOnly = v }
        case "hashknownhosts":
            let v = try flag()
            if active && s.hashKnownHosts == nil { s.hashKnownHosts = v }
        case "batchmode":
            let v = try flag()
            if active && s.batchMode == nil { s.batchMode = v }
        case "clearallforwardings":
            let v = try flag()
            if active && s.clearAllForwardings == nil { s.clearAllForwardings = v }
        case "identityagent":
            let v = try agentPath()
            if active && s.identityAgent == nil { s.identityAgent = v }
        case "forwardagent":
            let v = try single()
            let value: String
            if let b = SSHConfigSyntax.flag(v) { value = b ? "yes" : "no" } else { value = try agentPath() }
            if active && s.forwardAgent == nil { s.forwardAgent = value }
        case "userknownhostsfile", "globalknownhostsfile":
            guard !words.isEmpty, !words.contains("") else { throw fail(.syntax, "Missing argument.") }
            if words.count > 32 { throw fail(.invalidValue, "Too many known hosts (max 32).") }
            if words.contains(where: { $0.lowercased() == "none" }) && words.count > 1 {
                throw fail(.invalidValue, "keyword \(keyword) \"none\" argument must appear alone.")
            }
            let list = words.count == 1 && words[0].lowercased() == "none" ? [] : words
            if keyword == "userknownhostsfile" {
                if active && s.userKnownHostsFiles == nil { s.userKnownHostsFiles = list }
            } else {
                if active && s.globalKnownHostsFiles == nil { s.globalKnownHostsFiles = list }
            }
        case "stricthostkeychecking":
            let v = try single()
            let value: SSHHostConfig.StrictHostKeyChecking
            switch v.lowercased() {
            case "yes", "true": value = .yes
            case "no", "false", "off": value = .no
            case "ask": value = .ask
            case "accept-new": value = .acceptNew
            default: throw fail(.invalidValue, "unsupported option \"\(v)\".")
            }
            if active && s.strictHostKeyChecking == nil { s.strictHostKeyChecking = value }
        case "hostkeyalias":
            let v = try single()
            if active && s.hostKeyAlias == nil { s.hostKeyAlias = v }
        case "connecttimeout":
            if let t = try time(), active && s.connectTimeout == nil { s.connectTimeout = t }
        case "serveraliveinterval":
            if let t = try time(), active && s.serverAliveInterval == nil { s.serverAliveInterval = t }
        case "serveralivecountmax":
            let v = try single()
            guard let n = SSHConfigSyntax.decimal(v, max: Int(Int32.max)) else {
                throw fail(.invalidValue, "integer value \(v) invalid.")
            }
            if active && s.serverAliveCountMax == nil { s.serverAliveCountMax = n }
        case "ciphers", "macs", "kexalgorithms", "hostkeyalgorithms", "pubkeyacceptedalgorithms":
            let kind: SSHConfigAlgorithms.Kind = switch keyword {
            case "ciphers": .cipher
            case "macs": .mac
            case "kexalgorithms": .kex
            case "hostkeyalgorithms": .hostKey
            default: .pubkey
            }
            let v = try single()
            if let problem = SSHConfigAlgorithms.validate(v, kind) { throw fail(.invalidValue, problem) }
            if active && s.algorithms[kind] == nil { s.algorithms[kind] = v }
        case "localforward", "remoteforward", "dynamicforward":
            guard let first = words.first, !first.isEmpty else { throw fail(.syntax, "Missing argument.") }
            let remote = keyword == "remoteforward"
            var dynamic = keyword == "dynamicforward"
            var spec = first
            var used = 1
            if !dynamic {
                if words.count > 1, !words[1].isEmpty {
                    spec = first + ":" + words[1]
                    used = 2
                } else if remote {
                    dynamic = true
                } else {
                    throw fail(.syntax, "Missing target argument.")
                }
            }
            if words.count > used { throw fail(.syntax, "keyword \(keyword) extra arguments at end of line") }
            guard let forward = SSHConfigForwardSpec.parse(spec, dynamic: dynamic, remote: remote, environment: environment)
            else { throw fail(.invalidValue, "Bad forwarding specification.") }
            if active {
                if remote {
                    if !s.remoteForwards.contains(forward) { s.remoteForwards.append(forward) }
                } else if !s.localForwards.contains(forward) {
                    s.localForwards.append(forward)
                }
            }
        case "sendenv":
            for w in words {
                if w.isEmpty || w.contains("=") { throw fail(.invalidValue, "Invalid environment name.") }
                if !active { continue }
                if w.hasPrefix("-") {
                    let pattern = String(w.dropFirst())
                    s.sendEnv.removeAll { SSHConfigSyntax.match($0, pattern) }
                } else {
                    s.sendEnv.append(w)
                }
            }
        case "setenv":
            let store = s.setEnv.isEmpty && active
            for w in words {
                guard let eq = w.firstIndex(of: "="), eq != w.startIndex else { throw fail(.invalidValue, "Invalid SetEnv.") }
                let name = w[..<eq]
                if store && !s.setEnv.contains(where: { $0.split(separator: "=", maxSplits: 1).first == name }) {
                    s.setEnv.append(w)
                }
            }
        case "requesttty":
            let v = try single()
            let value: SSHHostConfig.RequestTTY
            switch v.lowercased() {
            case "yes", "true": value = .yes
            case "no", "false": value = .no
            case "force": value = .force
            case "auto": value = .auto
            default: throw fail(.invalidValue, "unsupported option \"\(v)\".")
            }
            if active && s.requestTTY == nil { s.requestTTY = value }
        case "controlmaster":
            let v = try single()
            let value: SSHHostConfig.ControlMaster
            switch v.lowercased() {
            case "yes", "true": value = .yes
            case "no", "false": value = .no
            case "auto": value = .auto
            case "ask": value = .ask
            case "autoask": value = .autoask
            default: throw fail(.invalidValue, "unsupported option \"\(v)\".")
            }
            if active && s.controlMaster == nil { s.controlMaster = value }
        case "controlpath":
            let v = try single()
            if active && s.controlPath == nil { s.controlPath = v }
        case "controlpersist":
            let v = try single()
            let value: Int?
            if v == "no" || v == "false" {
                value = nil
            } else if v == "yes" || v == "true" {
                value = 0
            } else if let t = SSHConfigSyntax.seconds(v) {
                value = t
            } else {
                throw fail(.invalidValue, "Bad ControlPersist argument.")
            }
            if active && s.controlPersist == nil { s.controlPersist = .some(value) }
        case "ignoreunknown":
            let v = try single()
            if active && s.ignoreUnknown == nil { s.ignoreUnknown = v }
        case "canonicalizehostname":
            let v = try single()
            if active && s.other["canonicalizehostname"] == nil {
                s.canonicalizeHostname = ["yes", "true", "always"].contains(v.lowercased())
            }
        default:
            // a keyword SSHKit does not act on: kept as written (recordOther)
            break
        }
    }
}
