/// Where an agent keeps what it logs in with: files under the user's home and
/// environment variables. `hosts doctor` checks that one of them is there (it never
/// reads them).
public struct AgentCredentials: Sendable, Hashable {
    /// Files relative to the home directory (`.codex/auth.json`).
    public var files: [String]
    /// Variables of the login environment that authenticate it instead (`OPENAI_API_KEY`).
    public var variables: [String]

    public init(files: [String] = [], variables: [String] = []) {
        self.files = files
        self.variables = variables
    }

    /// Whether anything is known about where it keeps them.
    public var isKnown: Bool { !files.isEmpty || !variables.isEmpty }
}

extension AgentProvider {
    /// A shell command that installs the agent for the host's user, without root (npm
    /// packages into `~/.local`, whose `bin` detection looks in; Python agents into a
    /// virtualenv of their own): what `agents install` runs in the login environment.
    /// nil when the agent has no such command (see `installHint`).
    public var installCommand: String? { Self.installCommands[id] }

    /// Where the agent keeps its login (see `AgentCredentials`); empty when not known.
    public var credentials: AgentCredentials { Self.credentialLocations[id] ?? AgentCredentials() }

    /// Whether `command` runs a script it downloads (`curl … | sh`): such a command is
    /// always shown and confirmed before it runs.
    public static func pipesDownloadIntoShell(_ command: String) -> Bool {
        // `| sh`, `| sudo bash`, `| CONFIGURE=false bash`, `| env X=1 /bin/sh`
        command.range(of: #"\|\s*(sudo\s+)?(env\s+)?([A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(\S*/)?(ba|z|da|k|fi)?sh\b"#,
                      options: .regularExpression) != nil
    }

    private static func npm(_ package: String) -> String {
        "npm install -g --prefix \"$HOME/.local\" \(package)"
    }

    /// A virtualenv under `~/.local/share/agent-sessions/venvs/<name>`, its binary linked
    /// into `~/.local/bin` (what pipx does, with only Python's own venv).
    private static func venv(_ name: String, _ requirement: String, python: String = "python3", binary: String) -> String {
        let dir = "\"$HOME/.local/share/agent-sessions/venvs/\(name)\""
        return "\(python) -m venv \(dir) && \(dir)/bin/pip install --disable-pip-version-check \(requirement)"
            + " && mkdir -p \"$HOME/.local/bin\" && ln -sf \(dir)/bin/\(binary) \"$HOME/.local/bin/\(binary)\""
    }

    static let installCommands: [String: String] = [
        "codex": npm("@openai/codex"),
        "claude": "curl -fsSL https://claude.ai/install.sh | bash",
        "cursor": "curl https://cursor.com/install -fsS | bash",
        "gemini": npm("@google/gemini-cli"),
        "qwen": npm("@qwen-code/qwen-code"),
        "droid": "curl -fsSL https://app.factory.ai/cli | sh",
        "amp": npm("@sourcegraph/amp@latest"),
        "opencode": npm("opencode-ai"),
        "copilot": npm("@github/copilot"),
        "charm": npm("@charmland/crush"),
        "auggie": npm("@augmentcode/auggie"),
        "goose": "curl -fsSL https://github.com/block/goose/releases/download/stable/download_cli.sh | CONFIGURE=false bash",
        "kimi": "uv tool install --python 3.13 kimi-cli==1.51.0",
        "kilocode": npm("@kilocode/cli"),
        "kiro": "curl -fsSL https://cli.kiro.dev/install | bash",
        "cline": npm("cline"),
        "continue": npm("@continuedev/cli"),
        "codebuff": npm("codebuff"),
        "mistral": "uv tool install --python 3.13 mistral-vibe",
        "pi": npm("@mariozechner/pi-coding-agent"),
        "hermes": venv("hermes", "hermes-agent", binary: "hermes"),
    ]

    /// From each agent's own source or documentation; a login kept in the system keyring
    /// (Codex, Gemini, Copilot and Goose can) is not seen.
    static let credentialLocations: [String: AgentCredentials] = [
        "codex": .init(files: [".codex/auth.json"], variables: ["CODEX_API_KEY", "OPENAI_API_KEY"]),
        "claude": .init(files: [".claude/.credentials.json"],
                        variables: ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"]),
        "cursor": .init(variables: ["CURSOR_API_KEY"]),
        "gemini": .init(files: [".gemini/oauth_creds.json", ".gemini/gemini-credentials.json", ".gemini/.env"],
                        variables: ["GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS",
                                    "GOOGLE_GENAI_USE_VERTEXAI"]),
        "qwen": .init(files: [".qwen/oauth_creds.json", ".qwen/.env"],
                      variables: ["OPENAI_API_KEY", "DASHSCOPE_API_KEY", "BAILIAN_CODING_PLAN_API_KEY"]),
        "droid": .init(files: [".factory/auth.v2.file", ".factory/auth.encrypted", ".factory/auth.json"],
                       variables: ["FACTORY_API_KEY"]),
        "amp": .init(files: [".local/share/amp/secrets.json"], variables: ["AMP_API_KEY"]),
        "opencode": .init(files: [".local/share/opencode/auth.json"]),
        "copilot": .init(files: [".config/gh/hosts.yml"], variables: ["COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"]),
        "charm": .init(files: [".local/share/crush/crush.json"],
                       variables: ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY"]),
        "auggie": .init(files: [".augment/session.json"], variables: ["AUGMENT_SESSION_AUTH"]),
        "goose": .init(files: [".config/goose/secrets.yaml", ".config/goose/config.yaml"]),
        "kimi": .init(files: [".kimi/credentials/kimi-code.json", ".kimi/config.toml"], variables: ["KIMI_API_KEY"]),
        "kilocode": .init(files: [".local/share/kilo/auth.json"], variables: ["KILO_API_KEY"]),
        "kiro": .init(files: [".local/share/kiro-cli/data.sqlite3"]),
        "cline": .init(files: [".cline/data/settings/providers.json", ".cline/data/secrets.json"],
                       variables: ["CLINE_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"]),
        "continue": .init(files: [".continue/auth.json"], variables: ["CONTINUE_API_KEY"]),
        "codebuff": .init(files: [".config/manicode/credentials.json"], variables: ["CODEBUFF_API_KEY"]),
        "mistral": .init(files: [".vibe/.env"], variables: ["MISTRAL_API_KEY"]),
        "pi": .init(files: [".pi/agent/auth.json"],
                    variables: ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY"]),
        "hermes": .init(files: [".hermes/.env", ".hermes/auth.json"],
                        variables: ["OPENROUTER_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"]),
    ]
}
