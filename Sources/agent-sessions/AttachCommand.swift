import AgentSessions
import ArgumentParser
import Foundation
import SSHKit
import Synchronization
import TerminalSupport

struct Attach: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "attach",
        abstract: "Show an agent's terminal here: type to it, resize it, detach and leave it running.",
        discussion: """
            The terminal is in raw mode while attached: every key goes to the agent, Ctrl-C included. The detach key (default Ctrl-]) or tmux's own Ctrl-B d leaves the agent running. When the connection drops, agent-sessions says so, reconnects and reattaches by itself; what the agent printed meanwhile is on the screen again (tmux redraws it).
            """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The task.") var task: String
    @Option(help: "This chat (its number, id or agent) rather than the main agent.") var chat: String?
    @Option(help: "The key that detaches: ctrl-<a letter, ], \\, ^ or _>, or none.") var detachKey = "ctrl-]"
    @Option(help: "Give up reconnecting after this many seconds.") var reconnectTimeout: Double = 300

    func validate() throws {
        _ = try Self.byte(of: detachKey)
        guard reconnectTimeout > 0 else { throw ValidationError("--reconnect-timeout must be positive") }
    }

    /// The byte a `ctrl-x` key sends, nil for none.
    static func byte(of key: String) throws -> UInt8? {
        let k = key.lowercased()
        if k == "none" { return nil }
        guard k.hasPrefix("ctrl-"), k.count == 6, let c = k.last?.asciiValue else {
            throw ValidationError("--detach-key: give ctrl-<key> (a letter, ], \\, ^ or _) or none, not \(key)")
        }
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return c - UInt8(ascii: "a") + 1
        case UInt8(ascii: "]"): return 0x1D
        case UInt8(ascii: "\\"): return 0x1C
        case UInt8(ascii: "^"): return 0x1E
        case UInt8(ascii: "_"): return 0x1F
        default: throw ValidationError("--detach-key: give ctrl-<key> (a letter, ], \\, ^ or _) or none, not \(key)")
        }
    }

    func run() async throws {
        let detach = try Self.byte(of: detachKey)
        try await Context.with(global) { context in
            let t = try await context.task(task)
            let chosen = try await context.conversation(of: t, chat)
            let c = try await context.whileRunning(t, chosen) {
                try await context.orchestrator.chat(chosen.id).runningSession().conversation
            }
            let (_, h) = try await context.context(of: t)
            let keyName = detach == nil ? "tmux's Ctrl-B d" : "\(detachKey.capitalized) or tmux's Ctrl-B d"
            note("attached to \(c.providerID) of task \(short(t.id)) on \(h.name); detach: \(keyName)")
            let attached = AttachedTerminal(context: context, conversation: c, host: h,
                                            detachByte: detach, reconnectTimeout: .seconds(reconnectTimeout))
            let outcome = try await attached.run()
            let drops = attached.reconnects == 0 ? "" : "; the connection dropped \(Wording.count(attached.reconnects, "time")) and was made again"
            switch outcome {
            case .detached:
                note("\ndetached; \(c.providerID) keeps running (agent-sessions attach \(short(t.id)) to come back)\(drops)")
            case .ended(let why):
                note("\nthe agent's session ended: \(why)\(drops)")
            case .gaveUp(let why):
                throw Failure(.connection, "could not reconnect to \(h.name) within \(Int(reconnectTimeout)) s: \(why); the agent may still run there")
            }
        }
    }
}

/// One attach: the local terminal wired to the agent's, through drops and reattaches.
final class AttachedTerminal: Sendable {
    enum Outcome {
        case detached
        case ended(String)
        case gaveUp(String)
    }

    let context: Context
    let conversation: ConversationRecord
    let host: HostRecord
    let detachByte: UInt8?
    let reconnectTimeout: Duration

    private let current = Mutex<AgentTerminal?>(nil)
    private let joined = Mutex<AgentJoinedTerminal?>(nil)
    private let detached = Mutex(false)
    private let reattached = Mutex(0)

    /// How many times the connection dropped and the terminal was attached again.
    var reconnects: Int { reattached.withLock { $0 } }

