import Foundation
import SSHKit
import ServerTransport

/// One tmux session on the engine's private tmux server of a host.
public struct AgentTmuxSession: Sendable, Hashable {
    public var name: String
    /// The PTY id the name parses as, nil for a session the engine did not name.
    public var ptyID: AgentPTYID?
    public var created: Date
    public var lastActivity: Date
    /// The agent process still runs (or has just ended and tmux has not reaped it yet).
    public var isRunning: Bool
    /// How the agent ended, once it did (tmux keeps the pane: `remain-on-exit`).
    public var exitStatus: Int32?
    /// The signal that ended the agent, when one did.
    public var exitSignal: Int32?
    public var panePID: Int32?
}

/// The engine's private tmux server on a host: every command goes to it
/// (`tmux -L <socket>`), started without the user's configuration, and names sessions
/// exactly (`-t =name`), never by prefix. The user's own tmux sessions are never touched.
public struct AgentTmuxServer: Sendable {
    /// Scrollback kept per agent.
    public static let historyLimit = 100_000

    /// The server's name (`tmux -L <socket>`).
    public let socket: String
    let shell: HostShell

    init(socket: String, shell: HostShell) {
        self.socket = socket
        self.shell = shell
    }

    private var displayName: String { shell.displayName }

    /// The name last: tmux turns tabs and control characters of format output into `_`,
    /// so the fields are split on spaces, and a name may contain them. The activity is
    /// the window's, which follows the pane's output; `session_activity` moves only when
    /// a client attaches or types.
    static let sessionFormat = "#{session_created} #{window_activity} #{pane_dead} #{?pane_dead,#{pane_dead_status}:#{pane_dead_signal},-} #{pane_pid} #{session_name}"

    /// `tmux -L <socket> <args>`.
    func command(_ args: [String], idempotent: Bool = true, what: String) async throws(AgentError) -> ProcessResult {
        let r = try await shell.run("tmux", ["-L", socket, "-f", "/dev/null"] + args, idempotent: idempotent, what: what)
        if r.exitStatus == .exited(127) {
            throw AgentError(.tmuxUnavailable, "tmux is not installed on \(displayName)", detail: r.stderrString)
        }
        return r
    }

    /// A session's (only) pane, by exact name: `=name:` (a bare `=name` is no pane target).
    static func pane(_ name: String) -> String { "=" + name + ":" }

    private static func noServer(_ r: ProcessResult) -> Bool {
        let e = r.stderrString
        return e.contains("no server running") || e.contains("error connecting to") || e.contains("No such file or directory")
    }

    /// Every session on the engine's tmux server, the ones no caller knows any more
    /// (orphans) included. Empty when the server is not running.
    public func sessions() async throws(AgentError) -> [AgentTmuxSession] {
        let r = try await command(["list-sessions", "-F", Self.sessionFormat], what: "listing tmux sessions")
        if r.exitStatus != .exited(0) {
            if Self.noServer(r) { return [] }
            throw AgentError(.tmuxFailed, "tmux list-sessions failed", detail: r.stderrString)
        }
        return r.stdoutString.split(separator: "\n").compactMap { Self.parseSession(String($0)) }
            .filter { $0.name != AgentStatusWatcher.sessionName }
    }

    /// Each session's start directory (where its agent was started), by session name;
    /// empty when the server is not running.
    func paneStartDirectories() async throws(AgentError) -> [String: String] {
        let r = try await command(["list-panes", "-a", "-F", "#{pane_start_path} #{session_name}"], what: "listing tmux panes")
        var all: [String: String] = [:]
        guard r.exitStatus == .exited(0) else { return all }
        for line in r.stdoutString.split(separator: "\n") {
            // the name last (it has no spaces: PTY ids never do); the path may
            guard let space = line.lastIndex(of: " ") else { continue }
            all[String(line[line.index(after: space)...])] = String(line[..<space])
        }
        return all
    }

    /// The session called `name`, or nil.
    public func session(named name: String) async throws(AgentError) -> AgentTmuxSession? {
        let r = try await command(["display-message", "-p", "-t", Self.pane(name), Self.sessionFormat], what: "reading a tmux session")
        // tmux 3.3 answers a missing target with an error on stderr and status 0
        let e = r.stderrString
        if Self.noServer(r) || e.contains("can't find") { return nil }
        guard r.exitStatus == .exited(0) else {
            throw AgentError(.tmuxFailed, "tmux display-message failed", detail: e)
        }
        return Self.parseSession(r.stdoutString.trimmingCharacters(in: .newlines))
    }

