import Foundation
import SSHKit
import ServerTransport

/// What a host needs to run agents, checked in one round trip (`hosts doctor`): each
/// finding with what to do about it.
public struct AgentHostCheckup: Sendable {
    /// One finding.
    public struct Finding: Sendable, Hashable {
        public enum Level: String, Sendable, Hashable, Comparable {
            case ok, warning, problem

            public static func < (a: Level, b: Level) -> Bool {
                let order: [Level] = [.ok, .warning, .problem]
                return order.firstIndex(of: a)! < order.firstIndex(of: b)!
            }
        }

        /// What was checked: `tmux`, `git`, `login shell`, `PATH`, `disk ~/src/app`,
        /// `clock`, `agent claude`.
        public var subject: String
        public var level: Level
        /// What was found.
        public var detail: String
        /// What to do, for a warning or a problem.
        public var fix: String?

        public init(_ subject: String, _ level: Level, _ detail: String, fix: String? = nil) {
            self.subject = subject
            self.level = level
            self.detail = detail
            self.fix = fix
        }
    }

    public var findings: [Finding]
    /// The worst level found.
    public var level: Finding.Level { findings.map(\.level).max() ?? .ok }

    /// Below this free space in a project's directory (or the home), a warning; below
    /// a tenth of it, a problem.
    public static let lowDiskBytes: Int64 = 2 << 30
    /// A clock further off than this is a warning; 10 times as far, a problem.
    public static let clockSkewWarning: Double = 5

    /// The probe: facts as `key<TAB>value…` lines. The login environment is read by
    /// running the login shell once (`env`, names only are printed, never a value except
    /// PATH's).
    static func script(providers: [AgentProvider], extraSearchPath: [String], directories: [String]) -> String {
        var s = "printf 'now\\t%s\\n' \"$(date +%s.%N 2>/dev/null || date +%s)\"\n"
        s += "__sh=$(getent passwd \"$(id -un)\" 2>/dev/null | cut -d: -f7); __sh=${__sh:-$SHELL}\n"
        s += "printf 'shell\\t%s\\n' \"$__sh\"\n"
        s += "__t=$(tmux -V 2>/dev/null) && printf 'tmux\\t%s\\n' \"$__t\"\n"
        s += "__g=$(git --version 2>/dev/null) && printf 'git\\t%s\\n' \"$__g\"\n"
        // the login environment: what an agent started by the engine gets
        s += "__env=$(timeout 15 \"$__sh\" -l -c env </dev/null 2>/dev/null); __rc=$?\n"
        s += "printf 'loginrc\\t%s\\n' \"$__rc\"\n"
        s += "__lp=$(printf '%s\\n' \"$__env\" | sed -n 's/^PATH=//p' | head -n 1)\n"
        s += "printf 'loginpath\\t%s\\n' \"$__lp\"\n"
        s += "[ -n \"$__lp\" ] && PATH=\"$__lp\"\n"
        s += AgentSearchPath.shellSnippet(extra: extraSearchPath) + "\n"
        var variables = Set<String>()
        for p in providers {
            s += "__b=$(command -v \(SSHShellQuoting.quote(p.binary)) 2>/dev/null) && "
            s += "printf 'agent\\t%s\\t%s\\n' \(SSHShellQuoting.quote(p.id)) \"$__b\"\n"
            for f in p.credentials.files {
                s += "[ -e \"$HOME\"/\(SSHShellQuoting.quote(f)) ] && printf 'file\\t%s\\n' \(SSHShellQuoting.quote(f))\n"
            }
            variables.formUnion(p.credentials.variables)
        }
        for v in variables.sorted() {
            s += "printf '%s\\n' \"$__env\" | grep -q '^\(v)=.' && printf 'var\\t%s\\n' \(SSHShellQuoting.quote(v))\n"
        }
        for d in directories {
            let q = d.byteHasPrefix("~/") ? "\"$HOME\"/" + SSHShellQuoting.quote(d.byteDropFirst(2)) : SSHShellQuoting.quote(d)
            s += "__f=$(df -Pk \(q) 2>/dev/null | awk 'NR==2{print $4}'); "
            s += "printf 'disk\\t%s\\t%s\\n' \(SSHShellQuoting.quote(d)) \"$__f\"\n"
        }
        s += "exit 0\n"
        return s
    }

