import Foundation
import ServerTransport

/// A prompt that waits on the host for its agent to finish a turn.
public struct AgentQueuedPrompt: Sendable, Equatable {
    /// Its name in the queue, in the order the prompts go (`a-…` for one sent at the next
    /// idle, ahead of the others; `b-…` in the order they were queued).
    public var id: String
    /// What is typed (pasted, then Enter).
    public var text: String
    /// Whether it goes at the agent's next idle, ahead of the queue (`send --when-idle`).
    public var whenIdle: Bool { id.hasPrefix("a-") }
}

/// Why an agent's next queued prompt has not gone yet, as the host's watcher last saw it.
public enum AgentQueueHold: Sendable, Equatable, CustomStringConvertible {
    /// The agent is in a turn: `working`, `waiting` (for an answer) or `starting`.
    case agentBusy(String)
    /// The prompt sent before, at that time, has not been seen to start a turn yet.
    case turnNotSeen(sentAt: Date?)
    /// The agent is not running (`exited:N`, `stopped`, `lost`).
    case agentNotRunning(String)
    /// The watcher does not follow this agent (yet).
    case notFollowed
    /// The prompt could not be pasted into the agent's session (tried again each second).
    case notPasted
    /// The host's watcher is not running (it starts with the next look at the host).
    case watcherNotRunning

    /// The watcher's word for it (`queue/SESSION.why`), or nil for one this release does not know.
    init?(watcherWord line: String) {
        let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
        let detail = parts.count > 1 ? parts[1] : ""
        switch parts.first ?? "" {
        case "working", "waiting", "starting": self = .agentBusy(parts[0])
        case "turn": self = .turnNotSeen(sentAt: Int(detail).map { Date(timeIntervalSince1970: TimeInterval($0)) })
        case "ended": self = .agentNotRunning(detail)
        case "exited", "stopped", "lost": self = .agentNotRunning(parts[0])
        case "unseen": self = .notFollowed
        case "unpasted": self = .notPasted
        default: return nil
        }
    }

    public var description: String {
        switch self {
        case .agentBusy("waiting"): "the agent waits for an answer; the next prompt goes once its turn has ended"
        case .agentBusy("starting"): "the agent is starting; the next prompt goes once it is ready"
        case .agentBusy: "the agent is working; the next prompt goes when its turn ends"
        case .turnNotSeen(let at):
            "the prompt sent" + (at.map { " at " + Self.clock.string(from: $0) } ?? "")
                + " has not been seen to start a turn: the next goes once the agent is seen working and done,"
                + " or its screen has changed and then been still for 3 s"
        case .agentNotRunning(let state):
            "the agent is not running (\(state.replacingOccurrences(of: ":", with: " "))); resume it (tasks resume) for the queue to go on"
        case .notFollowed: "the host's watcher does not follow this agent yet"
        case .notPasted: "the prompt could not be pasted into the agent's session; it is tried again each second"
        case .watcherNotRunning: "the host's status watcher is not running; it starts again with the next look at the host (agent-sessions status)"
        }
    }

    private static let clock: DateFormatter = {
        let f = DateFormatter()
        f.dateFormat = "HH:mm:ss"
        return f
    }()
}

/// An agent's prompt queue on its host, and what holds its next prompt back.
public struct AgentPromptQueue: Sendable, Equatable {
    /// The prompts still queued, in the order they go.
    public var prompts: [AgentQueuedPrompt]
    /// Why the first has not gone yet; nil when nothing holds it (it goes at the watcher's
    /// next look) or nothing is queued.
    public var hold: AgentQueueHold?
}

/// The prompt queues live on the host, beside the status watcher that drains them
/// (`AgentStatusWatcher`): one directory per agent session, a file per prompt, written
/// through a temporary file so the watcher never pastes half of one. The watcher pastes the
/// first prompt when the agent is idle or done and the one sent before it started a turn,
/// so a queue drains while the laptop is asleep or offline.
extension AgentHost {
    /// The queue directory of `ptyID`, relative to the home directory.
    func queueDirectory(_ ptyID: AgentPTYID) -> String {
        "\(AgentStatusWatcher.directory(socket: tmux.socket))/queue/\(ptyID)"
    }

