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

    /// - Parameter attach: attaches the terminal to the agent of a conversation until the
    ///   user detaches (the cockpit has given the terminal up meanwhile and draws itself
    ///   whole after), and says how it went.
    public init(engine: AgentOrchestrator, terminal: Terminal, previewInterval: Duration = .milliseconds(500),
                boardInterval: Duration = .seconds(30),
                attach: @escaping @Sendable (ChatID) async -> (text: String, isError: Bool)?)
    {
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
        /// The selected agent's screen stopped being followed (its session ended, or the
        /// host could not be followed: the preview is then read every `previewInterval`).
        case followEnded(id: ChatID, failed: Bool)
        case resize
        case done(String, isError: Bool, refresh: Bool)
        case confirm(CockpitModel.Confirmation, because: String)
        case form(CockpitModel.NewAgent)
        case detected(hostID: HostID, agents: Set<String>)
        /// A check ran in the attempts of a work: its command, and each attempt's run by task id.
        case checked(group: String, command: String, results: [TaskID: AttemptCheck], text: String)
    }

    /// Runs until the user quits (or input ends).
    public func run() async {
        let (events, sink) = AsyncStream<Event>.makeStream()
        var model = CockpitModel(board: AgentBoard(rows: []))
        model.message = ("asking the hosts…", false)
        var renderer = ScreenRenderer(colors: terminal.colors)
        var decoder = KeyDecoder()
        var paneLoading: String?
        var boardLoading = false
        var haveLive = false
        var lastBoard = ContinuousClock.now
        var lastPane = ContinuousClock.now - .seconds(60)
        // until a key is pressed, the selection follows the top of the list (what needs you)
        var touched = false
        // what each host has, as detection said (for the forms)
        var detected: [HostID: Set<String>] = [:]
        // the agent whose screen is followed as it changes, and when following one failed
        var follow: (id: ChatID, size: SSHTerminalSize, task: Task<Void, Never>)?
        var followFailed: [ChatID: ContinuousClock.Instant] = [:]

        func draw() {
            let size = terminal.size()
            let (screen, cursor) = CockpitView.render(model, columns: size.columns, rows: size.rows)
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
        func refreshBoard(live: Bool) {
            guard !boardLoading || !live else { return }
            boardLoading = boardLoading || live
            lastBoard = .now
            Task { [engine] in
                do throws(AgentError) {
                    sink.yield(.board(try await engine.board(live: live), live: live))
                } catch {
                    sink.yield(.boardFailed(error.message))
                }
            }
        }
        /// The preview of a running agent follows its screen as it changes; every other
        /// pane (and a preview whose following failed a moment ago) is read once.
        func refreshPane() {
            if model.tab == .preview, let agent = model.selection?.agent, agent.record.state == .running,
               (followFailed[agent.record.id].map { ContinuousClock.now - $0 >= .seconds(10) } ?? true)
            {
                let id = agent.record.id
                // the agent laid out at the preview's size, as for a person attached at it
                let preview = CockpitView.previewSize(columns: terminal.size().columns, rows: terminal.size().rows)
                let size = SSHTerminalSize(columns: preview.columns, rows: preview.rows)
                if follow?.id == id && follow?.size == size { return }
                follow?.task.cancel()
                follow = (id, size, Task { [engine] in
                    var failed = false
                    for await r in engine.chat(id).followScreen(size: size) {
                        switch r {
                        case .success(let text):
                            sink.yield(.pane(id: id.rawValue, tab: .preview, lines: Self.screenLines(text)))
                        case .failure:
                            failed = true
                        }
                    }
                    if !Task.isCancelled { sink.yield(.followEnded(id: id, failed: failed)) }
                })
                return
            }
            if let f = follow, f.id != model.selection?.agent?.record.id || model.tab != .preview {
                f.task.cancel()
                follow = nil
            }
            readPane()
        }
        func readPane() {
            guard let sel = model.selection else {
                model.pane = []
                model.paneFor = nil
                return
            }
            let id = sel.agent?.record.id.rawValue ?? sel.row.task.id.rawValue
            let key = "\(id) \(model.tab.rawValue)"
            guard paneLoading != key else { return }
            paneLoading = key
            lastPane = .now
            let tab = model.tab, taskID = sel.row.task.id, conversation = sel.agent?.record.id, checks = model.checks
            let running = sel.agent.map { $0.record.state == ConversationRecord.State.running } ?? false
            Task { [engine] in
                do throws(AgentError) {
                    let lines = try await Self.pane(engine, tab: tab, taskID: taskID, conversationID: conversation, running: running,
                                                    checks: checks)
                    sink.yield(.pane(id: id, tab: tab, lines: lines))
                } catch {
                    sink.yield(.paneFailed(id: id, tab: tab, why: error.message))
                }
            }
        }
        func perform(_ command: CockpitCommand) async -> Bool {
            switch command {
            case .quit:
                return false
            case .refreshPane:
                if model.paneFor != model.selected { model.pane = [] }
                refreshPane()
            case .refreshBoard:
                model.message = ("asking every host…", false)
                refreshBoard(live: true)
            case .openNewTask:
                let preferred = model.selection?.agent?.record.providerID ?? "claude"
                let selectedProject = model.selection?.row.project?.id
                Task { [engine] in
                    do {
                        let hosts = Dictionary(try await engine.records.hosts().map { ($0.id, $0.name) }, uniquingKeysWith: { a, _ in a })
                        let projects = try await engine.records.projects().map {
                            CockpitModel.NewAgent.Project(id: $0.id, name: $0.name, hostID: $0.hostID, hostName: hosts[$0.hostID] ?? "?")
                        }
                        var form = CockpitModel.NewAgent(projects: projects, preferred: preferred)
                        form.project = projects.firstIndex { $0.id == selectedProject } ?? 0
                        if projects.isEmpty { form.problem = "no project: add one with agent-sessions projects add" }
                        sink.yield(.form(form))
                    } catch {
                        sink.yield(.done("the store: \(error)", isError: true, refresh: false))
                    }
                }
            case .detectAgents(let hostID):
                Task { [engine] in
                    guard let host = try? await engine.records.host(hostID) else { return }
                    do throws(AgentError) {
                        let found = try await engine.host(hostID).detectAgents()
                        sink.yield(.detected(hostID: hostID, agents: Set(found.installed.keys)))
                    } catch {
                        sink.yield(.done("asking \(host.name) for its agents: \(error.message)", isError: true, refresh: false))
                    }
                }
            case .newTask(let projectID, let title, let providerID, let prompt):
                model.message = ("starting \(title)…", false)
                background("started \(title)") { (engine) async throws(AgentError) in
                    try await engine.project(projectID).createTask(title: title, providerID: providerID, prompt: prompt)
                }
            case .addChat(let taskID, let providerID, let prompt):
                background("started \(providerID) in the task") { (engine) async throws(AgentError) in
                    _ = try await engine.task(taskID).addChat(providerID: providerID, prompt: prompt)
                }
            case .attach(let id):
                keys.cancel()
                // nobody sees the preview while attached: it is followed again after
                follow?.task.cancel()
                follow = nil
                let outcome = await attach(id)
                keys = readKeys()
                renderer.invalidate()
                model.message = outcome
                refreshPane()
                refreshBoard(live: true)
            case .commit(let id):
                report("committing…") { (engine) async throws(AgentError) -> String in
                    do throws(AgentError) {
                        let c = try await engine.task(id).commit()
                        return "committed \(Wording.count(c.files, "file")) as \(c.commit.prefix(10))"
                    } catch where error.code == .nothingToLand {
                        return "nothing to commit: the worktree has no changes"
                    }
                }
            case .push(let id):
                report("pushing…") { (engine) async throws(AgentError) -> String in
                    let p = try await engine.task(id).push()
                    return p.wasUpToDate ? "\(p.branch) is up to date on \(p.remote)"
                        : "pushed \(Wording.count(p.commits, "commit")) to \(p.remote)" + (p.uncommittedChanges > 0 ? " (\(Wording.count(p.uncommittedChanges, "change")) not committed: C)" : "")
                }
            case .pullRequest(let id):
                report("pushing and opening the pull request…") { (engine) async throws(AgentError) -> String in
                    let pr = try await engine.task(id).openPullRequest()
                    switch pr.outcome {
                    case .created: return "opened \(pr.url)"
                    case .updated: return "open already: \(pr.url)"
                    case .compareURL: return "no gh on the host: open it at \(pr.url)"
                    }
                }
            case .merge(let id):
                report("merging…") { (engine) async throws(AgentError) -> String in
                    let m = try await engine.task(id).merge()
                    switch m.outcome {
                    case .alreadyMerged: return "\(m.base) has it all already"
                    case .fastForward: return "merged into \(m.base) (a fast-forward)"
                    case .mergeCommit: return "merged into \(m.base) (merge commit \(m.commit.prefix(10)))"
                    }
                }
            case .check(let id, let command):
                model.message = ("running \(command) in every attempt…", false)
                Task { [engine] in
                    do throws(AgentError) {
                        let rows = try await engine.task(id).compareAttempts(check: command)
                        var results: [TaskID: AttemptCheck] = [:]
                        for r in rows { if let c = r.check { results[r.task.id] = c } }
                        let passed = results.values.filter(\.passed).count
                        sink.yield(.checked(group: rows.first?.task.attempt?.group ?? "", command: command, results: results,
                                            text: "\(command): passed in \(passed) of \(rows.count) attempts"))
                    } catch {
                        sink.yield(.done(error.message, isError: true, refresh: false))
                    }
                }
            case .pick(let id):
                let label = model.board.rows.first { $0.task.id == id }?.task.attempt?.label ?? id.rawValue
                report("keeping \(label)…") { (engine) async throws(AgentError) -> String in
                    let p = try await engine.task(id).pickAttempt(id.rawValue)
                    return "kept \(label)" + (p.archived.isEmpty ? "" : "; archived \(p.archived.joined(separator: ", "))")
                        + (p.notes.isEmpty ? "" : " (\(p.notes.joined(separator: "; ")))")
                }
            case .openPort(let id):
                report("forwarding the task's port…") { (engine) async throws(AgentError) -> String in
                    let f = try await engine.task(id).openPort()
                    return "\(f.url) is the task's port \(f.remotePort) (open while the cockpit runs)"
                }
            case .send(let id, let text):
                background("sent to the agent") { (engine) async throws(AgentError) in try await engine.chat(id).send(text) }
            case .stop(let id):
                background("stopped; resume with r") { (engine) async throws(AgentError) in try await engine.task(id).stop() }
            case .resume(let id):
                background("resumed") { (engine) async throws(AgentError) in try await engine.task(id).resume() }
            case .archive(let id):
                background("archived") { (engine) async throws(AgentError) in try await engine.task(id).archive() }
            case .delete(let id, let force):
                let title = model.board.rows.first { $0.task.id == id }?.task.title ?? id.rawValue
                Task { [engine] in
                    do throws(AgentError) {
                        try await engine.task(id).delete(force: force)
                        sink.yield(.done("deleted \(title)", isError: false, refresh: true))
                    } catch {
                        // work that is not pushed: asked again, to lose it
                        if !force, error.code == .worktreeHasUnsavedWork {
                            sink.yield(.confirm(.delete(taskID: id, title: title, force: true), because: error.message))
                        } else {
                            sink.yield(.done(error.message, isError: true, refresh: false))
                        }
                    }
                }
            }
            return true
        }
        /// Runs `work` in the background; what it returns is the message (the error's when it fails).
        func report(_ doing: String, _ work: @escaping @Sendable (AgentOrchestrator) async throws(AgentError) -> String) {
            model.message = (doing, false)
            Task { [engine] in
                do throws(AgentError) {
                    sink.yield(.done(try await work(engine), isError: false, refresh: true))
                } catch {
                    sink.yield(.done(error.message + (error.detail.map { $0.isEmpty ? "" : ": " + $0 } ?? ""), isError: true, refresh: true))
                }
            }
        }
        func background(_ success: String, _ work: @escaping @Sendable (AgentOrchestrator) async throws(AgentError) -> Void) {
            Task { [engine] in
                do throws(AgentError) {
                    try await work(engine)
                    sink.yield(.done(success, isError: false, refresh: true))
                } catch {
                    sink.yield(.done(error.message, isError: true, refresh: true))
                }
            }
        }

        // the sources of events
        var keys = readKeys()
        let updates = Task { [engine] in
            for await u in engine.followStatus() { sink.yield(.update(u)) }
        }
        let clock = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(250))
                sink.yield(.tick)
            }
        }
        let resizes = Task { [terminal] in
            for await _ in terminal.resizes { sink.yield(.resize) }
        }
        defer {
            follow?.task.cancel()
            keys.cancel()
            updates.cancel()
            clock.cancel()
            resizes.cancel()
        }
        refreshBoard(live: false)
        refreshBoard(live: true)
        draw()

        var escapeTimer: Task<Void, Never>?
        loop: for await event in events {
            switch event {
            case .input(let bytes):
                touched = true
                escapeTimer?.cancel()
                for press in decoder.decode(bytes) {
                    guard let command = CockpitKeys.handle(press, &model) else { continue }
                    if !(await perform(command)) { break loop }
                }
                if decoder.hasPending {
                    escapeTimer = Task {
                        try? await Task.sleep(for: .milliseconds(30))
                        if !Task.isCancelled { sink.yield(.escapeTimeout) }
                    }
                }
            case .escapeTimeout:
                for press in decoder.flush() {
                    guard let command = CockpitKeys.handle(press, &model) else { continue }
                    if !(await perform(command)) { break loop }
                }
            case .inputEnded:
                break loop
            case .update(.status(let e, _, _)):
                model.board.apply(e)
            case .update(.hostConnected(let host, _)):
                model.hostStates[host.id] = .connected
            case .update(.hostUnreachable(let host, let error)):
                model.hostStates[host.id] = .unreachable(String(error.message.split(separator: ";")[0]))
                model.board.markUnreachable(host.id, error)
            case .board(let board, let live):
                // the store's board only until the hosts answered: it has no states
                if !live && haveLive { break }
                let first = model.board.rows.isEmpty
                for row in board.rows {
                    guard let h = row.host else { continue }
                    if let e = row.hostError {
                        model.hostStates[h.id] = .unreachable(String(e.message.split(separator: ";")[0]))
                    } else if live {
                        model.hostStates[h.id] = .connected
                    } else if model.hostStates[h.id] == nil {
                        model.hostStates[h.id] = .connecting
                    }
                }
                if live {
                    haveLive = true
                    boardLoading = false
                }
                model.replaceBoard(board)
                if !touched, let top = model.items.lazy.compactMap({ model.id(of: $0) }).first, top != model.selected {
                    model.selected = top
                    model.pane = []
                }
                if model.message?.text.hasPrefix("asking") == true && !boardLoading { model.message = nil }
                if first || model.paneFor != model.selected { refreshPane() }
            case .boardFailed(let why):
                boardLoading = false
                model.message = (why, true)
            case .pane(let id, let tab, let lines):
                paneLoading = nil
                if id == model.selected && tab == model.tab {
                    model.pane = lines
                    model.paneFor = id
                }
            case .paneFailed(let id, let tab, let why):
                paneLoading = nil
                if id == model.selected && tab == model.tab {
                    model.pane = [[StyledText(why, TerminalStyle(foreground: .indexed(8)))]]
                    model.paneFor = id
                }
            case .tick:
                if model.tab == .preview, let agent = model.selection?.agent, follow?.id != agent.record.id,
                   ContinuousClock.now - lastPane >= previewInterval
                {
                    refreshPane()
                }
                if ContinuousClock.now - lastBoard >= boardInterval { refreshBoard(live: true) }
            case .followEnded(let id, let failed):
                if follow?.id == id { follow = nil }
                if failed { followFailed[id] = .now }
                if id.rawValue == model.selected { readPane() }
            case .resize:
                renderer.invalidate()
                // a followed preview is laid out again at the pane's new size
                if follow != nil { refreshPane() }
            case .form(var form):
                if let h = form.hostID { form.installed = detected.filter { $0.key == h } }
                model.mode = .form(form)
                if let h = form.hostID, detected[h] == nil, await !perform(.detectAgents(hostID: h)) { break loop }
            case .detected(let hostID, let agents):
                detected[hostID] = agents
                if case .form(var form) = model.mode {
                    form.installed[hostID] = agents
                    // the agent chosen is one the host has, when the one preferred is not
                    if form.hostID == hostID, !agents.contains(form.agents[form.agent]),
                       let i = form.agents.firstIndex(where: { agents.contains($0) }) {
                        form.agent = i
                    }
                    model.mode = .form(form)
                }
            case .checked(let group, let command, let results, let text):
                model.checkCommands[group] = command
                model.checks.merge(results) { _, new in new }
                model.message = (text, false)
                model.tab = .compare
                model.pane = []
                model.paneFor = nil
                refreshPane()
            case .confirm(let c, let why):
                model.mode = .confirm(c)
                model.message = (why, true)
            case .done(let text, let isError, let refresh):
                model.message = (text, isError)
                model.forwards = Dictionary(engine.openPorts.map { ($0.taskID, $0.localPort) }, uniquingKeysWith: { a, _ in a })
                if refresh {
                    refreshBoard(live: true)
                    refreshPane()
                }
            }
            draw()
        }
        escapeTimer?.cancel()
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
