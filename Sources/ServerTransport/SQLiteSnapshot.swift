import Foundation
import SSHKit
#if canImport(Glibc)
import Glibc
#endif

/// A consistent copy of a SQLite database that this process can open (`path`).
public struct SQLiteSnapshot: Sendable {
    /// A local file: the database itself for `LocalTransport`, else a copy in the
    /// transport's `SnapshotCache`, in rollback-journal mode (no -wal or -shm needed).
    public var path: String
    /// When the copy was made.
    public var takenAt: Date
    /// True when the server could not be reached and this is the last copy made.
    public var isCached: Bool
    /// Why a cached copy stands in (`hostUnreachable`).
    public var unreachable: TransportError?

    /// Seconds since the copy was made.
    public var age: TimeInterval { Date().timeIntervalSince(takenAt) }

    /// A snapshot from its parts (transports make them; a test may too).
    public init(path: String, takenAt: Date, isCached: Bool = false, unreachable: TransportError? = nil) {
        self.path = path
        self.takenAt = takenAt
        self.isCached = isCached
        self.unreachable = unreachable
    }
}

/// The remote recipe, through any transport's own calls: `sqlite3 .backup` into a
/// temporary file in the server's `$TMPDIR` (or `/tmp`; consistent even while the
/// database is written in WAL mode), `PRAGMA journal_mode=DELETE` on the copy, a download
/// into the cache (atomic there too), and the temporary file removed. When the server is
/// unreachable, the last cached copy stands in.
///
/// The copy is not made beside the database: creating and removing it there would change
/// the database's directory, and a watch on that directory would report a change after
/// every snapshot.
enum RemoteSQLiteSnapshot {
    static func take(_ transport: some ServerTransport, _ path: String, cache: SnapshotCache)
        async throws(TransportError) -> SQLiteSnapshot
    {
        let local = cache.path(for: path, on: transport.serverID)
        return try await orCached(local) { () async throws(TransportError) in
            let temp = try await backup(transport, path)
            let bytes: [UInt8]
            do throws(TransportError) {
                bytes = try await transport.readFile(temp)
            } catch {
                await remove(temp, transport)
                throw error
            }
            await remove(temp, transport)
            try store(bytes, at: local)
            return SQLiteSnapshot(path: local, takenAt: Date())
        }
    }

    /// Removes the server's temporary copy, also when the calling task was cancelled (in a
    /// task of its own, which the caller waits for; at most 30 s). A copy left behind by a
    /// lost connection is swept by a later snapshot after an hour.
    private static func remove(_ temp: String, _ transport: some ServerTransport) async {
        await Task.detached {
            _ = try? await transport.runProcess("/bin/rm", arguments: ["-f", "--", temp], stdin: [], environment: [:],
                                                timeout: .seconds(30))
        }.value
    }

    /// `fresh()`, or when the server cannot be reached, the cached copy at `local` if any.
    static func orCached(_ local: String, _ fresh: () async throws(TransportError) -> SQLiteSnapshot)
        async throws(TransportError) -> SQLiteSnapshot
    {
        do {
            return try await fresh()
        } catch where error.code == .hostUnreachable {
            guard let st = try? LocalTransport().statBlocking(local) else { throw error }
            let taken = Date(timeIntervalSince1970: st.modificationTime)
            return SQLiteSnapshot(path: local, takenAt: taken, isCached: true, unreachable: error)
        }
    }

    /// The script run by the server's login shell: prints the temporary copy's path.
    static func script(_ path: String) -> String {
        // sqlite3 takes a leading "-" for an option: relative paths get "./"
        let source = path.byteHasPrefix("/") || path.byteHasPrefix("~") ? path : "./" + path
        let db = OpenSSHTransport.word(source)
        return """
        command -v sqlite3 >/dev/null 2>&1 || { echo "sqlite3: not found on the server" >&2; exit 127; }
        p=\(db)
        [ -f "$p" ] || { echo "$p: No such file or directory" >&2; exit 2; }
        case "$p" in /*) ;; *) p="$PWD/$p" ;; esac
        # in the temporary directory, so the name inside the .backup command is ours alone
        # (mktemp: 0600, O_EXCL); copies older than an hour were left by lost connections
        cd -- "${TMPDIR:-/tmp}" || exit 1
        find . -maxdepth 1 -name 'sshkit-snapshot.*' -user "$(id -u)" -mmin +60 -exec rm -f -- {} + 2>/dev/null
        t=$(mktemp sshkit-snapshot.XXXXXXXX) || exit 1
        if sqlite3 -bail "$p" ".timeout 10000" ".backup '$t'" >/dev/null &&
           sqlite3 -bail "./$t" "PRAGMA journal_mode=DELETE;" >/dev/null; then
          printf '%s/%s' "$PWD" "$t"
        else
          rm -f -- "$t" "$t-journal"; exit 1
        fi
        """
    }

    /// Makes the copy on the server; returns its path there.
    private static func backup(_ transport: some ServerTransport, _ path: String) async throws(TransportError) -> String {
        let made = try await transport.runProcess("/bin/sh", arguments: ["-c", script(path)], stdin: [],
                                                  environment: ["LC_ALL": "C"], timeout: .seconds(300))
        guard made.exitStatus == .exited(0), !made.stdout.isEmpty else {
            if made.exitStatus == .exited(2) { throw OpenSSHTransport.fileFailure(made, path, "snapshot") }
            var exitCode: Int32?
            if case .exited(let c) = made.exitStatus { exitCode = c }
            throw TransportError(.commandFailed, "snapshot of \(path) failed: \(made.stderrString.prefix(300))",
                                 path: path, context: .commandFailed(exitCode: exitCode, stderr: made.stderrString))
        }
        return made.stdoutString
    }

    /// Writes the copy into the cache: the directories 0700, the file 0600, atomically.
    static func store(_ bytes: [UInt8], at local: String) throws(TransportError) {
        var prefix = local.byteHasPrefix("/") ? "" : "."
        for part in local.byteComponents(separatedBy: UInt8(ascii: "/")).dropLast() {
            prefix += "/" + part
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw LocalTransport.ioError("create the snapshot cache", prefix, errno)
            }
        }
        try LocalTransport(secrets: SecretFiles(extra: ["*"])).writeFileBlocking(local, contents: bytes)
    }
}
