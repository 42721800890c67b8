import AgentSessions
import ArgumentParser
import Foundation
import SSHKit

/// Several attempts at one task: `tasks new --agents`, `tasks compare`, `tasks pick`.
enum Attempts {
    /// What `tasks new --agents` prints: each attempt, the notes, the failures (exit 1 when
    /// one did not start).
    static func report(_ launch: AttemptLaunch, title: String, context: Context) async throws {
        let hosts = try await context.records.hosts(), projects = try await context.records.projects()
        let work = short(launch.group)
        print("started \(Wording.count(launch.started.count, "attempt")) at \"\(title)\" from \(launch.baseRef) (\(launch.baseCommit.prefix(10))), work \(work)")
        var table = Table(["ATTEMPT", "ID", "HOST", "BRANCH"])
        for t in launch.started {
            let host = projects.first { $0.id == t.projectID }.flatMap { p in hosts.first { $0.id == p.hostID } }
            table.add([t.attempt?.label ?? "?", short(t.id), host?.name ?? "?", t.worktree.branch])
        }
        for line in table.lines() { print("  " + line) }
        for n in launch.notes { print("  \(n)") }
        print("  compare them: agent-sessions tasks compare \(work) [--check CMD]; keep one: agent-sessions tasks pick \(work) ATTEMPT")
        if !launch.failed.isEmpty {
            for f in launch.failed { note("\(f.label) did not start on \(f.hostName): \(Failure(f.error).message)") }
            throw Failure(.failed, "\(launch.failed.count) of \(launch.started.count + launch.failed.count) attempts did not start")
        }
    }

    static func seconds(_ d: Duration) -> String {
        let s = Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
        if s < 60 { return String(format: "%.1fs", s) }
        if s < 3600 { return "\(Int(s) / 60)m\(String(format: "%02d", Int(s) % 60))s" }
        return "\(Int(s) / 3600)h\(String(format: "%02d", Int(s) % 3600 / 60))m"
    }

    static func checkText(_ c: AttemptCheck) -> String {
        switch c.outcome {
        case .exited(.exited(0)): "passed in \(seconds(c.duration))"
        case .exited(.exited(let n)): "failed (exit \(n)) in \(seconds(c.duration))"
        case .exited(let other): "failed (\(other)) in \(seconds(c.duration))"
        case .timedOut: "timed out after \(seconds(c.duration))"
        }
    }

