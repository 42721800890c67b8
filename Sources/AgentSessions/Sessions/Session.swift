import SSHKit
import ServerTransport

/// What to start: one agent, in one directory, as one PTY id.
public struct AgentSessionSpec: Sendable, Hashable {
    public var ptyID: AgentPTYID
    public var provider: AgentProvider
    public var settings: AgentProviderSettings
    /// The worktree (absolute, or `~/…`).
    public var workingDirectory: String
    public var prompt: String?
    public var autoApprove: Bool
    public var resume: AgentLaunch.Resume
    public var size: SSHTerminalSize
    /// Install the agent's status hooks (Claude's `--settings`, Codex's `notify`) where it
    /// has them, so `status(of:)` hears from the agent instead of guessing from its screen.
    public var statusHooks: Bool
    /// A shell command run in the working directory before the agent, in its session (its
    /// output on the agent's screen), ended after `setupTimeout`; the agent starts
    /// whatever its outcome, which is written where `setupOutcome` reads it.
    public var setupCommand: String?
    /// How long the setup may run before it is ended (its whole process group).
    public var setupTimeout: Duration = .seconds(600)

    public init(ptyID: AgentPTYID, provider: AgentProvider, settings: AgentProviderSettings = AgentProviderSettings(),
                workingDirectory: String, prompt: String? = nil, autoApprove: Bool = false,
                resume: AgentLaunch.Resume = .fresh, size: SSHTerminalSize = SSHTerminalSize(columns: 120, rows: 40),
                statusHooks: Bool = true, setupCommand: String? = nil)
    {
        self.statusHooks = statusHooks
        self.setupCommand = setupCommand
        self.ptyID = ptyID
        self.provider = provider
        self.settings = settings
        self.workingDirectory = workingDirectory
        self.prompt = prompt
        self.autoApprove = autoApprove
        self.resume = resume
        self.size = size
    }
}

/// A started agent.
public struct AgentSession: Sendable, Hashable {
    public enum Container: Sendable, Hashable {
        /// In a session of the engine's tmux server: it keeps running when the
        /// connection drops, the laptop sleeps or this program ends.
        case tmux(name: String)
        /// On a plain PTY channel (the host has no tmux): it ends with the connection.
        case plainTerminal
    }

    public var ptyID: AgentPTYID
    public var host: ServerID
    public var container: Container
    /// Absolute.
    public var workingDirectory: String
    /// The command line it was started with (argv).
    public var arguments: [String]
    /// How this start continued the conversation before it (set by the orchestrator).
    public var resumeMethod: AgentResumeMethod = .new
    /// Whether the agent outlives a dropped connection (`tmux`).
    public var survivesDisconnect: Bool {
        if case .tmux = container { return true }
        return false
    }
    /// The tmux session's name (the PTY id), nil for a plain terminal.
    public var tmuxName: String? {
        if case .tmux(let name) = container { return name }
        return nil
    }
}
