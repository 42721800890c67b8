/// How to authenticate: one or more methods, tried in order (like OpenSSH's
/// `PreferredAuthentications`). Methods the server does not offer are skipped.
public struct SSHAuthentication: Sendable {
    /// One way to authenticate; an `SSHAuthentication` tries its methods in order.
    public enum Method: Sendable {
        /// Password authentication (RFC 4252 `password`) with this password.
        case password(String)
        /// A private key file in OpenSSH or PEM format (Ed25519, ECDSA, RSA), and
        /// optionally an OpenSSH certificate for it (`ssh-keygen -s` makes them;
        /// `CertificateFile` or `id_*-cert.pub` with ssh), offered instead of the bare key.
        case privateKeyFile(path: String, passphrase: String?, certificate: String? = nil)
        /// A private key given as text (OpenSSH or PEM format).
        case privateKey(String, passphrase: String?)
        /// The keys of an ssh-agent; `nil` uses `SSH_AUTH_SOCK`. One agent per
        /// connection (as ssh's one `IdentityAgent`): methods that name two different
        /// agents are refused with `invalidArgument` when connecting.
        case agent(socketPath: String?)
        /// Keyboard-interactive: the responder answers each round of prompts.
        case keyboardInteractive(@Sendable (SSHKeyboardInteractiveChallenge) async throws -> [String])
        /// Password authentication with the password asked for only when the server
        /// offers it (as ssh asks "user@host's password:"), up to `attempts` times
        /// while the server refuses (ssh's `NumberOfPasswordPrompts`, 3). The
        /// responder returns the password, or nil to go on to the next method;
        /// throwing ends authentication with `authenticationFailed` and the error as
        /// its cause. The password is wiped from memory once the server answered.
        case passwordPrompt(attempts: Int, @Sendable (SSHPasswordRequest) async throws -> String?)
    }

    /// The methods, tried in order; those the server does not offer are skipped.
    /// At least one is required (`invalidArgument` when connecting otherwise).
    public var methods: [Method]
    /// Whether a method that cannot be used is skipped, as ssh skips it: a key file
    /// that is missing, unreadable, encrypted without a passphrase or open to others,
    /// a certificate that does not load or match, an agent that cannot be reached.
    /// The next method is tried, and if none succeeds the `authenticationFailed`
    /// error lists what was skipped and why. Off by default: a method you name that
    /// cannot be used fails the connection (`privateKeyUnreadable`, `agentUnavailable`).
    /// `OpenSSHConfig.connectionConfiguration` turns it on for ssh's default identities.
    public var skipsUnusableMethods: Bool
    /// Asked for the passphrase of an encrypted key given without one
    /// (`privateKeyFile` or `privateKey` with a nil passphrase) when its method is
    /// reached, as ssh asks "Enter passphrase for key '…':", and again while the
    /// passphrase is wrong, up to `passphraseAttempts` times. It returns the
    /// passphrase, or nil or an empty string to go without the key (it is then
    /// unusable: skipped under `skipsUnusableMethods`); throwing ends authentication
    /// with `authenticationFailed` and the error as its cause. The passphrase is
    /// wiped from memory once the key is loaded. nil (the default): such a key is
    /// unusable.
    public var passphrase: (@Sendable (SSHPassphraseRequest) async throws -> String?)?
    /// How many passphrases `passphrase` is asked for per key while they are wrong
    /// (ssh's `NumberOfPasswordPrompts`, 3).
    public var passphraseAttempts: Int

    /// Authentication with `methods`, tried in order; see `skipsUnusableMethods` and
    /// `passphrase`.
    public init(_ methods: [Method], skipsUnusableMethods: Bool = false,
                passphrase: (@Sendable (SSHPassphraseRequest) async throws -> String?)? = nil,
                passphraseAttempts: Int = 3) {
        self.methods = methods
        self.skipsUnusableMethods = skipsUnusableMethods
        self.passphrase = passphrase
        self.passphraseAttempts = passphraseAttempts
    }

