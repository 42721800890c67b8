import Foundation
import SSHKit
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A server through the system's OpenSSH client: every call is an `ssh` process
/// multiplexed over one ControlMaster connection, for users whose `~/.ssh/config` does
/// things SSHKit does not (ProxyCommand, certificates, GSSAPI, a smartcard agent).
///
/// - The master starts with the first call and stays `controlPersist` after the last.
///   `close()` stops it.
/// - `ssh` runs with `BatchMode=yes` (never prompts), `StrictHostKeyChecking=accept-new`
///   (a new host is added, a changed key is refused), keepalives, and a control socket
///   in `controlDirectory`, which must be a directory owned by this user with mode 0700;
///   anything else is refused. Sockets of masters that are gone are removed at creation.
/// - Files: shell commands on the server (`cat`, `mktemp` + `mv` for atomic writes,
///   GNU `stat` and `find`): the server must be Linux with GNU coreutils/findutils.
///   Every path and argument is quoted by `SSHShellQuoting`; `~/` is `"$HOME"/`.
/// - Processes: the remote command first reports its process group (the first line of
///   its stdout, which the transport takes off), so a timeout, a cancel or `cancel()`
///   stops it on the server too (TERM, then KILL a second later), not only the local `ssh`.
/// - Failures are classified from `ssh`'s exit status 255 and its stderr.
public struct OpenSSHTransport: ServerTransport {
    /// How `ssh` is run: the options on its command line, where its control socket lives,
    /// and how many sessions the master may hold.
    public struct Options: Sendable {
        /// `-l`; nil: from `~/.ssh/config` or the local user.
        public var user: String?
        /// `-p`; nil: from `~/.ssh/config` or 22.
        public var port: Int?
        /// `-i` (with `IdentitiesOnly=yes`).
        public var identityFile: String?
        /// `UserKnownHostsFile`; nil: OpenSSH's default.
        public var knownHostsFile: String?
        /// `-F`; nil: `~/.ssh/config`.
        public var configFile: String?
        /// More `-o` options, e.g. `["ProxyJump=bastion"]`.
        public var extraOptions: [String]
        /// `ControlPersist`: how long the master stays after the last call (whole seconds, at
        /// least 1).
        public var controlPersist: Duration
        /// `ConnectTimeout` (whole seconds, at least 1).
        public var connectTimeout: Duration
        /// `ServerAliveInterval` (whole seconds, at least 1), with `ServerAliveCountMax=3`.
        public var keepaliveInterval: Duration
        /// nil: `/tmp/sshkit-cm-UID`.
        public var controlDirectory: String?
        /// The `ssh` executable.
        public var sshPath: String
        /// The server's `MaxSessions` (OpenSSH's default is 10): every call is a session on
        /// the master, so at most this many less one run at once (the one kept free stops
        /// timed-out commands); more calls wait for a free one.
        public var maxSessions: Int

        /// By default `ControlPersist` 60 s, `ConnectTimeout` 10 s, a keepalive every 15 s,
        /// `/usr/bin/ssh` and `maxSessions` 10; each nil is explained at its property.
        public init(user: String? = nil, port: Int? = nil, identityFile: String? = nil, knownHostsFile: String? = nil,
                    configFile: String? = nil, extraOptions: [String] = [], controlPersist: Duration = .seconds(60),
                    connectTimeout: Duration = .seconds(10), keepaliveInterval: Duration = .seconds(15),
                    controlDirectory: String? = nil, sshPath: String = "/usr/bin/ssh", maxSessions: Int = 10) {
            self.user = user
            self.port = port
            self.identityFile = identityFile
            self.knownHostsFile = knownHostsFile
            self.configFile = configFile
            self.extraOptions = extraOptions
            self.controlPersist = controlPersist
            self.connectTimeout = connectTimeout
            self.keepaliveInterval = keepaliveInterval
            self.controlDirectory = controlDirectory
            self.sshPath = sshPath
            self.maxSessions = maxSessions
        }
    }

    /// "openssh:USER@DESTINATION:PORT" (user and port when set) unless given.
    public let serverID: ServerID
    /// Always `true`.
    public let isRemote = true
    /// The file names `writeFile` keeps at 0600.
    public let secrets: SecretFiles
    /// Where `snapshotSQLite` keeps its copies.
    public let cache: SnapshotCache
    /// What `ssh` connects to: a host, `user@host` or a `~/.ssh/config` alias.
    public let destination: String
    /// The options it was made with.
    public let options: Options
    /// The control socket directory, checked.
    public let controlDirectory: String
    /// `ssh` and its options, up to the destination.
    let sshArguments: [String]
    /// Sessions on the master: `maxSessions` less the one kept for stopping commands.
    let sessions: SessionGate

