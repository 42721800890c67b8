// Streaming workloads: raw channel throughput, PTY echo latency, fairness between a bulk
// stream and an interactive channel on one connection, and memory under a slow consumer.
import Foundation
import LibSSHBaseline
import SSHKit

/// Every implementation uses this cipher in the throughput and echo workloads.
let cipher = "aes128-gcm@openssh.com"

extension Fixture {
    var sshkitCipherConfig: SSHConfiguration {
        var c = sshkitConfig
        c.algorithms = SSHAlgorithms(ciphers: [cipher])
        return c
    }

    /// A file of random bytes in the fixture directory, readable by the test user.
    func blob(mebibytes: Int) throws -> String {
        let path = dir + "/blob-\(mebibytes)"
        if !FileManager.default.fileExists(atPath: path) {
            guard spawnAndWait(["/bin/sh", "-c", "head -c \(mebibytes)M /dev/urandom > \(path) && chmod 644 \(path)"]) == 0
            else { throw BenchError("could not make \(path)") }
        }
        return path
    }
}

/// CPU seconds (user + system) this process has used.
func processCPUSeconds() -> Double {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    return Double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + Double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6
}

/// CPU seconds (user + system) of another process, from /proc/<pid>/stat.
func processCPUSeconds(pid: pid_t) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return .nan }
    // fields after the command name: state is field 3, utime 14, stime 15
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return .nan }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// The pid of the ControlMaster serving `ctl` (it does the channel's crypto, not the
/// `ssh -S` client, which only passes its descriptors over).
func controlMasterPID(_ ctl: String) -> pid_t? {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    for entry in entries {
        guard let pid = pid_t(entry),
              let cmdline = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { continue }
        let argv = cmdline.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        if argv.contains("ControlMaster=yes") && argv.contains("ControlPath=\(ctl)") { return pid }
    }
    return nil
}

/// MB/s of `cat <blob>` read to the end by each implementation, and the client's CPU
/// time per GiB (on 2 cores the client competes with sshd and `cat` for CPU).
func benchThroughput(_ f: Fixture, mebibytes: Int, rounds: Int) async throws -> [Row] {
    var row = Row(workload: "`cat` \(mebibytes) MiB, \(cipher) (MB/s, higher is better)")
    var cpu = Row(workload: "client CPU for that `cat` (s per GiB, lower is better)")
    let path = try f.blob(mebibytes: mebibytes)
    let bytes = Double(mebibytes) * 1_048_576
    let conn = try await SSHClient.connect(f.sshkitCipherConfig)
    let lib = try LibSSHSession(f, cipher: cipher)
    let ctl = try f.startControlMaster("ctl-cat", extra: ["-c", cipher])
    defer { f.stopControlMaster(ctl) }
    guard let master = controlMasterPID(ctl) else { throw BenchError("no ControlMaster process") }
    let sshArgv = f.sshArgs(["-o", "ControlPath=\(ctl)"], command: "cat \(path)")
    func clientCPU(_ impl: String) -> Double {
        impl == "OpenSSH" ? processCPUSeconds(pid: master) : processCPUSeconds()
    }
    for i in 0..<rounds {
        for impl in rotated(implementations, by: i) {
            let c0 = clientCPU(impl)
            lsb_callgrind_dump("before \(impl), round \(i)")
            let t0 = now()
            switch impl {
            case "SSHKit":
                let cmd = try await conn.startCommand("cat \(path)")
                var total = 0
                for try await chunk in cmd.stdout { total += chunk.count }
                guard total == Int(bytes), try await cmd.exitStatus() == .exited(0) else {
                    throw BenchError("SSHKit read \(total) bytes")
                }
            case "libssh C":
                guard lsb_read_all(lib.raw, "cat \(path)") == Int64(bytes) else { throw BenchError("libssh cat") }
            default:
                guard spawnAndWait(sshArgv) == 0 else { throw BenchError("ssh cat failed") }
            }
            row.samples[impl, default: []].append(bytes / 1e6 / ((now() - t0) / 1000))
            lsb_callgrind_dump("cat \(mebibytes) MiB, \(impl), round \(i)")
            cpu.samples[impl, default: []].append((clientCPU(impl) - c0) / (bytes / 1_073_741_824))
        }
    }
    await conn.close()
    return [row, cpu]
}

