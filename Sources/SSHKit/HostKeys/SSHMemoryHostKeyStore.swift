import Synchronization

/// A host key store that lives in memory, keyed by host and port.
public final class SSHMemoryHostKeyStore: SSHHostKeyStore {
    private struct Entry: Hashable { var host: String; var port: Int }
    private let entries: Mutex<[Entry: SSHKnownHostKeys]>

    /// An empty store.
    public init() { entries = Mutex([:]) }

    /// The keys added and revoked for this host (compared case-insensitively) and port.
    /// Never throws.
    public func lookup(host: String, port: Int) async throws -> SSHKnownHostKeys {
        entries.withLock { $0[Entry(host: host.lowercased(), port: port)] ?? SSHKnownHostKeys() }
    }

    /// Adds `key` to the host's trusted keys (once). Never throws.
    public func add(_ key: SSHHostKey, host: String, port: Int) async throws {
        entries.withLock { table in
            let e = Entry(host: host.lowercased(), port: port)
            var known = table[e] ?? SSHKnownHostKeys()
            if !known.keys.contains(key) { known.keys.append(key) }
            table[e] = known
        }
    }

    /// Marks a key as revoked for this host and port only (as one `@revoked` line naming
    /// that host would): it is refused there even if it was added, and removed from the
    /// host's known keys. Other hosts are not affected.
    public func revoke(_ key: SSHHostKey, host: String, port: Int) {
        entries.withLock { table in
            let e = Entry(host: host.lowercased(), port: port)
            var known = table[e] ?? SSHKnownHostKeys()
            known.keys.removeAll { $0 == key }
            if !known.revoked.contains(key) { known.revoked.append(key) }
            table[e] = known
        }
    }
}
