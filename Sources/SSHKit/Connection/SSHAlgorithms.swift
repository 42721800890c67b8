/// Which algorithms a connection may negotiate, in order of preference.
///
/// `nil` leaves a category at libssh's defaults. Names are checked against this
/// libssh before connecting: an unsupported name fails with `invalidArgument`
/// naming it (libssh itself would silently drop it). A server that offers nothing
/// in a list fails key exchange with `keyExchangeFailed`, whose libssh message names
/// both sides' lists.
public struct SSHAlgorithms: Sendable, Equatable {
    /// Key exchange methods (ssh_config's `KexAlgorithms`), e.g. `curve25519-sha256`.
    public var keyExchange: [String]?
    /// Host key algorithms the server may prove itself with (ssh_config's
    /// `HostKeyAlgorithms`), e.g. `ssh-ed25519`, `rsa-sha2-512`.
    public var hostKey: [String]?
    /// Ciphers for data sent to the server (ssh_config's `Ciphers` sets both directions).
    public var ciphersClientToServer: [String]?
    /// Ciphers for data sent by the server.
    public var ciphersServerToClient: [String]?
    /// MACs for data sent to the server (ssh_config's `MACs` sets both directions);
    /// not used with an AEAD cipher such as `chacha20-poly1305@openssh.com`.
    public var macsClientToServer: [String]?
    /// MACs for data sent by the server.
    public var macsServerToClient: [String]?
    /// Both directions: `none`, `zlib@openssh.com`, `zlib`.
    public var compression: [String]?
    /// Key types this client will use to authenticate (libssh's
    /// `PUBLICKEY_ACCEPTED_TYPES`).
    public var publicKeyAcceptedTypes: [String]?
    /// The smallest RSA key accepted (host or user), in bits.
    public var minimumRSABits: Int?

    /// A profile; every category left `nil` keeps libssh's defaults, and `ciphers` and
    /// `macs` set both directions. Checked when connecting: an empty list, a name this
    /// libssh does not support, or a `minimumRSABits` outside 768...16384 throws
    /// `invalidArgument`.
    public init(
        keyExchange: [String]? = nil, hostKey: [String]? = nil,
        ciphers: [String]? = nil, macs: [String]? = nil, compression: [String]? = nil,
        publicKeyAcceptedTypes: [String]? = nil, minimumRSABits: Int? = nil
    ) {
        self.keyExchange = keyExchange
        self.hostKey = hostKey
        self.ciphersClientToServer = ciphers
        self.ciphersServerToClient = ciphers
        self.macsClientToServer = macs
        self.macsServerToClient = macs
        self.compression = compression
        self.publicKeyAcceptedTypes = publicKeyAcceptedTypes
        self.minimumRSABits = minimumRSABits
    }

    /// libssh's own defaults for everything.
    public static let libsshDefaults = SSHAlgorithms()

    /// Nothing built on SHA-1 or CBC, and no NIST curve for the key exchange or the
    /// server's key (what ssh-audit fails); RSA keys of at least 2048 bits. A server whose
    /// only host key is ECDSA needs `compatible`.
    public static let modern = SSHAlgorithms(
        keyExchange: ["curve25519-sha256", "curve25519-sha256@libssh.org", "diffie-hellman-group18-sha512",
                      "diffie-hellman-group16-sha512", "diffie-hellman-group-exchange-sha256"],
        hostKey: ["ssh-ed25519", "rsa-sha2-512", "rsa-sha2-256"],
        ciphers: ["chacha20-poly1305@openssh.com", "aes256-gcm@openssh.com", "aes128-gcm@openssh.com",
                  "aes256-ctr", "aes192-ctr", "aes128-ctr"],
        macs: ["hmac-sha2-256-etm@openssh.com", "hmac-sha2-512-etm@openssh.com", "hmac-sha2-256", "hmac-sha2-512"],
        compression: ["none"],
        publicKeyAcceptedTypes: ["ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
                                 "ecdsa-sha2-nistp521", "rsa-sha2-512", "rsa-sha2-256"],
        minimumRSABits: 2048)

    /// `modern` plus what other and older servers need: NIST-curve key exchange and ECDSA
    /// host keys, SHA-1 key exchange and MACs, `ssh-rsa` signatures, CBC ciphers, 1024-bit
    /// RSA. Use it only for servers that need it.
    public static let compatible = SSHAlgorithms(
        keyExchange: modern.keyExchange! + ["ecdh-sha2-nistp256", "ecdh-sha2-nistp384", "ecdh-sha2-nistp521",
                                            "diffie-hellman-group14-sha256", "diffie-hellman-group14-sha1",
                                            "diffie-hellman-group-exchange-sha1", "diffie-hellman-group1-sha1"],
        hostKey: modern.hostKey! + ["ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-rsa"],
        ciphers: modern.ciphersClientToServer! + ["aes256-cbc", "aes192-cbc", "aes128-cbc", "3des-cbc"],
        macs: modern.macsClientToServer! + ["hmac-sha1-etm@openssh.com", "hmac-sha1"],
        compression: ["none", "zlib@openssh.com", "zlib"],
        publicKeyAcceptedTypes: modern.publicKeyAcceptedTypes! + ["ssh-rsa"],
        minimumRSABits: 1024)

    /// The names this libssh does not support, as `category name`.
    public var unsupportedNames: [String] { CoreAlgorithms.unsupported(self) }
}

/// What key exchange settled on. Compression and whether strict key exchange
/// (the Terrapin countermeasure) is in force are not exposed by libssh 0.10.
public struct SSHNegotiatedAlgorithms: Sendable, Equatable {
    /// The key exchange method, e.g. `curve25519-sha256`.
    public var keyExchange: String
    /// The type of the server's host key, e.g. `ssh-ed25519` or `ecdsa-sha2-nistp256`;
    /// `ssh-rsa` for an RSA key, whichever signature algorithm (`rsa-sha2-512`, ...) was used.
    public var hostKey: String
    /// The cipher for data sent to the server.
    public var cipherClientToServer: String
    /// The cipher for data sent by the server.
    public var cipherServerToClient: String
    /// `aead-poly1305` / `aead-gcm` when the cipher authenticates itself.
    public var macClientToServer: String
    /// The MAC for data sent by the server; see `macClientToServer`.
    public var macServerToClient: String
}
