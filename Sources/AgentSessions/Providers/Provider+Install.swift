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
    /// Whether `command` runs a script it downloads (`curl … | sh`): such a command is
    /// always shown and confirmed before it runs.
    public static func pipesDownloadIntoShell(_ command: String) -> Bool {
        // `| sh`, `| sudo bash`, `| CONFIGURE=false bash`, `| env X=1 /bin/sh`
        command.range(of: #"\|\s*(sudo\s+)?(env\s+)?([A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(\S*/)?(ba|z|da|k|fi)?sh\b"#,
                      options: .regularExpression) != nil
    }

    /// An npm package installed into `~/.local`.
    static func npm(_ package: String) -> String {
        "npm install -g --prefix \"$HOME/.local\" \(package)"
    }

    /// A virtualenv under `~/.local/share/agent-sessions/venvs/<name>`, its binary linked
    /// into `~/.local/bin` (what pipx does, with only Python's own venv).
    static func venv(_ name: String, _ requirement: String, python: String = "python3", binary: String) -> String {
        let dir = "\"$HOME/.local/share/agent-sessions/venvs/\(name)\""
        return "\(python) -m venv \(dir) && \(dir)/bin/pip install --disable-pip-version-check \(requirement)"
            + " && mkdir -p \"$HOME/.local/bin\" && ln -sf \(dir)/bin/\(binary) \"$HOME/.local/bin/\(binary)\""
    }
}
