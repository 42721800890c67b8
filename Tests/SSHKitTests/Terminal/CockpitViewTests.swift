import Foundation
import Testing
@testable import AgentCockpit
@testable import AgentSessions
import TerminalSupport

/// The cockpit's model, view and keys, without a terminal: what is drawn at each size,
/// and what each key does.
@Suite("Cockpit: model, view and keys", .tags(.pure))
struct CockpitViewTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// Two hosts: on build-1 a task whose agent asks a question and one that works (with
    /// a chat), on build-2 an idle one and a task without an agent.
    static func board(unreachable: Bool = false) -> AgentBoard {
        let h1 = HostRecord(id: "h1", name: "build-1", address: "127.0.0.1", user: "me")
        let h2 = HostRecord(id: "h2", name: "build-2", address: "127.0.0.1", user: "me")
        let app = ProjectRecord(id: "p1", hostID: "h1", name: "app", path: "/src/app")
        let web = ProjectRecord(id: "p2", hostID: "h2", name: "web", path: "/src/web")
        func task(_ id: String, _ title: String, _ project: String) -> TaskRecord {
            TaskRecord(id: TaskID(id), projectID: ProjectID(project), title: title,
                       worktree: Worktree(name: id, projectPath: "/src", path: "/src/wt/\(id)", branch: "agent/\(id)", baseRef: "main", baseCommit: "abc"))
        }
        func agent(_ id: String, _ task: String, _ provider: String, _ activity: AgentActivity, question: String? = nil,
                   kind: AgentPTYID.Kind = .main) -> AgentBoard.Agent {
            AgentBoard.Agent(record: ConversationRecord(id: ChatID(id), taskID: TaskID(task), providerID: provider, kind: kind),
                             status: AgentStatus(activity: activity, source: .hook, since: now, question: question),
                             lastActivity: now.addingTimeInterval(-90))
        }
        return AgentBoard(rows: [
            .init(task: task("t1", "Fix the flaky test", "p1"), project: app, host: h1,
                  agents: [agent("c1", "t1", "claude", .waitingForInput, question: "Allow bash: make test?")], filesChanged: 3,
                  hostError: nil),
            .init(task: task("t2", "修复测试 🧪 and more words", "p1"), project: app, host: h1,
                  agents: [agent("c2", "t2", "codex", .working), agent("c3", "t2", "claude", .idle, kind: .chat)], filesChanged: 0,
                  hostError: nil),
            .init(task: task("t3", "Write the docs", "p2"), project: web, host: h2,
                  agents: [agent("c4", "t3", "kimi", .idle)], filesChanged: nil,
                  hostError: unreachable ? AgentError(.transport, "connection refused") : nil),
            .init(task: task("t4", "Empty", "p2"), project: web, host: h2, agents: [], filesChanged: nil, hostError: nil),
        ])
    }

    @Test func sideBySideFromAHundredColumnsWithWhatNeedsYouFirst() {
        var model = CockpitModel(board: Self.board())
        model.pane = ANSIText.lines("line 1\n\u{1B}[32mgreen prompt ❯\u{1B}[0m\n")
        model.paneFor = "c1"
        let (s, cursor) = CockpitView.render(model, columns: 120, rows: 30, now: Self.now)
        #expect(cursor == nil)
        #expect(s.text(row: 0).contains("4 tasks · 1 needs you"))
        let lines = s.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines[1].hasPrefix(" needs you"))
        #expect(lines[2].contains("◆ Fix the flaky test") && lines[2].contains("waiting"), "\(lines[2])")
        #expect(lines[3].contains("build-1 / app"))
        #expect(lines[4].contains("修复测试 🧪") && lines[4].contains("working"))
        #expect(lines[5].contains("↳ chat") && lines[5].contains("idle"))
        #expect(lines[6].contains("build-2 / web"))
        #expect(lines[8].contains("Empty") && lines[8].contains("no agent"))
        // the selection is the first agent; its pane on the right, the screen's end at the bottom
        #expect(model.selected == "c1")
        #expect(s[2, 0].character == "▌" && s[2, 3].style.background == .indexed(236))
        let divider = lines[1].firstIndex(of: "│").map { lines[1].distance(from: lines[1].startIndex, to: $0) }
        #expect(divider == 54, "\(lines[1])")
        #expect(lines[1].contains(" preview  diff  log ") && lines[1].contains("claude · Fix the flaky test · waiting"), "\(lines[1])")
        #expect(lines[2].hasSuffix("line 1") || lines[2].contains("│line 1"), "\(lines[2])")
        #expect(lines[3].contains("│green prompt ❯"))
        let green = s[3, 55]
        #expect(green.character == "g" && green.style.foreground == .indexed(2))
        // every row fills the width exactly, wide characters and all
        for r in 0..<s.rows { #expect(TerminalWidth.of(s.text(row: r)) == 120, "row \(r)") }
        #expect(lines[29].contains("enter attach") && lines[29].contains("q quit"))
    }

    /// An agent held by a usage limit whose reset the host read says until when, on the
    /// board and in the cockpit alike; without the time, the limit's message is the question.
    /// A phone's terminal app, 45 columns wide: the titles keep their room (the agent's
    /// column goes), a question to confirm and a message wrap so their ends stay in view,
    /// the help wraps and scrolls.
    @Test func aPhonesTerminalOf45ColumnsKeepsWhatMatters() {
        var model = CockpitModel(board: Self.board())
        model.pane = ANSIText.lines("line 1\n")
        model.paneFor = "c1"
        func lines(_ m: CockpitModel, rows: Int = 24) -> [String] {
            let s = CockpitView.render(m, columns: 45, rows: rows, now: Self.now).screen
            for r in 0..<s.rows { #expect(TerminalWidth.of(s.text(row: r)) == 45, "row \(r)") }
            return s.text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        }
        let list = lines(model)
        #expect(list[2].contains("Fix the flaky test") && list[2].contains("waiting: Allow"), "\(list[2])")
        #expect(list[5].contains("↳ claude") && list[5].contains("idle"), "a chat named by its agent: \(list[5])")
        #expect(list[7].contains("Write the docs") && !list[7].contains("kimi"), "\(list[7])")

        var m = model
        m.mode = .confirm(.delete(taskID: "t1", title: "Fix the flaky test", force: true))
        let confirm = lines(m)
        #expect(confirm[22] == "\"Fix the flaky test\" has work not pushed.", "\(confirm.suffix(3))")
        #expect(confirm[23] == "Delete it anyway, losing it? (y/n)", "\(confirm.suffix(3))")
        m.mode = .confirm(.archive(taskID: "t1", title: String(repeating: "a very long title ", count: 6)))
        let long = lines(m)
        #expect(long[23].hasSuffix("(y/n)") && long.joined().contains("…\""), "the title cut, the question whole: \(long.suffix(3))")

        m = model
        m.message = ("committed 3 files as abc123def456 on emdash/fix-the-flaky-test", false)
        #expect(lines(m).suffix(2) == ["committed 3 files as abc123def456 on", "emdash/fix-the-flaky-test"])
        m = model
        m.mode = .form(CockpitModel.NewAgent(projects: [.init(id: "p1", name: "app", hostID: "h1", hostName: "build-1")]))
        #expect(lines(m).last == "starts it · esc cancels", "\(lines(m).suffix(2))")

        // the help: each description whole, wrapped under itself; scrolled to its end
        m = model
        m.mode = .help
        let help = lines(m)
        #expect(help[2].hasPrefix("↑ ↓  k j") && help[3] == "further)", "\(help[2...3])")
        #expect(help[22] == "↓ more (↑ ↓ scroll, any other key closes)", "\(help[22])")
        #expect(!help.contains { $0.hasSuffix("…") }, "nothing cut: \(help)")
        for _ in 0..<60 { _ = CockpitKeys.handle(KeyPress(.down), &m) }
        let end = lines(m)
        #expect(end.contains { $0.hasPrefix("q  ctrl-c") && $0.contains("quit") }, "\(end)")
        #expect(!end.contains { $0.hasPrefix("↓ more") }, "\(end)")
        _ = CockpitKeys.handle(KeyPress(.up), &m)
        #expect(m.mode == .help)
        _ = CockpitKeys.handle(KeyPress(.character("z")), &m)
        #expect(m.mode == .list && m.helpOffset == 0)
    }

    /// Words broken at spaces; a word longer than a line cut where the line ends.
    @Test func textWrapsAtSpaces() {
        #expect(TerminalWidth.wrap("merge the task into its base", to: 10) == ["merge the", "task into", "its base"])
        #expect(TerminalWidth.wrap("emdash/fix-the-flaky-test", to: 10) == ["emdash/fix", "-the-flaky", "-test"])
        #expect(TerminalWidth.wrap("修复测试 ok", to: 5) == ["修复", "测试", "ok"])
        #expect(TerminalWidth.wrap("", to: 10) == [""])
    }

    /// An agent held by a usage limit whose reset the host read says until when, on the
    /// board and in the cockpit alike; without the time, the limit's message is the question.
    @Test func dump45() {
        var model = CockpitModel(board: Self.board())
        model.pane = ANSIText.lines("line 1\n\u{1B}[32mgreen prompt ❯\u{1B}[0m\n")
        model.paneFor = "c1"
        func show(_ name: String, _ m: CockpitModel, rows: Int = 24) {
            print("=== \(name)")
            print(CockpitView.render(m, columns: 45, rows: rows, now: Self.now).screen.text)
        }
        show("list", model)
        var c = model; c.mode = .confirm(.delete(taskID: "t1", title: "Fix the flaky test", force: true)); show("confirm", c)
        c = model; c.mode = .help; show("help", c, rows: 40)
        c = model; c.mode = .form(CockpitModel.NewAgent(projects: [.init(id: "p1", name: "app", hostID: "h1", hostName: "build-1")])); show("form", c)
        c = model; c.message = ("committed 3 files as abc123def456 on emdash/fix-the-flaky-test", false); show("message", c)
        c = model; c.requests = [.init(id: "0a1b2c3d", text: "lead asks to start kimi on build-1/app: \"Split the parser\"")]; show("request", c)
    }

    @Test func aUsageLimitSaysUntilWhen() {
        let reset = Date().addingTimeInterval(600)
        var status = AgentStatus(activity: .waitingForInput, source: .screen, since: Self.now,
                                 question: "usage limit: 5-hour limit reached ∙ resets 3pm")
        let row = Self.board().rows[0]
        let plain = AgentBoard.Agent(record: ConversationRecord(id: "c9", taskID: "t1", providerID: "claude", kind: .main),
                                     status: status, lastActivity: Self.now)
        #expect(CockpitView.stateText(plain, row: row) == "waiting: usage limit: 5-hour limit reached ∙ resets 3pm")
        status.limitedUntil = reset
        let f = DateFormatter()
        f.dateFormat = Calendar.current.isDate(reset, inSameDayAs: Date()) ? "HH:mm" : "MMM d HH:mm"
        #expect(status.limitText == "limited until \(f.string(from: reset))")
        let limited = AgentBoard.Agent(record: plain.record, status: status, lastActivity: Self.now)
        #expect(CockpitView.stateText(limited, row: row) == status.limitText)
        status.activity = .working
        #expect(status.limitText == nil, "only a waiting agent is limited")
    }

    /// The attempts of a work not yet picked are listed together under its title, each
    /// with its label and host; = runs a check in them, K keeps one after a yes; the compare
    /// tab shows them side by side with the last check.
    @Test func attemptsOfOneWorkAreListedTogetherWithKeysToCheckAndKeep() {
        var board = Self.board()
        let h1 = board.rows[0].host!, h2 = board.rows[2].host!
        for (i, (label, host)) in [("claude-1", h1), ("codex-1", h2)].enumerated() {
            let task = TaskRecord(id: TaskID("a\(i)"), projectID: host.id == "h1" ? "p1" : "p2", title: "Speed it up",
                                  worktree: Worktree(name: "w\(i)", projectPath: "/src", path: "/src/wt/a\(i)", branch: "emdash/a\(i)",
                                                     baseRef: "main", baseCommit: "abcdef1234567"),
                                  attempt: TaskAttempt(group: "g0123456789", label: label))
            let agent = AgentBoard.Agent(record: ConversationRecord(id: ChatID("ac\(i)"), taskID: task.id, providerID: String(label.prefix(5)), kind: .main),
                                         status: AgentStatus(activity: i == 0 ? .idle : .working, source: .hook, since: Self.now))
            board.rows.append(.init(task: task, project: board.rows[i == 0 ? 0 : 2].project, host: host, agents: [agent],
                                    filesChanged: i, hostError: nil))
        }
        var model = CockpitModel(board: board)
        let (s, _) = CockpitView.render(model, columns: 120, rows: 30, now: Self.now)
        let lines = s.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let header = try! #require(lines.firstIndex { $0.contains("attempts · Speed it up · g0123456") }, "\(s.text)")
        #expect(lines[header + 1].contains("claude-1 @ build-1") && lines[header + 2].contains("codex-1 @ build-2"), "\(s.text)")
        #expect(!lines.contains { $0.contains("build-2 / web") && $0.contains("codex-1") })

        // = on a task that is not an attempt says so
        #expect(CockpitKeys.handle(KeyPress(.character("=")), &model) == nil)
        #expect(model.message?.isError == true && model.message!.text.contains("not one of several attempts"))
        #expect(!CockpitView.render(model, columns: 120, rows: 30, now: Self.now).screen.text.contains(" compare "),
                "a task that is not an attempt has no compare tab")
        model.selected = "ac1"
        #expect(CockpitView.render(model, columns: 120, rows: 30, now: Self.now).screen.text.contains(" preview  diff  log  compare "))
        #expect(CockpitKeys.handle(KeyPress(.character("=")), &model) == nil)
        #expect(model.mode == .field(.init(.check(taskID: "a1"))))
        #expect(CockpitKeys.handle(KeyPress(.enter), &model) == nil, "an empty check runs nothing")
        model.mode = .field(.init(.check(taskID: "a1")))
        for c in "make test" { _ = CockpitKeys.handle(KeyPress(.character(c)), &model) }
        #expect(CockpitKeys.handle(KeyPress(.enter), &model) == .check(taskID: "a1", command: "make test"))
        // a command typed once is offered again for the same work
        model.checkCommands["g0123456789"] = "make test"
        _ = CockpitKeys.handle(KeyPress(.character("=")), &model)
        if case .field(let f) = model.mode { #expect(f.text == "make test") } else { Issue.record("no field") }
        model.mode = .list
        // K keeps after a yes, and only then
        #expect(CockpitKeys.handle(KeyPress(.character("K"), .shift), &model) == nil)
        #expect(model.mode == .confirm(.pick(taskID: "a1", label: "codex-1")))
        #expect(CockpitKeys.handle(KeyPress(.character("n")), &model) == nil && model.mode == .list)
        _ = CockpitKeys.handle(KeyPress(.character("K"), .shift), &model)
        #expect(CockpitKeys.handle(KeyPress(.character("y")), &model) == .pick(taskID: "a1"))

        // the compare tab: a line per attempt, the failed check's last lines after
        let rows = board.rows.suffix(2).enumerated().map { i, row in
            AttemptComparison(task: row.task, label: row.task.attempt!.label, hostName: row.host!.name, agent: row.agents[0],
                              timeToDone: i == 0 ? .seconds(252) : nil, filesChanged: i, linesAdded: 10 * i, linesRemoved: 0,
                              check: AttemptCheck(command: "make test", outcome: .exited(.exited(i == 0 ? 0 : 2)), duration: .milliseconds(1500),
                                                  output: i == 0 ? "ok" : "FAIL: speed_test"))
        }
        let text = CockpitView.comparison(Array(rows), selected: "a1").map { $0.map(\.text).joined() }
        #expect(text[0] == "2 attempts at \"Speed it up\" from main (abcdef1234)")
        let first = try! #require(text.first { $0.contains("claude-1") }), second = try! #require(text.first { $0.contains("codex-1") })
        #expect(first.contains("idle") && first.contains("4m12s") && first.contains("0f +0 −0") && first.contains("✓ 1.5s"), "\(first)")
        #expect(second.hasPrefix("▸") && second.contains("working") && second.contains("1f +10 −0") && second.contains("✕ exit 2 1.5s"), "\(second)")
        #expect(text.suffix(2) == ["codex-1: make test", "  FAIL: speed_test"], "\(text)")
        #expect(!text.contains { $0.contains("claude-1: make test") }, "a passed check's output is not repeated")
    }

    /// A start an agent asked for through MCP waits on the status line; Y and N answer the
    /// first; a message of the moment goes before it, and with none waiting the keys say so.
    @Test func whatWaitsForYourYesIsOnTheStatusLineAndYOrNAnswersIt() {
        var model = CockpitModel(board: Self.board())
        #expect(CockpitKeys.handle(KeyPress(.character("Y")), &model) == nil)
        #expect(model.message?.text == "nothing waits for your yes" && model.message?.isError == true)
        model.message = nil
        model.requests = [.init(id: "0a1b2c3d", text: "lead asks to start kimi on build-1/app: \"Split the parser\""),
                          .init(id: "99990000", text: "lead asks to start codex on build-2/web: \"Docs\"")]
        let line = CockpitView.render(model, columns: 120, rows: 30, now: Self.now).screen.text(row: 29)
        #expect(line.hasPrefix("lead asks to start kimi on build-1/app") && line.contains("Y allow · N deny (1 more after)"), "\(line)")
        // a narrow terminal keeps the keys and cuts the request
        let narrow = CockpitView.render(model, columns: 60, rows: 20, now: Self.now).screen.text(row: 19)
        #expect(narrow.contains("Y allow · N deny") && narrow.contains("…"), "\(narrow)")
        #expect(CockpitKeys.handle(KeyPress(.character("Y")), &model) == .answerRequest(id: "0a1b2c3d", yes: true))
        #expect(CockpitKeys.handle(KeyPress(.character("N")), &model) == .answerRequest(id: "0a1b2c3d", yes: false))
        // not while typing: a capital in a field is text
        model.mode = .filter
        #expect(CockpitKeys.handle(KeyPress(.character("Y")), &model) == nil && model.filter == "Y")
        model.mode = .list
        model.message = ("committed", false)
        #expect(CockpitView.render(model, columns: 120, rows: 30, now: Self.now).screen.text(row: 29).hasPrefix("committed"))
    }

    @Test func aboveAndBelowOnASmallTerminal() {
        let model = CockpitModel(board: Self.board())
        let (s, _) = CockpitView.render(model, columns: 60, rows: 20, now: Self.now)
        let lines = s.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        // 18 body rows: 8 for the list, the pane's tab bar under it
        #expect(lines[9].hasPrefix(" preview  diff  log "), "\(lines)")
        #expect(lines[2].contains("◆") && lines[2].contains("Fix the flaky"))
        for r in 0..<s.rows { #expect(TerminalWidth.of(s.text(row: r)) == 60, "row \(r)") }
        let wide = CockpitView.render(model, columns: 250, rows: 50, now: Self.now).screen
        for r in 0..<wide.rows { #expect(TerminalWidth.of(wide.text(row: r)) == 250, "row \(r)") }
        #expect(wide.text(row: 2).contains("3f") && wide.text(row: 2).contains("1m"), "files changed and activity: \(wide.text(row: 2))")
        let tiny = CockpitView.render(model, columns: 10, rows: 3).screen
        #expect(tiny.text(row: 0).hasPrefix("agent-ses"))
    }

    @Test func anUnreachableHostKeepsItsRowsMarked() {
        var model = CockpitModel(board: Self.board(unreachable: true))
        model.hostStates["h2"] = .unreachable("connection refused")
        let (s, _) = CockpitView.render(model, columns: 120, rows: 30, now: Self.now)
        let text = s.text
        #expect(text.contains("build-2 / web · unreachable: connection refused"))
        #expect(text.contains("? Write the docs"), "\(text)")
        #expect(s.text(row: 0).contains("build-2 unreachable"))
    }

    @Test func keysMoveFilterAnswerAndConfirm() {
        var model = CockpitModel(board: Self.board())
        func press(_ k: Key, _ m: KeyModifiers = []) -> CockpitCommand? { CockpitKeys.handle(KeyPress(k, m), &model) }
        #expect(press(.character("j")) == .refreshPane)
        #expect(model.selected == "c2", "the header between is skipped")
        #expect(press(.down) == .refreshPane && model.selected == "c3")
        #expect(press(.end) == .refreshPane && model.selected == "t4")
        #expect(press(.down) == nil && model.selected == "t4")
        #expect(press(.enter) == nil && model.message?.isError == true, "no agent to attach to")
        #expect(press(.home) == .refreshPane && model.selected == "c1")
        #expect(press(.enter) == .attach(conversationID: "c1"))
        // tabs
        #expect(press(.tab) == .refreshPane && model.tab == .diff)
        #expect(press(.tab, .shift) == .refreshPane && model.tab == .preview)
        // answering the question
        #expect(press(.character("a")) == nil)
        #expect(model.mode == .field(.init(.answer(conversationID: "c1", question: "Allow bash: make test?"))))
        let (s, cursor) = CockpitView.render(model, columns: 80, rows: 20)
        #expect(s.text(row: 19).hasPrefix("Allow bash: make test? › ") && cursor?.row == 19)
        for c in "yes" { _ = press(.character(c)) }
        _ = press(.backspace)
        _ = press(.paste("ok\nthen\u{1B}[2J"))
        _ = press(.character("\u{7}"))
        #expect(model.message?.text == "that key types nothing here")
        #expect(press(.enter) == .send(conversationID: "c1", text: "yeok then[2J"), "no control character reaches the agent")
        #expect(model.mode == .list)
        // an agent that waits on nothing is not answered
        _ = press(.down)
        #expect(press(.character("a")) == nil && model.message?.text.contains("not waiting") == true)
        // the filter narrows and esc clears it
        #expect(press(.character("/")) == nil && model.mode == .filter)
        for c in "docs" { _ = press(.character(c)) }
        #expect(model.items.compactMap { model.id(of: $0) } == ["c4"] && model.selected == "c4")
        _ = press(.escape)
        #expect(model.filter.isEmpty && model.items.count == 8)
        // delete asks; no cancels; yes deletes
        #expect(press(.character("D")) == nil)
        #expect(model.mode == .confirm(.delete(taskID: "t3", title: "Write the docs", force: false)))
        #expect(press(.character("n")) == nil && model.mode == .list && model.message?.text == "cancelled")
        _ = press(.character("D"))
        #expect(press(.character("y")) == .delete(taskID: "t3", force: false))
        // landing the work: commit, push, pull request at once; a merge asks first
        #expect(press(.character("C")) == .commit(taskID: "t3"))
        #expect(press(.character("P")) == .push(taskID: "t3"))
        #expect(press(.character("p")) == .pullRequest(taskID: "t3"))
        #expect(press(.character("O")) == .openPort(taskID: "t3"))
        #expect(press(.character("M")) == nil)
        guard case .confirm(.merge(taskID: "t3", _, _)) = model.mode else {
            Issue.record("M did not ask: \(model.mode)")
            return
        }
        #expect(CockpitView.render(model, columns: 80, rows: 20).screen.text(row: 19).hasPrefix("Merge \"Write the docs\" into"))
        #expect(press(.character("y")) == .merge(taskID: "t3"))
        // an open forward is named in the pane's title
        model.forwards["t3"] = 3107
        #expect(CockpitView.render(model, columns: 120, rows: 20).screen.text.contains("↗ 127.0.0.1:3107"))
        // help, and any key closes it
        _ = press(.character("?"))
        #expect(model.mode == .help)
        #expect(CockpitView.render(model, columns: 80, rows: 24).screen.text.contains("archive the task"))
        _ = press(.character("z"))
        #expect(model.mode == .list)
        #expect(press(.character("c"), .control) == .quit && press(.character("q")) == .quit)
    }

    @Test func theNewTaskFormSaysWhatIsWrongInsideIt() {
        var model = CockpitModel(board: Self.board())
        func press(_ k: Key, _ m: KeyModifiers = []) -> CockpitCommand? { CockpitKeys.handle(KeyPress(k, m), &model) }
        #expect(press(.character("n")) == .openNewTask)
        model.mode = .form(CockpitModel.NewAgent(projects: [
            .init(id: "p1", name: "app", hostID: "h1", hostName: "build-1"), .init(id: "p2", name: "web", hostID: "h2", hostName: "build-2"),
        ]))
        guard case .form(let opened) = model.mode else { Issue.record("no form"); return }
        #expect(opened.part == .title && opened.agents[opened.agent] == "claude")
        // no title: said in the form, which stays
        _ = press(.tab)
        _ = press(.tab)
        #expect(press(.enter) == nil)
        guard case .form(var f) = model.mode else { Issue.record("the form closed"); return }
        #expect(f.problem == "the task needs a title" && f.part == .title)
        for c in "Port the parser" { _ = press(.character(c)) }
        _ = press(.tab, .shift)
        #expect(press(.right) == .detectAgents(hostID: "h2"), "another host: its agents asked")
        // an agent the host does not have: said, and the agent part chosen
        f = { if case .form(let f) = model.mode { return f }; return f }()
        f.installed["h2"] = ["codex"]
        model.mode = .form(f)
        _ = press(.tab); _ = press(.tab); _ = press(.tab)
        for c in "go" { _ = press(.character(c)) }
        #expect(press(.enter) == nil)
        guard case .form(let g) = model.mode else { Issue.record("the form closed"); return }
        #expect(g.problem?.contains("claude is not installed") == true && g.part == .agent)
        let (screen, _) = CockpitView.render(model, columns: 120, rows: 30)
        #expect(screen.text.contains("‹ claude  (not installed there) ›") && screen.text.contains("web on build-2"))
        _ = press(.character("c"))
        #expect(press(.tab) == nil)
        #expect(press(.enter) == .newTask(projectID: "p2", title: "Port the parser", providerID: "codex", prompt: "go"))
        #expect(model.mode == .list)
        // a chat in the selected task, and esc closes a form
        #expect(press(.character("c")) == .detectAgents(hostID: "h1"))
        guard case .form(let chat) = model.mode else { Issue.record("no chat form"); return }
        #expect(chat.parts == [.agent, .prompt] && chat.chatIn?.taskID == "t1")
        _ = press(.escape)
        #expect(model.mode == .list)
    }

    @Test func aNewBoardKeepsTheSelectionOrTheNearest() {
        var model = CockpitModel(board: Self.board())
        model.selected = "c3"
        var next = Self.board()
        next.rows[1].agents.removeLast()
        model.replaceBoard(next)
        #expect(model.selected == "c4", "the chat went: the next item in its place")
        model.replaceBoard(AgentBoard(rows: []))
        #expect(model.selected == nil)
        #expect(CockpitView.render(model, columns: 80, rows: 24).screen.text.contains("no tasks: start one"))
    }

    /// The frames of the host's loop the preview follows a screen with: a byte count ends
    /// a screen (a line in it that looks like a header stays in it), frames split across
    /// reads are joined, and an empty screen is a frame too.
    @Test func screenFramesEndAtTheirByteCount() {
        var reader = ScreenFrameReader()
        #expect(reader.feed(Array("sshkit-screen 5\nhello\nsshkit-scr".utf8)) == ["hello"])
        #expect(reader.feed(Array("een 31\nline\nsshkit-screen 3\n\u{1B}[1mxy".utf8)) == [])
        #expect(reader.feed(Array("z\u{1B}[0\nsshkit-screen 0\n\n".utf8))
                == ["line\nsshkit-screen 3\n\u{1B}[1mxyz\u{1B}[0", ""])
        #expect(reader.feed(Array("noise\nsshkit-screen 2\nok\n".utf8)) == ["ok"])
    }
}
