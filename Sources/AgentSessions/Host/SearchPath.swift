import SSHKit

/// The PATH a login would have, for agents installed through version managers.
///
/// A command run over SSH gets the non-interactive PATH, which misses what mise, asdf,
/// volta, nvm, fnm, npm's user prefix, pipx/uv (`~/.local/bin`) and linuxbrew add in
/// the user's shell start-up files. Detection and the agent's start both put these
/// directories in front of PATH (only those that exist), after the caller's own.
enum AgentSearchPath {
    /// Directories relative to `$HOME` (no leading slash).
    static let homeDirectories = [
        ".local/bin", ".npm-global/bin", ".volta/bin", ".asdf/shims", ".local/share/mise/shims", ".bun/bin",
        ".cargo/bin", ".local/share/fnm/aliases/default/bin", ".fnm/aliases/default/bin", ".deno/bin", "bin",
    ]
    static let systemDirectories = ["/usr/local/bin", "/home/linuxbrew/.linuxbrew/bin", "/opt/homebrew/bin", "/snap/bin"]

    /// POSIX sh that sets PATH; `extra` comes first (`~/` there is `$HOME/`).
    static func shellSnippet(extra: [String]) -> String {
        var lines = ["__p=\"$PATH\""]
        // lowest priority first: each one found is put in front
        for dir in systemDirectories.reversed() {
            lines.append("[ -d \(SSHShellQuoting.quote(dir)) ] && __p=\(SSHShellQuoting.quote(dir)):\"$__p\"")
        }
        // nvm: the newest installed node's bin
        lines.append("for __d in \"$HOME\"/.nvm/versions/node/*/bin; do [ -d \"$__d\" ] && __n=\"$__d\"; done")
        lines.append("[ -n \"${__n:-}\" ] && __p=\"$__n\":\"$__p\"")
        for dir in homeDirectories.reversed() {
            lines.append("[ -d \"$HOME\"/\(SSHShellQuoting.quote(dir)) ] && __p=\"$HOME\"/\(SSHShellQuoting.quote(dir)):\"$__p\"")
        }
        for dir in extra.reversed() {
            if dir.byteHasPrefix("~/") {
                lines.append("__p=\"$HOME\"/\(SSHShellQuoting.quote(dir.byteDropFirst(2))):\"$__p\"")
            } else {
                lines.append("__p=\(SSHShellQuoting.quote(dir)):\"$__p\"")
            }
        }
        lines.append("PATH=\"$__p\"; export PATH; unset __p __d __n")
        return lines.joined(separator: "\n")
    }
}