    struct Compare: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "compare",
            abstract: "Show a task's attempts side by side: state, time to done, changes, and a check run in each.",
            discussion: """
                --check runs the command with sh -c in every attempt's worktree at once, in the login environment of its host (PORT set to the attempt's port), and shows its exit status and time; the last lines of a failed check follow the table.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The task: the work's id, or one of its attempts.") var task: String
        @Option(help: ArgumentHelp("A command to run in each attempt's worktree ('make test').", valueName: "command"))
        var check: String?
        @Option(help: "Seconds a check may run.") var checkTimeout: Int = 600
        @Flag(help: "JSON, for scripts.") var json = false

        func validate() throws {
            if checkTimeout < 1 || checkTimeout > 86_400 { throw ValidationError("--check-timeout is 1 to 86400 seconds") }
        }

        func run() async throws {
            try await Context.with(global) { context in
                let attempts = try await context.attempts(task)
                let rows = try await context.orchestrator.task(attempts[0].id).compareAttempts(check: check,
                                                                           checkTimeout: .seconds(checkTimeout))
                if json {
                    printJSON(.object(["work": .string(attempts[0].attempt!.group), "title": .string(attempts[0].title),
                                       "baseRef": .string(attempts[0].worktree.baseRef),
                                       "baseCommit": .string(attempts[0].worktree.baseCommit),
                                       "attempts": .array(rows.map(Self.json))]))
                    return
                }
                let first = attempts[0]
                print("attempts at \"\(first.title)\" from \(first.worktree.baseRef) (\(first.worktree.baseCommit.prefix(10)))")
                var table = Table(["ATTEMPT", "ID", "HOST", "STATE", "DONE AFTER", "FILES", "LINES"] + (check == nil ? [] : ["CHECK"]))
                for r in rows {
                    var state = r.agent?.stateText ?? "no agent"
                    if r.task.archivedAt != nil { state = "archived" }
                    if r.task.attempt?.pickedAt != nil { state += ", picked" }
                    if let p = r.problem { state = "unknown (\(Failure(p).message.split(separator: ";")[0]))" }
                    let lines = r.linesAdded.map { "+\($0) -\(r.linesRemoved ?? 0)" } ?? "?"
                    table.add([r.label, short(r.task.id), r.hostName, state, r.timeToDone.map(Attempts.seconds) ?? "-",
                               r.filesChanged.map(String.init) ?? "?", lines] + (check == nil ? [] : [r.check.map(Attempts.checkText) ?? "-"]))
                }
                for line in table.lines() { print(line) }
                for r in rows {
                    guard let c = r.check, !c.passed, !c.output.isEmpty else { continue }
                    print("\(r.label): \(c.command)")
                    for line in c.output.split(separator: "\n", omittingEmptySubsequences: false).suffix(5) { print("  \(line)") }
                }
            }
        }

        static func json(_ r: AttemptComparison) -> JSONValue {
            var o: [String: JSONValue] = [
                "label": .string(r.label), "id": .id(r.task.id), "host": .string(r.hostName),
                "branch": .string(r.task.worktree.branch), "agent": r.providerID.map(JSONValue.string) ?? .null,
                "state": r.status.map { .string($0.activity.name) } ?? .null,
                "archived": .bool(r.task.archivedAt != nil), "picked": .bool(r.task.attempt?.pickedAt != nil),
                "secondsToDone": r.timeToDone.map { .int(Int($0.components.seconds)) } ?? .null,
                "filesChanged": r.filesChanged.map(JSONValue.int) ?? .null,
                "linesAdded": r.linesAdded.map(JSONValue.int) ?? .null,
                "linesRemoved": r.linesRemoved.map(JSONValue.int) ?? .null,
                "problem": r.problem.map { .string(Failure($0).message) } ?? .null,
            ]
            if let c = r.check {
                var check: [String: JSONValue] = ["command": .string(c.command), "passed": .bool(c.passed),
                                                  "milliseconds": .int(Int(c.duration.components.seconds * 1000 + c.duration.components.attoseconds / 1_000_000_000_000_000)),
                                                  "output": .string(c.output), "timedOut": .bool(c.outcome == .timedOut)]
                if case .exited(.exited(let n)) = c.outcome { check["exitCode"] = .int(Int(n)) } else { check["exitCode"] = .null }
                o["check"] = .object(check)
            } else {
                o["check"] = .null
            }
            return .object(o)
        }
    }

    struct Pick: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pick",
            abstract: "Keep one attempt as the task (push, pr and merge it as any task); archive or delete the others.",
            discussion: "--delete-others is refused when another attempt has uncommitted or unpushed work, unless --force.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The task: the work's id, or one of its attempts.") var task: String
        @Argument(help: "The attempt to keep (its label, claude-2, or its id).") var attempt: String
        @Flag(help: "Delete the other attempts with their worktrees and branches (default: archive them).") var deleteOthers = false
        @Flag(help: "With --delete-others: delete even work that would be lost.") var force = false

        func validate() throws {
            if force && !deleteOthers { throw ValidationError("--force goes with --delete-others") }
        }

        func run() async throws {
            try await Context.with(global) { context in
                let attempts = try await context.attempts(task)
                let picked = try await context.orchestrator.task(attempts[0].id).pickAttempt(attempt,
                                                                         others: deleteOthers ? .delete : .archive, force: force)
                let t = picked.task
                print("picked \(t.attempt?.label ?? attempt): task \(short(t.id)) on branch \(t.worktree.branch)")
                if !picked.archived.isEmpty { print("  archived \(picked.archived.joined(separator: ", ")) (their branches stay)") }
                if !picked.deleted.isEmpty { print("  deleted \(picked.deleted.joined(separator: ", ")) with their worktrees and branches") }
                for n in picked.notes { print("  note: \(n)") }
                print("  land it: agent-sessions tasks push \(short(t.id)), tasks pr \(short(t.id)) or tasks merge \(short(t.id))")
            }
        }
    }
}