    /// Checks (or creates) the control directory and sweeps stale sockets; connects
    /// nothing yet. - Throws: `other` when the control directory is not safe to use.
    public init(destination: String, options: Options = Options(), serverID: ServerID? = nil,
                secrets: SecretFiles = SecretFiles(), cache: SnapshotCache = .standard) throws(TransportError) {
        guard !destination.isEmpty, !destination.hasPrefix("-"), !destination.contains(where: \.isWhitespace) else {
            throw TransportError(.invalidArgument, "invalid ssh destination \(SSHShellQuoting.quote(destination))")
        }
        guard options.maxSessions >= 2 else {
            throw TransportError(.invalidArgument, "maxSessions must be at least 2 (one is kept for stopping commands)")
        }
        self.destination = destination
        self.options = options
        sessions = SessionGate(limit: options.maxSessions - 1)
        self.secrets = secrets
        self.cache = cache
        let dir = options.controlDirectory ?? "/tmp/sshkit-cm-\(geteuid())"
        try ControlDirectory.prepare(dir)
        ControlDirectory.sweepStaleSockets(dir)
        self.controlDirectory = dir
        let userPart = options.user.map { "\($0)@" } ?? ""
        let portPart = options.port.map { ":\($0)" } ?? ""
        self.serverID = serverID ?? ServerID("openssh:\(userPart)\(destination)\(portPart)")
        var args = [options.sshPath]
        if let f = options.configFile { args += ["-F", f] }
        args += [
            "-o", "ControlMaster=auto",
            "-o", "ControlPath=\(dir)/%C",
            "-o", "ControlPersist=\(max(1, options.controlPersist.components.seconds))",
            "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=accept-new",
            "-o", "ServerAliveInterval=\(max(1, options.keepaliveInterval.components.seconds))",
            "-o", "ServerAliveCountMax=3",
            "-o", "ConnectTimeout=\(max(1, options.connectTimeout.components.seconds))",
            "-o", "LogLevel=ERROR",
            "-T",
        ]
        if let u = options.user { args += ["-l", u] }
        if let p = options.port { args += ["-p", "\(p)"] }
        if let i = options.identityFile { args += ["-i", i, "-o", "IdentitiesOnly=yes"] }
        if let k = options.knownHostsFile { args += ["-o", "UserKnownHostsFile=\(k)"] }
        for o in options.extraOptions { args += ["-o", o] }
        self.sshArguments = args
    }

