// SFTP workloads: 1 GiB download and upload on tmpfs through SSHKit, OpenSSH `sftp` and
// `scp` (which speaks SFTP since OpenSSH 9.0), alternating; every result sha256-checked.
import Foundation
import SSHKit

let sftpImplementations = ["SSHKit", "sftp", "scp"]

/// sha256 of a file, by `sha256sum`.
func sha256(_ path: String) -> String {
    var fds: [Int32] = [0, 0]
    pipe(&fds)
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
    posix_spawn_file_actions_addclose(&actions, fds[0])
    guard let pid = spawn(["/usr/bin/sha256sum", path], &actions) else { return "" }
    close(fds[1])
    var out = [UInt8]()
    var buf = [UInt8](repeating: 0, count: 256)
    while true {
        let n = read(fds[0], &buf, buf.count)
        if n <= 0 { break }
        out += buf[0..<n]
    }
    close(fds[0])
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    return String(decoding: out.prefix { $0 != 0x20 }, as: UTF8.self)
}

extension Fixture {
    /// `sftp -b batch` with the fixture's options.
    func sftpArgv(batch: String) -> [String] {
        ["/usr/bin/sftp", "-F", "/dev/null", "-P", "\(port)", "-i", key, "-c", cipher, "-o", "IdentitiesOnly=yes",
         "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
         "-o", "LogLevel=ERROR", "-q", "-b", batch, "\(user)@127.0.0.1"]
    }

    func scpArgv(_ from: String, _ to: String) -> [String] {
        ["/usr/bin/scp", "-F", "/dev/null", "-P", "\(port)", "-i", key, "-c", cipher, "-o", "IdentitiesOnly=yes",
         "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
         "-o", "LogLevel=ERROR", "-q", from, to]
    }
}

/// MB/s of a 1 GiB (or `mebibytes`) download and upload, per implementation.
func benchSFTPTransfers(_ f: Fixture, mebibytes: Int, rounds: Int) async throws -> [Row] {
    var down = Row(workload: "SFTP download \(mebibytes) MiB, tmpfs (MB/s)")
    var up = Row(workload: "SFTP upload \(mebibytes) MiB, tmpfs (MB/s)")
    let dir = "/dev/shm/sshkit-bench-sftp-\(getpid())"
    guard spawnAndWait(["/bin/sh", "-c", "mkdir -p \(dir) && head -c \(mebibytes)M /dev/urandom > \(dir)/src && chown -R \(f.user) \(dir) && chmod 755 \(dir)"]) == 0
    else { throw BenchError("could not prepare \(dir)") }
    defer { _ = spawnAndWait(["/bin/rm", "-rf", dir]) }
    let expected = sha256(dir + "/src")
    let bytes = Double(mebibytes) * 1_048_576
    let conn = try await SSHClient.connect(f.sshkitCipherConfig)
    let sftp = try await conn.openSFTP()
    let batchDown = dir + "/batch-down", batchUp = dir + "/batch-up"
    try "get \(dir)/src \(dir)/dst-down\n".write(toFile: batchDown, atomically: true, encoding: .utf8)
    try "put \(dir)/src \(dir)/dst-up\n".write(toFile: batchUp, atomically: true, encoding: .utf8)

    func check(_ path: String, _ what: String) throws {
        guard sha256(path) == expected else { throw BenchError("\(what): checksum mismatch") }
        _ = unlink(path)
    }
    for i in 0..<rounds {
        for impl in rotated(sftpImplementations, by: i) {
            // download: the remote side reads src, the local side writes dst-down
            var t0 = now()
            switch impl {
            case "SSHKit": try await sftp.download(SFTPPath(dir + "/src"), to: dir + "/dst-down")
            case "sftp": guard spawnAndWait(f.sftpArgv(batch: batchDown)) == 0 else { throw BenchError("sftp get") }
            default: guard spawnAndWait(f.scpArgv("\(f.user)@127.0.0.1:\(dir)/src", dir + "/dst-down")) == 0 else { throw BenchError("scp get") }
            }
            down.samples[impl, default: []].append(bytes / 1e6 / ((now() - t0) / 1000))
            try check(dir + "/dst-down", "\(impl) download")
            // upload
            t0 = now()
            switch impl {
            case "SSHKit": try await sftp.upload(dir + "/src", to: SFTPPath(dir + "/dst-up"))
            case "sftp": guard spawnAndWait(f.sftpArgv(batch: batchUp)) == 0 else { throw BenchError("sftp put") }
            default: guard spawnAndWait(f.scpArgv(dir + "/src", "\(f.user)@127.0.0.1:\(dir)/dst-up")) == 0 else { throw BenchError("scp put") }
            }
            up.samples[impl, default: []].append(bytes / 1e6 / ((now() - t0) / 1000))
            try check(dir + "/dst-up", "\(impl) upload")
        }
    }
    sftp.close()
    await conn.close()
    return [down, up]
}