/// One byte to `stty raw -echo; cat` on a PTY and back, in milliseconds.
struct SSHKitEcho {
    let cmd: SSHCommand
    var it: SSHByteStream.AsyncIterator

    init(_ conn: SSHConnection) async throws {
        cmd = try await conn.startCommand("stty raw -echo; cat", terminal: SSHTerminal())
        it = cmd.stdout.makeAsyncIterator()
        _ = try await roundTrip() // the first one also waits for stty
    }

    mutating func roundTrip() async throws -> Double {
        let t0 = now()
        try await cmd.input.write([0x78])
        var got = 0
        while got < 1 {
            guard let chunk = try await it.next() else { throw BenchError("echo stream ended") }
            got += chunk.count
        }
        return now() - t0
    }
}

/// `ssh -tt host 'stty raw -echo; cat'` with pipes for stdin and stdout.
final class OpenSSHEcho {
    let process: PipedProcess

    init(_ f: Fixture, options: [String] = []) throws {
        guard let p = PipedProcess(f.sshArgs(["-tt", "-c", cipher] + options, command: "stty raw -echo; cat")) else {
            throw BenchError("spawn ssh -tt")
        }
        process = p
        _ = try roundTrip()
    }

    func roundTrip() throws -> Double {
        var b: UInt8 = 0x78
        let t0 = now()
        guard write(process.stdin, &b, 1) == 1 else { throw BenchError("write to ssh") }
        var buf = [UInt8](repeating: 0, count: 256)
        guard read(process.stdout, &buf, buf.count) > 0 else { throw BenchError("ssh -tt ended") }
        return now() - t0
    }

    deinit { process.end() }
}

func benchEcho(_ f: Fixture, samples: Int) async throws -> Row {
    var row = Row(workload: "PTY echo round trip, 1 byte (ms)")
    let conn = try await SSHClient.connect(f.sshkitCipherConfig)
    var mine = try await SSHKitEcho(conn)
    let theirs = try OpenSSHEcho(f)
    for i in 0..<(samples / 50) {
        for impl in rotated(["SSHKit", "OpenSSH"], by: i) {
            for _ in 0..<50 {
                let ms = impl == "SSHKit" ? try await mine.roundTrip() : try theirs.roundTrip()
                row.samples[impl, default: []].append(ms)
            }
        }
    }
    mine.cmd.cancel()
    await conn.close()
    return row
}

/// Bytes a reading task has counted so far, read from another task.
final class ByteCounter: @unchecked Sendable { // safe because: `total` is only touched under `lock`
    private let lock = NSLock()
    private var total = 0
    func add(_ n: Int) { lock.withLock { total += n } }
    var value: Int { lock.withLock { total } }
}

