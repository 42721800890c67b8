// agent-store-writer <store path> <name prefix> <count>
//
// Writes `count` hosts, each with a project, a task and a conversation, into the store,
// and prints each host's name once all four records are saved (acknowledged). The
// store's crash test kills it with SIGKILL mid-write and checks every acknowledged
// record is still there.
import AgentSessions
import AgentSessionsSQLite
import Foundation

let args = CommandLine.arguments
guard args.count == 4, let count = Int(args[3]) else {
    FileHandle.standardError.write(Data("usage: agent-store-writer <store> <prefix> <count>\n".utf8))
    exit(64)
}
do {
    let store = try SQLiteAgentStore(path: args[1])
    for i in 0..<count {
        let name = "\(args[2])-\(i)"
        let host = HostRecord(name: name, address: "127.0.0.1", port: 22, user: "u", authentication: .sshAgent)
        try await store.save(host)
        let project = ProjectRecord(hostID: host.id, name: "p", path: "/srv/p")
        try await store.save(project)
        let worktree = Worktree(name: "w", projectPath: "/srv/p", path: "/srv/p/.emdash/worktrees/w", branch: "emdash/w",
                                baseRef: "main", baseCommit: String(repeating: "0", count: 40))
        let task = TaskRecord(projectID: project.id, title: "t \(i)", worktree: worktree)
        try await store.save(task)
        try await store.save(ConversationRecord(taskID: task.id, providerID: "claude", kind: .main))
        print(name)
        fflush(nil)
    }
} catch {
    FileHandle.standardError.write(Data("agent-store-writer: \(error)\n".utf8))
    exit(1)
}