    static func parseSession(_ line: String) -> AgentTmuxSession? {
        let f = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: false).map(String.init)
        guard f.count == 6, !f[5].isEmpty, let created = Double(f[0]) else { return nil }
        // "-" while it runs; "status:" or ":signal" once tmux reaped it; ":" in between
        let end = f[3].split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let status = f[2] == "1" && end.count == 2 ? Int32(end[0]) : nil
        let signal = f[2] == "1" && end.count == 2 ? Int32(end[1]) : nil
        return AgentTmuxSession(
            name: f[5], ptyID: AgentPTYID(parsing: f[5]),
            created: Date(timeIntervalSince1970: created),
            lastActivity: Date(timeIntervalSince1970: Double(f[1]) ?? created),
            isRunning: status == nil && signal == nil, exitStatus: status, exitSignal: signal, panePID: Int32(f[4]))
    }

    /// tmux's arguments (after `tmux`) that start `argv` in a new detached session.
    func newSessionArguments(name: String, directory: String, size: SSHTerminalSize, argv: [String]) -> [String] {
        let sep = ";"
        return ["-L", socket, "-f", "/dev/null",
            "start-server", sep,
            "set-option", "-g", "history-limit", "\(Self.historyLimit)", sep,
            "set-option", "-g", "remain-on-exit", "on", sep,
            "set-option", "-g", "status", "off", sep,
            "new-session", "-d", "-s", name, "-x", "\(size.columns)", "-y", "\(size.rows)", "-c", directory, "--",
        ] + argv
    }

    /// Starts `argv` in a new detached session `name` of `size`, in `directory`, with a
    /// large history and the pane kept after the program ends (for its exit status).
    /// With `script`, the launch script is written first, in the same round trip.
    /// A session of that name that already exists is left as it is (`false`).
    func newSession(name: String, directory: String, size: SSHTerminalSize, argv: [String],
                        script: (ptyID: AgentPTYID, nonce: String, text: String)? = nil) async throws(AgentError) -> Bool
    {
        // no look first: tmux refuses a duplicate name itself, in the same round trip
        let tmuxArgs = newSessionArguments(name: name, directory: directory, size: size, argv: argv)
        let r: ProcessResult
        if let script {
            let cmd = AgentLauncher.writeThenRun(script.ptyID, nonce: script.nonce, then: ["tmux"] + tmuxArgs)
            r = try await shell.run(cmd.executable, cmd.arguments, stdin: Array(script.text.utf8), idempotent: false,
                              what: "starting a tmux session")
        } else {
            r = try await shell.run("tmux", tmuxArgs, idempotent: false, what: "starting a tmux session")
        }
        if r.exitStatus == .exited(127) {
            throw AgentError(.tmuxUnavailable, "tmux is not installed on \(displayName)", detail: r.stderrString)
        }
        guard r.exitStatus == .exited(0) else {
            if r.stderrString.contains("duplicate session") { return false }
            throw AgentError(.tmuxFailed, "tmux could not start the session \(name)", detail: r.stderrString)
        }
        return true
    }

    /// What the session's terminal showed: the last `lines` lines of history and the
    /// screen (all of the history when nil), with colours (`-e`) and wrapped lines joined.
    public func capture(_ name: String, lines: Int? = nil) async throws(AgentError) -> String {
        let start = lines.map { "-\(max(0, $0))" } ?? "-"
        let r = try await command(["capture-pane", "-p", "-e", "-J", "-S", start, "-t", Self.pane(name)], what: "capturing a session")
        guard r.exitStatus == .exited(0) else {
            throw AgentError(.sessionNotRunning, "no tmux session \(name) on \(displayName)", detail: r.stderrString)
        }
        return r.stdoutString
    }

    /// The visible screen only, as plain text (no colours): what the engine looks at itself
    /// when the status watcher cannot answer.
    func captureScreen(_ name: String) async throws(AgentError) -> String {
        let r = try await command(["capture-pane", "-p", "-t", Self.pane(name)], what: "capturing a screen")
        guard r.exitStatus == .exited(0) else {
            throw AgentError(.sessionNotRunning, "no tmux session \(name) on \(displayName)", detail: r.stderrString)
        }
        return r.stdoutString
    }

    /// Types `bytes` into the session as if from its terminal (`send-keys -H`): escape
    /// sequences, bracketed paste and carriage returns pass unchanged.
    public func send(_ name: String, bytes: [UInt8]) async throws(AgentError) {
        // in slices, so a long paste stays well within any command-line limit
        var offset = 0
        while offset < bytes.count {
            let slice = bytes[offset..<min(bytes.count, offset + 4096)]
            offset += slice.count
            let hex = slice.map { b -> String in
                let s = String(b, radix: 16)
                return s.count == 1 ? "0" + s : s
            }
            let r = try await command(["send-keys", "-t", Self.pane(name), "-H"] + hex, idempotent: false,
                                   what: "typing into a session")
            guard r.exitStatus == .exited(0) else {
                throw AgentError(.sessionNotRunning, "cannot type into \(name) on \(displayName)", detail: r.stderrString)
            }
        }
    }

    /// Ends the session and the agent in it (SIGHUP to the pane's processes), marked as
    /// stopped for the status watcher first (a session that goes without the mark is
    /// lost). A session that does not exist is fine. `forget`: the session's task is
    /// deleted, so the watcher removes the session's files once it has told its end, and
    /// `removing` (paths under the agents' directory, such as its hooks' settings) go now.
    public func stop(_ name: String, forget: Bool = false, removing: [String] = []) async throws(AgentError) {
        let script = """
            printf '%s\\n' "$3" > "$HOME/\(AgentLauncher.directory)/status/$1.stopped" 2>/dev/null
            n=$1 s=$2
            shift 3
            for f in "$@"; do rm -f -- "$HOME/\(AgentLauncher.directory)/$f"; done
            exec tmux -L "$s" -f /dev/null kill-session -t "=$n"
            """
        let r = try await shell.run("/bin/sh", ["-c", script, "sh", name, socket, forget ? "deleted" : "stopped"] + removing,
                                    what: "stopping a session")
        if r.exitStatus == .exited(127) {
            throw AgentError(.tmuxUnavailable, "tmux is not installed on \(displayName)", detail: r.stderrString)
        }
        let e = r.stderrString
        if r.exitStatus != .exited(0), !Self.noServer(r), !e.contains("can't find"), !e.contains("no current target") {
            throw AgentError(.tmuxFailed, "tmux could not stop \(name)", detail: r.stderrString)
        }
    }

    /// Resizes the session's window (for sessions nobody is attached to).
    func resize(_ name: String, size: SSHTerminalSize) async throws(AgentError) {
        _ = try await command(["resize-window", "-t", "=" + name, "-x", "\(size.columns)", "-y", "\(size.rows)"],
                           what: "resizing a session")
    }
}