    /// The findings from the probe's output; `sent` and `received` bracket the round
    /// trip (for the clock).
    static func evaluate(_ output: String, providers: [AgentProvider], directories: [String], sent: Date, received: Date)
        -> AgentHostCheckup
    {
        var facts: [String: [String]] = [:]
        var agents: [String: String] = [:], files = Set<String>(), variables = Set<String>()
        var disks: [String: String] = [:]
        for line in output.split(separator: "\n") {
            let f = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard let key = f.first else { continue }
            switch key {
            case "agent" where f.count == 3: agents[f[1]] = f[2]
            case "file" where f.count == 2: files.insert(f[1])
            case "var" where f.count == 2: variables.insert(f[1])
            case "disk" where f.count == 3: disks[f[1]] = f[2]
            default: facts[key] = Array(f.dropFirst())
            }
        }
        var out: [Finding] = []
        // tmux
        if let v = facts["tmux"]?.first {
            let major = Int(v.split(separator: " ").last?.prefix { $0.isNumber } ?? "") ?? 0
            out.append(major >= 3 ? Finding("tmux", .ok, v)
                : Finding("tmux", .warning, v + ": older than the tmux 3 agent-sessions is tested with",
                          fix: "install a newer tmux (tmux 3.2 or later)"))
        } else {
            out.append(Finding("tmux", .problem, "not installed: agents run in tmux so that they outlive the connection",
                               fix: "install tmux on the host (apt install tmux, dnf install tmux)"))
        }
        // git
        if let v = facts["git"]?.first {
            let parts = v.split(separator: " ").last?.split(separator: ".").compactMap { Int($0.prefix { $0.isNumber }) } ?? []
            let version = (parts.first ?? 0, parts.dropFirst().first ?? 0)
            if version < (2, 17) {
                out.append(Finding("git", .problem, v + ": too old for worktrees as tasks use them",
                                   fix: "install git 2.17 or later"))
            } else if version < (2, 38) {
                out.append(Finding("git", .ok, v + " (merges are built in a temporary worktree: git merge-tree needs 2.38)"))
            } else {
                out.append(Finding("git", .ok, v))
            }
        } else {
            out.append(Finding("git", .problem, "not installed: tasks are git worktrees", fix: "install git on the host"))
        }
        // the login shell and its environment
        let shell = facts["shell"]?.first ?? ""
        if AgentShells.allowed.contains(shell) {
            out.append(Finding("login shell", .ok, shell))
        } else {
            out.append(Finding("login shell", .problem, "\(shell.isEmpty ? "none" : shell): agents are not started under it",
                               fix: "make bash, zsh, sh or fish the login shell (chsh -s /bin/bash)"))
        }
        let loginPath = facts["loginpath"]?.first ?? ""
        if facts["loginrc"]?.first != "0" || loginPath.isEmpty {
            out.append(Finding("login PATH", .warning, "the login shell did not start cleanly within 15 s (status \(facts["loginrc"]?.first ?? "?"))",
                               fix: "check the shell's start-up files (~/.profile, ~/.bash_profile, ~/.zprofile): agents start through them"))
        } else {
            out.append(Finding("login PATH", .ok, loginPath))
        }
        // the agents, and their logins
        let found = providers.filter { agents[$0.id] != nil }
        if found.isEmpty {
            out.append(Finding("agents", .warning, "none found on the login PATH or in the usual install places",
                               fix: "install one: agent-sessions agents install <agent> --host <host>"))
        }
        for p in found {
            let path = agents[p.id]!
            let c = p.credentials
            if !c.isKnown {
                out.append(Finding("agent \(p.id)", .ok, "\(path) (where it keeps its login is not known; start it once to check)"))
                continue
            }
            let have = c.files.filter(files.contains).map { "~/" + $0 } + c.variables.filter(variables.contains)
            if let first = have.first {
                out.append(Finding("agent \(p.id)", .ok, "\(path), logged in (\(first))"))
            } else {
                let look = (c.files.map { "~/" + $0 } + c.variables).joined(separator: ", ")
                out.append(Finding("agent \(p.id)", .warning, "\(path), but no login found (looked for \(look))",
                                   fix: "start \(p.binary) on the host once and log in, or set \(c.variables.first ?? "its key") in the login environment"))
            }
        }
        // disk space
        for d in directories {
            guard let kb = disks[d].flatMap({ Int64($0) }) else {
                out.append(Finding("disk \(d)", .warning, "cannot tell the free space (missing directory?)"))
                continue
            }
            let bytes = kb * 1024
            let text = ByteCountFormatter.string(fromByteCount: bytes, countStyle: .binary) + " free"
            if bytes < lowDiskBytes / 10 {
                out.append(Finding("disk \(d)", .problem, text, fix: "free space there: each task is a worktree (and its build)"))
            } else if bytes < lowDiskBytes {
                out.append(Finding("disk \(d)", .warning, text, fix: "free space there: each task is a worktree (and its build)"))
            } else {
                out.append(Finding("disk \(d)", .ok, text))
            }
        }
        // the clock, against this machine's at the middle of the round trip
        if let remote = facts["now"]?.first.flatMap({ Double($0) ?? Double($0.prefix { $0 != "." }) }) {
            let middle = (sent.timeIntervalSince1970 + received.timeIntervalSince1970) / 2
            let skew = abs(remote - middle) < 0.05 ? 0 : remote - middle
            let text = String(format: "%+.1f s from this machine's", skew)
            if abs(skew) > clockSkewWarning * 10 {
                out.append(Finding("clock", .problem, text, fix: "turn on time synchronisation on the host (timedatectl set-ntp true)"))
            } else if abs(skew) > clockSkewWarning {
                out.append(Finding("clock", .warning, text, fix: "turn on time synchronisation on the host (timedatectl set-ntp true)"))
            } else {
                out.append(Finding("clock", .ok, text))
            }
        }
        return AgentHostCheckup(findings: out)
    }
}

