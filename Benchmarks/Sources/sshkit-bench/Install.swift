// The installed tool as a user meets it: how fast `agent-sessions status` with no tasks starts
// and ends, against `git status` in an empty repository (both cold: the page cache dropped
// before each run, and warm), and how big the Debian package is. The binaries are the
// package's own (scripts/package-deb.sh), unpacked with dpkg-deb.
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One run of `argv` in `directory` to its end, its output to /dev/null: milliseconds from
/// the spawn to the exit. (The benchmark changes its own directory: Debian 12's Glibc module
/// does not offer posix_spawn_file_actions_addchdir_np.)
private func timedRun(_ argv: [String], directory: String, environment: [String]) throws -> Double {
    let here = FileManager.default.currentDirectoryPath
    guard chdir(directory) == 0 else { throw BenchError("cd \(directory) failed") }
    defer { _ = chdir(here) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    let cArgs = argv.map { strdup($0) } + [nil]
    let cEnv = environment.map { strdup($0) } + [nil]
    defer { for p in cArgs + cEnv { free(p) } }
    var pid: pid_t = 0
    let started = ContinuousClock.now
    let rc = posix_spawn(&pid, argv[0], &actions, nil, cArgs, cEnv)
    guard rc == 0 else { throw BenchError("posix_spawn \(argv[0]): \(String(cString: strerror(rc)))") }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    let elapsed = ContinuousClock.now - started
    guard status == 0 else { throw BenchError("\(argv.joined(separator: " ")) exited with \(status)") }
    return Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000
}

/// Empties the page cache (root only): the next run reads its binary and libraries from disk.
private func dropCaches() -> Bool {
    sync()
    guard let f = fopen("/proc/sys/vm/drop_caches", "w") else { return false }
    defer { fclose(f) }
    return fputs("3\n", f) >= 0 && fflush(f) == 0
}

func benchInstall(rounds: Int) throws {
    let deb: String
    if let given = ProcessInfo.processInfo.environment["SSHKIT_BENCH_DEB"] {
        deb = given
    } else {
        let dir = "\(root)/.build/deb"
        let found = ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".deb") }.sorted()
        guard let last = found.last else {
            throw BenchError("no package in \(dir): make it with `bash scripts/package-deb.sh` at the top first (or SSHKIT_BENCH_DEB=FILE)")
        }
        deb = dir + "/" + last
    }
    let work = "/tmp/sshkit-bench-install-\(getpid())"
    _ = try local("rm -rf '\(work)' && mkdir -p '\(work)/home' '\(work)/repo' && dpkg-deb -x '\(deb)' '\(work)/root' && git -C '\(work)/repo' init -q")
    defer { _ = try? local("rm -rf '\(work)'") }

    // the package's size, and each binary's
    let debBytes = (try FileManager.default.attributesOfItem(atPath: deb)[.size] as? NSNumber)?.doubleValue ?? .nan
    let installedKB = Double(try local("dpkg-deb -f '\(deb)' Installed-Size")) ?? .nan
    out("install: \(deb.split(separator: "/").last ?? "")")
    out(String(format: "  package %.1f MB, installed %.1f MB", debBytes / 1e6, installedKB * 1024 / 1e6))
    for line in try local("cd '\(work)/root/usr/bin' && ls -l | awk 'NR > 1 { print $5, $9 }'").split(separator: "\n") {
        let parts = line.split(separator: " ")
        if parts.count == 2, let bytes = Double(parts[0]) {
            out("    " + String(parts[1]).padding(toLength: 16, withPad: " ", startingAt: 0) + String(format: " %.1f MB", bytes / 1e6))
        }
    }

    let tool = "\(work)/root/usr/bin/agent-sessions"
    let store = "\(work)/home/store.sqlite"
    let env = ["HOME=\(work)/home", "PATH=/usr/bin:/bin", "LANG=C.UTF-8"]
    let status = [tool, "status", "--store", store]
    let git = ["/usr/bin/git", "status"]
    // the store made once, as an installed tool's second run finds it
    _ = try timedRun(status, directory: "\(work)/repo", environment: env)

    let canDrop = dropCaches()
    var coldTool: [Double] = [], coldGit: [Double] = [], warmTool: [Double] = [], warmGit: [Double] = []
    if canDrop {
        for r in 0..<rounds {
            // alternating which goes first
            for which in (r % 2 == 0 ? [0, 1] : [1, 0]) {
                _ = dropCaches()
                if which == 0 {
                    coldTool.append(try timedRun(status, directory: "\(work)/repo", environment: env))
                } else {
                    coldGit.append(try timedRun(git, directory: "\(work)/repo", environment: env))
                }
            }
        }
    }
    for r in 0..<(rounds * 3) {
        for which in (r % 2 == 0 ? [0, 1] : [1, 0]) {
            if which == 0 {
                warmTool.append(try timedRun(status, directory: "\(work)/repo", environment: env))
            } else {
                warmGit.append(try timedRun(git, directory: "\(work)/repo", environment: env))
            }
        }
    }
    func fmt(_ x: Double) -> String { String(format: "%.1f", x) }
    out("  `agent-sessions status` (no tasks) against `git status` (an empty repository), ms:")
    out("  |        | agent-sessions p50 | p90 | git status p50 | p90 | ratio (p50) |")
    out("  |---|---|---|---|---|---|")
    if canDrop {
        out("  | cold (\(rounds)) | \(fmt(median(coldTool))) | \(fmt(percentile(coldTool, 0.9))) | \(fmt(median(coldGit))) | \(fmt(percentile(coldGit, 0.9))) | \(String(format: "%.2fx", median(coldTool) / median(coldGit))) |")
    } else {
        out("  | cold | not measured: dropping the page cache needs root | | | | |")
    }
    out("  | warm (\(rounds * 3)) | \(fmt(median(warmTool))) | \(fmt(percentile(warmTool, 0.9))) | \(fmt(median(warmGit))) | \(fmt(percentile(warmGit, 0.9))) | \(String(format: "%.2fx", median(warmTool) / median(warmGit))) |")
}
