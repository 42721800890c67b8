import AgentSessions
import ArgumentParser
import Foundation

struct Store: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "store",
        abstract: "Where the store is, and whether it is sound.", subcommands: [Path.self, Check.self])

    struct Path: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "path", abstract: "Print the store's file.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await Context.with(global) { context in print(context.storePath) }
        }
    }

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "check",
            abstract: "Check the store: SQLite's integrity check, the references between records, the schema version.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await Context.with(global) { context in
                let check = try await context.records.check()
                let hosts = try await context.records.hosts().count
                let projects = try await context.records.projects().count
                let tasks = try await context.records.tasks().count
                guard check.problems.isEmpty else {
                    for p in check.problems { note(p) }
                    throw Failure(.storage, "the store \(context.storePath) is damaged (\(Wording.count(check.problems.count, "problem"))); keep a copy and restore a backup")
                }
                print("ok: \(context.storePath), schema \(check.schema ?? "none"), \(Wording.count(hosts, "host")), \(Wording.count(projects, "project")), \(Wording.count(tasks, "task"))")
            }
        }
    }
}
