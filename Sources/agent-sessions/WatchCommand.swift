import AgentSessions
import ArgumentParser
import Foundation

/// Turns the hosts' status updates into notification events: the records of the
/// conversation, task and project looked up (and kept) as events arrive.
final class EventEnricher: @unchecked Sendable {
    private let records: AgentRecords
    private var tasks: [TaskID: TaskRecord] = [:]
    private var projects: [ProjectID: ProjectRecord] = [:]

    init(records: AgentRecords) {
        self.records = records
    }

    func enrich(_ e: AgentStatusEvent, host: HostRecord, conversation: ConversationRecord?) async -> NotificationEvent {
        var n = NotificationEvent(event: e, host: host, conversation: conversation)
        if let c = conversation {
            if tasks[c.taskID] == nil { tasks[c.taskID] = try? await records.task(c.taskID) }
            n.task = tasks[c.taskID]
            if let p = n.task?.projectID {
                if projects[p] == nil { projects[p] = try? await records.project(p) }
                n.project = projects[p]
            }
        }
        return n
    }
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "watch",
        abstract: "Follows every host and sends each agent that waits for input, is done, exited or is lost to your notification channels.",
        discussion: """
            Runs in the foreground until interrupted (a systemd user unit can keep it running; see the guide). Each host's events are read over one channel on its connection, as its status watcher writes them; a host that cannot be reached is tried again, and the others go on. A state is sent once it held for the settings' hold (2 s unless set), each transition once: where each channel is in each host's events is kept beside the store (watch-cursors.json), so a dropped connection or a restart of watch neither loses nor repeats one. The channels are the settings file's "notifications" (the terminal alone unless set): the terminal (OSC 9, OSC 777 and the bell), the desktop (notify-send), an ntfy topic, a webhook (the event as JSON), a command. A line per transition sent is printed.
            """)
    @OptionGroup var global: GlobalOptions
    @Option(help: "Seconds a state must hold before it is sent (overrides the settings).") var hold: Double?

    func validate() throws {
        if let hold, !(0...3600).contains(hold) { throw ValidationError("--hold must be from 0 to 3600 seconds") }
    }

    func run() async throws {
        // runs unattended: nothing is asked (BatchMode semantics)
        HostConnection.asks.store(false, ordering: .relaxed)
        try await Context.with(global) { context in
            var settings = context.config.notifications
            if let hold { settings.hold = .milliseconds(Int(hold * 1000)) }
            let cursorsPath = (context.storePath as NSString).deletingLastPathComponent + "/watch-cursors.json"
            let notifier = Notifier(settings: settings, cursorsPath: cursorsPath) { note($0) }
            await notifier.start()
            let hosts = try await context.records.hosts()
            guard !hosts.isEmpty else { throw Failure(.notFound, "no hosts to watch; add one: agent-sessions hosts add <name> <user@host[:port]>") }
            let starts = await notifier.startCursors(hosts: hosts)
            let enricher = EventEnricher(records: context.records)
            var held = HeldEvents(hold: settings.hold, states: settings.states)
            print("agent-sessions watch: following \(hosts.map(\.name).joined(separator: ", ")); sending to \(settings.channels.map(\.name).joined(separator: ", "))")
            fflush(nil)
            let (merged, sink) = AsyncStream<AgentStatusUpdate?>.makeStream()
            let follow = Task {
                for await u in context.orchestrator.followStatus(hosts: hosts, from: starts, newOnly: true) { sink.yield(u) }
                sink.finish()
            }
            let ticker = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(200))
                    sink.yield(nil)
                }
            }
            // a command channel that exits without reading its input must not end watch
            signal(SIGPIPE, SIG_IGN)
            // Ctrl-C or a TERM (systemd's stop) ends the reading, lets a delivery under way
            // finish and keeps every channel's place
            signal(SIGINT, SIG_IGN)
            signal(SIGTERM, SIG_IGN)
            let signals = [SIGINT, SIGTERM].map { DispatchSource.makeSignalSource(signal: $0, queue: .global()) }
            for source in signals {
                source.setEventHandler {
                    follow.cancel()
                    ticker.cancel()
                    sink.finish()
                }
                source.resume()
            }
            defer {
                follow.cancel()
                ticker.cancel()
                for source in signals { source.cancel() }
            }
            for await update in merged {
                switch update {
                case .status(let e, let host, let c)?:
                    held.add(await enricher.enrich(e, host: host, conversation: c))
                case .hostConnected(let host, let cursor)?:
                    await notifier.connected(host, at: cursor)
                case .hostUnreachable(let host, let error)?:
                    note("agent-sessions watch: \(host.name): \(Failure(error).message); trying again")
                case nil:
                    break
                }
                for item in held.ready(now: .now) {
                    if case .send(let e) = item, await notifier.isNew(e) {
                        print("\(iso8601(Date())) \(e.title): \(e.body)")
                        fflush(nil)
                    }
                    await notifier.enqueue(item)
                }
            }
            await notifier.stop()
        }
    }
}

