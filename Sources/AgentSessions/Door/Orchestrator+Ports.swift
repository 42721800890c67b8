import Foundation
import SSHKit
import ServerTransport
import Synchronization

/// A task's port on its host, reachable on this machine.
public struct TaskPortForward: Sendable, Hashable {
    /// The task whose port it is.
    public var taskID: TaskID
    /// The port on this machine (127.0.0.1).
    public var localPort: Int
    /// The task's port on its host.
    public var remotePort: Int
    /// `http://127.0.0.1:<localPort>/`.
    public var url: String { "http://127.0.0.1:\(localPort)/" }
}

/// Each project's pull requests by branch, kept for a minute (`gh` asks the forge).
final class PullRequestCache: Sendable {
    private let entries = Mutex<[ProjectID: (at: ContinuousClock.Instant, byBranch: [String: PullRequestState])]>([:])

    func get(_ projectID: ProjectID) -> [String: PullRequestState]? {
        entries.withLock { e in e[projectID].flatMap { ContinuousClock.now - $0.at < .seconds(60) ? $0.byBranch : nil } }
    }

    func set(_ projectID: ProjectID, _ byBranch: [String: PullRequestState]) {
        entries.withLock { $0[projectID] = (.now, byBranch) }
    }

    /// Forgets a project's list (after a pull request was opened).
    func forget(_ projectID: ProjectID) { _ = entries.withLock { $0.removeValue(forKey: projectID) } }
}

/// What happened to a task's open port (`AgentOrchestrator.portEvents`).
public enum TaskPortEvent: Sendable, Equatable {
    /// The host's connection ended under the forward; it is made again, on the same local
    /// port, once the host answers (tried after 0.5, 1, 2, 4, then every 5 s).
    case lost(reason: String)
    /// Forwarding again, on the same local port, after that many tries.
    case restored(TaskPortForward, tries: Int)
    /// The forward could not be made again (the local port was taken meanwhile, or the
    /// task lost its port): it is closed.
    case closed(reason: String)
}

/// The forwards an engine holds, per task, each kept by a task that makes it again after
/// its connection dropped.
final class TaskPortForwards: Sendable {
    private struct Entry {
        var forward: TaskPortForward
        var listener: SSHPortForward
        var keeper: Task<Void, Never>?
        var watchers: [UInt64: AsyncStream<TaskPortEvent>.Continuation] = [:]
    }

    private let open = Mutex<[TaskID: Entry]>([:])
    private let nextWatcher = Atomic<UInt64>(0)

    func add(_ f: TaskPortForward, _ listener: SSHPortForward) {
        open.withLock { $0[f.taskID] = Entry(forward: f, listener: listener) }
    }

    func keep(_ taskID: TaskID, by keeper: Task<Void, Never>) {
        let stale = open.withLock { d -> Bool in
            guard d[taskID] != nil else { return true }
            d[taskID]?.keeper = keeper
            return false
        }
        if stale { keeper.cancel() }
    }

    func get(_ taskID: TaskID) -> TaskPortForward? { open.withLock { $0[taskID]?.forward } }
    var all: [TaskPortForward] { open.withLock { $0.values.map(\.forward) }.sorted { $0.localPort < $1.localPort } }

    /// The listener now (it is replaced after a drop); nil once closed.
    func listener(_ taskID: TaskID) -> SSHPortForward? { open.withLock { $0[taskID]?.listener } }

    /// After a drop: the new listener, when the forward is still open.
    func replace(_ taskID: TaskID, _ listener: SSHPortForward) -> Bool {
        open.withLock { d in
            guard d[taskID] != nil else { return false }
            d[taskID]?.listener = listener
            return true
        }
    }