    init(context: Context, conversation: ConversationRecord, host: HostRecord,
         detachByte: UInt8?, reconnectTimeout: Duration)
    {
        self.context = context
        self.conversation = conversation
        self.host = host
        self.detachByte = detachByte
        self.reconnectTimeout = reconnectTimeout
    }

    private var isDetached: Bool { detached.withLock { $0 } }

    /// Leaves the agent running: ends the current terminal's output.
    private func detach() {
        detached.withLock { $0 = true }
        current.withLock { $0 }?.cancel()
    }

    /// Reads the keys until the detach key, handing what comes before it to `forward`,
    /// then detaches; with `detachingAtEnd`, also when standard input ends (not a
    /// terminal: nothing more will be typed).
    private func watchKeys(detachingAtEnd: Bool,
                           forwarding forward: @escaping @Sendable ([UInt8]) async -> Void = { _ in })
        -> Task<Void, Never>
    {
        Task { [self] in
            for await bytes in LocalTerminal.keystrokes() {
                if let d = detachByte, let i = bytes.firstIndex(of: d) {
                    if i > 0 { await forward(Array(bytes[..<i])) }
                    detach()
                    return
                }
                await forward(bytes)
            }
            if detachingAtEnd && !Task.isCancelled { detach() }
        }
    }

    /// A message on the terminal (which is in raw mode: \r\n).
    private func say(_ text: String) {
        LocalTerminal.writeOut(Array("\r\n[agent-sessions: \(text)]\r\n".utf8))
    }

    /// - Parameter handlesSignals: a kill or hang-up restores the terminal and ends the
    ///   process (false inside the cockpit, whose full screen does that already).
    func run(handlesSignals: Bool = true) async throws -> Outcome {
        let raw = LocalTerminal.enterRawMode()
        defer { raw?.restore() }
        // a kill or hang-up restores the terminal before the process ends
        let signals = (handlesSignals ? [SIGTERM, SIGHUP] : []).map { sig in
            signal(sig, SIG_IGN)
            let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            s.setEventHandler {
                raw?.restore()
                exit(128 + sig)
            }
            s.resume()
            return s
        }
        defer { signals.forEach { $0.cancel() } }
        let winch = LocalTerminal.onResize { [self] in
            if let size = LocalTerminal.size() {
                try? current.withLock { $0 }?.resize(to: size)
                try? joined.withLock { $0 }?.resize(to: size)
            }
        }
        defer { winch.cancel() }
        // a terminal of its own, joined to the agent's by the connection's worker (as
        // `ssh -t` carries its terminal); over a transport that cannot, the output path
        if let tty = LocalTerminal.openOwnDescriptor() {
            defer { close(tty) }
            if let outcome = try await runJoined(tty) { return outcome }
        }
        return try await runThroughOutput()
    }

    /// Attached through the joined terminal, reattaching after drops; nil when the host
    /// or the session joins no terminal (then the output path runs).
    private func runJoined(_ tty: Int32) async throws -> Outcome? {
        // the worker reads the terminal: this process reads nothing from it, but while
        // it reconnects (for the detach key)
        try await LocalTerminal.withInputPaused { try await runJoinedPaused(tty) }
    }

    private func runJoinedPaused(_ tty: Int32) async throws -> Outcome? {
        var terminal: AgentJoinedTerminal
        switch await joinedAttachNow(tty) {
        case .success(let t): terminal = t
        case .failure(let e) where e.code == .terminalUnsupported: return nil
        case .failure(let e): throw e
        }
        while true {
            joined.withLock { $0 = terminal }
            let end = await Self.ending(of: terminal)
            joined.withLock { $0 = nil }
            switch end {
            case .success(.detached), .success(.terminalClosed):
                return .detached
            case .success(.attachEnded):
                // tmux's own detach, or the agent's session ended
                if let ended = await endedReason() { return .ended(ended) }
                return .detached
            case .failure(let e):
                if e.code == .cancelled { return .detached }
                if let ended = await endedReason() { return .ended(ended) }
            }
            // while reconnecting, this process reads the keys: the detach key gives up
            let again = await LocalTerminal.withInputResumed { [self] in
                let keys = watchKeys(detachingAtEnd: false)
                defer { keys.cancel() }
                return await reattach { [self] () async throws(AgentError) -> AgentJoinedTerminal in
                    // paused again while the worker starts reading the terminal
                    try await LocalTerminal.withInputPaused { await joinedAttachNow(tty) }.get()
                }
            }
            switch again {
            case .attached(let t): terminal = t
            case .ended(let outcome): return outcome
            }
        }
    }

