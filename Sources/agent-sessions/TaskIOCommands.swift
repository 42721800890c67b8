import AgentSessions
import ArgumentParser
import Foundation

extension Context {
    /// A task's conversation that runs now, with its session and host.
    func runningSession(_ taskRef: String, chat: String?) async throws
        -> (TaskRecord, ConversationRecord, AgentSession, HostRecord)
    {
        let t = try await task(taskRef)
        let (_, h) = try await context(of: t)
        let c = try await orchestrator.refreshState(conversationID: try await conversation(of: t, chat).id)
        guard c.state == .running else {
            throw Failure(.failed, "\(c.providerID) of task \(short(t.id)) is not running (\(Board.Agent(record: c).stateText)); "
                          + "start it again: agent-sessions tasks resume \(short(t.id))")
        }
        return (t, c, orchestrator.session(of: c, in: t, host: h), h)
    }
}

struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Type into an agent without attaching: the text, then Enter.",
        discussion: "Text of several lines is sent as one bracketed paste, as a terminal pastes it.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The task.") var task: String
    @Argument(help: "What to type ('-': read it from standard input).") var text: [String]
    @Option(help: "Type into this chat (its number, id or agent) rather than the main agent.") var chat: String?
    @Flag(help: "Do not press Enter after the text.") var noEnter = false

    func run() async throws {
        try await Context.with(global) { context in
            var typed = text.joined(separator: " ")
            if text == ["-"] {
                typed = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
                if typed.hasSuffix("\n") { typed.removeLast() }
            }
            guard !typed.isEmpty else { throw Failure.usage("nothing to send") }
            let (_, _, session, h) = try await context.runningSession(task, chat: chat)
            try await context.onHost(h) { host in
                if noEnter {
                    try await host.send(Array(typed.utf8), to: session)
                } else {
                    try await host.sendLine(typed, to: session)
                }
            }
        }
    }
}

struct Log: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
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
            let (_, h) = try await context.context(of: t)
            let c = try await context.orchestrator.refreshState(conversationID: try await context.conversation(of: t, chat).id)
            let session = context.orchestrator.session(of: c, in: t, host: h)
            var text: String
            let paneKept: Bool
            switch c.state {
            case .exited, .signaled: paneKept = c.survivesDisconnect
            case .running, .stopped, .gone: paneKept = false
            }
            if c.state == .running {
                text = try await context.onHost(h) { host in try await host.recentOutput(of: session, lines: AgentHost.historyLimit) }
            } else if paneKept, let kept = try? await context.onHost(h, { host in
                try await host.tmuxSession(named: session.ptyID.description) != nil ? try await host.recentOutput(of: session) : nil
            }) {
                // ended, its pane kept by tmux (remain-on-exit)
                text = kept
            } else {
                text = try await context.store.terminalLogs(conversationID: c.id).map(\.text).joined(separator: "\n")
                if text.isEmpty { note("no scrollback kept for \(c.providerID) of task \(short(t.id))") }
            }
            var shown = Self.lines(of: text, raw: raw)
            if let lines { shown = Array(shown.suffix(lines)) }
            for l in shown { print(l) }
            fflush(nil)
            guard follow, c.state == .running else { return }
            var previous = shown
            while true {
                try await Task.sleep(for: .milliseconds(500))
                let state = try await context.onHost(h) { host in try await host.state(of: session) }
                let now = Self.lines(of: try await context.onHost(h) { host in try await host.recentOutput(of: session, lines: 2000) }, raw: raw)
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
    static let configuration = CommandConfiguration(
        abstract: "What a task changed against its base: committed, uncommitted and new files.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The task.") var task: String
    @Flag(help: "Per file, lines added and removed, like git diff --stat.") var stat = false
    @Option(help: "Only this file (a path in the worktree).") var file: String?

    func run() async throws {
        try await Context.with(global) { context in
            let t = try await context.task(task)
            let (_, h) = try await context.context(of: t)
            let diff = try await context.onHost(h) { host in try await host.worktreeDiff(t.worktree) }
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
                print(" \(files.count) file(s) changed, \(files.reduce(0) { $0 + ($1.added ?? 0) }) insertion(s)(+), "
                      + "\(files.reduce(0) { $0 + ($1.removed ?? 0) }) deletion(s)(-)")
                return
            }
            for f in files {
                let patch = try await context.onHost(h) { host in try await host.worktreePatch(t.worktree, file: f.path) }
                print(patch.patch, terminator: patch.patch.hasSuffix("\n") ? "" : "\n")
                if patch.isTruncated { print("[… the patch of \(f.path) is longer; cut at 256 KiB]") }
            }
        }
    }
}
