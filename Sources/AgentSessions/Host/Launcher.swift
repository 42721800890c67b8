import SSHKit

/// The script that starts an agent on the host, written there 0600 and run by the
/// pane's login shell as `exec /bin/sh <script>`; it removes itself first.
///
/// Everything in it passes through `SSHShellQuoting.quote`, the one quoting function.
/// Environment values (API keys, say) are in the script, never in a command line that
/// `ps` would show to other users.
enum AgentLauncher {
    /// Where launch scripts are written, relative to the home directory (0700).
    static let directory = ".cache/sshkit-agents"

    /// One file per start (`nonce`), so a start that fails can remove its own script
    /// without touching one another start of the same session is about to run.
    static func fileName(_ ptyID: AgentPTYID, nonce: String) -> String { "launch-\(ptyID)-\(nonce).sh" }

    /// A fresh nonce for `fileName`.
    static func makeNonce() -> String { String(UInt64.random(in: 0...UInt64.max), radix: 36) }

    /// What the pane runs: the login shell (for the user's profile), which hands over to
    /// the script. The words are safe in sh, bash, zsh and fish alike.
    static func paneCommand(shell: String, ptyID: AgentPTYID, nonce: String) -> [String] {
        [shell, "-l", "-c", "exec /bin/sh \"$HOME/\(directory)/\(fileName(ptyID, nonce: nonce))\""]
    }

    /// A file the launch script writes before the agent starts (its status hooks' settings).
    struct File: Sendable, Hashable {
        /// Absolute, on the host.
        var path: String
        var text: String
    }

