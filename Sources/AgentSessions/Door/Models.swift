import Foundation
import ServerTransport

// The orchestration's records: hosts → projects → tasks → conversations → terminal
// logs. Plain values, kept by an `AgentStore`. No secret is ever among them: a host
// says where its key file is or that the ssh-agent or a typed password is used, never
// the key or the password.

/// How a host authenticates; never the secret itself.
public enum HostAuthentication: Sendable, Hashable, Codable {
    /// Private key files on this machine (their paths), tried in order.
    case keyFiles([String])
    /// The keys of the running ssh-agent (`SSH_AUTH_SOCK`).
    case sshAgent
    /// A password asked on the terminal when connecting, never stored.
    case passwordPrompt
    /// What the user's OpenSSH configuration says, as `ssh` takes it: the agent
    /// (`IdentityAgent`), each `IdentityFile` with its certificates, keyboard-interactive,
    /// a password (for a host known by its ssh alias, `HostRecord.openSSH`).
    case openSSH
}

/// A host known by its name in the user's OpenSSH configuration. The record keeps the
/// name, not what it resolved to: it is resolved again at each connect, as `ssh ALIAS`
/// resolves it, so a change to the configuration takes effect on the next connect.
public struct OpenSSHHostReference: Sendable, Hashable, Codable {
    /// What ssh is given: `ssh ALIAS`.
    public var alias: String
    /// ssh's `-F`: this file instead of `~/.ssh/config` and `/etc/ssh/ssh_config`.
    public var configFile: String?
    /// ssh's `-o` options, as given (`"Port=2222"`); they win over the files.
    public var options: [String]
    /// Whether a `Match exec` of the configuration may run its command.
    public var allowsMatchExec: Bool

    public init(alias: String, configFile: String? = nil, options: [String] = [], allowsMatchExec: Bool = false) {
        self.alias = alias
        self.configFile = configFile
        self.options = options
        self.allowsMatchExec = allowsMatchExec
    }
}

/// A machine agents run on.
public struct HostRecord: Sendable, Hashable, Codable, Identifiable {
    /// Stable; also the host's `ServerID` in the connection monitor (`serverID`).
    public var id: HostID
    /// What the user calls it (`build-1`).
    public var name: String
    public var address: String
    public var port: Int
    public var user: String
    public var authentication: HostAuthentication
    /// `user@host[:port]` of a jump host, or nil.
    public var jumpHost: String?
    /// The host key's SHA-256 fingerprint, pinned when the host was added (nil: the
    /// known_hosts file decides).
    public var hostKeyFingerprint: String?
    /// The engine's tmux server on the host.
    public var tmuxSocket: String
    public var createdAt: Date
    /// Set for a host known by its ssh alias: the address, user and port are then what
    /// the configuration resolves at each connect, `address` holds the alias, and a
    /// `user` or `port` here (non-empty, non-zero) wins over the configuration as
    /// `ssh -l`/`-p` would. The other fields that are set (`authentication` other than
    /// `openSSH`, `jumpHost`, `hostKeyFingerprint`) win too.
    public var openSSH: OpenSSHHostReference?

    public init(id: HostID = .make(), name: String, address: String, port: Int = 22, user: String,
                authentication: HostAuthentication = .sshAgent, jumpHost: String? = nil,
                hostKeyFingerprint: String? = nil, tmuxSocket: String = "sshkit-agents", createdAt: Date = Date(),
                openSSH: OpenSSHHostReference? = nil) {
        self.openSSH = openSSH
        self.id = id
        self.name = name
        self.address = address
        self.port = port
        self.user = user
        self.authentication = authentication
        self.jumpHost = jumpHost
        self.hostKeyFingerprint = hostKeyFingerprint
        self.tmuxSocket = tmuxSocket
        self.createdAt = createdAt
    }

    public var serverID: ServerID { ServerID(id.rawValue) }

    /// How messages name the host: `build-1 (me@10.0.0.5:22)`, or `gpu-1 (ssh gpu-1)`
    /// for a host known by its ssh alias.
    public var displayName: String {
        if let openSSH { return "\(name) (ssh \(openSSH.alias))" }
        let address = self.address.contains(":") ? "[\(self.address)]" : self.address
        return "\(name) (\(user)@\(address):\(port))"
    }
}

/// A git checkout on a host.
public struct ProjectRecord: Sendable, Hashable, Codable, Identifiable {
    public var id: ProjectID
    public var hostID: HostID
    public var name: String
    /// Absolute, or `~/…`.
    public var path: String
    /// The ref new tasks start from when none is given (nil: the current branch).
    public var defaultBaseRef: String?
    public var createdAt: Date
    /// A shell command run in each new task's worktree before its agent starts, inside
    /// the agent's tmux session (its output is on the agent's screen), with a time limit;
    /// a failure is reported there and the agent starts anyway.
    public var setupCommand: String?
    /// A shell command run in a task's worktree before it is archived or deleted.
    public var teardownCommand: String?
    /// Whether the base is fetched from the project's remote before a task's worktree is
    /// made (nil: yes, when the project has a remote).
    public var fetchesBase: Bool?

    public init(id: ProjectID = .make(), hostID: HostID, name: String, path: String, defaultBaseRef: String? = nil,
                createdAt: Date = Date(), setupCommand: String? = nil, teardownCommand: String? = nil, fetchesBase: Bool? = nil) {
        self.id = id
        self.hostID = hostID
        self.name = name
        self.path = path
        self.defaultBaseRef = defaultBaseRef
        self.createdAt = createdAt
        self.setupCommand = setupCommand
        self.teardownCommand = teardownCommand
        self.fetchesBase = fetchesBase
    }
}

