import AgentSessions
import ArgumentParser
import Foundation

extension Context {
    /// `body`, a "not running" from the engine said with the agent's state and the
    /// way to start it again.
    func whileRunning<R>(_ task: TaskRecord, _ conversation: ConversationRecord, _ body: () async throws -> R) async throws -> R {
        do {
            return try await body()
        } catch let e as AgentError where e.code == .sessionNotRunning {
            let now = (try? await records.chat(conversation.id)) ?? conversation
            throw Failure(.failed, "\(now.providerID) of task \(short(task.id)) is not running (\(AgentBoard.Agent(record: now).stateText)); "
                          + "start it again: agent-sessions tasks resume \(short(task.id))")
        }
    }
}

struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "send",
        abstract: "Type into an agent without attaching: the text, then Enter.",
        discussion: "Text of several lines is sent as one bracketed paste, as a terminal pastes it.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The task.") var task: String
    @Argument(help: "What to type ('-': read it from standard input).") var text: [String]
    @Option(help: "Type into this chat (its number, id or agent) rather than the main agent.") var chat: String?
    @Flag(help: "Do not press Enter after the text.") var noEnter = false
    @Flag(help: "Queue it on the host: sent when the agent has finished its turn and the prompts queued before it went (see 'queue').")
    var queue = false
    @Flag(help: "Send it on the host at the agent's next idle, ahead of the queue.") var whenIdle = false

    func run() async throws {
        try await Context.with(global) { context in
            if queue && whenIdle { throw Failure.usage("--queue and --when-idle are one or the other") }
            if (queue || whenIdle) && noEnter { throw Failure.usage("a queued prompt is always submitted: no --no-enter") }
            var typed = text.joined(separator: " ")
            if text == ["-"] {
                typed = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
                if typed.hasSuffix("\n") { typed.removeLast() }
            }
            guard !typed.isEmpty else { throw Failure.usage("nothing to send") }
            let t = try await context.task(task)
            let c = try await context.conversation(of: t, chat)
            try await context.whileRunning(t, c) {
                if queue || whenIdle {
                    let prompt = try await context.orchestrator.chat(c.id).queue(typed, whenIdle: whenIdle)
                    note("queued \(prompt.id) for \(c.providerID) of task \(short(t.id))")
                } else {
                    try await context.orchestrator.chat(c.id).send(typed, pressEnter: !noEnter)
                }
            }
        }
    }
}

struct Queue: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "queue",
        abstract: "An agent's prompt queue on its host (send --queue adds to it).",
        discussion: """
            The host sends the first prompt when the agent is idle or done and the one sent before it started a turn, so the queue drains while this machine is asleep or offline. A prompt from send --when-idle goes first. "queue list" says what holds the next prompt back.
            """,
        subcommands: [QueueList.self, QueueRemove.self, QueueClear.self], defaultSubcommand: QueueList.self)
}

struct QueueList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "The prompts still queued, in the order they go.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The task.") var task: String
    @Option(help: "This chat (its number, id or agent) rather than the main agent.") var chat: String?
    @Flag(help: "One JSON array.") var json = false

    func run() async throws {
        try await Context.with(global) { context in
            let t = try await context.task(task)
            let c = try await context.conversation(of: t, chat)
            let queue = try await context.orchestrator.chat(c.id).promptQueue()
            let prompts = queue.prompts
            if json {
                printJSON(.array(prompts.enumerated().map { i, p in
                    var o: [String: JSONValue] = ["id": .string(p.id), "text": .string(p.text), "whenIdle": .bool(p.whenIdle)]
                    if i == 0, let hold = queue.hold { o["heldBecause"] = .string(hold.description) }
                    return .object(o)
                }))
                return
            }
            if prompts.isEmpty { note("nothing queued for \(c.providerID) of task \(short(t.id))") }
            for p in prompts {
                let first = p.text.split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init) ?? ""
                print("\(p.id)\(p.whenIdle ? " (when idle)" : "")  \(first)\(p.text.contains("\n") ? " …" : "")")
            }
            if let hold = queue.hold { note("not sent yet: \(hold)") }
        }
    }
}

struct QueueRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rm", abstract: "Remove one queued prompt (its id from 'queue list').")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The task.") var task: String
    @Argument(help: "The prompt's id.") var id: String
    @Option(help: "This chat (its number, id or agent) rather than the main agent.") var chat: String?

    func run() async throws {
        try await Context.with(global) { context in
            let t = try await context.task(task)
            let c = try await context.conversation(of: t, chat)
            guard try await context.orchestrator.chat(c.id).removeQueuedPrompt(id) else {
                throw Failure(.notFound, "\(id) is not queued for \(c.providerID) of task \(short(t.id)) (sent already, or removed)")
            }
        }
    }
}

struct QueueClear: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "clear", abstract: "Remove every queued prompt of an agent.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The task.") var task: String
    @Option(help: "This chat (its number, id or agent) rather than the main agent.") var chat: String?

    func run() async throws {
        try await Context.with(global) { context in
            let t = try await context.task(task)
            let c = try await context.conversation(of: t, chat)
            let n = try await context.orchestrator.chat(c.id).clearQueue()
            note("removed \(n) queued prompt\(n == 1 ? "" : "s")")
        }
    }
}

