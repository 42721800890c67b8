// The cockpit drawn into a screen buffer: a title line, the list and the pane (side by
// side from 100 columns, one above the other below that), and a status line with the
// keys, a field being typed, a question to confirm or a message.
import AgentSessions
import Foundation
import TerminalSupport

/// Draws a `CockpitModel`.
public enum CockpitView {
    /// Side by side from this width; above and below under it.
    public static let sideBySideColumns = 100

    /// The screen of `model` at `columns` × `rows`, and where the cursor goes (in a field).
    public static func render(_ model: CockpitModel, columns: Int, rows: Int, now: Date = Date())
        -> (screen: ScreenBuffer, cursor: ScreenRenderer.Cursor?)
    {
        var s = ScreenBuffer(columns: columns, rows: rows)
        guard columns >= 20, rows >= 6 else {
            s.write("agent-sessions: the terminal is too small (\(columns)×\(rows))", row: 0, column: 0)
            return (s, nil)
        }
        title(model, into: &s)
        let bodyTop = 1, bodyRows = rows - 2
        var formCursor: ScreenRenderer.Cursor?
        // the pane's place: the form, when one is open
        func paneOrForm(top: Int, left: Int, width: Int, rows: Int) {
            if case .form(let f) = model.mode {
                formCursor = form(f, into: &s, top: top, left: left, width: width, rows: rows)
            } else {
                pane(model, into: &s, top: top, left: left, width: width, rows: rows)
            }
        }
        if model.mode == .help {
            help(into: &s, top: bodyTop, rows: bodyRows, offset: model.helpOffset)
        } else if columns >= sideBySideColumns {
            let p = paneRect(columns: columns, rows: rows)
            list(model, into: &s, top: bodyTop, left: 0, width: p.left - 1, rows: bodyRows, now: now)
            for r in bodyTop..<(bodyTop + bodyRows) { s.write("│", row: r, column: p.left - 1, style: Style.frame) }
            paneOrForm(top: p.top, left: p.left, width: p.width, rows: p.rows)
        } else if case .form = model.mode {
            paneOrForm(top: bodyTop, left: 0, width: columns, rows: bodyRows)
        } else {
            let p = paneRect(columns: columns, rows: rows)
            list(model, into: &s, top: bodyTop, left: 0, width: columns, rows: p.top - bodyTop, now: now)
            paneOrForm(top: p.top, left: p.left, width: p.width, rows: p.rows)
        }
        let cursor = statusLine(model, into: &s, row: rows - 1)
        return (s, cursor ?? formCursor)
    }

    /// Where the pane goes on a `columns` × `rows` screen (its tab bar on its first row):
    /// right of the list from `sideBySideColumns`, under it below that.
    static func paneRect(columns: Int, rows: Int) -> (top: Int, left: Int, width: Int, rows: Int) {
        let bodyTop = 1, bodyRows = rows - 2
        if columns >= sideBySideColumns {
            let listWidth = min(max(44, columns * 9 / 20), 90)
            return (bodyTop, listWidth + 1, columns - listWidth - 1, bodyRows)
        }
        let listRows = max(3, bodyRows * 9 / 20)
        return (bodyTop + listRows, 0, columns, bodyRows - listRows)
    }

    /// The size the preview shows an agent's screen at on a `columns` × `rows` terminal
    /// (the pane under its tab bar): the agent is laid out at it while it is previewed, so
    /// the preview shows what a person attached at that size would see.
    public static func previewSize(columns: Int, rows: Int) -> (columns: Int, rows: Int) {
        let p = paneRect(columns: columns, rows: rows)
        return (max(10, p.width), max(2, p.rows - 1))
    }

