import SSHKit
import Synchronization

/// A server over SSHKit: one long-lived connection shared by every caller (each call
/// is its own channel or SFTP request, many in flight at once), reconnecting when it
/// drops. Files go over SFTP, processes over exec channels.
///
/// - Paths: `~` and `~/…` are the login user's home (asked once per connection); other
///   relative paths are relative to it too (SFTP's and exec's working directory).
/// - Processes: the executable and every argument go through `SSHShellQuoting`, the one
///   quoting function, before they reach the login shell (which must be POSIX).
/// - Reconnecting: a call that finds the connection gone connects again. A file call
///   that fails because the connection dropped under it is retried once on a new one;
///   a process is never re-run (it may have run), its call fails with `hostUnreachable`.
/// - Keepalive: when the configuration has none, 15 s × 3 is used, so a dead server is
///   noticed within a minute even while nothing runs.
/// - Sessions: at most `maxSessions` channels are open at once (the SFTP session and the
///   processes), the server's `MaxSessions`; more processes wait for a free one. File
///   calls share the one SFTP session and never wait.
public final class SSHTransport: ConnectedTransport, Sendable {
    /// "ssh:USER@HOST:PORT" from the configuration unless given.
    public let serverID: ServerID
    /// Always `true`.
    public let isRemote = true
    /// The file names `writeFile` keeps at 0600.
    public let secrets: SecretFiles
    /// Where `snapshotSQLite` keeps its copies.
    public let cache: SnapshotCache
    let link: SharedConnection
    /// Exec channels: `maxSessions` less the SFTP session.
    let processes: SessionGate

    /// Nothing connects until the first call. `maxSessions` is the server's `MaxSessions`
    /// (OpenSSH's default is 10): one is the SFTP session, the others run processes. Less
    /// than 2 is taken as 2 (the SFTP session and one process).
    public init(configuration: SSHConfiguration, serverID: ServerID? = nil, secrets: SecretFiles = SecretFiles(),
                cache: SnapshotCache = .standard, maxSessions: Int = 10) {
        processes = SessionGate(limit: max(2, maxSessions) - 1)
        var configuration = configuration
        if configuration.keepalive == nil { configuration.keepalive = SSHKeepalive() }
        self.serverID = serverID ?? ServerID("ssh:\(configuration.user)@\(configuration.host):\(configuration.port)")
        self.secrets = secrets
        self.cache = cache
        self.link = SharedConnection(configuration: configuration)
    }

    /// Closes the connection; later calls fail with `other` (`invalidState`).
    public func close() async {
        await link.close()
    }

    /// How many connections this transport made (1, plus one per reconnect).
    public var connectionsMade: Int {
        get async { await link.connects }
    }

    /// Connects now, rather than on the first call (to report a bad host or key early).
    public func connect() async throws(TransportError) {
        do {
            _ = try await link.get()
        } catch {
            throw TransportError(error)
        }
    }

    /// Drops the connection; the next call connects again (unlike `close`). Calls
    /// running on it fail, so drop only a connection nothing is using.
    public func disconnect() async {
        await link.disconnect()
    }

    /// The shared connection is up (as far as the client knows).
    public var isConnected: Bool {
        get async { await link.isConnected }
    }

    // MARK: plumbing

    /// `~` and `~/…` against the remote home.
    static func resolve(_ path: String, home: String) -> String {
        if path == "~" { return home }
        if path.byteHasPrefix("~/") { return home + path.byteDropFirst(1) }
        return path
    }

    private static func connectionGone(_ e: SSHError) -> Bool {
        [.disconnected, .connectionLost, .connectionClosed, .streamCorrupted, .invalidState].contains(e.code)
    }

    /// Runs `body` on the shared connection. An SSHError from it is classified; one that
    /// says the connection is gone drops it, and `retry` allows one more attempt on a new one.
    func withLive<R>(retry: Bool, path: String?, _ body: (SharedConnection.Live) async throws -> R)
        async throws(TransportError) -> R
    {
        var attempt = 0
        while true {
            attempt += 1
            let live: SharedConnection.Live
            do {
                live = try await link.get()
            } catch {
                throw TransportError(error)
            }
            do {
                return try await body(live)
            } catch let e as TransportError {
                throw e
            } catch let e as SSHError {
                if Self.connectionGone(e) {
                    await link.invalidate(live)
                    if retry && attempt == 1 && !Task.isCancelled { continue }
                }
                throw TransportError(e, path: path)
            } catch {
                throw TransportError(.other, "\(error)", path: path)
            }
        }
    }

