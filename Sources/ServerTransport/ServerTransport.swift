import SSHKit

/// One API for files and processes on "this machine or that server".
///
/// Implementations: `LocalTransport` (this machine), `SSHTransport` (one shared SSHKit
/// connection), `OpenSSHTransport` (`ssh` over a ControlMaster, for setups that need the
/// user's `~/.ssh/config`) and `MockTransport` (in memory, for testing services built on
/// the protocol). One contract test suite holds all four to the same assertions.
///
/// Paths are strings as the server's shell would see them; `~/` at the start means the
/// login user's home. Every call is independent and may run concurrently with others.
public protocol ServerTransport: Sendable {
    /// Stable across runs for the same server: namespaces caches ("local",
    /// "ssh:user@host:port").
    var serverID: ServerID { get }
    /// Whether the files and processes are on another machine.
    var isRemote: Bool { get }

    /// The whole file. - Throws: `fileIO` (`reason` `.noSuchFile` when it is missing).
    func readFile(_ path: String) async throws(TransportError) -> [UInt8]

    /// Replaces the file atomically: the bytes go to a temporary file in the same
    /// directory, which is synced and renamed over `path`. A reader sees the old or the
    /// new contents, never a mix; a failed write leaves the old file and no temporary file.
    /// A file whose name marks it as a secret (see `SecretFiles`) is created 0600 and
    /// stays 0600; other files keep their mode (new ones get 0644).
    func writeFile(_ path: String, contents: [UInt8]) async throws(TransportError)

    /// Whether something is at `path`; a symlink counts as itself, even one whose target
    /// is missing. A missing path is `false`, not an error.
    func fileExists(_ path: String) async throws(TransportError) -> Bool

    /// Size, modification time and kind (a symlink is reported as itself, not followed).
    func stat(_ path: String) async throws(TransportError) -> FileStatus

    /// The entries of a directory (without "." and ".."), sorted by name.
    func listDirectory(_ path: String) async throws(TransportError) -> [DirectoryEntry]

    /// Creates the directory and its missing parents; an existing directory is fine.
    func createDirectory(_ path: String) async throws(TransportError)

    /// Removes a file; a missing file is fine.
    func removeFile(_ path: String) async throws(TransportError)

    /// Runs `executable` with `arguments` (no shell on this side; remote transports quote
    /// every argument), feeds `stdin`, and collects stdout, stderr and the exit status. A
    /// non-zero exit is a result (see `ProcessResult.check()`). After `timeout` the
    /// process is stopped (TERM, then KILL) and `timeout` is thrown with what it printed.
    func runProcess(_ executable: String, arguments: [String], stdin: [UInt8],
                    environment: [String: String], timeout: Duration?) async throws(TransportError) -> ProcessResult

    /// Starts a long-running process with streamed stdin, stdout and stderr (see
    /// `TransportProcess`); returns once it started. Prefer `withProcess`, which stops it.
    func startProcess(_ executable: String, arguments: [String], environment: [String: String])
        async throws(TransportError) -> TransportProcess

    /// A consistent copy of the SQLite database at `path` that this process can open,
    /// even while the database is being written (WAL or not). Locally the path itself;
    /// remotely a copy in the transport's cache (see `SQLiteSnapshot`), and the last one
    /// made, marked `isCached`, when the server cannot be reached.
    /// - Throws: `fileIO` (`noSuchFile`) for a missing database; `commandFailed` when
    ///   the server has no `sqlite3` or the backup failed; `hostUnreachable` with no copy.
    func snapshotSQLite(_ path: String) async throws(TransportError) -> SQLiteSnapshot

    /// Yields whenever one of `paths` changes: created, modified, deleted, replaced, or
    /// for a directory, an entry of it (one level). Locally inotify (immediate; the
    /// parent directory of each path must exist); remotely a signature of the paths'
    /// sizes and modification times polled every `pollInterval`, skipping rounds while
    /// the server is unreachable. Remote modification times have the server's
    /// precision (SFTP: whole seconds), so a rewrite to the same size within the same
    /// second can go unseen there. A `pollInterval` under 50 ms is taken as 50 ms.
    func watchPaths(_ paths: [String], pollInterval: Duration) -> PathWatch
}