    /// The new task's (or chat's) form; the cursor's place in the part being typed.
    static func form(_ f: CockpitModel.NewAgent, into s: inout ScreenBuffer, top: Int, left: Int, width: Int, rows: Int)
        -> ScreenRenderer.Cursor?
    {
        s.fill(row: top, column: left, width: width, height: 1, style: Style.frame)
        let heading = f.chatIn.map { " a new chat in \($0.title) " } ?? " a new task "
        s.write(TerminalWidth.truncate(heading, to: width), row: top, column: left, style: TerminalStyle(bold: true, reverse: true))
        var cursor: ScreenRenderer.Cursor?
        var r = top + 2
        let labelWidth = 9
        for part in f.parts where r < top + rows {
            let active = part == f.part
            let label: String
            var value: String
            var choice = false
            switch part {
            case .project:
                label = "project"
                value = f.projects.indices.contains(f.project)
                    ? "\(f.projects[f.project].name) on \(f.projects[f.project].hostName)" : "(no project)"
                choice = true
            case .title:
                label = "title"
                value = f.title
            case .agent:
                label = "agent"
                let id = f.agents[f.agent]
                value = id
                if let h = f.hostID {
                    if let found = f.installed[h] { value += found.contains(id) ? "" : "  (not installed there)" } else { value += "  (asking the host…)" }
                }
                choice = true
            case .prompt:
                label = "prompt"
                value = f.prompt.replacingOccurrences(of: "\n", with: " ⏎ ")
            }
            let c = s.write(TerminalWidth.pad(label, to: labelWidth), row: r, column: left + 2,
                            style: active ? TerminalStyle(bold: true) : Style.dim)
            let room = max(1, left + width - c - 1)
            if choice {
                s.write(TerminalWidth.truncate("‹ \(value) ›", to: room), row: r, column: c,
                        style: active ? TerminalStyle(reverse: true) : .plain, limit: left + width)
            } else {
                // the end of what was typed stays in view
                let shown = TerminalWidth.of(value) < room ? value : String(value.suffix(room - 1))
                let end = s.write(shown, row: r, column: c, style: active ? TerminalStyle(underline: true) : .plain, limit: left + width)
                if active { cursor = ScreenRenderer.Cursor(row: r, column: min(end, left + width - 1)) }
            }
            r += 2
        }
        if let problem = f.problem, r < top + rows {
            s.write(TerminalWidth.truncate(problem, to: width - 2), row: r, column: left + 2, style: Style.error)
        }
        return cursor
    }

    enum Style {
        static let bar = TerminalStyle(reverse: true)
        static let frame = TerminalStyle(foreground: .indexed(8))
        static let header = TerminalStyle(foreground: .indexed(6), bold: true)
        static let selected = TerminalStyle(background: .indexed(236), bold: true)
        static let dim = TerminalStyle(foreground: .indexed(8))
        static let error = TerminalStyle(foreground: .indexed(1), bold: true)
        static let key = TerminalStyle(bold: true)
    }

    // MARK: the parts

    static func title(_ model: CockpitModel, into s: inout ScreenBuffer) {
        s.fill(row: 0, column: 0, width: s.columns, height: 1, style: Style.bar)
        let tasks = model.board.rows.count
        var needs = 0
        for i in model.board.rows.indices where model.board.rows[i].needsYou { needs += 1 }
        var left = " agent-sessions  \(tasks) task\(tasks == 1 ? "" : "s")"
        if needs > 0 { left += " · \(needs) need\(needs == 1 ? "s" : "") you" }
        if !model.filter.isEmpty { left += " · filter: \(model.filter)" }
        var hosts: [String] = []
        var seen = Set<HostID>()
        // only the hosts not connected: a few look-ups, not a copy of every row
        for i in model.board.rows.indices {
            guard let id = model.board.rows[i].host?.id, let state = model.hostStates[id], state != .connected,
                  seen.insert(id).inserted, let h = model.board.rows[i].host
            else { continue }
            switch state {
            case .unreachable: hosts.append("\(h.name) unreachable")
            case .connecting: hosts.append("\(h.name) connecting")
            case .connected: break
            }
        }
        let right = hosts.isEmpty ? "" : hosts.joined(separator: " · ") + " "
        let end = s.write(left, row: 0, column: 0, style: Style.bar, limit: s.columns - TerminalWidth.of(right))
        if !right.isEmpty, end < s.columns {
            s.write(right, row: 0, column: max(end + 1, s.columns - TerminalWidth.of(right)), style: TerminalStyle(bold: true, reverse: true))
        }
    }

