/// What an OpenSSH client configuration says for one host: the result of
/// `OpenSSHConfig.resolve`, with OpenSSH's defaults filled in.
///
/// Paths are as `ssh` would use them: `userKnownHostsFiles`, `controlPath` and
/// `identityAgent` are expanded (`~`, `%` tokens, `${VAR}`); `identityFiles` and
/// `certificateFiles` come both as written (`rawIdentityFiles`, what `ssh -G` prints)
/// and expanded. `proxyCommand` is as written: `%h %p %r %n %k` are expanded when it
/// runs (`expandedProxyCommand()`).
public struct SSHHostConfig: Sendable, Equatable {
    /// `StrictHostKeyChecking`: what happens to a host key the known_hosts files do not
    /// have. `OpenSSHConfig.connectionConfiguration(for:)` maps each to an
    /// `SSHHostKeyPolicy` (see the OpenSSH guide).
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

    /// `RequestTTY`: whether `ssh` asks the server for a terminal. Reported for a tool
    /// to act on; a connection does not use it by itself.
    public enum RequestTTY: String, Sendable, Equatable {
        /// `auto` (the default): a terminal for a login session (no remote command).
        case auto
        /// `yes` or `true`: a terminal whenever standard input is one.
        case yes
        /// `no` or `false`: never a terminal.
        case no
        /// `force`: always a terminal, even when standard input is not one.
        case force
    }

    /// `ControlMaster`: sharing one connection over `ControlPath`. Reported for a tool
    /// to act on; a connection does not use it by itself.
    public enum ControlMaster: String, Sendable, Equatable {
        /// `no` or `false` (the default): no sharing.
        case no
        /// `yes` or `true`: this connection listens on `ControlPath` as a master.
        case yes
        /// `auto`: use an existing master, or become one.
        case auto
        /// `ask`: like `yes`, but each shared session is confirmed through `ssh-askpass`.
        case ask
        /// `autoask`: `auto` and `ask` together.
        case autoask
    }

