// A task's branch brought home: `AgentOrchestrator.fetchTask` (the local git's ssh relayed
// to `git upload-pack` over the host's shared connection) against `git fetch` over OpenSSH,
// with a new connection each time (as a user types it) and through a ControlMaster, of the
// same branch into a fresh clone each time, implementations alternating.
import AgentSessions
import Foundation
import SSHKit
import ServerTransport

private func run(_ t: SSHTransport, _ script: String, _ args: [String] = []) async throws -> String {
    try await t.runProcess("/bin/sh", arguments: ["-c", script, "sh"] + args, stdin: [], environment: [:], timeout: .seconds(300))
        .check("bench fetch").stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Runs `script` with /bin/sh here and returns its output, trimmed; a failure is a `BenchError`.
func local(_ script: String) throws -> String {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/bin/sh")
    p.arguments = ["-c", script]
    let out = Pipe()
    p.standardOutput = out
    p.standardError = FileHandle.nullDevice
    try p.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    guard p.terminationStatus == 0 else { throw BenchError("\(script) failed (\(p.terminationStatus))") }
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}

func benchFetch(_ f: Fixture, rounds: Int) async throws {
    out("fetch: preparing a repository with a branch of 50 commits")
    let setup = SSHTransport(configuration: f.sshkitConfig, serverID: ServerID("bench-fetch-setup"))
    // the base: 200 files of 20 KB; the branch: 50 commits, each changing 4 files and adding one
    let repo = try await run(setup, """
        set -e
        r="$HOME/bench-fetch/repo"; rm -rf "$HOME/bench-fetch"; mkdir -p "$r" && cd "$r"
        git init -q -b main . && git config user.email b@b && git config user.name b
        i=0; while [ $i -lt 200 ]; do head -c 15000 /dev/urandom | base64 > "f$i.txt"; i=$((i + 1)); done
        git add -A && git commit -q -m base
        git checkout -q -b emdash/bench
        c=0; while [ $c -lt 50 ]; do
            for k in 0 1 2 3; do head -c 3000 /dev/urandom | base64 >> "f$(( (c * 4 + k) % 200 )).txt"; done
            head -c 6000 /dev/urandom | base64 > "new$c.txt"; git add -A; git commit -q -m "step $c"; c=$((c + 1))
        done
        git checkout -q main
        git bundle create -q "$HOME/bench-fetch/base.bundle" main && chmod 755 "$HOME" "$HOME/bench-fetch" 2>/dev/null; chmod 644 "$HOME/bench-fetch/base.bundle"
        pwd
        """)
    let tip = try await run(setup, "git -C \"$1\" rev-parse emdash/bench", [repo])
    let base = try await run(setup, "git -C \"$1\" rev-parse main", [repo])
    let bundle = repo.replacingOccurrences(of: "/repo", with: "/base.bundle")
    let work = "/tmp/sshkit-bench-fetch-\(getpid())"
    _ = try local("rm -rf '\(work)' && mkdir -p '\(work)' && cp '\(bundle)' '\(work)/base.bundle'")
    defer { _ = try? local("rm -rf '\(work)'") }

    let store = InMemoryAgentStore()
    let host = HostRecord(name: "bench", address: "127.0.0.1", port: f.port, user: f.user, authentication: .keyFiles([f.key]),
                          tmuxSocket: "bench-fetch")
    try await store.save(host)
    let project = ProjectRecord(hostID: host.id, name: "repo", path: repo)
    try await store.save(project)
    let task = TaskRecord(projectID: project.id, title: "bench", worktree: Worktree(
        name: "bench", projectPath: repo, path: repo + "/.emdash/worktrees/bench", branch: "emdash/bench", baseRef: "main",
        baseCommit: base))
    try await store.save(task)
    let engine = AgentOrchestrator(store: store, searchPath: [], statusHooks: false) { record in
        SSHTransport(configuration: f.sshkitConfig, serverID: record.serverID)
    }
    let ctl = try f.startControlMaster("fetch-ctl")
    defer { f.stopControlMaster(ctl) }
    let ssh = f.sshArgs([]).dropLast().map { "'\($0)'" }.joined(separator: " ")
    let url = "ssh://\(f.user)@127.0.0.1:\(f.port)\(repo)"
    let impls = ["agent-sessions fetch", "git fetch over ssh", "git fetch over ssh, ControlMaster"]
    var samples: [String: [Double]] = [:]
    var packKiB = 0
    // a first fetch of each, not timed: the engine's connection made, the host's files in its page cache
    for round in -1..<rounds {
        for impl in rotated(impls, by: max(0, round)) {
            let dir = "\(work)/\(UUID().uuidString)"
            _ = try local("git clone -q '\(work)/base.bundle' '\(dir)'")
            let packBefore = Int(try local("git -C '\(dir)' count-objects -v | sed -n 's/^size-pack: //p'")) ?? 0
            let start = now()
            switch impl {
            case impls[0]:
                let fetched = try await engine.task(task.id).fetch(into: dir)
                guard fetched.commit == tip else { throw BenchError("agent-sessions fetched \(fetched.commit), not \(tip)") }
            default:
                let extra = impl == impls[2] ? " -o ControlPath='\(ctl)'" : " -o ControlPath=none"
                let status = spawnAndWait(["/usr/bin/env", "GIT_SSH_COMMAND=\(ssh)\(extra)", "git", "-C", dir, "fetch", "-q",
                                           "--no-tags", url, "refs/heads/emdash/bench:refs/heads/emdash/bench"])
                guard status == 0 else { throw BenchError("\(impl) failed (\(status))") }
            }
            let ms = now() - start
            guard try local("git -C '\(dir)' rev-parse emdash/bench") == tip else { throw BenchError("\(impl) fetched the wrong commit") }
            if round == -1 && impl == impls[0] {
                // what crossed: the packs of the clone less the base's
                packKiB = (Int(try local("git -C '\(dir)' count-objects -v | sed -n 's/^size-pack: //p'")) ?? 0) - packBefore
            }
            _ = try local("rm -rf '\(dir)'")
            if round >= 0 { samples[impl, default: []].append(ms) }
        }
    }
    await engine.close()
    _ = try? await run(setup, "rm -rf \"$HOME/bench-fetch\"")
    await setup.close()

    func fmt(_ x: Double) -> String { String(format: "%.1f", x) }
    let mine = median(samples[impls[0]] ?? [])
    out()
    out("| a task's branch (50 commits) into a fresh clone | median (ms) | p90 | ratio to agent-sessions |")
    out("|---|---|---|---|")
    for impl in impls {
        let xs = samples[impl] ?? []
        out("| \(impl) | \(fmt(median(xs))) | \(fmt(percentile(xs, 0.9))) | \(String(format: "%.2fx", median(xs) / mine)) |")
    }
    out("\(rounds) rounds, implementations alternating; the clone's packs grew by \(packKiB) KiB per fetch")
    out("fetch: done")
}
