extension AgentProvider {
    /// Every agent the engine knows, in a stable order (Emdash's registry, with its stale
    /// flags fixed: `cn` and `vibe` take the prompt positionally, since `cn -p` and
    /// `vibe --prompt` start headless runs; `cursor` and `kiro`, the editor launchers,
    /// are never taken for the agents `cursor-agent` and `kiro-cli`).
    public static let all: [AgentProvider] = [
        AgentProvider(id: "codex", displayName: "Codex", binary: "codex", autoApproveFlag: "--full-auto",
                      promptDelivery: .positional, resumeArguments: ["resume", "--last"], sessionTracking: .codexThread,
                      statusHooks: .codexNotify, installCommand: Self.npm("@openai/codex"),
                      credentials: AgentCredentials(files: [".codex/auth.json"],
                                                    variables: ["CODEX_API_KEY", "OPENAI_API_KEY"])),
        AgentProvider(id: "claude", displayName: "Claude Code", binary: "claude",
                      autoApproveFlag: "--dangerously-skip-permissions", promptDelivery: .positional,
                      resumeArguments: ["-c", "-r"], sessionTracking: .claudeSessionID, statusHooks: .claudeSettings,
                      installCommand: "curl -fsSL https://claude.ai/install.sh | bash",
                      credentials: AgentCredentials(files: [".claude/.credentials.json"],
                                                    variables: ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"])),
        AgentProvider(id: "cursor", displayName: "Cursor", binary: "cursor-agent", autoApproveFlag: "-f",
                      promptDelivery: .positional, installCommand: "curl https://cursor.com/install -fsS | bash",
                      credentials: AgentCredentials(variables: ["CURSOR_API_KEY"])),
        AgentProvider(id: "gemini", displayName: "Gemini", binary: "gemini", autoApproveFlag: "--yolo",
                      promptDelivery: .flag("-i"), resumeArguments: ["--resume"], statusHooks: .geminiSystemDefaults,
                      installCommand: Self.npm("@google/gemini-cli"),
                      credentials: AgentCredentials(files: [".gemini/oauth_creds.json", ".gemini/gemini-credentials.json", ".gemini/.env"],
                                                    variables: ["GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_GENAI_USE_VERTEXAI"])),
        AgentProvider(id: "qwen", displayName: "Qwen Code", binary: "qwen", autoApproveFlag: "--yolo",
                      promptDelivery: .flag("-i"), resumeArguments: ["--continue"], statusHooks: .qwenSystemDefaults,
                      installCommand: Self.npm("@qwen-code/qwen-code"),
                      credentials: AgentCredentials(files: [".qwen/oauth_creds.json", ".qwen/.env"],
                                                    variables: ["OPENAI_API_KEY", "DASHSCOPE_API_KEY", "BAILIAN_CODING_PLAN_API_KEY"])),
        AgentProvider(id: "droid", displayName: "Droid", binary: "droid", promptDelivery: .positional,
                      resumeArguments: ["-r"], installCommand: "curl -fsSL https://app.factory.ai/cli | sh",
                      credentials: AgentCredentials(files: [".factory/auth.v2.file", ".factory/auth.encrypted", ".factory/auth.json"],
                                                    variables: ["FACTORY_API_KEY"])),
        AgentProvider(id: "amp", displayName: "Amp", binary: "amp", autoApproveFlag: "--dangerously-allow-all",
                      promptDelivery: .typed, installCommand: Self.npm("@sourcegraph/amp@latest"),
                      credentials: AgentCredentials(files: [".local/share/amp/secrets.json"], variables: ["AMP_API_KEY"])),
        AgentProvider(id: "opencode", displayName: "OpenCode", binary: "opencode", promptDelivery: .typed,
                      statusHooks: .openCodePlugin, installCommand: Self.npm("opencode-ai"),
                      credentials: AgentCredentials(files: [".local/share/opencode/auth.json"])),
        AgentProvider(id: "copilot", displayName: "GitHub Copilot", binary: "copilot", autoApproveFlag: "--allow-all-tools",
                      promptDelivery: .none, installCommand: Self.npm("@github/copilot"),
                      credentials: AgentCredentials(files: [".config/gh/hosts.yml"],
                                                    variables: ["COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"])),
        AgentProvider(id: "charm", displayName: "Charm Crush", binary: "crush", autoApproveFlag: "--yolo",
                      promptDelivery: .none, installCommand: Self.npm("@charmland/crush"),
                      credentials: AgentCredentials(files: [".local/share/crush/crush.json"],
                                                    variables: ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY"])),
        AgentProvider(id: "auggie", displayName: "Auggie", binary: "auggie", defaultArguments: ["--allow-indexing"],
                      promptDelivery: .positional, installCommand: Self.npm("@augmentcode/auggie"),
                      credentials: AgentCredentials(files: [".augment/session.json"], variables: ["AUGMENT_SESSION_AUTH"])),
        AgentProvider(id: "goose", displayName: "Goose", binary: "goose", defaultArguments: ["run", "-s"],
                      promptDelivery: .flag("-t"),
                      installCommand: "curl -fsSL https://github.com/block/goose/releases/download/stable/download_cli.sh | CONFIGURE=false bash",
                      credentials: AgentCredentials(files: [".config/goose/secrets.yaml", ".config/goose/config.yaml"])),
        // kimi-cli 1.51.0: `-c` is a one-shot prompt (the agent exits after its answer), so
        // the prompt is typed; `--session <uuid>` creates that session or resumes it
        AgentProvider(id: "kimi", displayName: "Kimi", binary: "kimi", autoApproveFlag: "--yolo",
                      promptDelivery: .typed, sessionTracking: .chosenSessionID(flag: "--session", store: .kimi),
                      installCommand: "uv tool install --python 3.13 kimi-cli==1.51.0",
                      installNote: "later releases are a stub",
                      credentials: AgentCredentials(files: [".kimi/credentials/kimi-code.json", ".kimi/config.toml"],
                                                    variables: ["KIMI_API_KEY"]),
                      refusedBinary: RefusedBinary(
                          markers: ["no longer maintained", "已停止维护"],
                          reason: "this kimi is kimi-cli's deprecation stub (1.52 or later), which downloads and runs "
                              + "another installer when started; install kimi-cli==1.51.0"),
                      readyScreen: ["── input"]),
        AgentProvider(id: "kilocode", displayName: "Kilo Code", binary: "kilocode", autoApproveFlag: "--auto",
                      promptDelivery: .positional, resumeArguments: ["--continue"],
                      installCommand: Self.npm("@kilocode/cli"),
                      credentials: AgentCredentials(files: [".local/share/kilo/auth.json"], variables: ["KILO_API_KEY"])),
        AgentProvider(id: "kiro", displayName: "Kiro", binary: "kiro-cli", defaultArguments: ["chat"],
                      promptDelivery: .positional, installCommand: "curl -fsSL https://cli.kiro.dev/install | bash",
                      credentials: AgentCredentials(files: [".local/share/kiro-cli/data.sqlite3"])),
        AgentProvider(id: "rovo", displayName: "Rovo Dev", binary: "acli", defaultArguments: ["rovodev", "run"],
                      autoApproveFlag: "--yolo", promptDelivery: .none,
                      installCommand: nil,
                      installNote: "install the Atlassian CLI (acli), then: acli rovodev auth login"),
        AgentProvider(id: "cline", displayName: "Cline", binary: "cline", autoApproveFlag: "--yolo",
                      promptDelivery: .positional, installCommand: Self.npm("cline"),
                      credentials: AgentCredentials(files: [".cline/data/settings/providers.json", ".cline/data/secrets.json"],
                                                    variables: ["CLINE_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"]), versionArguments: ["help"]),
        AgentProvider(id: "continue", displayName: "Continue", binary: "cn", promptDelivery: .positional,
                      resumeArguments: ["--resume"], installCommand: Self.npm("@continuedev/cli"),
                      credentials: AgentCredentials(files: [".continue/auth.json"], variables: ["CONTINUE_API_KEY"])),
        AgentProvider(id: "codebuff", displayName: "Codebuff", binary: "codebuff", promptDelivery: .positional,
                      installCommand: Self.npm("codebuff"),
                      credentials: AgentCredentials(files: [".config/manicode/credentials.json"],
                                                    variables: ["CODEBUFF_API_KEY"])),
        // mistral-vibe 3.0: `--continue` takes the directory's newest session, `--resume <id>`
        // the one the engine found for this chat
        AgentProvider(id: "mistral", displayName: "Mistral Vibe", binary: "vibe", autoApproveFlag: "--auto-approve",
                      promptDelivery: .positional, resumeArguments: ["--continue"],
                      sessionTracking: .recordedSession(flag: "--resume", store: .vibe),
                      installCommand: "uv tool install --python 3.13 mistral-vibe",
                      installNote: "Python 3.12 or newer",
                      credentials: AgentCredentials(files: [".vibe/.env"], variables: ["MISTRAL_API_KEY"])),
        AgentProvider(id: "pi", displayName: "Pi", binary: "pi", promptDelivery: .positional, resumeArguments: ["-c"],
                      installCommand: Self.npm("@mariozechner/pi-coding-agent"),
                      credentials: AgentCredentials(files: [".pi/agent/auth.json"],
                                                    variables: ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY"])),
        // hermes-agent 0.19: `--continue` takes the user's newest session in any directory
        // (another task's), so only `--resume <id>` of the session found for this chat
        AgentProvider(id: "hermes", displayName: "Hermes Agent", binary: "hermes", autoApproveFlag: "--yolo",
                      promptDelivery: .typed, sessionTracking: .recordedSession(flag: "--resume", store: .hermes),
                      installCommand: Self.venv("hermes", "hermes-agent", binary: "hermes"),
                      credentials: AgentCredentials(files: [".hermes/.env", ".hermes/auth.json"],
                                                    variables: ["OPENROUTER_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"]), readyScreen: ["❯"]),
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
