// What the cockpit shows and where the user is in it: the board, each host's connection,
// the selection, the filter, the tab of the preview pane and its text, and the mode
// (the list, a one-line field, a confirmation, help). Pure data: the view draws it,
// the keys change it, and `Cockpit` fills it from the engine.
import AgentSessions
import Foundation
import TerminalSupport

/// The cockpit's state.
public struct CockpitModel: Sendable {
    /// A host's connection, as the cockpit last heard.
    public enum HostState: Sendable, Equatable {
        case connected
        case connecting
        /// Unreachable, with why (its rows are kept, their states unknown).
        case unreachable(String)
    }

    /// What the pane beside the list shows for the selected agent.
    public enum Tab: String, Sendable, CaseIterable {
        /// Its screen now, with its colours.
        case preview
        /// The task's changes against its base.
        case diff
        /// Its scrollback.
        case log
        /// The attempts of its work side by side (for one of several attempts).
        case compare
    }

    /// A line of text the user types: a line to send, an answer, a filter.
    public struct Field: Sendable, Equatable {
        /// What the text is for.
        public enum Purpose: Sendable, Equatable {
            /// A line sent to the agent of `conversationID`, as if typed, with Enter.
            case send(conversationID: ChatID)
            /// An answer to the question the agent of `conversationID` waits on.
            case answer(conversationID: ChatID, question: String)
            /// A check command run in every attempt of the work `taskID` is one of.
            case check(taskID: TaskID)
        }

        public var purpose: Purpose
        public var text = ""

        /// A field for `purpose`, empty.
        public init(_ purpose: Purpose) { self.purpose = purpose }
    }

    /// An action that needs a yes first.
    public enum Confirmation: Sendable, Equatable {
        /// Stop the task's agents (the worktree stays).
        case stop(taskID: TaskID, title: String)
        /// Delete the task (the worktree and branch go); `force` after a refusal for
        /// unsaved work.
        case delete(taskID: TaskID, title: String, force: Bool)
        /// Archive the task (its agents stopped, its worktree kept).
        case archive(taskID: TaskID, title: String)
        /// Merge the task's branch into its base.
        case merge(taskID: TaskID, title: String, base: String)
        /// Keep this attempt of its work and archive the others.
        case pick(taskID: TaskID, label: String)
    }

    /// The form of a new task (project, title, agent, prompt) or of a new chat in a task
    /// (agent, prompt).
    public struct NewAgent: Sendable, Equatable {
        /// A project to choose, with its host.
        public struct Project: Sendable, Equatable {
            public var id: ProjectID
            public var name: String
            public var hostID: HostID
            public var hostName: String

            /// A choice of project.
            public init(id: ProjectID, name: String, hostID: HostID, hostName: String) {
                self.id = id
                self.name = name
                self.hostID = hostID
                self.hostName = hostName
            }
        }

        /// A part of the form.
        public enum Part: Sendable, Equatable {
            case project, title, agent, prompt
        }

        /// A chat in this task (its id, title and host) rather than a new task.
        public var chatIn: (taskID: TaskID, title: String, hostID: HostID)?
        public var projects: [Project]
        public var project = 0
        public var title = ""
        /// Provider ids, in the registry's order.
        public var agents: [String]
        public var agent: Int
        public var prompt = ""
        public var part: Part
        /// Per host id, the agents detection found there (absent: not known yet).
        public var installed: [HostID: Set<String>] = [:]
        /// What is wrong with what was typed, shown in the form.
        public var problem: String?

        /// A new task's form over `projects`, the agent `preferred` chosen.
        public init(projects: [Project], preferred: String = "claude") {
            self.projects = projects
            agents = AgentProvider.all.map(\.id)
            agent = agents.firstIndex(of: preferred) ?? 0
            part = .title
        }

        /// A new chat's form in a task.
        public init(chatIn taskID: TaskID, title: String, hostID: HostID, preferred: String = "claude") {
            self.init(projects: [])
            chatIn = (taskID, title, hostID)
            part = .agent
            agent = agents.firstIndex(of: preferred) ?? 0
        }

        /// The parts in order.
        public var parts: [Part] { chatIn == nil ? [.project, .title, .agent, .prompt] : [.agent, .prompt] }

        /// The host the agent starts on.
        public var hostID: HostID? { chatIn?.hostID ?? (projects.indices.contains(project) ? projects[project].hostID : nil) }

        public static func == (a: NewAgent, b: NewAgent) -> Bool {
            a.chatIn?.taskID == b.chatIn?.taskID && a.projects == b.projects && a.project == b.project && a.title == b.title
                && a.agents == b.agents && a.agent == b.agent && a.prompt == b.prompt && a.part == b.part
                && a.installed == b.installed && a.problem == b.problem
        }
    }

    /// Where the keys go.
    public enum Mode: Sendable, Equatable {
        case list
        /// Typing the filter.
        case filter
        case help
        case field(Field)
        case confirm(Confirmation)
        case form(NewAgent)
    }

    /// One line of the list.
    public enum Item: Sendable, Equatable {
        /// A group's title: "needs you", or a host and project.
        case header(String, host: HostID?)
        /// An agent: the board's row and agent.
        case agent(row: Int, agent: Int)
        /// A task without an agent.
        case task(row: Int)
    }

