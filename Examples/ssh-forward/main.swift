// ssh-forward: port forwarding like `ssh -N -L/-R/-D/-J`, until interrupted.
//
//   ssh-forward --host bastion --user me --key ~/.ssh/id_ed25519 --fingerprint SHA256:... \
//               -L 5432:db.internal:5432 -D 1080 -R 8080:localhost:3000
//
// Prints one line per forward once it listens ("local 127.0.0.1:5432 -> db.internal:5432",
// "socks 127.0.0.1:1080", "remote localhost:8080 -> localhost:3000"), then "ready".
// Port 0 picks a free port. SIGINT or SIGTERM stops every forward and exits 0; losing
// the connection exits 255.
import ArgumentParser
import Foundation
import SSHKit

#if canImport(Glibc)
import Glibc
#endif
import ExampleSupport

@main
struct SSHForward: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ssh-forward",
        abstract: "Forward ports over SSH (-L local, -R remote, -D SOCKS), optionally through jump hosts.")

    @OptionGroup var connection: ConnectionOptions
    @Option(name: .customShort("L"), help: "[bind:]port:host:hostport or [bind:]port:/remote/socket: listen here, connect there from the server.")
    var local: [String] = []
    @Option(name: .customShort("R"), help: "[bind:]port:host:hostport: the server listens, connections come here and go to host:hostport.")
    var remote: [String] = []
    @Option(name: .customShort("D"), help: "[bind:]port: a SOCKS4/4a/5 proxy here whose connections go out from the server.")
    var dynamic: [String] = []
    @Flag(name: .shortAndLong, help: "Print each forwarded connection's events to stderr.") var verbose = false

    func run() async throws {
        guard !local.isEmpty || !remote.isEmpty || !dynamic.isEmpty else { throw ValidationError("give -L, -R or -D") }
        let config = try connection.configuration()
        var options = SSHForwardOptions()
        if verbose {
            let log: @Sendable (SSHForwardEvent) -> Void = { event in
                FileHandle.standardError.write(Data("ssh-forward: \(event)\n".utf8))
            }
            options.eventHandler = log
        }

        let conn: SSHConnection
        do {
            conn = try await SSHClient.connect(config)
        } catch {
            FileHandle.standardError.write(Data("ssh-forward: \(error)\n".utf8))
            throw ExitCode(255)
        }
        var locals: [SSHPortForward] = []
        var remotes: [SSHRemoteForward] = []
        do {
            for spec in local {
                let (bind, port, rest) = try Self.listenPart(spec, needsTarget: true)
                let target = try Self.target(rest, spec: spec)
                let f = try conn.forwardLocalPort(.tcp(host: bind ?? "127.0.0.1", port: port), to: target, options: options)
                for a in f.listenAddresses { say("local \(a) -> \(target)") }
                locals.append(f)
            }
            for spec in dynamic {
                let (bind, port, _) = try Self.listenPart(spec, needsTarget: false)
                let f = try conn.startSOCKSProxy(.tcp(host: bind ?? "127.0.0.1", port: port), options: options)
                for a in f.listenAddresses { say("socks \(a)") }
                locals.append(f)
            }
            for spec in remote {
                let (bind, port, rest) = try Self.listenPart(spec, needsTarget: true)
                let target = try Self.target(rest, spec: spec)
                let f = try await conn.forwardRemotePort(bindAddress: bind ?? "localhost", port: port, to: target, options: options)
                say("remote \(f.bindAddress):\(f.port) -> \(target)")
                remotes.append(f)
            }
        } catch let error as SSHError {
            FileHandle.standardError.write(Data("ssh-forward: \(error)\n".utf8))
            await conn.close()
            throw ExitCode(255)
        }
        say("ready")

        // run until a signal, or until the connection ends (whichever comes first; the
        // other waits are left behind: the process ends)
        let (events, continuation) = AsyncStream<String>.makeStream()
        Task { continuation.yield(await Self.nextSignal()) }
        for f in locals { Task { continuation.yield("connection: \(await f.waitUntilStopped().map { "\($0)" } ?? "stopped")") } }
        for f in remotes { Task { continuation.yield("connection: \(await f.waitUntilStopped().map { "\($0)" } ?? "stopped")") } }
        var iterator = events.makeAsyncIterator()
        let stopped = await iterator.next() ?? "signal"
        for f in locals { await f.stop() }
        for f in remotes { await f.stop() }
        let lost = !conn.isConnected
        await conn.close()
        if lost || stopped.hasPrefix("connection") {
            FileHandle.standardError.write(Data("ssh-forward: \(stopped)\n".utf8))
            throw ExitCode(255)
        }
    }

    private func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// Waits for SIGINT or SIGTERM (delivered to this task, not the default handler).
    static func nextSignal() async -> String {
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        return await withCheckedContinuation { (c: CheckedContinuation<String, Never>) in
            let once = OnceFlag()
            var sources: [DispatchSourceSignal] = []
            for sig in [SIGINT, SIGTERM] {
                let source = DispatchSource.makeSignalSource(signal: sig)
                source.setEventHandler {
                    if once.take() {
                        for s in sources { s.cancel() }
                        c.resume(returning: sig == SIGINT ? "SIGINT" : "SIGTERM")
                    }
                }
                source.resume()
                sources.append(source)
            }
        }
    }

    /// "[bind:]port" then the rest ("host:hostport" or "/path"), OpenSSH's syntax; IPv6
    /// addresses go in brackets.
    static func listenPart(_ spec: String, needsTarget: Bool) throws -> (bind: String?, port: Int, rest: String) {
        var parts: [String] = []
        var cur = ""
        var inBracket = false
        for ch in spec {
            if ch == "[" { inBracket = true; continue }
            if ch == "]" { inBracket = false; continue }
            if ch == ":" && !inBracket && !(cur.hasPrefix("/") && parts.count >= 1) {
                parts.append(cur)
                cur = ""
                continue
            }
            cur.append(ch)
        }
        parts.append(cur)
        let minimum = needsTarget ? 2 : 1
        guard parts.count >= minimum else { throw ValidationError("bad forward \(spec)") }
        // the listen port is the first numeric field that leaves enough fields for the target
        let targetFields = needsTarget ? (parts.last!.hasPrefix("/") ? 1 : 2) : 0
        let listenFields = parts.count - targetFields
        guard listenFields == 1 || listenFields == 2, let port = Int(parts[listenFields - 1]) else {
            throw ValidationError("bad forward \(spec)")
        }
        let bind = listenFields == 2 ? parts[0] : nil
        return (bind, port, parts[listenFields...].joined(separator: ":"))
    }

    static func target(_ rest: String, spec: String) throws -> SSHForwardTarget {
        if rest.hasPrefix("/") { return .unixSocket(path: rest) }
        guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]) else {
            throw ValidationError("bad target in \(spec)")
        }
        return .tcp(host: String(rest[..<colon]), port: port)
    }
}

final class OnceFlag: @unchecked Sendable {
    private var taken = false
    private let lock = NSLock()
    func take() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if taken { return false }
        taken = true
        return true
    }
}