    /// The SFTP session, or the error that says there is none.
    private static func sftp(_ live: SharedConnection.Live, _ path: String) throws(TransportError) -> SFTPClient {
        guard let s = live.sftp else {
            throw TransportError(.other, "the server has no SFTP subsystem: file calls need it", path: path)
        }
        return s
    }

    private static func lstatOrNil(_ sftp: SFTPClient, _ p: String) async throws -> SFTPFileAttributes? {
        do {
            return try await sftp.linkAttributes(at: SFTPPath(p))
        } catch where error.code == .noSuchFile {
            return nil
        }
    }

    static func kind(_ a: SFTPFileAttributes) -> FileKind {
        switch a.kind {
        case .regular: .file
        case .directory: .directory
        case .symlink: .symlink
        default: .other
        }
    }

    // MARK: files

    /// Over SFTP, at most `Int32.max` bytes (more is `fileIO` with reason `other`). A
    /// missing file is `fileIO` with reason `noSuchFile`, a directory `isADirectory`.
    /// Retried once on a new connection when the connection dropped under it.
    public func readFile(_ path: String) async throws(TransportError) -> [UInt8] {
        try TransportError.checkPath(path)
        return try await withLive(retry: true, path: path) { live in
            let p = Self.resolve(path, home: live.home)
            let sftp = try Self.sftp(live, path)
            if let a = try await Self.lstatOrNil(sftp, p), a.kind == .directory {
                throw TransportError.fileError("is a directory", path, .isADirectory)
            }
            return try await sftp.contentsOfFile(SFTPPath(p), limit: Int(Int32.max))
        }
    }

    /// `SFTPClient.write`: a temporary file beside the target, created with the final mode,
    /// then renamed over it. A symlink is written through (to its canonical path). When the
    /// connection breaks mid-way, the hidden temporary file can stay; the target is intact.
    public func writeFile(_ path: String, contents: [UInt8]) async throws(TransportError) {
        try TransportError.checkPath(path)
        try await withLive(retry: true, path: path) { live in
            var target = Self.resolve(path, home: live.home)
            let sftp = try Self.sftp(live, path)
            var existing = try await Self.lstatOrNil(sftp, target)
            if existing?.kind == .symlink {
                // write the file the link points to, and keep the link
                target = try await sftp.canonicalPath(SFTPPath(target)).string
                existing = try await Self.lstatOrNil(sftp, target)
            }
            if existing?.kind == .directory {
                throw TransportError.fileError("is a directory", path, .isADirectory)
            }
            let mode: UInt32 = secrets.isSecret(target) ? 0o600 : (existing?.mode ?? 0o644)
            try await sftp.write(contents, to: SFTPPath(target), permissions: mode)
        }
    }

    /// SFTP `lstat`: only `noSuchFile` is `false`; another SFTP error is thrown.
    public func fileExists(_ path: String) async throws(TransportError) -> Bool {
        try TransportError.checkPath(path)
        return try await withLive(retry: true, path: path) { live in
            try await Self.lstatOrNil(Self.sftp(live, path), Self.resolve(path, home: live.home)) != nil
        }
    }

    /// SFTP `lstat`; modification times in whole seconds (SFTP's precision). A missing path
    /// is `fileIO` with reason `noSuchFile`.
    public func stat(_ path: String) async throws(TransportError) -> FileStatus {
        try TransportError.checkPath(path)
        return try await withLive(retry: true, path: path) { live in
            let a = try await Self.sftp(live, path).linkAttributes(at: SFTPPath(Self.resolve(path, home: live.home)))
            return FileStatus(size: a.size ?? 0, modificationTime: Double(a.modificationTime ?? 0),
                              kind: Self.kind(a), permissions: UInt16(a.mode ?? 0))
        }
    }

    /// SFTP `readdir`, each entry's kind from the attributes the server sends with it.
    public func listDirectory(_ path: String) async throws(TransportError) -> [DirectoryEntry] {
        try TransportError.checkPath(path)
        return try await withLive(retry: true, path: path) { live in
            let p = Self.resolve(path, home: live.home)
            let sftp = try Self.sftp(live, path)
            let entries = try await sftp.listDirectory(at: SFTPPath(p))
            return entries.compactMap { e -> DirectoryEntry? in
                let name = e.name.string
                if name == "." || name == ".." { return nil }
                return DirectoryEntry(name: name, kind: Self.kind(e.attributes))
            }.sorted { $0.name < $1.name }
        }
    }

