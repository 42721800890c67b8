import Foundation

/// What an agent is doing.
public enum AgentActivity: Sendable, Hashable {
    /// Started, nothing to go by yet.
    case starting
    /// Busy with a turn.
    case working
    /// Asking the user something (a permission, a question, a usage limit to wait out);
    /// the question is `AgentStatus.question`.
    case waitingForInput
    /// A turn finished and nobody has looked since: kept until someone attaches, reads
    /// its log or sends it something, then `idle`.
    case done
    /// At its prompt, waiting for the next one.
    case idle
    /// The agent process ended (a signal N is reported as 128 + N, as shells do).
    case exited(Int32)
    /// Stopped by the engine.
    case stopped
    /// The session is gone without a stop (the host rebooted, someone killed it).
    case lost

    /// Whether someone should look: a question waits, or a turn is done.
    public var needsYou: Bool {
        switch self {
        case .waitingForInput, .done: true
        default: false
        }
    }

    /// The word the watcher's files and the JSON output use: `starting`, `working`,
    /// `waiting`, `done`, `idle`, `exited`, `stopped`, `lost`.
    public var name: String {
        switch self {
        case .starting: "starting"
        case .working: "working"
        case .waitingForInput: "waiting"
        case .done: "done"
        case .idle: "idle"
        case .exited: "exited"
        case .stopped: "stopped"
        case .lost: "lost"
        }
    }
}

/// An agent's activity and where the engine learned it.
public struct AgentStatus: Sendable, Hashable {
    public enum Source: String, Sendable, Hashable {
        /// The agent's own hooks (Claude's and Gemini's and Qwen's hooks, Codex's notify,
        /// OpenCode's plugin), written on the host as they fire.
        case hook
        /// Read off the screen by the screen rules (`AgentScreenRules`).
        case screen
        /// The process itself: it has not shown anything yet, it ended, or its session
        /// is gone.
        case process
    }

    public var activity: AgentActivity
    public var source: Source
    /// When the activity began (as the host saw it).
    public var since: Date
    /// For `waitingForInput`: the question, as the screen or the hook gave it.
    public var question: String?
    /// What gave the state: a hook event (`stop`, `tool`), a screen rule's id
    /// (`shipped:42`, `user:3`; see `AgentScreenRules.rule(id:)`), `quiet` (no rule
    /// matched: the screen changed or did not), `activity` (a first look: tmux's own
    /// activity time), `pane-dead`, `stopped`, `gone`.
    public var rule: String?
    /// For `waitingForInput` on a usage limit: when it resets, as the host read it from the
    /// agent's message; nil when the message names no time it can read, and in events.
    public var limitedUntil: Date?

    /// "limited until 14:05" (or "limited until Dec 1 14:05" on another day, in this
    /// machine's time zone) for an agent held by a usage limit whose reset is known.
    public var limitText: String? {
        guard activity == .waitingForInput, let until = limitedUntil else { return nil }
        let f = DateFormatter()
        f.dateFormat = Calendar.current.isDate(until, inSameDayAs: Date()) ? "HH:mm" : "MMM d HH:mm"
        return "limited until \(f.string(from: until))"
    }

    /// Whether the status was read off the screen.
    public var isInferred: Bool { source == .screen }

    public init(activity: AgentActivity, source: Source, since: Date, question: String? = nil, rule: String? = nil) {
        self.activity = activity
        self.source = source
        self.since = since
        self.question = question
        self.rule = rule
    }
}

/// Where a reader of a host's status events is: the host's log and the last event read.
/// Kept between runs (`agent-sessions watch` stores it), so events are read on from there:
/// none lost, none read twice.
public struct AgentEventCursor: Sendable, Hashable, Codable {
    /// The host's event log (a new log, after its files were removed, starts over).
    public var log: String
    public var sequence: Int

    public init(log: String, sequence: Int) {
        self.log = log
        self.sequence = sequence
    }
}

/// One change of an agent's status, as the host's watcher recorded it.
public struct AgentStatusEvent: Sendable, Hashable {
    /// Its place in the host's log.
    public var cursor: AgentEventCursor
    /// The tmux session (the PTY id) of the agent.
    public var session: String
    public var status: AgentStatus

    public var ptyID: AgentPTYID? { AgentPTYID(parsing: session) }

    public init(cursor: AgentEventCursor, session: String, status: AgentStatus) {
        self.cursor = cursor
        self.session = session
        self.status = status
    }
}

/// The events agent hooks write: one line `<unix seconds> <event> [text]` each, appended
/// to `~/.cache/sshkit-agents/status/<pty id>` on the host, where the watcher reads them.
public enum AgentHookEvent: String, Sendable, CaseIterable {
    /// The session began (idle at its prompt).
    case start
    /// A prompt was submitted (working).
    case prompt
    /// A tool is about to run, or a model call begins (working).
    case tool
    /// An approval was answered (working again).
    case answered
    /// The agent asks the user (waiting for input; the text is the question).
    case notification
    /// An approval is asked (waiting for input; the text is what is to be approved).
    case approval
    /// The turn ended (idle, or done until someone looks).
    case stop
    /// The turn ended with an error (as `stop`).
    case failure
}