    public var board: AgentBoard { didSet { items = listed() } }
    public var hostStates: [HostID: HostState] = [:]
    /// The tasks' ports forwarded here: task id → local port.
    public var forwards: [TaskID: Int] = [:]
    public var filter = "" { didSet { if filter != oldValue { items = listed() } } }
    /// The selected agent's conversation id, or a task's id when it has no agent.
    public var selected: String?
    public var tab: Tab = .preview
    /// The pane's text for `paneFor` (the selected id and tab it was read for).
    public var pane: [[StyledText]] = []
    public var paneFor: String?
    /// Lines scrolled up from the end (preview, log) or down from the top (diff).
    public var scroll = 0
    public var mode: Mode = .list
    /// A line for the status bar, and whether it is an error.
    public var message: (text: String, isError: Bool)?
    /// How far the help is scrolled (on a terminal too short for all of it).
    public var helpOffset = 0
    /// What waits for the user's yes or no (Y, N), oldest first, on the status line.
    public var requests: [CockpitApprovals.Request] = []
    /// The last check run in the attempts, by task id (shown in the compare tab), and
    /// the command, by work (offered again).
    public var checks: [TaskID: AttemptCheck] = [:]
    public var checkCommands: [String: String] = [:]

    /// A cockpit of `board`, the first item selected.
    public init(board: AgentBoard) {
        self.board = board
        items = listed()
        let first = items.compactMap { id(of: $0) }.first
        selected = first
    }

    /// The list as drawn: a "needs you" group first, then each host and project; the
    /// attempts of one work not yet picked together under their title, whatever their hosts.
    /// Made again when the board or the filter changes, not at each frame.
    public private(set) var items: [Item] = []

    private func listed() -> [Item] {
        let words = filter.lowercased().split(separator: " ")
        let picked = Set(board.rows.compactMap { $0.task.attempt?.pickedAt != nil ? $0.task.attempt?.group : nil })
        var needs: [Item] = []
        var groups: [String: [Item]] = [:]
        var order: [String] = []
        var hostOf: [String: HostID] = [:]
        for (r, row) in board.rows.enumerated() where matches(row, words: words) {
            let entries: [Item] = row.agents.isEmpty ? [.task(row: r)] : row.agents.indices.map { .agent(row: r, agent: $0) }
            if row.needsYou {
                needs += entries
                continue
            }
            var key = "\(row.host?.name ?? "?") / \(row.project?.name ?? "?")"
            if let a = row.task.attempt, !picked.contains(a.group) { key = "attempts · \(row.task.title) · \(row.task.attempt!.group.prefix(8))" }
            if groups[key] == nil {
                order.append(key)
                hostOf[key] = row.host?.id
            }
            groups[key, default: []] += entries
        }
        var out: [Item] = []
        if !needs.isEmpty { out += [.header("needs you", host: nil)] + needs }
        for key in order { out += [.header(key, host: hostOf[key])] + (groups[key] ?? []) }
        return out
    }

    /// The id an item selects (nil for a header).
    public func id(of item: Item) -> String? {
        switch item {
        case .header: nil
        case .agent(let r, let a): board.rows[r].agents[a].record.id.rawValue
        case .task(let r): board.rows[r].task.id.rawValue
        }
    }

    /// The selected item's row and agent (nil agent: a task without one).
    public var selection: (row: AgentBoard.Row, agent: AgentBoard.Agent?)? {
        guard let selected else { return nil }
        for row in board.rows {
            if row.task.id.rawValue == selected && row.agents.isEmpty { return (row, nil) }
            if let a = row.agents.first(where: { $0.record.id.rawValue == selected }) { return (row, a) }
        }
        return nil
    }

    /// The pane's tabs for the selection: compare only for one of several attempts.
    public var tabs: [Tab] {
        selection?.row.task.attempt == nil ? Tab.allCases.filter { $0 != .compare } : Tab.allCases
    }

    /// Back to the preview when the selection has no such tab.
    mutating func keepTab() {
        if !tabs.contains(tab) {
            tab = .preview
            pane = []
            paneFor = nil
        }
    }

    /// Moves the selection by `delta` items (headers skipped), staying in the list.
    public mutating func move(_ delta: Int) {
        let ids = items.compactMap { id(of: $0) }
        guard !ids.isEmpty else {
            selected = nil
            return
        }
        let at = selected.flatMap { ids.firstIndex(of: $0) } ?? 0
        let next = min(max(0, at + delta), ids.count - 1)
        if ids[next] != selected {
            selected = ids[next]
            scroll = 0
            keepTab()
        }
    }

    /// A new board (the selection kept when its item is still there, else the nearest).
    public mutating func replaceBoard(_ new: AgentBoard) {
        let before = items.compactMap { id(of: $0) }
        board = new
        keepSelection(before: before)
    }

    /// After the board or the filter changed: the selected item, or the one nearest to
    /// where it was.
    public mutating func keepSelection(before: [String]) {
        let ids = items.compactMap { id(of: $0) }
        if let s = selected, ids.contains(s) { return }
        let old = selected.flatMap { before.firstIndex(of: $0) } ?? 0
        selected = ids.isEmpty ? nil : ids[min(old, ids.count - 1)]
        scroll = 0
        keepTab()
    }

    /// Whether the row is one of several attempts whose work has none picked yet.
    public func isOpenAttempt(_ row: AgentBoard.Row) -> Bool {
        guard let a = row.task.attempt else { return false }
        return !board.rows.contains { $0.task.attempt?.group == a.group && $0.task.attempt?.pickedAt != nil }
    }

    /// Whether a row passes the filter (words, each in the title, host, project, agent,
    /// branch or state, any case).
    func matches(_ row: AgentBoard.Row, words: [Substring]) -> Bool {
        guard !words.isEmpty else { return true }
        let hay = ([row.task.displayTitle, row.host?.name ?? "", row.project?.name ?? "", row.task.worktree.branch]
            + row.agents.flatMap { [$0.record.providerID, $0.activity?.name ?? ""] }).joined(separator: " ").lowercased()
        return words.allSatisfy { hay.contains($0) }
    }
}
