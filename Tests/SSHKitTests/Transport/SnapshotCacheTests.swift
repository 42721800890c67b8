import Foundation
import ServerTransport
import Testing

/// Where snapshots are cached, and what a local snapshot accepts.
@Suite("Snapshot cache", .tags(.pure))
struct SnapshotCacheTests {
    @Test func everyServerGetsADirectoryOfItsOwnInsideTheCache() {
        let cache = SnapshotCache(directory: "/cache")
        let long = String(repeating: "x", count: 70)
        let a = cache.path(for: "/srv/state.db", on: ServerID("ssh:\(long)-a"))
        let b = cache.path(for: "/srv/state.db", on: ServerID("ssh:\(long)-b"))
        #expect(a != b, "two servers whose IDs share 60 characters share a copy")
        for id in ["..", "../..", "a/../../etc", "/"] {
            let p = cache.path(for: "/srv/state.db", on: ServerID(id))
            let parts = p.split(separator: "/")
            #expect(p.hasPrefix("/cache/") && !parts.contains("..") && !parts.contains("."), "\(id) -> \(p)")
            #expect(parts.count == 3, "\(id) -> \(p)")
        }
        // the same database on the same server: the same copy, across runs
        #expect(cache.path(for: "/srv/state.db", on: ServerID("s")) == cache.path(for: "/srv/state.db", on: ServerID("s")))
        #expect(cache.path(for: "/a/state.db", on: ServerID("s")) != cache.path(for: "/b/state.db", on: ServerID("s")))
    }

    @Test func aLocalSnapshotAcceptsALinkToADatabaseButNotADirectory() async throws {
        let dir = try TestPaths.makeTemporaryDirectory("localsnap")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let t = LocalTransport()
        try await t.writeFile(dir + "/real.db", contents: Array("SQLite format 3\u{0}".utf8))
        #expect(symlink(dir + "/real.db", dir + "/link.db") == 0)
        #expect(try await t.snapshotSQLite(dir + "/link.db").path == dir + "/link.db")
        #expect(symlink(dir, dir + "/dirlink") == 0)
        do {
            _ = try await t.snapshotSQLite(dir + "/dirlink")
            Issue.record("a link to a directory was taken for a database")
        } catch {
            #expect(error.code == .fileIO, "\(error)")
        }
    }
}
