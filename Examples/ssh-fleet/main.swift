// ssh-fleet: one command, upload or download on many hosts at once (SSHFleet), like
// pssh or `xargs -P ssh`, within limits that keep the hosts' sshd safe.
//
//   ssh-fleet run -f hosts.txt -- uname -a          (one host per line: [user@]host[:port] or an alias)
//   ssh-fleet run -H web1 -H web2 --group -- df -h /
//   ssh-fleet run -H 'web*,!web3' -- uptime              (the Host names in ssh_config it matches)
//   ssh-fleet put -f hosts.txt app.conf /etc/app/app.conf
//   ssh-fleet get -f hosts.txt /var/log/app.log ./logs     (./logs/<host>/app.log)
import ArgumentParser
import CBuildInfo
import ExampleSupport
import Foundation
import SSHKit

@main
struct SSHFleetTool: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ssh-fleet",
        abstract: "Run a command, an upload or a download on many hosts at once.",
        discussion: """
            Hosts come from -H (repeatable) and -f (a file, one per line, # comments), as \
            [user@]host[:port], an ssh_config alias, or a pattern list ('web*,!web3') that stands for \
            the names ssh_config's Host lines declare and it matches; ~/.ssh/config (or -F) and its known_hosts \
            files apply to each, as for ssh. Nobody is asked anything: an unknown host key fails that \
            host (as under BatchMode), it is never accepted. Exit status: 0 when every host succeeded \
            (a command exited 0), 1 when one did not, 255 for a bad configuration or host list.
            """,
        version: String(cString: sshkit_build_version_line()),
        subcommands: [Run.self, Put.self, Get.self])
}

/// What every subcommand takes: the hosts, the limits, the output form, ssh's options.
struct FleetArguments: ParsableArguments {
    @Option(name: .customShort("H"), help: ArgumentHelp("A host ([user@]host[:port], an alias, or a pattern over ssh_config's Host names); repeatable.",
                                                        valueName: "host"))
    var hosts: [String] = []
    @Option(name: .customShort("f"), help: ArgumentHelp("A file of hosts, one per line.", valueName: "file"))
    var hostsFile: String?
    @Option(name: .customLong("parallel"), help: "Hosts worked on at once.")
    var parallel = 32
    @Option(name: .customLong("handshakes"), help: "Key exchanges at once, across all hosts (keep below MaxStartups).")
    var handshakes = 8
    @Option(name: .customLong("rate"), help: "At most this many new connections per second.")
    var rate: Double?
    @Option(name: .customShort("t"), help: ArgumentHelp("Seconds one host may take, connecting included.",
                                                        valueName: "seconds"))
    var timeout: Double?
    @Option(name: .customLong("retries"), help: "Connection attempts after a failed one (never for a started command).")
    var retries = 2
    @Flag(name: .customLong("json"), help: "One JSON object per host on stdout, as each finishes.")
    var json = false
    @Flag(name: .customLong("group"), help: "Print each host's output in one block when it finishes.")
    var group = false
    @OptionGroup var ssh: SSHToolOptions
    @Option(name: .customShort("l"), help: ArgumentHelp("User to log in as, where the host does not say.",
                                                        valueName: "login_name"))
    var login: String?