/// The SFTP table: SSHKit against `sftp` and `scp` (a dash where scp has no equivalent).
func reportSFTP(_ rows: [Row]) {
    func f(_ x: Double) -> String { String(format: x < 10 ? "%.2f" : "%.1f", x) }
    out()
    out("| workload | SSHKit median | sftp median | scp median | SSHKit / sftp | SSHKit / scp |")
    out("|---|---|---|---|---|---|")
    for r in rows {
        let m = sftpImplementations.map { median(r.samples[$0] ?? []) }
        func cell(_ x: Double) -> String { x.isNaN ? "—" : f(x) }
        func ratio(_ x: Double) -> String { x.isNaN ? "—" : String(format: "%.2fx", x) }
        out("| \(r.workload) | \(f(m[0])) (p90 \(f(percentile(r.samples["SSHKit"] ?? [], 0.9)))) | \(cell(m[1])) | \(cell(m[2])) | \(ratio(m[0] / m[1])) | \(ratio(m[0] / m[2])) |")
    }
    out("samples per implementation: \(rows.first.map { r in sftpImplementations.map { "\($0) \(r.samples[$0]?.count ?? 0)" }.joined(separator: ", ") } ?? "")")
}

/// 10,000 stats of small files and a 1,000-entry listing: SSHKit (one request at a time,
/// like the CLI) against OpenSSH `sftp -b` running the same requests in one session.
func benchSFTPMetadata(_ f: Fixture, rounds: Int) async throws -> [Row] {
    var stats = Row(workload: "stat of 10,000 small files, one at a time (ms per stat)")
    var listing = Row(workload: "list a 1,000-entry directory with attributes (ms)")
    let dir = "/dev/shm/sshkit-bench-meta-\(getpid())"
    guard spawnAndWait(["/bin/sh", "-c", "mkdir -p \(dir)/many \(dir)/list && cd \(dir)/many && seq 1 10000 | xargs touch && cd \(dir)/list && seq 1 1000 | xargs touch && chown -R \(f.user) \(dir) && chmod -R 755 \(dir)"]) == 0
    else { throw BenchError("could not prepare \(dir)") }
    defer { _ = spawnAndWait(["/bin/rm", "-rf", dir]) }
    let statBatch = dir + "/batch-stat", listBatch = dir + "/batch-list"
    try (1...10000).map { "ls -ln \(dir)/many/\($0)" }.joined(separator: "\n").write(toFile: statBatch, atomically: true, encoding: .utf8)
    try "ls -ln \(dir)/list\n".write(toFile: listBatch, atomically: true, encoding: .utf8)
    // the cost of starting `sftp` and its session, subtracted from its figures
    let empty = dir + "/batch-empty"
    try "\n".write(toFile: empty, atomically: true, encoding: .utf8)
    let conn = try await SSHClient.connect(f.sshkitCipherConfig)
    let sftp = try await conn.openSFTP()
    for i in 0..<rounds {
        for impl in rotated(["SSHKit", "sftp"], by: i) {
            if impl == "SSHKit" {
                var t0 = now()
                for n in 1...10000 { _ = try await sftp.attributes(at: SFTPPath("\(dir)/many/\(n)")) }
                stats.samples["SSHKit", default: []].append((now() - t0) / 10000)
                t0 = now()
                guard try await sftp.listDirectory(at: SFTPPath(dir + "/list")).count == 1000 else { throw BenchError("listing") }
                listing.samples["SSHKit", default: []].append(now() - t0)
            } else {
                var t0 = now()
                guard spawnAndWait(f.sftpArgv(batch: empty)) == 0 else { throw BenchError("sftp empty batch") }
                let startup = now() - t0
                t0 = now()
                guard spawnAndWait(f.sftpArgv(batch: statBatch)) == 0 else { throw BenchError("sftp stats") }
                stats.samples["sftp", default: []].append((now() - t0 - startup) / 10000)
                t0 = now()
                guard spawnAndWait(f.sftpArgv(batch: listBatch)) == 0 else { throw BenchError("sftp ls") }
                listing.samples["sftp", default: []].append(now() - t0 - startup)
            }
        }
    }
    sftp.close()
    await conn.close()
    return [stats, listing]
}