    /// Stops the master connection (`ssh -O exit`), if one runs, and returns once its
    /// control socket is gone (at most 2 s more): the master answers the exit request
    /// first and removes its socket as it ends.
    public func close() async {
        // where the master listens (`ssh -G` expands ControlPath's %C; nothing connects)
        let resolve = LocalProcessRun(executable: sshArguments[0],
                                      arguments: Array(sshArguments.dropFirst()) + ["-G", destination],
                                      stdin: [], environment: [:], timeout: .seconds(10))
        let socket: String? = if case .success(let r) = await resolve.run() {
            String(decoding: r.stdout, as: UTF8.self).split(separator: "\n")
                .first { $0.hasPrefix("controlpath ") }.map { String($0.dropFirst("controlpath ".count)) }
        } else { nil }
        let run = LocalProcessRun(executable: sshArguments[0],
                                  arguments: Array(sshArguments.dropFirst()) + ["-O", "exit", destination],
                                  stdin: [], environment: [:], timeout: .seconds(10))
        _ = await run.run()
        guard let socket else { return }
        let deadline = ContinuousClock.now + .seconds(2)
        var st = Glibc.stat()
        while lstat(socket, &st) == 0 && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    // MARK: plumbing

    /// One shell word for a remote path: quoted, with `~` and `~/` left to the shell as `"$HOME"`.
    static func word(_ path: String) -> String {
        if path == "~" { return "\"$HOME\"" }
        if path.byteHasPrefix("~/") { return "\"$HOME\"/" + SSHShellQuoting.quote(path.byteDropFirst(2)) }
        return SSHShellQuoting.quote(path)
    }

    /// Runs `command` (a line for the remote login shell) through the master, in one of
    /// its sessions.
    func ssh(_ command: String, stdin: [UInt8] = [], timeout: Duration? = nil) async throws(TransportError) -> ProcessResult {
        let permit = try await sessions.enter()
        defer { permit.release() }
        let run = LocalProcessRun(executable: sshArguments[0],
                                  arguments: Array(sshArguments.dropFirst()) + [destination, "--", command],
                                  stdin: stdin, environment: [:], timeout: timeout)
        let r = await withTaskCancellationHandler {
            await run.run()
        } onCancel: {
            run.cancel()
        }
        switch r {
        case .success(let result):
            if result.exitStatus == .exited(255), let e = Self.classify(result.stderrString) { throw e }
            return result
        case .failure(var e):
            // a timeout before the command printed anything (process commands print their
            // group first) may be ssh failing to connect; after that, it is the command's
            if e.code == .timedOut, e.partialStdout?.isEmpty ?? true, let text = e.stderr, let ssh = Self.classify(text) {
                e = ssh
            }
            throw e
        }
    }

    /// `ssh`'s own failures (it exits 255), from its messages; nil when stderr does not
    /// look like one (a remote command may exit 255 too).
    static func classify(_ stderr: String) -> TransportError? {
        let text = stderr.trimmingCharacters(in: .whitespacesAndNewlines)
        let code: TransportError.Code
        if text.contains("Host key verification failed") || text.contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
            || text.contains("host key for") && text.contains("has changed") {
            code = .hostKeyRejected
        } else if text.contains("Permission denied (") || text.contains("Too many authentication failures") {
            code = .authenticationFailed
        } else if text.contains("open refused by peer") || text.contains("session request failed") {
            // the master is up, the server refused one more session (MaxSessions)
            return TransportError(.other, "ssh: the server refused another session (its MaxSessions): \(text.prefix(300))",
                                  context: .ssh(stderr: stderr))
        } else if ["Could not resolve hostname", "Connection refused", "No route to host", "Connection timed out",
                   "Network is unreachable", "Connection closed by", "closed by remote host", "client_loop:",
                   "Connection reset", "Broken pipe",
                   "Operation timed out", "Timeout, server", "kex_exchange_identification",
                   "Control socket connect", "mux_client"].contains(where: text.contains) {
            code = .hostUnreachable
        } else {
            return nil
        }
        return TransportError(code, "ssh: \(text.prefix(500))", context: .ssh(stderr: stderr))
    }

    /// A file command's failure as `fileIO`, with the reason read from the C-locale message.
    static func fileFailure(_ r: ProcessResult, _ path: String, _ what: String) -> TransportError {
        let text = r.stderrString
        let reason: TransportError.FileIOReason =
            if text.contains("No such file or directory") { .noSuchFile }
            else if text.contains("Permission denied") || text.contains("Read-only file system") { .permissionDenied }
            else if text.contains("Not a directory") { .notADirectory }
            else if text.contains("Is a directory") { .isADirectory }
            else if text.contains("File exists") { .alreadyExists }
            else if text.contains("Directory not empty") { .directoryNotEmpty }
            else if text.contains("No space left") || text.contains("Disk quota exceeded") { .noSpace }
            else { .other }
        var exitCode: Int32?
        if case .exited(let c) = r.exitStatus { exitCode = c }
        return TransportError(.fileIO, "\(what): \(text.trimmingCharacters(in: .whitespacesAndNewlines).prefix(300))",
                              path: path, context: .fileIO(reason: reason, exitCode: exitCode, stderr: text))
    }

    /// Runs a file command in the C locale; a non-zero exit is `fileIO`.
    private func fileCommand(_ script: String, _ path: String, _ what: String, stdin: [UInt8] = [])
        async throws(TransportError) -> ProcessResult
    {
        let r = try await ssh("LC_ALL=C; export LC_ALL; " + script, stdin: stdin)
        guard r.exitStatus == .exited(0) else { throw Self.fileFailure(r, path, what) }
        return r
    }

    // MARK: files

    /// `cat` on the server. A missing file is `fileIO` with reason `noSuchFile` (read from
    /// `cat`'s C-locale message); `ssh`'s own failures are classified (`hostUnreachable`,
    /// `authenticationFailed`, `hostKeyRejected`).
    public func readFile(_ path: String) async throws(TransportError) -> [UInt8] {
        try TransportError.checkPath(path)
        return try await fileCommand("exec cat -- \(Self.word(path))", path, "read").stdout
    }

    /// A script on the server: `mktemp` beside the target, the bytes from stdin, a byte count
    /// check, `chmod`, `sync`, `mv`; the temporary file is removed on any failure. A symlink
    /// is resolved with `readlink -f` and its target replaced. A failure is `fileIO`, its
    /// reason read from the C-locale message.
    public func writeFile(_ path: String, contents: [UInt8]) async throws(TransportError) {
        try TransportError.checkPath(path)
        let patterns = secrets.patterns.filter { !$0.isEmpty }.map { p in
            p.byteComponents(separatedBy: UInt8(ascii: "*"), keepingEmpty: true).map { SSHShellQuoting.quote($0) }
                .map { $0 == "''" ? "" : $0 }.joined(separator: "*")
        }.joined(separator: "|")
        // A temporary file beside the target (mktemp: 0600, O_EXCL), filled from stdin,
        // checked to be complete, given the mode, synced, renamed over the target;
        // removed on any failure.
        let script = """
        p=\(Self.word(path))
        if [ -L "$p" ]; then p=$(readlink -f -- "$p") || exit 1; fi
        if [ -d "$p" ]; then echo "$p: Is a directory" >&2; exit 1; fi
        case "$p" in */*) d=${p%/*}; d=${d:-/} ;; *) d=. ;; esac
        n=${p##*/}
        if [ -e "$p" ]; then m=$(stat -c %a -- "$p") || exit 1; else m=644; fi
        \(patterns.isEmpty ? "" : "case \"$n\" in \(patterns)) m=600 ;; esac")
        t=$(mktemp -- "$d/.$n.sshkit-XXXXXXXX") || exit 1
        trap 'rm -f -- "$t"' EXIT HUP INT TERM
        cat > "$t" || exit 1
        # all of it, or nothing: a client stopped mid-way gives cat an early EOF
        [ "$(wc -c < "$t")" -eq \(contents.count) ] || { echo "write: short input" >&2; exit 1; }
        chmod "$m" -- "$t" && sync -- "$t" && mv -f -- "$t" "$p" || exit 1
        trap - EXIT
        """
        _ = try await fileCommand(script, path, "write", stdin: contents)
    }

    /// `[ -e ] || [ -L ]` on the server: what the shell cannot see (missing, or behind a
    /// directory it may not search) is `false`.
    public func fileExists(_ path: String) async throws(TransportError) -> Bool {
        try TransportError.checkPath(path)
        let w = Self.word(path)
        let r = try await fileCommand("if [ -e \(w) ] || [ -L \(w) ]; then echo yes; else echo no; fi", path, "exists")
        return r.stdoutString == "yes\n"
    }

    /// GNU `stat` on the server (not following a symlink; nanosecond times). A missing path
    /// is `fileIO` with reason `noSuchFile`; output it cannot parse is `other`.
    public func stat(_ path: String) async throws(TransportError) -> FileStatus {
        try TransportError.checkPath(path)
        let r = try await fileCommand("exec stat -c '%s %.9Y %f' -- \(Self.word(path))", path, "stat")
        let parts = r.stdoutString.split(separator: " ")
        guard parts.count == 3, let size = UInt64(parts[0]), let mtime = Double(parts[1]),
              let mode = UInt32(parts[2].trimmingCharacters(in: .whitespacesAndNewlines), radix: 16) else {
            throw TransportError(.other, "stat: unexpected output \(r.stdoutString.prefix(100))", path: path)
        }
        let kind: FileKind = switch mode & 0o170000 {
        case 0o100000: .file
        case 0o040000: .directory
        case 0o120000: .symlink
        default: .other
        }
        return FileStatus(size: size, modificationTime: mtime, kind: kind, permissions: UInt16(mode & 0o7777))
    }

    /// GNU `find -H` one level deep (a link to a directory lists the directory). A missing
    /// path is `fileIO` with reason `noSuchFile`, something else `notADirectory`.
    public func listDirectory(_ path: String) async throws(TransportError) -> [DirectoryEntry] {
        try TransportError.checkPath(path)
        // find takes a leading "-" for an expression: relative paths get "./"
        let start = path.byteHasPrefix("/") || path.byteHasPrefix("~") ? path : "./" + path
        let w = Self.word(start)
        let r = try await fileCommand("""
            if [ ! -d \(w) ]; then
              if [ -e \(w) ]; then echo "Not a directory" >&2; else echo "No such file or directory" >&2; fi; exit 1
            fi
            exec find -H \(w) -mindepth 1 -maxdepth 1 -printf '%y %f\\0'
            """, path, "list")
        return r.stdout.split(separator: 0).compactMap { item -> DirectoryEntry? in
            guard item.count > 2 else { return nil }
            let kind: FileKind = switch item.first {
            case UInt8(ascii: "f"): .file
            case UInt8(ascii: "d"): .directory
            case UInt8(ascii: "l"): .symlink
            default: .other
            }
            return DirectoryEntry(name: String(decoding: item.dropFirst(2), as: UTF8.self), kind: kind)
        }.sorted { $0.name < $1.name }
    }

    /// `mkdir -p` on the server; something at `path` that is not a directory is `fileIO`
    /// with reason `notADirectory`.
    public func createDirectory(_ path: String) async throws(TransportError) {
        try TransportError.checkPath(path)
        let w = Self.word(path)
        _ = try await fileCommand("""
            if [ -e \(w) ] && [ ! -d \(w) ]; then echo "Not a directory" >&2; exit 1; fi
            exec mkdir -p -- \(w)
            """, path, "create directory")
    }

    /// `rm -f` on the server (a missing file is fine); a directory, not a link to one, is
    /// `fileIO` with reason `isADirectory`.
    public func removeFile(_ path: String) async throws(TransportError) {
        try TransportError.checkPath(path)
        let w = Self.word(path)
        _ = try await fileCommand("""
            if [ -d \(w) ] && [ ! -L \(w) ]; then echo "Is a directory" >&2; exit 1; fi
            exec rm -f -- \(w)
            """, path, "remove")
    }

    // MARK: processes

    /// `export NAME='value' ...; exec 'executable' 'arg' ...`, every word quoted.
    static func commandLine(_ executable: String, _ arguments: [String], environment: [String: String])
        throws(TransportError) -> String
    {
        var line = ""
        for (name, value) in environment.sorted(by: { $0.key < $1.key }) {
            guard SSHShellQuoting.isValidEnvironmentName(name) else {
                throw TransportError(.invalidArgument, "invalid environment variable name \(SSHShellQuoting.quote(name))")
            }
            line += "export \(name)=\(SSHShellQuoting.quote(value)); "
        }
        return line + "exec " + ([word(executable)] + arguments.map(SSHShellQuoting.quote)).joined(separator: " ")
    }

    /// Printed first by every process command: the remote login shell's pid, which is the
    /// process group of the command (sshd starts each session with `setsid`, and the
    /// command line ends in `exec`, which keeps the pid).
    static let reportGroup = "printf '%s\\n' \"$$\"; "

    /// The group id from the first line of a process command's stdout, and the rest.
    static func splitGroup(_ stdout: [UInt8]) -> (group: Int32?, rest: [UInt8]) {
        guard let nl = stdout.firstIndex(of: UInt8(ascii: "\n")) else { return (nil, stdout) }
        let group = Int32(String(decoding: stdout[..<nl], as: UTF8.self)).flatMap { $0 > 1 ? $0 : nil }
        return (group, Array(stdout[(nl + 1)...]))
    }

    /// TERM to a remote process group now and KILL a second later, through the master;
    /// runs to its end (at most 10 s) even when the calling task was cancelled.
    func stopRemoteGroup(_ group: Int32) async {
        let line = "kill -TERM -\(group) 2>/dev/null; (sleep 1; kill -KILL -\(group)) >/dev/null 2>&1 </dev/null &"
        let run = LocalProcessRun(executable: sshArguments[0],
                                  arguments: Array(sshArguments.dropFirst()) + [destination, "--", line],
                                  stdin: [], environment: [:], timeout: .seconds(10))
        _ = await run.run()
    }

    /// One `ssh` session (waiting for a free one) running `exec EXECUTABLE ARGUMENTS`
    /// after an `export` per environment variable, every word quoted; the process group
    /// line is taken off stdout. On timeout or cancellation the local `ssh` stops and the
    /// remote group gets TERM, then KILL a second later. Exit 255 with one of `ssh`'s
    /// messages is that failure, classified; otherwise the exit is the command's. An
    /// invalid environment variable name is `other`.
    public func runProcess(_ executable: String, arguments: [String], stdin: [UInt8],
                           environment: [String: String], timeout: Duration?) async throws(TransportError) -> ProcessResult {
        try TransportError.checkProcess(executable, arguments, environment)
        let line = try Self.reportGroup + Self.commandLine(executable, arguments, environment: environment)
        do {
            var r = try await ssh(line, stdin: stdin, timeout: timeout)
            r.stdout = Self.splitGroup(r.stdout).rest
            return r
        } catch {
            // a timeout or a cancel stopped the local ssh: stop the command on the server too
            guard error.code == .timedOut || error.isCancellation, let partial = error.partialStdout else { throw error }
            var e = error
            let (group, rest) = Self.splitGroup(partial)
            if let group { await stopRemoteGroup(group) }
            if case .timedOut(let after, _, let stderr) = e.context {
                e.context = .timedOut(after: after, partialStdout: rest, stderr: stderr)
            } else {
                e.context = .none // a cancel: the output was only for the group
            }
            throw e
        }
    }

    /// `sqlite3 .backup` on the server into a temporary file in its `$TMPDIR` (or `/tmp`),
    /// downloaded with `cat` into `cache`; the server needs `sqlite3`.
    public func snapshotSQLite(_ path: String) async throws(TransportError) -> SQLiteSnapshot {
        try TransportError.checkPath(path)
        return try await RemoteSQLiteSnapshot.take(self, path, cache: cache)
    }

    /// Polls every `pollInterval` with one `ssh` call that prints the signature of all
    /// the paths (GNU `stat` and `find`, nanosecond times).
    public func watchPaths(_ paths: [String], pollInterval: Duration) -> PathWatch {
        PollingWatch.watch(paths, every: pollInterval) { [self] ps throws(TransportError) in
            try await signature(ps)
        }
    }

    /// Each path's `stat`, and for a directory its entries', in one command.
    func signature(_ paths: [String]) async throws(TransportError) -> [String: String] {
        let words = paths.map { Self.word($0.byteHasPrefix("/") || $0.byteHasPrefix("~") ? $0 : "./" + $0) }
        let r = try await ssh("""
            LC_ALL=C; export LC_ALL
            for p in \(words.joined(separator: " ")); do
              if [ -e "$p" ] || [ -L "$p" ]; then
                stat -c '%F %s %a %.9Y' -- "$p"
                if [ -d "$p" ]; then find -H "$p" -mindepth 1 -maxdepth 1 -printf '%f %y %s %T@\\n' | sort; fi
              else echo absent; fi
              printf '\\0'
            done
            """)
        let parts = r.stdout.split(separator: 0, omittingEmptySubsequences: false)
        guard r.exitStatus == .exited(0), parts.count >= paths.count else {
            throw TransportError(.other, "watch: unexpected answer: \(r.stderrString.prefix(200))")
        }
        var result: [String: String] = [:]
        for (i, path) in paths.enumerated() { result[path] = String(decoding: parts[i], as: UTF8.self) }
        return result
    }

    /// An `ssh` process running the command; returns once the command reported that it
    /// started on the server. `cancel()` stops the local `ssh` and the command's process
    /// group on the server (TERM, then KILL a second later).
    /// - Throws: what `ssh` failed with (`hostUnreachable`, `authenticationFailed`, …)
    ///   when the command never started.
    public func startProcess(_ executable: String, arguments: [String], environment: [String: String])
        async throws(TransportError) -> TransportProcess
    {
        try TransportError.checkProcess(executable, arguments, environment)
        let line = try Self.reportGroup + Self.commandLine(executable, arguments, environment: environment)
        let permit = try await sessions.enter()
        let ssh = try LocalProcessStream.start(sshArguments[0], Array(sshArguments.dropFirst()) + [destination, "--", line],
                                               environment: [:]).backend
        // the first line of stdout is the remote group: it also says the command runs
        var head: [UInt8] = []
        await withTaskCancellationHandler {
            while !head.contains(UInt8(ascii: "\n")), let chunk = await ssh.read(.stdout) { head += chunk }
        } onCancel: {
            ssh.cancel()
        }
        let (group, rest) = Self.splitGroup(head)
        guard let group, head.contains(UInt8(ascii: "\n")) else {
            ssh.cancel()
            var stderr: [UInt8] = []
            while let chunk = await ssh.read(.stderr) { stderr += chunk }
            let status = try? await ssh.exitStatus()
            if Task.isCancelled { throw .cancelled }
            let text = String(decoding: stderr, as: UTF8.self)
            if status == .exited(255), let e = Self.classify(text) { throw e }
            throw TransportError(.other, "ssh ended before the command started (\(String(describing: status))): "
                                 + text.prefix(300))
        }
        let transport = self
        return TransportProcess(backend: SSHClientProcess(ssh: ssh, firstOutput: rest, permit: permit) {
            await transport.stopRemoteGroup(group)
        })
    }
}

/// A local `ssh` running a remote command: `ssh` exits 255 when TERM stops it, which
/// is reported as the TERM it was (as the other transports do).
final class SSHClientProcess: ProcessBackend, Sendable {
    let ssh: any ProcessBackend
    /// Stops the command's process group on the server.
    private let stopRemote: @Sendable () async -> Void
    private struct State {
        /// stdout that came with the group line, handed out first
        var firstOutput: [UInt8]
        /// the remote stop, once `cancel()` started it
        var stopping: Task<Void, Never>?
    }
    private let state: Mutex<State>
    /// Its session on the master, held until `exitStatus()` returned or `cancel()`.
    private let permit: SessionPermit

