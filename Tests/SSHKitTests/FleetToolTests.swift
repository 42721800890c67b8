import Foundation
import SSHKit
import Testing

/// The `ssh-fleet` tool against real sshd processes, each host an ssh_config alias with
/// its own host keys in known_hosts (ToolSetup), run without a terminal.
@Suite("ssh-fleet tool", .tags(.process), .serialized)
struct FleetToolTests {
    struct Fleet {
        var servers: [TestServer]
        var setup: ToolSetup
        func stop() {
            for s in servers { s.stop() }
            setup.remove()
        }
    }

    /// Three servers as aliases h0…h2, plus `gone` (stopped: refused) and `stranger`
    /// (a server whose key known_hosts does not have).
    static func fleet() throws -> Fleet {
        var servers: [TestServer] = []
        for i in 0..<3 { servers.append(try TestServer.start(name: "fleet-tool-\(i)")) }
        let gone = try TestServer.start(name: "fleet-tool-gone")
        let stranger = try TestServer.start(name: "fleet-tool-stranger")
        var hosts = servers.enumerated().map { ToolSetup.Host(alias: "h\($0)", server: $1) }
        hosts.append(ToolSetup.Host(alias: "gone", server: gone, extra: ["ConnectTimeout 3"]))
        let setup = try ToolSetup(hosts)
        // the stranger's alias is in the config, its keys are not in known_hosts
        let extra = try ToolSetup([ToolSetup.Host(alias: "stranger", server: stranger)])
        let strangerConfig = try String(contentsOfFile: extra.config, encoding: .utf8)
            .replacingOccurrences(of: extra.dir + "/known_hosts", with: setup.knownHosts)
        try (try String(contentsOfFile: setup.config, encoding: .utf8) + strangerConfig)
            .write(toFile: setup.config, atomically: true, encoding: .utf8)
        extra.remove()
        gone.stop()
        return Fleet(servers: servers + [stranger], setup: setup)
    }

    @Test func runPrefixesOutputSummarizesFailuresAndExitsNonZero() throws {
        let f = try Self.fleet()
        defer { f.stop() }
        let r = try ToolSetup.run("ssh-fleet", ["run", "-F", f.setup.config, "-H", "h0", "-H", "h1", "-H", "h2",
                                                "-H", "gone", "-H", "stranger", "--retries", "1", "--",
                                                "echo out-$((6*7)); echo err >&2"])
        #expect(r.status == 1, "\(r)")
        for h in ["h0", "h1", "h2"] {
            #expect(r.out.contains("\(h): out-42\n"), "\(r.out)")
            #expect(r.err.contains("\(h): err\n"), "\(r.err)")
        }
        #expect(!r.out.contains("gone:") && !r.out.contains("stranger:"))
        #expect(r.err.contains("ssh-fleet: 5 hosts, 3 succeeded, 2 failed"), "\(r.err)")
        #expect(r.err.contains("  gone: connectionRefused"), "\(r.err)")
        #expect(r.err.contains("  stranger: hostKeyRejected"), "\(r.err)")
        // nothing was recorded for the stranger: nobody was asked, nothing accepted
        #expect(!f.setup.knownHostsText.contains("[127.0.0.1]:\(f.servers[3].port)"))
    }