/// Transitions held until they have lasted the hold, per host in the order of its log:
/// one that a later transition of the same agent replaced within the hold (by the host's
/// clock, so a replay after a restart decides alike) is not sent, and neither is a state
/// the settings do not send; their place in the log is still marked.
struct HeldEvents {
    let hold: Duration
    let states: Set<String>
    private var pending: [HostID: [(event: NotificationEvent, arrived: ContinuousClock.Instant)]] = [:]

    init(hold: Duration, states: Set<String>) {
        self.hold = hold
        self.states = states
    }

    mutating func add(_ e: NotificationEvent, at now: ContinuousClock.Instant = .now) {
        pending[e.host.id, default: []].append((e, now))
    }

    mutating func ready(now: ContinuousClock.Instant) -> [Notifier.Item] {
        var out: [Notifier.Item] = []
        let holdSeconds = Double(hold.components.seconds) + Double(hold.components.attoseconds) / 1e18
        for host in pending.keys {
            while let head = pending[host]?.first {
                let e = head.event
                let later = pending[host]!.dropFirst().first { $0.event.event.session == e.event.session }
                if !states.contains(e.stateName) {
                    out.append(.skip(e.event.cursor, host: host))
                } else if let later, later.event.event.status.since.timeIntervalSince(e.event.status.since) < holdSeconds {
                    out.append(.skip(e.event.cursor, host: host))
                } else if now - head.arrived >= hold {
                    out.append(.send(e))
                } else {
                    break
                }
                pending[host]!.removeFirst()
            }
        }
        return out
    }
}

struct Events: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "events",
        abstract: "Prints every agent's status changes on every host as they happen.",
        discussion: """
            Each line: time, host, project, task, agent and its new state (with its source and rule). --json prints one JSON object per line instead ({"schemaVersion": 1, "host", "hostID", "log", "sequence", "session", "conversation", "task", "project", "agent", "state", "exitStatus", "source", "rule", "question", "since"}); "log" and "sequence" place the event in its host's log. Only new events unless --from-start, which prints what each host's log holds first. Runs until interrupted; a host that cannot be reached is reported on standard error and tried again.
            """)
    @OptionGroup var global: GlobalOptions
    @Flag(help: "One JSON object per line.") var json = false
    @Flag(help: "Each host's whole log first.") var fromStart = false

    func run() async throws {
        try await Context.with(global) { context in
            let enricher = EventEnricher(records: context.records)
            for await update in context.orchestrator.followStatus(newOnly: !fromStart) {
                switch update {
                case .status(let e, let host, let c):
                    let n = await enricher.enrich(e, host: host, conversation: c)
                    if json {
                        print(n.jsonLine)
                    } else {
                        let s = e.status
                        print("\(iso8601(s.since)) \(n.title): \(n.body) [\(s.source.rawValue)\(s.rule.map { " " + $0 } ?? "")]")
                    }
                    fflush(nil)
                case .hostConnected:
                    break
                case .hostUnreachable(let host, let error):
                    note("agent-sessions events: \(host.name): \(Failure(error).message); trying again")
                }
            }
        }
    }
}
