// sshkit-bench: the same workloads through SSHKit, a minimal libssh C client and the
// OpenSSH CLI, in one run against one throwaway sshd on 127.0.0.1, alternating between
// implementations. Prints medians and ratios.
//
//   cd Benchmarks && swift run -c release sshkit-bench [--quick]
import Foundation
import LibSSHBaseline
import SSHKit

// MARK: - fixture

struct Fixture {
    let dir: String
    let port: Int
    let user: String
    let key: String
    let fingerprints: [String]

    static func start(root: String) throws -> Fixture {
        let dir = "/tmp/sshkit-bench-\(getpid())"
        let status = spawnAndWait(["/bin/bash", "\(root)/scripts/test-sshd.sh", "start", dir, "MaxSessions 256"],
                                  quiet: true)
        guard status == 0, let env = try? String(contentsOfFile: dir + "/env", encoding: .utf8) else {
            throw BenchError("could not start the fixture sshd (needs root)")
        }
        var v: [String: String] = [:]
        for line in env.split(separator: "\n") {
            let kv = line.split(separator: "=", maxSplits: 1)
            if kv.count == 2 { v[String(kv[0])] = String(kv[1]) }
        }
        return Fixture(dir: dir, port: Int(v["SSHKIT_TEST_PORT"]!)!, user: v["SSHKIT_TEST_USER"]!,
                       key: dir + "/id_ed25519",
                       fingerprints: ["ED25519", "ECDSA", "RSA"].compactMap { v["SSHKIT_TEST_FP_\($0)"] })
    }

    func stop(root: String) {
        _ = spawnAndWait(["/bin/bash", "\(root)/scripts/test-sshd.sh", "stop", dir], quiet: true)
        try? FileManager.default.removeItem(atPath: dir)
    }

    var sshkitConfig: SSHConfiguration {
        SSHConfiguration(host: "127.0.0.1", port: port, user: user,
                         authentication: .privateKey(path: key), hostKeyPolicy: .pinned(fingerprints))
    }

    /// Starts an OpenSSH ControlMaster in the background; returns its socket path.
    func startControlMaster(_ name: String, extra: [String] = []) throws -> String {
        let ctl = dir + "/" + name
        guard spawnAndWait(sshArgs(["-o", "ControlMaster=yes", "-o", "ControlPath=\(ctl)",
                                    "-o", "ControlPersist=yes", "-f", "-N"] + extra)) == 0 else {
            throw BenchError("ssh ControlMaster did not start")
        }
        return ctl
    }

    func stopControlMaster(_ ctl: String) {
        spawnAndWait(sshArgs(["-o", "ControlPath=\(ctl)", "-O", "exit"]))
    }

    /// `ssh [options] user@127.0.0.1 [command]`
    func sshArgs(_ options: [String], command: String? = nil) -> [String] {
        ["/usr/bin/ssh", "-F", "/dev/null", "-p", "\(port)", "-i", key, "-o", "IdentitiesOnly=yes",
         "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
         "-o", "LogLevel=ERROR"] + options + ["\(user)@127.0.0.1"] + (command.map { [$0] } ?? [])
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

// MARK: - processes and timing

/// posix_spawn with an empty signal mask: task threads block signals and posix_spawn
/// passes the mask on, so a child (ssh) would otherwise ignore the SIGTERM meant to stop it.
func spawn(_ argv: [String], _ actions: inout posix_spawn_file_actions_t) -> pid_t? {
    var attr = posix_spawnattr_t()
    posix_spawnattr_init(&attr)
    defer { posix_spawnattr_destroy(&attr) }
    var empty = sigset_t()
    sigemptyset(&empty)
    posix_spawnattr_setsigmask(&attr, &empty)
    posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK))
    let cargs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
    defer { for p in cargs { free(p) } }
    var pid: pid_t = 0
    guard posix_spawn(&pid, argv[0], &actions, &attr, cargs, environ) == 0 else { return nil }
    return pid
}

/// posix_spawn + waitpid; output to /dev/null when quiet. Returns the exit status.
@discardableResult
func spawnAndWait(_ argv: [String], quiet: Bool = true) -> Int32 {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    if quiet {
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    }
    guard let pid = spawn(argv, &actions) else { return -1 }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    return (status >> 8) & 0xff
}

