import Foundation
import SSHKit
import ServerTransport
import Synchronization
import Testing

/// One contract, every transport: the same assertions against `LocalTransport` (in a
/// temporary directory), `SSHTransport` and `OpenSSHTransport` (under the test user's
/// home on the fixture sshd) and `MockTransport`.
@Suite("Transport contract", .tags(.integration))
struct TransportContractTests {
    /// A transport and a fresh directory to work in; `cleanup` removes it.
    struct Subject: Sendable, CustomTestStringConvertible {
        let name: String
        let transport: any ServerTransport
        let root: String
        let cleanup: @Sendable () async -> Void
        var testDescription: String { name }
    }

    static func subject(_ name: String) async throws -> Subject {
        switch name {
        case "local":
            let root = try TestPaths.makeTemporaryDirectory("transport")
            return Subject(name: name, transport: LocalTransport(), root: root) {
                try? FileManager.default.removeItem(atPath: root)
            }
        case "sshkit":
            let server = TestServer.shared
            let cache = try TestPaths.makeTemporaryDirectory("snapshots")
            let t = SSHTransport(configuration: server.configuration(), cache: SnapshotCache(directory: cache))
            // under the test user's home, spelled with ~/ so every call expands it
            let root = "~/transport-\(UInt64.random(in: 0...UInt64.max))"
            try await t.createDirectory(root)
            return Subject(name: name, transport: t, root: root) {
                _ = try? await t.runProcess("/bin/rm", "-rf", "--", root.replacingOccurrences(of: "~/", with: ""))
                await t.close()
                try? FileManager.default.removeItem(atPath: cache)
            }
        case "openssh":
            let t = try Self.openSSH(TestServer.shared)
            let root = "~/transport-\(UInt64.random(in: 0...UInt64.max))"
            try await t.createDirectory(root)
            return Subject(name: name, transport: t, root: root) {
                _ = try? await t.runProcess("/bin/rm", "-rf", "--", root.replacingOccurrences(of: "~/", with: ""))
                await t.close()
                try? FileManager.default.removeItem(atPath: t.controlDirectory) // and the cache in it
            }
        default:
            let cache = try TestPaths.makeTemporaryDirectory("snapshots")
            let mock = MockTransport(cache: SnapshotCache(directory: cache), script: Self.mockShell)
            try await mock.createDirectory("/work")
            return Subject(name: name, transport: mock, root: "/work") {
                try? FileManager.default.removeItem(atPath: cache)
            }
        }
    }

    /// The system's ssh to the test server: its key, a known_hosts file of its own (filled
    /// by accept-new), no user config, and a control directory of its own.
    static func openSSH(_ server: TestServer, controlPersist: Duration = .seconds(60),
                        cache: SnapshotCache? = nil, maxSessions: Int = 10,
                        secrets: SecretFiles = SecretFiles()) throws -> OpenSSHTransport {
        let dir = try TestPaths.makeTemporaryDirectory("cm")
        chmod(dir, 0o700)
        return try OpenSSHTransport(destination: server.host, options: OpenSSHTransport.Options(
            user: server.user, port: server.port, identityFile: server.key("id_ed25519"),
            knownHostsFile: dir + "/known_hosts", configFile: "/dev/null", controlPersist: controlPersist,
            controlDirectory: dir, maxSessions: maxSessions), secrets: secrets,
            cache: cache ?? SnapshotCache(directory: dir + "/snapshots"))
    }

    /// Runs `body` on a fresh subject and cleans up after it, also when it throws.
    static func with(_ name: String, _ body: (Subject) async throws -> Void) async throws {
        let s = try await subject(name)
        do {
            try await body(s)
        } catch {
            await s.cleanup()
            throw error
        }
        await s.cleanup()
    }

    /// What the process tests run, for the mock: `printf`, `cat`, `sh -c 'exit N'` and `sleep`.
    static let mockShell: MockTransport.ProcessScript = { run throws(TransportError) in
        let (executable, arguments) = (run.executable, run.arguments)
        switch (executable, arguments.first) {
        case ("/bin/cat", _): return ProcessResult(exitStatus: .exited(0), stdout: run.stdin, stderr: [])
        case ("/usr/bin/printf", let format?) where format == "%s":
            return ProcessResult(exitStatus: .exited(0), stdout: Array(arguments.dropFirst().joined().utf8), stderr: [])
        case ("/bin/sh", "-c") where arguments.count > 1 && arguments[1].hasPrefix("echo oops >&2; exit "):
            let code = Int32(arguments[1].split(separator: " ").last!)!
            return ProcessResult(exitStatus: .exited(code), stdout: [], stderr: Array("oops\n".utf8))
        case ("/bin/sh", "-c") where arguments.count > 1 && arguments[1].hasPrefix("echo started; sleep"):
            guard let timeout = run.timeout else { return ProcessResult(exitStatus: .exited(0), stdout: [], stderr: []) }
            throw TransportError.timedOut(after: timeout, partialStdout: Array("started\n".utf8))
        default:
            return ProcessResult(exitStatus: .exited(127), stdout: [], stderr: Array("not found\n".utf8))
        }
    }

