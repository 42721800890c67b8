// The cockpit's keys: moving, tabs, scrolling, the filter and the fields change the
// model here; what needs the engine comes back as a command for `Cockpit` to run.
import AgentSessions
import Foundation
import TerminalSupport

/// Work for the engine that a key asked for.
public enum CockpitCommand: Sendable, Equatable {
    /// Attach to the agent full screen; detaching comes back.
    case attach(conversationID: ChatID)
    /// Type a line into the agent (with Enter).
    case send(conversationID: ChatID, text: String)
    case stop(taskID: TaskID)
    case resume(taskID: TaskID)
    case archive(taskID: TaskID)
    case delete(taskID: TaskID, force: Bool)
    /// The pane's text again (the selection or the tab changed).
    case refreshPane
    /// Every host asked afresh.
    case refreshBoard
    /// Open the new task's form (the projects are read first).
    case openNewTask
    /// Ask a host which agents it has (for the form).
    case detectAgents(hostID: HostID)
    /// Start a task: a worktree and its agent.
    case newTask(projectID: ProjectID, title: String, providerID: String, prompt: String?)
    /// Start another agent in a task's worktree.
    case addChat(taskID: TaskID, providerID: String, prompt: String?)
    /// Commit every change of the task's worktree (its title as the message).
    case commit(taskID: TaskID)
    /// Push the task's branch.
    case push(taskID: TaskID)
    /// Push and open (or find) the task's pull request.
    case pullRequest(taskID: TaskID)
    /// Merge the task's branch into its base.
    case merge(taskID: TaskID)
    /// Forward the task's port here.
    case openPort(taskID: TaskID)
    /// Run a check command in every attempt of the work the task is one of.
    case check(taskID: TaskID, command: String)
    /// Keep this attempt of its work; the others are archived.
    case pick(taskID: TaskID)
    /// Answer a request that waits for the user (an agent asking through MCP to start one).
    case answerRequest(id: String, yes: Bool)
    case quit
}

/// What each key does.
public enum CockpitKeys {
    /// For the help screen: keys and what they do.
    public static let help: [(String, String)] = [
        ("↑ ↓  k j", "move (PgUp PgDn, Home End: further)"),
        ("enter  o", "attach to the agent, full screen (detach: Ctrl-] or tmux's prefix d)"),
        ("s", "send a line to the agent without attaching"),
        ("a", "answer the question the agent waits on"),
        ("tab  shift-tab", "the pane: preview, diff, log"),
        ("[ ]", "scroll the pane (shift-↑ shift-↓ too)"),
        ("n", "a new task: project, title, agent, prompt (tab: next field, ← →: choose)"),
        ("c", "a new chat in the task: another agent in its worktree"),
        ("x", "stop the task's agents (asks first)"),
        ("r", "resume the task's agents"),
        ("A", "archive the task (asks first)"),
        ("D", "delete the task (asks first; again to lose unpushed work)"),
        ("C", "commit every change of the task (its title as the message)"),
        ("P", "push the task's branch to the project's remote"),
        ("p", "push and open the pull request (gh on the host), or show the page that opens one"),
        ("M", "merge the task into its base on the host (asks first; a conflict changes nothing)"),
        ("O", "forward the task's port here (its dev server) while the cockpit runs"),
        ("=", "attempts: run a check command in every attempt of the work (the compare tab shows it)"),
        ("K", "attempts: keep this one (asks first); the others are archived, their branches kept"),
        ("Y  N", "allow or deny what an agent asks of you, shown on the status line (a start through MCP)"),
        ("/", "filter by title, host, project, agent, branch or state (esc clears)"),
        ("g", "ask every host afresh"),
        ("?", "this help (any key closes it)"),
        ("q  ctrl-c", "quit (the agents keep running)"),
    ]

    /// For the status line, shortest first to fit.
    public static let hints: [(String, String)] = [
        ("enter", "attach"), ("n", "new"), ("s", "send"), ("a", "answer"), ("tab", "pane"), ("/", "filter"), ("x", "stop"),
        ("D", "delete"), ("?", "help"), ("q", "quit"),
    ]

