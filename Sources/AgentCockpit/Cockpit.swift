// The cockpit running: one loop takes every event in turn (keys, the hosts' status
// events, boards and panes read in the background, a clock, a resize), changes the model
// and draws what changed. Nothing the loop waits for is a host: every host is asked in
// a task of its own, so a slow or lost one never holds the keys.
import AgentSessions
import Foundation
import SSHKit
import TerminalSupport

/// The cockpit over the engine's door, on a terminal given as functions (so a test or
/// another program can give its own).
public final class Cockpit: Sendable {
    /// The terminal the cockpit draws on and reads keys from.
    public struct Terminal: Sendable {
        /// The keys typed (raw bytes), as a new stream each time it is asked (the
        /// cockpit asks again after an attach gave them back).
        public var input: @Sendable () -> AsyncStream<[UInt8]>
        /// Writes bytes to the terminal.
        public var write: @Sendable ([UInt8]) -> Void
        /// The size now: columns and rows.
        public var size: @Sendable () -> (columns: Int, rows: Int)
        /// Each change of size.
        public var resizes: AsyncStream<Void>
        /// The colours to draw with.
        public var colors: TerminalColors

        /// A terminal made of these functions.
        public init(input: @escaping @Sendable () -> AsyncStream<[UInt8]>, write: @escaping @Sendable ([UInt8]) -> Void,
                    size: @escaping @Sendable () -> (columns: Int, rows: Int), resizes: AsyncStream<Void>, colors: TerminalColors)
        {
            self.input = input
            self.write = write
            self.size = size
            self.resizes = resizes
            self.colors = colors
        }
    }

    let engine: AgentOrchestrator
    let terminal: Terminal
    let attach: @Sendable (ChatID) async -> (text: String, isError: Bool)?
    /// How often the selected agent's screen is read again.
    let previewInterval: Duration
    /// How often every host is asked afresh (files changed, last activity).
    let boardInterval: Duration
    let approvals: CockpitApprovals?

    /// - Parameter attach: attaches the terminal to the agent of a conversation until the
    ///   user detaches (the cockpit has given the terminal up meanwhile and draws itself
    ///   whole after), and says how it went.
    /// - Parameter approvals: what waits for the user's yes (read each second), and how
    ///   an answer is given.
    public init(engine: AgentOrchestrator, terminal: Terminal, previewInterval: Duration = .milliseconds(500),
                boardInterval: Duration = .seconds(30), approvals: CockpitApprovals? = nil,
                attach: @escaping @Sendable (ChatID) async -> (text: String, isError: Bool)?)
    {
        self.approvals = approvals
        self.engine = engine
        self.terminal = terminal
        self.attach = attach
        self.previewInterval = previewInterval
        self.boardInterval = boardInterval
    }

    enum Event: Sendable {
        case input([UInt8])
        case inputEnded
        case escapeTimeout
        case update(AgentStatusUpdate)
        /// A board read from the store alone (`live` false) or with every host asked.
        case board(AgentBoard, live: Bool)
        case boardFailed(String)
        case pane(id: String, tab: CockpitModel.Tab, lines: [[StyledText]])
        case paneFailed(id: String, tab: CockpitModel.Tab, why: String)
        case tick
        /// What waits for the user's yes now.
        case requests([CockpitApprovals.Request])
        /// The selected agent's screen stopped being followed (its session ended, or the
        /// host could not be followed: the preview is then read every `previewInterval`).
        case followEnded(id: ChatID, failed: Bool)
        case resize
        /// An action ended: its message, whether the board and pane are read again, and the
        /// tasks' ports forwarded here then.
        case done(String, isError: Bool, refresh: Bool, forwards: [TaskID: Int])
        /// The terminal came back from an attach, with how it went.
        case attached((text: String, isError: Bool)?)
        case confirm(CockpitModel.Confirmation, because: String)
        case form(CockpitModel.NewAgent)
        case detected(hostID: HostID, agents: Set<String>)
        /// A check ran in the attempts of a work: its command, and each attempt's run by task id.
        case checked(group: String, command: String, results: [TaskID: AttemptCheck], text: String)
    }