    static func list(_ model: CockpitModel, into s: inout ScreenBuffer, top: Int, left: Int, width: Int, rows: Int, now: Date) {
        let items = model.items
        guard !items.isEmpty else {
            let text = model.filter.isEmpty ? "no tasks: start one with agent-sessions tasks new" : "nothing matches the filter"
            s.write(text, row: top + 1, column: left + 2, style: Style.dim, limit: left + width)
            return
        }
        let selectedIndex = items.firstIndex { model.id(of: $0) != nil && model.id(of: $0) == model.selected } ?? 0
        // the selection in view, with its header when there is room
        let first = max(0, min(selectedIndex - rows / 2, items.count - rows))
        for (k, item) in items[first..<min(items.count, first + rows)].enumerated() {
            let r = top + k
            switch item {
            case .header(let title, let host):
                var text = title
                if let host, case .unreachable(let why)? = model.hostStates[host] { text += " · unreachable: \(why)" }
                if let host, model.hostStates[host] == .connecting { text += " · connecting" }
                s.write(TerminalWidth.truncate(text, to: width - 1), row: r, column: left + 1, style: Style.header, limit: left + width)
            case .agent(let ri, let ai):
                let row = model.board.rows[ri]
                line(row: row, agent: row.agents[ai], first: ai == 0, model: model, into: &s, r: r, left: left, width: width, now: now)
            case .task(let ri):
                line(row: model.board.rows[ri], agent: nil, first: true, model: model, into: &s, r: r, left: left, width: width, now: now)
            }
        }
    }

    /// One agent's line: its state's mark, the task (or `chat`), the agent, the state and
    /// what it asks, then what room is left allows: files changed, last activity.
    static func line(row: AgentBoard.Row, agent: AgentBoard.Agent?, first: Bool, model: CockpitModel,
                     into s: inout ScreenBuffer, r: Int, left: Int, width: Int, now: Date)
    {
        let id = agent?.record.id.rawValue ?? row.task.id.rawValue
        let isSelected = id == model.selected
        let base = isSelected ? Style.selected : TerminalStyle.plain
        s.fill(row: r, column: left, width: width, height: 1, style: base)
        let (mark, markStyle) = self.mark(agent, hostError: row.hostError != nil)
        var c = s.write(isSelected ? "▌" : " ", row: r, column: left, style: base.with(foreground: .indexed(4)))
        c = s.write(mark + " ", row: r, column: c, style: base.with(markStyle), limit: left + width)
        let agentName = agent.map { $0.record.providerID } ?? "-"
        let room = left + width - c
        // on a narrow terminal (a phone's) the agent's column goes: a chat is named by its
        // agent, and the title gets half the room
        let narrow = s.columns < 60
        let name = !first ? (narrow ? "  ↳ \(agentName)" : "  ↳ chat")
            : model.isOpenAttempt(row) ? "\(row.task.attempt!.label) @ \(row.host?.name ?? "?")" : row.task.title
        let state = stateText(agent, row: row)
        let changed = row.filesChanged.map { "\($0)f" } ?? ""
        let activity = agent?.lastActivity.map { shortAgo($0, now: now) } ?? ""
        // fixed columns first when there is room, the title takes the rest
        let tail = room >= 50 ? " \(TerminalWidth.pad(changed, to: 4)) \(TerminalWidth.pad(activity, to: 4))" : ""
        let agentCol = narrow ? "" : " " + TerminalWidth.pad(agentName, to: 8)
        // the title first (two fifths of the room, up to 28; half on a narrow terminal),
        // then the state and its question
        let fixed = TerminalWidth.of(tail) + TerminalWidth.of(agentCol) + 1
        let titleWidth = max(4, max(narrow ? room / 2 : min(28, room * 2 / 5), room - fixed - 40))
        let stateWidth = max(4, room - fixed - titleWidth)
        c = s.write(TerminalWidth.pad(name, to: titleWidth), row: r, column: c, style: base, limit: left + width)
        c = s.write(agentCol, row: r, column: c, style: base.with(Style.dim), limit: left + width)
        c = s.write(" " + TerminalWidth.pad(state, to: stateWidth), row: r, column: c, style: base.with(markStyle), limit: left + width)
        s.write(tail, row: r, column: c, style: base.with(Style.dim), limit: left + width)
    }

    /// A state's mark and colour.
    static func mark(_ agent: AgentBoard.Agent?, hostError: Bool) -> (String, TerminalStyle) {
        if hostError { return ("?", Style.dim) }
        switch agent?.activity {
        case .waitingForInput?: return ("◆", TerminalStyle(foreground: .indexed(3), bold: true))
        case .done?: return ("✓", TerminalStyle(foreground: .indexed(2), bold: true))
        case .working?: return ("●", TerminalStyle(foreground: .indexed(4)))
        case .starting?: return ("…", TerminalStyle(foreground: .indexed(4)))
        case .idle?: return ("○", Style.dim)
        case .exited(let code)?: return ("✕", code == 0 ? Style.dim : TerminalStyle(foreground: .indexed(1)))
        case .stopped?: return ("■", Style.dim)
        case .lost?: return ("!", TerminalStyle(foreground: .indexed(1), bold: true))
        case nil: return (agent == nil ? "·" : "·", Style.dim)
        }
    }

