import Foundation
import SSHCore
import Testing

/// The core's machines are written once, as transition lists (`sshcore_fsm.h`), and
/// Docs/StateMachines.md holds the tables generated from them (`scripts/state-tables.sh`).
/// These tests check the doc against the lists row for row, the generated apply functions
/// against the lists for every (state, event) pair, and that every state, event and action
/// of each machine is used by the list.
@Suite("State machine tables", .tags(.pure))
struct StateMachineTableTests {
    struct Row: Hashable, CustomStringConvertible {
        let state, event, next, action: String
        var description: String { "| \(state) | \(event) | \(next) | \(action) |" }
    }

    static let machines: [sshcore_machine] = [
        SSHCORE_MACHINE_CONN, SSHCORE_MACHINE_CHAN, SSHCORE_MACHINE_RFORWARD, SSHCORE_MACHINE_GSLOT,
    ]

    static func name(_ m: sshcore_machine, _ part: sshcore_fsm_part, _ value: Int32) -> String {
        String(cString: sshcore_fsm_name(m, part, value))
    }

    static func count(_ m: sshcore_machine, _ part: sshcore_fsm_part) -> Int32 { sshcore_fsm_count(m, part) }

    /// The machine's list, in list order, by name.
    static func listed(_ m: sshcore_machine) -> [Row] {
        (0..<sshcore_fsm_row_count(m)).map { i in
            var r = sshcore_fsm_row()
            #expect(sshcore_fsm_row_at(m, i, &r))
            return Row(state: name(m, SSHCORE_FSM_STATE, r.state), event: name(m, SSHCORE_FSM_EVENT, r.event),
                       next: name(m, SSHCORE_FSM_STATE, r.next), action: name(m, SSHCORE_FSM_ACTION, r.action))
        }
    }

    /// The table under `## <section>` in Docs/StateMachines.md, in order.
    static func documented(section: String) throws -> [Row] {
        let text = try String(contentsOfFile: TestServer.packageRoot + "/Docs/StateMachines.md", encoding: .utf8)
        guard let start = text.range(of: "\n## \(section)\n") else { throw FixtureError("no section \(section)") }
        var rows: [Row] = []
        for line in text[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("## ") { break }
            guard line.hasPrefix("|") else { continue }
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 4, cells[0] != "state", !cells[0].hasPrefix("---") else { continue }
            rows.append(Row(state: cells[0], event: cells[1], next: cells[2], action: cells[3]))
        }
        return rows
    }

