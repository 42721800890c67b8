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
    /// lost). A session that does not exist is fine.
    public func stop(_ name: String) async throws(AgentError) {
        let script = """
            printf 'stopped\\n' > "$HOME/\(AgentLauncher.directory)/status/$1.stopped" 2>/dev/null
            exec tmux -L "$2" -f /dev/null kill-session -t "=$1"
            """
        let r = try await shell.run("/bin/sh", ["-c", script, "sh", name, socket], what: "stopping a session")
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

/// Watching a pane's output as it happens.
extension AgentTmuxServer {
    /// Waits until the pane of the session `name` shows `text`, seen as the output happens rather
    /// than by asking again and again: a read-only tmux control-mode client
    /// (`tmux -C attach -r`, which neither types nor resizes) streams the pane's output
    /// over one channel, and the screen is asked through the same client once it is
    /// attached, so nothing printed before is missed. Text split across
    /// two writes of the agent is found too.
    /// The screen and whether the pane's program ended are asked again every second
    /// through the same client: text drawn with escape sequences inside it is found on
    /// the screen, and an agent that ended ends the wait.
    /// - Returns: true once shown; false when the agent ended, the session is not there,
    ///   or `timeout` passed first. The client is gone when this returns.
    /// - Throws: `transport`; `cancelled`.
    public func waitForOutput(of name: String, containing text: String, timeout: Duration = .seconds(30))
        async throws(AgentError) -> Bool
    {
        let needle = Array(text.utf8)
        guard !needle.isEmpty else { return true }
        let process = try await controlClient(of: name, while: "watching the output of \(name)")
        defer {
            process.input.finish()
            process.cancel()
        }
        let pane = Self.pane(name)
        let look = "capture-pane -p -J -t \(pane)\ndisplay-message -p -t \(pane) '\(ControlModeScanner.deadMark)#{pane_dead}'\n"
        let seen = await Deadline.run(timeout) { () async throws(AgentError) -> Bool in
            await withTaskGroup(of: Bool?.self) { group in
                group.addTask {
                    var scanner = ControlModeScanner(needle: needle)
                    var asked = false
                    for await chunk in process.stdout {
                        if let found = scanner.feed(chunk) { return found }
                        if scanner.isAttached && !asked {
                            // the screen is asked once attached: asked before, it could miss what
                            // the agent printed between the answer and the attach
                            asked = true
                            do {
                                try await process.input.write(look)
                            } catch {
                                return false // the client ended
                            }
                        }
                    }
                    return false
                }
                group.addTask {
                    // again every second: text drawn with escape sequences inside it is found on
                    // the screen only, and a pane whose agent ended says nothing in control mode
                    while true {
                        try? await Task.sleep(for: .seconds(1))
                        if Task.isCancelled { return nil }
                        do {
                            try await process.input.write(look)
                        } catch {
                            return nil
                        }
                    }
                }
                for await r in group {
                    if let r {
                        group.cancelAll()
                        return r
                    }
                }
                return false
            }
        }
        switch seen {
        case .success(let found)?: return found
        case .failure(let error)?: throw error
        case nil: return false
        }
    }
}

/// Following a pane's screen as it changes.
extension AgentTmuxServer {
    /// A read-only tmux control-mode client of the session `name` (`tmux -C attach -r`:
    /// it neither types nor resizes): the pane's output as notifications, and commands
    /// answered over the same channel. The caller finishes its input and cancels it.
    func controlClient(of name: String, while what: String) async throws(AgentError) -> TransportProcess {
        do {
            return try await shell.transport.startProcess("tmux", arguments: ["-L", socket, "-f", "/dev/null", "-C",
                                                                         "attach-session", "-r", "-t", "=" + name],
                                                      environment: [:])
        } catch {
            throw AgentError(error, while: what)
        }
    }

    /// Gives the visible screen of the session `name` (with colours, wrapped lines joined,
    /// as `capture(name, lines: 0)`) once at the start and again each time the pane
    /// printed or was resized, until the session ends or the task is cancelled. One
    /// read-only control-mode client does it all over one channel: it tells when the pane
    /// printed (`%output`), and the screen is asked through it, so nothing is asked while
    /// nothing changes. At most one capture is in flight and they are at least
    /// `spacing` apart, so an agent that prints without a pause costs a screen per
    /// `spacing`, never a capture per write.
    /// - Throws: `sessionNotRunning` when the session is not there; `transport`; `cancelled`.
    public func followScreen(of name: String, spacing: Duration = .milliseconds(40),
                             _ screen: @Sendable (String) async -> Void) async throws(AgentError)
    {
        let process = try await controlClient(of: name, while: "following the screen of \(name)")
        defer {
            process.input.finish()
            process.cancel()
        }
        let ask = "capture-pane -p -e -J -S -0 -t \(Self.pane(name))\n"
        var reader = ControlModeReader()
        var attached = false
        var asked = false // a capture is in flight
        var dirty = false // the pane changed since the capture in flight was asked
        var lastAsk = ContinuousClock.now - .seconds(1)
        var later: Task<Void, Never>?
        defer { later?.cancel() }
        let input = process.input
        func askNow() async throws(AgentError) {
            asked = true
            dirty = false
            lastAsk = .now
            do {
                try await input.write(ask)
            } catch {
                throw AgentError(.sessionNotRunning, "the session \(name) on \(displayName) ended")
            }
        }
        // a change too soon after the last capture is asked about once the spacing passed:
        // a wake-up line sent then (`display-message` echoes it back) asks for it
        let wake = "sshkit-follow-wake"
        func askSoon() async throws(AgentError) {
            if ContinuousClock.now - lastAsk >= spacing {
                try await askNow()
                return
            }
            asked = true // the wake-up stands for the capture to come
            let wait = spacing - (ContinuousClock.now - lastAsk)
            later = Task {
                try? await Task.sleep(for: wait)
                if !Task.isCancelled { try? await input.write("display-message -p \(wake)\n") }
            }
        }
        for await chunk in process.stdout {
            for event in reader.feed(chunk) {
                switch event {
                case .attached:
                    attached = true
                    try await askNow()
                case .changed:
                    guard attached else { continue }
                    if asked {
                        dirty = true
                    } else {
                        try await askSoon()
                    }
                case .reply(let lines, let failed):
                    if lines == [wake] {
                        try await askNow()
                        continue
                    }
                    guard asked else { continue } // the attach's own reply
                    asked = false
                    if failed {
                        throw AgentError(.sessionNotRunning, "no tmux session \(name) on \(displayName)",
                                         detail: lines.joined(separator: "\n"))
                    }
                    await screen(lines.joined(separator: "\n"))
                    if dirty { try await askSoon() }
                case .exit:
                    if !attached {
                        throw AgentError(.sessionNotRunning, "no tmux session \(name) on \(displayName)")
                    }
                    return
                }
            }
            if Task.isCancelled { throw AgentError(.cancelled, "following the screen of \(name) was cancelled") }
        }
        if Task.isCancelled { throw AgentError(.cancelled, "following the screen of \(name) was cancelled") }
        if !attached {
            throw AgentError(.sessionNotRunning, "no tmux session \(name) on \(displayName)")
        }
    }
}

/// Reads tmux control mode's output as events: the client attached, the pane printed or
/// its layout changed, a command's reply (its lines, and whether it was `%error`), the
/// client ended. A reply ends only at the `%end` or `%error` line that carries its
/// `%begin`'s time and number, so a pane line that looks like one does not end it.
struct ControlModeReader {
    enum Event: Equatable {
        case attached
        case changed
        case reply([String], failed: Bool)
        case exit
    }

    private var line: [UInt8] = []
    private var reply: (guard: String, lines: [String])?

    mutating func feed(_ chunk: [UInt8]) -> [Event] {
        var events: [Event] = []
        for byte in chunk {
            guard byte == UInt8(ascii: "\n") else {
                line.append(byte)
                continue
            }
            if let e = take(String(decoding: line, as: UTF8.self)) { events.append(e) }
            line.removeAll(keepingCapacity: true)
        }
        return events
    }

    private mutating func take(_ line: String) -> Event? {
        if var open = reply {
            // "%end|%error <time> <number> <flags>": the same time and number as its %begin
            for (mark, failed) in [("%end ", false), ("%error ", true)] where line.hasPrefix(mark) {
                if line.dropFirst(mark.count).hasPrefix(open.guard) {
                    reply = nil
                    return .reply(open.lines, failed: failed)
                }
            }
            open.lines.append(line)
            reply = open
            return nil
        }
        if line.hasPrefix("%begin ") {
            let fields = line.split(separator: " ")
            reply = (fields.count >= 3 ? "\(fields[1]) \(fields[2]) " : "", [])
            return nil
        }
        if line.hasPrefix("%output ") || line.hasPrefix("%extended-output ") || line.hasPrefix("%layout-change ") {
            return .changed
        }
        if line.hasPrefix("%session-changed ") { return .attached }
        if line.hasPrefix("%exit") { return .exit }
        return nil
    }
}

/// Reads tmux control mode's output for a text: in the reply to a command (between
/// `%begin` and `%end`) line by line, in `%output` notifications as the pane's bytes
/// (octal escapes undone) kept across notifications.
struct ControlModeScanner {
    let needle: [UInt8]
    private var line: [UInt8] = []
    private var inReply = false
    private var output: [UInt8] = []
    /// The line a reply carries when the pane's program ended (`#{pane_dead}` after it).
    static let deadMark = "sshkit-pane-dead:"
    /// The client is attached (tmux said `%session-changed`): from here on, every byte the
    /// pane prints comes as `%output`.
    private(set) var isAttached = false

    init(needle: [UInt8]) { self.needle = needle }

    /// Feeds a chunk: true once the text was seen, false when the client ended (`%exit`)
    /// or a reply says the pane's program ended, nil to read on.
    mutating func feed(_ chunk: [UInt8]) -> Bool? {
        for byte in chunk {
            guard byte == UInt8(ascii: "\n") else {
                line.append(byte)
                continue
            }
            defer { line.removeAll(keepingCapacity: true) }
            if let verdict = take(line) { return verdict }
        }
        return nil
    }

    private mutating func take(_ line: [UInt8]) -> Bool? {
        if line.starts(with: Array("%begin ".utf8)) {
            inReply = true
        } else if line.starts(with: Array("%end ".utf8)) || line.starts(with: Array("%error ".utf8)) {
            inReply = false
        } else if inReply {
            if Self.contains(line, needle) { return true }
            if line.elementsEqual(Array((Self.deadMark + "1").utf8)) { return false }
        } else if line.starts(with: Array("%output ".utf8)) {
            // %output %<pane> <escaped bytes>
            guard let space = line.dropFirst(8).firstIndex(of: UInt8(ascii: " ")) else { return nil }
            output += Self.unescape(line[(space + 1)...])
            if Self.contains(output, needle) { return true }
            if output.count > 65536 + needle.count { output.removeFirst(output.count - needle.count) }
        } else if line.starts(with: Array("%session-changed ".utf8)) {
            isAttached = true
        } else if line.starts(with: Array("%exit".utf8)) {
            return false
        }
        return nil
    }

    /// tmux escapes bytes below space, and the backslash, as `\ooo`.
    static func unescape(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let b = bytes[i]
            if b == UInt8(ascii: "\\"), bytes.distance(from: i, to: bytes.endIndex) >= 4 {
                let digits = bytes[(i + 1)...(i + 3)]
                if digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "7") }) {
                    out.append(digits.reduce(0) { $0 &* 8 &+ ($1 - UInt8(ascii: "0")) })
                    i += 4
                    continue
                }
            }
            out.append(b)
            i += 1
        }
        return out
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        var i = 0
        while i + needle.count <= haystack.count {
            if haystack[i] == needle[0] && haystack[i..<(i + needle.count)].elementsEqual(needle) { return true }
            i += 1
        }
        return false
    }
}