    /// Applies `press` to `model`; the engine's part, if any, comes back.
    public static func handle(_ press: KeyPress, _ model: inout CockpitModel) -> CockpitCommand? {
        switch model.mode {
        case .help:
            // the arrows, the page keys and space scroll a help taller than the terminal;
            // any other key closes it
            switch press.key {
            case .down, .character("j"), .character(" "): model.helpOffset += 1
            case .pageDown: model.helpOffset += 10
            case .up, .character("k"): model.helpOffset = max(0, model.helpOffset - 1)
            case .pageUp: model.helpOffset = max(0, model.helpOffset - 10)
            default:
                model.mode = .list
                model.helpOffset = 0
            }
            return nil
        case .filter:
            return filterKey(press, &model)
        case .field(var field):
            switch press.key {
            case .escape:
                model.mode = .list
            case .enter:
                model.mode = .list
                let text = field.text
                switch field.purpose {
                case .send(let id), .answer(let id, _): return .send(conversationID: id, text: text)
                case .check(let id):
                    guard !text.trimmingCharacters(in: .whitespaces).isEmpty else {
                        model.message = ("no check command: nothing was run", true)
                        return nil
                    }
                    return .check(taskID: id, command: text)
                }
            case .backspace:
                if !field.text.isEmpty { field.text.removeLast() }
                model.mode = .field(field)
            case .character(let c) where press.modifiers.subtracting(.shift).isEmpty:
                guard !isControl(c) else {
                    model.message = ("that key types nothing here", true)
                    return nil
                }
                field.text.append(c)
                model.mode = .field(field)
            case .character("u") where press.modifiers == .control:
                field.text = ""
                model.mode = .field(field)
            case .paste(let text):
                // one line: a pasted newline would submit half of it; no control characters
                field.text += printable(text.split(whereSeparator: \.isNewline).joined(separator: " "))
                model.mode = .field(field)
            default:
                break
            }
            return nil
        case .confirm(let c):
            guard case .character(let ch) = press.key, press.modifiers.isEmpty else {
                if press.key == .escape { model.mode = .list }
                return nil
            }
            model.mode = .list
            guard ch == "y" || ch == "Y" else {
                model.message = ("cancelled", false)
                return nil
            }
            switch c {
            case .stop(let id, _): return .stop(taskID: id)
            case .archive(let id, _): return .archive(taskID: id)
            case .delete(let id, _, let force): return .delete(taskID: id, force: force)
            case .merge(let id, _, _): return .merge(taskID: id)
            case .pick(let id, _): return .pick(taskID: id)
            }
        case .list:
            model.message = nil
            return listKey(press, &model)
        case .form(var form):
            let command = formKey(press, &form, &model)
            if case .form = model.mode { model.mode = .form(form) }
            return command
        }
    }

    private static func formKey(_ press: KeyPress, _ form: inout CockpitModel.NewAgent, _ model: inout CockpitModel)
        -> CockpitCommand?
    {
        let parts = form.parts
        let at = parts.firstIndex(of: form.part) ?? 0
        func choose(_ delta: Int) -> CockpitCommand? {
            switch form.part {
            case .project where !form.projects.isEmpty:
                form.project = (form.project + delta + form.projects.count) % form.projects.count
                form.problem = nil
                if let h = form.hostID, form.installed[h] == nil { return .detectAgents(hostID: h) }
            case .agent:
                form.agent = (form.agent + delta + form.agents.count) % form.agents.count
                form.problem = nil
            default: break
            }
            return nil
        }
        switch (press.key, press.modifiers) {
        case (.escape, _):
            model.mode = .list
        case (.tab, []), (.down, []):
            form.part = parts[(at + 1) % parts.count]
        case (.tab, .shift), (.up, []):
            form.part = parts[(at + parts.count - 1) % parts.count]
        case (.left, []):
            return choose(-1)
        case (.right, []):
            return choose(1)
        case (.enter, []):
            if form.part != .prompt {
                form.part = parts[(at + 1) % parts.count]
                return nil
            }
            return submit(&form, &model)
        case (.backspace, _):
            if form.part == .title, !form.title.isEmpty { form.title.removeLast() }
            if form.part == .prompt, !form.prompt.isEmpty { form.prompt.removeLast() }
        case (.character(let c), let m) where m.subtracting(.shift).isEmpty:
            if isControl(c) {
                form.problem = "that key types nothing here"
                return nil
            }
            switch form.part {
            case .title: form.title.append(c)
            case .prompt: form.prompt.append(c)
            // typing on a choice picks the first whose name starts so
            case .agent:
                if let i = form.agents.firstIndex(where: { $0.hasPrefix(String(c).lowercased()) }) { form.agent = i }
            case .project:
                if let i = form.projects.firstIndex(where: { $0.name.lowercased().hasPrefix(String(c).lowercased()) }) {
                    form.project = i
                    if let h = form.hostID, form.installed[h] == nil { return .detectAgents(hostID: h) }
                }
            }
            form.problem = nil
        case (.paste(let text), _):
            if form.part == .title { form.title += printable(text.split(whereSeparator: \.isNewline).joined(separator: " ")) }
            if form.part == .prompt {
                form.prompt += String(text.filter { $0 == "\n" || !isControl($0) })
            }
        default:
            break
        }
        return nil
    }

