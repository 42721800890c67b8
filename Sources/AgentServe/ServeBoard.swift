import AgentSessions
import Foundation
import Synchronization

/// The board as the page gets it (JSON): every task on every host, the ones whose agents
/// need you first. Records and states only: never code, never a screen.
struct BoardView: Encodable, Sendable, Equatable {
    struct Agent: Encodable, Sendable, Equatable {
        var id: String
        var provider: String
        var state: String
        var needsYou: Bool
        var question: String?
        var since: Date?
    }

    struct Row: Encodable, Sendable, Equatable {
        var id: String
        var title: String
        var branch: String
        var project: String?
        var host: String?
        var hostID: String?
        var hostError: String?
        var filesChanged: Int?
        var archived: Bool
        var attempt: String?
        var agents: [Agent]
        var needsYou: Bool
    }

    var rows: [Row]
    var hosts: [Host]

    struct Host: Encodable, Sendable, Equatable {
        var id: String
        var name: String
        var error: String?
    }

    /// - Parameters:
    ///   - statuses: the agents' latest statuses (from the hosts' events), over the board's.
    ///   - hostErrors: the hosts that cannot be reached now, and why.
    ///   - filesChanged: each task's count from the last time its host was asked.
    init(board: AgentBoard, statuses: [ChatID: AgentStatus], hostErrors: [HostID: String], hosts: [HostRecord],
         filesChanged: [TaskID: Int] = [:]) {
        rows = board.rows.map { row in
            let agents = row.agents.map { a in
                let status = a.record.state == .running ? statuses[a.record.id] ?? a.status : nil
                let state = status?.activity.name ?? Self.name(of: a.record.state)
                return Agent(id: a.record.id.rawValue, provider: a.record.providerID, state: state,
                             needsYou: status?.activity.needsYou ?? false, question: status?.question, since: status?.since)
            }
            let hostError = row.host.flatMap { hostErrors[$0.id] } ?? row.hostError?.message
            return Row(id: row.task.id.rawValue, title: row.task.title, branch: row.task.worktree.branch,
                       project: row.project?.name, host: row.host?.displayName, hostID: row.host?.id.rawValue,
                       hostError: hostError, filesChanged: row.filesChanged ?? filesChanged[row.task.id], archived: row.task.archivedAt != nil,
                       attempt: row.task.attempt?.label, agents: agents,
                       needsYou: agents.contains(where: \.needsYou))
        }
        // what needs you first, then the newest
        let order = Dictionary(uniqueKeysWithValues: board.rows.enumerated().map { ($1.task.id.rawValue, ($0, $1.task.createdAt)) })
        rows.sort { a, b in
            if a.needsYou != b.needsYou { return a.needsYou }
            return (order[a.id]?.1 ?? .distantPast) > (order[b.id]?.1 ?? .distantPast)
        }
        self.hosts = hosts.map { Host(id: $0.id.rawValue, name: $0.displayName, error: hostErrors[$0.id]) }
    }

    static func name(of state: ConversationRecord.State) -> String {
        switch state {
        case .running: "running"
        case .stopped: "stopped"
        case .exited(let c): "exited \(c)"
        case .signaled(let s): "signaled \(s)"
        case .gone: "gone"
        }
    }
}

/// The live board every open page shares: read from the hosts, then kept by their status
/// events (one stream per host for all pages, started for a host added while it runs and
/// ended for one removed) and by the records (re-read on each change this engine makes,
/// and every few seconds for changes other processes make); the hosts are asked again
/// every fifth time.
final class BoardFeed: Sendable {
    private struct State {
        var board = AgentBoard(rows: [])
        var hosts: [HostRecord] = []
        var statuses: [ChatID: AgentStatus] = [:]
        var hostErrors: [HostID: String] = [:]
        var filesChanged: [TaskID: Int] = [:]
        var view: BoardView?
        /// The view as the sockets send it, encoded once for all of them.
        var text: String?
        var subscribers: [UInt64: AsyncStream<String>.Continuation] = [:]
        var next: UInt64 = 0
    }

    private let engine: AgentOrchestrator
    private let state = Mutex(State())
    private let tasks = Mutex<[Task<Void, Never>]>([])
    /// Each host's status events, followed as the host is recorded now.
    private let followers = Mutex<(stopped: Bool, byHost: [HostID: (record: HostRecord, task: Task<Void, Never>)])>((false, [:]))
    /// How often the records are read again for changes made by other processes.
    let rereadEvery: Duration

    /// Told when an agent comes to need you (its status turns waiting or done).
    private let onNeedsYou: @Sendable (PushSender.Payload) -> Void

    init(engine: AgentOrchestrator, rereadEvery: Duration = .seconds(3),
         onNeedsYou: @escaping @Sendable (PushSender.Payload) -> Void = { _ in }) {
        self.engine = engine
        self.rereadEvery = rereadEvery
        self.onNeedsYou = onNeedsYou
    }