    /// The hosts, resolved through ssh_config; exits 255 on a bad list or configuration.
    func fleet() throws -> SSHFleet {
        var names = hosts
        if let hostsFile {
            guard let text = try? String(contentsOfFile: hostsFile, encoding: .utf8) else {
                FileHandle.standardError.write(Data("ssh-fleet: cannot read \(hostsFile)\n".utf8))
                throw ExitCode(255)
            }
            for line in text.split(separator: "\n") {
                let entry = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
                    .trimmingCharacters(in: .whitespaces)
                if !entry.isEmpty { names.append(entry) }
            }
        }
        names = try expandingPatterns(names)
        guard !names.isEmpty else {
            FileHandle.standardError.write(Data("ssh-fleet: no hosts (-H or -f)\n".utf8))
            throw ExitCode(255)
        }
        var fleetHosts: [SSHFleetHost] = []
        for name in names {
            let destination: SSHDestination
            do {
                destination = try SSHDestination(hostAndPort: name)
            } catch {
                FileHandle.standardError.write(Data("ssh-fleet: bad host \"\(name)\": \(error)\n".utf8))
                throw ExitCode(255)
            }
            let resolved = try SSHToolConnection(tool: "ssh-fleet", options: ssh, destination: destination,
                                                 login: login, asks: false)
            fleetHosts.append(SSHFleetHost(resolved.configuration, name: name))
        }
        do {
            return try SSHFleet(hosts: fleetHosts, options: SSHFleetOptions(
                maxConcurrentOperations: parallel, maxConcurrentHandshakes: handshakes, handshakesPerSecond: rate,
                hostTimeout: timeout.map { .milliseconds(Int64($0 * 1000)) }, connectRetries: retries))
        } catch {
            FileHandle.standardError.write(Data("ssh-fleet: \(error.message)\n".utf8))
            throw ExitCode(255)
        }
    }

    /// Each entry with `*` or `?` is a pattern list (`web*,!web3`) and stands for the
    /// hosts ssh_config's `Host` lines name that it matches; the rest stay as they are.
    /// Each host once, in order. Exits 255 when a pattern matches none.
    func expandingPatterns(_ entries: [String]) throws -> [String] {
        var out: [String] = [], seen: Set<String> = []
        for entry in entries {
            guard entry.contains(where: { $0 == "*" || $0 == "?" }) else {
                if seen.insert(entry).inserted { out.append(entry) }
                continue
            }
            let matches: [String]
            do throws(SSHConfigError) {
                matches = try OpenSSHConfig(configFile: ssh.configFile).declaredHosts(matching: entry)
            } catch {
                FileHandle.standardError.write(Data("ssh-fleet: \(error)\n".utf8))
                throw ExitCode(255)
            }
            guard !matches.isEmpty else {
                FileHandle.standardError.write(Data("ssh-fleet: no Host in ssh_config matches \"\(entry)\"\n".utf8))
                throw ExitCode(255)
            }
            for name in matches where seen.insert(name).inserted { out.append(name) }
        }
        return out
    }
}

extension SSHDestination {
    /// `[user@]host[:port]` (an IPv6 address in brackets), or an ssh_config alias.
    init(hostAndPort text: String) throws {
        if text.hasPrefix("ssh://") {
            try self.init(parsing: text)
            return
        }
        var rest = Substring(text)
        var user: String?
        if let at = rest.lastIndex(of: "@") {
            user = String(rest[..<at])
            rest = rest[rest.index(after: at)...]
        }
        var port: Int?
        if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") {
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") { port = Int(after.dropFirst()) }
            rest = rest[rest.index(after: rest.startIndex)..<close]
        } else if let colon = rest.lastIndex(of: ":"), rest.firstIndex(of: ":") == colon {
            port = Int(rest[rest.index(after: colon)...])
            guard port != nil else { throw ValidationError("bad port in \(text)") }
            rest = rest[..<colon]
        }
        guard !rest.isEmpty, user?.isEmpty != true else { throw ValidationError("bad host \(text)") }
        self.init(user: user, host: String(rest), port: port)
    }
}

/// Prints results as hosts finish: prefixed lines or blocks, a progress line on a
/// terminal, JSON lines, and the summary; returns the exit status.
final class FleetReport: @unchecked Sendable {
    private let lock = NSLock()
    private let json: Bool
    private let group: Bool
    private let total: Int
    private var done = 0
    /// Hosts connected and working (not those waiting or connecting).
    private var running: Set<String> = []
    private var failures: [(host: String, reason: String)] = []
    private let progress = isatty(2) == 1

    init(total: Int, json: Bool, group: Bool) {
        self.total = total
        self.json = json
        self.group = group
    }