    static let all = ["local", "sshkit", "openssh", "mock"]

    @Test(arguments: all)
    func filesRoundTripAndListingsAreSorted(_ name: String) async throws {
        try await Self.with(name) { s in
            let t = s.transport
            try await t.createDirectory(s.root + "/a/b/c")
            try await t.createDirectory(s.root + "/a/b/c") // idempotent
            let data = (0..<300_000).map { UInt8($0 % 251) }
            try await t.writeFile(s.root + "/a/b/c/data.bin", contents: data)
            #expect(try await t.readFile(s.root + "/a/b/c/data.bin") == data)
            try await t.writeTextFile(s.root + "/a/z.txt", "zed")
            try await t.writeTextFile(s.root + "/a/m.txt", "em")
            let names = try await t.listDirectory(s.root + "/a").map(\.name)
            #expect(names == ["b", "m.txt", "z.txt"])
            #expect(try await t.listDirectory(s.root + "/a").first?.kind == .directory)
            let st = try await t.stat(s.root + "/a/b/c/data.bin")
            #expect(st.size == 300_000 && st.kind == .file)
            #expect(try await t.fileExists(s.root + "/a/m.txt"))
            try await t.removeFile(s.root + "/a/m.txt")
            try await t.removeFile(s.root + "/a/m.txt") // idempotent
            #expect(try await !t.fileExists(s.root + "/a/m.txt"))
            #expect(try await t.readTextFile(s.root + "/a/z.txt") == "zed")
            // a link to a directory lists the directory's entries (the mock has no links)
            if name != "mock" {
                let r = try await t.runProcess("/bin/ln", "-s", "a", Self.argument(s.root) + "/linked")
                try r.check("ln")
                #expect(try await t.listDirectory(s.root + "/linked").map(\.name) == ["b", "z.txt"])
                #expect(try await t.stat(s.root + "/linked").kind == .symlink)
            }
        }
    }

    /// All of stdin reaches a process that closed its output first (the local transport
    /// stopped writing once stdout and stderr closed: the file got about 64 KiB).
    @Test(arguments: ["local", "sshkit", "openssh"])
    func stdinReachesAProcessThatClosedItsOutput(_ name: String) async throws {
        try await Self.with(name) { s in
            let t = s.transport
            let data = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let target = Self.argument(s.root) + "/in.bin"
            let r = try await t.runProcess("/bin/sh", arguments: ["-c", "exec >/dev/null 2>&1; cat > \"$1\"", "sh", target],
                                           stdin: data, environment: [:], timeout: .seconds(60))
            #expect(r.exitStatus == .exited(0))
            #expect(try await t.readFile(s.root + "/in.bin") == data)
        }
    }

    /// A NUL byte would cut a path (or an argument) short on its way to the system or the
    /// server, naming another file: every transport refuses it, and nothing happens.
    @Test(arguments: all)
    func nulBytesInPathsAndArgumentsAreRefused(_ name: String) async throws {
        try await Self.with(name) { s in
            let t = s.transport
            try await t.writeTextFile(s.root + "/a", "kept")
            let bad = s.root + "/a\u{0}b"
            func refused(_ what: String, _ code: TransportError.Code, _ body: () async throws -> Void) async {
                do {
                    try await body()
                    Issue.record("\(name) \(what): accepted")
                } catch {
                    #expect((error as? TransportError)?.code == code, "\(name) \(what): \(error)")
                }
            }
            await refused("readFile", .fileIO) { _ = try await t.readFile(bad) }
            await refused("writeFile", .fileIO) { try await t.writeFile(bad, contents: [1]) }
            await refused("fileExists", .fileIO) { _ = try await t.fileExists(bad) }
            await refused("stat", .fileIO) { _ = try await t.stat(bad) }
            await refused("listDirectory", .fileIO) { _ = try await t.listDirectory(bad) }
            await refused("createDirectory", .fileIO) { try await t.createDirectory(bad) }
            await refused("removeFile", .fileIO) { try await t.removeFile(bad) }
            await refused("snapshotSQLite", .fileIO) { _ = try await t.snapshotSQLite(bad) }
            await refused("runProcess", .invalidArgument) { _ = try await t.runProcess("/bin/echo", "a\u{0}b") }
            await refused("startProcess", .invalidArgument) {
                _ = try await t.startProcess("/bin/cat", arguments: [], environment: ["X": "a\u{0}b"])
            }
            // names a shell could not take are refused by every transport, not set locally
            for name in ["A=B", "1X", "", "A B"] {
                await refused("environment name \(name.debugDescription)", .invalidArgument) {
                    _ = try await t.runProcess("/bin/true", arguments: [], stdin: [], environment: [name: "x"], timeout: nil)
                }
            }
            #expect(try await t.readTextFile(s.root + "/a") == "kept", "the file at the cut-short path is untouched")
        }
    }