    /// Starts following (once).
    func start() {
        guard tasks.withLock({ $0.isEmpty }) else { return }
        let engine = engine
        let first = Task { [self] in
            await reload(live: true)
            await withTaskGroup(of: Void.self) { group in
                group.addTask { [self] in
                    for await _ in engine.recordChanges() { await reload(live: false) }
                }
                group.addTask { [self] in
                    // the records every few seconds; every fifth time the hosts too (the
                    // changed files, what the events may have missed)
                    var n = 0
                    while !Task.isCancelled {
                        try? await Task.sleep(for: rereadEvery)
                        n += 1
                        await reload(live: n % 5 == 0)
                    }
                }
            }
        }
        tasks.withLock { $0.append(first) }
    }

    func stop() {
        for t in tasks.withLock({ $0 }) { t.cancel() }
        let following = followers.withLock { f in
            defer { f = (true, [:]) }
            return f.byHost.values.map(\.task)
        }
        for t in following { t.cancel() }
        let subs = state.withLock { s in
            defer { s.subscribers = [:] }
            return Array(s.subscribers.values)
        }
        for c in subs { c.finish() }
    }

    /// The board now (read from the hosts when nothing is known yet).
    func current() async -> BoardView {
        if let v = state.withLock({ $0.view }) { return v }
        await reload(live: true)
        return state.withLock { $0.view } ?? BoardView(board: AgentBoard(rows: []), statuses: [:], hostErrors: [:], hosts: [])
    }

    /// The board at once, then each time it changes.
    /// The board at once, then each time it changes, as JSON (encoded once for every page).
    func updates() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(1))
        let (id, text) = state.withLock { s in
            s.next += 1
            s.subscribers[s.next] = continuation
            return (s.next, s.text)
        }
        if let text { continuation.yield(text) }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Follows the status events of `hosts`: a host new or changed since the last time is
    /// followed (again), one no longer recorded is let go.
    private func follow(_ hosts: [HostRecord]) {
        let engine = engine
        let ended: [Task<Void, Never>] = followers.withLock { f in
            guard !f.stopped else { return [] }
            var ended: [Task<Void, Never>] = []
            for (id, kept) in f.byHost where !hosts.contains(kept.record) {
                ended.append(kept.task)
                f.byHost[id] = nil
            }
            for host in hosts where f.byHost[host.id] == nil {
                f.byHost[host.id] = (host, Task { [self] in
                    for await u in engine.followStatus(hosts: [host]) { apply(u) }
                })
            }
            return ended
        }
        for t in ended { t.cancel() }
    }

    private func reload(live: Bool) async {
        guard let board = try? await engine.board(live: live), let hosts = try? await engine.records.hosts() else { return }
        follow(hosts)
        state.withLock { s in
            s.board = board
            s.hosts = hosts
            if live {
                // the hosts were just asked: their answers replace what the events said, but
                // not an event that came while they were asked (a state that began later)
                for row in board.rows {
                    for a in row.agents {
                        guard let st = a.status else { continue }
                        if let known = s.statuses[a.record.id], known.since > st.since { continue }
                        s.statuses[a.record.id] = st
                    }
                    if let n = row.filesChanged { s.filesChanged[row.task.id] = n }
                    if let h = row.host { s.hostErrors[h.id] = row.hostError?.message }
                }
            }
        }
        publish()
    }

    private func apply(_ update: AgentStatusUpdate) {
        let told: PushSender.Payload? = state.withLock { s in
            switch update {
            case .status(let e, let host, let conversation):
                guard let c = conversation else { return nil }
                let before = s.statuses[c.id]
                s.statuses[c.id] = e.status
                guard e.status.activity.needsYou, before?.activity != e.status.activity else { return nil }
                let title = s.board.rows.first { $0.task.id == c.taskID }?.task.title ?? "a task"
                return PushSender.Payload(task: c.taskID.rawValue, title: String(title.prefix(80)), host: host.displayName,
                                          agent: c.providerID, state: e.status.activity.name,
                                          url: "/t/" + c.taskID.rawValue)
            case .hostConnected(let h, _):
                s.hostErrors[h.id] = nil
            case .hostUnreachable(let h, let e):
                s.hostErrors[h.id] = e.message
            }
            return nil
        }
        publish()
        if let told { onNeedsYou(told) }
    }

    private func publish() {
        let changed: BoardView? = state.withLock { s in
            let v = BoardView(board: s.board, statuses: s.statuses, hostErrors: s.hostErrors, hosts: s.hosts,
                              filesChanged: s.filesChanged)
            guard v != s.view else { return nil }
            s.view = v
            return v
        }
        guard let view = changed, let data = try? Self.encoder.encode(view) else { return }
        let text = String(decoding: data, as: UTF8.self)
        // a later view may have been published while this one was encoded: the latest wins
        let subs: [AsyncStream<String>.Continuation] = state.withLock { s in
            guard s.view == view else { return [] }
            s.text = text
            return Array(s.subscribers.values)
        }
        for c in subs { c.yield(text) }
    }

    /// The live feed's encoder: ISO 8601 dates, keys in no particular order (the page
    /// reads them by name).
    static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.dateEncodingStrategy = .iso8601
        return e
    }()
}
