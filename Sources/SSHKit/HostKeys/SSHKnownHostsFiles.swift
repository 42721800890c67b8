import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Several `known_hosts` files read as one, the way ssh reads `UserKnownHostsFile`
/// and `GlobalKnownHostsFile`: a host's keys are those of every file, a key revoked
/// in any file is revoked, and new keys are recorded in the first user file.
///
/// `/dev/null` (a common `UserKnownHostsFile` for throwaway hosts) is an empty file
/// that takes writes and keeps nothing. With `hostKeyAlias` (ssh's `HostKeyAlias`),
/// every lookup and record uses that name, without a port, as ssh does.
public struct SSHKnownHostsFiles: SSHHostKeyStore {
    /// Read, and the first one written.
    public let userFiles: [SSHKnownHostsStore]
    /// Read only (`/etc/ssh/ssh_known_hosts` …).
    public let globalFiles: [SSHKnownHostsStore]
    /// ssh's `HostKeyAlias`: when set, the name every lookup and record uses, with port 22.
    public let hostKeyAlias: String?

    /// - Parameters:
    ///   - userFiles: paths read and, the first, written (`~/.ssh/known_hosts`).
    ///   - globalFiles: paths only read.
    ///   - hostFormat: how new entries are written (`HashKnownHosts`).
    ///   - hostKeyAlias: ssh's `HostKeyAlias`: the name every lookup and record uses.
    public init(userFiles: [String], globalFiles: [String] = [], hostFormat: SSHKnownHostsStore.HostFormat = .hashed,
                hostKeyAlias: String? = nil)
    {
        self.userFiles = userFiles.map { SSHKnownHostsStore(path: $0, hostFormat: hostFormat) }
        self.globalFiles = globalFiles.map { SSHKnownHostsStore(path: $0, hostFormat: hostFormat) }
        self.hostKeyAlias = hostKeyAlias
    }

    /// The name and port entries are kept under.
    func lookupName(host: String, port: Int) -> (host: String, port: Int) {
        hostKeyAlias.map { ($0, 22) } ?? (host, port)
    }

    /// The keys, revocations and certificate authorities of every file (user files, then
    /// global files) for the host, or for `hostKeyAlias`. `/dev/null` and missing files
    /// count as empty, and a global file this user may not read is skipped (as ssh skips
    /// it).
    /// - Throws: `SSHError` (`knownHostsUnusable`) when a file cannot be used (see
    ///   `SSHKnownHostsStore`).
    public func lookup(host: String, port: Int) async throws -> SSHKnownHostKeys {
        let (name, p) = lookupName(host: host, port: port)
        var known = SSHKnownHostKeys()
        for store in userFiles + globalFiles where store.path != "/dev/null" {
            let file: SSHKnownHostsFile
            let global = globalFiles.contains { $0 === store }
            do throws(SSHError) {
                file = try store.read()
            } catch {
                // a system file this user may not read (0600 root): ssh skips it too. Nobody
                // can add a key through a file that cannot be read.
                if global && error.systemErrno == EACCES { continue }
                throw error
            }
            let found = file.lookup(host: name, port: p)
            for k in found.keys where !known.keys.contains(k) { known.keys.append(k) }
            known.revoked += found.revoked
            for k in found.certificateAuthorities where !known.certificateAuthorities.contains(k) {
                known.certificateAuthorities.append(k)
            }
        }
        return known
    }

    /// Records `key` in the first user file (creating `~/.ssh`-like parent directories
    /// 0700 when missing, as ssh does). Without user files nothing is recorded.
    public func add(_ key: SSHHostKey, host: String, port: Int) async throws {
        guard let first = userFiles.first, first.path != "/dev/null" else { return }
        let (name, p) = lookupName(host: host, port: port)
        let parent = (first.path as NSString).deletingLastPathComponent
        if !parent.isEmpty, access(parent, F_OK) != 0 {
            guard mkdir(parent, 0o700) == 0 || errno == EEXIST else {
                var e = SSHError(.knownHostsUnusable, "\(parent): cannot create the directory for \(first.path): "
                                 + String(cString: strerror(errno)))
                e.systemErrno = errno
                throw e
            }
        }
        try await first.add(key, host: name, port: p)
    }
}