/// Reads `fd` until `marker` appears: true then; false at its end or after `seconds`.
/// `seen` holds what was read (for error messages).
func readUntil(_ fd: Int32, _ marker: String, seconds: Double = 20, seen: inout [UInt8]) -> Bool {
    seen = []
    let m = Array(marker.utf8)
    var buf = [UInt8](repeating: 0, count: 65536)
    let deadline = now() + seconds * 1000
    while now() < deadline {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, 100) >= 0 else { return false }
        if p.revents == 0 { continue }
        let n = read(fd, &buf, buf.count)
        if n <= 0 { return false }
        seen += buf[0..<n]
        if seen.count >= m.count, (0...(seen.count - m.count)).contains(where: { seen[$0..<($0 + m.count)].elementsEqual(m) }) {
            return true
        }
        if seen.count > 1 << 20 { seen.removeFirst(seen.count - m.count) }
    }
    return false
}

/// A process (`ssh`) with its stdin and stdout on pipes (stdin stays open, as a terminal's
/// would). `waitFor` reads stdout until a marker appears.
final class PipedProcess {
    let pid: pid_t
    let stdout: Int32
    let stdin: Int32
    /// What the last `waitFor` read, for error messages.
    var lastOutput: [UInt8] = []

    init?(_ argv: [String]) {
        var inPipe: [Int32] = [0, 0], outPipe: [Int32] = [0, 0]
        guard pipe(&inPipe) == 0, pipe(&outPipe) == 0 else { return nil }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        for fd in inPipe + outPipe { posix_spawn_file_actions_addclose(&actions, fd) }
        guard let pid = spawn(argv, &actions) else { return nil }
        close(inPipe[0])
        close(outPipe[1])
        self.pid = pid
        stdin = inPipe[1]
        stdout = outPipe[0]
    }

    /// The process with a terminal as its stdin and stdout (`ssh -tt` in a terminal
    /// window): the benchmark holds the pseudo-terminal's master, as a terminal emulator
    /// does, and reads and writes it through `stdin` and `stdout` (the same fd).
    init?(onTerminal argv: [String]) {
        guard let pty = Pseudoterminal() else { return nil }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pty.terminal, 0)
        posix_spawn_file_actions_adddup2(&actions, pty.terminal, 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addclose(&actions, pty.terminal)
        posix_spawn_file_actions_addclose(&actions, pty.master)
        guard let pid = spawn(argv, &actions) else {
            close(pty.master)
            close(pty.terminal)
            return nil
        }
        close(pty.terminal)
        self.pid = pid
        stdin = pty.master
        stdout = dup(pty.master)
    }

    /// True once `marker` was read; false when the process ended first or `seconds` passed.
    func waitFor(_ marker: String, seconds: Double = 20) -> Bool {
        readUntil(stdout, marker, seconds: seconds, seen: &lastOutput)
    }

    func end() {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        close(stdin)
        close(stdout)
    }
}

/// A pseudo-terminal: the master for the benchmark (a terminal emulator's side) and the
/// terminal for the program, in raw mode as an attached client sets its own.
struct Pseudoterminal {
    let master: Int32
    let terminal: Int32

    init?() {
        var m: Int32 = -1, t: Int32 = -1
        var size = winsize(ws_row: 40, ws_col: 120, ws_xpixel: 0, ws_ypixel: 0)
        guard openpty(&m, &t, nil, nil, &size) == 0 else { return nil }
        var raw = termios()
        tcgetattr(t, &raw)
        cfmakeraw(&raw)
        tcsetattr(t, TCSANOW, &raw)
        _ = fcntl(m, F_SETFD, FD_CLOEXEC)
        _ = fcntl(t, F_SETFD, FD_CLOEXEC)
        master = m
        terminal = t
    }
}

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) * 1000 + Double(ts.tv_nsec) / 1e6
}

func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    guard !s.isEmpty else { return .nan }
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

func percentile(_ xs: [Double], _ p: Double) -> Double {
    let s = xs.sorted()
    guard !s.isEmpty else { return .nan }
    return s[min(s.count - 1, Int(Double(s.count) * p))]
}