    init(ssh: any ProcessBackend, firstOutput: [UInt8], permit: SessionPermit,
         stopRemote: @escaping @Sendable () async -> Void) {
        self.ssh = ssh
        self.permit = permit
        self.stopRemote = stopRemote
        state = Mutex(State(firstOutput: firstOutput))
    }

    func read(_ stream: ProcessOutput.Stream) async -> [UInt8]? {
        if stream == .stdout {
            let first = state.withLock { s -> [UInt8] in
                defer { s.firstOutput = [] }
                return s.firstOutput
            }
            if !first.isEmpty { return first }
        }
        return await ssh.read(stream)
    }

    func write(_ bytes: [UInt8]) async throws(TransportError) { try await ssh.write(bytes) }
    func finishInput() { ssh.finishInput() }

    func cancel() {
        let stopRemote = stopRemote
        state.withLock { s in
            if s.stopping == nil { s.stopping = Task.detached { await stopRemote() } }
        }
        ssh.cancel()
        permit.release()
    }

    /// After `cancel()`, returns once the command on the server was sent TERM too. A
    /// cancel of the waiting task throws `cancelled` (from the local ssh's wait) and the
    /// process keeps its session.
    func exitStatus() async throws(TransportError) -> SSHExitStatus {
        let status = try await ssh.exitStatus()
        defer { permit.release() }
        if let stopping = state.withLock({ $0.stopping }) {
            await stopping.value
            if status == .exited(255) { return .signaled("TERM", coreDumped: false) }
        }
        return status
    }
}

/// The control socket directory: its safety check and the sweep of stale sockets.
enum ControlDirectory {
    /// Creates `dir` 0700, or checks that the existing one is a real directory of this
    /// user that nobody else can enter (a socket there is a login to the server).
    static func prepare(_ dir: String) throws(TransportError) {
        if mkdir(dir, 0o700) != 0 && errno != EEXIST {
            throw TransportError(.other, "cannot create the control directory: \(String(cString: strerror(errno)))",
                                 path: dir)
        }
        var st = Glibc.stat()
        guard lstat(dir, &st) == 0 else {
            throw TransportError(.other, "cannot stat the control directory: \(String(cString: strerror(errno)))",
                                 path: dir)
        }
        var problem: String?
        if st.st_mode & S_IFMT != S_IFDIR {
            problem = "is not a directory (or is a symlink)"
        } else if st.st_uid != geteuid() {
            problem = "is owned by uid \(st.st_uid), not \(geteuid())"
        } else if st.st_mode & 0o077 != 0 {
            problem = "has mode \(String(st.st_mode & 0o777, radix: 8)), not 0700"
        }
        if let problem {
            throw TransportError(.other, "refusing the control directory: it \(problem)", path: dir)
        }
    }

    /// Removes sockets nobody listens on (a master that died without cleaning up).
    static func sweepStaleSockets(_ dir: String) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: dir) else { return }
        for name in names {
            let path = dir + "/" + name
            var st = Glibc.stat()
            guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFSOCK, st.st_uid == geteuid() else { continue }
            if !listening(path) { unlink(path) }
        }
    }

    /// Whether a process accepts connections on the Unix socket `path`.
    static func listening(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return true }
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { return true }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        let r = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        // only a refusal proves nobody is there; anything else, keep the socket
        return r == 0 || errno != ECONNREFUSED
    }
}
