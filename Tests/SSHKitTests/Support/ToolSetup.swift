import Foundation

/// An OpenSSH setup for fixture servers, as a user of the ssh-like example tools has
/// one: an ssh_config with a `Host` alias per server (its address, port, user and key)
/// and a known_hosts file with the servers' host keys, in a directory of its own.
struct ToolSetup {
    struct Host {
        var alias: String
        var server: TestServer
        /// nil: no key (`IdentityFile` names a missing file, so nothing is offered)
        var key: String? = "id_ed25519"
        /// The address the client uses (a jump host's target: its own loopback).
        var hostName: String? = nil
        var extra: [String] = []
    }

    let dir: String
    var config: String { dir + "/config" }
    var knownHosts: String { dir + "/known_hosts" }

    /// - Parameter trusted: whether known_hosts starts with the servers' keys.
    init(_ hosts: [Host], trusted: Bool = true, global: [String] = []) throws {
        dir = try TestPaths.makeTemporaryDirectory("tools")
        var lines = global
        var known: [String] = []
        for h in hosts {
            let name = h.hostName ?? h.server.host
            lines += ["Host \(h.alias)", "  HostName \(name)", "  Port \(h.server.port)", "  User \(h.server.user)",
                      "  IdentityFile \(h.key.map { h.server.key($0) } ?? dir + "/no-such-key")",
                      "  IdentitiesOnly yes", "  UserKnownHostsFile \(dir)/known_hosts",
                      "  GlobalKnownHostsFile /dev/null"]
            lines += h.extra.map { "  " + $0 }
            for kind in ["ed25519", "ecdsa", "rsa"] {
                let pub = try String(contentsOfFile: h.server.key("host_\(kind).pub"), encoding: .utf8)
                known.append("[\(name)]:\(h.server.port) " + pub.trimmingCharacters(in: .whitespacesAndNewlines))
            }
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: config, atomically: true, encoding: .utf8)
        try (trusted ? known.joined(separator: "\n") + "\n" : "").write(toFile: knownHosts, atomically: true, encoding: .utf8)
    }

    init(_ server: TestServer, alias: String = "fixture", key: String? = "id_ed25519", extra: [String] = [],
         trusted: Bool = true) throws
    {
        try self.init([Host(alias: alias, server: server, key: key, extra: extra)], trusted: trusted)
    }

    func remove() { try? FileManager.default.removeItem(atPath: dir) }

    var knownHostsText: String { (try? String(contentsOfFile: knownHosts, encoding: .utf8)) ?? "" }

    /// A program that answers every prompt with `answer`, for `SSH_ASKPASS`; the
    /// prompts it was shown go to `askpass.log` beside it.
    func askpass(answering answer: String) throws -> [String: String] {
        let path = dir + "/askpass-\(UUID().uuidString.prefix(6))"
        try "#!/bin/sh\nprintf '%s\\n' \"$1\" >> \(dir)/askpass.log\nprintf '%s\\n' '\(answer)'\n"
            .write(toFile: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
        return ["SSH_ASKPASS": path, "SSH_ASKPASS_REQUIRE": "force"]
    }

    var askpassLog: String { (try? String(contentsOfFile: dir + "/askpass.log", encoding: .utf8)) ?? "" }

    /// The environment of a tool run: no agent, no askpass, unless `env` gives them.
    static func environment(_ env: [String: String]) -> [String: String] {
        ["SSH_AUTH_SOCK": "", "SSH_ASKPASS": "", "SSH_ASKPASS_REQUIRE": ""].merging(env) { $1 }
    }

    /// Runs a tool without a controlling terminal (`setsid`), as from cron or CI:
    /// nobody can be asked anything there.
    static func run(_ tool: String, _ args: [String], env: [String: String] = [:]) throws
        -> (status: Int32, out: String, err: String)
    {
        try TestServer.runCapturing("/usr/bin/setsid", ["-w", TestServer.packageRoot + "/.build/debug/" + tool] + args,
                                    env: environment(env))
    }
}
