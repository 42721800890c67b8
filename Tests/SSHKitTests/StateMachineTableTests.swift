import Foundation
import SSHCore
import Testing

/// Docs/StateMachines.md is the specification; the C transition functions must match it
/// for every (state, event) pair, and every row of the doc must be reachable.
@Suite("State machine tables", .tags(.pure))
struct StateMachineTableTests {
    struct Row: Hashable { let state, event, next, action: String }

    static func rows(section: String) throws -> Set<Row> {
        let text = try String(contentsOfFile: TestServer.packageRoot + "/Docs/StateMachines.md", encoding: .utf8)
        guard let start = text.range(of: "## \(section)\n") else { throw FixtureError("no section \(section)") }
        var rows = Set<Row>()
        for line in text[start.upperBound...].split(separator: "\n") {
            if line.hasPrefix("## ") { break }
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard line.hasPrefix("|"), cells.count == 4, cells[0] != "state", !cells[0].hasPrefix("---") else { continue }
            rows.insert(Row(state: cells[0], event: cells[1], next: cells[2], action: cells[3]))
        }
        return rows
    }

    /// Every (state, event) pair through `apply`; rejected pairs must leave the state alone.
    static func implementedRows(
        states: Int, events: Int,
        apply: (_ state: Int, _ event: Int) -> (next: Int, action: Int, rejected: Bool),
        stateName: (Int32) -> UnsafePointer<CChar>, eventName: (Int32) -> UnsafePointer<CChar>,
        actionName: (Int32) -> UnsafePointer<CChar>
    ) -> Set<Row> {
        var rows = Set<Row>()
        for s in 0..<states {
            for e in 0..<events {
                let r = apply(s, e)
                if r.rejected {
                    #expect(r.next == s, "a rejected event must not change the state")
                    continue
                }
                rows.insert(Row(state: String(cString: stateName(Int32(s))), event: String(cString: eventName(Int32(e))),
                                next: String(cString: stateName(Int32(r.next))), action: String(cString: actionName(Int32(r.action)))))
            }
        }
        return rows
    }

    func check(documented: Set<Row>, actual: Set<Row>) {
        #expect(documented.subtracting(actual).isEmpty, "documented but not implemented: \(documented.subtracting(actual))")
        #expect(actual.subtracting(documented).isEmpty, "implemented but not documented: \(actual.subtracting(documented))")
    }

    @Test func connectionMachineMatchesTheDocumentedTable() throws {
        let documented = try Self.rows(section: "Connection")
        let actual = Self.implementedRows(
            states: Int(SSHCORE_CONN__COUNT.rawValue), events: Int(SSHCORE_CONN_EV__COUNT.rawValue),
            apply: { s, e in
                var state = sshcore_conn_state(rawValue: UInt32(s))
                let a = sshcore_conn_fsm_apply(&state, sshcore_conn_event(rawValue: UInt32(e)))
                return (Int(state.rawValue), Int(a.rawValue), a == SSHCORE_CONN_ACT_REJECT)
            },
            stateName: sshcore_conn_state_name, eventName: sshcore_conn_event_name, actionName: sshcore_conn_action_name)
        check(documented: documented, actual: actual)
        #expect(documented.count >= 15)
    }

    @Test func channelMachineMatchesTheDocumentedTable() throws {
        let documented = try Self.rows(section: "Channel")
        let actual = Self.implementedRows(
            states: Int(SSHCORE_CHAN__COUNT.rawValue), events: Int(SSHCORE_CHAN_EV__COUNT.rawValue),
            apply: { s, e in
                var state = sshcore_chan_state(rawValue: UInt32(s))
                let a = sshcore_chan_fsm_apply(&state, sshcore_chan_event(rawValue: UInt32(e)))
                return (Int(state.rawValue), Int(a.rawValue), a == SSHCORE_CHAN_ACT_REJECT)
            },
            stateName: sshcore_chan_state_name, eventName: sshcore_chan_event_name, actionName: sshcore_chan_action_name)
        check(documented: documented, actual: actual)
        #expect(documented.count >= 15)
    }

