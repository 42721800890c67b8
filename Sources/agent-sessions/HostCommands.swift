import AgentSessions
import ArgumentParser
import Foundation
import SSHKit
import ServerTransport
import Synchronization

struct Hosts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add, list, test and remove the machines agents run on.",
        subcommands: [Add.self, List.self, Test.self, Remove.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a host: connect once, check its host key and what it has installed.",
            discussion: """
                Without --fingerprint, the host key is checked against ~/.ssh/known_hosts like ssh does; a host seen for the first time has its key recorded there (hashed) and the fingerprint shown, like StrictHostKeyChecking=accept-new. With --fingerprint, the key is pinned in the store and known_hosts is not used for it.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "What to call the host (letters, digits, . _ -).") var name: String
        @Argument(help: "user@host[:port]") var destination: String
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
                guard name.range(of: #"^[A-Za-z0-9._-]{1,64}$"#, options: .regularExpression) != nil else {
                    throw Failure.usage("\(name) is not a usable host name: use letters, digits, '.', '_' and '-'")
                }
                let spec = try HostSpec(parsing: destination)
                if let jump { _ = try HostSpec(parsing: jump, defaultUser: spec.user) }
                guard tmuxSocket.range(of: #"^[A-Za-z0-9._-]{1,64}$"#, options: .regularExpression) != nil else {
                    throw Failure.usage("\(tmuxSocket) is not a usable tmux server name: use letters, digits, '.', '_' and '-'")
                }
                if let fingerprint, !fingerprint.hasPrefix("SHA256:") || fingerprint.count < 20 {
                    throw Failure.usage("\(fingerprint) is not a SHA-256 fingerprint (SHA256:..., see ssh-keygen -lf)")
                }
                if try await context.store.hosts().contains(where: { $0.name == name }) {
                    throw Failure.refused("a host named \(name) exists already; remove it first or pick another name")
                }
                let authentication = try chosenAuthentication(context.environment)
                let record = HostRecord(name: name, address: spec.address, port: spec.port, user: spec.user,
                                        authentication: authentication, jumpHost: jump, hostKeyFingerprint: fingerprint,
                                        tmuxSocket: tmuxSocket)
                let trust = FirstUseTrust(store: HostConnection.knownHosts(environment: context.environment))
                // the jump host's key is checked or recorded on first use even when the host's is pinned
                let config = try HostConnection.configuration(for: record, environment: context.environment,
                                                              hostKeyPolicy: fingerprint == nil ? trust.policy : nil,
                                                              jumpHostKeyPolicy: trust.policy)
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
                    let dir = (trust.store.path as NSString).deletingLastPathComponent
                    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                            attributes: [.posixPermissions: 0o700])
                }
                for seen in trust.firstSeen {
                    try await trust.store.add(seen.key, host: seen.host, port: seen.port)
                    print("recorded the host key of \(SSHKnownHostsFile.lookupName(host: seen.host, port: seen.port)) in \(trust.store.path): \(seen.key.type) \(seen.key.sha256Fingerprint)")
                }
                try await context.store.save(record)
                let trustText = fingerprint.map { "pinned \($0)" } ?? "checked against \(trust.store.path)"
                print("added host \(name): \(spec), host key \(trustText)")
                if detection.tmuxVersion == nil {
                    note("warning: \(name) has no tmux; install it there: agents run in tmux so they outlive this command")
                }
                if !detection.hasGit { note("warning: \(name) has no git; install it there: tasks are git worktrees") }
            }
        }

        func chosenAuthentication(_ environment: [String: String]) throws -> HostAuthentication {
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
            if agent || environment["SSH_AUTH_SOCK"] != nil { return .sshAgent }
            throw Failure.usage("give --key <file>, --agent or --password (no ssh-agent is running)")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the hosts and whether each can be reached now.")
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Do not connect; list the records only.") var offline = false
        @Flag(help: "JSON, for scripts.") var json = false

        func run() async throws {
            try await Context.with(global) { context in
                let hosts = try await context.store.hosts()
                var states: [String: String] = [:]
                if !offline {
                    // all at once, but the hosts that ask for a password one after the other
                    let asking = hosts.filter { $0.authentication == .passwordPrompt }
                    states = await withTaskGroup(of: (String, String).self) { group in
                        for h in hosts where h.authentication != .passwordPrompt { group.addTask { (h.id, await probe(h, context)) } }
                        var all: [String: String] = [:]
                        for await (id, s) in group { all[id] = s }
                        return all
                    }
                    for h in asking { states[h.id] = await probe(h, context) }
                }
                let projects = try await context.store.projects(hostID: nil)
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
                try await context.orchestrator.connect(to: h)
                let ms = (ContinuousClock.now - start) / .milliseconds(1)
                return String(format: "ok (%.0f ms)", ms)
            } catch {
                return "failed: " + Failure.from(error).message.split(separator: ";")[0]
            }
        }
    }

    struct Test: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Connect to a host and show what agents need there.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The host's name.") var name: String

        func run() async throws {
            try await Context.with(global) { context in
                let h = try await context.host(named: name)
                let start = ContinuousClock.now
                let detection = try await context.orchestrator.detectAgents(on: h, refresh: true)
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

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a host and its projects and tasks from the store.",
            discussion: "Nothing on the host is touched. A host with tasks is refused unless --force.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The host's name.") var name: String
        @Flag(help: "Remove it even though it has tasks (their agents and worktrees stay on the host).") var force = false

        func run() async throws {
            try await Context.with(global) { context in
                let h = try await context.host(named: name)
                let projects = try await context.store.projects(hostID: h.id)
                var tasks = 0
                for p in projects { tasks += try await context.store.tasks(projectID: p.id).count }
                if tasks > 0 && !force {
                    throw Failure.refused("\(name) has \(tasks) task(s); delete them first (agent-sessions tasks delete) or pass --force")
                }
                for p in projects {
                    for t in try await context.store.tasks(projectID: p.id) {
                        for c in try await context.store.conversations(taskID: t.id) { try await context.store.remove(c.ptyID.description) }
                    }
                }
                try await context.store.deleteHost(id: h.id)
                print("removed host \(name) (\(projects.count) project(s), \(tasks) task(s))")
            }
        }
    }
}

/// `agents <host>`: the installed agents.
struct Agents: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
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
                detection = try await context.orchestrator.detectAgents(on: h, refresh: true)
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

    init(environment: [String: String], hostID: String, settings: [String]) {
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
    let store: SSHKnownHostsStore
    private let seen = Mutex<[(host: String, port: Int, key: SSHHostKey)]>([])

    init(store: SSHKnownHostsStore) { self.store = store }

    var firstSeen: [(host: String, port: Int, key: SSHHostKey)] { seen.withLock { $0 } }

    var policy: SSHHostKeyPolicy {
        .custom { [self] context in
            let known = try await store.lookup(host: context.host, port: context.port)
            let name = SSHKnownHostsFile.lookupName(host: context.host, port: context.port)
            if known.revoked.contains(context.presentedKey) {
                return .reject(reason: "the host key of \(name) is marked revoked in \(store.path)")
            }
            if known.keys.contains(context.presentedKey) { return .accept }
            if known.keys.isEmpty {
                seen.withLock { $0.append((context.host, context.port, context.presentedKey)) }
                return .accept
            }
            return .reject(reason: "the host key of \(name) (\(context.presentedKey.sha256Fingerprint)) is not the one \(store.path) has: the host may be an impostor")
        }
    }
}

extension HostRecord {
    var destination: String { HostSpec(user: user, address: address, port: port).description }

    var authenticationText: String {
        switch authentication {
        case .keyFiles(let paths): return "key " + paths.map { ($0 as NSString).lastPathComponent }.joined(separator: ",")
        case .sshAgent: return "ssh-agent"
        case .passwordPrompt: return "password"
        }
    }

    var hostKeyText: String { hostKeyFingerprint.map { "pinned " + $0 } ?? "known_hosts" }
}