    private func joinedAttachNow(_ tty: Int32) async -> Result<AgentJoinedTerminal, AgentError> {
        do {
            return .success(try await context.orchestrator.chat(conversation.id).attach(joining: tty,
                                                                  size: LocalTerminal.size(), detachByte: detachByte))
        } catch {
            return .failure(error)
        }
    }

    private static func ending(of terminal: AgentJoinedTerminal) async -> Result<AgentJoinedTerminal.End, AgentError> {
        do {
            return .success(try await terminal.waitUntilEnded())
        } catch {
            return .failure(error)
        }
    }

    /// Attached through the terminal's output and input streams, reattaching after drops.
    private func runThroughOutput() async throws -> Outcome {
        // typed while reconnecting: dropped, as a terminal with no session would
        let keys = watchKeys(detachingAtEnd: true) { [self] bytes in
            try? await current.withLock { $0 }?.input.write(bytes)
        }
        defer { keys.cancel() }

        var terminal = try await context.orchestrator.chat(conversation.id).attach(size: LocalTerminal.size())
        while true {
            current.withLock { $0 = terminal }
            if isDetached { terminal.cancel() }
            var tail: [UInt8] = []
            for await chunk in terminal.output {
                LocalTerminal.writeOut(chunk)
                tail = Array((tail + chunk).suffix(200))
            }
            current.withLock { $0 = nil }
            if isDetached { return .detached }
            if String(decoding: tail, as: UTF8.self).contains("[detached") { return .detached }
            // not detached here or by tmux: the agent's session ended, or the link dropped
            if let ended = await endedReason() { return .ended(ended) }
            switch await reattach({ [self] () async throws(AgentError) -> AgentTerminal in
                try await context.orchestrator.chat(conversation.id).attach(size: LocalTerminal.size())
            }) {
            case .attached(let t): terminal = t
            case .ended(let outcome): return outcome
            }
        }
    }

    /// Why the session ended, or nil when it runs (or the host cannot be asked).
    private func endedReason() async -> String? {
        let state = try? await withTimeout(.seconds(5)) { [self] in
            try await context.orchestrator.chat(conversation.id).processState()
        }
        switch state {
        case .exited(let code)?: return "the agent exited with status \(code)"
        case .signaled(let n)?: return "the agent was killed by signal \(n)"
        case .gone?: return "its tmux session is gone"
        case .running?, nil: return nil
        }
    }

    /// What a reattach came to: the terminal attached again, or how the attach ends.
    private enum Reattached<T> {
        case attached(T)
        case ended(Outcome)
    }

    /// After a drop: says so, then attaches again until it works, the detach key is
    /// pressed, or the time is up, waiting 0.5, 1, 2, 4, 5, 5, ... seconds between tries;
    /// says when it is back, and counts it.
    private func reattach<T>(_ attach: () async throws(AgentError) -> T) async -> Reattached<T> {
        say("the connection to \(host.name) was lost; reconnecting (\(detachByte == nil ? "for up to \(reconnectTimeout)" : "the detach key gives up"))")
        let deadline = ContinuousClock.now + reconnectTimeout
        var wait = Duration.milliseconds(500)
        var last = AgentError(.transport, "not tried")
        tries: while ContinuousClock.now < deadline && !isDetached {
            do {
                let t = try await attach()
                say("reconnected to \(host.name); reattached")
                reattached.withLock { $0 += 1 }
                return .attached(t)
            } catch {
                last = error
                if error.code == .sessionNotRunning || error.code == .notFound { break tries }
            }
            let until = min(deadline, ContinuousClock.now + wait)
            while ContinuousClock.now < until && !isDetached { try? await Task.sleep(for: .milliseconds(100)) }
            wait = min(wait * 2, .seconds(5))
        }
        return .ended(isDetached ? .detached : .gaveUp(last.message))
    }
}

/// `body`, or a `timeout` error after `limit`.
func withTimeout<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            throw Failure(.connection, "no answer within \(limit)")
        }
        let first = try await group.next()!
        group.cancelAll()
        return first
    }
}