/// Echo latency on one connection with and without a full-speed stream beside it, through
/// SSHKit, a plain libssh C loop and OpenSSH (`ssh -tt` and the stream multiplexed over one
/// ControlMaster), with how fast each one's stream moved while it echoed. The busy part runs
/// in blocks of round trips, the implementations taking turns, each block with a new stream
/// (warmed up first), so that a slow spell of the machine does not land on one of them.
///
/// `SSHKIT_BENCH_STREAM_MBPS=N` replaces `cat /dev/zero` with `stream-pacer N` (built beside
/// this binary) for all three: streams of one fixed speed, to compare echoes at equal speed.
func benchFairness(_ f: Fixture, samples: Int) async throws {
    let (bulkCommand, bulkName) = try fairnessStream()
    let blocks = 10
    let perBlock = max(1, samples / blocks)
    let warmup = Duration.milliseconds(200)

    let conn = try await SSHClient.connect(f.sshkitCipherConfig)
    var echo = try await SSHKitEcho(conn)
    var quiet: [Double] = []
    for _ in 0..<samples { quiet.append(try await echo.roundTrip()) }

    let lib = try LibSSHSession(f)
    guard let libEcho = lsb_echo_open(lib.raw) else { throw BenchError("libssh echo channel") }
    defer { lsb_echo_close(libEcho) }
    nonisolated(unsafe) let libEchoRef = libEcho

    let ctl = try f.startControlMaster("ctl-fair", extra: ["-c", cipher])
    defer { f.stopControlMaster(ctl) }
    let theirs = try OpenSSHEcho(f, options: ["-o", "ControlPath=\(ctl)"])
    var theirsQuiet: [Double] = []
    for _ in 0..<samples { theirsQuiet.append(try theirs.roundTrip()) }
    guard let master = controlMasterPID(ctl) else { throw BenchError("no ControlMaster for \(ctl)") }

    var busy: [String: [Double]] = [:]
    var bytes: [String: Int] = [:]
    var seconds: [String: Double] = [:]
    for b in 0..<blocks {
        for impl in rotated(["SSHKit", "libssh C", "OpenSSH"], by: b) {
            var ms: [Double] = []
            switch impl {
            case "SSHKit":
                let bulk = try await conn.startCommand(bulkCommand)
                let counted = ByteCounter()
                let reader = Task {
                    do { for try await chunk in bulk.stdout { counted.add(chunk.count) } } catch {}
                }
                try await Task.sleep(for: warmup)
                let (n0, t0) = (counted.value, now())
                for _ in 0..<perBlock { ms.append(try await echo.roundTrip()) }
                bytes[impl, default: 0] += counted.value - n0
                seconds[impl, default: 0] += (now() - t0) / 1000
                bulk.cancel()
                _ = await reader.value
            case "libssh C":
                let (got, n, secs) = try await Task.detached { () throws -> ([Double], Int64, Double) in
                    var out = [Double](repeating: 0, count: perBlock)
                    var n: Int64 = 0
                    var secs = 0.0
                    guard lsb_echo_beside_stream(libEchoRef, bulkCommand, Int32(perBlock), 200, &out, &n, &secs) == 0 else {
                        throw BenchError("libssh echo beside a stream")
                    }
                    return (out, n, secs)
                }.value
                ms = got
                bytes[impl, default: 0] += Int(n)
                seconds[impl, default: 0] += secs
            default:
                // the stream goes to /dev/null, the fastest consumer there is; its speed is what
                // the ControlMaster read from the socket (ciphertext, ~0.2% over the payload)
                let bulkArgv = f.sshArgs(["-o", "ControlPath=\(ctl)"], command: bulkCommand)
                let bulkTask = Task.detached { spawnAndWait(bulkArgv) }
                try await Task.sleep(for: warmup)
                let (n0, t0) = (bytesRead(master), now())
                for _ in 0..<perBlock { ms.append(try theirs.roundTrip()) }
                bytes[impl, default: 0] += bytesRead(master) - n0
                seconds[impl, default: 0] += (now() - t0) / 1000
                _ = spawnAndWait(["/usr/bin/pkill", "-f", "ControlPath=\(ctl) .*" + NSRegularExpression.escapedPattern(for: bulkCommand)])
                _ = await bulkTask.value
            }
            busy[impl, default: []] += ms
        }
    }
    echo.cmd.cancel()
    await conn.close()

    func f2(_ x: Double) -> String { String(format: "%.3f", x) }
    func line(_ name: String, _ xs: [Double], _ impl: String? = nil) -> String {
        let rate = impl.map { "\(Int(Double(bytes[$0] ?? 0) / 1e6 / (seconds[$0] ?? 1)))" } ?? "—"
        return "| \(name) | \(f2(percentile(xs, 0.5))) | \(f2(percentile(xs, 0.9))) | \(f2(percentile(xs, 0.99))) | \(f2(xs.max() ?? .nan)) | \(rate) |"
    }
    let mine = busy["SSHKit"] ?? [], libs = busy["libssh C"] ?? [], ssh = busy["OpenSSH"] ?? []
    func ratio(_ xs: [Double]) -> String { String(format: "%.1fx", percentile(xs, 0.99) / percentile(ssh, 0.99)) }
    out("""

    Fairness, one connection, \(samples) echo round trips each (ms), and the stream's speed meanwhile (MB/s);
    beside the stream in \(blocks) blocks of \(perBlock), the implementations taking turns:
    | echo | p50 | p90 | p99 | max | stream |
    |---|---|---|---|---|---|
    \(line("SSHKit, idle connection", quiet))
    \(line("SSHKit, beside \(bulkName)", mine, "SSHKit"))
    \(line("libssh C loop, beside \(bulkName) on the same session", libs, "libssh C"))
    \(line("OpenSSH `ssh -tt`, idle ControlMaster", theirsQuiet))
    \(line("OpenSSH, beside \(bulkName) on the same ControlMaster", ssh, "OpenSSH"))
    p99 beside the stream against OpenSSH's: SSHKit \(ratio(mine)), libssh C \(ratio(libs))
    """)
}

