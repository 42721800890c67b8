// The cockpit's update: every event (keys, the hosts' status, a board or pane read in the
// background, the clock, a resize, an attach that came back) changes the state and says
// what the loop is to do next as effects. Nothing here waits or touches the engine: the
// loop (Cockpit.run) carries the effects out and turns their results into events.
import AgentSessions
import Foundation
import SSHKit
import TerminalSupport

/// What the loop carries out for the update: reads in the background, a screen followed,
/// an engine action, an attach, the terminal's own business.
enum CockpitEffect: Sendable, Equatable {
    /// The board read: the store's alone, or every host asked (`live`).
    case readBoard(live: Bool)
    /// The selection's pane read once (`key` is what it was read for: the selected id and
    /// the tab).
    case readPane(key: String, id: String, tab: CockpitModel.Tab, taskID: TaskID, chatID: ChatID?, running: Bool,
                  checks: [TaskID: AttemptCheck])
    /// The agent's screen followed as it changes, laid out at `size` (a follow before it ends).
    case follow(ChatID, SSHTerminalSize)
    /// The followed screen no longer followed.
    case stopFollowing
    /// An action on the engine in the background; `label` names its target in messages.
    case run(CockpitCommand, label: String)
    /// The new task's form opened, its projects read first.
    case openForm(preferred: String, project: ProjectID?)
    /// The terminal given to the agent until the user detaches.
    case attach(ChatID)
    /// The wait for the rest of an escape sequence started, or given up.
    case escapeTimer(start: Bool)
    /// The whole screen drawn again on the next frame.
    case redrawAll
    case quit
}

/// Everything the cockpit's loop knows: the model it draws and what it waits for.
struct CockpitState {
    var model: CockpitModel
    let previewInterval: Duration
    let boardInterval: Duration
    /// The key of the pane being read (selected id and tab), while it is read.
    var paneLoading: String?
    /// A board with every host asked is being read.
    var boardLoading = false
    /// A board with every host asked has come: the store's alone no longer replaces it.
    var haveLive = false
    var lastBoard: ContinuousClock.Instant
    var lastPane: ContinuousClock.Instant
    /// Until a key is pressed, the selection follows the top of the list (what needs you).
    var touched = false
    /// What each host has, as detection said (for the forms).
    var detected: [HostID: Set<String>] = [:]
    /// The agent whose screen is followed as it changes, at what size.
    var following: (id: ChatID, size: SSHTerminalSize)?
    /// When following an agent's screen failed (it is read every `previewInterval` for a while).
    var followFailed: [ChatID: ContinuousClock.Instant] = [:]
    var decoder = KeyDecoder()
    /// The time and the terminal's size of the event being handled.
    private(set) var now: ContinuousClock.Instant
    private(set) var size: (columns: Int, rows: Int) = (80, 24)

    init(previewInterval: Duration, boardInterval: Duration, now: ContinuousClock.Instant = .now) {
        model = CockpitModel(board: AgentBoard(rows: []))
        model.message = ("asking the hosts…", false)
        self.previewInterval = previewInterval
        self.boardInterval = boardInterval
        self.now = now
        lastBoard = now
        lastPane = now - .seconds(60)
    }

    /// The first effects: the store's board, then every host's.
    mutating func start(now: ContinuousClock.Instant, size: (columns: Int, rows: Int)) -> [CockpitEffect] {
        self.now = now
        self.size = size
        return readBoard(live: false) + readBoard(live: true)
    }

