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
        /// The engine names the session up front and gives `flag <uuid>` on every start:
        /// the agent creates the session under that id the first time and resumes it
        /// afterwards (Kimi's `--session`). `store` says where the engine looks whether
        /// it existed.
        case chosenSessionID(flag: String, store: RecordedSessions)
        /// The agent names its sessions itself and records each with its directory in
        /// `store`; the engine finds the one it started there and resumes it with
        /// `flag <id>` (Vibe's and Hermes's `--resume`).
        case recordedSession(flag: String, store: RecordedSessions)
    }

    /// How the engine installs its status hooks for each session, as the agent documents
    /// it, never by rewriting the user's own files (see `AgentStatus`).
    public enum StatusHooks: Sendable, Hashable {
        /// None: the watcher reads the agent's screen.
        case none
        /// Claude Code: a settings file given with `--settings` (its hooks are added to the
        /// user's).
        case claudeSettings
        /// Codex: its `notify` program, as a `-c` override.
        case codexNotify
        /// Gemini CLI: a settings file named by `GEMINI_CLI_SYSTEM_DEFAULTS_PATH`, the lowest
        /// layer of its settings, whose hook lists are joined with the user's.
        case geminiSystemDefaults
        /// Qwen Code: a settings file named by `QWEN_CODE_SYSTEM_DEFAULTS_PATH`, likewise.
        case qwenSystemDefaults
        /// OpenCode: a plugin (one JavaScript file), listed in `OPENCODE_CONFIG_CONTENT`,
        /// whose plugin list is joined with those of the user's configuration.
        case openCodePlugin
    }

    /// Where an agent records its sessions on the host.
    public enum RecordedSessions: Sendable, Hashable {
        /// Mistral Vibe: `logs/session/unified/<id>/meta.json` under `$VIBE_HOME`
        /// (`~/.vibe`), with `session_id`, `start_time` and the `working_directory`.
        case vibe
        /// Hermes: the table `sessions(id, source, started_at, cwd)` of `state.db` under
        /// `$HERMES_HOME` (`~/.hermes`).
        case hermes
        /// Kimi: `sessions/<md5 of the directory>/<id>/` under `$KIMI_SHARE_DIR` (`~/.kimi`).
        case kimi
    }

    /// An installed binary the engine must not start, recognised by what its version
    /// arguments print.
    public struct RefusedBinary: Sendable, Hashable {
        /// Texts of the version output that mark it (any one is enough).
        public var markers: [String]
        /// What to tell the user.
        public var reason: String

        public init(markers: [String], reason: String) {
            self.markers = markers
            self.reason = reason
        }
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
    /// How the engine installs its status hooks.
    public var statusHooks: StatusHooks
    /// A shell command that installs the agent for the host's user, without root (npm
    /// packages into `~/.local`, whose `bin` detection looks in; Python agents into a
    /// virtualenv of their own or with uv): what `agents install` runs in the login
    /// environment. nil when the agent has no such command (see `installNote`).
    public var installCommand: String?
    /// What to know about installing it beyond the command (a version that must be kept),
    /// or how to install it by hand when it has no command.
    public var installNote: String?
    /// Where the agent keeps its login (see `AgentCredentials`), from its own source or
    /// documentation; empty when not known. A login kept in the system keyring (Codex,
    /// Gemini, Copilot and Goose can) is not seen.
    public var credentials: AgentCredentials
    /// Arguments that print the version and exit (`--version`; some use `help`).
    public var versionArguments: [String]
    /// A release of the binary that is not the agent (Kimi's deprecation stub), refused
    /// by detection and by every start.
    public var refusedBinary: RefusedBinary?
    /// Texts its screen shows once it reads input (Kimi's `── input` frame), for a prompt
    /// that is typed; empty: a screen that stopped changing is taken for ready.
    public var readyScreen: [String]

    public init(id: String, displayName: String, binary: String, defaultArguments: [String] = [],
                autoApproveFlag: String? = nil, promptDelivery: PromptDelivery, resumeArguments: [String] = [],
                sessionTracking: SessionTracking = .none, statusHooks: StatusHooks = .none, installCommand: String?,
                installNote: String? = nil, credentials: AgentCredentials = AgentCredentials(),
                versionArguments: [String] = ["--version"], refusedBinary: RefusedBinary? = nil, readyScreen: [String] = [])
    {
        self.id = id
        self.displayName = displayName
        self.binary = binary
        self.defaultArguments = defaultArguments
        self.autoApproveFlag = autoApproveFlag
        self.promptDelivery = promptDelivery
        self.resumeArguments = resumeArguments
        self.sessionTracking = sessionTracking
        self.statusHooks = statusHooks
        self.installCommand = installCommand
        self.installNote = installNote
        self.credentials = credentials
        self.versionArguments = versionArguments
        self.refusedBinary = refusedBinary
        self.readyScreen = readyScreen
    }

    /// How to install it, shown when it is missing on a host: its install command (with
    /// its note), else the note.
    public var installHint: String {
        guard let installCommand else { return installNote ?? "" }
        return installNote.map { "\(installCommand) (\($0))" } ?? installCommand
    }

    /// Whether the agent can take a first prompt at all.
    public var acceptsPrompt: Bool { promptDelivery != .none }
    /// Whether the agent can continue an earlier conversation.
    public var canResume: Bool { !resumeArguments.isEmpty || sessionTracking != .none }
}
