import ArgumentParser
import Foundation

/// `service install|remove NAME`: the tool's long-running commands as systemd user units.
struct Service: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "service",
        abstract: "Run a long-running command (watch, serve) as a systemd user service, started at login and restarted when it fails.",
        discussion: """
            install writes ~/.config/systemd/user/agent-sessions-NAME.service ($XDG_CONFIG_HOME when set), with this binary's path and the --store and --config given here, then enables and starts it (systemctl --user enable --now). remove stops and disables it and removes the unit. A user's services run while the user is logged in; to keep them running after logout (on an always-on machine), run loginctl enable-linger once.

            The unit's command runs without a terminal: use notification channels that need none (desktop, ntfy, webhook, command), and a key that needs no passphrase there (ssh-agent, or a key without one).
            """,
        subcommands: [ServiceInstall.self, ServiceRemove.self])

    /// The commands that can run as a service.
    static let names = ["watch", "serve"]

    /// What each service is, for its unit's description.
    static let descriptions = ["watch": "notifications from every host",
                               "serve": "the board and the agents' terminals for phones and browsers"]

    static func check(_ name: String) throws {
        guard names.contains(name) else {
            throw Failure.usage("no service is called \(name) (\(names.joined(separator: ", ")))")
        }
    }

    static func unitName(_ name: String) -> String { "agent-sessions-\(name).service" }

    static func unitDirectory(_ environment: [String: String]) -> String {
        let config = environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? (environment["HOME"] ?? NSHomeDirectory()) + "/.config"
        return config + "/systemd/user"
    }

    /// The unit of `name`, running `binary` with the global options given.
    static func unit(_ name: String, binary: String, global: GlobalOptions) -> String {
        var command = [binary, name]
        if let store = global.storePath { command += ["--store", absolute(store)] }
        if let config = global.configPath { command += ["--config", absolute(config)] }
        return """
            [Unit]
            Description=agent-sessions \(name): \(descriptions[name] ?? name)
            After=network-online.target
            Wants=network-online.target

            [Service]
            ExecStart=\(command.map(systemdQuoted).joined(separator: " "))
            Restart=on-failure
            RestartSec=10

            [Install]
            WantedBy=default.target

            """
    }

    static func absolute(_ path: String) -> String {
        let expanded = (path as NSString).expandingTildeInPath
        return expanded.hasPrefix("/") ? expanded : FileManager.default.currentDirectoryPath + "/" + expanded
    }

    /// A word of ExecStart: double-quoted when it holds a space, a quote or a backslash, `%`
    /// doubled (systemd's specifier character).
    static func systemdQuoted(_ word: String) -> String {
        let escaped = word.replacingOccurrences(of: "%", with: "%%")
        guard escaped.contains(where: { $0 == " " || $0 == "\"" || $0 == "\\" || $0 == "'" }) else { return escaped }
        return "\"" + escaped.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    /// This process's binary, as the unit must name it.
    static func binaryPath() -> String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? absolute(CommandLine.arguments[0])
    }

    /// Runs `systemctl --user ARGS`; nil when it worked, else what it said.
    static func systemctl(_ arguments: [String]) -> String? {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["systemctl", "--user"] + arguments
        let err = Pipe()
        p.standardOutput = FileHandle.nullDevice
        p.standardError = err
        do { try p.run() } catch { return "systemctl could not be run: \(error.localizedDescription)" }
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        guard p.terminationStatus != 0 else { return nil }
        let said = Failure.oneLine(text)
        return said.isEmpty ? "systemctl --user \(arguments.joined(separator: " ")) exited \(p.terminationStatus)" : said
    }

    /// Whether the user's services run without a login (`loginctl enable-linger`).
    static func lingers(_ environment: [String: String]) -> Bool {
        let user = environment["USER"] ?? NSUserName()
        return FileManager.default.fileExists(atPath: "/var/lib/systemd/linger/\(user)")
    }
}

struct ServiceInstall: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "install", abstract: "Write, enable and start the user unit of a command (watch, serve).")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The command: watch or serve.") var name: String
    @Flag(help: "Write the unit only; enable and start nothing.") var noStart = false

    func run() async throws {
        try await running {
            try Service.check(name)
            let environment = ProcessInfo.processInfo.environment
            let dir = Service.unitDirectory(environment)
            let path = dir + "/" + Service.unitName(name)
            let text = Service.unit(name, binary: Service.binaryPath(), global: global)
            do {
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
                // through a file beside it and a rename: never half a unit
                let temporary = path + ".tmp"
                try Data(text.utf8).write(to: URL(fileURLWithPath: temporary))
                guard rename(temporary, path) == 0 else {
                    let why = String(cString: strerror(errno))
                    try? FileManager.default.removeItem(atPath: temporary)
                    throw Failure(.storage, "cannot write \(path): \(why)")
                }
            } catch let f as Failure {
                throw f
            } catch {
                throw Failure(.storage, "cannot write \(path): \(error.localizedDescription)")
            }
            print("wrote \(path)")
            if noStart {
                print("start it with: systemctl --user daemon-reload && systemctl --user enable --now \(Service.unitName(name))")
            } else {
                if let problem = Service.systemctl(["daemon-reload"]) ?? Service.systemctl(["enable", "--now", Service.unitName(name)]) {
                    throw Failure(.failed, "the unit is written, but systemd's user manager did not start it (\(problem)); "
                        + "in a login session: systemctl --user daemon-reload && systemctl --user enable --now \(Service.unitName(name))")
                }
                print("enabled and started \(Service.unitName(name)); its log: journalctl --user -u \(Service.unitName(name))")
            }
            if !Service.lingers(environment) {
                note("note: it runs while you are logged in; to keep it running after you log out: loginctl enable-linger \(environment["USER"] ?? NSUserName())")
            }
        }
    }
}

struct ServiceRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Stop, disable and remove the user unit of a command (watch, serve).")
    @Argument(help: "The command: watch or serve.") var name: String

    func run() async throws {
        try await running {
            try Service.check(name)
            let path = Service.unitDirectory(ProcessInfo.processInfo.environment) + "/" + Service.unitName(name)
            guard FileManager.default.fileExists(atPath: path) else {
                throw Failure.notFound("\(Service.unitName(name)) is not installed (no \(path))")
            }
            // stopped first where a user manager runs; the unit goes either way
            let stopped = Service.systemctl(["disable", "--now", Service.unitName(name)])
            do {
                try FileManager.default.removeItem(atPath: path)
            } catch {
                throw Failure(.storage, "cannot remove \(path): \(error.localizedDescription)")
            }
            _ = Service.systemctl(["daemon-reload"])
            if let stopped { note("note: systemd's user manager did not stop it (\(stopped)); the unit is removed") }
            print("removed \(path)")
        }
    }
}