    @Test func jsonGroupedAndTerminalOutputAndAHostsFile() throws {
        let f = try Self.fleet()
        defer { f.stop() }
        let list = f.setup.dir + "/hosts"
        try "# the build hosts\nh0\nh1   # second\n\nh2\n".write(toFile: list, atomically: true, encoding: .utf8)
        let r = try ToolSetup.run("ssh-fleet", ["run", "-F", f.setup.config, "-f", list, "--json", "--", "exit 3"])
        #expect(r.status == 1)
        let objects = r.out.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        #expect(objects.count == 3, "\(r.out)")
        #expect(Set(objects.compactMap { $0["host"] as? String }) == ["h0", "h1", "h2"])
        #expect(objects.allSatisfy { ($0["status"] as? String) == "exit 3" && ($0["ok"] as? Bool) == false })
        let g = try ToolSetup.run("ssh-fleet", ["run", "-F", f.setup.config, "-f", list, "--group", "--", "echo a; echo b"])
        #expect(g.status == 0, "\(g)")
        for h in ["h0", "h1", "h2"] { #expect(g.out.contains("== \(h): exit 0\na\nb\n"), "\(g.out)") }
        #expect(g.err.contains("3 hosts, 3 succeeded, 0 failed"))
        // without a terminal, no progress line
        #expect(!g.err.contains("\u{1B}") && !r.err.contains("\u{1B}"))

        // on a terminal (script(1) gives it one), a progress line, redrawn in place
        let tool = TestServer.packageRoot + "/.build/debug/ssh-fleet"
        let t = try TestServer.runCapturing("/usr/bin/script", [
            "-qec", "\(tool) run -F \(f.setup.config) -f \(list) -- 'sleep 0.5; echo hi'", "/dev/null",
        ], env: ToolSetup.environment([:]))
        #expect(t.status == 0, "\(t)")
        #expect(t.out.contains("\r\u{1B}[K"), "\(t.out)")
        #expect(t.out.contains(" running, "), "\(t.out)")
        #expect(t.out.contains("[3/3 done, 0 failed, 0 running, 0 waiting or connecting]"), "\(t.out)")
        #expect(t.out.contains("3 hosts, 3 succeeded, 0 failed"), "\(t.out)")
    }

    @Test func hostsFromSSHConfigPatterns() throws {
        let f = try Self.fleet()
        defer { f.stop() }
        // h0…h2, gone and stranger are Host lines; "h*,!h1" is h0 and h2, in the file's order
        let r = try ToolSetup.run("ssh-fleet", ["run", "-F", f.setup.config, "-H", "h*,!h1", "-H", "h0", "--",
                                                "echo hi"])
        #expect(r.status == 0, "\(r)")
        #expect(r.out.contains("h0: hi\n") && r.out.contains("h2: hi\n") && !r.out.contains("h1:"), "\(r.out)")
        // h0 named twice runs once
        #expect(r.out.components(separatedBy: "h0: hi").count == 2, "\(r.out)")
        #expect(r.err.contains("2 hosts, 2 succeeded, 0 failed"), "\(r.err)")
        let list = f.setup.dir + "/patterns"
        try "h?  # every h\n".write(toFile: list, atomically: true, encoding: .utf8)
        let all = try ToolSetup.run("ssh-fleet", ["run", "-F", f.setup.config, "-f", list, "--", "true"])
        #expect(all.status == 0 && all.err.contains("3 hosts, 3 succeeded"), "\(all)")
        let none = try ToolSetup.run("ssh-fleet", ["run", "-F", f.setup.config, "-H", "db*", "--", "true"])
        #expect(none.status == 255 && none.err.contains("no Host in ssh_config matches \"db*\""), "\(none)")
    }

    @Test func putAndGetCopyToAndFromEveryHost() throws {
        let f = try Self.fleet()
        defer { f.stop() }
        let local = f.setup.dir + "/app.conf"
        try "setting = 1\n".write(toFile: local, atomically: true, encoding: .utf8)
        // every server runs on this machine: one path, written by each host in turn (atomically)
        let remote = "/tmp/fleet-put-\(UInt32.random(in: 0...UInt32.max)).conf"
        let put = try ToolSetup.run("ssh-fleet", ["put", "-F", f.setup.config, "-H", "h0", "-H", "h1", local, remote])
        #expect(put.status == 0, "\(put)")
        defer { try? FileManager.default.removeItem(atPath: remote) }
        #expect((try? String(contentsOfFile: remote, encoding: .utf8)) == "setting = 1\n")
        let into = f.setup.dir + "/logs"
        let get = try ToolSetup.run("ssh-fleet", ["get", "-F", f.setup.config, "-H", "h0", "-H", "h1", remote, into])
        #expect(get.status == 0, "\(get)")
        for h in ["h0", "h1"] {
            let name = (remote as NSString).lastPathComponent
            #expect((try? String(contentsOfFile: "\(into)/\(h)/\(name)", encoding: .utf8)) == "setting = 1\n")
        }
        // a missing source is that host's failure; the bad list and bad arguments are 255
        let missing = try ToolSetup.run("ssh-fleet", ["get", "-F", f.setup.config, "-H", "h0", "no-such-file", into])
        #expect(missing.status == 1 && missing.err.contains("h0: noSuchFile"), "\(missing)")
        let none = try ToolSetup.run("ssh-fleet", ["run", "-F", f.setup.config, "--", "true"])
        #expect(none.status == 255 && none.err.contains("no hosts"), "\(none)")
        let badPort = try ToolSetup.run("ssh-fleet", ["run", "-F", f.setup.config, "-H", "h0:notaport", "--", "true"])
        #expect(badPort.status == 255, "\(badPort)")
    }
}