    /// SFTP `mkdir` for each missing directory (0755, less the server's umask); something
    /// at `path` that is not a directory is `fileIO` with reason `notADirectory`.
    public func createDirectory(_ path: String) async throws(TransportError) {
        try TransportError.checkPath(path)
        try await withLive(retry: true, path: path) { live in
            let p = Self.resolve(path, home: live.home)
            let sftp = try Self.sftp(live, path)
            do {
                try await sftp.createDirectory(at: SFTPPath(p), parents: true)
            } catch {
                // a file where a directory should be says so, the same as on every transport
                if let a = try? await sftp.attributes(at: SFTPPath(p)), a.kind != .directory {
                    throw TransportError.fileError("exists and is not a directory", path, .notADirectory)
                }
                throw error
            }
        }
    }

    /// SFTP `remove`; `noSuchFile` is success, a directory is `fileIO` with reason
    /// `isADirectory`.
    public func removeFile(_ path: String) async throws(TransportError) {
        try TransportError.checkPath(path)
        try await withLive(retry: true, path: path) { live in
            let p = Self.resolve(path, home: live.home)
            let sftp = try Self.sftp(live, path)
            do {
                try await sftp.removeFile(at: SFTPPath(p))
            } catch let e as SSHError where e.code == .noSuchFile {
                return
            } catch {
                if let a = try? await sftp.linkAttributes(at: SFTPPath(p)), a.kind == .directory {
                    throw TransportError.fileError("is a directory", path, .isADirectory)
                }
                throw error
            }
        }
    }

    // MARK: processes

    /// The command line the login shell runs: every word quoted by the one function, after
    /// `exec`, so the login shell hands its process over (one process fewer on the host
    /// than a shell that waits for its child; a signal the channel sends reaches the
    /// program itself).
    static func commandLine(_ executable: String, _ arguments: [String], home: String) -> String {
        "exec " + SSHShellQuoting.command([resolve(executable, home: home)] + arguments)
    }

    /// An exec channel, once one of `maxSessions` is free; `~/` in `executable` is the
    /// remote home. Without a timeout, more than 1 GiB of stdout and stderr together is an
    /// error (`other`); with one, SSHKit's channel timeout sends TERM and
    /// closes the channel. Never retried: a connection lost meanwhile is `hostUnreachable`.
    public func runProcess(_ executable: String, arguments: [String], stdin: [UInt8],
                           environment: [String: String], timeout: Duration?) async throws(TransportError) -> ProcessResult {
        try TransportError.checkProcess(executable, arguments, environment)
        return try await processes.withSession { () async throws(TransportError) in try await runProcessNow(
            executable, arguments: arguments, stdin: stdin, environment: environment, timeout: timeout) }
    }

    private func runProcessNow(_ executable: String, arguments: [String], stdin: [UInt8],
                               environment: [String: String], timeout: Duration?) async throws(TransportError) -> ProcessResult {
        try await withLive(retry: false, path: nil) { live in
            let command = Self.commandLine(executable, arguments, home: live.home)
            guard let timeout else {
                let r = try await Self.retryingRefusedOpen {
                    try await live.connection.execute(command, stdin: stdin, environment: environment, outputLimit: 1 << 30)
                }
                return ProcessResult(exitStatus: r.exitStatus, stdout: r.stdout, stderr: r.stderr)
            }
            return try await Self.runWithTimeout(live.connection, command, stdin: stdin, environment: environment,
                                                 timeout: timeout)
        }
    }

    /// Runs `open` again when the server refused the channel (nothing ran): sshd releases
    /// a session a moment after its channel closed, so a channel opened right after
    /// another one ended can be refused although the gate counts a free session. Six
    /// tries over about 1.3 s; then the refusal is thrown.
    static func retryingRefusedOpen<R>(_ open: () async throws -> R) async throws -> R {
        var delay = Duration.milliseconds(20)
        var attempt = 0
        while true {
            do {
                return try await open()
            } catch let e as SSHError where e.code == .channelOpenFailed && attempt < 6 && !Task.isCancelled {
                attempt += 1
                try await Task.sleep(for: delay)
                delay *= 2
            }
        }
    }

