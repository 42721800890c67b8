/// One CLI coding agent, as data: how to find it, start it, hand it a prompt and
/// resume it. The registry (`AgentProvider.all`) holds the agents the engine knows;
/// callers adjust one per host or project with `AgentProviderSettings`.
public struct AgentProvider: Sendable, Hashable, Identifiable {
    /// How the first prompt reaches the agent.
    public enum PromptDelivery: Sendable, Hashable {
        /// As the last argument: `claude "fix the test"`.
        case positional
        /// After a flag: `gemini -i "fix the test"`.
        case flag(String)
        /// Typed into the agent's screen once it started (for TUIs that ignore an argv
        /// prompt); a prompt of several lines goes in bracketed paste.
        case typed
        /// The agent takes no first prompt; the user types it.
        case none
    }

    /// How the agent finds its earlier conversation.
    public enum SessionTracking: Sendable, Hashable {
        /// Only the generic resume flags ("the last one in this directory").
        case none
        /// Claude Code: a session id chosen up front (`--session-id <uuid>`), resumed
        /// with `--resume <uuid>`; the transcript on the host says which of the two.
        case claudeSessionID
        /// Codex: the thread id the agent records in `~/.codex/state_5.sqlite`, resumed
        /// with `codex resume <id>`.
        case codexThread
    }

    /// Stable id (`claude`); also the prefix of the PTY ids and tmux session names.
    public var id: String
    public var displayName: String
    /// The executable looked up on the host's PATH (`claude`, `cursor-agent`).
    public var binary: String
    /// Arguments always given after the resume flags (`goose run -s`).
    public var defaultArguments: [String]
    /// The flag that lets the agent act without asking (`--yolo`), when it has one.
    public var autoApproveFlag: String?
    public var promptDelivery: PromptDelivery
    /// Arguments that continue the earlier conversation (`--continue`), when it can.
    public var resumeArguments: [String]
    public var sessionTracking: SessionTracking
    /// How to install it, shown when it is missing on a host.
    public var installHint: String
    /// Arguments that print the version and exit (`--version`; some use `help`).
    public var versionArguments: [String]

    public init(id: String, displayName: String, binary: String, defaultArguments: [String] = [],
                autoApproveFlag: String? = nil, promptDelivery: PromptDelivery, resumeArguments: [String] = [],
                sessionTracking: SessionTracking = .none, installHint: String, versionArguments: [String] = ["--version"])
    {
        self.id = id
        self.displayName = displayName
        self.binary = binary
        self.defaultArguments = defaultArguments
        self.autoApproveFlag = autoApproveFlag
        self.promptDelivery = promptDelivery
        self.resumeArguments = resumeArguments
        self.sessionTracking = sessionTracking
        self.installHint = installHint
        self.versionArguments = versionArguments
    }

    /// Whether the agent can take a first prompt at all.
    public var acceptsPrompt: Bool { promptDelivery != .none }
    /// Whether the agent can continue an earlier conversation.
    public var canResume: Bool { !resumeArguments.isEmpty || sessionTracking != .none }
}