    /// "waiting: Allow bash?", "limited until 14:05", "working", "exited 1", "unknown".
    static func stateText(_ agent: AgentBoard.Agent?, row: AgentBoard.Row) -> String {
        if row.hostError != nil { return "unknown" }
        guard let agent else { return "no agent" }
        guard let status = agent.status else {
            switch agent.record.state {
            case .exited(let code): return "exited \(code)"
            case .stopped: return "stopped"
            case .gone: return "lost"
            default: return "-"
            }
        }
        switch status.activity {
        case .waitingForInput:
            if let limit = status.limitText { return limit }
            return status.question.map { "waiting: \($0)" } ?? "waiting"
        case .exited(let code): return "exited \(code)"
        default: return status.activity.name
        }
    }

    /// The compare tab: the attempts of one work, a line each (the selected one marked):
    /// label, host, state, time to done, files and lines changed, the last check's run.
    static func comparison(_ rows: [AttemptComparison], selected: TaskID) -> [[StyledText]] {
        guard let first = rows.first else { return [[StyledText("no attempts")]] }
        let w = first.task.worktree
        var lines: [[StyledText]] = [[StyledText("\(rows.count) attempts at \"\(first.task.title)\" from \(w.baseRef) (\(w.baseCommit.prefix(10)))",
                                                 TerminalStyle(bold: true))],
                                     [StyledText("= runs a check in each · K keeps the selected one", Style.dim)], []]
        let labelWidth = max(8, rows.map { TerminalWidth.of($0.label) }.max() ?? 0)
        let hostWidth = max(4, rows.map { TerminalWidth.of($0.hostName) }.max() ?? 0)
        for r in rows {
            let fake = AgentBoard.Row(task: r.task, project: nil, host: nil, agents: r.agent.map { [$0] } ?? [], hostError: r.problem)
            var state = stateText(r.agent, row: fake)
            if r.task.archivedAt != nil { state = "archived" }
            if r.task.attempt?.pickedAt != nil { state = "kept" }
            let (mark, markStyle) = self.mark(r.agent, hostError: r.problem != nil)
            let done = r.timeToDone.map { d in
                let s = Int(d.components.seconds)
                return s < 60 ? "\(s)s" : s < 3600 ? "\(s / 60)m\(s % 60)s" : "\(s / 3600)h\(s % 3600 / 60)m"
            } ?? "-"
            let changes = r.filesChanged.map { "\($0)f +\(r.linesAdded ?? 0) −\(r.linesRemoved ?? 0)" } ?? "?"
            var line = [StyledText(r.task.id == selected ? "▸ " : "  ", TerminalStyle(foreground: .indexed(4))),
                        StyledText(mark + " ", markStyle),
                        StyledText(TerminalWidth.pad(r.label, to: labelWidth) + " ", TerminalStyle(bold: true)),
                        StyledText(TerminalWidth.pad(r.hostName, to: hostWidth) + " ", Style.dim),
                        StyledText(TerminalWidth.pad(state, to: 10) + " "),
                        StyledText(TerminalWidth.pad(done, to: 7) + " ", Style.dim),
                        StyledText(TerminalWidth.pad(changes, to: 14) + " ")]
            if let c = r.check {
                let secs = Double(c.duration.components.seconds) + Double(c.duration.components.attoseconds) / 1e18
                let time = String(format: "%.1fs", secs)
                switch c.outcome {
                case .exited(.exited(0)): line.append(StyledText("✓ \(time)", TerminalStyle(foreground: .indexed(2))))
                case .exited(.exited(let n)): line.append(StyledText("✕ exit \(n) \(time)", TerminalStyle(foreground: .indexed(1))))
                case .exited(let other): line.append(StyledText("✕ \(other)", TerminalStyle(foreground: .indexed(1))))
                case .timedOut: line.append(StyledText("✕ timed out", TerminalStyle(foreground: .indexed(1))))
                }
            }
            lines.append(line)
        }
        // the failed checks' last lines
        for r in rows {
            guard let c = r.check, !c.passed, !c.output.isEmpty else { continue }
            lines.append([])
            lines.append([StyledText("\(r.label): \(c.command)", TerminalStyle(bold: true))])
            for l in c.output.split(separator: "\n", omittingEmptySubsequences: false).suffix(5) {
                lines.append([StyledText("  " + l, Style.dim)])
            }
        }
        return lines
    }

