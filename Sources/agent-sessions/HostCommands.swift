import AgentSessions
import ArgumentParser
import Foundation
import SSHKit
import ServerTransport
import Synchronization
import TerminalSupport

struct Hosts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "hosts",
        abstract: "Add, list, test and remove the machines agents run on.",
        subcommands: [Add.self, Import.self, List.self, Test.self, Doctor.self, Remove.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "add",
            abstract: "Add a host: connect once, check its host key and what it has installed.",
            discussion: """
                With no destination, NAME is a host of your OpenSSH configuration (~/.ssh/config, or -F): it is connected to as `ssh NAME` would (HostName, User, Port, IdentityFile and certificates, IdentityAgent, ProxyJump or ProxyCommand, known_hosts files, StrictHostKeyChecking, Match and Include). The store keeps the name, not what it resolves to: a change to the configuration takes effect on the next connect. A destination without a user (`gpu-7`) is such a name too; `user@host[:port]` is an address, and the configuration is not read for it. --key, --agent, --password, --jump and --fingerprint win over the configuration.

                For an address, without --fingerprint, the host key is checked against ~/.ssh/known_hosts like ssh does; a host seen for the first time has its key recorded there (hashed) and the fingerprint shown, like StrictHostKeyChecking=accept-new. For an ssh name, the configuration's known_hosts files and StrictHostKeyChecking decide; a key it would ask about is recorded on this first connect and shown. With --fingerprint, the key is pinned in the store and known_hosts is not used for it.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "What to call the host (letters, digits, . _ -); without a destination, its name in your ssh configuration.")
        var name: String
        @Argument(help: "user@host[:port], or a host of your ssh configuration (default: NAME).") var destination: String?
        @OptionGroup var ssh: OpenSSHOptions
        @Option(name: [.customShort("i"), .customLong("key")], help: "A private key file; repeatable, tried in order.")
        var keys: [String] = []
        @Flag(help: "Authenticate with the keys of ssh-agent (SSH_AUTH_SOCK).") var agent = false
        @Flag(help: "Authenticate with a password asked on the terminal when connecting (never stored).")
        var password = false
        @Option(name: [.customShort("J"), .customLong("jump")], help: "Reach the host through this jump host, [user@]host[:port].")
        var jump: String?
        @Option(help: "Pin the host key: its SHA-256 fingerprint, SHA256:... as ssh-keygen -l prints it.")
        var fingerprint: String?
        @Option(help: "The name of the tmux server (tmux -L) the agents run in on the host.")
        var tmuxSocket = "agent-sessions"

        func run() async throws {
            try await Context.with(global) { context in
                try Hosts.checkName(name)
                guard tmuxSocket.range(of: #"^[A-Za-z0-9._-]{1,64}$"#, options: .regularExpression) != nil else {
                    throw Failure.usage("\(tmuxSocket) is not a usable tmux server name: use letters, digits, '.', '_' and '-'")
                }
                if let fingerprint, !fingerprint.hasPrefix("SHA256:") || fingerprint.count < 20 {
                    throw Failure.usage("\(fingerprint) is not a SHA-256 fingerprint (SHA256:..., see ssh-keygen -lf)")
                }
                let target = destination ?? name
                let byAddress = target.contains("@")
                if byAddress, ssh.given { throw Failure.usage("-F, -o and --allow-match-exec are for a host of your ssh configuration, not an address") }
                try await context.orchestrator.checkHostName(name)
                let authentication = try chosenAuthentication(context.environment, byAddress: byAddress)
                var record: HostRecord
                if byAddress {
                    let spec = try HostSpec(parsing: target)
                    if let jump { _ = try HostSpec(parsing: jump, defaultUser: spec.user) }
                    record = HostRecord(name: name, address: spec.address, port: spec.port, user: spec.user,
                                        authentication: authentication, jumpHost: jump, hostKeyFingerprint: fingerprint,
                                        tmuxSocket: tmuxSocket)
                } else {
                    if let jump { _ = try HostSpec(parsing: jump, defaultUser: "user") }
                    let reference = try ssh.reference(alias: target)
                    record = HostRecord(name: name, address: target, port: 0, user: "", authentication: authentication,
                                        jumpHost: jump, hostKeyFingerprint: fingerprint, tmuxSocket: tmuxSocket,
                                        openSSH: reference)
                }
                let detection = try await Hosts.connectFirstTime(record, context)
                try await context.orchestrator.addHost(record)
                let trustText = fingerprint.map { "pinned \($0)" }
                    ?? (byAddress ? "checked against \(HostConnection.knownHosts(environment: context.environment).path)"
                                  : "checked as the ssh configuration says")
                print("added host \(name): \(record.destinationText), host key \(trustText)")
                Hosts.warnings(detection, name)
            }
        }

        func chosenAuthentication(_ environment: [String: String], byAddress: Bool) throws -> HostAuthentication {
            let chosen = [!keys.isEmpty, agent, password].filter { $0 }.count
            guard chosen <= 1 else { throw Failure.usage("give one of --key, --agent and --password") }
            if !keys.isEmpty {
                let paths = keys.map { ($0 as NSString).expandingTildeInPath }.map {
                    $0.hasPrefix("/") ? $0 : FileManager.default.currentDirectoryPath + "/" + $0
                }
                for p in paths where !FileManager.default.isReadableFile(atPath: p) {
                    throw Failure.usage("cannot read the key file \(p)")
                }
                return .keyFiles(paths)
            }
            if password { return .passwordPrompt }
            if agent { return .sshAgent }
            if !byAddress { return .openSSH }
            if environment["SSH_AUTH_SOCK"] != nil { return .sshAgent }
            throw Failure.usage("give --key <file>, --agent or --password (no ssh-agent is running)")
        }
    }

    /// A host of the ssh configuration reached directly (no ProxyJump, no ProxyCommand) is
    /// looked up first, as ssh does before it chooses credentials: a name that is not in
    /// the configuration and not in DNS is said to be neither (naming the files read),
    /// and a HostName that does not resolve is named.
    /// - Throws: `Failure(.connection)` when the name does not resolve; what reading the
    ///   configuration throws.
    static func checkResolves(_ reference: OpenSSHHostReference, _ record: HostRecord) throws {
        let files = OpenSSHConfig(configFile: reference.configFile, options: reference.options,
                                  allowsMatchExec: reference.allowsMatchExec)
        let resolved: SSHHostConfig
        do throws(SSHConfigError) {
            resolved = try files.resolve(reference.alias, user: record.user.isEmpty ? nil : record.user,
                                         port: record.port == 0 ? nil : record.port)
        } catch {
            throw Failure(.usage, "\(record.name): the OpenSSH configuration for \(reference.alias): \(error)")
        }
        guard resolved.proxyCommand == nil, resolved.proxyJump.isEmpty,
              let problem = HostLookup.problem(resolving: resolved.hostName) else { return }
        let declared = (try? files.declaredHosts()) ?? []
        let home = OpenSSHConfig.Context.current.homeDirectory
        let read = files.topLevelFiles.map { f -> String in
            let shown = f.hasPrefix(home + "/") ? "~" + f.dropFirst(home.count) : f
            return FileManager.default.fileExists(atPath: f) ? shown : shown + " (absent)"
        }
        let where_ = read.isEmpty ? "no configuration file (-F none)" : read.joined(separator: ", ")
        if resolved.hostName == reference.alias && !declared.contains(reference.alias) {
            throw Failure(.connection, "\(reference.alias) is not a Host of the ssh configuration (read: \(where_)) "
                + "and does not resolve as a host name (\(problem)); give user@host[:port] for an address, or add a Host entry")
        }
        throw Failure(.connection, "\(reference.alias): its host name \(resolved.hostName) (from \(where_)) does not resolve "
            + "(\(problem)); check HostName in the configuration")
    }

    static func checkName(_ name: String) throws {
        guard name.range(of: #"^[A-Za-z0-9._-]{1,64}$"#, options: .regularExpression) != nil else {
            throw Failure.usage("\(name) is not a usable host name: use letters, digits, '.', '_' and '-'")
        }
    }

    /// The first connection to a new host: its key checked or recorded on first use (the
    /// jump host's too, even when the host's is pinned), and what it has installed.
    static func connectFirstTime(_ record: HostRecord, _ context: Context) async throws -> AgentDetection {
        if let reference = record.openSSH, record.jumpHost == nil { try checkResolves(reference, record) }
        let trust = FirstUseTrust(knownHosts: HostConnection.knownHosts(environment: context.environment))
        let recorded = Mutex<[SSHHostKeyPrompt]>([])
        let config: SSHConfiguration
        if record.openSSH != nil {
            // the configuration's known_hosts files and StrictHostKeyChecking decide; a key
            // it would ask about is recorded by this first connect
            config = try HostConnection.configuration(for: record, environment: context.environment, firstUse: { prompt in
                recorded.withLock { $0.append(prompt) }
                return true
            })
        } else {
            config = try HostConnection.configuration(for: record, environment: context.environment,
                                                      hostKeyPolicy: record.hostKeyFingerprint == nil ? trust.policy : nil,
                                                      jumpHostKeyPolicy: trust.policy)
        }
        let transport = SSHTransport(configuration: config, serverID: record.serverID)
        let detection: AgentDetection
        do {
            detection = try await context.orchestrator.inspectNewHost(record, through: transport)
            await transport.close()
        } catch {
            await transport.close()
            throw error
        }
        if !trust.firstSeen.isEmpty {
            // like ssh: ~/.ssh is made 0700 when missing
            let dir = (trust.knownHosts.path as NSString).deletingLastPathComponent
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
        for seen in trust.firstSeen {
            try await trust.knownHosts.add(seen.key, host: seen.host, port: seen.port)
            print("recorded the host key of \(SSHKnownHostsFile.lookupName(host: seen.host, port: seen.port)) in \(trust.knownHosts.path): \(seen.key.type) \(seen.key.sha256Fingerprint)")
        }
        for seen in recorded.withLock({ $0 }) {
            let name = seen.port == 22 ? seen.hostName : "[\(seen.hostName)]:\(seen.port)"
            print("recorded the host key of \(name) in \(seen.knownHostsFile ?? "known_hosts"): \(seen.key.type) \(seen.key.sha256Fingerprint)")
        }
        return detection
    }

    static func warnings(_ detection: AgentDetection, _ name: String) {
        if detection.tmuxVersion == nil {
            note("warning: \(name) has no tmux; install it there: agents run in tmux so they outlive this command")
        }
        if !detection.hasGit { note("warning: \(name) has no git; install it there: tasks are git worktrees") }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "import",
            abstract: "Add the hosts of your OpenSSH configuration whose names match a pattern.",
            discussion: """
                PATTERN is a list as a Host line takes it: `gpu-*,!gpu-old` (a `*`/`?` pattern each, `!` excluding). Each Host name of the configuration (Include followed) that matches, and that no host of the store has as its name yet, is added as `hosts add NAME` adds it: connected to once, its key recorded when the configuration would ask. A host that cannot be reached is reported and left out; the others are added.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The names to add: patterns as a Host line takes them (gpu-*,!gpu-old).") var pattern: String
        @OptionGroup var ssh: OpenSSHOptions
        @Option(help: "The name of the tmux server (tmux -L) the agents run in on the hosts.")
        var tmuxSocket = "agent-sessions"

        func run() async throws {
            try await Context.with(global) { context in
                let files = OpenSSHConfig(configFile: ssh.configFile, options: ssh.options, allowsMatchExec: ssh.allowMatchExec)
                let names: [String]
                do throws(SSHConfigError) {
                    names = try files.declaredHosts(matching: pattern)
                } catch {
                    throw Failure.usage("the OpenSSH configuration: \(error)")
                }
                let where_ = ssh.configFile ?? "~/.ssh/config or /etc/ssh/ssh_config"
                guard !names.isEmpty else { throw Failure.notFound("no Host in \(where_) matches \(pattern)") }
                let existing = Set(try await context.records.hosts().map(\.name))
                var added = 0, failed = 0
                for alias in names {
                    if existing.contains(alias) {
                        print("\(alias): in the store already, skipped")
                        continue
                    }
                    do {
                        try Hosts.checkName(alias)
                        let record = HostRecord(name: alias, address: alias, port: 0, user: "", authentication: .openSSH,
                                                tmuxSocket: tmuxSocket, openSSH: try ssh.reference(alias: alias))
                        let detection = try await Hosts.connectFirstTime(record, context)
                        try await context.orchestrator.addHost(record)
                        print("added host \(alias): \(record.destinationText)")
                        Hosts.warnings(detection, alias)
                        added += 1
                    } catch {
                        note("\(alias): not added: \(Failure.from(error).message)")
                        failed += 1
                    }
                }
                print("\(Wording.count(added, "host")) added" + (failed > 0 ? ", \(failed) could not be added" : ""))
                if failed > 0 { throw ExitCode(Exit.connection.rawValue) }
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the hosts and whether each can be reached now.")
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Do not connect; list the records only.") var offline = false
        @Flag(help: "JSON, for scripts.") var json = false

        func run() async throws {
            try await Context.with(global) { context in
                let hosts = try await context.records.hosts()
                var states: [HostID: String] = [:]
                if !offline {
                    // all at once, but the hosts that ask for a password one after the other
                    let asking = hosts.filter { $0.authentication == .passwordPrompt }
                    states = await withTaskGroup(of: (HostID, String).self) { group in
                        for h in hosts where h.authentication != .passwordPrompt { group.addTask { (h.id, await probe(h, context)) } }
                        var all: [HostID: String] = [:]
                        for await (id, s) in group { all[id] = s }
                        return all
                    }
                    for h in asking { states[h.id] = await probe(h, context) }
                }
                let projects = try await context.records.projects()
                if json {
                    let rows: [[String: JSONValue]] = hosts.map { h in
                        ["name": .string(h.name), "destination": .string(h.destination), "authentication": .string(h.authenticationText),
                         "jumpHost": h.jumpHost.map(JSONValue.string) ?? .null, "hostKey": .string(h.hostKeyText),
                         "projects": .int(projects.filter { $0.hostID == h.id }.count),
                         "connection": states[h.id].map(JSONValue.string) ?? .null]
                    }
                    printJSON(.array(rows.map(JSONValue.object)))
                    return
                }
                if hosts.isEmpty {
                    print("no hosts yet; add one: agent-sessions hosts add <name> user@host[:port] --key <file>")
                    return
                }
                var table = Table(["NAME", "DESTINATION", "AUTH", "HOST KEY", "PROJECTS"] + (offline ? [] : ["CONNECTION"]))
                for h in hosts {
                    table.add([h.name, h.destination + (h.jumpHost.map { " via \($0)" } ?? ""), h.authenticationText,
                               h.hostKeyText, "\(projects.filter { $0.hostID == h.id }.count)"] + (offline ? [] : [states[h.id] ?? "?"]))
                }
                table.print()
            }
        }

        func probe(_ h: HostRecord, _ context: Context) async -> String {
            let start = ContinuousClock.now
            do {
                try await context.orchestrator.host(h.id).connect()
                let ms = (ContinuousClock.now - start) / .milliseconds(1)
                return String(format: "ok (%.0f ms)", ms)
            } catch {
                return "failed: " + Failure.from(error).message.split(separator: ";")[0]
            }
        }
    }

    struct Test: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "test", abstract: "Connect to a host and show what agents need there.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The host's name.") var name: String

        func run() async throws {
            try await Context.with(global) { context in
                let h = try await context.host(named: name)
                let start = ContinuousClock.now
                let detection = try await context.orchestrator.host(h.id).detectAgents(refresh: true)
                let ms = (ContinuousClock.now - start) / .milliseconds(1)
                print(String(format: "%@: connected and probed in %.0f ms (%@)", h.name, ms, h.destination))
                print("host key:    \(h.hostKeyText)")
                print("tmux:        \(detection.tmuxVersion ?? "missing: install tmux, agents run in it")")
                print("git:         \(detection.hasGit ? "yes" : "missing: install git, tasks are worktrees")")
                print("login shell: \(detection.loginShell)")
                let installed = detection.installedProviders.map(\.id)
                print("agents:      \(installed.isEmpty ? "none found" : installed.joined(separator: ", "))")
                if detection.tmuxVersion == nil || !detection.hasGit { throw ExitCode(Exit.failed.rawValue) }
            }
        }
    }

    struct Doctor: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "doctor",
            abstract: "Check what a host needs to run agents, with the fix for each problem.",
            discussion: """
                One round trip: tmux and git (and their versions), the login shell and whether agents are started under it, the PATH a login gets and the agents found on it, whether each agent has a login there (a credentials file or variable present; never its content), the free space in the home and in the host's projects, and the clock against this machine's. Exit status 0 when nothing is a problem (warnings allowed), 1 otherwise.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The host's name.") var name: String
        @Flag(help: "JSON, for scripts.") var json = false

        func run() async throws {
            try await Context.with(global) { context in
                let h = try await context.host(named: name)
                let checkup = try await context.orchestrator.host(h.id).checkup()
                if json {
                    let rows: [JSONValue] = checkup.findings.map { f in
                        .object(["subject": .string(f.subject), "level": .string(f.level.rawValue), "detail": .string(f.detail),
                                 "fix": f.fix.map(JSONValue.string) ?? .null])
                    }
                    printJSON(.object(["host": .string(h.name), "level": .string(checkup.level.rawValue), "findings": .array(rows)]))
                } else {
                    print("\(h.name) (\(h.destination))")
                    let width = checkup.findings.map(\.subject.count).max() ?? 0
                    for f in checkup.findings {
                        let mark = f.level == .ok ? "ok  " : f.level == .warning ? "warn" : "FAIL"
                        print("  \(mark)  \(f.subject.padding(toLength: width, withPad: " ", startingAt: 0))  \(f.detail)")
                        if let fix = f.fix, f.level != .ok {
                            print("        \(String(repeating: " ", count: width))  fix: \(fix)")
                        }
                    }
                }
                if checkup.level == .problem { throw ExitCode(Exit.failed.rawValue) }
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "remove",
            abstract: "Remove a host and its projects and tasks from the store.",
            discussion: "Nothing on the host is touched. A host with tasks is refused unless --force.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The host's name.") var name: String
        @Flag(help: "Remove it even though it has tasks (their agents and worktrees stay on the host).") var force = false

        func run() async throws {
            try await Context.with(global) { context in
                let h = try await context.host(named: name)
                let (projects, tasks) = try await context.orchestrator.host(h.id).remove(force: force)
                print("removed host \(name) (\(Wording.count(projects, "project")), \(Wording.count(tasks, "task")))")
            }
        }
    }
}

/// `agents <host>`: the installed agents; `agents install`.
struct Agents: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "agents",
        abstract: "Show which agents are installed on a host, or install one.",
        subcommands: [AgentsList.self, AgentsInstall.self], defaultSubcommand: AgentsList.self)
}

/// `agents install AGENT --host NAME`.
struct AgentsInstall: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "install",
        abstract: "Install an agent on a host, for its user, with the agent's own installer.",
        discussion: """
            The command is shown and asked about before it runs (--yes runs it without asking), then runs on the host in the login environment agents start in, its output shown as it comes. A command that downloads a script and pipes it into a shell is always shown and asked about, even with --yes; with nobody to ask, it is refused. npm packages go into ~/.local, Python agents into a virtualenv of their own; no root is needed. Which agents are installed is probed again after it.
            """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The agent (its id, as agent-sessions agents <host> lists them).") var agent: String
    @Option(help: "The host's name.") var host: String
    @Flag(name: [.customShort("y"), .long], help: "Run it without asking (not for a script piped into a shell).") var yes = false

    func run() async throws {
        try await Context.with(global) { context in
            let h = try await context.host(named: host)
            let provider: AgentProvider
            do { provider = try AgentProvider.named(agent) } catch { throw Failure.usage("\(agent) is not an agent agent-sessions knows (see agent-sessions agents \(host))") }
            guard let command = provider.installCommand else {
                throw Failure.usage("\(provider.displayName) has no install command to run: \(provider.installHint)")
            }
            let piped = AgentProvider.pipesDownloadIntoShell(command)
            print("on \(h.name), in the login environment: \(command)")
            if piped || !yes {
                if piped { note("this command downloads a script and runs it in a shell") }
                guard HostConnection.asks.load(ordering: .relaxed), TerminalPrompt.canAsk else {
                    throw Failure.refused(piped ? "a script piped into a shell is run only when confirmed at a terminal; run this at one"
                                                : "nobody to ask: give --yes to run it")
                }
                let answer = await TerminalPrompt.ask("Run it on \(h.name)? [y/N] ", echo: true) ?? ""
                guard ["y", "yes"].contains(answer.trimmingCharacters(in: .whitespaces).lowercased()) else {
                    throw Failure.refused("not installed: not confirmed")
                }
            }
            let status = try await context.orchestrator.host(h.id).installAgent(provider.id) { chunk in
                FileHandle.standardOutput.write(Data(chunk))
            }
            // the next `agents` shows what is there now
            let providers = context.config.allProviders
            let cache = DetectionCache(environment: context.environment, hostID: h.id,
                                       settings: providers.map(\.binary) + context.config.searchPath)
            let detection = try await context.orchestrator.host(h.id).detectAgents()
            cache.save(detection)
            guard status == .exited(0) else {
                throw Failure(.failed, "the install command of \(provider.displayName) failed on \(h.name) (\(status))")
            }
            if let path = detection.installed[provider.id] {
                print("installed \(provider.displayName) on \(h.name): \(path)")
            } else {
                throw Failure(.failed, "the install command ended well, but \(provider.binary) is not found on \(h.name)'s login PATH")
            }
        }
    }
}

/// `agents <host>`: the installed agents.
struct AgentsList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "Show which agents are installed on a host.",
        discussion: "One remote command probes for every agent; the answer is reused for 5 minutes unless --refresh.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The host's name.") var name: String
    @Flag(help: "Probe again rather than reuse an answer from the last 5 minutes.") var refresh = false
    @Flag(help: "JSON, for scripts.") var json = false

    func run() async throws {
        try await Context.with(global) { context in
            let h = try await context.host(named: name)
            let providers = context.config.allProviders
            let cache = DetectionCache(environment: context.environment, hostID: h.id,
                                       settings: providers.map(\.binary) + context.config.searchPath)
            var detection = refresh ? nil : cache.load()
            let cached = detection != nil
            if detection == nil {
                detection = try await context.orchestrator.host(h.id).detectAgents(refresh: true)
                cache.save(detection!)
            }
            let d = detection!
            if json {
                let agents: [JSONValue] = providers.map { p in
                    .object(["id": .string(p.id), "name": .string(p.displayName),
                             "path": d.installed[p.id].map(JSONValue.string) ?? .null,
                             "unusable": d.unusable[p.id].map(JSONValue.string) ?? .null])
                }
                printJSON(.object(["host": .string(h.name), "probedAt": .date(d.probedAt), "cached": .bool(cached),
                                   "tmux": d.tmuxVersion.map(JSONValue.string) ?? .null, "git": .bool(d.hasGit),
                                   "agents": .array(agents)]))
                return
            }
            var table = Table(["AGENT", "NAME", "PATH"])
            for p in providers where d.installed[p.id] != nil {
                let path = d.installed[p.id]! + (d.unusable[p.id] != nil ? " (installed but not usable: see below)" : "")
                table.add([p.id, p.displayName, path])
            }
            if d.installed.isEmpty {
                print("no agent found on \(h.name)")
            } else {
                table.print()
            }
            for p in providers { if let why = d.unusable[p.id] { note("\(p.id): \(why)") } }
            let age = Int(Date().timeIntervalSince(d.probedAt))
            note("probed \(age) s ago\(cached ? " (cached; --refresh probes again)" : ""); tmux: \(d.tmuxVersion ?? "missing")")
        }
    }
}

/// Detections kept between runs, in `$XDG_CACHE_HOME/agent-sessions/` (else
/// `~/.cache/agent-sessions/`), for `AgentDetection.cacheLifetime`.
struct DetectionCache {
    let path: String
    /// What the probe depended on (the binaries looked for, the search path): a cached
    /// answer for other settings is not used.
    let settings: [String]

    init(environment: [String: String], hostID: HostID, settings: [String]) {
        self.settings = settings
        let base: String
        if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") {
            base = xdg
        } else {
            base = (environment["HOME"] ?? NSHomeDirectory()) + "/.cache"
        }
        path = base + "/agent-sessions/agents-\(hostID).json"
    }

    private struct Entry: Codable {
        var installed: [String: String]
        var unusable: [String: String]?
        var tmuxVersion: String?
        var hasGit: Bool
        var loginShell: String
        var probedAt: Date
        var settings: [String]
    }

    func load() -> AgentDetection? {
        guard let data = FileManager.default.contents(atPath: path),
              let e = try? JSONDecoder().decode(Entry.self, from: data),
              Date().timeIntervalSince(e.probedAt) < AgentDetection.cacheLifetime, e.probedAt <= Date(), e.settings == settings
        else { return nil }
        var d = AgentDetection(installed: e.installed, tmuxVersion: e.tmuxVersion, hasGit: e.hasGit,
                               loginShell: e.loginShell, probedAt: e.probedAt)
        d.unusable = e.unusable ?? [:]
        return d
    }

    /// Best effort: a cache that cannot be written is only not used.
    func save(_ d: AgentDetection) {
        let dir = (path as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                 attributes: [.posixPermissions: 0o700])
        let e = Entry(installed: d.installed, unusable: d.unusable, tmuxVersion: d.tmuxVersion, hasGit: d.hasGit,
                      loginShell: d.loginShell,
                      probedAt: d.probedAt, settings: settings)
        if let data = try? JSONEncoder().encode(e) { try? data.write(to: URL(fileURLWithPath: path), options: .atomic) }
    }
}

/// Host keys on first use: a key known_hosts trusts is accepted, a different one refused
/// (like ssh, the host may be an impostor), an unknown host's key accepted and kept to be
/// recorded once the connection has authenticated.
final class FirstUseTrust: Sendable {
    let knownHosts: SSHKnownHostsStore
    private let seen = Mutex<[(host: String, port: Int, key: SSHHostKey)]>([])

    init(knownHosts: SSHKnownHostsStore) { self.knownHosts = knownHosts }

    var firstSeen: [(host: String, port: Int, key: SSHHostKey)] { seen.withLock { $0 } }

    var policy: SSHHostKeyPolicy {
        .custom { [self] context in
            let known = try await knownHosts.lookup(host: context.host, port: context.port)
            let name = SSHKnownHostsFile.lookupName(host: context.host, port: context.port)
            if known.revoked.contains(context.presentedKey) {
                return .reject(reason: "the host key of \(name) is marked revoked in \(knownHosts.path)")
            }
            if known.keys.contains(context.presentedKey) { return .accept }
            if known.keys.isEmpty {
                seen.withLock { $0.append((context.host, context.port, context.presentedKey)) }
                return .accept
            }
            return .reject(reason: "the host key of \(name) (\(context.presentedKey.sha256Fingerprint)) is not the one \(knownHosts.path) has: the host may be an impostor")
        }
    }
}

/// The options that say how the OpenSSH configuration is read, as ssh takes them.
struct OpenSSHOptions: ParsableArguments {
    @Option(name: .customShort("F"), help: ArgumentHelp("Read this ssh configuration file instead of ~/.ssh/config.", valueName: "file"))
    var configFile: String?
    @Option(name: .customShort("o"), help: ArgumentHelp("An ssh option, as ssh -o takes it (Port=2222); repeatable.", valueName: "option"))
    var options: [String] = []
    @Flag(help: "Let a `Match exec` of the configuration run its command (refused otherwise).")
    var allowMatchExec = false

    var given: Bool { configFile != nil || !options.isEmpty || allowMatchExec }

    /// The reference a record keeps: the -F file made absolute (the store outlives this
    /// directory), the -o options as given.
    func reference(alias: String) throws -> OpenSSHHostReference {
        var file = configFile.map { ($0 as NSString).expandingTildeInPath }
        if let f = file, f != "none", !f.hasPrefix("/") { file = FileManager.default.currentDirectoryPath + "/" + f }
        if let f = file, f != "none", !FileManager.default.isReadableFile(atPath: f) {
            throw Failure.usage("cannot read the ssh configuration file \(f)")
        }
        guard !alias.isEmpty, !alias.contains(where: { $0.isWhitespace || $0 == "/" }) else {
            throw Failure.usage("\(alias) is not a host name")
        }
        return OpenSSHHostReference(alias: alias, configFile: file, options: options, allowsMatchExec: allowMatchExec)
    }
}

extension HostRecord {
    /// `user@host:port`, or the ssh name (`ssh gpu-1`) with what the record sets over it.
    var destination: String {
        guard let openSSH else { return HostSpec(user: user, address: address, port: port).description }
        return "ssh " + openSSH.alias + (user.isEmpty ? "" : " -l \(user)") + (port == 0 ? "" : " -p \(port)")
            + (openSSH.configFile.map { " -F \($0)" } ?? "")
    }

    /// What `hosts add` reports: the destination and how it is reached.
    var destinationText: String {
        destination + (jumpHost.map { " via \($0)" } ?? "")
    }

    var authenticationText: String {
        switch authentication {
        case .keyFiles(let paths): return "key " + paths.map { ($0 as NSString).lastPathComponent }.joined(separator: ",")
        case .sshAgent: return "ssh-agent"
        case .passwordPrompt: return "password"
        case .openSSH: return "ssh config"
        }
    }

    var hostKeyText: String { hostKeyFingerprint.map { "pinned " + $0 } ?? (openSSH != nil ? "ssh config" : "known_hosts") }
}