    /// Password authentication only.
    public static func password(_ password: String) -> Self { .init([.password(password)]) }
    /// A private key file only, with its passphrase if it is encrypted and optionally an
    /// OpenSSH certificate file for it (see `Method.privateKeyFile`).
    public static func privateKey(path: String, passphrase: String? = nil, certificate: String? = nil) -> Self {
        .init([.privateKeyFile(path: path, passphrase: passphrase, certificate: certificate)])
    }
    /// A private key given as text only (OpenSSH or PEM format).
    public static func privateKey(_ text: String, passphrase: String? = nil) -> Self {
        .init([.privateKey(text, passphrase: passphrase)])
    }
    /// The keys of an ssh-agent only; `nil` uses `SSH_AUTH_SOCK`.
    public static func agent(socketPath: String? = nil) -> Self { .init([.agent(socketPath: socketPath)]) }
    /// Keyboard-interactive authentication only: `responder` answers each round of
    /// prompts (see `Method.keyboardInteractive`).
    public static func keyboardInteractive(
        _ responder: @escaping @Sendable (SSHKeyboardInteractiveChallenge) async throws -> [String]
    ) -> Self { .init([.keyboardInteractive(responder)]) }
}

/// A password that `SSHAuthentication.Method.passwordPrompt` asks for.
public struct SSHPasswordRequest: Sendable {
    /// The user being authenticated, as configured.
    public let user: String
    /// The server's host, as configured.
    public let host: String
    /// What ssh shows: `"user@host's password: "`.
    public let prompt: String
    /// 1 for the first password, 2 once the server refused it, and so on.
    public let attempt: Int
}

/// The passphrase of an encrypted private key, asked for by
/// `SSHAuthentication.passphrase`.
public struct SSHPassphraseRequest: Sendable {
    /// The key file's path; nil for a key given as text.
    public let keyPath: String?
    /// What ssh shows: `"Enter passphrase for key '/home/me/.ssh/id_ed25519': "`, and
    /// `"Bad passphrase, try again for /home/me/.ssh/id_ed25519: "` after a wrong one.
    public let prompt: String
    /// 1 for the first passphrase, 2 once it was wrong, and so on.
    public let attempt: Int
}

/// One round of keyboard-interactive prompts.
public struct SSHKeyboardInteractiveChallenge: Sendable {
    /// One question of a round.
    public struct Prompt: Sendable {
        /// The question as the server sent it, e.g. `"Password: "`.
        public let text: String
        /// Whether the answer may be shown while typed (false for passwords).
        public let echo: Bool
    }
    /// The round's name as the server sent it; often empty.
    public let name: String
    /// Instructions the server sent to show before the prompts; often empty.
    public let instruction: String
    /// The questions, at least one. The responder returns one answer per prompt, in
    /// order; a different number of answers ends authentication with
    /// `authenticationFailed` (an `invalidArgument` error as its cause).
    public let prompts: [Prompt]
}

/// Authentication methods a server offers.
public struct SSHAuthMethods: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// RFC 4252's "none" method: the server lets the user in without credentials.
    /// (Not `.none`, which would read as `Optional.none`.)
    public static let noneMethod = SSHAuthMethods(rawValue: 1 << 0)
    /// RFC 4252's `password` method.
    public static let password = SSHAuthMethods(rawValue: 1 << 1)
    /// RFC 4252's `publickey` method: key files, keys in memory and agent keys use it.
    public static let publicKey = SSHAuthMethods(rawValue: 1 << 2)
    /// RFC 4252's `hostbased` method (SSHKit does not use it).
    public static let hostBased = SSHAuthMethods(rawValue: 1 << 3)
    /// The `keyboard-interactive` method (RFC 4256).
    public static let keyboardInteractive = SSHAuthMethods(rawValue: 1 << 4)
    /// The `gssapi-with-mic` method (RFC 4462, e.g. Kerberos; SSHKit does not use it).
    public static let gssapi = SSHAuthMethods(rawValue: 1 << 5)

    public var description: String {
        let names: [(SSHAuthMethods, String)] = [
            (.noneMethod, "none"), (.password, "password"), (.publicKey, "publickey"),
            (.hostBased, "hostbased"), (.keyboardInteractive, "keyboard-interactive"), (.gssapi, "gssapi-with-mic"),
        ]
        return names.filter { contains($0.0) }.map(\.1).joined(separator: ",")
    }
}