    /// "now", "5m", "3h", "2d": minutes at the finest, so an idle screen redraws at most once
    /// a minute.
    static func shortAgo(_ date: Date, now: Date) -> String {
        let s = max(0, Int(now.timeIntervalSince(date)))
        if s < 60 { return "now" }
        if s < 3600 { return "\(s / 60)m" }
        if s < 86400 { return "\(s / 3600)h" }
        return "\(s / 86400)d"
    }

    static func pane(_ model: CockpitModel, into s: inout ScreenBuffer, top: Int, left: Int, width: Int, rows: Int) {
        guard rows >= 2, width >= 10 else { return }
        // the tab bar: the tabs, and whose pane it is
        s.fill(row: top, column: left, width: width, height: 1, style: Style.frame)
        var c = left
        for tab in model.tabs {
            let active = tab == model.tab
            c = s.write(" \(tab.rawValue) ", row: top, column: c, style: active ? TerminalStyle(bold: true, reverse: true) : Style.frame,
                        limit: left + width)
        }
        if let sel = model.selection {
            // whose pane, and its whole state: its source and the question
            var who = "─ " + (sel.agent.map { "\($0.record.providerID) · " } ?? "") + sel.row.task.displayTitle
            if let port = model.forwards[sel.row.task.id] { who += " · ↗ 127.0.0.1:\(port)" }
            if let pr = sel.row.pullRequest { who += " · PR \(pr.summary)" }
            if let status = sel.agent?.status, sel.row.hostError == nil {
                who += " · \(status.activity.name) (\(status.source.rawValue))"
                if status.activity == .waitingForInput, let q = status.question { who += ": " + q }
            }
            who += " "
            s.write(TerminalWidth.truncate(who, to: max(0, left + width - c - 1)), row: top, column: c + 1, style: Style.frame,
                    limit: left + width)
        }
        let body = rows - 1
        let lines = model.pane
        guard !lines.isEmpty else {
            let text = model.selection == nil ? "" : (model.paneFor == nil ? "…" : "(empty)")
            s.write(text, row: top + 1, column: left + 1, style: Style.dim, limit: left + width)
            return
        }
        // preview and log: the end, scrolled up; diff: the start, scrolled down
        let start: Int
        if model.tab == .diff {
            start = min(max(0, model.scroll), max(0, lines.count - body))
        } else {
            start = max(0, lines.count - body - max(0, model.scroll))
        }
        for k in 0..<min(body, lines.count - start) {
            s.write(lines[start + k], row: top + 1 + k, column: left, limit: left + width)
        }
    }

    /// The keys and what each does; on a narrow terminal each description wraps under
    /// itself, and a help taller than the terminal scrolls (`offset` lines down).
    static func help(into s: inout ScreenBuffer, top: Int, rows: Int, offset: Int) {
        let keysWidth = min(16, max(14, s.columns / 4))
        let room = max(10, s.columns - keysWidth - 3)
        var lines: [(keys: String, what: String)] = []
        for (keys, what) in CockpitKeys.help {
            for (i, part) in TerminalWidth.wrap(what, to: room).enumerated() { lines.append((i == 0 ? keys : "", part)) }
        }
        let shown = rows - 1
        let start = min(max(0, offset), max(0, lines.count - shown + 1))
        var r = top + 1
        for line in lines.dropFirst(start) where r < top + rows {
            if r == top + rows - 1, start + (r - top) < lines.count {
                s.write("  ↓ more (↑ ↓ scroll, any other key closes)", row: r, column: 0, style: Style.dim)
                break
            }
            let c = s.write("  " + TerminalWidth.pad(line.keys, to: keysWidth) + " ", row: r, column: 0, style: Style.key)
            s.write(line.what, row: r, column: c)
            r += 1
        }
    }

