import Foundation
import SSHKit
import Testing

/// Every field `SSHHostConfig` resolves, compared with what the system's `ssh -G`
/// (OpenSSH 9.2p1) prints for the same files and host.
@Suite("ssh_config: conformance with ssh -G", .tags(.pure))
struct OpenSSHConfigConformanceTests {
    /// The keywords `SSHHostConfig.sshGLines` prints.
    static let compared: Set<String> = [
        "user", "hostname", "port", "batchmode", "controlmaster", "hashknownhosts", "identitiesonly", "requesttty",
        "stricthostkeychecking", "serveralivecountmax", "serveraliveinterval", "ciphers", "controlpath",
        "hostkeyalgorithms", "hostkeyalias", "identityagent", "kexalgorithms", "macs", "pubkeyacceptedalgorithms",
        "dynamicforward", "localforward", "remoteforward", "identityfile", "certificatefile", "globalknownhostsfile",
        "userknownhostsfile", "sendenv", "setenv", "forwardagent", "connecttimeout", "controlpersist", "proxycommand",
        "proxyjump",
    ]

    /// `keyword value` lines as keyword → values in order, for the compared keywords.
    static func table(_ lines: [String]) -> [String: [String]] {
        var out: [String: [String]] = [:]
        for line in lines {
            let parts = line.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
            let key = String(parts[0])
            guard compared.contains(key) else { continue }
            out[key, default: []].append(parts.count > 1 ? String(parts[1]) : "")
        }
        return out
    }

    static func write(_ c: SSHConfigCase) throws -> (dir: String, main: String) {
        let dir = try TestPaths.makeTemporaryDirectory("sshconfig")
        for (name, text) in c.files {
            let path = dir + "/" + name
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            try text.replacingOccurrences(of: "@DIR@", with: dir).write(toFile: path, atomically: true, encoding: .utf8)
            chmod(path, 0o644)
        }
        return (dir, dir + "/" + c.files[0].0)
    }

    static func sshG(_ file: String, _ host: String, env: [String: String]) throws -> (status: Int32, lines: [String], err: String) {
        let r = try TestServer.runCapturing("/usr/bin/ssh", ["-G", "-F", file, host], env: env)
        return (r.status, r.out.split(separator: "\n").map(String.init), r.err)
    }

    static func context(_ env: [String: String]) -> OpenSSHConfig.Context {
        var c = OpenSSHConfig.Context.current
        c.environment.merge(env) { $1 }
        return c
    }

    @Test(arguments: SSHConfigCorpus.cases)
    func everyResolvedFieldAgreesWithSSHG(_ c: SSHConfigCase) throws {
        let (dir, main) = try Self.write(c)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let config = OpenSSHConfig(configFile: main, context: Self.context(c.environment), allowsMatchExec: true)
        var compared = 0
        for host in c.hosts {
            let expected = try Self.sshG(main, host, env: c.environment)
            #expect(expected.status == 0, "ssh -G \(host): \(expected.err)")
            guard expected.status == 0 else { continue }
            let ours: SSHHostConfig
            do {
                ours = try config.resolve(host)
            } catch {
                Issue.record("\(c.name), \(host): ssh -G accepts it, we threw \(error)")
                continue
            }
            let want = Self.table(expected.lines)
            let got = Self.table(ours.sshGLines)
            for key in Self.compared.sorted() {
                #expect(got[key] == want[key], "\(c.name), host \(host), \(key): ours \(got[key] ?? []) ssh -G \(want[key] ?? [])")
                compared += 1
            }
        }
        #expect(compared == c.hosts.count * Self.compared.count)
    }

    @Test(arguments: SSHConfigCorpus.refused.map(\.name))
    func whatSSHRefusesIsATypedErrorOnTheSameLine(_ name: String) throws {
        let item = SSHConfigCorpus.refused.first { $0.name == name }!
        let c = SSHConfigCase(name: name, files: [("main.conf", item.config)], hosts: ["x"])
        let (dir, main) = try Self.write(c)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let expected = try Self.sshG(main, "x", env: [:])
        #expect(expected.status == 255, "ssh -G accepted \(name): \(expected.lines.prefix(3))")
        #expect(expected.err.contains("line \(item.line)"), "\(expected.err)")
        do {
            _ = try OpenSSHConfig(configFile: main).resolve("x")
            Issue.record("\(name): resolved, but ssh -G refuses it: \(expected.err)")
        } catch {
            #expect(error.file == main, "\(error)")
            #expect(error.line == item.line, "\(error)")
        }
    }
}