    private func write(_ fd: Int32, _ text: String) {
        let handle = fd == 1 ? FileHandle.standardOutput : FileHandle.standardError
        handle.write(Data(text.utf8))
    }

    private func clearProgress() { if progress && !json { write(2, "\r\u{1B}[K") } }

    private func showProgress() {
        guard progress && !json else { return }
        write(2, "[\(done)/\(total) done, \(failures.count) failed, \(running.count) running, "
            + "\(total - done - running.count) waiting or connecting]")
    }

    /// A host is connected and its operation starts.
    func started(_ host: String) {
        lock.lock()
        defer { lock.unlock() }
        running.insert(host)
        clearProgress()
        showProgress()
    }

    /// Output lines of a running host (prefixed mode only).
    func lines(_ host: String, _ text: String, stderr: Bool) {
        guard !json && !group else { return }
        lock.lock()
        defer { lock.unlock() }
        clearProgress()
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast(text.hasSuffix("\n") ? 1 : 0) {
            write(stderr ? 2 : 1, "\(host): \(line)\n")
        }
        showProgress()
    }

    /// A host's result; `output` is what `--group` and `--json` print.
    func finished(_ host: String, ok: Bool, status: String, reason: String?, stdout: String, stderr: String,
                  attempts: Int, seconds: Double) {
        lock.lock()
        defer { lock.unlock() }
        done += 1
        running.remove(host)
        if !ok { failures.append((host, reason ?? status)) }
        clearProgress()
        if json {
            var object: [String: Any] = ["host": host, "ok": ok, "status": status, "attempts": attempts,
                                         "seconds": (seconds * 1000).rounded() / 1000]
            if let reason { object["error"] = reason }
            if !stdout.isEmpty { object["stdout"] = stdout }
            if !stderr.isEmpty { object["stderr"] = stderr }
            if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) {
                write(1, String(decoding: data, as: UTF8.self) + "\n")
            }
        } else if group {
            write(1, "== \(host): \(ok ? status : (reason ?? status))\n" + stdout)
            if !stdout.isEmpty && !stdout.hasSuffix("\n") { write(1, "\n") }
            if !stderr.isEmpty { write(2, stderr.hasSuffix("\n") ? stderr : stderr + "\n") }
        } else if !ok {
            write(2, "\(host): \(reason ?? status)\n")
        }
        showProgress()
    }

    /// A host's result, whatever the operation: `describe` says what its value means.
    func finished<Value>(_ r: SSHFleetResult<Value>,
                         _ describe: (Value) -> (ok: Bool, status: String, stdout: String, stderr: String)) {
        let seconds = Double(r.duration.components.seconds) + Double(r.duration.components.attoseconds) / 1e18
        switch r.outcome {
        case .success(let value):
            let d = describe(value)
            finished(r.host, ok: d.ok, status: d.status, reason: nil, stdout: d.stdout, stderr: d.stderr,
                     attempts: r.connectAttempts, seconds: seconds)
        case .failure(let e):
            finished(r.host, ok: false, status: "failed", reason: "\(e.code): \(e.message)", stdout: "", stderr: "",
                     attempts: r.connectAttempts, seconds: seconds)
        }
    }

    /// Reports the results of a file transfer (each the bytes moved), closes the fleet
    /// and exits with the summary's status.
    static func transfer(_ fleet: SSHFleet, _ arguments: FleetArguments,
                         _ start: (FleetReport) -> AsyncStream<SSHFleetResult<UInt64>>) async throws -> Never
    {
        let report = FleetReport(total: fleet.hosts.count, json: arguments.json, group: arguments.group)
        for await r in start(report) {
            report.finished(r) { bytes in (true, "\(bytes) bytes", "", "") }
        }
        await fleet.close()
        throw ExitCode(report.summary())
    }

    /// The summary on stderr; 0 when every host succeeded, else 1.
    func summary() -> Int32 {
        lock.lock()
        defer { lock.unlock() }
        clearProgress()
        if !json {
            write(2, "ssh-fleet: \(total) hosts, \(total - failures.count) succeeded, \(failures.count) failed\n")
            for f in failures.sorted(by: { $0.host < $1.host }) { write(2, "  \(f.host): \(f.reason)\n") }
        }
        return failures.isEmpty ? 0 : 1
    }
}

