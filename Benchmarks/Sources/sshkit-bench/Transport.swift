// Server-transport workloads: the same calls through the SSHKit transport (one shared
// connection: exec channels and SFTP) and the OpenSSH transport (an `ssh` process per
// call over a ControlMaster), alternating, in one run against the same sshd.
import Foundation
import SSHKit
import ServerTransport

let transportImplementations = ["SSHKit transport", "OpenSSH ControlMaster"]

func benchTransports(_ f: Fixture, rounds: Int) async throws -> [Row] {
    let cm = f.dir + "/cm-transport"
    mkdir(cm, 0o700)
    // the benchmark's sshd has MaxSessions 256: both transports are told so
    let sshkit = SSHTransport(configuration: f.sshkitConfig, cache: SnapshotCache(directory: f.dir + "/snapshots"),
                              maxSessions: 256)
    let openssh = try OpenSSHTransport(destination: "127.0.0.1", options: .init(
        user: f.user, port: f.port, identityFile: f.key, knownHostsFile: cm + "/known_hosts", configFile: "/dev/null",
        controlDirectory: cm, maxSessions: 256))
    let transports: [(String, any ServerTransport)] = [(transportImplementations[0], sshkit),
                                                       (transportImplementations[1], openssh)]
    // the working set: 100 small files and one of 1 MiB, made once; both connect first
    let dir = "~/bench-transport"
    try await sshkit.createDirectory(dir)
    for i in 0..<100 { try await sshkit.writeTextFile("\(dir)/f\(i)", "file \(i)\n") }
    let mib = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    try await sshkit.writeFile("\(dir)/one-mib", contents: mib)
    _ = try await openssh.runProcess("/bin/true").check()

    var exec = Row(workload: "runProcess(\"/bin/true\") (ms)")
    var sweep = Row(workload: "stat of 100 files, one after another (ms)")
    var parallelSweep = Row(workload: "stat of 100 files, all at once (ms)")
    var read = Row(workload: "readFile of 1 MiB (ms)")
    for round in 0..<rounds {
        for (name, t) in round % 2 == 0 ? transports : transports.reversed() {
            for _ in 0..<20 {
                let s = now()
                _ = try await t.runProcess("/bin/true").check()
                exec.samples[name, default: []].append(now() - s)
            }
            let s1 = now()
            for i in 0..<100 { _ = try await t.stat("\(dir)/f\(i)") }
            sweep.samples[name, default: []].append(now() - s1)
            let s2 = now()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<100 { group.addTask { _ = try await t.stat("\(dir)/f\(i)") } }
                try await group.waitForAll()
            }
            parallelSweep.samples[name, default: []].append(now() - s2)
            for _ in 0..<5 {
                let s = now()
                let bytes = try await t.readFile("\(dir)/one-mib")
                read.samples[name, default: []].append(now() - s)
                guard bytes == mib else { throw BenchError("\(name): read the wrong bytes") }
            }
        }
        out("transport round \(round + 1)/\(rounds): done")
    }
    _ = try await sshkit.runProcess("/bin/rm", "-rf", "--", "bench-transport")
    await sshkit.close()
    await openssh.close()
    return [exec, sweep, parallelSweep, read]
}

func reportTransports(_ rows: [Row]) {
    func f(_ x: Double) -> String { String(format: x < 10 ? "%.2f" : "%.1f", x) }
    out()
    out("| workload | SSHKit transport median | OpenSSH ControlMaster median | speed-up |")
    out("|---|---|---|---|")
    for r in rows {
        let m = transportImplementations.map { median(r.samples[$0] ?? []) }
        let p90 = percentile(r.samples[transportImplementations[0]] ?? [], 0.9)
        out("| \(r.workload) | \(f(m[0])) (p90 \(f(p90))) | \(f(m[1])) | \(String(format: "%.1fx", m[1] / m[0])) |")
    }
    out("samples per implementation: " + rows.map { r in "\(r.samples[transportImplementations[0]]?.count ?? 0)" }
        .joined(separator: ", "))
}
