import SSHKit

/// A user's adjustments to one provider: another binary, other flags, extra arguments
/// and environment. Every field left nil keeps the registry's value.
public struct AgentProviderSettings: Sendable, Hashable {
    /// The executable, e.g. a full path or a wrapper (`/opt/agents/claude`).
    public var binary: String?
    public var defaultArguments: [String]?
    /// An empty string removes the flag.
    public var autoApproveFlag: String?
    public var promptDelivery: AgentProvider.PromptDelivery?
    public var resumeArguments: [String]?
    /// Appended after the auto-approve flag, before the prompt.
    public var extraArguments: [String]
    /// Exported before the agent starts. Names must match `^[A-Za-z_][A-Za-z0-9_]*$`.
    public var environment: [String: String]
    /// For its new tasks and chats: "continue" is typed once this long after a usage
    /// limit resets (nil, the default: they wait for the user). A task's own setting is
    /// `AgentOrchestrator.continueAfterLimit(_:taskID:)`.
    public var continueAfterLimit: Duration?

    public init(binary: String? = nil, defaultArguments: [String]? = nil, autoApproveFlag: String? = nil,
                promptDelivery: AgentProvider.PromptDelivery? = nil, resumeArguments: [String]? = nil,
                extraArguments: [String] = [], environment: [String: String] = [:], continueAfterLimit: Duration? = nil)
    {
        self.continueAfterLimit = continueAfterLimit
        self.binary = binary
        self.defaultArguments = defaultArguments
        self.autoApproveFlag = autoApproveFlag
        self.promptDelivery = promptDelivery
        self.resumeArguments = resumeArguments
        self.extraArguments = extraArguments
        self.environment = environment
    }

    /// Checks every value: environment names, no NUL byte anywhere, a non-empty binary.
    /// - Throws: `invalidEnvironmentName`, `invalidArgument`.
    public func validate() throws(AgentError) {
        for name in environment.keys.sorted() where !SSHShellQuoting.isValidEnvironmentName(name) {
            throw AgentError(.invalidEnvironmentName,
                             "'\(name)' is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
        }
        if let wait = continueAfterLimit, wait < .zero || wait > .seconds(86_400) {
            throw AgentError(.invalidArgument, "continueAfterLimit is 0 to 86400 seconds, got \(wait)")
        }
        if let binary, binary.isEmpty || binary.contains(where: \.isWhitespace) {
            throw AgentError(.invalidArgument, "the agent binary must be one word, got '\(binary)'")
        }
        var strings = (defaultArguments ?? []) + (resumeArguments ?? []) + extraArguments + environment.values
        strings += [binary, autoApproveFlag].compactMap { $0 }
        if case .flag(let f)? = promptDelivery { strings.append(f) }
        if strings.contains(where: { $0.utf8.contains(0) }) {
            throw AgentError(.invalidArgument, "an agent setting contains a NUL byte")
        }
    }

    /// The provider with these settings applied (the extra arguments and environment are
    /// not part of a provider; `AgentLaunch` adds them).
    public func applied(to provider: AgentProvider) -> AgentProvider {
        var p = provider
        if let binary { p.binary = binary }
        if let defaultArguments { p.defaultArguments = defaultArguments }
        if let autoApproveFlag { p.autoApproveFlag = autoApproveFlag.isEmpty ? nil : autoApproveFlag }
        if let promptDelivery { p.promptDelivery = promptDelivery }
        if let resumeArguments { p.resumeArguments = resumeArguments }
        return p
    }
}