    /// The launch script. `files` are written before the agent starts (a file that cannot
    /// be written is said on the agent's screen, and the agent starts without it).
    static func script(_ launch: AgentLaunch, ptyID: AgentPTYID, provider: AgentProvider, workingDirectory: String,
                       extraSearchPath: [String], setup: (command: String, timeout: Duration)? = nil,
                       files: [File] = []) -> String
    {
        let q = SSHShellQuoting.quote
        // the script removes itself, and the status events and exit status of an earlier run
        let exitFile = "\"$HOME/\(directory)/status/\(ptyID).exit\""
        var s = "rm -f -- \"$0\" \"$HOME/\(directory)/status/\(ptyID)\" \(exitFile) \"$HOME/\(directory)/status/\(ptyID).stopped\"\n"
        s += "[ -d \"$HOME/\(directory)/status\" ] || mkdir -p \"$HOME/\(directory)/status\"\n"
        for file in files {
            let folder = String(file.path[..<(file.path.lastIndex(of: "/") ?? file.path.startIndex)])
            s += "{ { [ -d \(q(folder)) ] || mkdir -p -- \(q(folder)); } && printf '%s' \(q(file.text)) > \(q(file.path)); } 2>/dev/null "
            s += "|| printf 'sshkit-agents: cannot write %s; the agent starts without it\\n' \(q(file.path))\n"
        }
        s += AgentSearchPath.shellSnippet(extra: extraSearchPath) + "\n"
        s += "cd -- \(q(workingDirectory)) || { printf 'sshkit-agents: cannot enter %s\\n' \(q(workingDirectory)); exit 1; }\n"
        for (name, value) in launch.environment.sorted(by: { $0.key < $1.key }) {
            // names were validated by AgentProviderSettings.validate()
            s += "\(name)=\(q(value)); export \(name)\n"
        }
        for (name, value) in launch.hookEnvironment.sorted(by: { $0.key < $1.key }) {
            // the engine's own names; one the user's login set is theirs and stays
            s += "if [ -z \"${\(name)+set}\" ]; then \(name)=\(q(value)); export \(name); fi\n"
        }
        if let setup {
            // the project's setup, on the agent's screen, in a process group of its own so
            // the time limit ends all of it; its outcome where the engine reads it
            let seconds = max(1, Int(setup.timeout.components.seconds))
            let outcome = "\"$HOME/\(directory)/status/\(ptyID).setup\""
            s += "printf '\\033[2msshkit-agents: setting up: %s\\033[0m\\n' \(q(setup.command))\n"
            // the setup's status goes to a file of its own: with job control on, a shell may
            // drop a finished job before `wait` asks for it (which then says 127)
            let rc = "\"$HOME/\(directory)/status/\(ptyID).setup-rc\""
            s += "rm -f \(rc)\n"
            s += "set -m\n"
            // no input: a job of its own group that read the terminal would be stopped
            s += "( sh -c \(q(setup.command)) </dev/null; echo $? > \(rc) ) & __sp=$!\n"
            s += "( trap 'kill $__s 2>/dev/null; exit 0' TERM; sleep \(seconds) & __s=$!; wait $__s; "
            s += "kill -TERM -$__sp 2>/dev/null || kill -TERM $__sp 2>/dev/null ) >/dev/null 2>&1 & __wp=$!\n"
            s += "wait $__sp; __ss=$?\n"
            s += "kill $__wp 2>/dev/null\n"
            s += "set +m\n"
            // no status written: a signal (the time limit) ended it
            s += "if [ -s \(rc) ]; then __ss=$(cat \(rc)); elif [ $__ss -lt 128 ]; then __ss=143; fi; rm -f \(rc)\n"
            s += "if [ $__ss = 0 ]; then printf 'ok\\n' > \(outcome)\n"
            s += "elif [ $__ss -ge 128 ]; then printf 'timed out after \(seconds) s\\n' > \(outcome); "
            s += "printf '\\033[1;31msshkit-agents: the setup did not finish in \(seconds) s; the agent starts anyway\\033[0m\\n'\n"
            s += "else printf 'failed with exit status %s\\n' \"$__ss\" > \(outcome); "
            s += "printf '\\033[1;31msshkit-agents: the setup failed (exit status %s); the agent starts anyway\\033[0m\\n' \"$__ss\"\n"
            s += "fi\n"
        }
        let binary = launch.arguments[0]
        // the agent runs as a child, not exec'd: its status (128 + N for a signal) is
        // written where the engine reads it, since tmux does not always record it for a
        // program that ends at once
        s += "if command -v \(q(binary)) >/dev/null 2>&1; then\n"
        if let refused = provider.refusedBinary, !refused.markers.isEmpty {
            // a release that is not the agent (one that runs an installer from the
            // network when started) is recognised by its version output and not started
            let version = SSHShellQuoting.command([binary] + provider.versionArguments)
            let patterns = refused.markers.map { "*\(q($0))*" }.joined(separator: "|")
            s += "    case \"$(\(version) </dev/null 2>&1 | head -c 4000)\" in\n"
            s += "    \(patterns))\n"
            s += "        printf '%s\\n' \(q("sshkit-agents: not started: " + refused.reason))\n"
            s += "        __status=126 ;;\n"
            s += "    *)\n"
            s += "        \(SSHShellQuoting.command(launch.arguments))\n"
            s += "        __status=$? ;;\n"
            s += "    esac\n"
        } else {
            s += "    \(SSHShellQuoting.command(launch.arguments))\n"
            s += "    __status=$?\n"
        }
        s += "else\n"
        let message = "sshkit-agents: \(provider.displayName) is not installed on this host ('\(binary)' is not on PATH)."
        s += "    printf '%s\\n' \(q(message)) \(q("Install it with: " + provider.installHint))\n"
        s += "    __status=127\n"
        s += "fi\n"
        s += "printf '%s\\n' \"$__status\" > \(exitFile)\n"
        s += "exit \"$__status\"\n"
        return s
    }

    /// A command line that writes `script` to the launch directory (umask 077, from
    /// stdin) and then runs `then...`: one round trip for both. When `then` fails (tmux
    /// found the session running already), the script is removed again.
    static func writeThenRun(_ ptyID: AgentPTYID, nonce: String, then command: [String])
        -> (executable: String, arguments: [String])
    {
        ("/bin/sh", ["-c", writeThenRunScript, "sh", fileName(ptyID, nonce: nonce)] + command)
    }

    /// The script of `writeThenRun`: `$1` the launch file's name, the rest the command.
    static let writeThenRunScript = """
        umask 077 && mkdir -p "$HOME/\(directory)" && cat > "$HOME/\(directory)/$1" || exit 1
        f=$1; shift
        \(runOnceMoreWhenTmuxExited)
        [ $s = 0 ] || rm -f -- "$HOME/\(directory)/$f"
        exit $s
        """

    /// Shell lines that run `"$@"` (a tmux command) and set `s` to its status: run once
    /// more, a moment later, when the tmux server it reached was exiting (its last session
    /// had just ended, and tmux says `server exited unexpectedly`); what it printed goes
    /// to standard error.
    static let runOnceMoreWhenTmuxExited = """
        err=$("$@" 2>&1); s=$?
        case $s:$err in [1-9]*:*'server exited unexpectedly'*) sleep 0.2; err=$("$@" 2>&1); s=$? ;; esac
        [ -z "$err" ] || printf '%s\\n' "$err" >&2
        """
}
