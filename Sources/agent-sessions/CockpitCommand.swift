import AgentCockpit
import AgentSessions
import ArgumentParser
import Foundation
import TerminalSupport

/// `agent-sessions cockpit` (and `agent-sessions` alone on a terminal): every agent on
/// every host in one interactive screen.
struct CockpitCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cockpit",
        abstract: "Every task on every host in one screen: a live preview, the diff, the log, and a key for each action.",
        discussion: """
            What needs you comes first. The pane beside the list (below it under 100 columns) shows the selected agent's screen with its colours, the task's diff, or its log (tab). Enter attaches; detaching (Ctrl-] or tmux's Ctrl-B d) comes back. ? lists every key. Every host is asked in the background: a slow or lost one is marked, its rows kept, and the keys answer at once. Not on a terminal (piped), it prints the board as status does. NO_COLOR turns colours off; COLORTERM=truecolor gives 24-bit colour.
            """)
    @OptionGroup var global: GlobalOptions
    @Option(help: "The key that detaches from an attached agent: ctrl-<a letter, ], \\, ^ or _>, or none.") var detachKey = "ctrl-]"

    func validate() throws { _ = try Attach.byte(of: detachKey) }

    func run() async throws { try await Self.open(global, detachKey: detachKey) }

    static func open(_ global: GlobalOptions, detachKey: String = "ctrl-]") async throws {
        guard isatty(0) == 1, isatty(1) == 1 else {
            // piped: the board, as status prints it
            var status = try Status.parse([])
            status.global = global
            try await status.run()
            return
        }
        // the screen is the cockpit's: nothing is asked on it (BatchMode semantics)
        HostConnection.asks.store(false, ordering: .relaxed)
        let detach = try Attach.byte(of: detachKey)
        try await Context.with(global) { context in
            guard let screen = FullScreen.enter() else { throw Failure(.failed, "the terminal could not be taken full screen") }
            defer { screen.leave() }
            let (resizes, resized) = AsyncStream<Void>.makeStream()
            let source = LocalTerminal.onResize { resized.yield() }
            defer { source.cancel() }
            let terminal = Cockpit.Terminal(
                input: { LocalTerminal.keystrokes() }, write: { LocalTerminal.writeOut($0) },
                size: { LocalTerminal.size().map { ($0.columns, $0.rows) } ?? (80, 24) }, resizes: resizes,
                colors: TerminalColors.from(environment: context.environment))
            let requests = MCPRequests(storePath: context.storePath)
            let approvals = CockpitApprovals(
                pending: {
                    requests.pending().map { CockpitApprovals.Request(id: $0.id, text: "\($0.client) asks to start \($0.what)") }
                },
                answer: { id, yes in
                    do {
                        let (r, a, made) = try requests.answer(id, yes ? .yes : .no, by: "cockpit")
                        if !made { return ("\(r.what): answered already (\(a.outcome.rawValue), \(a.by))", true) }
                        return (yes ? "allowed: \(r.what) starts now" : "denied: \(r.what)", false)
                    } catch {
                        return (Failure.from(error).message, true)
                    }
                })
            let cockpit = Cockpit(engine: context.orchestrator, terminal: terminal, approvals: approvals) { conversationID in
                screen.suspend()
                defer { screen.resume() }
                return await attach(conversationID, context: context, detach: detach)
            }
            await cockpit.run()
        }
    }

    /// Attaches as `attach` does (through drops); the message for the cockpit after.
    static func attach(_ conversationID: ChatID, context: Context, detach: UInt8?) async -> (text: String, isError: Bool) {
        do {
            guard let c = try? await context.records.chat(conversationID), let t = try? await context.records.task(c.taskID)
            else { return ("that agent is gone from the store", true) }
            let (_, h) = try await context.context(of: t)
            let keys = detach == nil ? "tmux's Ctrl-B d" : "Ctrl-] or tmux's Ctrl-B d"
            LocalTerminal.writeOut(Array("\u{1B}[H\u{1B}[2Jattaching to \(c.providerID) of \(t.title) on \(h.name); detach: \(keys)\r\n".utf8))
            let attached = AttachedTerminal(context: context, conversation: c, host: h, detachByte: detach, reconnectTimeout: .seconds(300))
            switch try await attached.run(handlesSignals: false) {
            case .detached: return ("detached from \(c.providerID) of \(t.title); it keeps running", false)
            case .ended(let why): return ("the agent's session ended: \(why)", true)
            case .gaveUp(let why): return ("could not reconnect to \(h.name): \(why)", true)
            }
        } catch let e as AgentError {
            return (e.message, true)
        } catch {
            return ("\(error)", true)
        }
    }
}
