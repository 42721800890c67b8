import Foundation
import SSHKit

// The fleet benchmark (issue 19): `uname -a` on N hosts and a 1 MiB upload to N hosts, each
// host its own sshd process on loopback, through SSHKit's SSHFleet, parallel-ssh (PyPI),
// asyncssh with asyncio.gather, and `xargs -P` over OpenSSH's ssh/scp. Every implementation
// runs as a process of its own under /usr/bin/time, so wall time and peak memory are
// measured the same way; each at a few concurrency settings, the best one reported.

/// N sshd processes, the fixture's configuration with a port each.
///
/// By default the servers are lean: no PAM and no re-exec per connection (`sshd -r`), about
/// 11 ms of server CPU per login and command instead of about 28 ms. On a real fleet each
/// host pays that on its own CPU; here 100 hosts share the client's 2 cores, and the servers'
/// cost would hide the clients' differences. `SSHKIT_BENCH_FLEET_SERVERS=fixture` runs the
/// fixture's configuration unchanged (PAM, re-exec).
struct FleetServers {
    let dir: String
    let ports: [Int]
    let pids: [pid_t]

    static func start(_ f: Fixture, count: Int) throws -> FleetServers {
        let dir = f.dir + "/fleet"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let base = try String(contentsOfFile: f.dir + "/sshd_config", encoding: .utf8)
        let lean = FleetServers.lean
        var ports: [Int] = [], pids: [pid_t] = []
        for i in 0..<count {
            let port = try freePort()
            let config = base.split(separator: "\n").map { line -> String in
                if line.hasPrefix("Port ") { return "Port \(port)" }
                if line.hasPrefix("LogLevel ") { return "LogLevel ERROR" }
                if line.hasPrefix("PidFile ") { return "PidFile \(dir)/sshd-\(i).pid.unused" }
                if lean && line.hasPrefix("UsePAM ") { return "UsePAM no" }
                return String(line)
            }.joined(separator: "\n") + "\n"
            let path = "\(dir)/sshd_config-\(i)"
            try config.write(toFile: path, atomically: true, encoding: .utf8)
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, "\(dir)/sshd-\(i).log", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            guard let pid = spawn(["/usr/sbin/sshd", "-D", "-e", "-f", path] + (lean ? ["-r"] : []), &actions) else {
                posix_spawn_file_actions_destroy(&actions)
                throw BenchError("sshd \(i) did not start")
            }
            posix_spawn_file_actions_destroy(&actions)
            ports.append(port)
            pids.append(pid)
        }
        let servers = FleetServers(dir: dir, ports: ports, pids: pids)
        for port in ports {
            var up = false
            for _ in 0..<200 where !up {
                up = canConnect(port)
                if !up { usleep(20_000) }
            }
            guard up else {
                servers.stop()
                throw BenchError("sshd on port \(port) did not come up")
            }
        }
        return servers
    }

    static var lean: Bool { ProcessInfo.processInfo.environment["SSHKIT_BENCH_FLEET_SERVERS"] != "fixture" }

    func stop() {
        for pid in pids { kill(pid, SIGTERM) }
        for pid in pids {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
    }
}

func freePort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = 0
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0
        }
    }
    guard ok else { throw BenchError("no free port") }
    return Int(UInt16(bigEndian: addr.sin_port))
}

func canConnect(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = UInt16(port).bigEndian
    return withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}

/// `sshkit-bench fleet-worker run|put PORTS USER KEY FPS PARALLEL HANDSHAKES [FILE]`: one
/// SSHFleet run, as a process of its own; exit 0 when every host succeeded.
func fleetWorker(_ args: [String]) async -> Int32 {
    guard args.count >= 7 else { return 64 }
    let (mode, user, key) = (args[0], args[2], args[3])
    let ports = args[1].split(separator: ",").compactMap { Int($0) }
    let fingerprints = args[4].split(separator: ",").map(String.init)
    guard let parallel = Int(args[5]), let handshakes = Int(args[6]) else { return 64 }
    let hosts = ports.map { port in
        SSHFleetHost(SSHConfiguration(host: "127.0.0.1", port: port, user: user, authentication: .privateKey(path: key),
                                      hostKeyPolicy: .pinned(fingerprints)), name: "\(port)")
    }
    guard let fleet = try? SSHFleet(hosts: hosts, options: SSHFleetOptions(
        maxConcurrentOperations: parallel, maxConcurrentHandshakes: handshakes, connectRetries: 0)) else { return 64 }
    var failed = 0
    if mode == "run" {
        for await r in fleet.execute("uname -a") {
            if (try? r.outcome.get().exitStatus) != .exited(0) { failed += 1 }
        }
    } else {
        let file = args[7]
        for await r in fleet.run({ host, conn throws(SSHError) -> UInt64 in
            let sftp = try await conn.openSFTP()
            defer { sftp.close() }
            return try await sftp.upload(file, to: SFTPPath("/tmp/fleetbench-sshkit-\(host.name)"))
        }) {
            if (try? r.outcome.get()) == nil { failed += 1 }
        }
    }
    await fleet.close()
    return failed == 0 ? 0 : 1
}

