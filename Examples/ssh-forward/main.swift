// ssh-forward: port forwarding like `ssh -N -L/-R/-D`, until interrupted.
//
//   ssh-forward -L 5432:db.internal:5432 -D 1080 -R 8080:localhost:3000 bastion
//
// The forwards of the command line come first, then the host's LocalForward,
// RemoteForward and DynamicForward lines from ~/.ssh/config. Prints one line per
// forward once it listens ("local 127.0.0.1:5432 -> db.internal:5432", "socks
// 127.0.0.1:1080", "remote localhost:8080 -> localhost:3000"), then "ready". A local
// port of 0 picks a free port (ssh refuses 0). SIGINT or SIGTERM stops every forward
// and exits 0; losing the connection exits 255.
import CBuildInfo
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
        abstract: "Forward ports over SSH (-L local, -R remote, -D SOCKS), optionally through jump hosts.",
        usage: """
            ssh-forward [-NqvA] [-p port] [-l login_name] [-i identity_file] [-F configfile]
                        [-J destination] [-o option] [-L spec] [-R spec] [-D spec] destination
            """,
        discussion: """
            Reads ~/.ssh/config and the known_hosts files as ssh does (see ssh-exec --help). A forward \
            that cannot be set up is a warning, or ends the tool with status 255 under \
            ExitOnForwardFailure yes (or when no forward could be set up at all).
            """,
        version: String(cString: sshkit_build_version_line()))

    @OptionGroup var ssh: SSHToolOptions
    @OptionGroup var login: SSHLoginOptions
    @Option(name: .customShort("L"),
            help: ArgumentHelp("[bind:]port:host:hostport, [bind:]port:/remote/socket or /local/socket:host:hostport: "
                               + "listen here, connect there from the server.", valueName: "spec"))
    var local: [String] = []
    @Option(name: .customShort("R"),
            help: ArgumentHelp("[bind:]port:host:hostport or [bind:]port:/local/socket: the server listens, "
                               + "connections come here and go on to the target.", valueName: "spec"))
    var remote: [String] = []
    @Option(name: .customShort("D"),
            help: ArgumentHelp("[bind:]port: a SOCKS4/4a/5 proxy here whose connections go out from the server.",
                               valueName: "spec"))
    var dynamic: [String] = []
    @Flag(name: .customShort("N"), help: "Run no remote command (always so; accepted for ssh's sake).")
    var noCommand = false
    @Argument(help: ArgumentHelp("[user@]host or ssh://[user@]host[:port].", valueName: "destination"))
    var destination: String

    func run() async throws {
        // the command line's forwards, as ssh parses them (a local port may be 0 here)
        var forwards: [(kind: SSHConfigForward.Kind, forward: SSHConfigForward)] = []
        for (kind, specs) in [(SSHConfigForward.Kind.local, local), (.remote, remote), (.dynamic, dynamic)] {
            for spec in specs {
                guard let f = SSHConfigForward(commandLine: spec, kind: kind, allowsPortZero: true) else {
                    throw ValidationError("Bad \(kind) forwarding specification '\(spec)'")
                }
                forwards.append((kind, f))
            }
        }
        let tool = try SSHToolConnection(tool: "ssh-forward", options: ssh,
                                         destination: try SSHDestination(parsing: destination),
                                         login: login.login, port: login.port)
        forwards += tool.host.localForwards.map { (.local, $0) } + tool.host.remoteForwards.map { (.remote, $0) }
            + tool.host.dynamicForwards.map { (.dynamic, $0) }
        guard !forwards.isEmpty else { throw ValidationError("give -L, -R or -D (or LocalForward, ... in ssh_config)") }
        let exitOnFailure = tool.host.option("exitonforwardfailure", default: false)
        var options = SSHForwardOptions()
        if ssh.verbosity > 0 {
            let log: @Sendable (SSHForwardEvent) -> Void = { event in
                FileHandle.standardError.write(Data("debug1: ssh-forward: \(event)\n".utf8))
            }
            options.eventHandler = log
        }

        let conn: SSHConnection
        do {
            conn = try await SSHClient.connect(tool.configuration)
        } catch {
            throw tool.failure(error)
        }
        var locals: [SSHPortForward] = []
        var remotes: [SSHRemoteForward] = []
        for (kind, forward) in forwards {
            do {
                switch kind {
                case .local:
                    let target = try Self.target(forward.connect)
                    let f = try conn.forwardLocalPort(Self.listenAddress(forward.listen), to: target, options: options)
                    for a in f.listenAddresses { say("local \(a) -> \(target)") }
                    locals.append(f)
                case .dynamic:
                    let f = try conn.forwardDynamicPort(Self.listenAddress(forward.listen), options: options)
                    for a in f.listenAddresses { say("socks \(a)") }
                    locals.append(f)
                case .remote:
                    guard case .port(let bind, let port) = forward.listen else {
                        throw SSHError(.unsupported, "remote forwarding of a Unix socket (libssh 0.10 has no streamlocal-forward)")
                    }
                    guard forward.connect != nil else {
                        throw SSHError(.unsupported, "a SOCKS proxy on the server (-R with a port only)")
                    }
                    let target = try Self.target(forward.connect)
                    let f = try await conn.forwardRemotePort(bindAddress: bind ?? "localhost", port: port, to: target,
                                                             options: options)
                    say("remote \(f.bindAddress):\(f.port) -> \(target)")
                    remotes.append(f)
                }
            } catch {
                SSHToolConnection.report(error, tool: "ssh-forward")
                FileHandle.standardError.write(Data("Could not request \(kind) forwarding.\n".utf8))
                if exitOnFailure || !conn.isConnected {
                    for f in locals { await f.close() }
                    for f in remotes { await f.close() }
                    await conn.close()
                    throw ExitCode(255)
                }
            }
        }
        if locals.isEmpty && remotes.isEmpty {
            await conn.close()
            throw ExitCode(255)
        }
        say("ready")

        // run until a signal, or until the connection ends (whichever comes first; the
        // other waits are left behind: the process ends)
        let (events, continuation) = AsyncStream<String>.makeStream()
        Task { continuation.yield(await Self.nextSignal()) }
        for f in locals { Task { continuation.yield("connection: \(await Self.ending { () async throws(SSHError) in try await f.waitUntilClosed() })") } }
        for f in remotes { Task { continuation.yield("connection: \(await Self.ending { () async throws(SSHError) in try await f.waitUntilClosed() })") } }
        var iterator = events.makeAsyncIterator()
        let stopped = await iterator.next() ?? "signal"
        for f in locals { await f.close() }
        for f in remotes { await f.close() }
        let lost = !conn.isConnected
        await conn.close()
        if lost || stopped.hasPrefix("connection") {
            FileHandle.standardError.write(Data("ssh-forward: \(stopped)\n".utf8))
            throw ExitCode(255)
        }
    }

    /// Where a forward listens here: its bind address (loopback by default; `*` or an
    /// empty one for every address) and port, or a socket path.
    static func listenAddress(_ end: SSHConfigForward.End) -> SSHListenAddress {
        switch end {
        case .port(let host, let port):
            let bind = host.map { $0.isEmpty || $0 == "*" ? "0.0.0.0" : $0 } ?? "127.0.0.1"
            return .tcp(host: bind, port: port)
        case .path(let path): return .unixSocket(path: path)
        }
    }

    static func target(_ end: SSHConfigForward.End?) throws -> SSHForwardTarget {
        switch end {
        case .port(let host, let port)?: return .tcp(host: host ?? "localhost", port: port)
        case .path(let path)?: return .unixSocket(path: path)
        case nil: throw SSHError(.invalidArgument, "a forward without a target")
        }
    }

    private func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// Waits for SIGINT or SIGTERM (delivered to this task, not the default handler).
    /// What ended a forward: "closed", or the error that ended it.
    static func ending(_ wait: () async throws(SSHError) -> Void) async -> String {
        do {
            try await wait()
            return "closed"
        } catch {
            return "\(error)"
        }
    }

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
