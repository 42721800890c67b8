import Foundation

/// What following the hosts' status events yields.
public enum AgentStatusUpdate: Sendable {
    /// An agent's status changed on its host. `conversation` is the record the store has
    /// for the session (nil for a session the store does not know: an orphan).
    case status(AgentStatusEvent, host: HostRecord, conversation: ConversationRecord?)
    /// The host's events are being read (again), from `cursor`.
    case hostConnected(HostRecord, cursor: AgentEventCursor)
    /// The host's events could not be read or stopped coming; they are asked for again,
    /// with a growing pause (1 s to 30 s), and read on from the last one yielded.
    case hostUnreachable(HostRecord, AgentError)
}

extension AgentOrchestrator {
    /// Follows the status events of `hosts` (every host in the store when nil), one
    /// channel per host on its shared connection, until the task is cancelled. Each host's
    /// events are read on from its cursor in `cursors` (by host id; without one, only new
    /// events, or with `newOnly` false, from the start of its log), so a caller that keeps the cursor of the last event it handled
    /// gets each event once across dropped connections and restarts. A host that cannot
    /// be reached is tried again; the others go on.
    public func followStatus(hosts: [HostRecord]? = nil, from cursors: [HostID: AgentEventCursor] = [:],
                             newOnly: Bool = true) -> AsyncStream<AgentStatusUpdate>
    {
        AsyncStream { continuation in
            let task = Task {
                let all: [HostRecord]
                if let hosts {
                    all = hosts
                } else {
                    do {
                        all = try await stored("reading the hosts") { try await self.store.hosts() }
                    } catch {
                        continuation.finish()
                        return
                    }
                }
                await withTaskGroup(of: Void.self) { group in
                    for host in all {
                        group.addTask { await self.follow(host, from: cursors[host.id], newOnly: newOnly, into: continuation) }
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    private func follow(_ host: HostRecord, from start: AgentEventCursor?, newOnly: Bool,
                        into continuation: AsyncStream<AgentStatusUpdate>.Continuation) async
    {
        var cursor = start
        var pause = Duration.seconds(1)
        var known: [String: ConversationRecord] = [:]
        let rules = screenRules
        while !Task.isCancelled {
            do {
                let lines = try await onHost(host) { h in
                    // the watcher runs when the host has agents
                    _ = try await h.watcherSnapshot(rules: rules)
                    return try await h.statusEvents(after: cursor, fromEnd: newOnly)
                }
                for try await line in lines {
                    switch line {
                    case .start(let c):
                        cursor = c
                        pause = .seconds(1)
                        continuation.yield(.hostConnected(host, cursor: c))
                    case .event(let e):
                        if let c = cursor, c.log == e.cursor.log, e.cursor.sequence <= c.sequence { continue }
                        cursor = e.cursor
                        if known[e.session] == nil { known = await conversationsBySession(on: host) }
                        continuation.yield(.status(e, host: host, conversation: known[e.session]))
                    }
                }
                if Task.isCancelled { return }
                throw AgentError(.transport, "the status events of \(host.displayName) ended")
            } catch {
                if Task.isCancelled { return }
                let e = (error as? AgentError) ?? AgentError(.transport, "the status events of \(host.displayName): \(error)")
                continuation.yield(.hostUnreachable(host, e))
                try? await Task.sleep(for: pause)
                pause = min(pause * 2, .seconds(30))
            }
        }
    }

    /// The host's conversations by their session name.
    private func conversationsBySession(on host: HostRecord) async -> [String: ConversationRecord] {
        let store = store
        return (try? await stored("reading the conversations") {
            var all: [String: ConversationRecord] = [:]
            for p in try await store.projects(hostID: host.id) {
                for t in try await store.tasks(projectID: p.id) {
                    for c in try await store.conversations(taskID: t.id) { all[c.ptyID.description] = c }
                }
            }
            return all
        }) ?? [:]
    }
}