extension AgentHost {
    /// The check-up's probe, run once.
    func checkup(_ providers: [AgentProvider], directories: [String]) async throws(AgentError) -> AgentHostCheckup {
        let script = AgentHostCheckup.script(providers: providers, extraSearchPath: extraSearchPath, directories: directories)
        let sent = Date()
        let r = try await run("/bin/sh", ["-c", script], what: "checking the host")
        let received = Date()
        guard r.exitStatus == .exited(0) else {
            throw AgentError(.transport, "the check-up failed on \(displayName) (\(r.exitStatus))", detail: r.stderrString)
        }
        return AgentHostCheckup.evaluate(r.stdoutString, providers: providers, directories: directories,
                                         sent: sent, received: received)
    }
}

extension AgentOrchestrator {
    /// What the host needs to run agents, in one round trip: tmux and git (and their
    /// versions), the login shell and the PATH a login gets, the agents found on it and
    /// whether each has a login there (a file or variable present, never read), the free
    /// space in the home and in each of the host's projects, and the clock's offset.
    func checkup(_ host: HostRecord) async throws(AgentError) -> AgentHostCheckup {
        let store = store
        let projects = try await stored("reading the projects") { try await store.projects(hostID: host.id) }
        let directories = ["~/"] + projects.map(\.path)
        let providers = providers
        return try await onHost(host) { h in try await h.checkup(providers, directories: directories) }
    }

    /// Runs the provider's `installCommand` on the host in its user's login environment
    /// (the login shell, then the engine's search path in front of PATH), handing each
    /// chunk of its output (standard output and error) to `output` as it comes. Returns
    /// its exit status; the host's agent detection is refreshed after it.
    /// - Throws: `invalidArgument` when the provider has no install command,
    ///   `shellNotAllowed`, `transport`; `cancelled` (the command is stopped).
    func installAgent(_ providerID: String, on host: HostRecord,
                      output: @escaping @Sendable ([UInt8]) -> Void) async throws(AgentError) -> SSHExitStatus
    {
        let provider = try AgentProvider.named(providerID)
        guard let command = provider.installCommand else {
            throw AgentError(.invalidArgument, "\(provider.displayName) has no install command: \(provider.installHint)")
        }
        let providers = providers
        return try await onHost(host) { h in
            let shell = try await h.detectAgents(providers).loginShell
            try AgentShells.check(shell)
            let script = AgentSearchPath.shellSnippet(extra: h.extraSearchPath) + "\n" + command + "\n"
            let login = "exec /bin/sh -c \(SSHShellQuoting.quote(script))"
            let status: SSHExitStatus
            do {
                status = try await h.transport.withProcess(shell, arguments: ["-l", "-c", login]) { process in
                    process.input.finish()
                    async let err: Void = { for await chunk in process.stderr { output(chunk) } }()
                    for await chunk in process.stdout { output(chunk) }
                    await err
                    return try await process.exitStatus()
                }
            } catch let e as TransportError {
                throw AgentError(e, while: "installing \(provider.displayName) on \(host.name)")
            } catch {
                throw AgentError(.cancelled, "installing \(provider.displayName) on \(host.name) was interrupted")
            }
            _ = try await h.detectAgents(providers, refresh: true)
            return status
        }
    }

    /// Runs an agent's own executable `binary` (a name found on the host's search path,
    /// as agents are started, or a path) with `arguments` on the host, in its login shell,
    /// standard input closed: for the agent's own setup commands (`kimi mcp add …`).
    /// - Returns: its exit status (127: not found) and its output, standard error after
    ///   standard output.
    func runAgentCommand(_ binary: String, _ arguments: [String], on host: HostRecord)
        async throws(AgentError) -> (status: SSHExitStatus, output: String)
    {
        let providers = providers
        return try await onHost(host) { h in
            let shell = try await h.detectAgents(providers).loginShell
            try AgentShells.check(shell)
            let script = AgentSearchPath.shellSnippet(extra: h.extraSearchPath) + "\n"
                + "command -v \"$0\" >/dev/null 2>&1 || { echo \"$0 is not on the host's search path\" >&2; exit 127; }\n"
                + "exec \"$0\" \"$@\"\n"
            let login = "exec /bin/sh -c \(SSHShellQuoting.quote(script)) " + ([binary] + arguments).map(SSHShellQuoting.quote).joined(separator: " ")
            do {
                let r = try await h.transport.runProcess(shell, arguments: ["-l", "-c", login], stdin: [], environment: [:],
                                                         timeout: .seconds(120))
                return (r.exitStatus, r.stdoutString + r.stderrString)
            } catch let e as TransportError {
                throw AgentError(e, while: "running \(binary) on \(host.name)")
            } catch {
                throw AgentError(.cancelled, "running \(binary) on \(host.name) was interrupted")
            }
        }
    }
}