    /// The event handled at `now` on a terminal of `size`: the state changed, and what to do.
    mutating func update(_ event: Cockpit.Event, now: ContinuousClock.Instant,
                         size: (columns: Int, rows: Int)) -> [CockpitEffect]
    {
        self.now = now
        self.size = size
        switch event {
        case .input(let bytes):
            touched = true
            return [.escapeTimer(start: false)] + keys(decoder.decode(bytes)) + (decoder.hasPending ? [.escapeTimer(start: true)] : [])
        case .escapeTimeout:
            return keys(decoder.flush())
        case .inputEnded:
            return [.quit]
        case .update(.status(let e, _, _)):
            model.board.apply(e)
        case .update(.hostConnected(let host, _)):
            model.hostStates[host.id] = .connected
        case .update(.hostUnreachable(let host, let error)):
            model.hostStates[host.id] = .unreachable(Self.firstPart(error.message))
            model.board.markUnreachable(host.id, error)
        case .board(let board, let live):
            return boardRead(board, live: live)
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
            var effects: [CockpitEffect] = []
            if model.tab == .preview, let agent = model.selection?.agent, following?.id != agent.record.id,
               now - lastPane >= previewInterval
            {
                effects += refreshPane()
            }
            if now - lastBoard >= boardInterval { effects += readBoard(live: true) }
            return effects
        case .requests(let list):
            model.requests = list
        case .followEnded(let id, let failed):
            if following?.id == id { following = nil }
            if failed { followFailed[id] = now }
            if id.rawValue == model.selected { return readPane() }
        case .resize:
            // a followed preview is laid out again at the pane's new size
            return [.redrawAll] + (following != nil ? refreshPane() : [])
        case .form(var form):
            if let h = form.hostID { form.installed = detected.filter { $0.key == h } }
            model.mode = .form(form)
            if let h = form.hostID, detected[h] == nil { return [.run(.detectAgents(hostID: h), label: "")] }
        case .detected(let hostID, let agents):
            detected[hostID] = agents
            if case .form(var form) = model.mode {
                form.installed[hostID] = agents
                // the agent chosen is one the host has, when the one preferred is not
                if form.hostID == hostID, !agents.contains(form.agents[form.agent]),
                   let i = form.agents.firstIndex(where: { agents.contains($0) })
                {
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
            return refreshPane()
        case .confirm(let c, let why):
            model.mode = .confirm(c)
            model.message = (why, true)
        case .done(let text, let isError, let refresh, let forwards):
            model.message = (text, isError)
            model.forwards = forwards
            if refresh { return readBoard(live: true) + refreshPane() }
        case .attached(let outcome):
            // nobody saw the preview while attached: it is followed again
            following = nil
            model.message = outcome
            return [.redrawAll] + refreshPane() + readBoard(live: true)
        }
        return []
    }

    /// The keys pressed, through the key map, as effects; nothing after a quit.
    private mutating func keys(_ presses: [KeyPress]) -> [CockpitEffect] {
        var effects: [CockpitEffect] = []
        for press in presses {
            guard let command = CockpitKeys.handle(press, &model) else { continue }
            effects += perform(command)
            if effects.contains(.quit) { break }
        }
        return effects
    }

    /// A command of the key map: the state it changes and what the loop does for it.
    mutating func perform(_ command: CockpitCommand) -> [CockpitEffect] {
        switch command {
        case .quit:
            return [.quit]
        case .refreshPane:
            if model.paneFor != model.selected { model.pane = [] }
            return refreshPane()
        case .refreshBoard:
            model.message = ("asking every host…", false)
            return readBoard(live: true)
        case .openNewTask:
            return [.openForm(preferred: model.selection?.agent?.record.providerID ?? "claude",
                              project: model.selection?.row.project?.id)]
        case .attach(let id):
            following = nil
            return [.stopFollowing, .attach(id)]
        case .newTask(_, let title, _, _):
            model.message = ("starting \(title)…", false)
        case .commit: model.message = ("committing…", false)
        case .push: model.message = ("pushing…", false)
        case .pullRequest: model.message = ("pushing and opening the pull request…", false)
        case .merge: model.message = ("merging…", false)
        case .openPort: model.message = ("forwarding the task's port…", false)
        case .check(_, let command): model.message = ("running \(command) in every attempt…", false)
        case .pick(let id):
            let label = model.board.rows.first { $0.task.id == id }?.task.attempt?.label ?? id.rawValue
            model.message = ("keeping \(label)…", false)
            return [.run(command, label: label)]
        case .delete(let id, _):
            return [.run(command, label: model.board.rows.first { $0.task.id == id }?.task.title ?? id.rawValue)]
        case .detectAgents, .addChat, .send, .stop, .resume, .archive, .answerRequest:
            break
        }
        return [.run(command, label: "")]
    }

    /// A board read: the hosts' states from its rows, the selection on top until a key
    /// was pressed, the pane read again when the selection moved.
    private mutating func boardRead(_ board: AgentBoard, live: Bool) -> [CockpitEffect] {
        // the store's board only until the hosts answered: it has no states
        if !live && haveLive { return [] }
        let first = model.board.rows.isEmpty
        for row in board.rows {
            guard let h = row.host else { continue }
            if let e = row.hostError {
                model.hostStates[h.id] = .unreachable(Self.firstPart(e.message))
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
        let drawn = model
        if !touched, let top = drawn.items.lazy.compactMap({ drawn.id(of: $0) }).first, top != model.selected {
            model.selected = top
            model.pane = []
        }
        if model.message?.text.hasPrefix("asking") == true && !boardLoading { model.message = nil }
        return first || model.paneFor != model.selected ? refreshPane() : []
    }

    /// The board read, unless one with every host asked is under way.
    private mutating func readBoard(live: Bool) -> [CockpitEffect] {
        guard !boardLoading || !live else { return [] }
        boardLoading = boardLoading || live
        lastBoard = now
        return [.readBoard(live: live)]
    }

    /// The preview of a running agent follows its screen as it changes, laid out at the
    /// preview's size as for a person attached at it; every other pane (and a preview
    /// whose following failed a moment ago) is read once.
    private mutating func refreshPane() -> [CockpitEffect] {
        if model.tab == .preview, let agent = model.selection?.agent, agent.record.state == .running,
           followFailed[agent.record.id].map({ now - $0 >= .seconds(10) }) ?? true
        {
            let preview = CockpitView.previewSize(columns: size.columns, rows: size.rows)
            let paneSize = SSHTerminalSize(columns: preview.columns, rows: preview.rows)
            if following?.id == agent.record.id && following?.size == paneSize { return [] }
            following = (agent.record.id, paneSize)
            return [.follow(agent.record.id, paneSize)]
        }
        var effects: [CockpitEffect] = []
        if let f = following, f.id != model.selection?.agent?.record.id || model.tab != .preview {
            following = nil
            effects.append(.stopFollowing)
        }
        return effects + readPane()
    }

    /// The selection's pane read once (unless that very read is under way).
    private mutating func readPane() -> [CockpitEffect] {
        guard let sel = model.selection else {
            model.pane = []
            model.paneFor = nil
            return []
        }
        let id = sel.agent?.record.id.rawValue ?? sel.row.task.id.rawValue
        let key = "\(id) \(model.tab.rawValue)"
        guard paneLoading != key else { return [] }
        paneLoading = key
        lastPane = now
        return [.readPane(key: key, id: id, tab: model.tab, taskID: sel.row.task.id, chatID: sel.agent?.record.id,
                          running: sel.agent?.record.state == .running, checks: model.checks)]
    }

    /// The first part of a message, before its advice (for the list's headers).
    static func firstPart(_ message: String) -> String { String(message.split(separator: ";").first ?? "") }
}
