import Foundation

/// Where remote transports keep the SQLite snapshots they download, one directory per
/// server (`ServerID`), so a snapshot can stand in while the server is unreachable.
public struct SnapshotCache: Sendable, Equatable {
    /// The root of the cache; each server gets a directory of its own below it.
    public var directory: String

    /// A cache under `directory`; missing directories are made (0700) when a snapshot is stored.
    public init(directory: String) {
        self.directory = directory
    }

    /// `$XDG_CACHE_HOME/sshkit/snapshots`, else `~/.cache/sshkit/snapshots`.
    public static var standard: SnapshotCache {
        let env = ProcessInfo.processInfo.environment
        let base = env["XDG_CACHE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? (env["HOME"] ?? NSHomeDirectory()) + "/.cache"
        return SnapshotCache(directory: base + "/sshkit/snapshots")
    }

    /// The cached copy of `remotePath` on `server`: a readable name plus a hash of the
    /// whole path, so two databases with one name do not collide.
    /// The server's directory is named the same way (readable, cut to 60 characters, and
    /// a hash of the whole ID), so two servers never share one and no ID leaves the cache.
    public func path(for remotePath: String, on server: ServerID) -> String {
        directory + "/" + Self.safeName(server.rawValue) + "-" + Self.hash(server.rawValue) + "/"
            + Self.safeName(String(remotePath.split(separator: "/").last ?? "db")) + "-" + Self.hash(remotePath)
            + ".sqlite"
    }

    static func safeName(_ s: String) -> String {
        String(s.map { $0.isLetter || $0.isNumber || "-_.@".contains($0) ? $0 : "_" }.prefix(60))
    }

    /// FNV-1a, 64 bits, in hex: stable across runs (unlike `Hasher`).
    static func hash(_ s: String) -> String {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in s.utf8 {
            h ^= UInt64(b)
            h &*= 0x100_0000_01b3
        }
        return String(h, radix: 16)
    }
}
