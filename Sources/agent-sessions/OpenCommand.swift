import AgentSessions
import ArgumentParser
import Foundation
import Synchronization

/// `open TASK [PORT]`: the task's dev server on this machine, over the host's connection.
struct Open: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "open",
        abstract: "Forward a port here to the task's own port on its host (its dev server), until interrupted.",
        discussion: """
            Each task has a port of its own on its host (PORT in its agents' and setup's environment). This \
            listens on 127.0.0.1:PORT here (the same number when it is free, else one the system picks, or \
            the one given) and forwards each connection over the host's connection: no second login. It \
            prints the URL (and opens it with xdg-open with --browser), and runs until interrupted or the task \
            is archived or deleted. When the host's connection drops, it says so, connects again and \
            listens on the same port again once the host answers (after 0.5, 1, 2, 4, then every 5 seconds), \
            and says when it is back; it gives up after --reconnect-timeout seconds (exit 4).
            """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The task.") var task: String
    @Argument(help: "The port here (default: the task's own number, when free).") var port: Int?
    @Flag(help: "Open the URL in the browser (xdg-open).") var browser = false
    @Option(help: "Give up reconnecting after this many seconds.") var reconnectTimeout: Double = 300

    func run() async throws {
        if let port, !(1...65535).contains(port) { throw Failure.usage("the port must be between 1 and 65535, not \(port)") }
        guard reconnectTimeout > 0 else { throw Failure.usage("--reconnect-timeout must be more than 0 seconds") }
        try await Context.with(global) { context in
            let t = try await context.task(task)
            let (_, h) = try await context.context(of: t)
            let f = try await context.orchestrator.task(t.id).openPort(localPort: port)
            print("\(f.url) is \(h.name):\(f.remotePort), the port of task \(short(t.id)) \"\(t.title)\"; Ctrl-C to stop")
            fflush(nil)
            if browser {
                let p = Process()
                p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                p.arguments = ["xdg-open", f.url]
                p.standardOutput = FileHandle.nullDevice
                p.standardError = FileHandle.nullDevice
                do { try p.run() } catch { note("agent-sessions open: cannot run xdg-open: \(error.localizedDescription)") }
            }
            signal(SIGINT, SIG_IGN)
            signal(SIGTERM, SIG_IGN)
            let (stop, stopped) = AsyncStream<Void>.makeStream()
            let signals = [SIGINT, SIGTERM].map { DispatchSource.makeSignalSource(signal: $0, queue: .global()) }
            for source in signals {
                source.setEventHandler { stopped.finish() }
                source.resume()
            }
            defer { for source in signals { source.cancel() } }
            // the task's end ends the forward: looked for every two seconds
            let watcher = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(2))
                    // a store that cannot be read now is not a task that is gone
                    let read: TaskRecord?
                    do throws(AgentError) {
                        read = try await context.records.task(t.id)
                    } catch where error.code == .notFound {
                        read = nil
                    } catch {
                        continue
                    }
                    if read == nil || read?.archivedAt != nil {
                        note("agent-sessions open: the task was archived or deleted; the forward is closed")
                        stopped.finish()
                        return
                    }
                }
            }
            // a drop and the way back, as the engine reports them
            let ended = Ended()
            let events = context.orchestrator.task(t.id).portEvents()
            let timeout = Duration.milliseconds(Int64(reconnectTimeout * 1000)), shown = "\(Int(reconnectTimeout.rounded())) s"
            let reporter = Task {
                var giveUp: Task<Void, Never>?
                for await event in events {
                    switch event {
                    case .lost(let reason):
                        note("agent-sessions open: the connection to \(h.name) was lost (\(reason)); reconnecting for up to \(shown)")
                        giveUp?.cancel()
                        giveUp = Task {
                            try? await Task.sleep(for: timeout)
                            guard !Task.isCancelled else { return }
                            ended.set(Failure(.connection, "gave up reconnecting to \(h.name) after \(shown); the forward is closed"))
                            stopped.finish()
                        }
                    case .restored(let f, let tries):
                        giveUp?.cancel()
                        note("agent-sessions open: reconnected to \(h.name) (\(Wording.count(tries, "try", plural: "tries"))); \(f.url) is \(h.name):\(f.remotePort) again")
                    case .closed(let reason):
                        giveUp?.cancel()
                        ended.set(Failure(.failed, "the forward could not be made again: \(reason)"))
                        stopped.finish()
                    }
                }
                giveUp?.cancel()
            }
            for await _ in stop {}
            watcher.cancel()
            reporter.cancel()
            await context.orchestrator.task(t.id).closePort()
            if let failure = ended.failure { throw failure }
        }
    }
}

/// How `open` ended when it was not interrupted: the first failure set wins.
private final class Ended: Sendable {
    private let value = Mutex<Failure?>(nil)
    func set(_ f: Failure) { value.withLock { if $0 == nil { $0 = f } } }
    var failure: Failure? { value.withLock { $0 } }
}