    @Test func connectPhaseMachineMatchesTheDocumentedTable() throws {
        let documented = try Self.rows(section: "Connect phases")
        let actual = Self.implementedRows(
            states: Int(SSHCORE_PHASE__COUNT.rawValue), events: Int(SSHCORE_PHASE_EV__COUNT.rawValue),
            apply: { s, e in
                var phase = sshcore_phase(rawValue: UInt32(s))
                let a = sshcore_phase_fsm_apply(&phase, sshcore_phase_event(rawValue: UInt32(e)))
                return (Int(phase.rawValue), Int(a.rawValue), a == SSHCORE_PHASE_ACT_REJECT)
            },
            stateName: sshcore_phase_name, eventName: sshcore_phase_event_name, actionName: sshcore_phase_action_name)
        check(documented: documented, actual: actual)
        #expect(documented.count >= 20)
        // every phase can end (a failure or a close), and only `ended` reaches `done`
        for p in 0..<Int(SSHCORE_PHASE__COUNT.rawValue) {
            var phase = sshcore_phase(rawValue: UInt32(p))
            #expect(sshcore_phase_fsm_apply(&phase, SSHCORE_PHASE_EV_ENDED) != SSHCORE_PHASE_ACT_REJECT)
            #expect(phase == SSHCORE_PHASE_DONE)
        }
        #expect(!documented.contains { $0.next == "done" && $0.event != "ended" })
    }

    @Test func channelSetupMachineMatchesTheDocumentedTable() throws {
        let documented = try Self.rows(section: "Channel setup")
        let actual = Self.implementedRows(
            states: Int(SSHCORE_SETUP__COUNT.rawValue), events: Int(SSHCORE_SETUP_EV__COUNT.rawValue),
            apply: { s, e in
                var setup = sshcore_setup(rawValue: UInt32(s))
                let a = sshcore_setup_fsm_apply(&setup, sshcore_setup_event(rawValue: UInt32(e)))
                return (Int(setup.rawValue), Int(a.rawValue), a == SSHCORE_SETUP_ACT_REJECT)
            },
            stateName: sshcore_setup_name, eventName: sshcore_setup_event_name, actionName: sshcore_setup_action_name)
        check(documented: documented, actual: actual)
        #expect(documented.count == 6)
        // both ways reach io: a session through every request, a stream at once
        var session = SSHCORE_SETUP_OPEN
        for e in [SSHCORE_SETUP_EV_SESSION_OPENED, SSHCORE_SETUP_EV_AGENT_DONE, SSHCORE_SETUP_EV_ENV_DONE,
                  SSHCORE_SETUP_EV_PTY_DONE, SSHCORE_SETUP_EV_STARTED] {
            #expect(sshcore_setup_fsm_apply(&session, e) != SSHCORE_SETUP_ACT_REJECT)
        }
        #expect(session == SSHCORE_SETUP_IO)
        var stream = SSHCORE_SETUP_OPEN
        #expect(sshcore_setup_fsm_apply(&stream, SSHCORE_SETUP_EV_STREAM_OPENED) == SSHCORE_SETUP_ACT_RUN_IO)
        #expect(stream == SSHCORE_SETUP_IO)
    }

    @Test func closeIsAllowedInEveryState() {
        for s in 0..<Int(SSHCORE_CONN__COUNT.rawValue) {
            var state = sshcore_conn_state(rawValue: UInt32(s))
            #expect(sshcore_conn_fsm_apply(&state, SSHCORE_CONN_EV_CLOSE) != SSHCORE_CONN_ACT_REJECT)
        }
        for s in 0..<Int(SSHCORE_CHAN__COUNT.rawValue) {
            var state = sshcore_chan_state(rawValue: UInt32(s))
            #expect(sshcore_chan_fsm_apply(&state, SSHCORE_CHAN_EV_CLOSE) != SSHCORE_CHAN_ACT_REJECT)
        }
    }

    @Test func channelsOnlyOpenOnAReadyConnection() {
        for s in 0..<Int(SSHCORE_CONN__COUNT.rawValue) {
            var state = sshcore_conn_state(rawValue: UInt32(s))
            let a = sshcore_conn_fsm_apply(&state, SSHCORE_CONN_EV_OPEN_CHANNEL)
            #expect((a == SSHCORE_CONN_ACT_OPEN_CHANNEL) == (s == Int(SSHCORE_CONN_READY.rawValue)))
        }
    }
}