final class LibSSHSession: @unchecked Sendable {  // safe because: used from one task at a time
    let raw: OpaquePointer
    init(_ f: Fixture, cipher: String? = nil) throws {
        var err = [CChar](repeating: 0, count: 256)
        guard let s = lsb_connect("127.0.0.1", Int32(f.port), f.user, f.key, cipher, &err, err.count) else {
            throw BenchError("libssh baseline: " + String(decoding: err.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        raw = s
    }
    deinit { lsb_close(raw) }
}

// MARK: - workloads

struct Row {
    let workload: String
    var samples: [String: [Double]] = [:]
}

let quick = CommandLine.arguments.contains("--quick")
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent().path
/// This benchmark's own binary (also when started from PATH); `stream-pacer` is built beside it.
let benchBinary = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
/// `SSHKIT_BENCH_IMPLS=SSHKit` (comma-separated) runs only those, e.g. under a profiler.
let implementations = ProcessInfo.processInfo.environment["SSHKIT_BENCH_IMPLS"]
    .map { $0.split(separator: ",").map(String.init) } ?? ["SSHKit", "libssh C", "OpenSSH"]

func benchConnect(_ f: Fixture, rounds: Int) async throws -> Row {
    var row = Row(workload: "connect + auth + `true` (ms)")
    for i in 0..<rounds {
        for impl in rotated(implementations, by: i) {
            let t0 = now()
            switch impl {
            case "SSHKit":
                let c = try await SSHClient.connect(f.sshkitConfig)
                _ = try await c.execute("true")
                await c.close()
            case "libssh C":
                let s = try LibSSHSession(f)
                guard lsb_exec(s.raw, "true") == 0 else { throw BenchError("libssh exec failed") }
            default:
                guard spawnAndWait(f.sshArgs(["-o", "ControlMaster=no", "-o", "ControlPath=none"], command: "true")) == 0
                else { throw BenchError("ssh failed") }
            }
            row.samples[impl, default: []].append(now() - t0)
        }
    }
    return row
}

func benchSequential(_ f: Fixture, total: Int, block: Int) async throws -> Row {
    var row = Row(workload: "exec `true` on an open connection (ms)")
    let conn = try await SSHClient.connect(f.sshkitConfig)
    let lib = try LibSSHSession(f)
    let ctl = try f.startControlMaster("ctl")
    defer { f.stopControlMaster(ctl) }
    for b in 0..<(total / block) {
        for impl in rotated(implementations, by: b) {
            for _ in 0..<block {
                let t0 = now()
                switch impl {
                case "SSHKit":
                    _ = try await conn.execute("true")
                case "libssh C":
                    guard lsb_exec(lib.raw, "true") == 0 else { throw BenchError("libssh exec failed") }
                default:
                    guard spawnAndWait(f.sshArgs(["-o", "ControlPath=\(ctl)"], command: "true")) == 0 else {
                        throw BenchError("ssh via ControlMaster failed")
                    }
                }
                row.samples[impl, default: []].append(now() - t0)
            }
        }
    }
    await conn.close()
    return row
}

func benchConcurrent(_ f: Fixture, n: Int, rounds: Int) async throws -> Row {
    var row = Row(workload: "\(n) concurrent `true`, one connection (ms per batch)")
    let conn = try await SSHClient.connect(f.sshkitConfig)
    let lib = try LibSSHSession(f)
    let ctl = try f.startControlMaster("ctl2")
    defer { f.stopControlMaster(ctl) }
    let sshArgv = f.sshArgs(["-o", "ControlPath=\(ctl)"], command: "true")
    for i in 0..<rounds {
        for impl in rotated(implementations, by: i) {
            let t0 = now()
            switch impl {
            case "SSHKit":
                try await withThrowingTaskGroup(of: Void.self) { g in
                    for _ in 0..<n { g.addTask { _ = try await conn.execute("true") } }
                    try await g.waitForAll()
                }
            case "libssh C":
                guard lsb_exec_many(lib.raw, "true", Int32(n)) == n else { throw BenchError("libssh exec_many") }
            default:
                let ok = await withTaskGroup(of: Int32.self) { g in
                    for _ in 0..<n { g.addTask { spawnAndWait(sshArgv) } }
                    return await g.reduce(0) { $0 + ($1 == 0 ? 1 : 0) }
                }
                guard ok == n else { throw BenchError("ssh concurrent: \(ok)/\(n)") }
            }
            row.samples[impl, default: []].append(now() - t0)
        }
    }
    await conn.close()
    return row
}

func rotated<T>(_ xs: [T], by i: Int) -> [T] {
    let k = i % xs.count
    return Array(xs[k...] + xs[..<k])
}

/// The median of the per-round ratios a[i] / b[i]. Each round runs the implementations
/// back to back, so a drift of the machine between rounds (this VM's throughput moves by
/// a third within an hour) cancels out of each ratio; the ratio of the medians does not.
func pairedMedian(_ a: [Double], _ b: [Double]) -> Double {
    let n = min(a.count, b.count)
    guard n > 0 else { return .nan }
    return median((0..<n).map { a[$0] / b[$0] })
}

func report(_ rows: [Row]) {
    func f(_ x: Double) -> String { String(format: x < 10 ? "%.2f" : "%.1f", x) }
    func ratio(_ r: Row, _ other: String) -> String {
        let ours = r.samples["SSHKit"] ?? [], theirs = r.samples[other] ?? []
        return String(format: "%.2fx (paired %.2fx)", median(ours) / median(theirs), pairedMedian(ours, theirs))
    }
    out()
    out("| workload | SSHKit median | libssh C median | OpenSSH median | SSHKit / libssh C | SSHKit / OpenSSH |")
    out("|---|---|---|---|---|---|")
    for r in rows {
        let m = ["SSHKit", "libssh C", "OpenSSH"].map { median(r.samples[$0] ?? []) }
        out("| \(r.workload) | \(f(m[0])) (p90 \(f(percentile(r.samples["SSHKit"] ?? [], 0.9)))) | \(f(m[1])) | \(f(m[2])) | \(ratio(r, "libssh C")) | \(ratio(r, "OpenSSH")) |")
    }
    out("(ratios: of the medians, and in brackets the median of the per-round ratios)")
    let n = rows.map { r in implementations.map { "\($0): \(r.samples[$0]?.count ?? 0)" }.joined(separator: ", ") }
    out("\nsamples: " + n.joined(separator: " | "))
}

// MARK: - main


/// The benchmark's main, run on the cooperative pool by a synchronous main thread (below).
func runBenchmarks() async -> Int32 {
    // a fleet benchmark worker: one SSHFleet run as a process of its own (Fleet.swift)
    if CommandLine.arguments.count > 1 && CommandLine.arguments[1] == "fleet-worker" {
        return await fleetWorker(Array(CommandLine.arguments.dropFirst(2)))
    }
    // the installed tool needs no sshd: its start against git's, and the package's size
    if CommandLine.arguments.contains("--only=install") {
        do { try benchInstall(rounds: quick ? 5 : 15) } catch {
            out("benchmark failed: \(error)")
            return 1
        }
        return 0
    }
    let fixture: Fixture
    do { fixture = try Fixture.start(root: root) } catch {
        out("benchmark failed: \(error)")
        return 1
    }
    defer {
        fixture.stop(root: root)
        removeAgentHostFiles(user: fixture.user)
    }
    // a run stopped with SIGINT or SIGTERM takes back what it put on the host as an ended
    // one does: the fixture's sshd, the fake agents in the test user's ~/.local/bin (left
    // there, they are taken for installed agents by the next test run)
    let stopping = [SIGINT, SIGTERM].map { sig -> any DispatchSourceSignal in
        signal(sig, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
        source.setEventHandler {
            fixture.stop(root: root)
            removeAgentHostFiles(user: fixture.user)
            exit(128 + sig)
        }
        source.resume()
        return source
    }
    defer { for s in stopping { s.cancel() } }
    let only = CommandLine.arguments.first { $0.hasPrefix("--only=") }.map { String($0.dropFirst(7)) }
    out("sshd on 127.0.0.1:\(fixture.port); \(quick ? "quick run" : "full run"); implementations alternate")
    do {
        var rows: [Row] = []
        if only == nil || only == "exec" {
            rows.append(try await benchConnect(fixture, rounds: quick ? 10 : 40))
            out("connect: done")
            rows.append(try await benchSequential(fixture, total: quick ? 200 : 1000, block: 100))
            out("sequential: done")
            rows.append(try await benchConcurrent(fixture, n: 64, rounds: quick ? 5 : 20))
            out("concurrent: done")
        }
        if only == nil || only == "streams" || only == "throughput" {
            rows.append(contentsOf: try await benchThroughput(fixture, mebibytes: quick ? 256 : 1024, rounds: quick ? 3 : 5))
            out("throughput: done")
        }
        if only == nil || only == "streams" {
            rows.append(try await benchEcho(fixture, samples: quick ? 200 : 1000))
            out("echo: done")
        }
        if !rows.isEmpty { report(rows) }
        if only == nil || only == "streams" || only == "fairness" {
            try await benchFairness(fixture, samples: quick ? 200 : 1000)
        }
        if only == nil || only == "streams" || only == "memory" {
            try await benchSlowConsumer(fixture, mebibytes: quick ? 256 : 1024)
        }
        if only == nil || only == "forward" {
            reportForward(try await benchForward(fixture, mebibytes: quick ? 256 : 1024, rounds: quick ? 3 : 5,
                                                 connections: quick ? 300 : 1000))
        }
        if only == nil || only == "sftp" {
            reportSFTP(try await benchSFTPTransfers(fixture, mebibytes: quick ? 256 : 1024, rounds: quick ? 3 : 5)
                       + benchSFTPMetadata(fixture, rounds: quick ? 2 : 5))
        }
        if only == nil || only == "sftp" || only == "sftp-cancel" {
            try await benchSFTPCancel(fixture, rounds: quick ? 10 : 40)
        }
        if only == nil || only == "transport" {
            reportTransports(try await benchTransports(fixture, rounds: quick ? 4 : 10))
        }
        if only == "fleet" { // not in the default run: it starts 100 sshd processes and needs parallel-ssh
            reportFleet(try await benchFleet(fixture, hosts: quick ? 20 : 100, rounds: quick ? 2 : 5))
        }
        if only == nil || only == "agents" {
            reportAgents(try await benchAgents(fixture, rounds: quick ? 3 : 10))
        }
        if only == nil || only == "cockpit" {
            try await benchCockpit(fixture, rounds: quick ? 3 : 10)
        }
        if only == nil || only == "status" {
            try await benchStatus(fixture, rounds: quick ? 3 : 10)
        }
        if only == nil || only == "fetch" {
            try await benchFetch(fixture, rounds: quick ? 5 : 20)
        }
        if only == nil || only == "attempts" {
            try await benchAttempts(fixture, rounds: quick ? 3 : 10)
        }
        if only == "serve" { // not in the default run: it needs the release agent-sessions, Chromium and webssh
            try await benchServe(fixture, rounds: quick ? 3 : 10)
        }
        if only == "mcp" {
            try await benchMCP(fixture, rounds: quick ? 3 : 10)
        } else if only == nil {
            // with the release agent-sessions only (it is built at the top, not here)
            if (try? agentSessionsBinary()) != nil {
                try await benchMCP(fixture, rounds: quick ? 3 : 10)
            } else {
                out("mcp: skipped (no release agent-sessions; swift build -c release --product agent-sessions at the top)")
            }
        }
    } catch {
        out("benchmark failed: \(error)")
        return 1
    }
    return 0
}

// A synchronous main that waits for the benchmark, not top-level `await`: that parks the
// main thread in `dispatch_main`, where valgrind 3.19 (Debian 12's) crashes, and the
// instruction counts in Benchmarks/README.md come from `valgrind --tool=callgrind`.
final class ExitStatus: @unchecked Sendable { var value: Int32 = 1 }
let finished = DispatchSemaphore(value: 0)
let exitStatus = ExitStatus()
Task.detached {
    exitStatus.value = await runBenchmarks()
    finished.signal()
}
finished.wait()
exit(exitStatus.value)
