import ServerTransport

/// The one error of the agent-sessions engine.
///
/// `code` is stable and meant for `switch`/`==`; `message` is for people. A failure of
/// the transport underneath (the host cannot be reached, a file call failed) keeps the
/// `TransportError` as `transport`, so a UI can say "host unreachable" the same way it
/// does for the transports.
public struct AgentError: Error, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        init(_ name: String) { self.name = name }
        public var description: String { name }

        /// An argument is invalid (nothing was run): an empty binary, a NUL byte, a
        /// zero terminal size.
        public static let invalidArgument = Code("invalidArgument")
        /// An environment variable name does not match `^[A-Za-z_][A-Za-z0-9_]*$`.
        public static let invalidEnvironmentName = Code("invalidEnvironmentName")
        /// No provider has this id.
        public static let unknownProvider = Code("unknownProvider")
        /// The login shell of the host is not one the engine starts agents under
        /// (bash, sh, zsh or fish in /bin, /usr/bin or /usr/local/bin).
        public static let shellNotAllowed = Code("shellNotAllowed")
        /// The project path is not a git checkout (or git is missing on the host).
        public static let notAGitRepository = Code("notAGitRepository")
        /// A git command failed; `detail` has what git printed.
        public static let gitFailed = Code("gitFailed")
        /// Removing a worktree would lose work: uncommitted changes or commits that no
        /// other branch or remote has. Pass `force` to remove it anyway.
        public static let worktreeHasUnsavedWork = Code("worktreeHasUnsavedWork")
        /// There is nothing to land: no change to commit, or no commit over the base to
        /// push, propose or merge.
        public static let nothingToLand = Code("nothingToLand")
        /// The project has no git remote to push to or to open a pull request on.
        public static let noRemote = Code("noRemote")
        /// A pull request cannot be made: `gh` is not on the host (or not logged in) and
        /// the remote is not on a forge whose compare page is known.
        public static let noForge = Code("noForge")
        /// A merge would conflict; `detail` lists the files. Nothing was changed.
        public static let mergeConflict = Code("mergeConflict")
        /// A checkout that the operation would change has uncommitted changes (the base
        /// branch's checkout on a merge, the task's worktree for work that is not
        /// committed). Nothing was changed.
        public static let checkoutHasChanges = Code("checkoutHasChanges")
        /// A local repository is not a clone of the task's project (neither the same
        /// origin nor a commit in common); pass `force` to use it anyway.
        public static let notTheSameProject = Code("notTheSameProject")
        /// tmux is not installed on the host (sessions then do not survive a disconnect).
        public static let tmuxUnavailable = Code("tmuxUnavailable")
        /// The agent cannot start on the host: its binary is not installed there, or is
        /// installed but not usable (a stub, a version that cannot run the engine's way).
        public static let agentUnavailable = Code("agentUnavailable")
        /// A tmux command failed; `detail` has what tmux printed.
        public static let tmuxFailed = Code("tmuxFailed")
        /// The session has no live terminal to attach to, type into or resize.
        public static let sessionNotRunning = Code("sessionNotRunning")
        /// The transport cannot open a terminal (a PTY), so a session cannot be
        /// attached; its output and keystrokes still work through tmux.
        public static let terminalUnsupported = Code("terminalUnsupported")
        /// The task is archived: it takes no input, no new agent, no resume and no port;
        /// its worktree and branch stay (a new task goes on from them).
        public static let taskArchived = Code("taskArchived")
        /// No host, project, task or conversation with that id in the store.
        public static let notFound = Code("notFound")
        /// What a user typed names several records (an id prefix two tasks share, a
        /// project name two hosts have); the message says what to add.
        public static let ambiguous = Code("ambiguous")
        /// The name is taken: a host of that name, a project of that name or checkout on
        /// its host.
        public static let nameTaken = Code("nameTaken")
        /// A host or project with tasks is taken out of the store only when forced.
        public static let hasTasks = Code("hasTasks")
        /// The task is a single task, not one of several attempts at a work.
        public static let notAnAttempt = Code("notAnAttempt")
        /// The store (the records, the session map) failed to read or write; nothing was
        /// half-done on a host.
        public static let storage = Code("storage")
        /// The transport failed; `transport` has its classified error.
        public static let transport = Code("transport")
        /// The operation was cancelled.
        public static let cancelled = Code("cancelled")
    }

    public var code: Code
    public var message: String
    /// Output of the failing remote command (git's or tmux's stderr), trimmed.
    public var detail: String?
    /// The underlying error: the `TransportError` of a `transport` failure (or of a
    /// cancelled call, or of a terminal that no longer takes input).
    public var cause: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, detail: String? = nil, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.detail = detail
        self.cause = cause
    }

    /// A transport failure while doing `what` ("connecting to build-1 (me@10.0.0.5:22)");
    /// a cancelled call stays `cancelled`, and one past its time limit says what ran too long.
    public init(_ error: TransportError, while what: String) {
        if error.isCancellation {
            self.init(.cancelled, "cancelled while \(what)", cause: error)
        } else if error.code == .timedOut, let after = error.timeout {
            // the transport's message names the whole command line; `what` says it better
            self.init(.transport, "\(what): ran longer than \(after) and was stopped", cause: error)
        } else {
            self.init(.transport, "\(what): \(error.message)", cause: error)
        }
    }

    public var description: String {
        var s = "AgentError.\(code): \(message)"
        if let detail, !detail.isEmpty { s += " (\(detail.prefix(300)))" }
        return s
    }
}