/// How long a cancelled download takes to return: a 1 GiB download (64 requests in flight)
/// is cancelled once 32 MiB arrived, `rounds` times, alone on its connection and beside a
/// full-speed `cat /dev/zero` on the same connection. SSHKit only (`sftp` has no cancel
/// that returns to a caller).
func benchSFTPCancel(_ f: Fixture, rounds: Int) async throws {
    let dir = "/dev/shm/sshkit-bench-cancel-\(getpid())"
    guard spawnAndWait(["/bin/sh", "-c", "mkdir -p \(dir) && head -c 1024M /dev/zero > \(dir)/src && chown -R \(f.user) \(dir) && chmod 755 \(dir)"]) == 0
    else { throw BenchError("could not prepare \(dir)") }
    defer { _ = spawnAndWait(["/bin/rm", "-rf", dir]) }
    let conn = try await SSHClient.connect(f.sshkitCipherConfig)
    let sftp = try await conn.openSFTP()
    func cancelLatencies() async throws -> [Double] {
        var samples: [Double] = []
        for i in 0..<rounds {
            let arrived = Flag()
            let task = Task {
                try await sftp.download(SFTPPath(dir + "/src"), to: dir + "/dst-\(i)") { p in
                    if p.bytesTransferred >= 32 << 20 { arrived.set() }
                }
            }
            while !arrived.isSet { try await Task.sleep(for: .milliseconds(1)) }
            let t0 = now()
            task.cancel()
            _ = await task.result
            samples.append(now() - t0)
        }
        return samples
    }
    let alone = try await cancelLatencies()
    let bulk = try await conn.startCommand("cat /dev/zero")
    let drain = Task { do { for try await _ in bulk.stdout {} } catch {} }
    try await Task.sleep(for: .milliseconds(300))
    let busy = try await cancelLatencies()
    bulk.cancel()
    _ = await drain.value
    sftp.close()
    await conn.close()
    func f3(_ x: Double) -> String { String(format: "%.2f", x) }
    out()
    out("| cancel a 1 GiB download after 32 MiB, \(rounds) times (ms to return) | p50 | p99 | max |")
    out("|---|---|---|---|")
    out("| SSHKit, alone on its connection | \(f3(median(alone))) | \(f3(percentile(alone, 0.99))) | \(f3(alone.max() ?? .nan)) |")
    out("| SSHKit, beside `cat /dev/zero` on the same connection | \(f3(median(busy))) | \(f3(percentile(busy, 0.99))) | \(f3(busy.max() ?? .nan)) |")
}

/// A flag set from a progress callback (any thread) and polled by the benchmark.
final class Flag: @unchecked Sendable {
    // safe because: every access holds `lock`
    private let lock = NSLock()
    private var value = false
    func set() { lock.lock(); value = true; lock.unlock() }
    var isSet: Bool { lock.lock(); defer { lock.unlock() }; return value }
}
