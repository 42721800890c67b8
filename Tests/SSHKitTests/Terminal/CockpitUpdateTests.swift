import Foundation
import SSHKit
import Testing
@testable import AgentCockpit
@testable import AgentSessions
import TerminalSupport

/// The cockpit's update for the events that are not keys: boards and panes read in the
/// background, the hosts' status, the clock, a resize, a follow that ended, an attach that
/// came back, an action that ended. Each is a state and the effects the loop carries out;
/// no terminal, engine or host.
@Suite("Cockpit: the update of every event", .tags(.pure))
struct CockpitUpdateTests {
    static let start = ContinuousClock.now
    static let size = (columns: 120, rows: 30)
    /// The preview's size on a 120×30 terminal.
    static var previewSize: SSHTerminalSize {
        let p = CockpitView.previewSize(columns: size.columns, rows: size.rows)
        return SSHTerminalSize(columns: p.columns, rows: p.rows)
    }

    /// A cockpit that has read the store's board and then every host's, c1 (the agent
    /// that needs you) selected and followed.
    static func started() -> CockpitState {
        var s = CockpitState(previewInterval: .milliseconds(500), boardInterval: .seconds(30), now: start)
        _ = s.start(now: start, size: size)
        _ = s.update(.board(CockpitViewTests.board(), live: false), now: start, size: size)
        _ = s.update(.board(CockpitViewTests.board(), live: true), now: start, size: size)
        return s
    }

    @Test func theStoresBoardThenEveryHostsAndTheSelectionOnTopUntilAKey() {
        var s = CockpitState(previewInterval: .milliseconds(500), boardInterval: .seconds(30), now: Self.start)
        #expect(s.start(now: Self.start, size: Self.size) == [.readBoard(live: false), .readBoard(live: true)])
        // the store's board: the top selected, its screen followed at the preview's size
        let first = s.update(.board(CockpitViewTests.board(), live: false), now: Self.start, size: Self.size)
        #expect(first == [.follow("c1", Self.previewSize)], "\(first)")
        #expect(s.model.selected == "c1" && s.model.hostStates["h1"] == .connecting)
        #expect(s.model.message?.text == "asking the hosts…", "kept until the hosts answered")
        // every host's: states known, the message gone, nothing read again (already followed)
        #expect(s.update(.board(CockpitViewTests.board(), live: true), now: Self.start, size: Self.size) == [])
        #expect(s.model.hostStates["h1"] == .connected && s.model.message == nil)
        // a store's board after the hosts answered changes nothing
        #expect(s.update(.board(AgentBoard(rows: []), live: false), now: Self.start, size: Self.size) == [])
        #expect(s.model.board.rows.count == 4)
        // another agent needs you: the selection moves to it, until a key is pressed
        var board = CockpitViewTests.board()
        board.rows[2].agents[0].status = AgentStatus(activity: .waitingForInput, source: .hook, since: CockpitViewTests.now)
        board.rows.swapAt(0, 2)
        _ = s.update(.board(board, live: true), now: Self.start, size: Self.size)
        #expect(s.model.selected == "c4")
        _ = s.update(.input(Array("j".utf8)), now: Self.start, size: Self.size)
        let moved = s.model.selected
        board.rows.swapAt(0, 2)
        _ = s.update(.board(board, live: true), now: Self.start, size: Self.size)
        #expect(s.model.selected == moved, "a key was pressed: the selection stays")
    }

    @Test func aPaneReadForAnotherSelectionOrTabIsDropped() {
        var s = Self.started()
        let lines = [[StyledText("hello")]]
        _ = s.update(.pane(id: "c4", tab: .preview, lines: lines), now: Self.start, size: Self.size)
        #expect(s.model.pane.isEmpty && s.model.paneFor == nil)
        _ = s.update(.pane(id: "c1", tab: .log, lines: lines), now: Self.start, size: Self.size)
        #expect(s.model.pane.isEmpty)
        _ = s.update(.pane(id: "c1", tab: .preview, lines: lines), now: Self.start, size: Self.size)
        #expect(s.model.paneFor == "c1" && s.model.pane.count == 1)
        _ = s.update(.paneFailed(id: "c1", tab: .preview, why: "host gone"), now: Self.start, size: Self.size)
        #expect(s.model.pane.first?.first?.text == "host gone")
    }

    @Test func theClockAsksEveryHostAgainAfterTheBoardsInterval() {
        var s = Self.started()
        #expect(s.update(.tick, now: Self.start + .seconds(5), size: Self.size) == [], "followed: nothing to read")
        #expect(s.update(.tick, now: Self.start + .seconds(31), size: Self.size) == [.readBoard(live: true)])
        #expect(s.update(.tick, now: Self.start + .seconds(32), size: Self.size) == [], "one read at a time")
        _ = s.update(.board(CockpitViewTests.board(), live: true), now: Self.start + .seconds(33), size: Self.size)
        #expect(s.update(.tick, now: Self.start + .seconds(64), size: Self.size) == [.readBoard(live: true)])
        _ = s.update(.boardFailed("the store is locked"), now: Self.start + .seconds(65), size: Self.size)
        #expect(s.model.message?.text == "the store is locked" && s.model.message?.isError == true)
    }

