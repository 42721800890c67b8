import Foundation
import SSHKit
import ServerTransport
import Synchronization

/// A task's port on its host, reachable on this machine.
public struct TaskPortForward: Sendable, Hashable {
    /// The task whose port it is.
    public var taskID: String
    /// The port on this machine (127.0.0.1).
    public var localPort: Int
    /// The task's port on its host.
    public var remotePort: Int
    /// `http://127.0.0.1:<localPort>/`.
    public var url: String { "http://127.0.0.1:\(localPort)/" }
}

/// Each project's pull requests by branch, kept for a minute (`gh` asks the forge).
final class PullRequestCache: Sendable {
    private let entries = Mutex<[String: (at: ContinuousClock.Instant, byBranch: [String: PullRequestState])]>([:])

    func get(_ projectID: String) -> [String: PullRequestState]? {
        entries.withLock { e in e[projectID].flatMap { ContinuousClock.now - $0.at < .seconds(60) ? $0.byBranch : nil } }
    }

    func set(_ projectID: String, _ byBranch: [String: PullRequestState]) {
        entries.withLock { $0[projectID] = (.now, byBranch) }
    }

    /// Forgets a project's list (after a pull request was opened).
    func forget(_ projectID: String) { _ = entries.withLock { $0.removeValue(forKey: projectID) } }
}

/// The forwards an engine holds, per task.
final class TaskPortForwards: Sendable {
    private let open = Mutex<[String: (forward: TaskPortForward, listener: SSHPortForward)]>([:])

    func add(_ f: TaskPortForward, _ listener: SSHPortForward) { open.withLock { $0[f.taskID] = (f, listener) } }
    func get(_ taskID: String) -> TaskPortForward? { open.withLock { $0[taskID]?.forward } }
    var all: [TaskPortForward] { open.withLock { $0.values.map(\.forward) }.sorted { $0.localPort < $1.localPort } }

    func close(_ taskID: String) async {
        if let l = open.withLock({ $0.removeValue(forKey: taskID)?.listener }) { await l.close() }
    }

    func closeAll() async {
        let all = open.withLock { d -> [SSHPortForward] in
            defer { d.removeAll() }
            return d.values.map(\.listener)
        }
        for l in all { await l.close() }
    }
}

extension AgentOrchestrator {
    /// Forwards a port of this machine (127.0.0.1) to the task's port on its host (`PORT`
    /// in its environment: where its dev server listens) over the host's shared
    /// connection: no second login, one forward per task, each on its own local port.
    /// The local port is `localPort` when given, else the task's own number when it is
    /// free here, else one the system picks. Open already: the same forward again. It
    /// ends with the task (archive, delete), the engine, or `closePort`.
    /// - Throws: `invalidArgument` (the task has no port: made before tasks had one, or
    ///   archived; the local port is taken), `transport`, `notFound`.
    public func openPort(taskID: String, localPort: Int? = nil) async throws(AgentError) -> TaskPortForward {
        if let open = portForwards.get(taskID) { return open }
        let (task, _, host) = try await context(task: taskID)
        guard let remote = task.port else {
            throw AgentError(.invalidArgument, "the task \(task.title) has no port of its own (it was made before tasks had one, or is archived)")
        }
        let listener: SSHPortForward = try await onHost(host) { h in
            guard let ssh = h.transport as? SSHTransport else {
                throw AgentError(.invalidArgument, "\(host.name) is not reached over SSH: its port is \(remote) there as it is")
            }
            let target = SSHForwardTarget.tcp(host: "127.0.0.1", port: remote)
            do throws(TransportError) {
                if let localPort { return try await ssh.forwardLocalPort(.loopback(port: localPort), to: target) }
                // the task's own number when it is free here, so the URL is the same on both
                if let same = try? await ssh.forwardLocalPort(.loopback(port: remote), to: target) { return same }
                return try await ssh.forwardLocalPort(.loopback(), to: target)
            } catch {
                if error.code == .hostUnreachable || error.isCancellation { throw AgentError(error, while: "forwarding a port of \(host.name)") }
                throw AgentError(.invalidArgument, "cannot listen on 127.0.0.1:\(localPort.map(String.init) ?? "any port"): \(error.message)")
            }
        }
        let forward = TaskPortForward(taskID: taskID, localPort: listener.port ?? 0, remotePort: remote)
        portForwards.add(forward, listener)
        return forward
    }

    /// Closes the task's forward, if any.
    public func closePort(taskID: String) async { await portForwards.close(taskID) }

    /// The forwards open now, by local port.
    public var openPorts: [TaskPortForward] { portForwards.all }
}
