/// Which algorithms a connection may negotiate, in order of preference.
///
/// `nil` leaves a category at libssh's defaults. Names are checked against this
/// libssh before connecting: an unsupported name fails with `invalidArgument`
/// naming it (libssh itself would silently drop it). A server that offers nothing
/// in a list fails key exchange with `keyExchangeFailed`, whose libssh message names
/// both sides' lists.
public struct SSHAlgorithms: Sendable, Equatable {
    public var keyExchange: [String]?
    public var hostKey: [String]?
    public var ciphersClientToServer: [String]?
    public var ciphersServerToClient: [String]?
    public var macsClientToServer: [String]?
    public var macsServerToClient: [String]?
    /// Both directions: `none`, `zlib@openssh.com`, `zlib`.
    public var compression: [String]?
    /// Key types this client will use to authenticate (libssh's
    /// `PUBLICKEY_ACCEPTED_TYPES`).
    public var publicKeyAcceptedTypes: [String]?
    /// The smallest RSA key accepted (host or user), in bits.
    public var minimumRSABits: Int?

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

    /// Nothing built on SHA-1 or CBC; RSA keys of at least 2048 bits.
    public static let modern = SSHAlgorithms(
        keyExchange: ["curve25519-sha256", "curve25519-sha256@libssh.org", "ecdh-sha2-nistp256",
                      "ecdh-sha2-nistp384", "ecdh-sha2-nistp521", "diffie-hellman-group18-sha512",
                      "diffie-hellman-group16-sha512", "diffie-hellman-group-exchange-sha256"],
        hostKey: ["ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
                  "rsa-sha2-512", "rsa-sha2-256"],
        ciphers: ["chacha20-poly1305@openssh.com", "aes256-gcm@openssh.com", "aes128-gcm@openssh.com",
                  "aes256-ctr", "aes192-ctr", "aes128-ctr"],
        macs: ["hmac-sha2-256-etm@openssh.com", "hmac-sha2-512-etm@openssh.com", "hmac-sha2-256", "hmac-sha2-512"],
        compression: ["none"],
        publicKeyAcceptedTypes: ["ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
                                 "ecdsa-sha2-nistp521", "rsa-sha2-512", "rsa-sha2-256"],
        minimumRSABits: 2048)

    /// `modern` plus what old servers need: SHA-1 key exchange and MACs, `ssh-rsa`
    /// signatures, CBC ciphers, 1024-bit RSA. Use it only for servers that need it.
    public static let compatible = SSHAlgorithms(
        keyExchange: modern.keyExchange! + ["diffie-hellman-group14-sha256", "diffie-hellman-group14-sha1",
                                            "diffie-hellman-group-exchange-sha1", "diffie-hellman-group1-sha1"],
        hostKey: modern.hostKey! + ["ssh-rsa"],
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
    public var keyExchange: String
    public var hostKey: String
    public var cipherClientToServer: String
    public var cipherServerToClient: String
    /// `aead-poly1305` / `aead-gcm` when the cipher authenticates itself.
    public var macClientToServer: String
    public var macServerToClient: String
}
