import AgentSessions
import AgentSessionsSQLite
import Foundation
import Testing

/// The SQLite store: records and the session map across reopening, its files' modes,
/// parents and cascades, writers on two connections at once, and the files it refuses.
@Suite("Agent store (SQLite)", .tags(.process))
struct SQLiteAgentStoreTests {
    /// A fresh directory (removed by the caller) and the store path inside a subdirectory
    /// the store has to make.
    static func place() throws -> (dir: String, path: String) {
        let dir = "/tmp/sshkit-store-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return (dir, dir + "/data/agent-sessions/store.sqlite")
    }

    static func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    static func records() -> (HostRecord, ProjectRecord, TaskRecord, ConversationRecord) {
        let host = HostRecord(name: "build-1", address: "10.0.0.5", port: 2222, user: "me",
                              authentication: .keyFiles(["~/.ssh/id_ed25519", "/keys/other"]), jumpHost: "me@bastion:22",
                              hostKeyFingerprint: "SHA256:abc", tmuxSocket: "sshkit-agents",
                              createdAt: Date(timeIntervalSince1970: 1_700_000_000.123),
                              openSSH: OpenSSHHostReference(alias: "build-1", configFile: "/etc/agents/ssh_config",
                                                            options: ["Port=2222"], allowsMatchExec: true))
        let project = ProjectRecord(hostID: host.id, name: "app", path: "~/src/app", defaultBaseRef: "main",
                                    setupCommand: "npm ci && cp .env.example .env", teardownCommand: "docker compose down", fetchesBase: false)
        let wt = Worktree(name: "fix-1", projectPath: "/home/me/src/app", path: "/home/me/src/app/.emdash/worktrees/fix-1",
                          branch: "emdash/fix-1", baseRef: "main", baseCommit: String(repeating: "b", count: 40))
        let task = TaskRecord(projectID: project.id, title: "Fix it", worktree: wt, archivedAt: Date(timeIntervalSince1970: 1_700_000_100),
                              prompt: "Fix the parser; keep the \"old\" API", port: 3107)
        let conversation = ConversationRecord(taskID: task.id, providerID: "claude", kind: .main, autoApprove: true,
                                              arguments: ["claude", "--session-id", "x y"], survivesDisconnect: true,
                                              state: .exited(3), lastStartedAt: Date(timeIntervalSince1970: 1_700_000_050.5))
        return (host, project, task, conversation)
    }

