/// What an OpenSSH client configuration says for one host: the result of
/// `OpenSSHConfig.resolve`, with OpenSSH's defaults filled in.
///
/// Paths are as `ssh` would use them: `userKnownHostsFiles`, `controlPath` and
/// `identityAgent` are expanded (`~`, `%` tokens, `${VAR}`); `identityFiles` and
/// `certificateFiles` come both as written (`rawIdentityFiles`, what `ssh -G` prints)
/// and expanded. `proxyCommand` is as written: `%h %p %r %n %k` are expanded when it
/// runs (`expandedProxyCommand()`).
public struct SSHHostConfig: Sendable, Equatable {
    public enum StrictHostKeyChecking: String, Sendable, Equatable {
        /// `yes`: only keys already in a known_hosts file.
        case yes
        /// `accept-new`: unknown hosts are recorded, changed keys refused.
        case acceptNew = "accept-new"
        /// `no` or `off`: unknown hosts recorded, changed keys (with ssh: some
        /// features turned off) allowed. SSHKit maps it to an explicit insecure choice.
        case no
        /// `ask` (the default): a person confirms unknown keys.
        case ask
    }

    public enum RequestTTY: String, Sendable, Equatable {
        case auto, yes, no, force
    }

    public enum ControlMaster: String, Sendable, Equatable {
        case no, yes, auto, ask, autoask
    }

    /// The host name as given to `resolve` (`%n`).
    public var originalHost: String
    /// Where to connect: `HostName` with `%h` expanded, lowercased unless an address
    /// (`%h`).
    public var hostName: String
    public var user: String
    public var port: Int
    /// `IdentityFile` values as written (or OpenSSH's default list when none is set).
    public var rawIdentityFiles: [String]
    /// The same, expanded (`~`, `%` tokens, `${VAR}`); `none` entries dropped.
    public var identityFiles: [String]
    /// Whether `IdentityFile` was given at all (otherwise the list is the defaults,
    /// tried only when they exist).
    public var identityFilesConfigured: Bool
    public var identitiesOnly: Bool
    /// `IdentityAgent` expanded; `none` turns the agent off; nil means `SSH_AUTH_SOCK`.
    public var identityAgent: String?
    public var rawCertificateFiles: [String]
    public var certificateFiles: [String]
    /// `ProxyJump` hops, in order (`[user@]host[:port]` each); empty for none.
    public var proxyJump: [SSHConfigJumpHost]
    /// `ProxyCommand` as written; nil when unset, `none`, or replaced by ProxyJump.
    public var proxyCommand: String?
    public var userKnownHostsFiles: [String]
    public var globalKnownHostsFiles: [String]
    public var strictHostKeyChecking: StrictHostKeyChecking
    /// Lowercased, as ssh uses it.
    public var hostKeyAlias: String?
    public var hashKnownHosts: Bool
    /// Seconds; nil for none (the system's TCP timeout).
    public var connectTimeout: Int?
    /// Seconds; 0 turns keepalives off.
    public var serverAliveInterval: Int
    public var serverAliveCountMax: Int
    public var ciphers: [String]
    public var kexAlgorithms: [String]
    public var macs: [String]
    public var hostKeyAlgorithms: [String]
    public var pubkeyAcceptedAlgorithms: [String]
    public var localForwards: [SSHConfigForward]
    public var remoteForwards: [SSHConfigForward]
    public var dynamicForwards: [SSHConfigForward]
    /// `ForwardAgent`: nil for no, `""` for yes (the agent of `IdentityAgent` or
    /// `SSH_AUTH_SOCK`), or the socket path to forward.
    public var forwardAgent: String?
    /// `SetEnv` in order (`NAME=value` each; of a name, the first wins).
    public var setEnv: [String]
    /// `SendEnv` patterns (`-pattern` removals applied).
    public var sendEnv: [String]
    public var requestTTY: RequestTTY
    public var controlMaster: ControlMaster
    /// Expanded; nil for none.
    public var controlPath: String?
    /// nil for no; 0 for yes (forever); otherwise seconds.
    public var controlPersist: Int?
    public var batchMode: Bool
    /// Every keyword's first value as written, lowercased keyword to words, including
    /// those SSHKit does not act on (`ForwardX11`, `Compression`, …).
    public var options: [String: [String]]
    /// Lines ssh accepts that SSHKit does not act on, and Includes that matched nothing.
    public var warnings: [SSHConfigWarning]
    /// ProxyJump's hops before the last, as written (`ssh -G` prints them so).
    var jumpExtra: String? = nil
    /// Local and dynamic forwards in the order given (`ssh -G` keeps one list).
    var localForwardOrder: [SSHConfigForward] = []
}

/// One `ProxyJump` hop.
public struct SSHConfigJumpHost: Sendable, Equatable, CustomStringConvertible {
    public var user: String?
    public var host: String
    /// nil: the hop's own configuration (or 22) decides.
    public var port: Int?

    public init(user: String? = nil, host: String, port: Int? = nil) {
        self.user = user
        self.host = host
        self.port = port
    }

    /// As `ssh -G` prints a hop: `[user@]host[:port]`, the host in brackets when it
    /// has a `:` or is all digits and dots.
    public var description: String {
        let bracket = host.contains(":") || (!host.isEmpty && host.allSatisfy { $0.isNumber || $0 == "." })
        return (user.map { $0 + "@" } ?? "") + (bracket ? "[\(host)]" : host) + (port.map { ":\($0)" } ?? "")
    }
}

/// A `LocalForward`, `RemoteForward` or `DynamicForward`: each end a host and port, or
/// a Unix socket path.
public struct SSHConfigForward: Sendable, Equatable {
    public enum End: Sendable, Equatable {
        /// nil host: the default (loopback for a local listener, all for a remote one).
        case port(host: String?, port: Int)
        case path(String)
    }

    public var listen: End
    /// nil for a dynamic (SOCKS) forward.
    public var connect: End?

    public init(listen: End, connect: End?) {
        self.listen = listen
        self.connect = connect
    }
}

extension SSHHostConfig {
    /// `proxyCommand` as ssh runs it: `%h %p %r %n %k %%` expanded (no `${VAR}`, no
    /// `~`); nil when there is none.
    /// - Throws: `SSHConfigError` (`.invalidValue`) for another `%` token.
    public func expandedProxyCommand() throws(SSHConfigError) -> String? {
        guard let proxyCommand else { return nil }
        let tokens: [Character: String] = ["h": hostName, "p": "\(port)", "r": user, "n": originalHost,
                                           "k": hostKeyAlias ?? originalHost]
        do {
            return try SSHConfigExpansion.expand(proxyCommand, tokens: tokens)
        } catch {
            throw SSHConfigError(.invalidValue, "ProxyCommand: " + SSHConfigExpansion.message(error, in: proxyCommand),
                                 file: "ProxyCommand", line: 0)
        }
    }
}