    @Test(arguments: machines)
    func theDocumentedTableIsTheGeneratedOne(machine: sshcore_machine) throws {
        let section = String(cString: sshcore_fsm_machine_name(machine))
        let documented = try Self.documented(section: section)
        let listed = Self.listed(machine)
        #expect(!listed.isEmpty)
        #expect(documented == listed, """
            Docs/StateMachines.md's \(section) table is not the generated one \
            (bash scripts/state-tables.sh --write): it should be
            \(listed.map(\.description).joined(separator: "\n"))
            """)
    }

    /// The apply function agrees with the list for every pair: a listed pair moves to its
    /// next state with its action, any other is rejected and leaves the state alone.
    @Test(arguments: machines)
    func everyPairIsTheListsOrRejected(machine: sshcore_machine) {
        let states = Self.count(machine, SSHCORE_FSM_STATE)
        let events = Self.count(machine, SSHCORE_FSM_EVENT)
        let reject = Self.count(machine, SSHCORE_FSM_ACTION) - 1
        #expect(Self.name(machine, SSHCORE_FSM_ACTION, reject) == "reject")
        var byPair: [Int32: sshcore_fsm_row] = [:]
        for i in 0..<sshcore_fsm_row_count(machine) {
            var r = sshcore_fsm_row()
            _ = sshcore_fsm_row_at(machine, i, &r)
            let key = r.state * events + r.event
            #expect(byPair[key] == nil, "a pair listed twice: \(Self.listed(machine)[i])")
            byPair[key] = r
        }
        for s in 0..<states {
            for e in 0..<events {
                var state = s
                let action = sshcore_fsm_apply(machine, &state, e)
                if let row = byPair[s * events + e] {
                    #expect(state == row.next && action == row.action)
                } else {
                    #expect(action == reject && state == s,
                            "\(Self.name(machine, SSHCORE_FSM_STATE, s)) + \(Self.name(machine, SSHCORE_FSM_EVENT, e))")
                }
            }
        }
        var outOfRange: Int32 = states
        #expect(sshcore_fsm_apply(machine, &outOfRange, 0) == reject && outOfRange == states)
    }

    /// Both ways: every state has a way out and (but the first) a way in, every event is
    /// handled somewhere, every action is returned somewhere.
    @Test(arguments: machines)
    func theListCoversEveryStateEventAndAction(machine: sshcore_machine) {
        var r = sshcore_fsm_row()
        var from = Set<Int32>(), into = Set<Int32>(), events = Set<Int32>(), actions = Set<Int32>()
        for i in 0..<sshcore_fsm_row_count(machine) {
            _ = sshcore_fsm_row_at(machine, i, &r)
            from.insert(r.state)
            if r.next != r.state { into.insert(r.next) }
            events.insert(r.event)
            actions.insert(r.action)
        }
        let states = Self.count(machine, SSHCORE_FSM_STATE)
        for s in 0..<states {
            #expect(from.contains(s), "no transition from \(Self.name(machine, SSHCORE_FSM_STATE, s))")
            #expect(s == 0 || into.contains(s), "no way into \(Self.name(machine, SSHCORE_FSM_STATE, s))")
        }
        for e in 0..<Self.count(machine, SSHCORE_FSM_EVENT) {
            #expect(events.contains(e), "event \(Self.name(machine, SSHCORE_FSM_EVENT, e)) is never handled")
        }
        for a in 0..<(Self.count(machine, SSHCORE_FSM_ACTION) - 1) {
            #expect(actions.contains(a), "action \(Self.name(machine, SSHCORE_FSM_ACTION, a)) is never returned")
        }
        #expect(sshcore_fsm_row_at(machine, sshcore_fsm_row_count(machine), &r) == false)
    }

    @Test func aConnectionsPublicStateIsAFunctionOfItsPhase() {
        let expected = [
            "idle": "idle", "resolve": "connecting", "tcpStart": "connecting", "tcpWait": "connecting",
            "handshake": "connecting", "hostKeyWait": "connecting", "authNone": "authenticating",
            "authMethod": "authenticating", "answerWait": "authenticating", "ready": "ready",
            "closing": "closing", "closed": "closed", "failed": "failed",
        ]
        let phases = Self.count(SSHCORE_MACHINE_CONN, SSHCORE_FSM_STATE)
        #expect(Int(phases) == expected.count)
        for p in 0..<phases {
            let phase = Self.name(SSHCORE_MACHINE_CONN, SSHCORE_FSM_STATE, p)
            let state = String(cString: sshcore_conn_state_name(Int32(sshcore_conn_state_of(sshcore_phase(UInt32(p))).rawValue)))
            #expect(expected[phase] == state, "\(phase) is \(state)")
        }
    }

    @Test func aConnectionCanFailOrCloseInEveryPhaseAndOpensChannelsOnlyWhenReady() {
        for p in 0..<UInt32(SSHCORE_PHASE__COUNT.rawValue) {
            for e in [SSHCORE_PHASE_EV_FAILURE, SSHCORE_PHASE_EV_CLOSE] {
                var phase = sshcore_phase(p)
                let a = sshcore_phase_fsm_apply(&phase, e)
                #expect(a != SSHCORE_PHASE_ACT_REJECT)
                // a live phase tears down once; an ended one stays ended
                let live = p < SSHCORE_PHASE_CLOSING.rawValue
                #expect((a == SSHCORE_PHASE_ACT_TEAR_DOWN) == live)
                #expect(sshcore_conn_state_of(phase).rawValue >= SSHCORE_CONN_CLOSING.rawValue)
            }
            var phase = sshcore_phase(p)
            let a = sshcore_phase_fsm_apply(&phase, SSHCORE_PHASE_EV_OPEN_CHANNEL)
            #expect((a == SSHCORE_PHASE_ACT_OPEN_CHANNEL) == (p == SSHCORE_PHASE_READY.rawValue))
        }
        // the caller is asked with the deadline paused, and answers resume it
        var phase = SSHCORE_PHASE_HANDSHAKE
        #expect(sshcore_phase_fsm_apply(&phase, SSHCORE_PHASE_EV_HOSTKEY_ASKED) == SSHCORE_PHASE_ACT_ASK_CALLER)
        #expect(sshcore_phase_fsm_apply(&phase, SSHCORE_PHASE_EV_HOSTKEY_ACCEPTED) == SSHCORE_PHASE_ACT_RESUME)
        #expect(phase == SSHCORE_PHASE_AUTH_NONE)
    }

    @Test func aChannelClosesFromEveryStateAndReachesItsIOBothWays() {
        for s in 0..<UInt32(SSHCORE_CHAN__COUNT.rawValue) {
            for e in [SSHCORE_CHAN_EV_CLOSE, SSHCORE_CHAN_EV_CONN_LOST] {
                var state = sshcore_chan_state(s)
                #expect(sshcore_chan_fsm_apply(&state, e) != SSHCORE_CHAN_ACT_REJECT)
            }
        }
        // a session through every setup step; the caller learns it is open at the end
        var session = SSHCORE_CHAN_OPENING
        for e in [SSHCORE_CHAN_EV_SESSION_OPENED, SSHCORE_CHAN_EV_AGENT_DONE, SSHCORE_CHAN_EV_ENV_DONE,
                  SSHCORE_CHAN_EV_PTY_DONE] {
            #expect(sshcore_chan_fsm_apply(&session, e) == SSHCORE_CHAN_ACT_NONE)
        }
        #expect(sshcore_chan_fsm_apply(&session, SSHCORE_CHAN_EV_STARTED) == SSHCORE_CHAN_ACT_REPORT_OPEN)
        #expect(session == SSHCORE_CHAN_OPEN)
        // a direct or forwarded channel at once
        var stream = SSHCORE_CHAN_OPENING
        #expect(sshcore_chan_fsm_apply(&stream, SSHCORE_CHAN_EV_STREAM_OPENED) == SSHCORE_CHAN_ACT_REPORT_OPEN)
        #expect(stream == SSHCORE_CHAN_OPEN)
        // no EOF before the command runs
        var env = SSHCORE_CHAN_ENV_REQUESTS
        #expect(sshcore_chan_fsm_apply(&env, SSHCORE_CHAN_EV_SEND_EOF) == SSHCORE_CHAN_ACT_REJECT)
        // what the operation's invalidState error then says
        var detail = [CChar](repeating: 0, count: 128)
        sshcore_fsm_rejection(SSHCORE_MACHINE_CHAN, Int32(SSHCORE_CHAN_ENV_REQUESTS.rawValue),
                              Int32(SSHCORE_CHAN_EV_SEND_EOF.rawValue), &detail, detail.count)
        #expect(String(cString: detail) == "channel in envRequests: event sendEOF not allowed (a core bug)")
    }

    @Test func aRemoteForwardAndTheGlobalSlotUndoWhatTheyLeaveBehind() {
        // ending while listening cancels the forward; while waiting, the question is abandoned
        var rf = SSHCORE_RF_REQUEST
        #expect(sshcore_rf_fsm_apply(&rf, SSHCORE_RF_EV_SENT) == SSHCORE_RF_ACT_NONE)
        var waiting = rf
        #expect(sshcore_rf_fsm_apply(&waiting, SSHCORE_RF_EV_END) == SSHCORE_RF_ACT_ABANDON_QUESTION)
        #expect(sshcore_rf_fsm_apply(&rf, SSHCORE_RF_EV_ACCEPTED) == SSHCORE_RF_ACT_REPORT_LISTENING)
        #expect(sshcore_rf_fsm_apply(&rf, SSHCORE_RF_EV_END) == SSHCORE_RF_ACT_CANCEL_FORWARD)
        #expect(sshcore_rf_fsm_apply(&rf, SSHCORE_RF_EV_END) == SSHCORE_RF_ACT_NONE, "ended once")
        #expect(sshcore_rf_fsm_apply(&rf, SSHCORE_RF_EV_SENT) == SSHCORE_RF_ACT_REJECT)
        // the slot: one question at a time; an abandoned forward's answer undoes it
        var slot = SSHCORE_GSLOT_FREE
        #expect(sshcore_gslot_fsm_apply(&slot, SSHCORE_GSLOT_EV_REQUEST_SENT) == SSHCORE_GSLOT_ACT_NONE)
        #expect(sshcore_gslot_fsm_apply(&slot, SSHCORE_GSLOT_EV_PROBE_SENT) == SSHCORE_GSLOT_ACT_REJECT)
        #expect(sshcore_gslot_fsm_apply(&slot, SSHCORE_GSLOT_EV_OWNER_GONE) == SSHCORE_GSLOT_ACT_NONE)
        #expect(sshcore_gslot_fsm_apply(&slot, SSHCORE_GSLOT_EV_COLLECTED) == SSHCORE_GSLOT_ACT_UNDO_IF_ACCEPTED)
        #expect(slot == SSHCORE_GSLOT_FREE)
    }
}
