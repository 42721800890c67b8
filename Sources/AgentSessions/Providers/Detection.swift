import Foundation
import SSHKit

/// What one probe learned about a host: which agents are installed, where, and the
/// facts a start depends on (tmux, git, the login shell). One remote command, however
/// many providers there are.
public struct AgentDetection: Sendable, Equatable {
    /// Provider id → the binary's path on the host, for the installed agents.
    public var installed: [String: String]
    /// Provider id → why the installed binary is not started (`AgentProvider.refusedBinary`:
    /// Kimi's deprecation stub). Such a provider is in `installed` too.
    public var unusable: [String: String] = [:]
    /// `tmux -V`, or nil without tmux.
    public var tmuxVersion: String?
    public var hasGit: Bool
    /// The login shell from the password database (`getent passwd`), else `$SHELL`.
    public var loginShell: String
    /// When the probe ran.
    public var probedAt: Date

    public init(installed: [String: String], tmuxVersion: String?, hasGit: Bool, loginShell: String, probedAt: Date) {
        self.installed = installed
        self.tmuxVersion = tmuxVersion
        self.hasGit = hasGit
        self.loginShell = loginShell
        self.probedAt = probedAt
    }

    /// The installed providers, in registry order.
    public var installedProviders: [AgentProvider] { AgentProvider.all.filter { installed[$0.id] != nil } }

    /// How long a detection is reused.
    public static let cacheLifetime: TimeInterval = 5 * 60

    struct Cached: Sendable {
        let detection: AgentDetection
        let providers: [String]
    }

    /// The probe: prints `agent<TAB>id<TAB>path` per installed provider and a few facts.
    static func script(providers: [AgentProvider], extraSearchPath: [String]) -> String {
        var s = AgentSearchPath.shellSnippet(extra: extraSearchPath) + "\n"
        s += "__sh=$(getent passwd \"$(id -un)\" 2>/dev/null | cut -d: -f7); printf 'shell\\t%s\\n' \"${__sh:-$SHELL}\"\n"
        s += "__t=$(tmux -V 2>/dev/null) && printf 'tmux\\t%s\\n' \"$__t\"\n"
        s += "command -v git >/dev/null 2>&1 && printf 'git\\t1\\n'\n"
        for p in providers {
            s += "__b=$(command -v \(SSHShellQuoting.quote(p.binary)) 2>/dev/null) && "
            s += "printf 'agent\\t%s\\t%s\\n' \(SSHShellQuoting.quote(p.id)) \"$__b\"\n"
            if let refused = p.refusedBinary, !refused.markers.isEmpty {
                // only with its version arguments: never started in a way that could run it
                let version = (["\"$__b\""] + p.versionArguments.map(SSHShellQuoting.quote)).joined(separator: " ")
                let patterns = refused.markers.map { "*\(SSHShellQuoting.quote($0))*" }.joined(separator: "|")
                s += "[ -n \"$__b\" ] && case \"$(\(version) </dev/null 2>&1 | head -c 4000)\" in "
                s += "\(patterns)) printf 'unusable\\t%s\\n' \(SSHShellQuoting.quote(p.id)) ;; esac\n"
                s += "__b=\n"
            }
        }
        s += "exit 0\n"
        return s
    }

    static func parse(_ text: String, at date: Date) -> AgentDetection {
        var d = AgentDetection(installed: [:], tmuxVersion: nil, hasGit: false, loginShell: "", probedAt: date)
        for line in text.split(separator: "\n") {
            let f = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            switch f.first {
            case "agent" where f.count == 3: d.installed[f[1]] = f[2]
            case "unusable" where f.count == 2:
                d.unusable[f[1]] = (try? AgentProvider.named(f[1]))?.refusedBinary?.reason ?? "not usable"
            case "tmux" where f.count == 2: d.tmuxVersion = f[1]
            case "git": d.hasGit = true
            case "shell" where f.count == 2: d.loginShell = f[1]
            default: break
            }
        }
        return d
    }
}

extension AgentHost {
    /// Which agents are installed on the host, and the facts a start depends on, from one
    /// remote command. Reused for 5 minutes unless `refresh`; `forgetCachedFacts()`
    /// (called on reconnect) drops it.
    public func detectAgents(_ providers: [AgentProvider] = AgentProvider.all, refresh: Bool = false)
        async throws(AgentError) -> AgentDetection
    {
        let ids = providers.map(\.id)
        if !refresh, let cached = detectionCache.withLock({ $0 }), cached.providers == ids,
           Date().timeIntervalSince(cached.detection.probedAt) < AgentDetection.cacheLifetime
        {
            return cached.detection
        }
        let script = AgentDetection.script(providers: providers, extraSearchPath: extraSearchPath)
        let r = try await run("/bin/sh", ["-c", script], what: "detecting agents")
        guard r.exitStatus == .exited(0) else {
            throw AgentError(.transport, "the agent probe failed on \(displayName) (\(r.exitStatus))", detail: r.stderrString)
        }
        let detection = AgentDetection.parse(r.stdoutString, at: Date())
        detectionCache.withLock { $0 = AgentDetection.Cached(detection: detection, providers: ids) }
        return detection
    }
}