    /// Adds `text` to the queue of `ptyID` (first, for the next idle, when `whenIdle`),
    /// and wakes the watcher.
    func enqueue(_ text: String, for ptyID: AgentPTYID, whenIdle: Bool) async throws(AgentError) -> AgentQueuedPrompt {
        guard !text.isEmpty, !text.utf8.contains(0) else {
            throw AgentError(.invalidArgument, "a queued prompt must be text without NUL bytes")
        }
        let ms = UInt64(max(0, Date().timeIntervalSince1970 * 1000))
        let id = (whenIdle ? "a-" : "b-") + String(format: "%013llu", ms) + "-"
            + String(format: "%04x", UInt16.random(in: 0...UInt16.max))
        let script = """
            w="$HOME/\(AgentStatusWatcher.directory(socket: tmux.socket))"
            umask 077 && mkdir -p "$w/queue/$1" && cat > "$w/queue/$1/$2.tmp" && mv -f "$w/queue/$1/$2.tmp" "$w/queue/$1/$2" \
                || exit 1
            pid=$(cat "$w/pid" 2>/dev/null) && kill -USR1 "$pid" 2>/dev/null
            exit 0
            """
        let r = try await run("/bin/sh", ["-c", script, "sh", ptyID.description, id], stdin: Array(text.utf8),
                              idempotent: false, what: "queueing a prompt")
        guard r.exitStatus == .exited(0) else {
            throw AgentError(.transport, "the prompt could not be queued on \(shell.displayName)", detail: r.stderrString)
        }
        return AgentQueuedPrompt(id: id, text: text)
    }

    /// The prompts still waiting in the queue of `ptyID`, in the order they go.
    func queuedPrompts(of ptyID: AgentPTYID) async throws(AgentError) -> [AgentQueuedPrompt] {
        try await promptQueue(of: ptyID).prompts
    }

    /// The queue of `ptyID` and what the host's watcher last said holds it back.
    func promptQueue(of ptyID: AgentPTYID) async throws(AgentError) -> AgentPromptQueue {
        let script = """
            d="$HOME/\(queueDirectory(ptyID))"; w="$HOME/\(AgentStatusWatcher.directory(socket: tmux.socket))"
            pid=$(cat "$w/pid" 2>/dev/null)
            if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then echo R; fi
            [ ! -f "$d.why" ] || printf 'W %s\\n' "$(cat "$d.why")"
            for f in "$d"/a-* "$d"/b-*; do
                case "$f" in *.tmp) continue ;; esac
                [ -f "$f" ] || continue
                printf 'Q %s %s\\n' "${f##*/}" "$(wc -c < "$f" | tr -d ' ')"
                cat "$f"
            done
            exit 0
            """
        let r = try await run("/bin/sh", ["-c", script], what: "listing the prompt queue")
        guard r.exitStatus == .exited(0) else {
            throw AgentError(.transport, "the prompt queue could not be read on \(shell.displayName)", detail: r.stderrString)
        }
        return Self.parseQueue(r.stdout)
    }

    /// An `R` line when the watcher runs, a `W <word>` line with what holds the queue, then
    /// `Q <id> <length>` lines, each followed by that many bytes of text.
    static func parseQueue(_ bytes: [UInt8]) -> AgentPromptQueue {
        var prompts: [AgentQueuedPrompt] = []
        var running = false
        var word: String?
        var i = 0
        while i < bytes.count {
            guard let nl = bytes[i...].firstIndex(of: UInt8(ascii: "\n")) else { break }
            let line = String(decoding: bytes[i..<nl], as: UTF8.self)
            if line == "R" {
                running = true
                i = nl + 1
                continue
            }
            if line.hasPrefix("W ") {
                word = String(line.dropFirst(2))
                i = nl + 1
                continue
            }
            let header = line.split(separator: " ")
            guard header.count == 3, header[0] == "Q", let n = Int(header[2]), nl + 1 + n <= bytes.count else { break }
            prompts.append(AgentQueuedPrompt(id: String(header[1]),
                                             text: String(decoding: bytes[(nl + 1)..<(nl + 1 + n)], as: UTF8.self)))
            i = nl + 1 + n
        }
        guard !prompts.isEmpty else { return AgentPromptQueue(prompts: [], hold: nil) }
        let hold = running ? word.flatMap(AgentQueueHold.init(watcherWord:)) : .watcherNotRunning
        return AgentPromptQueue(prompts: prompts, hold: hold)
    }

    /// Removes one prompt from the queue of `ptyID`; false when it is no longer there
    /// (it was sent, or removed).
    func removeQueuedPrompt(_ id: String, of ptyID: AgentPTYID) async throws(AgentError) -> Bool {
        guard id.count > 2, id.hasPrefix("a-") || id.hasPrefix("b-"),
              id.allSatisfy({ $0.isASCII && ($0.isHexDigit || $0 == "-") }) else {
            throw AgentError(.invalidArgument, "\(id.debugDescription) is not the id of a queued prompt")
        }
        let script = """
            f="$HOME/\(queueDirectory(ptyID))/$1"
            [ -f "$f" ] || { echo gone; exit 0; }
            rm -f "$f" && echo removed
            """
        let r = try await run("/bin/sh", ["-c", script, "sh", id], what: "removing a queued prompt")
        return r.stdoutString.hasPrefix("removed")
    }