    /// The host name as given to `resolve` (`%n`).
    public var originalHost: String
    /// Where to connect: `HostName` with `%h` expanded, lowercased unless an address
    /// (`%h`).
    public var hostName: String
    /// `User`, else the local user (or `user:` given to `resolve`).
    public var user: String
    /// `Port`, else 22 (or `port:` given to `resolve`).
    public var port: Int
    /// `IdentityFile` values as written (or OpenSSH's default list when none is set).
    public var rawIdentityFiles: [String]
    /// The same, expanded (`~`, `%` tokens, `${VAR}`); `none` entries dropped.
    public var identityFiles: [String]
    /// Whether `IdentityFile` was given at all (otherwise the list is the defaults,
    /// tried only when they exist).
    public var identityFilesConfigured: Bool
    /// `IdentitiesOnly`; false when not set. When true,
    /// `OpenSSHConfig.connectionConfiguration(for:)` leaves the agent out.
    public var identitiesOnly: Bool
    /// `IdentityAgent` expanded; `none` turns the agent off; nil means `SSH_AUTH_SOCK`.
    public var identityAgent: String?
    /// `CertificateFile` values as written, in order; empty when none is set.
    public var rawCertificateFiles: [String]
    /// The same, expanded (`~`, `%` tokens, `${VAR}`); `none` entries dropped.
    public var certificateFiles: [String]
    /// `ProxyJump` hops, in order (`[user@]host[:port]` each); empty for none.
    public var proxyJump: [SSHConfigJumpHost]
    /// `ProxyCommand` as written; nil when unset, `none`, or replaced by ProxyJump.
    public var proxyCommand: String?
    /// `UserKnownHostsFile`, expanded (`~`, `%` tokens, `${VAR}`); OpenSSH's default
    /// (`~/.ssh/known_hosts`, `~/.ssh/known_hosts2`, expanded) when not set; empty for `none`.
    public var userKnownHostsFiles: [String]
    /// `GlobalKnownHostsFile` as written (not expanded); OpenSSH's default
    /// (`/etc/ssh/ssh_known_hosts`, `/etc/ssh/ssh_known_hosts2`) when not set; empty for `none`.
    public var globalKnownHostsFiles: [String]
    /// `StrictHostKeyChecking`; `.ask` when not set.
    public var strictHostKeyChecking: StrictHostKeyChecking
    /// Lowercased, as ssh uses it.
    public var hostKeyAlias: String?
    /// `HashKnownHosts`: whether new known_hosts entries are written hashed; false when not set.
    public var hashKnownHosts: Bool
    /// Seconds; nil for none (the system's TCP timeout).
    public var connectTimeout: Int?
    /// Seconds; 0 turns keepalives off.
    public var serverAliveInterval: Int
    /// `ServerAliveCountMax`; 3 when not set.
    public var serverAliveCountMax: Int
    /// `Ciphers`: the list ssh would offer (OpenSSH's default with the configured
    /// `+`, `-` and `^` changes applied).
    public var ciphers: [String]
    /// `KexAlgorithms`: the list ssh would offer, modifiers applied.
    public var kexAlgorithms: [String]
    /// `MACs`: the list ssh would offer, modifiers applied.
    public var macs: [String]
    /// `HostKeyAlgorithms`: the list ssh would offer, modifiers applied.
    public var hostKeyAlgorithms: [String]
    /// `PubkeyAcceptedAlgorithms`: the list ssh would offer, modifiers applied.
    public var pubkeyAcceptedAlgorithms: [String]
    /// `LocalForward`s, in order; empty with `ClearAllForwardings yes`.
    public var localForwards: [SSHConfigForward]
    /// `RemoteForward`s, in order (one without `connect` is a remote SOCKS proxy); empty
    /// with `ClearAllForwardings yes`.
    public var remoteForwards: [SSHConfigForward]
    /// `DynamicForward`s, in order (each without `connect`); empty with
    /// `ClearAllForwardings yes`.
    public var dynamicForwards: [SSHConfigForward]
    /// `ForwardAgent`: nil for no, `""` for yes (the agent of `IdentityAgent` or
    /// `SSH_AUTH_SOCK`), or the socket path to forward.
    public var forwardAgent: String?
    /// `SetEnv` in order (`NAME=value` each; of a name, the first wins).
    public var setEnv: [String]
    /// `SendEnv` patterns (`-pattern` removals applied).
    public var sendEnv: [String]
    /// `RequestTTY`; `.auto` when not set.
    public var requestTTY: RequestTTY
    /// `ControlMaster`; `.no` when not set.
    public var controlMaster: ControlMaster
    /// Expanded; nil for none.
    public var controlPath: String?
    /// nil for no; 0 for yes (forever); otherwise seconds.
    public var controlPersist: Int?
    /// `BatchMode`; false when not set. When true, `ServerAliveInterval` defaults to 300
    /// and `OpenSSHConfig.connectionConfiguration(for:)` asks nobody anything: an unknown
    /// host key is refused, no keyboard-interactive or password prompts.
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
    /// nil: the hop's own configuration decides.
    public var user: String?
    /// The hop's host: a name or alias, resolved from the configuration like any host.
    public var host: String
    /// nil: the hop's own configuration (or 22) decides.
    public var port: Int?

    /// A hop to `host`, with an optional user and port.
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
    /// One end of a forward.
    public enum End: Sendable, Equatable {
        /// nil host: the default (loopback for a local listener, all for a remote one).
        case port(host: String?, port: Int)
        /// A Unix domain socket path.
        case path(String)
    }

    /// Where connections are accepted.
    public var listen: End
    /// nil for a dynamic (SOCKS) forward.
    public var connect: End?

    /// A forward from `listen` to `connect` (nil for a dynamic forward).
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
