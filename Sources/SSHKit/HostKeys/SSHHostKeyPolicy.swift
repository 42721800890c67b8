/// Decides whether a server's host key is trusted. Every policy fails closed:
/// a store error, a throwing closure or an empty pin list rejects the key.
///
/// - `strict(store)`: only keys the store already knows.
/// - `acceptNew(store)`: trust on first use; the key is recorded, and a changed
///   key (or a key of another type) for a known host is rejected.
/// - `pinned([fingerprints])`: only keys with one of these SHA256 fingerprints.
/// - `custom { context in ... }`: your async decision.
/// - `insecureAcceptAnyHostKey`: no verification at all; for tests and throwaway
///   servers only. Anyone on the path can impersonate the server.
public struct SSHHostKeyPolicy: Sendable {
    enum Kind: Sendable {
        case strict(any SSHHostKeyStore)
        case acceptNew(any SSHHostKeyStore)
        case pinned([String])
        case custom(@Sendable (SSHHostKeyContext) async throws -> SSHHostKeyDecision)
        case insecureAcceptAny
    }

    let kind: Kind

    /// Only keys `store` already trusts for the host; an unknown host, a changed key or
    /// a revoked key is rejected, and nothing is recorded.
    public static func strict(_ store: any SSHHostKeyStore) -> SSHHostKeyPolicy { .init(kind: .strict(store)) }
    /// Trust on first use: a host `store` does not know has its key recorded (`add`) and
    /// accepted; a changed or revoked key is rejected. A host known only through
    /// `@cert-authority` lines is rejected, never recorded.
    public static func acceptNew(_ store: any SSHHostKeyStore) -> SSHHostKeyPolicy { .init(kind: .acceptNew(store)) }
    /// Fingerprints as `ssh-keygen -lf` prints them (`SHA256:...`); the prefix and
    /// base64 padding are optional.
    public static func pinned(_ sha256Fingerprints: [String]) -> SSHHostKeyPolicy { .init(kind: .pinned(sha256Fingerprints)) }
    /// Your decision, asked with the host, port and presented key; a thrown error rejects
    /// the key.
    public static func custom(
        _ decide: @escaping @Sendable (SSHHostKeyContext) async throws -> SSHHostKeyDecision
    ) -> SSHHostKeyPolicy { .init(kind: .custom(decide)) }
    /// Accepts every key without checking. The name says it: never use this to
    /// reach a server over a network you do not control.
    public static var insecureAcceptAnyHostKey: SSHHostKeyPolicy { .init(kind: .insecureAcceptAny) }

    /// Evaluates the policy. Never throws: every failure is a rejection.
    func evaluate(_ context: SSHHostKeyContext) async -> SSHHostKeyVerdict {
        let key = context.presentedKey
        switch kind {
        case .insecureAcceptAny:
            return .accept
        case .pinned(let pins):
            let wanted = pins.compactMap(SSHHostKey.normalizedSHA256)
            if wanted.contains(key.sha256Fingerprint) { return .accept }
            return .reject(wanted.isEmpty ? "no valid SHA256 fingerprint is pinned" : "fingerprint is not pinned",
                           expected: wanted, cause: nil)
        case .strict(let store):
            do {
                let known = try await store.lookup(host: context.host, port: context.port)
                if known.revoked.contains(key) { return .reject("key is revoked", expected: [], cause: nil) }
                if known.keys.contains(key) { return .accept }
                if known.keys.isEmpty, !known.certificateAuthorities.isEmpty { return Self.certificateOnly(known) }
                return .reject(known.keys.isEmpty ? "host is not known" : "host key does not match the known key",
                               expected: known.keys.map(\.sha256Fingerprint), cause: nil)
            } catch {
                return .reject("host key store failed", expected: [], cause: error)
            }
        case .acceptNew(let store):
            do {
                let known = try await store.lookup(host: context.host, port: context.port)
                if known.revoked.contains(key) { return .reject("key is revoked", expected: [], cause: nil) }
                if known.keys.contains(key) { return .accept }
                if known.keys.isEmpty, !known.certificateAuthorities.isEmpty { return Self.certificateOnly(known) }
                if !known.keys.isEmpty {
                    return .reject("host key changed: the host is known with another key",
                                   expected: known.keys.map(\.sha256Fingerprint), cause: nil)
                }
                try await store.add(key, host: context.host, port: context.port)
                return .accept
            } catch {
                return .reject("host key store failed", expected: [], cause: error)
            }
        case .custom(let decide):
            do {
                switch try await decide(context) {
                case .accept: return .accept
                case .reject(let reason): return .reject(reason, expected: [], cause: nil)
                }
            } catch {
                return .reject("host key callback threw", expected: [], cause: error)
            }
        }
    }
}

extension SSHHostKeyPolicy {
    /// A host vouched for only by `@cert-authority` lines: fail closed, and say why.
    static func certificateOnly(_ known: SSHKnownHostKeys) -> SSHHostKeyVerdict {
        .reject(certificateOnlyReason, expected: known.certificateAuthorities.map { "CA " + $0.sha256Fingerprint },
                cause: nil)
    }

    static let certificateOnlyReason = "the host is known only through @cert-authority lines, and libssh 0.10 "
        + "cannot verify host certificates: add the host's own key to known_hosts (ssh-keyscan, or ssh-keygen -lf to compare)"
}

/// What a custom host key policy sees.
public struct SSHHostKeyContext: Sendable {
    /// The host name as configured (`SSHConfiguration.host`), not a resolved address.
    public let host: String
    /// The port as configured (`SSHConfiguration.port`).
    public let port: Int
    /// The key the server presented.
    public let presentedKey: SSHHostKey
}

/// A custom policy's answer.
public enum SSHHostKeyDecision: Sendable, Equatable {
    /// Trust the key; the connection goes on to authentication.
    case accept
    /// Refuse the key: the connect fails with `hostKeyRejected`, whose message gives
    /// `reason`.
    case reject(reason: String)
}

enum SSHHostKeyVerdict: Sendable {
    case accept
    case reject(String, expected: [String], cause: (any Error & Sendable)?)
}

/// What a store knows about one host.
public struct SSHKnownHostKeys: Sendable, Equatable {
    /// Keys trusted for the host.
    public var keys: [SSHHostKey]
    /// Keys that must be rejected wherever they are presented (`@revoked`).
    public var revoked: [SSHHostKey]
    /// Certificate authorities trusted to sign the host's keys (`@cert-authority`).
    /// libssh 0.10 cannot verify host certificates, so a host known only through
    /// these is rejected with a reason that says so (never accepted as new).
    public var certificateAuthorities: [SSHHostKey]
    /// What a store knows about a host; empty by default (an unknown host).
    public init(keys: [SSHHostKey] = [], revoked: [SSHHostKey] = [], certificateAuthorities: [SSHHostKey] = []) {
        self.keys = keys
        self.revoked = revoked
        self.certificateAuthorities = certificateAuthorities
    }
}

/// Where host keys are remembered. Implementations must be safe to call from
/// several tasks at once. Errors thrown here make the policy reject the key.
public protocol SSHHostKeyStore: Sendable {
    /// What the store knows about `host` at `port`: empty for an unknown host. A thrown
    /// error makes the policy reject the key.
    func lookup(host: String, port: Int) async throws -> SSHKnownHostKeys
    /// Records `key` for the host (used by `acceptNew`).
    func add(_ key: SSHHostKey, host: String, port: Int) async throws
}