/// One measured run: wall time, peak RSS in MiB of the largest process, the client's CPU
/// (user + system of the process and what it waited for), and how busy the whole machine
/// was meanwhile (servers included; 1 is every core busy all the time).
struct TimedRun {
    var seconds: Double
    var mib: Double
    var cpu: Double
    var machineBusy: Double
}

/// The machine's busy and total CPU time so far (/proc/stat's first line, in ticks).
func machineTicks() -> (busy: Double, total: Double) {
    guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
          let line = text.split(separator: "\n").first else { return (0, 0) }
    let v = line.split(separator: " ").dropFirst().prefix(8).compactMap { Double($0) }
    guard v.count == 8 else { return (0, 0) }
    let total = v.reduce(0, +)
    return (total - v[3] - v[4], total) // idle and iowait are not busy
}

/// Runs `argv` under /usr/bin/time; nil on failure.
func timed(_ argv: [String], dir: String) -> TimedRun? {
    let out = dir + "/time.txt"
    let before = machineTicks()
    let status = spawnAndWait(["/usr/bin/time", "-f", "%e %M %U %S", "-o", out] + argv, quiet: true)
    let after = machineTicks()
    guard status == 0, let text = try? String(contentsOfFile: out, encoding: .utf8) else { return nil }
    let parts = text.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Double($0) }
    guard parts.count >= 4 else { return nil }
    let busy = after.total > before.total ? (after.busy - before.busy) / (after.total - before.total) : 0
    return TimedRun(seconds: parts[0], mib: parts[1] / 1024, cpu: parts[2] + parts[3], machineBusy: busy)
}

func pythonScripts(_ dir: String) throws -> (pssh: String, asyncssh: String) {
    let pssh = dir + "/pssh_fleet.py"
    try """
    import sys
    from pssh.clients import ParallelSSHClient
    from pssh.config import HostConfig
    mode, ports, user, key, pool = sys.argv[1], sys.argv[2].split(','), sys.argv[3], sys.argv[4], int(sys.argv[5])
    hosts = ['127.0.0.1'] * len(ports)
    configs = [HostConfig(port=int(p), user=user, private_key=key) for p in ports]
    client = ParallelSSHClient(hosts, host_config=configs, pool_size=pool, num_retries=1, timeout=30)
    if mode == 'run':
        output = client.run_command('uname -a')
        client.join(output)
        bad = [o for o in output if o.exit_code != 0 or o.exception is not None]
    else:
        greenlets = client.copy_file(sys.argv[6], '/tmp/fleetbench-pssh')
        import gevent
        gevent.joinall(greenlets, raise_error=True)
        bad = []
    sys.exit(1 if bad else 0)
    """.write(toFile: pssh, atomically: true, encoding: .utf8)
    let asyncsshScript = dir + "/asyncssh_fleet.py"
    try """
    import asyncio, sys
    import asyncssh
    mode, ports, user, key, limit = sys.argv[1], sys.argv[2].split(','), sys.argv[3], sys.argv[4], int(sys.argv[5])
    async def one(port, gate):
        async with gate:
            async with asyncssh.connect('127.0.0.1', port=int(port), username=user, client_keys=[key],
                                        known_hosts=None) as conn:
                if mode == 'run':
                    r = await conn.run('uname -a')
                    return r.exit_status == 0
                async with conn.start_sftp_client() as sftp:
                    await sftp.put(sys.argv[6], f'/tmp/fleetbench-asyncssh-{port}')
                return True
    async def main():
        gate = asyncio.Semaphore(limit)
        results = await asyncio.gather(*(one(p, gate) for p in ports), return_exceptions=True)
        return all(r is True for r in results)
    sys.exit(0 if asyncio.run(main()) else 1)
    """.write(toFile: asyncsshScript, atomically: true, encoding: .utf8)
    return (pssh, asyncsshScript)
}

struct FleetRow {
    let workload: String
    var best: [String: (setting: Int, runs: [TimedRun])] = [:]
}