    /// The form's command, or its problem shown in it.
    private static func submit(_ form: inout CockpitModel.NewAgent, _ model: inout CockpitModel) -> CockpitCommand? {
        let title = form.title.trimmingCharacters(in: .whitespaces)
        let agent = form.agents[form.agent]
        let prompt = form.prompt.isEmpty ? nil : form.prompt
        if form.chatIn == nil {
            guard form.projects.indices.contains(form.project) else {
                form.problem = "no project: add one with agent-sessions projects add"
                return nil
            }
            guard !title.isEmpty else {
                form.problem = "the task needs a title"
                form.part = .title
                return nil
            }
        }
        if let h = form.hostID, let found = form.installed[h], !found.contains(agent) {
            form.problem = "\(agent) is not installed on that host; choose another (← →)"
            form.part = .agent
            return nil
        }
        model.mode = .list
        if let chat = form.chatIn { return .addChat(taskID: chat.taskID, providerID: agent, prompt: prompt) }
        return .newTask(projectID: form.projects[form.project].id, title: title, providerID: agent, prompt: prompt)
    }

    private static func filterKey(_ press: KeyPress, _ model: inout CockpitModel) -> CockpitCommand? {
        let before = model.items.compactMap { model.id(of: $0) }
        switch press.key {
        case .escape:
            model.filter = ""
            model.mode = .list
        case .enter, .down, .up:
            model.mode = .list
        case .backspace:
            if !model.filter.isEmpty { model.filter.removeLast() }
        case .character(let c) where press.modifiers.subtracting(.shift).isEmpty:
            model.filter.append(c)
        default:
            return nil
        }
        let was = model.selected
        model.keepSelection(before: before)
        return model.selected != was ? .refreshPane : nil
    }