    @Test(arguments: all)
    func missingFilesAreTypedFileErrors(_ name: String) async throws {
        try await Self.with(name) { s in
            let t = s.transport
            do {
                _ = try await t.readFile(s.root + "/missing")
                Issue.record("read a missing file")
            } catch let error as TransportError {
                #expect(error.code == .fileIO && error.isNoSuchFile && error.path == s.root + "/missing", "\(error)")
            }
            do {
                _ = try await t.stat(s.root + "/missing")
                Issue.record("stat a missing file")
            } catch let error as TransportError {
                #expect(error.isNoSuchFile, "\(error)")
            }
            // a write into a directory that does not exist fails and creates nothing
            do {
                try await t.writeFile(s.root + "/nodir/file", contents: [1])
                Issue.record("wrote into a missing directory")
            } catch let error as TransportError {
                #expect(error.code == .fileIO)
            }
            #expect(try await !t.fileExists(s.root + "/nodir"))
            // a write onto a directory: a file error that says so, and the directory stays
            try await t.createDirectory(s.root + "/adir/sub")
            do {
                try await t.writeFile(s.root + "/adir", contents: [1])
                Issue.record("wrote over a directory")
            } catch let error as TransportError {
                #expect(error.code == .fileIO && error.reason == .isADirectory, "\(error)")
            }
            #expect(try await t.stat(s.root + "/adir").kind == .directory)
        }
    }

    @Test(arguments: all)
    func secretsAreCreatedAndKept0600AndOtherFilesKeepTheirMode(_ name: String) async throws {
        try await Self.with(name) { s in
            let t = s.transport
            for secret in [".env", "auth.json", "github-tokens.json"] {
                try await t.writeTextFile(s.root + "/" + secret, "TOKEN=1")
                #expect(try await t.stat(s.root + "/" + secret).permissions == 0o600, "\(secret)")
                try await t.writeTextFile(s.root + "/" + secret, "TOKEN=2")
                #expect(try await t.stat(s.root + "/" + secret).permissions == 0o600, "\(secret) after a rewrite")
            }
            try await t.writeTextFile(s.root + "/plain.conf", "x")
            #expect(try await t.stat(s.root + "/plain.conf").permissions == 0o644)
            #expect(SecretFiles(extra: ["*.key"]).isSecret("/etc/tls/server.key"))
            #expect(!SecretFiles().isSecret("/etc/app/tokens.json.bak"))
        }
    }

    @Test(arguments: all)
    func hostileFileNamesRoundTrip(_ name: String) async throws {
        try await Self.with(name) { s in
            let t = s.transport
            let names = ["with space", "it's \"quoted\"", "$(rm -rf x)", "-leading-dash", "new\nline", "semi;colon&amp", "ünïcødé"]
            for n in names {
                try await t.writeTextFile(s.root + "/" + n, n)
                #expect(try await t.readTextFile(s.root + "/" + n) == n)
            }
            #expect(Set(try await t.listDirectory(s.root).map(\.name)) == Set(names))
            for n in names { try await t.removeFile(s.root + "/" + n) }
            #expect(try await t.listDirectory(s.root).isEmpty)
        }
    }