/// The fairness benchmark's bulk stream: its command and how the table names it.
func fairnessStream() throws -> (command: String, name: String) {
    guard let v = ProcessInfo.processInfo.environment["SSHKIT_BENCH_STREAM_MBPS"] else {
        return ("cat /dev/zero", "a `cat /dev/zero` stream")
    }
    guard let rate = Int(v), rate > 0 else { throw BenchError("SSHKIT_BENCH_STREAM_MBPS must be a positive integer") }
    let pacer = URL(fileURLWithPath: benchBinary).deletingLastPathComponent().appendingPathComponent("stream-pacer").path
    guard FileManager.default.isExecutableFile(atPath: pacer) else { throw BenchError("no stream-pacer beside the benchmark (swift build builds it)") }
    return ("'\(pacer)' \(rate)", "a stream paced at \(rate) MB/s")
}

/// `rchar` of /proc/PID/io: every byte the process has read so far.
func bytesRead(_ pid: pid_t) -> Int {
    guard let s = try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8),
          let line = s.split(separator: "\n").first(where: { $0.hasPrefix("rchar:") }),
          let n = Int(line.split(separator: " ").dropFirst().first ?? "") else { return 0 }
    return n
}

func residentMiB() -> Double {
    guard let s = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = s.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
          let kb = Double(line.split(separator: " ").dropFirst().first ?? "") else { return .nan }
    return kb / 1024
}

/// Streams through a consumer slower than the network and samples the RSS.
func benchSlowConsumer(_ f: Fixture, mebibytes: Int) async throws {
    let conn = try await SSHClient.connect(f.sshkitCipherConfig)
    let before = residentMiB()
    let sampler = Task { () -> Double in
        var peak = 0.0
        while !Task.isCancelled {
            peak = max(peak, residentMiB())
            try? await Task.sleep(for: .milliseconds(20))
        }
        return peak
    }
    let t0 = now()
    let cmd = try await conn.startCommand("head -c \(mebibytes)M /dev/zero")
    var total = 0
    var sinceNap = 0
    for try await chunk in cmd.stdout {
        total += chunk.count
        sinceNap += chunk.count
        if sinceNap >= 256 * 1024 { // about 128 MB/s at most: far below the network
            sinceNap = 0
            try await Task.sleep(for: .milliseconds(2))
        }
    }
    let seconds = (now() - t0) / 1000
    sampler.cancel()
    let peak = await sampler.value
    let status = try await cmd.exitStatus()
    await conn.close()
    guard total == mebibytes * 1_048_576, status == .exited(0) else {
        throw BenchError("slow consumer: \(total) bytes, \(status)")
    }
    out("""

    Slow consumer: \(total / 1_048_576) MiB through a reader that naps 2 ms every 256 KiB, \
    in \(String(format: "%.1f", seconds)) s (\(Int(Double(total) / 1e6 / seconds)) MB/s); \
    RSS \(String(format: "%.1f", before)) MiB before, \(String(format: "%.1f", peak)) MiB peak \
    (bufferLimit 1 MiB).
    """)
}

/// print, flushed at once (stdout is a file or pipe when the benchmark is logged).
func out(_ s: String = "") {
    print(s)
    fflush(nil)
}
