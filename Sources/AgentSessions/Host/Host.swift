import SSHKit
import ServerTransport
import Synchronization

/// One machine that runs agents, reached through a `ServerTransport`: its files and
/// processes, and what was learned about it (the home directory, the installed agents),
/// composed of parts that each own one concern: `tmux`, the private tmux server the
/// engine owns there; `worktrees`, the tasks' git worktrees; `claudeSessions`,
/// `codexThreads` and `recordedSessions`, each vendor's sessions found for a resume.
/// Starting, attaching and stopping agents, their status and the resume plan (chosen by
/// the provider's `sessionTracking`) are the host's own, over those parts.
///
/// Every session on a host shares the transport, so an `SSHTransport` gives every
/// agent of the host one SSH connection. An `AgentHost` is cheap; keep one per host.
public final class AgentHost: Sendable {
    /// What every part shares: the transport, the host's name in messages, its home.
    let shell: HostShell
    /// The engine's private tmux server on the host (`tmux -L <name>`); the user's own
    /// tmux sessions are never touched.
    public let tmux: AgentTmuxServer
    /// The tasks' git worktrees on the host.
    public let worktrees: AgentWorktrees
    /// Per vendor, where its sessions are found for an exact resume: Claude Code's
    /// transcripts, Codex's threads, and the sessions Vibe, Hermes and Kimi record.
    public let claudeSessions: ClaudeSessionFinder
    public let codexThreads: CodexThreadFinder
    public let recordedSessions: RecordedSessionFinder
    /// Directories searched for agent binaries before the login PATH, e.g. a test's or
    /// an admin's own tool directory. `~/` is the host user's home.
    public let extraSearchPath: [String]
    let detectionCache = Mutex<AgentDetection.Cached?>(nil)
    /// Agents on plain PTY channels (hosts without tmux), by PTY id.
    let plainSessions = Mutex<[String: PlainAgentSession]>([:])

    /// - Parameter landingTimeout: how long a commit, push, merge or pull request may run
    ///   on the host before it is stopped and fails with `transport` (`timedOut`).
    public init(transport: any ServerTransport, tmuxSocket: String = "sshkit-agents", extraSearchPath: [String] = [],
                displayName: String? = nil, landingTimeout: Duration = AgentOrchestrator.defaultLandingTimeout)
    {
        precondition(!tmuxSocket.isEmpty && tmuxSocket.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) },
                     "a tmux socket name is letters, digits, '-', '_' and '.'")
        shell = HostShell(transport: transport, displayName: displayName ?? transport.serverID.rawValue,
                          landingTimeout: landingTimeout)
        tmux = AgentTmuxServer(socket: tmuxSocket, shell: shell)
        worktrees = AgentWorktrees(shell: shell)
        claudeSessions = ClaudeSessionFinder(shell: shell)
        codexThreads = CodexThreadFinder(shell: shell)
        recordedSessions = RecordedSessionFinder(shell: shell)
        self.extraSearchPath = extraSearchPath
    }

    public var transport: any ServerTransport { shell.transport }
    /// The name of the engine's private tmux server (`tmux -L <name>`).
    public var tmuxSocket: String { tmux.socket }
    /// How messages name the host: as its user knows it (`build-1 (me@10.0.0.5:22)`),
    /// by default the transport's identity.
    public var displayName: String { shell.displayName }
    public var serverID: ServerID { transport.serverID }

    /// The login user's home directory on the host (asked once).
    public func home() async throws(AgentError) -> String { try await shell.home() }

    /// `path` with a leading `~` replaced by the home directory.
    public func absolutePath(_ path: String) async throws(AgentError) -> String { try await shell.absolutePath(path) }

    /// See `HostShell.run`.
    func run(_ executable: String, _ arguments: [String], stdin: [UInt8] = [], timeout: Duration? = .seconds(60),
             idempotent: Bool = true, what: String) async throws(AgentError) -> ProcessResult
    {
        try await shell.run(executable, arguments, stdin: stdin, timeout: timeout, idempotent: idempotent, what: what)
    }

    /// Forgets what was learned about the host (after a reconnect: the agents may have
    /// changed; the home has not, but it is cheap to ask again).
    public func forgetCachedFacts() {
        detectionCache.withLock { $0 = nil }
    }
}

/// What the parts of a host share: its transport, how messages name it, its home
/// directory (asked once), and running a process there with one error vocabulary.
final class HostShell: Sendable {
    let transport: any ServerTransport
    let displayName: String
    /// How long landing the work may run (`AgentOrchestrator.defaultLandingTimeout`).
    let landingTimeout: Duration
    private let cachedHome = Mutex<String?>(nil)

    init(transport: any ServerTransport, displayName: String, landingTimeout: Duration = AgentOrchestrator.defaultLandingTimeout) {
        self.transport = transport
        self.displayName = displayName
        self.landingTimeout = landingTimeout
    }

    func home() async throws(AgentError) -> String {
        if let h = cachedHome.withLock({ $0 }) { return h }
        let r = try await run("/bin/sh", ["-c", "printf '%s' \"$HOME\""], what: "reading the home directory")
        let h = r.stdoutString
        guard h.hasPrefix("/") else { throw AgentError(.transport, "the host reports no home directory (HOME='\(h)')") }
        cachedHome.withLock { $0 = h }
        return h
    }

    func absolutePath(_ path: String) async throws(AgentError) -> String {
        if path == "~" { return try await home() }
        if path.byteHasPrefix("~/") { return try await home() + path.byteDropFirst(1) }
        guard path.byteHasPrefix("/") else {
            throw AgentError(.invalidArgument, "a path on the host must be absolute or start with '~/', got '\(path)'")
        }
        return path
    }

    /// Runs a process on the host; a transport failure becomes `AgentError.transport`
    /// (or `cancelled`). A non-zero exit is a result.
    ///
    /// - Parameter idempotent: the command only reads, or running it twice does no harm
    ///   (`tmux capture-pane`, `git status`). When the connection turns out to be gone
    ///   (it dropped while idle), such a command runs once more on a new connection; any
    ///   other fails with `transport` (`hostUnreachable`), since it may have run.
    func run(_ executable: String, _ arguments: [String], stdin: [UInt8] = [], timeout: Duration? = .seconds(60),
             idempotent: Bool = true, what: String) async throws(AgentError) -> ProcessResult
    {
        var attempt = 0
        let trace = AgentTrace.current, started = ContinuousClock.now
        while true {
            attempt += 1
            do {
                let r = try await transport.runProcess(executable, arguments: arguments, stdin: stdin, environment: [:],
                                                       timeout: timeout)
                trace?.write(.remoteCommand, what, host: displayName, started: started,
                             sent: executable.utf8.count + arguments.reduce(0) { $0 + $1.utf8.count } + stdin.count,
                             received: r.stdout.count + r.stderr.count)
                return r
            } catch where idempotent && attempt == 1 && error.code == .hostUnreachable && !error.isCancellation {
                continue
            } catch {
                throw AgentError(error, while: what)
            }
        }
    }
}
