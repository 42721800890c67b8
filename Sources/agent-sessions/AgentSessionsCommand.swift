// agent-sessions: coding agents in git worktrees inside tmux on your build servers, over SSH.
//
//   agent-sessions hosts add build-1 me@build-1.example.com --key ~/.ssh/id_ed25519
//   agent-sessions projects add build-1 ~/src/app
//   agent-sessions tasks new app "Fix the flaky test" --agent claude --prompt "..."
//   agent-sessions attach fix-the-flaky-test      (a task by its title's slug, id prefix or title)
//   agent-sessions status --watch
//   agent-sessions                                (the cockpit: every agent on every host, live)
//
// Records live in a local SQLite store (see --store); nothing secret is kept there.
import ArgumentParser
import CBuildInfo

@main
struct AgentSessionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent-sessions",
        abstract: "Run coding agents in git worktrees inside tmux sessions on your hosts, over SSH.",
        discussion: """
            A host is a machine you reach over SSH; a project a git checkout on it; a task a new worktree and branch with an agent working in it, in a tmux session that outlives this command and your connection. Attach to watch or type, detach and come back later.

            Tasks are named by their id (any 4 or more of its first characters), title, title as a slug (fix-the-flaky-test) or worktree name.

            \(Exit.table)
            """,
        version: String(cString: sshkit_build_version_line()),
        subcommands: [CockpitCommand.self, Hosts.self, Projects.self, Agents.self, Tasks.self, Chats.self, Attach.self, Send.self, Queue.self,
                      Open.self, Log.self, Diff.self, Status.self, Watch.self, Events.self, Orphans.self, Store.self, Service.self, MCPCommand.self, ServeCommand.self])

    /// No subcommand: the cockpit on a terminal, the board when piped.
    func run() async throws {
        try await CockpitCommand.open(try GlobalOptions.parse([]))
    }
}
