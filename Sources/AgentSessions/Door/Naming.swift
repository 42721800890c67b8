import SSHKit

/// The names the engine gives things on a host. They follow Emdash's formats exactly, so
/// the worktrees, branches and sessions of Emdash users stay recognisable.
public enum AgentNaming {
    /// A task title as a path and branch component: lowercase, every character outside
    /// `[a-z0-9-]` turned into `-`, runs of `-` collapsed, `-` trimmed from both ends;
    /// `task` when nothing is left. "Fix the flaky test!" → `fix-the-flaky-test`.
    public static func slug(_ title: String) -> String {
        var out = ""
        var lastDash = false
        for scalar in title.lowercased().unicodeScalars {
            let keep = ("a"..."z").contains(scalar) || ("0"..."9").contains(scalar)
            if keep {
                out.unicodeScalars.append(scalar)
                lastDash = false
            } else if !lastDash {
                out.append("-")
                lastDash = true
            }
        }
        let trimmed = out.drop(while: { $0 == "-" })
        let result = String(trimmed.reversed().drop(while: { $0 == "-" }).reversed())
        return result.isEmpty ? "task" : result
    }

    /// `<slug>-<unix ms>`: the worktree's directory name and the branch's last part.
    public static func worktreeName(title: String, unixMilliseconds: Int64) -> String {
        "\(slug(title))-\(unixMilliseconds)"
    }

    /// `<project>/.emdash/worktrees/<name>`.
    public static func worktreePath(projectPath: String, name: String) -> String {
        let base = projectPath.hasSuffix("/") ? String(projectPath.dropLast()) : projectPath
        return "\(base)/.emdash/worktrees/\(name)"
    }

    /// `emdash/<name>`.
    public static func branchName(_ name: String) -> String { "emdash/\(name)" }

    /// A session's UUID derived from a task or conversation id: the first 16 bytes of
    /// its SHA-256, with the RFC 4122 version (4) and variant bits set, as 8-4-4-4-12
    /// lowercase hex. The same id always gives the same UUID, on every machine.
    public static func sessionUUID(for id: String) -> String {
        var b = Array(CoreDigest.sha256(Array(id.utf8)).prefix(16))
        b[6] = (b[6] & 0x0f) | 0x40
        b[8] = (b[8] & 0x3f) | 0x80
        let hex = b.map { byte in
            let s = String(byte, radix: 16)
            return s.count == 1 ? "0" + s : s
        }.joined()
        let c = Array(hex)
        return [c[0..<8], c[8..<12], c[12..<16], c[16..<20], c[20..<32]].map { String($0) }.joined(separator: "-")
    }

    /// How Claude Code names a working directory under `~/.claude/projects/`: every
    /// character that is not an ASCII letter or digit becomes `-`
    /// (`/srv/app/.emdash/worktrees/x-1` → `-srv-app--emdash-worktrees-x-1`).
    public static func claudeProjectDirectory(forWorkingDirectory cwd: String) -> String {
        String(cwd.unicodeScalars.map { s -> Character in
            ("a"..."z").contains(s) || ("A"..."Z").contains(s) || ("0"..."9").contains(s) ? Character(s) : "-"
        })
    }
}

/// The id of one agent terminal: `{provider}-main-{taskId}` for a task's first agent,
/// `{provider}-chat-{conversationId}` for each further chat. It also names the tmux
/// session on the host, so the sessions the engine owns can be listed and parsed.
public struct AgentPTYID: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable {
        case main, chat
    }

    public var providerID: String
    public var kind: Kind
    /// The task id (main) or conversation id (chat): what the session UUID is made from.
    public var suffix: String

    public init(providerID: String, kind: Kind, suffix: String) {
        self.providerID = providerID
        self.kind = kind
        self.suffix = suffix
    }

    public var description: String { "\(providerID)-\(kind.rawValue)-\(suffix)" }

    /// Parses an id, trying the known provider ids longest first (so `continue-main-x`
    /// is Continue's, whatever shorter id it starts with); nil for anything else.
    public init?(parsing text: String) {
        for id in AgentProvider.idsLongestFirst where text.hasPrefix(id + "-") {
            let rest = text.dropFirst(id.count + 1)
            for kind in [Kind.main, .chat] where rest.hasPrefix(kind.rawValue + "-") {
                let suffix = rest.dropFirst(kind.rawValue.count + 1)
                guard !suffix.isEmpty else { return nil }
                self.init(providerID: id, kind: kind, suffix: String(suffix))
                return
            }
        }
        return nil
    }

    /// The deterministic session UUID of this terminal's conversation (from the suffix).
    public var sessionUUID: String { AgentNaming.sessionUUID(for: suffix) }
}
