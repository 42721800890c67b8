/// What it takes to start one agent: its command line, its environment, and how its
/// first prompt gets in. Built by `AgentLaunch.plan`, a pure function, so every
/// provider's command line is testable without a host.
///
/// The command line is, in this order: the binary, the resume arguments (the provider's
/// generic ones or a session's own, e.g. `--resume <uuid>`), the default arguments, the
/// auto-approve flag, the user's extra arguments, then the prompt (positional or after
/// its flag).
public struct AgentLaunch: Sendable, Equatable {
    /// A prompt longer than this is written to a file in the worktree and the agent is
    /// asked to read it (argv and typed input both stay small).
    public static let promptFileThreshold = 16 * 1024
    /// Bracketed paste: a TUI takes the text between these as one paste, so the line
    /// breaks of a prompt do not submit it line by line.
    public static let pasteStart: [UInt8] = Array("\u{1B}[200~".utf8)
    public static let pasteEnd: [UInt8] = Array("\u{1B}[201~".utf8)

    /// How this start relates to the conversation before it.
    public enum Resume: Sendable, Hashable {
        /// A new conversation.
        case fresh
        /// The provider's generic resume arguments (`--continue`).
        case generic
        /// Arguments that name the conversation (`--resume <uuid>`, `resume <thread>`),
        /// in place of the generic ones.
        case exact([String])
    }

    /// A file the engine writes in the worktree before the start.
    public struct PromptFile: Sendable, Equatable {
        /// Relative to the worktree (under `.emdash/`, which git ignores there).
        public var relativePath: String
        public var contents: String
    }

    /// argv: `arguments[0]` is the binary.
    public var arguments: [String]
    public var environment: [String: String]
    /// Variables that install the engine's status hooks (`GEMINI_CLI_SYSTEM_DEFAULTS_PATH`),
    /// set only where the user's login and `environment` leave them unset, so a setting of
    /// the user's is never replaced (the agent's status then comes from its screen).
    public var hookEnvironment: [String: String] = [:]
    /// Bytes to type into the agent's terminal once it started (ending in a carriage
    /// return), for providers whose prompt is typed.
    public var typedInput: [UInt8]?
    public var promptFile: PromptFile?

    /// Plans a start.
    /// - Parameters:
    ///   - name: a stable name for the prompt file (the PTY id).
    ///   - prompt: nil or empty for none; ignored by providers that take none.
    /// - Throws: `invalidEnvironmentName`, `invalidArgument` (bad settings, a NUL in the prompt).
    /// - Parameter hookArguments: what installs the engine's status hooks (`--settings
    ///   <file>` for Claude), placed after the auto-approve flag, before the extra arguments.
    /// - Parameter hookEnvironment: the variables that install them for the agents that
    ///   take them from the environment (see `hookEnvironment`).
    public static func plan(_ provider: AgentProvider, settings: AgentProviderSettings = AgentProviderSettings(),
                            name: String, prompt: String?, autoApprove: Bool, resume: Resume,
                            hookArguments: [String] = [], hookEnvironment: [String: String] = [:]) throws(AgentError) -> AgentLaunch
    {
        try settings.validate()
        if let prompt, prompt.utf8.contains(0) { throw AgentError(.invalidArgument, "the prompt contains a NUL byte") }
        let p = settings.applied(to: provider)
        var argv = [p.binary]
        switch resume {
        case .fresh: break
        case .generic: argv += p.resumeArguments
        case .exact(let args): argv += args
        }
        argv += p.defaultArguments
        if autoApprove, let flag = p.autoApproveFlag { argv.append(flag) }
        argv += hookArguments
        argv += settings.extraArguments

        var launch = AgentLaunch(arguments: argv, environment: settings.environment, typedInput: nil, promptFile: nil)
        launch.hookEnvironment = hookEnvironment.filter { settings.environment[$0.key] == nil }
        guard var text = prompt, !text.isEmpty, p.acceptsPrompt else { return launch }
        if text.utf8.count > promptFileThreshold {
            let file = PromptFile(relativePath: ".emdash/prompts/\(fileSafe(name)).md", contents: text)
            launch.promptFile = file
            text = "Read the task description in the file \(file.relativePath) (relative to the current directory) and carry it out."
        }
        switch p.promptDelivery {
        case .positional: launch.arguments.append(text)
        case .flag(let flag): launch.arguments += [flag, text]
        case .typed: launch.typedInput = typed(text)
        case .none: break
        }
        return launch
    }

    /// The keystrokes that type `text` and submit it: text of several lines inside a
    /// bracketed paste, then a carriage return.
    public static func typed(_ text: String) -> [UInt8] {
        let bytes = Array(text.utf8)
        if bytes.contains(UInt8(ascii: "\n")) || bytes.contains(UInt8(ascii: "\r")) {
            return pasteStart + bytes + pasteEnd + [UInt8(ascii: "\r")]
        }
        return bytes + [UInt8(ascii: "\r")]
    }

    private static func fileSafe(_ s: String) -> String {
        String(s.map { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") ? $0 : "-" })
    }
}
