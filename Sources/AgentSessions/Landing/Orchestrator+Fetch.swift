// A task's branch brought home to a local clone, and a local branch sent to a host, over the
// host's shared connection: the local git runs as it always does, with an "ssh" that is a
// relay through two named pipes to this process, which runs `git upload-pack` (or
// `receive-pack`) on the host over one exec channel. No second login, the same host key
// and credentials as every other call.
import Foundation
import SSHKit
import ServerTransport
import Synchronization

/// A task's branch fetched into a local repository.
public struct TaskFetch: Sendable, Hashable {
    /// The local repository (its top level).
    public var directory: String
    /// The local branch, named as the task's.
    public var branch: String
    /// Its commit now (the same as on the host).
    public var commit: String
}

extension AgentOrchestrator {
    /// Fetches the task's branch into the git repository at `directory` on this machine, as
    /// a branch of the same name (moved only forward, unless `force`), through the host's
    /// connection. The repository must be a clone of the same project: the same origin,
    /// or a root commit in common; another is refused unless `force`.
    /// - Throws: `notAGitRepository` (the directory), `notTheSameProject`, `gitFailed` (what the local git said: not a fast-forward, the branch
    ///   checked out there), `notFound`, `transport`.
    func fetchTask(taskID: TaskID, into directory: String, force: Bool = false) async throws(AgentError) -> TaskFetch {
        let (task, _, host) = try await context(task: taskID)
        let local = try await Self.localRepository(directory)
        let branch = task.worktree.branch
        try await onHost(host) { h in
            if !force { try await Self.requireSameProject(local: local, host: h, projectPath: task.worktree.projectPath) }
        }
        let refspec = (force ? "+" : "") + "refs/heads/\(branch):refs/heads/\(branch)"
        try await relayGit(host: host, projectPath: task.worktree.projectPath,
                           local: ["-C", local, "fetch", "--no-tags", "--no-write-fetch-head", "sshkit:/project", refspec],
                           what: "fetching \(branch)")
        let commit = try await Self.localGit(["-C", local, "rev-parse", "refs/heads/" + branch], what: "reading the fetched branch")
        return TaskFetch(directory: local, branch: branch, commit: commit)
    }

    /// Sends the local `branch` of the repository at `directory` to the project's
    /// repository on its host, as a branch of the same name (moved only forward, unless
    /// `force`), so a task can start from it. Same checks as `fetchTask`.
    /// - Returns: the branch's commit.
    func sendLocalBranch(_ branch: String, from directory: String, toProject projectID: ProjectID, force: Bool = false)
        async throws(AgentError) -> String
    {
        guard !branch.isEmpty, !branch.hasPrefix("-"), !branch.contains(":"), !branch.contains("..") else {
            throw AgentError(.invalidArgument, "'\(branch)' is not a branch name")
        }
        let project = try await records.project(projectID)
        let host = try await records.host(project.hostID)
        let local = try await Self.localRepository(directory)
        let commit = try await Self.localGit(["-C", local, "rev-parse", "--verify", "--quiet", "refs/heads/\(branch)^{commit}"],
                                             what: "reading the local branch \(branch)", missing: "no local branch \(branch) in \(local)")
        let path = try await onHost(host) { h in
            let path = try await h.worktrees.checkout(project.path)
            if !force { try await Self.requireSameProject(local: local, host: h, projectPath: path) }
            return path
        }
        let refspec = (force ? "+" : "") + "refs/heads/\(branch):refs/heads/\(branch)"
        try await relayGit(host: host, projectPath: path, local: ["-C", local, "push", "--no-verify", "sshkit:/project", refspec],
                           what: "sending \(branch)")
        return commit
    }