    func events(_ taskID: TaskID) -> AsyncStream<TaskPortEvent> {
        let (stream, continuation) = AsyncStream<TaskPortEvent>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let id = nextWatcher.add(1, ordering: .relaxed).newValue
        let added = open.withLock { d -> Bool in
            guard d[taskID] != nil else { return false }
            d[taskID]?.watchers[id] = continuation
            return true
        }
        guard added else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in _ = self?.open.withLock { $0[taskID]?.watchers.removeValue(forKey: id) } }
        return stream
    }

    func emit(_ taskID: TaskID, _ event: TaskPortEvent) {
        for c in open.withLock({ Array(($0[taskID]?.watchers ?? [:]).values) }) { c.yield(event) }
    }

    func close(_ taskID: TaskID) async {
        guard let e = open.withLock({ $0.removeValue(forKey: taskID) }) else { return }
        e.keeper?.cancel()
        await e.listener.close()
        for c in e.watchers.values { c.finish() }
    }

    func closeAll() async {
        let all = open.withLock { d -> [TaskID] in Array(d.keys) }
        for id in all { await close(id) }
    }
}

extension AgentOrchestrator {
    /// Forwards a port of this machine (127.0.0.1) to the task's port on its host (`PORT`
    /// in its environment: where its dev server listens) over the host's shared
    /// connection: no second login, one forward per task, each on its own local port.
    /// The local port is `localPort` when given, else the task's own number when it is
    /// free here, else one the system picks. Open already: the same forward again. When the
    /// host's connection drops, it is made again on the same local port once the host
    /// answers (`portEvents` says so). It ends with the task (archive, delete), the engine,
    /// or `closePort`.
    /// - Throws: `taskArchived`; `invalidArgument` (the task has no port: it was made before
    ///   tasks had one; the local port is taken), `transport`, `notFound`.
    func openPort(taskID: TaskID, localPort: Int? = nil) async throws(AgentError) -> TaskPortForward {
        if let open = portForwards.get(taskID) { return open }
        let (task, _, host) = try await context(task: taskID)
        try Self.refuseArchived(task)
        guard let remote = task.port else {
            throw AgentError(.invalidArgument, "the task \(task.title) has no port of its own (it was made before tasks had one)")
        }
        let listener = try await forward(host, remote: remote, localPort: localPort)
        let forward = TaskPortForward(taskID: taskID, localPort: listener.port ?? 0, remotePort: remote)
        portForwards.add(forward, listener)
        portForwards.keep(taskID, by: Task { [weak self] in await self?.keepForwarding(forward, host: host) })
        return forward
    }

    /// One listener on 127.0.0.1 here whose connections go to `remote` on the host: on
    /// `localPort`, else the same number when it is free here, else any.
    private func forward(_ host: HostRecord, remote: Int, localPort: Int?) async throws(AgentError) -> SSHPortForward {
        try await onHost(host) { h in
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
    }

    /// Keeps a task's forward open until `closePort`: when its connection ends under it,
    /// says so and makes it again on the same local port once the host answers, as
    /// `attach` reattaches (0.5, 1, 2, 4, then every 5 s).
    private func keepForwarding(_ forward: TaskPortForward, host: HostRecord) async {
        let id = forward.taskID
        while !Task.isCancelled, let listener = portForwards.listener(id) {
            do throws(SSHError) {
                try await listener.waitUntilClosed()
                return // closed here
            } catch {
                guard !Task.isCancelled else { return }
                portForwards.emit(id, .lost(reason: error.message))
            }
            var wait = Duration.milliseconds(500), tries = 0
            while !Task.isCancelled {
                try? await Task.sleep(for: wait)
                guard !Task.isCancelled else { return }
                wait = min(wait * 2, .seconds(5))
                tries += 1
                do throws(AgentError) {
                    let again = try await self.forward(host, remote: forward.remotePort, localPort: forward.localPort)
                    guard portForwards.replace(id, again) else {
                        await again.close()
                        return
                    }
                    portForwards.emit(id, .restored(forward, tries: tries))
                    break
                } catch where error.code == .invalidArgument || error.code == .notFound {
                    portForwards.emit(id, .closed(reason: error.message))
                    await portForwards.close(id)
                    return
                } catch {
                    continue // the host does not answer yet
                }
            }
        }
    }

    /// What happens to the task's open port from now on: lost, restored, closed. The
    /// stream ends when the port is closed (at once when it is not open).
    func portEvents(taskID: TaskID) -> AsyncStream<TaskPortEvent> { portForwards.events(taskID) }

    /// Closes the task's forward, if any.
    func closePort(taskID: TaskID) async { await portForwards.close(taskID) }

    /// The forwards open now, by local port.
    public var openPorts: [TaskPortForward] { portForwards.all }
}
