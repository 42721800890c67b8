import Synchronization

/// Where an engine operation spends its time: while a trace is current (`AgentTrace.$current`,
/// a task-local value, so it follows the operation into the tasks it starts), every remote
/// command the engine runs is written down with its host, when it started, how long it
/// took and the bytes each way, and so is every phase the engine marks (`records`,
/// `planning`). A benchmark or a `--trace` run reads `steps` afterwards.
///
/// ```swift
/// let trace = AgentTrace()
/// let made = try await AgentTrace.$current.withValue(trace) {
///     try await engine.project(id).createTask(title: "fix it", providerID: "claude")
/// }
/// for step in trace.steps { print(step.name, step.duration) }
/// ```
///
/// Nothing is written down, and nothing costs, when no trace is current.
public final class AgentTrace: Sendable {
    /// One thing an operation did.
    public struct Step: Sendable, Hashable {
        public enum Kind: String, Sendable, Hashable {
            /// A command run on a host to its end: one channel, one round trip at least.
            case remoteCommand
            /// A command on a host whose output is read as it comes (a wait, a follow).
            case remoteStream
            /// A part of the operation the engine marks (it may hold remote commands).
            case phase
        }

        public let kind: Kind
        /// What the step did, as the engine's messages say it (`claiming a port for the
        /// task`), or the phase's name.
        public let name: String
        /// The host's name in messages; empty for a phase.
        public let host: String
        /// When it started, from the trace's start.
        public let start: Duration
        public let duration: Duration
        /// A remote command's arguments and standard input.
        public let bytesSent: Int
        /// A remote command's standard output and error.
        public let bytesReceived: Int
    }

    /// The trace the current task writes to, if any.
    @TaskLocal public static var current: AgentTrace?

    private let began = ContinuousClock.now
    private let written = Mutex<[Step]>([])

    public init() {}

    /// What was written down, in the order the steps ended.
    public var steps: [Step] { written.withLock { $0 } }

    /// The remote commands (not the streams or phases) written down.
    public var remoteCommands: [Step] { steps.filter { $0.kind == .remoteCommand } }

    func write(_ kind: Step.Kind, _ name: String, host: String, started: ContinuousClock.Instant, sent: Int = 0, received: Int = 0) {
        let step = Step(kind: kind, name: name, host: host, start: started - began, duration: ContinuousClock.now - started,
                        bytesSent: sent, bytesReceived: received)
        written.withLock { $0.append(step) }
    }

    /// Runs `body` as the phase `name` of the current trace (when there is one).
    static func phase<T, E: Error>(_ name: String, _ body: () async throws(E) -> T) async throws(E) -> T {
        guard let trace = current else { return try await body() }
        let started = ContinuousClock.now
        defer { trace.write(.phase, name, host: "", started: started) }
        return try await body()
    }
}
