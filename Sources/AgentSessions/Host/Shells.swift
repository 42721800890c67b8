/// The login shells agents are started under. Others (tcsh, nu, a custom program)
/// are refused: the engine relies on `-l -c` and on POSIX quoting around them.
public enum AgentShells {
    public static let allowed: Set<String> = [
        "/bin/bash", "/bin/sh", "/bin/zsh",
        "/usr/bin/bash", "/usr/bin/sh", "/usr/bin/zsh", "/usr/bin/fish",
        "/usr/local/bin/bash", "/usr/local/bin/zsh", "/usr/local/bin/fish",
    ]

    /// - Throws: `shellNotAllowed`.
    public static func check(_ shell: String) throws(AgentError) {
        guard allowed.contains(shell) else {
            throw AgentError(.shellNotAllowed,
                             "the login shell '\(shell)' is not one agents are started under (bash, sh, zsh or fish in /bin, /usr/bin or /usr/local/bin)")
        }
    }
}
