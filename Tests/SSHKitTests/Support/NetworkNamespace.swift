import Foundation
import Synchronization

/// A network namespace made by a test, joined to this one by a veth pair on a /30 of
/// 10.213.0.0/16: the test process keeps `hostAddress`, a server started with `exec`
/// binds to `address`. iptables rules added with `iptables` live inside the namespace
/// only, so a test can partition its own server without touching the machine's rules.
/// Deleted by `destroy()`, at exit if a test did not, and (stale ones of dead test
/// processes) the next time one is created.
final class NetworkNamespace: Sendable {
    let name: String
    let hostLink: String
    let hostAddress: String
    let address: String

    static let prefix = "sshkit-"
    private static let live = Mutex<Set<String>>([])
    private static let installed = Mutex(false)

    /// Root with `ip` and `iptables`: what the namespace tests need.
    static var available: Bool {
        getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip")
            && FileManager.default.isExecutableFile(atPath: "/usr/sbin/iptables")
    }

    static func create() throws -> NetworkNamespace {
        removeStale()
        for _ in 0..<20 {
            let tag = UInt16.random(in: 0...UInt16.max)
            let subnet = "10.213.\(tag >> 8).\((tag & 0x3f) * 4)"
            let base = subnet.split(separator: ".").map(String.init)
            let last = Int(base[3])!
            let host = "10.213.\(base[2]).\(last + 1)"
            let peer = "10.213.\(base[2]).\(last + 2)"
            // an address already on this machine (another namespace, another test run) is skipped
            let used = (try? TestServer.run("/usr/sbin/ip", ["-o", "addr", "show", "to", "\(subnet)/30"])) ?? ""
            if !used.isEmpty { continue }
            let hex = String(format: "%04x", tag)
            let ns = NetworkNamespace(name: "\(prefix)\(getpid())-\(hex)", hostLink: "sk\(hex)h",
                                      hostAddress: host, address: peer)
            try ns.setUp(peerLink: "sk\(hex)n")
            return ns
        }
        throw FixtureError("no free 10.213.x.x/30 subnet for a test namespace")
    }

    private init(name: String, hostLink: String, hostAddress: String, address: String) {
        self.name = name
        self.hostLink = hostLink
        self.hostAddress = hostAddress
        self.address = address
    }

    private func setUp(peerLink: String) throws {
        Self.register(name)
        do {
            try ip(["netns", "add", name])
            try ip(["link", "add", hostLink, "type", "veth", "peer", "name", peerLink])
            try ip(["link", "set", peerLink, "netns", name])
            try ip(["addr", "add", "\(hostAddress)/30", "dev", hostLink])
            try ip(["link", "set", hostLink, "up"])
            _ = try exec(["/usr/sbin/ip", "addr", "add", "\(address)/30", "dev", peerLink])
            _ = try exec(["/usr/sbin/ip", "link", "set", peerLink, "up"])
            _ = try exec(["/usr/sbin/ip", "link", "set", "lo", "up"])
        } catch {
            destroy()
            throw error
        }
    }

    private func ip(_ args: [String]) throws { _ = try TestServer.run("/usr/sbin/ip", args) }

    /// Runs a command inside the namespace to completion.
    @discardableResult
    func exec(_ command: [String]) throws -> String {
        try TestServer.run("/usr/sbin/ip", ["netns", "exec", name] + command)
    }

    /// Adds or deletes an iptables rule inside the namespace (e.g. `["-A", "INPUT", "-j", "DROP"]`).
    func iptables(_ rule: [String]) throws {
        try exec(["/usr/sbin/iptables", "-w", "5"] + rule)
    }

    /// Kills what still runs inside (sshd session processes whose client vanished behind
    /// a DROP rule would otherwise live on in the unnamed namespace), then deletes it; its
    /// end of the veth pair goes with it, which deletes ours.
    func destroy() {
        let pids = (try? TestServer.run("/usr/sbin/ip", ["netns", "pids", name])) ?? ""
        for pid in pids.split(separator: "\n").compactMap({ Int32($0) }) { kill(pid, SIGKILL) }
        Self.delete(name, hostLink: hostLink)
        Self.live.withLock { _ = $0.remove(name) }
    }

    private static func delete(_ name: String, hostLink: String?) {
        _ = try? TestServer.runCapturing("/usr/sbin/ip", ["netns", "delete", name])
        if let hostLink { _ = try? TestServer.runCapturing("/usr/sbin/ip", ["link", "delete", hostLink]) }
    }

    private static func register(_ name: String) {
        live.withLock { _ = $0.insert(name) }
        installed.withLock { done in
            if done { return }
            done = true
            atexit {
                for name in NetworkNamespace.live.withLock({ $0 }) { NetworkNamespace.delete(name, hostLink: nil) }
            }
        }
    }

    /// Namespaces left by test processes that no longer run (killed mid-test).
    private static func removeStale() {
        let list = (try? TestServer.run("/usr/sbin/ip", ["netns", "list"])) ?? ""
        for line in list.split(separator: "\n") {
            let name = String(line.split(separator: " ").first ?? "")
            guard name.hasPrefix(prefix), let pid = Int32(name.dropFirst(prefix.count).split(separator: "-").first ?? "")
            else { continue }
            if pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH { delete(name, hostLink: nil) }
        }
    }
}