    /// Runs until the user quits (or input ends): each event goes through
    /// `CockpitState.update`, and the loop carries out the effects it returns.
    public func run() async {
        let (events, sink) = AsyncStream<Event>.makeStream()
        var state = CockpitState(previewInterval: previewInterval, boardInterval: boardInterval)
        var renderer = ScreenRenderer(colors: terminal.colors)
        var follow: Task<Void, Never>?
        var escapeTimer: Task<Void, Never>?

        func draw() {
            let size = terminal.size()
            let (screen, cursor) = CockpitView.render(state.model, columns: size.columns, rows: size.rows)
            let bytes = renderer.frame(screen, cursor: cursor)
            if !bytes.isEmpty { terminal.write(bytes) }
        }
        func readKeys() -> Task<Void, Never> {
            let input = terminal.input()
            return Task {
                for await bytes in input { sink.yield(.input(bytes)) }
                if !Task.isCancelled { sink.yield(.inputEnded) }
            }
        }
        var keys = readKeys()
        /// Carries the effects out; false once one is to quit.
        func carryOut(_ effects: [CockpitEffect]) async -> Bool {
            for effect in effects {
                switch effect {
                case .quit:
                    return false
                case .readBoard(let live):
                    Task { [engine] in
                        do throws(AgentError) {
                            sink.yield(.board(try await engine.board(live: live), live: live))
                        } catch {
                            sink.yield(.boardFailed(error.message))
                        }
                    }
                case .readPane(_, let id, let tab, let taskID, let chatID, let running, let checks):
                    Task { [engine] in
                        do throws(AgentError) {
                            let lines = try await Self.pane(engine, tab: tab, taskID: taskID, conversationID: chatID,
                                                            running: running, checks: checks)
                            sink.yield(.pane(id: id, tab: tab, lines: lines))
                        } catch {
                            sink.yield(.paneFailed(id: id, tab: tab, why: error.message))
                        }
                    }
                case .follow(let id, let size):
                    follow?.cancel()
                    follow = Task { [engine] in
                        var failed = false
                        for await r in engine.chat(id).followScreen(size: size) {
                            switch r {
                            case .success(let text): sink.yield(.pane(id: id.rawValue, tab: .preview, lines: Self.screenLines(text)))
                            case .failure: failed = true
                            }
                        }
                        if !Task.isCancelled { sink.yield(.followEnded(id: id, failed: failed)) }
                    }
                case .stopFollowing:
                    follow?.cancel()
                    follow = nil
                case .run(.answerRequest(let id, let yes), _):
                    guard let approvals else { break }
                    Task {
                        let (text, isError) = approvals.answer(id, yes)
                        sink.yield(.requests(approvals.pending()))
                        sink.yield(.done(text, isError: isError, refresh: yes && !isError, forwards: Self.forwards(engine)))
                    }
                case .run(let command, let label):
                    Task { [engine] in if let e = await Self.act(command, label: label, on: engine) { sink.yield(e) } }
                case .openForm(let preferred, let selectedProject):
                    Task { [engine] in
                        do throws(AgentError) {
                            let hosts = Dictionary(try await engine.records.hosts().map { ($0.id, $0.name) },
                                                   uniquingKeysWith: { a, _ in a })
                            let projects = try await engine.records.projects().map {
                                CockpitModel.NewAgent.Project(id: $0.id, name: $0.name, hostID: $0.hostID,
                                                              hostName: hosts[$0.hostID] ?? "?")
                            }
                            var form = CockpitModel.NewAgent(projects: projects, preferred: preferred)
                            form.project = projects.firstIndex { $0.id == selectedProject } ?? 0
                            if projects.isEmpty { form.problem = "no project: add one with agent-sessions projects add" }
                            sink.yield(.form(form))
                        } catch {
                            sink.yield(.done("the store: \(error.message)", isError: true, refresh: false,
                                             forwards: Self.forwards(engine)))
                        }
                    }
                case .attach(let id):
                    keys.cancel()
                    let outcome = await attach(id)
                    keys = readKeys()
                    if !(await carryOut(state.update(.attached(outcome), now: .now, size: terminal.size()))) { return false }
                case .escapeTimer(let start):
                    escapeTimer?.cancel()
                    escapeTimer = nil
                    if start {
                        escapeTimer = Task {
                            try? await Task.sleep(for: .milliseconds(30))
                            if !Task.isCancelled { sink.yield(.escapeTimeout) }
                        }
                    }
                case .redrawAll:
                    renderer.invalidate()
                }
            }
            return true
        }

        // the sources of events
        let updates = Task { [engine] in
            for await u in engine.followStatus() { sink.yield(.update(u)) }
        }
        let clock = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(250))
                sink.yield(.tick)
            }
        }
        let asked = Task { [approvals] in
            guard let approvals else { return }
            var last: [CockpitApprovals.Request] = []
            while !Task.isCancelled {
                let now = approvals.pending()
                if now != last { sink.yield(.requests(now)) }
                last = now
                try? await Task.sleep(for: .seconds(1))
            }
        }
        let resizes = Task { [terminal] in
            for await _ in terminal.resizes { sink.yield(.resize) }
        }
        defer {
            follow?.cancel()
            escapeTimer?.cancel()
            keys.cancel()
            updates.cancel()
            clock.cancel()
            asked.cancel()
            resizes.cancel()
        }
        guard await carryOut(state.start(now: .now, size: terminal.size())) else { return }
        draw()
        for await event in events {
            guard await carryOut(state.update(event, now: .now, size: terminal.size())) else { break }
            draw()
        }
    }

    /// The tasks' ports forwarded here now: task id → local port.
    static func forwards(_ engine: AgentOrchestrator) -> [TaskID: Int] {
        Dictionary(engine.openPorts.map { ($0.taskID, $0.localPort) }, uniquingKeysWith: { a, _ in a })
    }

    /// An action of the key map on the engine, and how it went as the event that says so
    /// (`label`: the attempt or task it names, for the message).
    /// nil: nothing to say (a host gone from the store meanwhile).
    static func act(_ command: CockpitCommand, label: String, on engine: AgentOrchestrator) async -> Event? {
        func done(_ text: String, isError: Bool = false, refresh: Bool = true) -> Event {
            .done(text, isError: isError, refresh: refresh, forwards: forwards(engine))
        }
        func failed(_ error: AgentError) -> Event {
            done(error.message + (error.detail.map { $0.isEmpty ? "" : ": " + $0 } ?? ""), isError: true)
        }
        do throws(AgentError) {
            switch command {
            case .detectAgents(let hostID):
                guard let host = try? await engine.records.host(hostID) else { return nil }
                do throws(AgentError) {
                    let found = try await engine.host(hostID).detectAgents()
                    return .detected(hostID: hostID, agents: Set(found.installed.keys))
                } catch {
                    return done("asking \(host.name) for its agents: \(error.message)", isError: true, refresh: false)
                }
            case .newTask(let projectID, let title, let providerID, let prompt):
                do throws(AgentError) {
                    try await engine.project(projectID).createTask(title: title, providerID: providerID, prompt: prompt)
                } catch {
                    return done(error.message, isError: true)
                }
                return done("started \(title)")
            case .addChat(let taskID, let providerID, let prompt):
                do throws(AgentError) {
                    try await engine.task(taskID).addChat(providerID: providerID, prompt: prompt)
                } catch {
                    return done(error.message, isError: true)
                }
                return done("started \(providerID) in the task")
            case .commit(let id):
                do throws(AgentError) {
                    let c = try await engine.task(id).commit()
                    return done("committed \(Wording.count(c.files, "file")) as \(c.commit.prefix(10))")
                } catch where error.code == .nothingToLand {
                    return done("nothing to commit: the worktree has no changes")
                }
            case .push(let id):
                let p = try await engine.task(id).push()
                return done(p.wasUpToDate ? "\(p.branch) is up to date on \(p.remote)"
                    : "pushed \(Wording.count(p.commits, "commit")) to \(p.remote)"
                        + (p.uncommittedChanges > 0 ? " (\(Wording.count(p.uncommittedChanges, "change")) not committed: C)" : ""))
            case .pullRequest(let id):
                let pr = try await engine.task(id).openPullRequest()
                switch pr.outcome {
                case .created: return done("opened \(pr.url)")
                case .updated: return done("open already: \(pr.url)")
                case .compareURL: return done("no gh on the host: open it at \(pr.url)")
                }
            case .merge(let id):
                let m = try await engine.task(id).merge()
                switch m.outcome {
                case .alreadyMerged: return done("\(m.base) has it all already")
                case .fastForward: return done("merged into \(m.base) (a fast-forward)")
                case .mergeCommit: return done("merged into \(m.base) (merge commit \(m.commit.prefix(10)))")
                }
            case .check(let id, let command):
                do throws(AgentError) {
                    let rows = try await engine.task(id).checkAttempts(command)
                    var results: [TaskID: AttemptCheck] = [:]
                    for r in rows { if let c = r.check { results[r.task.id] = c } }
                    let passed = results.values.filter(\.passed).count
                    return .checked(group: rows.first?.task.attempt?.group ?? "", command: command, results: results,
                                    text: "\(command): passed in \(passed) of \(rows.count) attempts")
                } catch {
                    return done(error.message, isError: true, refresh: false)
                }
            case .pick(let id):
                let p = try await engine.task(id).pickAttempt(id.rawValue)
                return done("kept \(label)" + (p.archived.isEmpty ? "" : "; archived \(p.archived.joined(separator: ", "))")
                    + (p.notes.isEmpty ? "" : " (\(p.notes.joined(separator: "; ")))"))
            case .openPort(let id):
                let f = try await engine.task(id).openPort()
                return done("\(f.url) is the task's port \(f.remotePort) (open while the cockpit runs)")
            case .send(let id, let text):
                do throws(AgentError) { try await engine.chat(id).send(text) } catch { return done(error.message, isError: true) }
                return done("sent to the agent")
            case .stop(let id):
                do throws(AgentError) { try await engine.task(id).stop() } catch { return done(error.message, isError: true) }
                return done("stopped; resume with r")
            case .resume(let id):
                do throws(AgentError) { try await engine.task(id).resume() } catch { return done(error.message, isError: true) }
                return done("resumed")
            case .archive(let id):
                do throws(AgentError) { try await engine.task(id).archive() } catch { return done(error.message, isError: true) }
                return done("archived")
            case .delete(let id, let force):
                do throws(AgentError) {
                    try await engine.task(id).delete(force: force)
                    return done("deleted \(label)")
                } catch {
                    // work that is not pushed: asked again, to lose it
                    if !force, error.code == .worktreeHasUnsavedWork {
                        return .confirm(.delete(taskID: id, title: label, force: true), because: error.message)
                    }
                    return done(error.message, isError: true, refresh: false)
                }
            case .quit, .refreshPane, .refreshBoard, .openNewTask, .attach, .answerRequest:
                return nil
            }
        } catch {
            return failed(error)
        }
    }

    /// The pane's lines for a tab: the agent's screen (its visible part, with colours),
    /// its scrollback, or the task's diff (each file's patch, coloured).
    static func pane(_ engine: AgentOrchestrator, tab: CockpitModel.Tab, taskID: TaskID, conversationID: ChatID?,
                     running: Bool, checks: [TaskID: AttemptCheck] = [:]) async throws(AgentError) -> [[StyledText]]
    {
        switch tab {
        case .compare:
            guard let task = try? await engine.records.task(taskID), task.attempt != nil else {
                return [[StyledText("one attempt only: agent-sessions tasks new --agents claude:2,codex:1 starts several")]]
            }
            var rows = try await engine.task(taskID).compareAttempts()
            for i in rows.indices { rows[i].check = checks[rows[i].task.id] }
            return CockpitView.comparison(rows, selected: taskID)
        case .preview:
            guard let conversationID else { return [[StyledText("this task has no agent")]] }
            guard running else { return [[StyledText("not running (r resumes it)")]] }
            return screenLines(try await engine.chat(conversationID).screen(lines: 0))
        case .log:
            guard let conversationID else { return [[StyledText("this task has no agent")]] }
            return ANSIText.lines(try await engine.chat(conversationID).scrollback().text)
        case .diff:
            let diff = try await engine.task(taskID).diff()
            if diff.files.isEmpty { return [[StyledText("no changes against the base")]] }
            var lines: [[StyledText]] = [[StyledText("\(Wording.count(diff.files.count, "file")), +\(diff.totalAdded) −\(diff.totalRemoved)",
                                                     TerminalStyle(bold: true))]]
            for f in diff.files {
                let counts = f.isUntracked ? "new" : "+\(f.added.map(String.init) ?? "?") −\(f.removed.map(String.init) ?? "?")"
                lines.append([StyledText("  \(counts)  ", TerminalStyle(foreground: .indexed(8))), StyledText(f.path)])
            }
            for f in diff.files.prefix(20) {
                let patch = try await engine.task(taskID).patch(file: f.path)
                lines.append([])
                for line in patch.patch.split(separator: "\n", omittingEmptySubsequences: false) {
                    lines.append([StyledText(String(line), diffStyle(line))])
                }
                if patch.isTruncated { lines.append([StyledText("(cut here)", TerminalStyle(foreground: .indexed(8)))]) }
            }
            if diff.files.count > 20 { lines.append([StyledText("(and \(diff.files.count - 20) more files: agent-sessions diff)")]) }
            return lines
        }
    }

    /// A screen's lines, without the blank rows under its last text: its end is what matters.
    static func screenLines(_ screen: String) -> [[StyledText]] {
        var lines = ANSIText.lines(screen)
        while let last = lines.last, last.allSatisfy({ $0.text.allSatisfy(\.isWhitespace) }) { lines.removeLast() }
        return lines
    }

    static func diffStyle(_ line: Substring) -> TerminalStyle {
        if line.hasPrefix("+++") || line.hasPrefix("---") || line.hasPrefix("diff ") { return TerminalStyle(bold: true) }
        if line.hasPrefix("+") { return TerminalStyle(foreground: .indexed(2)) }
        if line.hasPrefix("-") { return TerminalStyle(foreground: .indexed(1)) }
        if line.hasPrefix("@@") { return TerminalStyle(foreground: .indexed(6)) }
        return .plain
    }
}

/// What waits for the user's yes or no, from outside the engine (a start an agent asked
/// for through MCP): the cockpit reads `pending` each second, shows the first on its
/// status line, and Y or N answers it through `answer`.
public struct CockpitApprovals: Sendable {
    public struct Request: Sendable, Equatable {
        public var id: String
        /// One line: who asks what.
        public var text: String

        public init(id: String, text: String) {
            self.id = id
            self.text = text
        }
    }

    public var pending: @Sendable () -> [Request]
    /// Answers a request (true: yes); the line to show, and whether it is an error.
    public var answer: @Sendable (_ id: String, _ yes: Bool) -> (text: String, isError: Bool)

    public init(pending: @escaping @Sendable () -> [Request],
                answer: @escaping @Sendable (_ id: String, _ yes: Bool) -> (text: String, isError: Bool)) {
        self.pending = pending
        self.answer = answer
    }
}
