@testable import AgentSessions
import Foundation
import SSHKit
import ServerTransport
import Testing

/// What the engine learns about a host and how it copes with odd ones: detection in one
/// round trip, a host without tmux, a login shell it does not start agents under.
@Suite("Agent hosts", .tags(.integration), .serialized)
struct AgentHostTests {
    /// A task's port is held while its worktree exists; a claim whose worktree is gone (a
    /// task deleted without giving it back) is taken over by the next task, once it is
    /// older than a worktree takes to be made (a fresh claim's worktree may be coming).
    @Test func aPortClaimWhoseWorktreeIsGoneIsTakenOver() async throws {
        let ssh = SSHTransport(configuration: TestServer.shared.configuration())
        defer { Task { await ssh.close() } }
        let host = AgentHost(transport: ssh)
        let live = try #require(try await host.claimPort(taskID: "live-task", worktree: "/tmp"))
        let lost = try #require(try await host.claimPort(taskID: "lost-task", worktree: "/nonexistent/worktree-\(UUID())"))
        #expect(lost != live, "a claim whose worktree exists is kept")
        let fresh = try #require(try await host.claimPort(taskID: "fresh-task", worktree: "/tmp"))
        #expect(fresh != lost, "a fresh claim is kept while its worktree is not there yet")
        try await host.releasePort(fresh, taskID: "fresh-task")
        _ = try await ssh.runProcess("/bin/sh", "-c", #"touch -d '20 minutes ago' "$HOME/.cache/sshkit-agents/ports/$1""#, "sh", "\(lost)")
        let next = try #require(try await host.claimPort(taskID: "next-task", worktree: "/tmp"))
        // a task of another suite, claiming on this host at the same moment, may take the
        // old claim over first (and this one gets the next port, or gives it back at once):
        // either way the claim is no longer the lost task's
        let lostOwner = try await ssh.runProcess(
            "/bin/sh", "-c", "cat \"$HOME/.cache/sshkit-agents/ports/$1/task\" 2>/dev/null", "sh", "\(lost)")
        #expect(lostOwner.stdoutString != "lost-task\n", "the old claim of a worktree that is gone is taken over")
        let owner = try await ssh.runProcess("/bin/sh", "-c", "cat \"$HOME/.cache/sshkit-agents/ports/$1/task\"", "sh", "\(next)")
        #expect(owner.stdoutString == "next-task\n")
        try await host.releasePort(live, taskID: "live-task")
        try await host.releasePort(next, taskID: "next-task")
    }

    /// A claim of an earlier release names its task but no worktree: it is free again once
    /// old, unless its task's main agent still has a tmux session on the host.
    @Test func aClaimWithoutAWorktreeIsFreeOnceItsTasksSessionIsGone() async throws {
        let ssh = SSHTransport(configuration: TestServer.shared.configuration())
        let socket = "sshkit-claims-\(UInt32.random(in: 0...UInt32.max))"
        let host = AgentHost(transport: ssh, tmuxSocket: socket)
        let gone = TaskID("gone-\(UUID())"), running = TaskID("running-\(UUID())")
        let goneClaim = try #require(try await host.claimPort(taskID: gone, worktree: "/tmp"))
        let runningClaim = try #require(try await host.claimPort(taskID: running, worktree: "/tmp"))
        // as an earlier release left them: no worktree file, older than 15 minutes (the
        // tmux server's name is kept, so suites running beside this one leave them alone)
        let oldFormat = #"cd "$HOME/.cache/sshkit-agents/ports/$1" && rm -f worktree && touch -d '20 minutes ago' ."#
        _ = try await ssh.runProcess("/bin/sh", "-c", oldFormat, "sh", "\(goneClaim)")
        _ = try await ssh.runProcess("/bin/sh", "-c", oldFormat, "sh", "\(runningClaim)")
        // the second task's agent still runs on the host
        let started = try await ssh.runProcess("tmux", "-L", socket, "-f", "/dev/null", "new-session", "-d", "-s", "fake-main-\(running)",
                                               "sleep 120")
        #expect(started.exitStatus == .exited(0), "\(started.stderrString)")

        let next = TaskID("next-\(UUID())")
        let nextClaim = try #require(try await host.claimPort(taskID: next, worktree: "/tmp"))
        func owner(_ port: Int) async throws -> String {
            try await ssh.runProcess("/bin/sh", "-c", "cat \"$HOME/.cache/sshkit-agents/ports/$1/task\" 2>/dev/null", "sh", "\(port)")
                .stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        // a task of another suite claiming at the same moment may have taken it: either way
        // it is no longer the gone task's
        #expect(try await owner(goneClaim) != gone.rawValue, "the claim of a task whose worktree and session are gone is free again")
        #expect(try await owner(runningClaim) == running.rawValue, "a claim whose task's agent runs is kept")
        #expect(nextClaim != runningClaim)
        try await host.releasePort(runningClaim, taskID: running)
        try await host.releasePort(nextClaim, taskID: next)
        if try await owner(goneClaim) == next.rawValue { try await host.releasePort(goneClaim, taskID: next) }
        _ = try? await ssh.runProcess("tmux", "-L", socket, "kill-server")
        await ssh.close()
    }

    /// Tasks made at once (the attempts of one work) claim their ports before their
    /// worktrees exist: each gets its own.
    @Test func portsClaimedAtOnceAreEachTheirOwn() async throws {
        let ssh = SSHTransport(configuration: TestServer.shared.configuration())
        defer { Task { await ssh.close() } }
        let host = AgentHost(transport: ssh)
        let claims = try await withThrowingTaskGroup(of: (TaskID, Int?).self) { group in
            for i in 0..<8 {
                group.addTask {
                    let id = TaskID("at-once-\(i)-\(UUID())")
                    return (id, try await host.claimPort(taskID: id, worktree: "/nonexistent/planned-\(UUID())"))
                }
            }
            var out: [(TaskID, Int?)] = []
            for try await c in group { out.append(c) }
            return out
        }
        let ports = claims.compactMap(\.1)
        #expect(ports.count == 8 && Set(ports).count == 8, "\(ports)")
        for (id, port) in claims { if let port { try await host.releasePort(port, taskID: id) } }
    }

    @Test func detectionIsOneRoundTripCachedAndRefreshable() async throws {
        let ssh = SSHTransport(configuration: TestServer.shared.configuration())
        let counting = CountingTransport(ssh)
        // decoys: the editor launchers are not agents
        let bins = FakeAgents.binaries(["claude", "gemini", "cursor", "kiro", "code"])
        // an agent where a version manager or pipx would put it: only the login PATH has it
        let setup = try await ssh.runProcess("/bin/sh", arguments: ["-c", """
            mkdir -p "$HOME/.local/bin" && printf '#!/bin/sh\\necho qwen\\n' > "$HOME/.local/bin/qwen" && chmod 755 "$HOME/.local/bin/qwen"
            """], stdin: [], environment: [:], timeout: .seconds(20))
        try setup.check()
        defer {
            Task {
                _ = try? await ssh.runProcess("/bin/rm", "-f", ".local/bin/qwen")
                await ssh.close()
            }
        }

        let host = AgentHost(transport: counting, extraSearchPath: [bins])
        let d = try await host.detectAgents()
        #expect(counting.runs == 1, "\(counting.commands)")
        let home = try await host.absolutePath("~")
        // the real agents other suites install for the test user (from PyPI, into ~/.local/bin)
        // may be found too, while they run beside this one
        let installedByOthers: Set<String> = ["hermes", "vibe", "kimi"]
        #expect(d.installed.filter { !installedByOthers.contains($0.key) }
            == ["claude": bins + "/claude", "gemini": bins + "/gemini", "qwen": home + "/.local/bin/qwen"])
        #expect(d.installedProviders.map(\.id).filter { !installedByOthers.contains($0) } == ["claude", "gemini", "qwen"])
        #expect(d.tmuxVersion?.hasPrefix("tmux ") == true)
        #expect(d.hasGit)
        #expect(d.loginShell == "/bin/sh")

        let runs = counting.runs
        #expect(try await host.detectAgents() == d)
        #expect(counting.runs == runs, "a second detection within 5 minutes is the cached one")
        _ = try await host.detectAgents(refresh: true)
        #expect(counting.runs == runs + 1)
        host.forgetCachedFacts()
        _ = try await host.detectAgents()
        #expect(counting.runs == runs + 2)
    }

    /// A server in a mount namespace where tmux is a program that is not there (exit 127).
    static func serverWithoutTmux() throws -> TestServer {
        let dir = "/tmp/sshkit-notmux-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        ServerRegistry.dirs.withLock { _ = $0.insert(dir) }
        FileManager.default.createFile(atPath: dir + "/tmux", contents: Data("#!/bin/sh\nexit 127\n".utf8),
                                       attributes: [.posixPermissions: 0o755])
        // a name of its own: two suites start such a server, at once when run in parallel, and
        // one directory shared by two servers broke both (two keygens on one file)
        return try TestServer.start(name: "no-tmux-\(UUID().uuidString.prefix(6))",
                                    mountSetup: "mount --bind \(dir)/tmux /usr/bin/tmux")
    }

    @Test func withoutTmuxAnAgentRunsOnAPlainTerminalMarkedAsNotSurviving() async throws {
        let server = try Self.serverWithoutTmux()
        defer { server.stop() }
        let t = SSHTransport(configuration: server.configuration())
        defer { Task { await t.close() } }
        let host = AgentHost(transport: t, extraSearchPath: [FakeAgents.directory])
        #expect(try await host.detectAgents().tmuxVersion == nil)
        let spec = AgentSessionSpec(ptyID: AgentPTYID(providerID: "claude", kind: .main, suffix: "plain1"),
                                    provider: try AgentProvider.named("claude"),
                                    settings: AgentProviderSettings(binary: "fake-tui"), workingDirectory: "/tmp",
                                    prompt: "hello", statusHooks: false)
        let session = try await host.startAgent(spec)
        #expect(session.container == .plainTerminal)
        #expect(!session.survivesDisconnect)
        let out = await eventually { () async -> String? in
            let s = (try? await host.recentOutput(of: session)) ?? ""
            return s.contains("READY>") ? s : nil
        }
        #expect(out?.contains("ARGS: [hello]") == true)
        // its status: one look at its screen, by the watcher's classifier run on the host
        let rules = try AgentScreenRules.parse("[claude]\nidle  READY>\n", origin: "user")
        let status = await host.status(of: session, rules: rules)
        #expect(status.activity == .idle && status.source == .screen && status.rule == "user:2", "\(status)")
        let terminal = try await host.attach(session)
        try await terminal.input.write(Array("typed\r".utf8))
        #expect(await read(terminal, until: "got: typed").contains("got: typed"))
        terminal.cancel()
        try await host.sendLine("exit 5", to: session)
        #expect(await eventually { () async -> AgentProcessState? in
            let s = try? await host.state(of: session)
            return s == .running ? nil : s
        } == .exited(5))
        // tmux calls say what is missing
        let e = await #expect(throws: AgentError.self) { _ = try await host.tmux.sessions() }
        #expect(e?.code == .tmuxUnavailable)
        try await host.stop(session)
        #expect(try await host.state(of: session) == .gone)
    }

    @Test func aLoginShellOutsideTheAllowlistIsRefused() async throws {
        let dir = "/tmp/sshkit-dash-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        ServerRegistry.dirs.withLock { _ = $0.insert(dir) }
        let user = TestServer.shared.user
        // the test user's login shell is /bin/dash in this server's view of /etc/passwd
        let server = try TestServer.start(name: "dash-shell", mountSetup: """
            sed 's#^\\(\(user):.*\\):[^:]*$#\\1:/bin/dash#' /etc/passwd > \(dir)/passwd
            mount --bind \(dir)/passwd /etc/passwd
            """)
        defer { server.stop() }
        let t = SSHTransport(configuration: server.configuration())
        defer { Task { await t.close() } }
        let host = AgentHost(transport: t, extraSearchPath: [FakeAgents.directory])
        #expect(try await host.detectAgents().loginShell == "/bin/dash")
        let spec = AgentSessionSpec(ptyID: AgentPTYID(providerID: "claude", kind: .main, suffix: "dash1"),
                                    provider: try AgentProvider.named("claude"),
                                    settings: AgentProviderSettings(binary: "fake-tui"), workingDirectory: "/tmp")
        let e = await #expect(throws: AgentError.self) { _ = try await host.startAgent(spec) }
        #expect(e?.code == .shellNotAllowed)
        #expect(e?.message.contains("/bin/dash") == true)
    }
}