struct Log: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "log",
        abstract: "Print an agent's scrollback (its terminal's history and screen).",
        discussion: """
            For an agent that runs: its tmux history. For one that was stopped: the scrollback saved when it stopped. --follow prints new lines as they appear, until interrupted or the agent ends.
            """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The task.") var task: String
    @Option(help: "This chat (its number, id or agent) rather than the main agent.") var chat: String?
    @Option(name: [.customShort("n"), .long], help: "The last N lines only.") var lines: Int?
    @Flag(name: [.customShort("f"), .long], help: "Keep printing new lines.") var follow = false
    @Flag(help: "Keep the terminal's colours and escape sequences.") var raw = false

    func validate() throws {
        if let lines, lines < 1 { throw ValidationError("--lines must be at least 1") }
    }

    func run() async throws {
        try await Context.with(global) { context in
            let t = try await context.task(task)
            let c = try await context.conversation(of: t, chat)
            let scrollback = try await context.orchestrator.chat(c.id).scrollback()
            let text = scrollback.text
            if scrollback.source == .saved && text.isEmpty { note("no scrollback kept for \(c.providerID) of task \(short(t.id))") }
            var shown = Self.lines(of: text, raw: raw)
            if let lines { shown = Array(shown.suffix(lines)) }
            for l in shown { print(l) }
            fflush(nil)
            guard follow, scrollback.conversation.state == .running else { return }
            var previous = shown
            while true {
                try await Task.sleep(for: .milliseconds(500))
                let state = try await context.orchestrator.chat(c.id).processState()
                let now = Self.lines(of: try await context.orchestrator.chat(c.id).screen(lines: 2000), raw: raw)
                for l in Self.newLines(previous: previous, current: now) { print(l) }
                fflush(nil)
                previous = now
                if state != .running {
                    note("the agent ended (\(state))")
                    return
                }
            }
        }
    }

    /// The captured text as lines, trailing blank lines (the empty rest of the screen) dropped.
    static func lines(of text: String, raw: Bool) -> [String] {
        var lines = (raw ? text : stripEscapes(text)).split(separator: "\n", omittingEmptySubsequences: false).map {
            raw ? String($0) : String($0).replacingOccurrences(of: "\r", with: "").replacingOccurrences(of: #"\s+$"#, with: "", options: .regularExpression)
        }
        while let last = lines.last, last.isEmpty { lines.removeLast() }
        return lines
    }

    /// What `current` adds after `previous`: the lines after the last place where the end
    /// of `previous` (up to 5 lines) appears in `current`; all of `current` when the
    /// screen changed beyond recognition (a full-screen agent redrew it).
    static func newLines(previous: [String], current: [String]) -> [String] {
        guard !previous.isEmpty else { return current }
        let anchor = Array(previous.suffix(min(5, previous.count)))
        var i = current.count - anchor.count
        while i >= 0 {
            if Array(current[i..<(i + anchor.count)]) == anchor { return Array(current[(i + anchor.count)...]) }
            i -= 1
        }
        return current == previous ? [] : current
    }
}

struct Diff: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "diff",
        abstract: "What a task changed against its base: committed, uncommitted and new files.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The task.") var task: String
    @Flag(help: "Per file, lines added and removed, like git diff --stat.") var stat = false
    @Option(help: "Only this file (a path in the worktree).") var file: String?

    func run() async throws {
        try await Context.with(global) { context in
            let t = try await context.task(task)
            let diff = try await context.orchestrator.task(t.id).diff()
            var files = diff.files
            if let file {
                files = files.filter { $0.path == file }
                if files.isEmpty { throw Failure.notFound("\(file) is unchanged in task \(short(t.id)) (or not in its worktree)") }
            }
            if files.isEmpty {
                note("no changes against \(t.worktree.baseRef) (\(t.worktree.baseCommit.prefix(10)))")
                return
            }
            if stat {
                let width = files.map(\.path.count).max() ?? 0
                for f in files {
                    let counts = f.added.map { "+\($0) -\(f.removed ?? 0)" } ?? "binary"
                    print(" \(f.path.padding(toLength: width, withPad: " ", startingAt: 0)) | \(counts)\(f.isUntracked ? " (new)" : "")")
                }
                // as git writes it: a zero count is left out unless both are zero
                let added = files.reduce(0) { $0 + ($1.added ?? 0) }, removed = files.reduce(0) { $0 + ($1.removed ?? 0) }
                var summary = [Wording.count(files.count, "file") + " changed"]
                if added > 0 || removed == 0 { summary.append(Wording.count(added, "insertion") + "(+)") }
                if removed > 0 || added == 0 { summary.append(Wording.count(removed, "deletion") + "(-)") }
                print(" " + summary.joined(separator: ", "))
                return
            }
            for f in files {
                let patch = try await context.orchestrator.task(t.id).patch(file: f.path)
                print(patch.patch, terminator: patch.patch.hasSuffix("\n") ? "" : "\n")
                if patch.isTruncated { print("[… the patch of \(f.path) is longer; cut at 256 KiB]") }
            }
        }
    }
}