extension ServerTransport {
    /// `runProcess` with no input, no extra environment and no timeout.
    public func runProcess(_ executable: String, _ arguments: String...) async throws(TransportError) -> ProcessResult {
        try await runProcess(executable, arguments: arguments, stdin: [], environment: [:], timeout: nil)
    }

    /// The file as UTF-8 text (invalid bytes are replaced).
    public func readTextFile(_ path: String) async throws(TransportError) -> String {
        String(decoding: try await readFile(path), as: UTF8.self)
    }

    /// `writeFile` with the UTF-8 bytes of `text` (atomic; 0600 for a secret).
    public func writeTextFile(_ path: String, _ text: String) async throws(TransportError) {
        try await writeFile(path, contents: Array(text.utf8))
    }
}

/// A server's stable identity.
public struct ServerID: Hashable, Sendable, CustomStringConvertible {
    /// The identity as text, e.g. "ssh:user@host:22".
    public let rawValue: String
    /// An identity from its text (see `rawValue`).
    public init(_ rawValue: String) { self.rawValue = rawValue }
    /// This machine: `LocalTransport`'s identity.
    public static let local = ServerID("local")
    public var description: String { rawValue }
}

/// What a path is, as `stat` and `listDirectory` report it (a symlink is not followed).
public enum FileKind: Sendable, Equatable {
    /// A regular file.
    case file
    /// A directory.
    case directory
    /// A symbolic link, reported as itself (not what it points to).
    case symlink
    /// Anything else: a device, a socket, a FIFO, …
    case other
}

/// What `stat` reports about a path.
public struct FileStatus: Sendable, Equatable {
    /// In bytes.
    public var size: UInt64
    /// Seconds since 1970, with the precision the system gives.
    public var modificationTime: Double
    /// What the path is; a symlink is `.symlink`, not what it points to.
    public var kind: FileKind
    /// The permission bits (e.g. 0o600).
    public var permissions: UInt16

    /// A status from its parts.
    public init(size: UInt64, modificationTime: Double, kind: FileKind, permissions: UInt16) {
        self.size = size
        self.modificationTime = modificationTime
        self.kind = kind
        self.permissions = permissions
    }
}

/// One entry of `listDirectory`.
public struct DirectoryEntry: Sendable, Equatable {
    /// Its name in the directory (no path).
    public var name: String
    /// What it is; a symlink is `.symlink`, not what it points to.
    public var kind: FileKind
    /// An entry from its parts.
    public init(name: String, kind: FileKind) {
        self.name = name
        self.kind = kind
    }
}

/// What a process printed and how it ended.
public struct ProcessResult: Sendable, Equatable {
    /// How it ended: `.exited(code)`, `.signaled(name, coreDumped:)` or `.unknown`.
    public var exitStatus: SSHExitStatus
    /// Everything it wrote to standard output.
    public var stdout: [UInt8]
    /// Everything it wrote to standard error.
    public var stderr: [UInt8]

    /// A result from its parts (e.g. for a `MockTransport` script).
    public init(exitStatus: SSHExitStatus, stdout: [UInt8], stderr: [UInt8]) {
        self.exitStatus = exitStatus
        self.stdout = stdout
        self.stderr = stderr
    }

    /// `stdout` as UTF-8 text (invalid bytes are replaced).
    public var stdoutString: String { String(decoding: stdout, as: UTF8.self) }
    /// `stderr` as UTF-8 text (invalid bytes are replaced).
    public var stderrString: String { String(decoding: stderr, as: UTF8.self) }

    /// Throws `commandFailed` (with the exit code and stderr) unless it exited 0.
    @discardableResult
    public func check(_ what: String = "the command") throws(TransportError) -> ProcessResult {
        if exitStatus == .exited(0) { return self }
        var exitCode: Int32?
        if case .exited(let code) = exitStatus { exitCode = code }
        throw TransportError(.commandFailed, "\(what) ended with \(exitStatus): \(stderrString.prefix(500))",
                             context: .commandFailed(exitCode: exitCode, stderr: stderrString))
    }
}
