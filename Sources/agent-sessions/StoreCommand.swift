import AgentSessions
import ArgumentParser
import Foundation

struct Store: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Where the store is, and whether it is sound.", subcommands: [Path.self, Check.self])

    struct Path: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the store's file.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await Context.with(global) { context in print(context.store.path) }
        }
    }

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check the store: SQLite's integrity check, the references between records, the schema version.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await Context.with(global) { context in
                let problems = try await context.store.integrityProblems()
                let migrations = try await context.store.appliedMigrations()
                let hosts = try await context.store.hosts().count
                let projects = try await context.store.projects(hostID: nil).count
                let tasks = try await context.store.tasks(projectID: nil).count
                guard problems.isEmpty else {
                    for p in problems { note(p) }
                    throw Failure(.storage, "the store \(context.store.path) is damaged (\(Wording.count(problems.count, "problem"))); keep a copy and restore a backup")
                }
                print("ok: \(context.store.path), schema \(migrations.last ?? "none"), \(Wording.count(hosts, "host")), \(Wording.count(projects, "project")), \(Wording.count(tasks, "task"))")
            }
        }
    }
}