    @Test(arguments: all)
    func processesReturnOutputAndStatusAndTimeOutWithWhatTheyPrinted(_ name: String) async throws {
        try await Self.with(name) { s in
            let t = s.transport
            let hostile = "a 'b' \"c\" $HOME `x` \\ -n"
            let printed = try await t.runProcess("/usr/bin/printf", "%s", hostile)
            #expect(printed.exitStatus == .exited(0) && printed.stdoutString == hostile)
            let catted = try await t.runProcess("/bin/cat", arguments: [], stdin: Array("from stdin".utf8),
                                                environment: [:], timeout: .seconds(30))
            #expect(catted.stdoutString == "from stdin")
            let failed = try await t.runProcess("/bin/sh", "-c", "echo oops >&2; exit 3")
            #expect(failed.exitStatus == .exited(3) && failed.stderrString == "oops\n")
            do {
                try failed.check("the script")
                Issue.record("check passed a failure")
            } catch let error as TransportError {
                #expect(error.code == .commandFailed && error.exitCode == 3 && error.stderr == "oops\n")
            }
            do {
                _ = try await t.runProcess("/bin/sh", arguments: ["-c", "echo started; sleep 37.75"], stdin: [],
                                           environment: [:], timeout: .milliseconds(500))
                Issue.record("no timeout")
            } catch let error as TransportError {
                #expect(error.code == .timedOut && error.timeout == .milliseconds(500), "\(error)")
                #expect(error.partialStdout.map { String(decoding: $0, as: UTF8.self) } == "started\n")
            }
            // stopped where it ran, not only on this side (the fixture sshd runs here too)
            if name != "mock" { #expect(await Self.noneLeft("^sleep 37\\.75$"), "the timed-out process still runs") }
        }
    }

    @Test(arguments: all)
    func streamingProcessesTakeInputGiveOutputAndStop(_ name: String) async throws {
        try await Self.with(name) { s in
            let t = s.transport
            // stdin in pieces, stdout as it comes
            let cat = try await t.startProcess("/bin/cat", arguments: [], environment: [:])
            try await cat.input.write("line one\n")
            var first: [UInt8] = []
            if name != "mock" { // the mock's script runs once input ends
                var it = cat.stdout.makeAsyncIterator()
                first = await it.next() ?? [] // before input ended: streamed
                #expect(first == Array("line one\n".utf8))
            }
            let big = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            async let echoed = cat.stdout.collect()
            try await cat.input.write(big)
            cat.input.finish()
            #expect(first + (await echoed) == Array("line one\n".utf8) + big)
            #expect(try await cat.exitStatus() == .exited(0))
            // stderr and the status, apart from stdout
            let failing = try await t.startProcess("/bin/sh", arguments: ["-c", "echo oops >&2; exit 4"], environment: [:])
            failing.input.finish()
            async let out = failing.stdout.collect()
            #expect(await failing.stderr.collect() == Array("oops\n".utf8))
            #expect(await out == [])
            #expect(try await failing.exitStatus() == .exited(4))
            // terminate
            let sleeper = try await t.startProcess("/bin/sh", arguments: ["-c", "echo ready; exec sleep 38.25"],
                                                   environment: [:])
            if name != "mock" {
                var it = sleeper.stdout.makeAsyncIterator()
                #expect(await it.next() == Array("ready\n".utf8))
            }
            sleeper.cancel()
            let (ended, waited) = await measure { try? await sleeper.exitStatus() }
            #expect(ended == .signaled("TERM", coreDumped: false), "\(String(describing: ended))")
            #expect(waited < 10)
            // a missing program is status 127, as a shell says
            let missing = try await t.startProcess("/no/such/program", arguments: [], environment: [:])
            missing.input.finish()
            #expect(try await missing.exitStatus() == .exited(127))
            if name != "mock" { #expect(await Self.noneLeft("^sleep 38\\.25$"), "the terminated process still runs") }
        }
    }

    /// Every waiting call ends with its task (Docs/Architecture.md, "One vocabulary"):
    /// a cancelled wait for the end throws a cancellation at once, and the process goes
    /// on until `cancel()`; locally, a write the process does not read ends with its task too.
    @Test(arguments: all)
    func waitingForTheEndEndsWithItsTaskAndTheProcessGoesOn(_ name: String) async throws {
        try await Self.with(name) { s in
            // the mock's script runs once input ends: a cat that was never finished stands in
            let p = name == "mock"
                ? try await s.transport.startProcess("/bin/cat", arguments: [], environment: [:])
                : try await s.transport.startProcess("/bin/sh", arguments: ["-c", "echo ready; exec sleep 39.5"],
                                                     environment: [:])
            if name != "mock" {
                var it = p.stdout.makeAsyncIterator()
                #expect(await it.next() == Array("ready\n".utf8))
            }
            let waiting = Task { try await p.exitStatus() }
            try await Task.sleep(for: .milliseconds(100))
            waiting.cancel()
            let r = await finishes(within: .seconds(5)) { try await waiting.value }
            guard case .failure(let e as TransportError)? = r else {
                Issue.record("the wait did not end with its task: \(String(describing: r))")
                p.cancel()
                return
            }
            #expect(e.isCancellation, "\(e)")
            if name == "local" {
                // sleep never reads: 8 MiB fills the pipe, and the write waits until cancelled
                let writing = Task { try await p.input.write([UInt8](repeating: 0x61, count: 8 << 20)) }
                try await Task.sleep(for: .milliseconds(100))
                writing.cancel()
                let w = await finishes(within: .seconds(5)) { try await writing.value }
                guard case .failure(let we as TransportError)? = w else {
                    Issue.record("the write did not end with its task: \(String(describing: w))")
                    p.cancel()
                    return
                }
                #expect(we.isCancellation, "\(we)")
            }
            // still running: cancel() ends it, and a new wait sees how
            p.cancel()
            let status = try await p.exitStatus()
            #expect(status == .signaled("TERM", coreDumped: false), "\(status)")
        }
    }

    /// Whether no process on this machine (where the fixture's sshd runs too) matches
    /// `pattern` within 5 s (KILL comes a second after TERM); kills what is left.
    static func noneLeft(_ pattern: String) async -> Bool {
        for _ in 0..<50 {
            if let r = try? TestServer.runCapturing("/usr/bin/pgrep", ["-f", pattern]), r.status == 1 { return true }
            try? await Task.sleep(for: .milliseconds(100))
        }
        _ = try? TestServer.run("/usr/bin/pkill", ["-KILL", "-f", pattern], allowFailure: true)
        return false
    }

    /// The path a program on the server is given for `path` (processes get no `~`
    /// expansion of their arguments; their working directory is the home).
    static func argument(_ path: String) -> String {
        path.hasPrefix("~/") ? String(path.dropFirst(2)) : path
    }

    @Test(arguments: all)
    func sqliteSnapshotsOfADatabaseBeingWrittenInWALMode(_ name: String) async throws {
        try await Self.with(name) { s in
            let t = s.transport
            let db = s.root + "/it's app.db"
            do {
                _ = try await t.snapshotSQLite(s.root + "/missing.db")
                Issue.record("snapshot of a missing database")
            } catch let e as TransportError {
                #expect(e.isNoSuchFile, "\(e)")
            }
            if name == "mock" { // no SQLite: the bytes are copied
                let bytes = Array("SQLite format 3\u{0}pages".utf8)
                try await t.writeFile(db, contents: bytes)
                let snap = try await t.snapshotSQLite(db)
                #expect(FileManager.default.contents(atPath: snap.path).map(Array.init) == bytes && !snap.isCached)
                return
            }
            // a writer in WAL mode: the transport's own streaming process
            let writer = try await t.startProcess("sqlite3", arguments: [Self.argument(db)], environment: [:])
            defer { writer.cancel() }
            // it waits for a lock as an application does (the count read below can hold one
            // while the journal mode changes: without a busy timeout sqlite3 gives up at once)
            try await writer.input.write(".timeout 10000\nPRAGMA journal_mode=WAL; CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);\n")
            for i in 0..<300 { try await writer.input.write("INSERT INTO t(v) VALUES ('row \(i)');\n") }
            // wait until the 300 rows are committed (to the WAL: far below a checkpoint); the
            // bound only catches a hang (a loaded machine can take seconds to run the writer)
            var rows = 0
            let deadline = ContinuousClock.now + .seconds(60)
            while rows < 300 && ContinuousClock.now < deadline {
                let r = try await t.runProcess("sqlite3", Self.argument(db), "SELECT count(*) FROM t;")
                rows = Int(r.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
                if rows < 300 { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(rows == 300)
            #expect(try await t.fileExists(db + "-wal"))
            // the server's temporary copies (the fixture's sshd runs on this machine)
            func copiesInTmp() -> Set<String> {
                Set(((try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? [])
                    .filter { $0.hasPrefix("sshkit-snapshot.") })
            }
            let copiesBefore = copiesInTmp()
            // more rows while the snapshots are taken
            let more = Task {
                for i in 0..<2000 { try await writer.input.write("INSERT INTO t(v) VALUES ('more \(i)');\n") }
            }
            for _ in 0..<3 {
                let snap = try await t.snapshotSQLite(db)
                #expect(!snap.isCached && snap.age < 60)
                let check = try TestServer.runCapturing("/usr/bin/sqlite3", [
                    snap.path, "PRAGMA integrity_check;", "PRAGMA journal_mode;", "SELECT count(*) FROM t;"])
                let lines = check.out.split(separator: "\n").map(String.init)
                #expect(lines.count == 3 && lines[0] == "ok", "\(check)")
                #expect(lines.count == 3 && lines[1] == (t.isRemote ? "delete" : "wal"), "\(lines)")
                #expect(lines.count == 3 && (Int(lines[2]) ?? 0) >= 300, "\(lines)")
                if t.isRemote {
                    #expect(!FileManager.default.fileExists(atPath: snap.path + "-wal"))
                    var st = stat()
                    #expect(lstat(snap.path, &st) == 0 && st.st_mode & 0o777 == 0o600)
                }
            }
            try await more.value
            writer.input.finish()
            #expect(try await writer.exitStatus() == .exited(0))
            // no temporary copy is left, on the server or beside the database
            // (other tests' snapshots come and go in the same /tmp when tests run in parallel)
            let settled = await eventually(timeout: .seconds(10)) { copiesInTmp().isSubset(of: copiesBefore) }
            #expect(settled, "\(copiesInTmp().subtracting(copiesBefore))")
            let names = try await t.listDirectory(s.root).map(\.name)
            #expect(!names.contains { $0.contains("sshkit-snapshot") }, "\(names)")
        }
    }

    @Test(arguments: ["sshkit", "openssh", "mock"])
    func aCachedSnapshotStandsInWhileTheServerIsUnreachable(_ name: String) async throws {
        // a server of its own, stopped halfway
        let server = try TestServer.start(name: "snapshot-\(name)")
        defer { server.stop() }
        let cacheDir = try TestPaths.makeTemporaryDirectory("snapcache")
        defer { try? FileManager.default.removeItem(atPath: cacheDir) }
        let cache = SnapshotCache(directory: cacheDir)
        let mock = MockTransport(cache: cache)
        let t: any ServerTransport = switch name {
        case "sshkit": SSHTransport(configuration: server.configuration(connectTimeout: .seconds(3)), cache: cache)
        case "openssh": try Self.openSSH(server, cache: cache)
        default: mock
        }
        let db = "~/fallback-\(UInt32.random(in: 0...UInt32.max)).db"
        if name == "mock" {
            try await mock.createDirectory("~")
            try await mock.writeFile(db, contents: Array("db bytes".utf8))
        } else {
            _ = try await t.runProcess("sqlite3", Self.argument(db), "CREATE TABLE t(x); INSERT INTO t VALUES (42);").check()
        }
        let first = try await t.snapshotSQLite(db)
        #expect(!first.isCached && first.unreachable == nil)
        let bytes = FileManager.default.contents(atPath: first.path)
        if name == "mock" {
            mock.setUnreachable(true)
        } else {
            _ = try? await t.runProcess("/bin/rm", "-f", "--", Self.argument(db))
            if let o = t as? OpenSSHTransport { await o.close() }
            let sessions = server.sessionProcessTree()
            server.stop()
            for p in sessions { kill(p, SIGKILL) }
        }
        try await Task.sleep(for: .milliseconds(200))
        let cached = try await t.snapshotSQLite(db)
        #expect(cached.isCached && cached.path == first.path, "\(cached)")
        #expect(cached.unreachable?.code == .hostUnreachable, "\(String(describing: cached.unreachable))")
        #expect(abs(cached.takenAt.timeIntervalSince(first.takenAt)) < 2 && cached.age >= 0)
        #expect(FileManager.default.contents(atPath: cached.path) == bytes)
        // nothing cached for another database: the error itself
        do {
            _ = try await t.snapshotSQLite("~/never-copied.db")
            Issue.record("a snapshot without a server or a copy")
        } catch let e as TransportError {
            #expect(e.code == .hostUnreachable, "\(e)")
        }
        if let o = t as? OpenSSHTransport { try? FileManager.default.removeItem(atPath: o.controlDirectory) }
        if let k = t as? SSHTransport { await k.close() }
    }

    @Test(arguments: all)
    func watchingSeesCreateModifyAndDelete(_ name: String) async throws {
        try await Self.with(name) { s in
            let t = s.transport
            let file = s.root + "/watched.conf", dir = s.root + "/inbox"
            try await t.createDirectory(dir)
            let log = ChangeLog()
            let reader = Task {
                for await change in t.watchPaths([file, dir], pollInterval: .milliseconds(200)) { await log.add(change) }
            }
            defer { reader.cancel() }
            // the watch runs: on a loaded machine its first round (the baseline) can come
            // late, after a change the test makes. Poke the directory until it reports one.
            var running = false
            for i in 0..<50 where !running {
                try await t.writeTextFile(dir + "/probe", String(repeating: "x", count: i + 1))
                running = await log.waitFor(dir, seconds: 0.3)
            }
            #expect(running, "the watch never reported the probe")
            try await t.removeFile(dir + "/probe")
            try await Task.sleep(for: .milliseconds(800)) // the probe's removal reported
            await log.clear()
            try await Task.sleep(for: .milliseconds(800))
            let quiet = await log.changes
            #expect(quiet.isEmpty, "changes with nothing changed: \(quiet)")
            func step(_ what: String, _ path: String, _ action: () async throws -> Void) async throws {
                await log.clear()
                try await action()
                #expect(await log.waitFor(path), "\(what): no change reported for \(path)")
                try await Task.sleep(for: .milliseconds(400)) // let the rest of this step arrive
            }
            try await step("create", file) { try await t.writeTextFile(file, "v1") }
            // another size: remote modification times may be whole seconds
            try await step("modify", file) { try await t.writeTextFile(file, "version 2") }
            try await step("a new entry", dir) { try await t.writeTextFile(dir + "/new.txt", "x") }
            try await step("delete", file) { try await t.removeFile(file) }
            try await step("an entry deleted", dir) { try await t.removeFile(dir + "/new.txt") }
        }
    }

    @Test(arguments: all)
    func aReaderNeverSeesAMixAndAnInterruptedWriteLeavesTheOldFileAndNoTemporary(_ name: String) async throws {
        try await Self.with(name) { s in
            let t = s.transport
            let path = s.root + "/state.json"
            let a = [UInt8](repeating: 0x61, count: 1 << 20), b = [UInt8](repeating: 0x62, count: 1 << 20)
            try await t.writeFile(path, contents: a)
            // a reader through the same transport while the file is rewritten; the writer
            // goes on until the reader finished a few reads during the writes, however
            // the two are scheduled (a fixed number of writes once ended before the
            // reader's second read on a slow machine)
            let writing = Mutex(true), readsDone = Mutex(0)
            let reader = Task { () -> (reads: Int, bad: Int) in
                var reads = 0, bad = 0
                while writing.withLock({ $0 }) || reads == 0 {
                    // the mock's calls never suspend: without this the loop would hold a
                    // thread of the cooperative pool (two on two cores) until the end
                    await Task.yield()
                    let d = try? await t.readFile(path)
                    reads += 1
                    readsDone.withLock { $0 = reads }
                    guard let d else { bad += 1; continue }
                    if d.count != 1 << 20 || !(d.allSatisfy { $0 == 0x61 } || d.allSatisfy { $0 == 0x62 }) { bad += 1 }
                }
                return (reads, bad)
            }
            // (the mock writes in microseconds while checking a read takes milliseconds in
            // a debug build: the bound is time, a generous one that only catches a hang)
            var writes = 0
            let readsBefore = readsDone.withLock { $0 }
            let giveUp = ContinuousClock.now + .seconds(30)
            while writes < 12 || (readsDone.withLock({ $0 }) < readsBefore + 4 && ContinuousClock.now < giveUp) {
                try await t.writeFile(path, contents: writes % 2 == 0 ? b : a)
                writes += 1
                await Task.yield() // the mock's calls never suspend: let the reader in
            }
            writing.withLock { $0 = false }
            let seen = await reader.value
            #expect(seen.bad == 0, "\(seen) during \(writes) writes")
            #expect(seen.reads >= readsBefore + 4, "the reader never ran during the writes: \(seen)")
            // writes interrupted at different points: the old file or the new one, whole
            let old = try await t.readFile(path)
            let big = [UInt8](repeating: 0x63, count: 16 << 20)
            for delay in [5, 40, 150] {
                let write = Task { try await t.writeFile(path, contents: big) }
                try await Task.sleep(for: .milliseconds(delay))
                write.cancel()
                _ = try? await write.value
                let now = try await t.readFile(path)
                #expect(now == old || now == big, "after \(delay) ms: \(now.count) bytes")
            }
            // and no temporary file stays (a remote one is removed by the server's side
            // of the write, which may finish a moment after the cancelled call)
            var names: [String] = []
            for _ in 0..<50 {
                names = try await t.listDirectory(s.root).map(\.name)
                if names == ["state.json"] { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(names == ["state.json"])
        }
    }
}

/// The changes a watch reported, for a test to wait on.
actor ChangeLog {
    private(set) var changes: [PathChange] = []
    func add(_ c: PathChange) { changes.append(c) }
    func clear() { changes = [] }

    /// Whether a change naming `path` arrives within `seconds`.
    func waitFor(_ path: String, seconds: Double = 10) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if changes.contains(where: { $0.paths.contains(path) }) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }
}

/// What only the local transport can show: atomicity seen by a concurrent reader, and a
/// failed write leaving the old file and no temporary file.
@Suite("Local transport", .tags(.integration), .serialized)
struct LocalTransportTests {
    @Test func aConcurrentReaderSeesTheOldOrTheNewFileNeverAMix() async throws {
        let root = try TestPaths.makeTemporaryDirectory("atomic")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let t = LocalTransport()
        let path = root + "/config.json"
        let a = [UInt8](repeating: 0x61, count: 1 << 20), b = [UInt8](repeating: 0x62, count: 1 << 20)
        try await t.writeFile(path, contents: a)
        let writing = Mutex(true)
        let reader = Task.detached { () -> (reads: Int, bad: Int) in
            var reads = 0, bad = 0
            while writing.withLock({ $0 }) || reads == 0 {
                reads += 1
                await Task.yield() // a synchronous loop: leave the pool's threads to others
                // a missing file counts: unlink-then-create would not be atomic
                guard let d = FileManager.default.contents(atPath: path) else { bad += 1; continue }
                if !(d.allSatisfy { $0 == 0x61 } || d.allSatisfy { $0 == 0x62 }) || d.count != 1 << 20 { bad += 1 }
            }
            return (reads, bad)
        }
        for i in 0..<40 { try await t.writeFile(path, contents: i % 2 == 0 ? b : a) }
        writing.withLock { $0 = false }
        let seen = await reader.value
        #expect(seen.bad == 0 && seen.reads > 1, "\(seen)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: root) == ["config.json"]) // no temporaries
    }

    @Test func aFailedWriteLeavesTheOldFileAndNoTemporary() async throws {
        let root = try TestPaths.makeTemporaryDirectory("failwrite")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let t = LocalTransport()
        try await t.writeTextFile(root + "/keep.txt", "old")
        // the rename onto a non-empty directory fails for every user, after the
        // temporary file was written
        try FileManager.default.createDirectory(atPath: root + "/busy/inside", withIntermediateDirectories: true)
        do {
            try await t.writeTextFile(root + "/busy", "new")
            Issue.record("replaced a non-empty directory")
        } catch {
            #expect(error.code == .fileIO, "\(error)")
        }
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: root)) == ["keep.txt", "busy"]) // no temporary
        #expect(try await t.readTextFile(root + "/keep.txt") == "old")
    }

    @Test func modesAreKeptAndSymlinksAreWrittenThrough() async throws {
        let root = try TestPaths.makeTemporaryDirectory("modes")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let t = LocalTransport()
        try await t.writeTextFile(root + "/script.sh", "#!/bin/sh\n")
        chmod(root + "/script.sh", 0o750)
        try await t.writeTextFile(root + "/script.sh", "#!/bin/sh\necho 2\n")
        #expect(try await t.stat(root + "/script.sh").permissions == 0o750)
        // a secret that was 0644 before becomes 0600
        _ = FileManager.default.createFile(atPath: root + "/.env", contents: Data("A=1".utf8),
                                       attributes: [.posixPermissions: 0o644])
        try await t.writeTextFile(root + "/.env", "A=2")
        #expect(try await t.stat(root + "/.env").permissions == 0o600)
        // through a symlink: the target changes, the link stays
        try FileManager.default.createSymbolicLink(atPath: root + "/link.conf", withDestinationPath: root + "/script.sh")
        try await t.writeTextFile(root + "/link.conf", "via link")
        #expect(try await t.stat(root + "/link.conf").kind == .symlink)
        #expect(try await t.readTextFile(root + "/script.sh") == "via link")
        #expect(try await t.stat(root + "/script.sh").permissions == 0o750)
    }

    @Test func cancellingStopsTheProcessAndWhatItStarted() async throws {
        let t = LocalTransport()
        // durations no other test uses: pgrep looks at the whole machine
        let task = Task { try await t.runProcess("/bin/sh", "-c", "trap '' TERM; sleep 37.25 & sleep 37.5; echo never") }
        try await Task.sleep(for: .milliseconds(300))
        let (error, seconds) = await measure { () -> TransportError? in
            task.cancel()
            do {
                _ = try await task.value
                return nil
            } catch let e as TransportError {
                return e
            } catch {
                return nil
            }
        }
        #expect(error?.code == .cancelled, "\(String(describing: error))")
        #expect(seconds < 5) // the shell ignores TERM: KILL follows a second later
        // the whole process group is gone
        let left = try TestServer.runCapturing("/usr/bin/pgrep", ["-f", "^sleep 37\\.(25|5)$"])
        #expect(left.out.isEmpty, "left running: \(left.out)")
    }

    @Test func aChildThatIgnoresItsStdinDoesNotKillTheProcessWithSIGPIPE() async throws {
        let t = LocalTransport()
        let r = try await t.runProcess("/bin/true", arguments: [], stdin: [UInt8](repeating: 1, count: 4 << 20),
                                       environment: [:], timeout: .seconds(30))
        #expect(r.exitStatus == .exited(0)) // and this test process is still here
    }

    @Test func aStoppedProcessRefusesInputAtOnceAsOverSSH() async throws {
        // between terminate() and the reap, a write used to be taken and could succeed
        let p = try await LocalTransport().startProcess("/bin/cat", arguments: [], environment: [:])
        try await p.input.write("before\n")
        p.cancel()
        await #expect(throws: TransportError.self) { try await p.input.write("after\n") }
        #expect(try await p.exitStatus() == .signaled("TERM", coreDumped: false))
    }

    @Test func homeRelativePathsAndAMissingExecutable() async throws {
        let t = LocalTransport()
        let home = ProcessInfo.processInfo.environment["HOME"] ?? "/root"
        #expect(try await t.fileExists("~/") == FileManager.default.fileExists(atPath: home))
        let r = try await t.runProcess("/no/such/program")
        #expect(r.exitStatus == .exited(127))
    }
}

extension LocalTransportTests {
    /// Tests that count this process's fds, threads, sockets or memory: they run alone,
    /// before the other tests run in parallel (Support/Tiers.swift, scripts/test.sh).
    @Suite("Local transport (alone)", .tags(.exclusive), .serialized)
    struct Exclusive {
        @Test func aStreamedFloodIsBoundedAndStoppingItLeaksNothing() async throws {
            let t = LocalTransport()
            let fds = countFDs()
            // `yes` writes forever; nobody reads for a while: the queue stays bounded and
            // the process blocks on its pipe
            let n = try await t.withProcess("/usr/bin/yes", arguments: ["flood"]) { p -> Int in
                try await Task.sleep(for: .milliseconds(300))
                var seen = 0
                for await chunk in p.stdout {
                    seen += chunk.count
                    if seen > 4 << 20 { break }
                }
                return seen
            }
            #expect(n > 4 << 20)
            // withProcess terminated it; its thread closes every pipe
            var settled = false
            for _ in 0..<50 where !settled {
                settled = countFDs() <= fds
                if !settled { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(settled, "fds before \(fds), after \(countFDs())")
        }

        @Test func aWatchStopsItsThreadWhenIterationEnds() async throws {
            let root = try TestPaths.makeTemporaryDirectory("watch")
            defer { try? FileManager.default.removeItem(atPath: root) }
            let t = LocalTransport()
            try await t.writeTextFile(root + "/warm-up", "") // the runtime's own lazily made fds first
            try await Task.sleep(for: .milliseconds(100))
            let (threads, fds) = (countThreads(), countFDs())
            for round in 0..<5 {
                var it = t.watchPaths([root + "/f"]).makeAsyncIterator()
                try await t.writeTextFile(root + "/f", "\(round)")
                let change = await it.next()
                #expect(change?.paths == [root + "/f"])
            }
            var settled = false
            for _ in 0..<50 where !settled {
                settled = countThreads() <= threads && countFDs() <= fds
                if !settled { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(settled, "threads \(threads) -> \(countThreads()), fds \(fds) -> \(countFDs())")
        }
    }
}
