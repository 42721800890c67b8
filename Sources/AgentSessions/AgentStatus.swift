import Foundation

/// What an agent is doing.
public enum AgentActivity: Sendable, Hashable {
    /// Started, nothing shown yet.
    case starting
    /// Busy with a turn (it printed within the last moments, or a hook said so).
    case working
    /// Asking the user something (a permission, a yes/no, a setup question).
    case waitingForInput
    /// Done with its turn, waiting for the next prompt.
    case idle
    /// The agent process ended (a signal N is reported as 128 + N, as shells do).
    case exited(Int32)
    /// The session is gone (stopped, the host rebooted) or the host cannot be reached.
    case lost
}

/// An agent's activity and where the engine learned it.
public struct AgentStatus: Sendable, Hashable {
    public enum Source: Sendable, Hashable {
        /// The agent's own hooks (Claude's hooks, Codex's notify), written on the host.
        case hook
        /// Read off the screen: a guess, debounced, and labelled as one.
        case screen
        /// The process itself: it ended, or its session is gone.
        case process
    }

    public var activity: AgentActivity
    public var source: Source
    /// When the activity was first seen.
    public var since: Date

    /// Whether the status was guessed from the screen.
    public var isInferred: Bool { source == .screen }

    public init(activity: AgentActivity, source: Source, since: Date) {
        self.activity = activity
        self.source = source
        self.since = since
    }
}

/// The events agent hooks write: one line `<unix seconds> <event>` each, appended to
/// `~/.cache/sshkit-agents/status/<pty id>` on the host.
public enum AgentHookEvent: String, Sendable, CaseIterable {
    /// The session began (Claude's SessionStart).
    case start
    /// A prompt was submitted (UserPromptSubmit).
    case prompt
    /// A tool is about to run (PreToolUse).
    case tool
    /// The agent asks the user (Notification).
    case notification
    /// The turn ended (Claude's Stop, Codex's agent-turn-complete notify).
    case stop

    var activity: AgentActivity {
        switch self {
        case .start: .idle
        case .prompt, .tool: .working
        case .notification: .waitingForInput
        case .stop: .idle
        }
    }

    /// The last event of a status file's text, with its time.
    static func last(in text: String) -> (AgentHookEvent, Date)? {
        for line in text.split(separator: "\n").reversed() {
            let f = line.split(separator: " ")
            if f.count == 2, let t = Double(f[0]), let e = AgentHookEvent(rawValue: String(f[1])) {
                return (e, Date(timeIntervalSince1970: t))
            }
        }
        return nil
    }
}

/// Infers an agent's activity from successive captures of its screen, for agents without
/// hooks. A new guess is reported only after it was seen twice in a row (debounce), so a
/// screen caught mid-redraw does not flip the status.
public struct AgentScreenInference: Sendable {
    /// Text near the bottom of a screen that asks the user something.
    public static let questionMarkers = [
        "(y/n)", "[y/n]", "[Y/n]", "[y/N]", "(Y/n)", "(y/N)", "Do you want", "Allow ", "Approve", "approve?",
        "Press Enter", "press enter", "Continue?", "Proceed?", "Run setup now?", "Select an option", "❯ 1.", "> 1.",
    ]
    /// How long a screen must stay unchanged before the agent counts as idle.
    public var quietPeriod: TimeInterval

    private var lastScreen: String?
    private var lastChange: Date?
    private var candidate: AgentActivity?
    private(set) public var reported: AgentActivity?

    public init(quietPeriod: TimeInterval = 3) {
        self.quietPeriod = quietPeriod
    }

    /// Takes a new capture of the visible screen; returns the activity to report now
    /// (nil until the first guess is confirmed).
    public mutating func observe(screen: String, at now: Date) -> AgentActivity? {
        let text = screen.trimmingCharacters(in: .whitespacesAndNewlines)
        if text != lastScreen {
            lastScreen = text
            lastChange = now
        }
        let guess: AgentActivity
        if text.isEmpty {
            guess = .starting
        } else if Self.asksTheUser(text) {
            guess = .waitingForInput
        } else if let lastChange, now.timeIntervalSince(lastChange) < quietPeriod {
            guess = .working
        } else {
            guess = .idle
        }
        if guess == candidate { reported = guess }
        candidate = guess
        return reported
    }

    static func asksTheUser(_ screen: String) -> Bool {
        let tail = screen.split(separator: "\n", omittingEmptySubsequences: true).suffix(6).joined(separator: "\n")
        return questionMarkers.contains { tail.contains($0) }
    }
}
