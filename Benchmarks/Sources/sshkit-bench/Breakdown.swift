// Where an engine operation's time goes: the steps of its `AgentTrace` (remote commands,
// streams, the phases the engine marks) over several runs, per step name and host, with
// the median start and duration, how many times it ran per run (remote commands: round
// trips) and its bytes.
import AgentSessions
import Foundation

struct Breakdown {
    let title: String
    private var runs = 0
    private var totals: [Double] = []
    private var steps: [String: (order: Double, starts: [Double], durations: [Double], count: Int, sent: Int, received: Int,
                                 kind: AgentTrace.Step.Kind)] = [:]

    init(_ title: String) { self.title = title }

    /// Adds one run's trace; `name` renames a step (to merge steps that name a session).
    mutating func add(_ trace: AgentTrace, total: Double, name: (AgentTrace.Step) -> String = { $0.name }) {
        runs += 1
        // SSHKIT_BENCH_STEPS=1: every step of every run, as it was
        if ProcessInfo.processInfo.environment["SSHKIT_BENCH_STEPS"] == "1" {
            for s in trace.steps.sorted(by: { $0.start < $1.start }) {
                out("\(title) run \(runs): \(name(s)) at \(s.start) took \(s.duration)")
            }
        }
        totals.append(total)
        for s in trace.steps {
            let key = name(s)
            let start = Double(s.start.components.attoseconds) / 1e15 + Double(s.start.components.seconds) * 1000
            let ms = Double(s.duration.components.attoseconds) / 1e15 + Double(s.duration.components.seconds) * 1000
            var e = steps[key] ?? (order: start, starts: [], durations: [], count: 0, sent: 0, received: 0, kind: s.kind)
            e.starts.append(start)
            e.durations.append(ms)
            e.count += 1
            e.sent += s.bytesSent
            e.received += s.bytesReceived
            steps[key] = e
        }
    }

    func report() {
        guard runs > 0 else { return }
        func f(_ x: Double) -> String { String(format: x < 10 ? "%.1f" : "%.0f", x) }
        out()
        out("\(title): where the time goes (median over \(runs) runs; total median \(f(median(totals))) ms)")
        out()
        out("| step | kind | starts at (ms) | takes (ms) | per run | bytes sent / received per run |")
        out("|---|---|---|---|---|---|")
        var roundTrips = 0.0, sent = 0.0, received = 0.0
        for (name, e) in steps.sorted(by: { median($0.value.starts) < median($1.value.starts) }) {
            let perRun = Double(e.count) / Double(runs)
            if e.kind == .remoteCommand { roundTrips += perRun }
            if e.kind != .phase { sent += Double(e.sent) / Double(runs); received += Double(e.received) / Double(runs) }
            let kind = e.kind == .remoteCommand ? "remote command" : e.kind == .remoteStream ? "remote stream" : "engine"
            out("| \(name) | \(kind) | \(f(median(e.starts))) | \(f(median(e.durations))) | \(String(format: "%.1f", perRun)) | "
                + (e.kind == .phase ? "— |" : "\(e.sent / runs) / \(e.received / runs) |"))
        }
        out("remote commands per run: \(String(format: "%.1f", roundTrips)); bytes sent \(Int(sent)), received \(Int(received))")
    }
}