    /// A streamed command with SSHKit's channel timeout (TERM, then the channel closes),
    /// so what it printed before is kept for the `timeout` error.
    private static func runWithTimeout(_ connection: SSHConnection, _ command: String, stdin: [UInt8],
                                       environment: [String: String], timeout: Duration) async throws -> ProcessResult {
        let cmd = try await retryingRefusedOpen {
            try await connection.startCommand(command, options: SSHChannelOptions(environment: environment, timeout: timeout))
        }
        return try await withTaskCancellationHandler {
            // stdin and stderr beside stdout: none of them may stall the others
            async let fed: Void = {
                do {
                    try await cmd.input.write(stdin)
                    try cmd.input.finish()
                } catch {
                    // a command that exits without reading its input is not an error
                }
            }()
            async let errors: [UInt8] = {
                var all: [UInt8] = []
                do {
                    for try await chunk in cmd.stderr { all += chunk }
                } catch {}
                return all
            }()
            var out: [UInt8] = []
            do {
                for try await chunk in cmd.stdout { out += chunk }
                let status = try await cmd.exitStatus()
                await fed
                return ProcessResult(exitStatus: status, stdout: out, stderr: await errors)
            } catch let failure as SSHError where failure.code == .timedOut {
                var e = TransportError.timedOut(after: timeout, partialStdout: out,
                                               stderr: String(decoding: await errors, as: UTF8.self))
                e.message = "\(command) ran longer than \(timeout) and was stopped"
                await fed
                throw e
            }
        } onCancel: {
            cmd.cancel()
        }
    }

    /// `sqlite3 .backup` on the server into a temporary file in its `$TMPDIR` (or `/tmp`),
    /// downloaded over SFTP into `cache` (see `RemoteSQLiteSnapshot`).
    public func snapshotSQLite(_ path: String) async throws(TransportError) -> SQLiteSnapshot {
        try TransportError.checkPath(path)
        return try await RemoteSQLiteSnapshot.take(self, path, cache: cache)
    }

    /// Polls `stat` (and the listing of a directory) over SFTP every `pollInterval`.
    public func watchPaths(_ paths: [String], pollInterval: Duration) -> PathWatch {
        PollingWatch.watch(paths, every: pollInterval) { [self] ps throws(TransportError) in
            try await PollingWatch.signature(self, ps)
        }
    }

    /// Local forwarding (`ssh -L`) over the transport's connection: listens on `listen`
    /// and sends each client through a channel of its own to `target`, as the server
    /// reaches it (see `SSHConnection.forwardLocalPort`). The forward ends with the
    /// connection, or at `close()`.
    /// - Throws: `hostUnreachable` and the like when the connection cannot be made;
    ///   `other` when the address cannot be listened on (in use).
    public func forwardLocalPort(_ listen: SSHListenAddress = .loopback(), to target: SSHForwardTarget)
        async throws(TransportError) -> SSHPortForward
    {
        try await withLive(retry: true, path: nil) { live in try live.connection.forwardLocalPort(listen, to: target) }
    }

    /// A streamed exec channel (`SSHConnection.startCommand`); `cancel()` sends TERM
    /// and closes the channel. It holds one of the `maxSessions` until `exitStatus()` returned,
    /// `cancel()` was called or the process was dropped.
    public func startProcess(_ executable: String, arguments: [String], environment: [String: String])
        async throws(TransportError) -> TransportProcess
    {
        try TransportError.checkProcess(executable, arguments, environment)
        let permit = try await processes.enter()
        return try await withLive(retry: false, path: nil) { live in
            let command = try await Self.retryingRefusedOpen {
                try await live.connection.startCommand(Self.commandLine(executable, arguments, home: live.home),
                                                       options: SSHChannelOptions(environment: environment))
            }
            return TransportProcess(backend: SSHProcess(command: command, permit: permit))
        }
    }
}

/// A `TransportProcess` over an SSHKit command.
final class SSHProcess: ProcessBackend, Sendable {
    let command: SSHCommand
    private let terminated = Mutex(false)
    /// Its session of the transport's `maxSessions`.
    private let permit: SessionPermit

    init(command: SSHCommand, permit: SessionPermit) {
        self.command = command
        self.permit = permit
    }

    func read(_ stream: ProcessOutput.Stream) async -> [UInt8]? {
        var it = (stream == .stdout ? command.stdout : command.stderr).makeAsyncIterator()
        do {
            return try await it.next()
        } catch {
            return nil
        }
    }

    func write(_ bytes: [UInt8]) async throws(TransportError) {
        do {
            try await command.input.write(bytes)
        } catch where error.code == .channelClosed {
            throw TransportError(.other, "the process no longer reads its input", cause: error)
        } catch {
            throw TransportError(error)
        }
    }

    func finishInput() {
        try? command.input.finish()
    }

    func cancel() {
        terminated.withLock { $0 = true }
        command.cancel()
        permit.release()
    }

    func exitStatus() async throws(TransportError) -> SSHExitStatus {
        do {
            let status = try await command.exitStatus()
            permit.release()
            return status
        } catch {
            let terminated = terminated.withLock { $0 }
            // the waiting task was cancelled: the process goes on and keeps its session
            if error.code == .cancelled && !terminated && Task.isCancelled { throw .cancelled }
            permit.release()
            if terminated { return .signaled("TERM", coreDumped: false) }
            throw TransportError(error)
        }
    }
}