extension SSHExitStatus {
    var label: String {
        switch self {
        case .exited(let n): "exit \(n)"
        case .signaled(let name, _): "killed by SIG\(name)"
        case .unknown: "no exit status"
        }
    }
}

extension SSHFleetTool {
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Run a command on every host.")
        @OptionGroup var fleet: FleetArguments
        @Argument(parsing: .remaining, help: "The command, run by each host's login shell (after --).")
        var command: [String] = []

        func run() async throws {
            signal(SIGPIPE, SIG_IGN)
            let words = command.first == "--" ? Array(command.dropFirst()) : command
            guard !words.isEmpty else { throw ValidationError("no command") }
            let line = words.joined(separator: " ")
            let f = try fleet.fleet()
            let report = FleetReport(total: f.hosts.count, json: fleet.json, group: fleet.group)
            // output lines as they come, prefixed by the host (kept whole for --group and --json)
            let results = f.run { host, conn throws(SSHError) -> (SSHExitStatus, String, String) in
                report.started(host.name)
                let cmd = try await conn.startCommand(line)
                var out = "", err = "", pending = ["", ""]
                for try await chunk in cmd.mergedOutput {
                    let (i, text): (Int, String) = switch chunk {
                    case .stdout(let b): (0, String(decoding: b, as: UTF8.self))
                    case .stderr(let b): (1, String(decoding: b, as: UTF8.self))
                    }
                    if i == 0 { out += text } else { err += text }
                    pending[i] += text
                    if let last = pending[i].lastIndex(of: "\n") {
                        report.lines(host.name, String(pending[i][...last]), stderr: i == 1)
                        pending[i] = String(pending[i][pending[i].index(after: last)...])
                    }
                }
                for i in 0..<2 where !pending[i].isEmpty { report.lines(host.name, pending[i] + "\n", stderr: i == 1) }
                return (try await cmd.exitStatus(), out, err)
            }
            for await r in results {
                report.finished(r) { status, out, err in (status == .exited(0), status.label, out, err) }
            }
            await f.close()
            throw ExitCode(report.summary())
        }
    }

    struct Put: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Upload a file to every host (atomically).")
        @OptionGroup var fleet: FleetArguments
        @Argument(help: "The local file.") var local: String
        @Argument(help: "The path on each host.") var remote: String

        func run() async throws {
            guard FileManager.default.isReadableFile(atPath: local) else {
                FileHandle.standardError.write(Data("ssh-fleet: cannot read \(local)\n".utf8))
                throw ExitCode(255)
            }
            let f = try fleet.fleet()
            let (local, remote) = (local, remote)
            try await FleetReport.transfer(f, fleet) { report in
                f.run { host, conn throws(SSHError) -> UInt64 in
                    report.started(host.name)
                    let sftp = try await conn.openSFTP()
                    defer { sftp.close() }
                    return try await sftp.upload(local, to: SFTPPath(remote))
                }
            }
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Download a file from every host into <directory>/<host>/<name>.")
        @OptionGroup var fleet: FleetArguments
        @Argument(help: "The path on each host.") var remote: String
        @Argument(help: "The local directory (created).") var directory: String

        func run() async throws {
            let f = try fleet.fleet()
            let name = (remote as NSString).lastPathComponent
            let directory = directory
            try await FleetReport.transfer(f, fleet) { report in
                f.download(SFTPPath(remote)) { host throws(SSHError) -> String in
                    report.started(host.name)
                    // the host's name as given (an alias or an address) names its directory
                    let dir = directory + "/" + host.name.replacingOccurrences(of: "/", with: "_")
                    do {
                        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
                    } catch {
                        throw SSHError(.localFileError, "cannot create \(dir): \(error)")
                    }
                    return dir + "/" + name
                }
            }
        }
    }
}