/// Watching a pane from the host: a loop there asks tmux for the pane's screen every few
/// milliseconds and says only what matters (found, changed, ended), over one channel.
///
/// Not a tmux control-mode client: tmux (3.3a and later releases alike) crashes its whole
/// server, every session with it, when a control-mode notification (a session made or
/// closed, another client detaching) reaches a control client that has connected but not
/// yet finished identifying itself. Clients that only run a command, as these loops do,
/// never get those notifications.
extension AgentTmuxServer {
    /// Arguments: the socket, the pane, the text, the most polls. Exit 0: shown; 3: no such
    /// session; 4: the pane's program ended; 5: polled out. The first 100 polls 3 ms
    /// apart (an agent that starts speaks within a few tenths of a second), the next 50
    /// 10 ms apart, then 50 ms; the screen and the last 2,000 lines above it are looked in, so
    /// text that scrolled away between two polls is found too. It ends when its input
    /// ends (the channel closed: a background `cat` of it, given it explicitly, as an
    /// asynchronous list's own input is /dev/null).
    static let waitScript = #"""
        S=$1 P=$2 N=$3 most=$4 n=0
        while [ $n -lt "$most" ]; do
            out=$(tmux -L "$S" -f /dev/null capture-pane -p -J -S -2000 -t "$P" \; display-message -p -t "$P" 'sshkit-pane-dead:#{pane_dead}' 2>/dev/null) || exit 3
            case $out in *"$N"*) exit 0 ;; esac
            case $out in *'sshkit-pane-dead:1') exit 4 ;; esac
            # waiting on: the loop ends when the channel does (after the first look, which
            # often finds the text already)
            [ $n != 0 ] || { exec 3<&0; { cat <&3 >/dev/null 2>&1; kill $$ 2>/dev/null; } & exec 3<&-; }
            n=$((n + 1))
            if [ $n -lt 100 ]; then sleep 0.003; elif [ $n -lt 150 ]; then sleep 0.01; else sleep 0.05; fi
        done
        exit 5
        """#

    /// Waits until the pane of the session `name` shows `text` (on its screen, or in the
    /// 2,000 lines above it), looked at on the host every 3 ms at first, then every 10 ms,
    /// then every 50 ms (see `waitScript`), over one channel. Text split across two writes of the agent is found.
    /// - Returns: true once shown; false when the agent ended, the session is not there,
    ///   or `timeout` passed first. Nothing of the wait runs on the host when this returns.
    /// - Throws: `transport`; `cancelled`.
    public func waitForOutput(of name: String, containing text: String, timeout: Duration = .seconds(30))
        async throws(AgentError) -> Bool
    {
        guard !text.isEmpty else { return true }
        let most = Int(timeout.components.seconds) * 20 + 150
        let started = ContinuousClock.now
        defer { AgentTrace.current?.write(.remoteStream, "watching the output of \(name)", host: shell.displayName, started: started) }
        let process: TransportProcess
        do {
            process = try await shell.transport.startProcess("/bin/sh", arguments: ["-c", Self.waitScript, "sh", socket, Self.pane(name),
                                                                                    text, String(most)], environment: [:])
        } catch {
            throw AgentError(error, while: "watching the output of \(name)")
        }
        defer {
            process.input.finish()
            process.cancel()
        }
        let seen = await Deadline.run(timeout) { () async throws(AgentError) -> Bool in
            do {
                return try await process.exitStatus() == .exited(0)
            } catch let e as TransportError {
                throw AgentError(e, while: "watching the output of \(name)")
            } catch {
                throw AgentError(.cancelled, "watching the output of \(name) was cancelled")
            }
        }
        switch seen {
        case .success(let found)?: return found
        case .failure(let error)?: throw error
        case nil: return false
        }
    }
}