    @Test func aFollowThatFailedIsReadByTheClockForTenSecondsThenFollowedAgain() {
        var s = Self.started()
        let t0 = Self.start + .seconds(1)
        let read = s.update(.followEnded(id: "c1", failed: true), now: t0, size: Self.size)
        guard case .readPane(_, "c1", .preview, "t1", "c1"?, true, _)? = read.first, read.count == 1 else {
            Issue.record("\(read)")
            return
        }
        #expect(s.following == nil)
        // the read came back; the clock reads it again, not followed while it failed lately
        _ = s.update(.pane(id: "c1", tab: .preview, lines: []), now: t0, size: Self.size)
        let again = s.update(.tick, now: t0 + .seconds(1), size: Self.size)
        #expect(again.count == 1 && !again.contains(.follow("c1", Self.previewSize)), "\(again)")
        _ = s.update(.pane(id: "c1", tab: .preview, lines: []), now: t0 + .seconds(1), size: Self.size)
        #expect(s.update(.tick, now: t0 + .seconds(11), size: Self.size) == [.follow("c1", Self.previewSize)])
    }

    @Test func aResizeLaysAFollowedPreviewOutAgain() {
        var s = Self.started()
        let bigger = (columns: 200, rows: 50)
        let p = CockpitView.previewSize(columns: 200, rows: 50)
        #expect(s.update(.resize, now: Self.start, size: bigger)
            == [.redrawAll, .follow("c1", SSHTerminalSize(columns: p.columns, rows: p.rows))])
        #expect(s.update(.resize, now: Self.start, size: bigger) == [.redrawAll], "the same size: the same follow")
    }

    @Test func anUnreachableHostMarksItsRowsAndTheirHeader() {
        var s = Self.started()
        let host = CockpitViewTests.board().rows[2].host!
        _ = s.update(.update(.hostUnreachable(host, AgentError(.transport, "connection refused; check the host"))),
                     now: Self.start, size: Self.size)
        #expect(s.model.hostStates["h2"] == .unreachable("connection refused"))
        #expect(s.model.board.rows.filter { $0.host?.id == "h2" }.allSatisfy { $0.hostError != nil })
        _ = s.update(.update(.hostConnected(host, cursor: AgentEventCursor(log: "l", sequence: 1))), now: Self.start, size: Self.size)
        #expect(s.model.hostStates["h2"] == .connected)
    }

    @Test func theFormAsksTheHostOnceAndChoosesAnAgentItHas() {
        var s = Self.started()
        let project = CockpitModel.NewAgent.Project(id: "p2", name: "web", hostID: "h2", hostName: "build-2")
        let form = CockpitModel.NewAgent(projects: [project], preferred: "claude")
        #expect(s.update(.form(form), now: Self.start, size: Self.size) == [.run(.detectAgents(hostID: "h2"), label: "")])
        _ = s.update(.detected(hostID: "h2", agents: ["codex", "kimi"]), now: Self.start, size: Self.size)
        guard case .form(let shown) = s.model.mode else {
            Issue.record("\(s.model.mode)")
            return
        }
        #expect(shown.agents[shown.agent] == "codex", "claude is not on the host: the first one it has")
        #expect(shown.installed["h2"] == ["codex", "kimi"])
        // a second form for that host: what detection said is known, nothing asked
        #expect(s.update(.form(form), now: Self.start, size: Self.size) == [])
    }

    @Test func aCheckOpensTheComparisonAndAnActionsEndReadsAgain() {
        var s = Self.started()
        let check = AttemptCheck(command: "make test", outcome: .exited(.exited(0)), duration: .seconds(2), output: "ok")
        let effects = s.update(.checked(group: "g1", command: "make test", results: ["t1": check], text: "make test: passed in 1 of 1 attempts"),
                               now: Self.start, size: Self.size)
        #expect(s.model.tab == .compare && s.model.checks["t1"] == check && s.model.checkCommands["g1"] == "make test")
        #expect(effects.contains(.stopFollowing), "\(effects)")
        _ = s.update(.pane(id: "c1", tab: .compare, lines: []), now: Self.start, size: Self.size)
        let done = s.update(.done("pushed 2 commits to origin", isError: false, refresh: true, forwards: ["t1": 8080]),
                            now: Self.start, size: Self.size)
        #expect(s.model.forwards == ["t1": 8080] && s.model.message?.text == "pushed 2 commits to origin")
        #expect(done.first == .readBoard(live: true) && done.count == 2, "\(done)")
        #expect(s.update(.done("no", isError: true, refresh: false, forwards: [:]), now: Self.start, size: Self.size) == [])
        _ = s.update(.confirm(.delete(taskID: "t1", title: "Fix", force: true), because: "unpushed work"),
                     now: Self.start, size: Self.size)
        #expect(s.model.mode == .confirm(.delete(taskID: "t1", title: "Fix", force: true)))
    }

    @Test func anAttachGivesTheTerminalBackAndTheScreenIsFollowedAgain() {
        var s = Self.started()
        // enter on the selected agent: the follow stops, the terminal is the agent's
        let attach = s.update(.input([13]), now: Self.start, size: Self.size)
        #expect(attach == [.escapeTimer(start: false), .stopFollowing, .attach("c1")], "\(attach)")
        #expect(s.following == nil)
        let back = s.update(.attached(("detached from claude", false)), now: Self.start + .seconds(40), size: Self.size)
        #expect(back == [.redrawAll, .follow("c1", Self.previewSize), .readBoard(live: true)], "\(back)")
        #expect(s.model.message?.text == "detached from claude")
        #expect(s.update(.inputEnded, now: Self.start, size: Self.size) == [.quit])
        #expect(s.update(.input(Array("q".utf8)), now: Self.start, size: Self.size).last == .quit)
    }
}