func benchFleet(_ f: Fixture, hosts count: Int, rounds: Int) async throws -> [FleetRow] {
    let servers = try FleetServers.start(f, count: count)
    defer { servers.stop() }
    let dir = servers.dir
    let ports = servers.ports.map(String.init).joined(separator: ",")
    let file = dir + "/upload-1mib"
    guard FileManager.default.createFile(atPath: file, contents: Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })) else {
        throw BenchError("cannot write \(file)")
    }
    let (pssh, asyncsshScript) = try pythonScripts(dir)
    // the python3 on PATH, with parallel-ssh and asyncssh installed (pip install parallel-ssh asyncssh)
    let python = ProcessInfo.processInfo.environment["SSHKIT_BENCH_PYTHON"] ?? "python3"
    let me = benchBinary
    let fps = f.fingerprints.joined(separator: ",")
    let xargsList = dir + "/ports.txt"
    try (servers.ports.map(String.init).joined(separator: "\n") + "\n").write(toFile: xargsList, atomically: true, encoding: .utf8)
    let sshOptions = "-F /dev/null -i \(f.key) -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no "
        + "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"

    func argv(_ impl: String, _ mode: String, _ setting: Int) -> [String] {
        switch impl {
        case "SSHKit":
            return [me, "fleet-worker", mode, ports, f.user, f.key, fps, "\(count)", "\(setting)", file]
        case "parallel-ssh":
            return ["/usr/bin/env", python, pssh, mode, ports, f.user, f.key, "\(setting)", file]
        case "asyncssh":
            return ["/usr/bin/env", python, asyncsshScript, mode, ports, f.user, f.key, "\(setting)", file]
        default: // xargs -P
            let one = mode == "run"
                ? "ssh \(sshOptions) -p {} \(f.user)@127.0.0.1 'uname -a' >/dev/null"
                : "scp -q \(sshOptions) -P {} \(file) \(f.user)@127.0.0.1:/tmp/fleetbench-xargs-{}"
            return ["/usr/bin/xargs", "-a", xargsList, "-P", "\(setting)", "-I{}", "/bin/sh", "-c", one]
        }
    }
    // the settings tried: handshakes at once for SSHKit, concurrency for the others
    let settings: [String: [Int]] = [
        "SSHKit": [8, 16, 32], "parallel-ssh": [25, 50, 100], "asyncssh": [25, 50, 100], "xargs -P ssh": [8, 16, 32],
    ]
    let impls = ["SSHKit", "parallel-ssh", "asyncssh", "xargs -P ssh"]
    var rows: [FleetRow] = []
    for (mode, name) in [("run", "`uname -a` on \(count) hosts"), ("put", "1 MiB upload to \(count) hosts")] {
        var row = FleetRow(workload: name)
        for impl in impls {
            // a first pass picks the best setting, then the rounds run at it
            var bestSetting = settings[impl]![0], bestTime = Double.infinity
            for s in settings[impl]! {
                guard let t = timed(argv(impl, mode, s), dir: dir)?.seconds else { continue }
                if t < bestTime { (bestSetting, bestTime) = (s, t) }
            }
            var runs: [TimedRun] = []
            for _ in 0..<rounds {
                guard let run = timed(argv(impl, mode, bestSetting), dir: dir) else {
                    out("\(impl) \(mode) failed at setting \(bestSetting)")
                    continue
                }
                runs.append(run)
            }
            row.best[impl] = (bestSetting, runs)
            out("fleet \(mode) \(impl): done")
        }
        rows.append(row)
    }
    return rows
}

func reportFleet(_ rows: [FleetRow]) {
    out()
    out("| workload | implementation | best setting | wall time median (s) | client CPU (s) | machine busy | peak RSS, largest process (MiB) | SSHKit is faster by |")
    out("|---|---|---|---|---|---|---|---|")
    for row in rows {
        let ours = median(row.best["SSHKit"]?.runs.map(\.seconds) ?? [])
        for impl in ["SSHKit", "parallel-ssh", "asyncssh", "xargs -P ssh"] {
            guard let b = row.best[impl] else { continue }
            let t = median(b.runs.map(\.seconds))
            let what = impl == "SSHKit" ? "handshakes \(b.setting)" : impl == "xargs -P ssh" ? "-P \(b.setting)" : "concurrency \(b.setting)"
            out("| \(row.workload) | \(impl) | \(what) | \(String(format: "%.2f", t)) | "
                + "\(String(format: "%.2f", median(b.runs.map(\.cpu)))) | \(String(format: "%.0f%%", 100 * median(b.runs.map(\.machineBusy)))) | "
                + "\(String(format: "%.1f", median(b.runs.map(\.mib)))) | "
                + (impl == "SSHKit" ? "—" : String(format: "%.1fx", t / ours)) + " |")
        }
    }
    out("samples per implementation: \(rows.first?.best["SSHKit"]?.runs.count ?? 0) (after a pass over the settings); "
        + (FleetServers.lean ? "lean servers (no PAM, sshd -r)" : "the fixture's server configuration (PAM, re-exec)")
        + "; machine busy: all cores, servers included, during the run")
}