/// A piece of work: one worktree on its own branch, a main agent and maybe more chats.
public struct TaskRecord: Sendable, Hashable, Codable, Identifiable {
    public var id: TaskID
    public var projectID: ProjectID
    public var title: String
    public var worktree: Worktree
    public var createdAt: Date
    /// Set when archived: its agents were stopped, its worktree kept.
    public var archivedAt: Date?
    /// The first prompt the task was started with (a pull request's body by default).
    public var prompt: String?
    /// The task's own port on its host (`PORT` in its agents' and setup's environment),
    /// unique there among the tasks of every project.
    public var port: Int?
    /// Set when the task is one of several attempts at the same work (see
    /// `AgentOrchestrator.createAttempts`).
    public var attempt: TaskAttempt?

    public init(id: TaskID = .make(), projectID: ProjectID, title: String, worktree: Worktree,
                createdAt: Date = Date(), archivedAt: Date? = nil, prompt: String? = nil, port: Int? = nil,
                attempt: TaskAttempt? = nil) {
        self.attempt = attempt
        self.id = id
        self.projectID = projectID
        self.title = title
        self.worktree = worktree
        self.createdAt = createdAt
        self.archivedAt = archivedAt
        self.prompt = prompt
        self.port = port
    }
}

extension TaskRecord {
    /// The title, with the attempt's label for one of several attempts not picked
    /// (`Fix the flaky test [claude-2]`).
    public var displayTitle: String {
        guard let attempt, attempt.pickedAt == nil else { return title }
        return "\(title) [\(attempt.label)]"
    }
}

/// One of several attempts at the same work: its own task (worktree, branch, agent, on
/// its own host), started from the same base commit as the others of its group.
public struct TaskAttempt: Sendable, Hashable, Codable {
    /// The id the attempts of one piece of work share.
    public var group: String
    /// Which attempt it is: its agent and number (`claude-2`), unique in the group.
    public var label: String
    /// When it was picked as the work's result (`AgentOrchestrator.pickAttempt`); at most
    /// one attempt of a group is picked.
    public var pickedAt: Date?

    public init(group: String, label: String, pickedAt: Date? = nil) {
        self.group = group
        self.label = label
        self.pickedAt = pickedAt
    }
    /// Whether attempt `a` comes before `b` in lists: by agent, then by number
    /// (`claude-2` before `claude-10`).
    public static func inOrder(_ a: String, _ b: String) -> Bool {
        func parts(_ l: String) -> (String, Int) {
            guard let dash = l.lastIndex(of: "-"), let n = Int(l[l.index(after: dash)...]) else { return (l, 0) }
            return (String(l[..<dash]), n)
        }
        let (x, y) = (parts(a), parts(b))
        return x.0 != y.0 ? x.0 < y.0 : x.1 < y.1
    }
}

extension [TaskRecord] {
    /// The attempts among these tasks in their label order (see `TaskAttempt.inOrder`).
    public var inAttemptOrder: [TaskRecord] {
        sorted { TaskAttempt.inOrder($0.attempt?.label ?? "", $1.attempt?.label ?? "") }
    }
}

/// One agent of a task: the main one, or an added chat with another (or the same) agent.
public struct ConversationRecord: Sendable, Hashable, Codable, Identifiable {
    public enum State: Sendable, Hashable, Codable {
        case running
        /// Stopped by the user (its scrollback was saved in the terminal log).
        case stopped
        case exited(Int32)
        case signaled(Int32)
        /// Its session vanished (the host rebooted, someone killed the tmux server).
        case gone
    }

    public var id: ChatID
    public var taskID: TaskID
    public var providerID: String
    public var kind: AgentPTYID.Kind
    public var autoApprove: Bool
    /// The command line it was last started with.
    public var arguments: [String]
    /// Whether it runs in tmux (survives disconnects) or on a plain terminal.
    public var survivesDisconnect: Bool
    public var state: State
    public var createdAt: Date
    public var lastStartedAt: Date?

    public init(id: ChatID = .make(), taskID: TaskID, providerID: String, kind: AgentPTYID.Kind,
                autoApprove: Bool = false, arguments: [String] = [], survivesDisconnect: Bool = true,
                state: State = .running, createdAt: Date = Date(), lastStartedAt: Date? = nil) {
        self.id = id
        self.taskID = taskID
        self.providerID = providerID
        self.kind = kind
        self.autoApprove = autoApprove
        self.arguments = arguments
        self.survivesDisconnect = survivesDisconnect
        self.state = state
        self.createdAt = createdAt
        self.lastStartedAt = lastStartedAt
    }

    /// The PTY id: `{provider}-main-{task id}` for the main agent,
    /// `{provider}-chat-{conversation id}` for a chat (Emdash's names).
    public var ptyID: AgentPTYID {
        AgentPTYID(providerID: providerID, kind: kind, suffix: kind == .main ? taskID.rawValue : id.rawValue)
    }
}

extension AgentPTYID.Kind: Codable {}

/// A conversation's scrollback, saved when it was stopped (so it can be read after its
/// session is gone).
public struct TerminalLogRecord: Sendable, Hashable, Codable {
    public var conversationID: ChatID
    public var capturedAt: Date
    public var text: String

    public init(conversationID: ChatID, capturedAt: Date = Date(), text: String) {
        self.conversationID = conversationID
        self.capturedAt = capturedAt
        self.text = text
    }
}
