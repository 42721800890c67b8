import AgentSessions
import Foundation
import Hummingbird

/// The routes that start and land work: a new task (or several attempts at it), a chat
/// added to a task, a pull request, a merge, the task's port, and the attempts side by
/// side with one picked. Each goes through the engine's door, so its refusals are the
/// command's, word for word.
extension ServeServer {
    func addWorkRoutes(to router: Router<Context>) {
        router.get("/new") { [self] request, _ in
            guard device(request) != nil else { return Self.unpaired() }
            return Self.html(ServeAssets.newTaskPage)
        }
        // where a task can start: each project with the agents its host has
        router.get("/api/projects") { [self] request, _ in
            try await acting(request, action: nil, target: nil) { Self.json(try await projects()) }
        }
        router.post("/api/tasks") { [self] request, context in
            let body = try? await request.decode(as: NewTask.self, context: context)
            return try await acting(request, action: "new task", target: body?.project) {
                guard let body, !body.project.isEmpty else {
                    throw AgentError(.invalidArgument, "give the project, the title and the agent")
                }
                return Self.json(try await start(body))
            }
        }
        router.post("/api/tasks/:task/chats") { [self] request, context in
            let body = try? await request.decode(as: NewChat.self, context: context)
            return try await act(request, context, action: "new chat") { task in
                guard let body, !body.agent.isEmpty else { throw AgentError(.invalidArgument, "give the agent") }
                let (chat, _, _) = try await task.addChat(providerID: body.agent, prompt: Self.nonEmpty(body.prompt),
                                                          autoApprove: body.autoApprove ?? false)
                return Self.json(Started(task: task.id.rawValue, chat: chat.id.rawValue, message: "\(body.agent) is running"))
            }
        }
        router.post("/api/tasks/:task/pr") { [self] request, context in
            let body = try? await request.decode(as: Line.self, context: context)
            return try await act(request, context, action: "pr") { task in
                let pr = try await task.openPullRequest(title: Self.nonEmpty(body?.text))
                let message = switch pr.outcome {
                case .created: "opened the pull request"
                case .updated: "the pull request is open"
                case .compareURL: "open the pull request on the forge's page (gh is not on the host, or not logged in)"
                }
                return Self.json(Linked(message: message, url: pr.url))
            }
        }
        router.post("/api/tasks/:task/merge") { [self] request, context in
            try await act(request, context, action: "merge") { task in
                let branch = try await task.record().worktree.branch
                let m = try await task.merge()
                let message = switch m.outcome {
                case .alreadyMerged: "\(m.base) has every commit of \(branch) already; nothing changed"
                case .fastForward: "merged \(branch) into \(m.base): a fast-forward to \(m.commit.prefix(10))"
                case .mergeCommit: "merged \(branch) into \(m.base): merge commit \(m.commit.prefix(10))"
                }
                return Self.json(Done(message: message))
            }
        }
        // the task's port, forwarded to this machine over the host's connection
        router.post("/api/tasks/:task/port") { [self] request, context in
            try await act(request, context, action: "open port") { task in
                let f = try await task.openPort()
                return Self.json(PortView(localPort: f.localPort, remotePort: f.remotePort,
                                          message: "the task's port \(f.remotePort) is on port \(f.localPort) of the machine serve runs on"))
            }
        }
        // the attempts of a work, side by side; a check run in each; one picked
        router.get("/api/tasks/:task/attempts") { [self] request, context in
            try await act(request, context, action: nil) { task in
                Self.json(try await task.compareAttempts().map(AttemptView.init))
            }
        }
        router.post("/api/tasks/:task/attempts/check") { [self] request, context in
            let body = try? await request.decode(as: Line.self, context: context)
            return try await act(request, context, action: "check attempts") { task in
                guard let command = Self.nonEmpty(body?.text) else { throw AgentError(.invalidArgument, "give the command to run") }
                return Self.json(try await task.compareAttempts(check: command, checkTimeout: .seconds(600)).map(AttemptView.init))
            }
        }
        router.post("/api/tasks/:task/pick") { [self] request, context in
            struct Body: Decodable {
                var attempt: String
                /// "archive" (the default) or "delete".
                var others: String?
            }
            let body = try? await request.decode(as: Body.self, context: context)
            return try await act(request, context, action: "pick") { task in
                guard let body, !body.attempt.isEmpty else { throw AgentError(.invalidArgument, "give the attempt to keep") }
                let others: AttemptDisposal
                switch body.others ?? "archive" {
                case "archive": others = .archive
                case "delete": others = .delete
                default: throw AgentError(.invalidArgument, "the others are archived or deleted, not '\(body.others ?? "")'")
                }
                let picked = try await task.pickAttempt(body.attempt, others: others)
                let gone = picked.archived.isEmpty ? picked.deleted : picked.archived
                let message = "kept \(picked.task.attempt?.label ?? picked.task.title)"
                    + (gone.isEmpty ? "" : "; \(picked.archived.isEmpty ? "deleted" : "archived") \(gone.joined(separator: ", "))")
                    + (picked.notes.isEmpty ? "" : " (\(picked.notes.joined(separator: "; ")))")
                return Self.json(Started(task: picked.task.id.rawValue, chat: nil, message: message))
            }
        }
    }

