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

/// The SFTP table: SSHKit against `sftp` and `scp`.
func reportSFTP(_ rows: [Row]) {
    func f(_ x: Double) -> String { String(format: x < 10 ? "%.2f" : "%.1f", x) }
    out()
    out("| workload | SSHKit median | sftp median | scp median | SSHKit / sftp | SSHKit / scp |")
    out("|---|---|---|---|---|---|")
    for r in rows {
        let m = sftpImplementations.map { median(r.samples[$0] ?? []) }
        out("| \(r.workload) | \(f(m[0])) (p90 \(f(percentile(r.samples["SSHKit"] ?? [], 0.9)))) | \(f(m[1])) | \(f(m[2])) | \(String(format: "%.2fx", m[0] / m[1])) | \(String(format: "%.2fx", m[0] / m[2])) |")
    }
    out("samples per implementation: \(rows.first.map { r in sftpImplementations.map { "\($0) \(r.samples[$0]?.count ?? 0)" }.joined(separator: ", ") } ?? "")")
}