    /// Empties the queue of `ptyID`; how many prompts it held.
    func clearQueue(of ptyID: AgentPTYID) async throws(AgentError) -> Int {
        let script = """
            d="$HOME/\(queueDirectory(ptyID))"; n=0
            for f in "$d"/a-* "$d"/b-*; do [ -f "$f" ] && rm -f "$f" && n=$((n + 1)); done
            echo "$n"
            """
        let r = try await run("/bin/sh", ["-c", script], what: "clearing the prompt queue")
        return Int(r.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    /// Whether the agent of `ptyID` is sent "continue" once after a usage limit: `wait`
    /// after the reset time its message names (nil: it is not). The host's watcher reads
    /// the message and sends it, so it happens while nobody is connected.
    func setContinueAfterLimit(_ wait: Duration?, for ptyID: AgentPTYID) async throws(AgentError) {
        let seconds = wait.map { String(max(0, $0.components.seconds)) } ?? ""
        let script = """
            w="$HOME/\(AgentStatusWatcher.directory(socket: tmux.socket))"
            mkdir -p "$w/queue" || exit 1
            if [ -n "$2" ]; then printf '%s\\n' "$2" > "$w/queue/$1.continue" || exit 1
            else rm -f "$w/queue/$1.continue" "$w/queue/$1.limit"; fi
            pid=$(cat "$w/pid" 2>/dev/null) && kill -USR1 "$pid" 2>/dev/null
            exit 0
            """
        let r = try await run("/bin/sh", ["-c", script, "sh", ptyID.description, seconds], what: "setting continue after a limit")
        guard r.exitStatus == .exited(0) else {
            throw AgentError(.transport, "the setting could not be written on \(shell.displayName)", detail: r.stderrString)
        }
    }

    /// How long after a usage limit's reset the agent of `ptyID` is sent "continue"; nil
    /// when it is not.
    func continueAfterLimit(of ptyID: AgentPTYID) async throws(AgentError) -> Duration? {
        let r = try await run("/bin/sh", ["-c", "cat \"$HOME/$1\" 2>/dev/null; exit 0",
                                          "sh", "\(AgentStatusWatcher.directory(socket: tmux.socket))/queue/\(ptyID).continue"],
                              what: "reading continue after a limit")
        return Int64(r.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)).map { .seconds($0) }
    }
}

/// The screen an agent ended its last turn with, as its host's watcher kept it: at each
/// turn that ended (done, idle), question (waiting) and exit, so it outlives the agent's
/// session and whoever asked for the work, for 30 days.
public struct AgentLastTurn: Sendable, Equatable {
    /// How the turn ended: `.done`, `.idle`, `.waitingForInput` or `.exited`.
    public var activity: AgentActivity
    /// When the watcher saw it.
    public var at: Date
    /// The agent's screen then, as text (trailing blank lines taken off).
    public var screen: String

    /// Parses the kept file: `<state> <unix time>`, then the screen.
    static func parse(_ text: String) -> AgentLastTurn? {
        guard let nl = text.firstIndex(of: "\n") else { return nil }
        let head = text[..<nl].split(separator: " ")
        guard head.count == 2, let seconds = Double(head[1]),
              let status = AgentStatusWatcher.status(state: head[0], source: "process", rule: "-", since: head[1], question: "")
        else { return nil }
        var lines = text[text.index(after: nl)...].split(separator: "\n", omittingEmptySubsequences: false).map {
            String($0.reversed().drop { $0 == " " }.reversed())
        }
        while lines.last?.isEmpty == true { lines.removeLast() }
        return AgentLastTurn(activity: status.activity, at: Date(timeIntervalSince1970: seconds), screen: lines.joined(separator: "\n"))
    }
}

extension AgentHost {
    /// The screen the host's watcher kept when the agent of `ptyID` last ended a turn,
    /// asked a question or exited; nil when it has not yet.
    func lastTurn(of ptyID: AgentPTYID) async throws(AgentError) -> AgentLastTurn? {
        let r = try await run("/bin/sh", ["-c", "cat \"$HOME/$1\" 2>/dev/null; exit 0",
                                          "sh", "\(AgentStatusWatcher.directory(socket: tmux.socket))/results/\(ptyID)"],
                              what: "reading the agent's last turn")
        return AgentLastTurn.parse(r.stdoutString)
    }
}