    private static func listKey(_ press: KeyPress, _ model: inout CockpitModel) -> CockpitCommand? {
        let was = model.selected
        let sel = model.selection
        let conversation = sel?.agent?.record.id
        switch (press.key, press.modifiers) {
        case (.character("q"), []), (.character("c"), .control):
            return .quit
        case (.up, []), (.character("k"), []):
            model.move(-1)
        case (.down, []), (.character("j"), []):
            model.move(1)
        case (.pageUp, _):
            model.move(-10)
        case (.pageDown, _):
            model.move(10)
        case (.home, _):
            model.move(-Int.max / 2)
        case (.end, _):
            model.move(Int.max / 2)
        case (.tab, []), (.tab, .shift):
            let tabs = model.tabs
            let i = tabs.firstIndex(of: model.tab) ?? 0
            model.tab = tabs[(i + (press.modifiers.contains(.shift) ? tabs.count - 1 : 1)) % tabs.count]
            model.scroll = 0
            model.pane = []
            model.paneFor = nil
            return .refreshPane
        case (.character("["), []), (.up, .shift):
            model.scroll += model.tab == .diff ? -1 : 1
            model.scroll = max(model.tab == .diff ? 0 : 0, model.scroll)
        case (.character("]"), []), (.down, .shift):
            model.scroll += model.tab == .diff ? 1 : -1
            model.scroll = max(0, model.scroll)
        case (.character("Y"), _), (.character("N"), _):
            guard let request = model.requests.first else {
                model.message = ("nothing waits for your yes", true)
                return nil
            }
            if case .character(let c) = press.key { return .answerRequest(id: request.id, yes: c == "Y") }
        case (.character("?"), _):
            model.mode = .help
        case (.character("/"), []):
            model.mode = .filter
        case (.character("g"), []):
            return .refreshBoard
        case (.character("n"), []):
            return .openNewTask
        case (.character("c"), []):
            guard let row = sel?.row, let host = row.host else { return nil }
            var form = CockpitModel.NewAgent(chatIn: row.task.id, title: row.task.title, hostID: host.id,
                                             preferred: sel?.agent?.record.providerID ?? "claude")
            form.part = .agent
            model.mode = .form(form)
            return .detectAgents(hostID: host.id)
        case (.enter, []), (.character("o"), []):
            guard let conversation else { return noAgent(&model) }
            return .attach(conversationID: conversation)
        case (.character("s"), []):
            guard let conversation else { return noAgent(&model) }
            model.mode = .field(.init(.send(conversationID: conversation)))
        case (.character("a"), []):
            guard let agent = sel?.agent else { return noAgent(&model) }
            guard agent.activity == .waitingForInput else {
                model.message = ("\(agent.record.providerID) is not waiting for an answer", true)
                return nil
            }
            model.mode = .field(.init(.answer(conversationID: agent.record.id, question: agent.status?.question ?? "answer")))
        case (.character("x"), []):
            guard let row = sel?.row else { return nil }
            model.mode = .confirm(.stop(taskID: row.task.id, title: row.task.title))
        case (.character("r"), []):
            guard let row = sel?.row else { return nil }
            return .resume(taskID: row.task.id)
        case (.character("A"), _):
            guard let row = sel?.row else { return nil }
            model.mode = .confirm(.archive(taskID: row.task.id, title: row.task.title))
        case (.character("D"), _):
            guard let row = sel?.row else { return nil }
            model.mode = .confirm(.delete(taskID: row.task.id, title: row.task.title, force: false))
        case (.character("C"), _):
            guard let row = sel?.row else { return nil }
            return .commit(taskID: row.task.id)
        case (.character("P"), _):
            guard let row = sel?.row else { return nil }
            return .push(taskID: row.task.id)
        case (.character("p"), []):
            guard let row = sel?.row else { return nil }
            return .pullRequest(taskID: row.task.id)
        case (.character("M"), _):
            guard let row = sel?.row else { return nil }
            model.mode = .confirm(.merge(taskID: row.task.id, title: row.task.title, base: row.task.worktree.baseRef))
        case (.character("O"), _):
            guard let row = sel?.row else { return nil }
            return .openPort(taskID: row.task.id)
        case (.character("="), _):
            guard let row = sel?.row, let attempt = row.task.attempt else { return notAnAttempt(&model) }
            var field = CockpitModel.Field(.check(taskID: row.task.id))
            field.text = model.checkCommands[attempt.group] ?? ""
            model.mode = .field(field)
        case (.character("K"), _):
            guard let row = sel?.row, let attempt = row.task.attempt else { return notAnAttempt(&model) }
            model.mode = .confirm(.pick(taskID: row.task.id, label: attempt.label))
        default:
            return nil
        }
        return model.selected != was ? .refreshPane : nil
    }

    /// A character that draws nothing (a control character).
    static func isControl(_ c: Character) -> Bool {
        c.unicodeScalars.contains { $0.value < 0x20 || ($0.value >= 0x7F && $0.value < 0xA0) }
    }

    /// `text` without its control characters.
    static func printable(_ text: String) -> String { String(text.filter { !isControl($0) }) }

    private static func notAnAttempt(_ model: inout CockpitModel) -> CockpitCommand? {
        model.message = ("this task is not one of several attempts (agent-sessions tasks new --agents starts them)", true)
        return nil
    }

    private static func noAgent(_ model: inout CockpitModel) -> CockpitCommand? {
        model.message = ("this task has no agent", true)
        return nil
    }
}
