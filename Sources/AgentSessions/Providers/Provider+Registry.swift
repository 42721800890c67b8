extension AgentProvider {
    /// Every agent the engine knows, in a stable order (Emdash's registry, with its stale
    /// flags fixed: `cn` and `vibe` take the prompt positionally, since `cn -p` and
    /// `vibe --prompt` start headless runs; `cursor` and `kiro`, the editor launchers,
    /// are never taken for the agents `cursor-agent` and `kiro-cli`).
    public static let all: [AgentProvider] = [
        AgentProvider(id: "codex", displayName: "Codex", binary: "codex", autoApproveFlag: "--full-auto",
                      promptDelivery: .positional, resumeArguments: ["resume", "--last"], sessionTracking: .codexThread,
                      statusHooks: .codexNotify, installHint: "npm install -g @openai/codex"),
        AgentProvider(id: "claude", displayName: "Claude Code", binary: "claude",
                      autoApproveFlag: "--dangerously-skip-permissions", promptDelivery: .positional,
                      resumeArguments: ["-c", "-r"], sessionTracking: .claudeSessionID, statusHooks: .claudeSettings,
                      installHint: "curl -fsSL https://claude.ai/install.sh | bash"),
        AgentProvider(id: "cursor", displayName: "Cursor", binary: "cursor-agent", autoApproveFlag: "-f",
                      promptDelivery: .positional, installHint: "curl https://cursor.com/install -fsS | bash"),
        AgentProvider(id: "gemini", displayName: "Gemini", binary: "gemini", autoApproveFlag: "--yolo",
                      promptDelivery: .flag("-i"), resumeArguments: ["--resume"], statusHooks: .geminiSystemDefaults,
                      installHint: "npm install -g @google/gemini-cli"),
        AgentProvider(id: "qwen", displayName: "Qwen Code", binary: "qwen", autoApproveFlag: "--yolo",
                      promptDelivery: .flag("-i"), resumeArguments: ["--continue"], statusHooks: .qwenSystemDefaults,
                      installHint: "npm install -g @qwen-code/qwen-code"),
        AgentProvider(id: "droid", displayName: "Droid", binary: "droid", promptDelivery: .positional,
                      resumeArguments: ["-r"], installHint: "curl -fsSL https://app.factory.ai/cli | sh"),
        AgentProvider(id: "amp", displayName: "Amp", binary: "amp", autoApproveFlag: "--dangerously-allow-all",
                      promptDelivery: .typed, installHint: "npm install -g @sourcegraph/amp@latest"),
        AgentProvider(id: "opencode", displayName: "OpenCode", binary: "opencode", promptDelivery: .typed,
                      statusHooks: .openCodePlugin, installHint: "npm install -g opencode-ai"),
        AgentProvider(id: "copilot", displayName: "GitHub Copilot", binary: "copilot", autoApproveFlag: "--allow-all-tools",
                      promptDelivery: .none, installHint: "npm install -g @github/copilot"),
        AgentProvider(id: "charm", displayName: "Charm Crush", binary: "crush", autoApproveFlag: "--yolo",
                      promptDelivery: .none, installHint: "npm install -g @charmland/crush"),
        AgentProvider(id: "auggie", displayName: "Auggie", binary: "auggie", defaultArguments: ["--allow-indexing"],
                      promptDelivery: .positional, installHint: "npm install -g @augmentcode/auggie"),
        AgentProvider(id: "goose", displayName: "Goose", binary: "goose", defaultArguments: ["run", "-s"],
                      promptDelivery: .flag("-t"),
                      installHint: "curl -fsSL https://github.com/block/goose/releases/download/stable/download_cli.sh | bash"),
        // kimi-cli 1.51.0: `-c` is a one-shot prompt (the agent exits after its answer), so
        // the prompt is typed; `--session <uuid>` creates that session or resumes it
        AgentProvider(id: "kimi", displayName: "Kimi", binary: "kimi", autoApproveFlag: "--yolo",
                      promptDelivery: .typed, sessionTracking: .chosenSessionID(flag: "--session", store: .kimi),
                      installHint: "uv tool install --python 3.13 kimi-cli==1.51.0 (later releases are a stub)",
                      refusedBinary: RefusedBinary(
                          markers: ["no longer maintained", "已停止维护"],
                          reason: "this kimi is kimi-cli's deprecation stub (1.52 or later), which downloads and runs "
                              + "another installer when started; install kimi-cli==1.51.0"),
                      readyScreen: ["── input"]),
        AgentProvider(id: "kilocode", displayName: "Kilo Code", binary: "kilocode", autoApproveFlag: "--auto",
                      promptDelivery: .positional, resumeArguments: ["--continue"],
                      installHint: "npm install -g @kilocode/cli"),
        AgentProvider(id: "kiro", displayName: "Kiro", binary: "kiro-cli", defaultArguments: ["chat"],
                      promptDelivery: .positional, installHint: "curl -fsSL https://cli.kiro.dev/install | bash"),
        AgentProvider(id: "rovo", displayName: "Rovo Dev", binary: "acli", defaultArguments: ["rovodev", "run"],
                      autoApproveFlag: "--yolo", promptDelivery: .none,
                      installHint: "install the Atlassian CLI (acli), then: acli rovodev auth login"),
        AgentProvider(id: "cline", displayName: "Cline", binary: "cline", autoApproveFlag: "--yolo",
                      promptDelivery: .positional, installHint: "npm install -g cline", versionArguments: ["help"]),
        AgentProvider(id: "continue", displayName: "Continue", binary: "cn", promptDelivery: .positional,
                      resumeArguments: ["--resume"], installHint: "npm install -g @continuedev/cli"),
        AgentProvider(id: "codebuff", displayName: "Codebuff", binary: "codebuff", promptDelivery: .positional,
                      installHint: "npm install -g codebuff"),
        // mistral-vibe 3.0: `--continue` takes the directory's newest session, `--resume <id>`
        // the one the engine found for this chat
        AgentProvider(id: "mistral", displayName: "Mistral Vibe", binary: "vibe", autoApproveFlag: "--auto-approve",
                      promptDelivery: .positional, resumeArguments: ["--continue"],
                      sessionTracking: .recordedSession(flag: "--resume", store: .vibe),
                      installHint: "uv tool install --python 3.13 mistral-vibe (Python 3.12 or newer)"),
        AgentProvider(id: "pi", displayName: "Pi", binary: "pi", promptDelivery: .positional, resumeArguments: ["-c"],
                      installHint: "npm install -g @mariozechner/pi-coding-agent"),
        // hermes-agent 0.19: `--continue` takes the user's newest session in any directory
        // (another task's), so only `--resume <id>` of the session found for this chat
        AgentProvider(id: "hermes", displayName: "Hermes Agent", binary: "hermes", autoApproveFlag: "--yolo",
                      promptDelivery: .typed, sessionTracking: .recordedSession(flag: "--resume", store: .hermes),
                      installHint: "pip install hermes-agent", readyScreen: ["❯"]),
    ]

    private static let byID: [String: AgentProvider] = Dictionary(uniqueKeysWithValues: all.map { ($0.id, $0) })

    /// The provider with this id.
    /// - Throws: `unknownProvider`.
    public static func named(_ id: String) throws(AgentError) -> AgentProvider {
        guard let p = byID[id] else {
            throw AgentError(.unknownProvider, "no agent is called '\(id)' (known agents: \(all.map(\.id).joined(separator: ", ")))")
        }
        return p
    }

    /// The provider ids, longest first: the order in which a PTY id's prefix is matched,
    /// so that an id that starts with another id's text is never cut short.
    static let idsLongestFirst: [String] = all.map(\.id).sorted { ($0.count, $0) > ($1.count, $1) }
}