    @Test func recordsAndTheSessionMapSurviveReopeningInFilesOnlyTheUserReads() async throws {
        let (dir, path) = try Self.place()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (host, project, task, conversation) = Self.records()
        var chat = ConversationRecord(taskID: task.id, providerID: "codex", kind: .chat)
        do {
            let store = try SQLiteAgentStore(path: path)
            try await store.save(host)
            try await store.save(project)
            try await store.save(task)
            try await store.save(conversation)
            try await store.save(chat)
            chat.state = .signaled(9)
            try await store.save(chat)  // replaced, not added
            try await store.appendTerminalLog(TerminalLogRecord(conversationID: conversation.id, text: "first\nscreen"))
            try await store.appendTerminalLog(TerminalLogRecord(conversationID: conversation.id, text: "second"))
            try await store.set(AgentSessionMapEntry(providerID: "claude", workingDirectory: task.worktree.path, target: "u-1",
                                                     strategy: .claudeSessionID), for: conversation.ptyID.description)
        }
        let store = try SQLiteAgentStore(path: path)
        #expect(try await store.appliedMigrations() == ["v1", "v2-task-prompt", "v3-task-environment", "v4-host-openssh", "v5-task-attempt"])
        #expect(try await store.hosts() == [host])
        #expect(try await store.project(id: project.id) == project)
        #expect(try await store.tasks(projectID: project.id) == [task])
        #expect(try await store.conversations(taskID: task.id) == [conversation, chat].sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) })
        #expect(try await store.terminalLogs(conversationID: conversation.id).map(\.text) == ["first\nscreen", "second"])
        #expect(try await store.entries()[conversation.ptyID.description]?.target == "u-1")
        try await store.remove(conversation.ptyID.description)
        #expect(try await store.entries().isEmpty)

        #expect(try Self.mode((path as NSString).deletingLastPathComponent) == 0o700)
        #expect(try Self.mode(path) == 0o600)
        if FileManager.default.fileExists(atPath: path + "-wal") { #expect(try Self.mode(path + "-wal") == 0o600) }
        // no secret: the authentication column holds paths
        let bytes = try String(contentsOfFile: path, encoding: .isoLatin1)
        #expect(!bytes.contains("PRIVATE KEY"))
    }

    @Test func parentsAreRequiredDeletesCascadeAndHostNamesAreUnique() async throws {
        let (dir, path) = try Self.place()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SQLiteAgentStore(path: path)
        let (host, project, task, conversation) = Self.records()
        for save in [{ try await store.save(project) }, { try await store.save(task) }, { try await store.save(conversation) },
                     { try await store.appendTerminalLog(TerminalLogRecord(conversationID: "nope", text: "x")) }] as [() async throws -> Void] {
            do {
                try await save()
                Issue.record("a record without its parent was saved")
            } catch let e as AgentError {
                #expect(e.code == .notFound)
            }
        }
        try await store.save(host)
        try await store.save(project)
        try await store.save(task)
        try await store.save(conversation)
        try await store.appendTerminalLog(TerminalLogRecord(conversationID: conversation.id, text: "log"))
        // saving again updates in place: the children stay (a replace would cascade)
        var renamed = host
        renamed.hostKeyFingerprint = "SHA256:new"
        try await store.save(renamed)
        var stopped = conversation
        stopped.state = .stopped
        try await store.save(stopped)
        #expect(try await store.host(id: host.id) == renamed)
        #expect(try await store.projects(hostID: host.id) == [project])
        #expect(try await store.terminalLogs(conversationID: conversation.id).map(\.text) == ["log"])
        do {
            try await store.save(HostRecord(name: host.name, address: "elsewhere", user: "u"))
            Issue.record("two hosts with one name")
        } catch let e as AgentError {
            #expect(e.code == .invalidArgument)
        }
        try await store.deleteHost(id: host.id)
        #expect(try await store.projects(hostID: nil).isEmpty)
        #expect(try await store.tasks(projectID: nil).isEmpty)
        #expect(try await store.conversation(id: conversation.id) == nil)
        #expect(try await store.terminalLogs(conversationID: conversation.id).isEmpty)
    }

    @Test func twoWritersAtOnceLoseNothing() async throws {
        let (dir, path) = try Self.place()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // two stores on one file: two connection pools, as two processes would have
        let a = try SQLiteAgentStore(path: path)
        let b = try SQLiteAgentStore(path: path)
        let (host, project, task, _) = Self.records()
        try await a.save(host)
        try await a.save(project)
        try await a.save(task)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (i, store) in [a, b].enumerated() {
                group.addTask {
                    for n in 0..<150 {
                        let c = ConversationRecord(taskID: task.id, providerID: "claude", kind: .chat)
                        try await store.save(c)
                        try await store.appendTerminalLog(TerminalLogRecord(conversationID: c.id, text: "writer \(i) #\(n)"))
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try await b.conversations(taskID: task.id).count == 300)
        #expect(try await a.conversations(taskID: task.id).count == 300)
    }

    @Test func aNewerSchemaAndAFileThatIsNoStoreAreRefused() async throws {
        let (dir, path) = try Self.place()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try SQLiteAgentStore(path: path)
        // a later version of the tool added a migration this one does not know
        let r = try await LocalShell.run("sqlite3", [path, "INSERT INTO grdb_migrations VALUES ('v999-from-the-future')"])
        #expect(r == 0)
        do {
            _ = try SQLiteAgentStore(path: path)
            Issue.record("a store of a newer version was opened")
        } catch {
            #expect(error.code == .storage)
            #expect(error.message.contains("newer version"))
        }
        let garbage = dir + "/garbage.sqlite"
        FileManager.default.createFile(atPath: garbage, contents: Data(repeating: 0x41, count: 4096))
        do {
            _ = try SQLiteAgentStore(path: garbage)
            Issue.record("a file that is no database was opened")
        } catch {
            #expect(error.code == .storage)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: garbage)) == Data(repeating: 0x41, count: 4096), "left as it was")
    }

    @Test func theDefaultPathIsTheXDGDataDirectory() {
        #expect(SQLiteAgentStore.defaultPath(tool: "agent-sessions", environment: ["XDG_DATA_HOME": "/x/data", "HOME": "/h"])
            == "/x/data/agent-sessions/store.sqlite")
        #expect(SQLiteAgentStore.defaultPath(tool: "agent-sessions", environment: ["XDG_DATA_HOME": "relative", "HOME": "/h"])
            == "/h/.local/share/agent-sessions/store.sqlite")
        #expect(SQLiteAgentStore.defaultPath(tool: "t", environment: ["HOME": "/h"]) == "/h/.local/share/t/store.sqlite")
    }
}

/// Runs a local program; its exit status.
enum LocalShell {
    static func run(_ program: String, _ arguments: [String]) async throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = [program] + arguments
        try p.run()
        p.waitUntilExit()
        return p.terminationStatus
    }
}