    /// The last line; the cursor's place when a field is being typed.
    static func statusLine(_ model: CockpitModel, into s: inout ScreenBuffer, row: Int) -> ScreenRenderer.Cursor? {
        s.fill(row: row, column: 0, width: s.columns, height: 1)
        // a question or a message wider than the terminal (a phone's) wraps upwards, over
        // the bottom of the pane, up to three rows, so its end ("(y/n)") stays in view
        func say(_ text: String, style: TerminalStyle) {
            var lines = TerminalWidth.wrap(text, to: s.columns)
            if lines.count > 3 {
                lines = Array(lines.prefix(3))
                lines[2] = TerminalWidth.truncate(lines[2] + " …", to: s.columns)
            }
            for (i, line) in lines.enumerated() {
                let r = row - (lines.count - 1) + i
                s.fill(row: r, column: 0, width: s.columns, height: 1)
                s.write(line, row: r, column: 0, style: style)
            }
        }
        func prompt(_ label: String, _ text: String) -> ScreenRenderer.Cursor {
            let c = s.write(label, row: row, column: 0, style: Style.key)
            // the end of what was typed stays in view
            let room = max(1, s.columns - c - 1)
            let shown = TerminalWidth.of(text) <= room ? text : String(text.suffix(room))
            let end = s.write(shown, row: row, column: c)
            return ScreenRenderer.Cursor(row: row, column: min(end, s.columns - 1))
        }
        switch model.mode {
        case .filter:
            return prompt("filter: ", model.filter)
        case .field(let f):
            switch f.purpose {
            case .send: return prompt("send: ", f.text)
            case .answer(_, let q): return prompt(TerminalWidth.truncate(q, to: max(10, s.columns / 2)) + " › ", f.text)
            case .check: return prompt("check in every attempt: ", f.text)
            }
        case .confirm(let c):
            let text: String
            // a long title is cut, so that the question fits and ends in view
            func cut(_ t: String) -> String { TerminalWidth.truncate(t, to: 40) }
            switch c {
            case .stop(_, let t): text = "Stop the agents of \"\(cut(t))\"? (y/n)"
            case .archive(_, let t): text = "Archive \"\(cut(t))\" (its agents stop, its worktree stays)? (y/n)"
            case .delete(_, let t, false): text = "Delete \"\(cut(t))\", its worktree and branch? (y/n)"
            case .delete(_, let t, true): text = "\"\(cut(t))\" has work not pushed. Delete it anyway, losing it? (y/n)"
            case .merge(_, let t, let base): text = "Merge \"\(cut(t))\" into \(base) on its host? (y/n)"
            case .pick(_, let label): text = "Keep \(label) and archive the other attempts (their branches stay)? (y/n)"
            }
            say(text, style: Style.error)
            return nil
        case .form:
            say("tab next · ← → choose · enter on the prompt starts it · esc cancels", style: Style.dim)
            return nil
        case .list, .help:
            if let m = model.message {
                say(m.text, style: m.isError ? Style.error : Style.key)
                return nil
            }
            if let r = model.requests.first {
                let more = model.requests.count > 1 ? " (\(model.requests.count - 1) more after)" : ""
                let keys = " · Y allow · N deny" + more
                let room = max(10, s.columns - TerminalWidth.of(keys))
                let c = s.write(TerminalWidth.truncate(r.text, to: room), row: row, column: 0, style: Style.error)
                s.write(keys, row: row, column: c, style: Style.key)
                return nil
            }
            var c = 0
            for (key, what) in CockpitKeys.hints {
                let part = TerminalWidth.of(key) + TerminalWidth.of(what) + 3
                if c + part > s.columns { break }
                c = s.write(key, row: row, column: c, style: Style.key)
                c = s.write(" " + what + "  ", row: row, column: c, style: Style.dim)
            }
            return nil
        }
    }
}

extension TerminalStyle {
    /// This style with another's foreground and attributes laid over it (its background kept).
    func with(_ other: TerminalStyle) -> TerminalStyle {
        var s = self
        if other.foreground != .default { s.foreground = other.foreground }
        s.bold = s.bold || other.bold
        s.dim = s.dim || other.dim
        s.underline = s.underline || other.underline
        s.reverse = s.reverse || other.reverse
        return s
    }

    /// This style with another foreground.
    func with(foreground: TerminalColor) -> TerminalStyle {
        var s = self
        s.foreground = foreground
        return s
    }
}