    /// Runs the local git with an "ssh" that relays to `git upload-pack` or `git
    /// receive-pack` of `projectPath` on the host.
    func relayGit(host record: HostRecord, projectPath: String, local arguments: [String], what: String) async throws(AgentError) {
        let local = LocalTransport()
        let dir: String
        do {
            var template = Array((NSTemporaryDirectory() + "/sshkit-git-XXXXXX").utf8CString)
            guard let made = mkdtemp(&template) else { throw AgentError(.storage, "cannot make a temporary directory") }
            dir = String(cString: made)
        }
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let toUs = dir + "/in", toGit = dir + "/out"
        guard mkfifo(toUs, 0o600) == 0, mkfifo(toGit, 0o600) == 0 else {
            throw AgentError(.storage, "cannot make the pipes for git: \(String(cString: strerror(errno)))")
        }
        // the relay git runs as its ssh: the command (upload or receive) and the protocol
        // version first, then git's bytes to us; ours to git back
        let relay = #"sh -c 'exec 3<&0; { printf "%s\n%s\n" "$3" "$GIT_PROTOCOL"; exec cat <&3 3<&-; } >"$0" & exec 3<&-; exec cat <"$1"'"#
            + " '\(toUs)' '\(toGit)'"
        let fromGit: TransportProcess, intoGit: TransportProcess, git: TransportProcess
        do {
            fromGit = try await local.startProcess("/bin/cat", arguments: [toUs], environment: [:])
            intoGit = try await local.startProcess("/bin/sh", arguments: ["-c", "exec cat >\"$0\"", toGit], environment: [:])
            git = try await local.startProcess("git", arguments: arguments, environment: [
                "GIT_SSH_COMMAND": relay, "GIT_SSH_VARIANT": "simple", "GIT_TERMINAL_PROMPT": "0",
            ])
        } catch {
            throw AgentError(.gitFailed, "cannot run git here: \(error.message)")
        }
        // the remote git's complaints come back as the pumping's value
        let pumping = Task { [self] () async throws -> String in
            var lines: [String] = []
            var buffered: [UInt8] = []
            var stream = fromGit.stdout.makeAsyncIterator()
            while lines.count < 2, let chunk = await stream.next() {
                buffered += chunk
                while lines.count < 2, let nl = buffered.firstIndex(of: UInt8(ascii: "\n")) {
                    lines.append(String(decoding: buffered[..<nl], as: UTF8.self))
                    buffered.removeSubrange(...nl)
                }
            }
            guard lines.count == 2 else { return "" } // git ended before it asked
            let service = lines[0].hasPrefix("git-receive-pack") ? "receive-pack" : "upload-pack"
            let remote: TransportProcess
            do {
                remote = try await onHost(record) { h in
                    try await h.transport.startProcess("/bin/sh", arguments: [
                        "-c", #"[ -n "$1" ] && export GIT_PROTOCOL="$1"; exec git "$2" "$3""#, "sh", lines[1], service, projectPath,
                    ], environment: [:])
                }
            } catch {
                // git waits on its "ssh" for an answer that will not come: end its input
                intoGit.input.finish()
                throw error
            }
            defer { remote.cancel() }
            let errors = Task { [remote] in
                var text = ""
                for await chunk in remote.stderr { text += String(decoding: chunk, as: UTF8.self) }
                return text
            }
            let rest = buffered
            let up = Task { [remote, fromGit] in
                do {
                    if !rest.isEmpty { try await remote.input.write(rest) }
                    for await chunk in fromGit.stdout { try await remote.input.write(chunk) }
                } catch {}
                remote.input.finish()
            }
            do {
                for await chunk in remote.stdout { try await intoGit.input.write(chunk) }
            } catch {}
            intoGit.input.finish()
            _ = await up.value
            return await errors.value
        }
        let status: SSHExitStatus
        let gitErrors = Task {
            var text = ""
            for await chunk in git.stderr { text += String(decoding: chunk, as: UTF8.self) }
            return text
        }
        do {
            status = try await git.exitStatus()
        } catch {
            pumping.cancel()
            throw AgentError(.gitFailed, "git failed \(what): \(error.message)")
        }
        // git is done: whatever still waits on a pipe is let go
        fromGit.cancel()
        intoGit.cancel()
        let pumped = await pumping.result
        let said = await gitErrors.value
        if case .failure(let e) = pumped, status != .exited(0) {
            throw (e as? AgentError) ?? AgentError(.gitFailed, "git failed \(what): \(e)")
        }
        guard status == .exited(0) else {
            let remote = (try? pumped.get()) ?? ""
            throw AgentError(.gitFailed, "git failed \(what) (\(status))",
                             detail: Self.lastLines(said + (remote.isEmpty ? "" : "\n" + remote)))
        }
    }

    /// The top level of the git repository at `directory` on this machine.
    static func localRepository(_ directory: String) async throws(AgentError) -> String {
        let r: ProcessResult
        do {
            r = try await LocalTransport().runProcess("git", arguments: ["-C", directory, "rev-parse", "--show-toplevel"], stdin: [],
                                                      environment: [:], timeout: .seconds(30))
        } catch {
            throw AgentError(.notAGitRepository, "git cannot run here: \(error.message)")
        }
        guard r.exitStatus == .exited(0) else {
            throw AgentError(.notAGitRepository, "\(directory) is not a git repository",
                             detail: r.stderrString.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        return r.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A local git command's output, trimmed.
    static func localGit(_ arguments: [String], what: String, missing: String? = nil) async throws(AgentError) -> String {
        let r: ProcessResult
        do {
            r = try await LocalTransport().runProcess("git", arguments: arguments, stdin: [], environment: [:], timeout: .seconds(60))
        } catch {
            throw AgentError(.gitFailed, "git failed \(what): \(error.message)")
        }
        guard r.exitStatus == .exited(0) else {
            if let missing { throw AgentError(.invalidArgument, missing) }
            throw AgentError(.gitFailed, "git failed \(what)", detail: r.stderrString.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        return r.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Refuses when the local repository is not a clone of the host's project: neither
    /// the same origin (compared as forge and path, so `git@github.com:me/app.git` and
    /// `https://github.com/me/app` are one) nor a root commit in common.
    static func requireSameProject(local: String, host: AgentHost, projectPath: String) async throws(AgentError) {
        let remote = try await host.repositoryIdentities([projectPath])[projectPath]
            ?? AgentHost.RepositoryIdentity(origin: "", roots: [])
        let localOrigin = (try? await localGit(["-C", local, "config", "--get", "remote.origin.url"], what: "")) ?? ""
        let localRoots = Set(((try? await localGit(["-C", local, "rev-list", "--max-parents=0", "--all"], what: "")) ?? "")
            .split(separator: "\n").map(String.init))
        if remote.isSameRepository(as: AgentHost.RepositoryIdentity(origin: localOrigin, roots: localRoots)) { return }
        throw AgentError(.notTheSameProject,
                         "\(local) is not a clone of the project (origin \(localOrigin.isEmpty ? "none" : localOrigin), the project's \(remote.origin.isEmpty ? "none" : remote.origin), no commit in common); pass force to use it anyway")
    }

    static func sameOrigin(_ a: String, _ b: String) -> Bool {
        if a == b { return true }
        guard let x = AgentWorktrees.forgeLocation(a), let y = AgentWorktrees.forgeLocation(b) else { return false }
        return x.host.lowercased() == y.host.lowercased() && x.path == y.path
    }

    static func lastLines(_ text: String) -> String {
        text.split(separator: "\n").suffix(4).joined(separator: "; ").trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