    // MARK: starting work

    struct NewTask: Decodable {
        var project: String
        var title: String
        var agent: String
        var prompt: String?
        /// How many attempts (1: a single task).
        var attempts: Int?
        var autoApprove: Bool?
    }

    struct NewChat: Decodable {
        var agent: String
        var prompt: String?
        var autoApprove: Bool?
    }

    struct Started: Encodable {
        /// The task to open (the first attempt's, for several).
        var task: String
        var chat: String?
        var message: String
    }

    /// A task, or several attempts at it when `attempts` is above 1.
    private func start(_ body: NewTask) async throws(AgentError) -> Started {
        let project = engine.project(ProjectID(body.project))
        let prompt = Self.nonEmpty(body.prompt)
        let count = body.attempts ?? 1
        guard count >= 1 else { throw AgentError(.invalidArgument, "an attempt count from 1") }
        if count == 1 {
            let (task, _, conversation, _) = try await project.createTask(title: body.title, providerID: body.agent, prompt: prompt,
                                                                          autoApprove: body.autoApprove ?? false)
            return Started(task: task.id.rawValue, chat: conversation.id.rawValue, message: "\(body.agent) is running")
        }
        let launch = try await project.createAttempts(title: body.title, agents: [AttemptAgents(providerID: body.agent, count: count)],
                                                      prompt: prompt, autoApprove: body.autoApprove ?? false)
        guard let first = launch.started.first else { throw AgentError(.agentUnavailable, "no attempt started") }
        let failed = launch.failed.map { "\($0.label) on \($0.hostName): \($0.error.message)" }
        return Started(task: first.id.rawValue, chat: nil,
                       message: "\(launch.started.count) attempts are running" + (failed.isEmpty ? "" : "; not started: " + failed.joined(separator: "; ")))
    }

    struct ProjectView: Encodable {
        var id, name, host, hostID: String
        /// The agents the host has (none known when it cannot be reached).
        var agents: [AgentChoice]
        var hostError: String?
    }

    struct AgentChoice: Encodable {
        var id, name: String
    }

    /// Every project with the agents its host has, the hosts asked at once (each detection
    /// is the engine's, kept a while).
    private func projects() async throws(AgentError) -> [ProjectView] {
        let projects = try await engine.records.projects()
        let hosts = try await engine.records.hosts()
        let found = await withTaskGroup(of: (HostID, Result<AgentDetection, AgentError>).self) { group in
            for host in hosts where projects.contains(where: { $0.hostID == host.id }) {
                group.addTask { [engine] in
                    do throws(AgentError) { return (host.id, .success(try await engine.host(host.id).detectAgents())) }
                    catch { return (host.id, .failure(error)) }
                }
            }
            var out: [HostID: Result<AgentDetection, AgentError>] = [:]
            for await (id, r) in group { out[id] = r }
            return out
        }
        return projects.map { p in
            let host = hosts.first { $0.id == p.hostID }
            var agents: [AgentChoice] = []
            var error: String?
            switch found[p.hostID] {
            case .success(let d): agents = d.installedProviders.filter { d.unusable[$0.id] == nil }.map { AgentChoice(id: $0.id, name: $0.displayName) }
            case .failure(let e): error = e.message
            case nil: error = "no such host"
            }
            return ProjectView(id: p.id.rawValue, name: p.name, host: host?.displayName ?? "?", hostID: p.hostID.rawValue,
                               agents: agents, hostError: error)
        }
    }

    // MARK: landing and attempts

    struct Linked: Encodable {
        var message, url: String
    }

    struct PortView: Encodable {
        var localPort, remotePort: Int
        var message: String
    }

    struct AttemptView: Encodable {
        struct Check: Encodable {
            var passed: Bool
            var exitCode: Int?
            var timedOut: Bool
            var seconds: Double
            var output: String
        }

        var id, label, host: String
        var agent: String?
        var state: String
        var needsYou: Bool
        var archived: Bool
        var secondsToDone: Int?
        var filesChanged, linesAdded, linesRemoved: Int?
        var check: Check?
        var problem: String?

        init(_ r: AttemptComparison) {
            id = r.task.id.rawValue
            label = r.label
            host = r.hostName
            agent = r.providerID
            state = r.status?.activity.name ?? r.agent.map { BoardView.name(of: $0.record.state) } ?? "no agent"
            needsYou = r.status?.activity.needsYou ?? false
            archived = r.task.archivedAt != nil
            secondsToDone = r.timeToDone.map { Int($0.components.seconds) }
            filesChanged = r.filesChanged
            linesAdded = r.linesAdded
            linesRemoved = r.linesRemoved
            problem = r.problem?.message
            check = r.check.map { c in
                var code: Int?
                if case .exited(.exited(let n)) = c.outcome { code = Int(n) }
                let d = c.duration.components
                return Check(passed: c.passed, exitCode: code, timedOut: c.outcome == .timedOut,
                             seconds: Double(d.seconds) + Double(d.attoseconds) / 1e18, output: String(c.output.suffix(4000)))
            }
        }
    }

    static func nonEmpty(_ s: String?) -> String? {
        guard let s, !s.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { return nil }
        return s
    }
}
