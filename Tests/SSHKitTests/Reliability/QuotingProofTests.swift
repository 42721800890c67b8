import Foundation
@testable import SSHKit
@testable import ServerTransport
import Testing

/// Part 7 of the reliability suite: random argument vectors through every path of the
/// library that builds a remote command line, run by six login shells over SSH; every
/// argument must arrive byte-exact and nothing in one may run.
///
/// sshd runs an exec request as `SHELL -c COMMAND`, so each shell is the login shell of
/// its own test user (scripts/test-shell-users.sh). The bulk of the vectors goes in
/// batches: one exec request holds the command lines the library built for many vectors,
/// one per line (a line whose quoting leaked would change what the lines after it print,
/// which the byte comparison catches too). A smaller sample goes through the public calls
/// themselves, one vector per call, to show that they send exactly those command lines.
///
/// Arguments are Swift Strings, so "any bytes but NUL" means any Unicode scalar but
/// U+0000: bytes that are not UTF-8 cannot be passed to these calls at all.
@Suite("Reliability: quoting proof", .tags(.integration), .serialized)
struct QuotingProofTests {
    struct Shell: Sendable {
        let name: String
        let user: String
        var home: String { "/var/lib/\(user)" }
    }

    static let shells = [
        Shell(name: "sh (bash in POSIX mode)", user: "sshkit-q-sh"),
        Shell(name: "dash", user: "sshkit-q-dash"),
        Shell(name: "bash", user: "sshkit-q-bash"),
        Shell(name: "zsh", user: "sshkit-q-zsh"),
        Shell(name: "mksh", user: "sshkit-q-mksh"),
        Shell(name: "busybox sh", user: "sshkit-q-busybox"),
    ]

    /// A remote-command path of the library: the line it builds for a vector, and the
    /// bytes that line prints when every argument arrived intact.
    struct Path: Sendable {
        let name: String
        let line: @Sendable (_ vector: [String], _ shell: Shell) throws -> String
        let expected: @Sendable (_ vector: [String], _ shell: Shell) -> [UInt8]
    }

    /// The vector printed as `<` NUL, then each argument and a NUL.
    static func printed(_ v: [String]) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "<"), 0]
        for a in v { out += Array(a.utf8); out.append(0) }
        return out
    }

    static let printf = ["%s\\0", "<"]

    static func environment(_ v: [String]) -> [String: String] {
        Dictionary(uniqueKeysWithValues: v.enumerated().map { ("Q\($0.offset)", $0.element) })
    }

    static let paths: [Path] = [
        // SSHConnection.execute / command / shell with SSHShellQuoting.command
        Path(name: "exec of SSHShellQuoting.command",
             line: { v, _ in SSHShellQuoting.command(["printf"] + printf + v) },
             expected: { v, _ in printed(v) }),
        // execute(_:environment:) when sshd refuses the env requests (Q* is not in AcceptEnv)
        Path(name: "exec environment fallback",
             line: { v, _ in
                 let reads = v.indices.map { "\"$Q\($0)\"" }.joined(separator: " ")
                 guard let line = try SSHConnection.environmentRequests(environment(v), command: "printf '%s\\0' '<' " + reads).fallback
                 else { return SSHShellQuoting.command(["printf"] + printf) }
                 return line
             },
             expected: { v, _ in printed(v) }),
        // SSHTransport.runProcess: `exec` and the command line, with its environment through the fallback
        Path(name: "SSHTransport.runProcess",
             line: { v, s in
                 // in a subshell, as its `exec` would end the batch
                 let command = SSHTransport.commandLine("printf", printf + v, home: s.home)
                 return "(" + (try SSHConnection.environmentRequests(environment(v.reversed()), command: command).fallback ?? command) + "\n)"
             },
             expected: { v, _ in printed(v) }),
        // OpenSSHTransport.runProcess: `export ...; exec ...`, in a subshell so the batch goes on
        Path(name: "OpenSSHTransport.runProcess",
             line: { v, _ in
                 "(" + (try OpenSSHTransport.commandLine("printf", printf + v, environment: environment(v))) + "\n)"
             },
             expected: { v, _ in printed(v) }),
        // OpenSSHTransport's file operations: paths as words, `~/` as "$HOME"/
        Path(name: "OpenSSHTransport paths",
             line: { v, _ in
                 "printf '%s\\0' '<' " + v.enumerated().map {
                     OpenSSHTransport.word($0.offset % 2 == 0 ? "~/" + $0.element : $0.element)
                 }.joined(separator: " ")
             },
             expected: { v, s in
                 printed(v.enumerated().map { i, a in
                     let path = i % 2 == 0 ? "~/" + a : a
                     if path == "~" { return s.home }
                     return path.utf8.starts(with: "~/".utf8) ? s.home + String(decoding: path.utf8.dropFirst(1), as: UTF8.self) : path
                 })
             }),
    ]

    // MARK: vectors

    /// Pieces an argument is made of: every character a shell treats specially, option
    /// look-alikes, escapes that printf or echo would read, control characters, and
    /// Unicode that a Character-wise loop sees differently from a byte-wise one.
    static let atoms: [String] = [
        "'", "\"", "`", "$", "\\", "!", "*", "?", "[", "]", "{", "}", "(", ")", ";", "&", "|", "<", ">", "#", "~",
        "=", "%", "^", " ", "\t", "\n", "\r", "\r\n", "-", "--", "-n", "-e", "-c", "$(", "${", "$((", "'\\''", "\\n",
        "\\0", "\\c", "%s", "%b", "%n", "$@", "$*", "$0", "$$", "$?", "IFS", "\u{1}", "\u{7f}", "\u{1b}[31m", "\u{85}",
        "é", "e\u{301}", "'\u{301}", "\"\u{301}", "`\u{20DD}", "$\u{FE0F}", "\\\u{301}", "中", "😀", "👩‍💻", "\u{2028}",
        "\u{feff}", "\u{200d}", "\u{10FFFF}", "a", "Z", "0", "/", ".", ",", "@", "+", ":", "_", "*.*", "[!a]", "{a,b}",
    ]

    /// Text that would run `touch CANARY/N` wherever a shell read it as code.
    static func payloads(_ canary: String) -> [String] {
        let t = "touch \(canary)/$((1))"
        return ["$(\(t))", "`\(t)`", ";\(t);", "\n\(t)\n", "' ;\(t); '", "\" ;\(t); \"", "'$(\(t))'", "|\(t)",
                "&&\(t)", "'\u{301};\(t);'\u{301}", "$(IFS=_;\(t))", "\\';\(t);'"]
    }

    static func randomArgument(_ rng: inout SplitMix64, payloads: [String]) -> String {
        var s = ""
        for _ in 0..<Int.random(in: 0...10, using: &rng) {
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<35: s += atoms.randomElement(using: &rng)!
            case 35..<42: s += payloads.randomElement(using: &rng)!
            case 42..<70: s.unicodeScalars.append(Unicode.Scalar(UInt8.random(in: 1...127, using: &rng)))
            case 70..<85:
                var v = UInt32.random(in: 1...0x10FFFF, using: &rng)
                if (0xD800...0xDFFF).contains(v) { v -= 0x800 } // no surrogates: not scalars
                s.unicodeScalars.append(Unicode.Scalar(v)!)
            default:
                let alnum = Array("abcXYZ0189")
                s += String((0..<Int.random(in: 1...6, using: &rng)).map { _ in alnum.randomElement(using: &rng)! })
            }
        }
        return s
    }

    static func randomVector(_ rng: inout SplitMix64, payloads: [String]) -> [String] {
        (0..<Int.random(in: 0...6, using: &rng)).map { _ in randomArgument(&rng, payloads: payloads) }
    }

    // MARK: running

    static func connect(_ server: TestServer, _ shell: Shell) async throws -> SSHConnection {
        var c = server.configuration()
        c.user = shell.user
        return try await SSHClient.connect(c)
    }

    /// What one batch found: vectors whose bytes differed, and canary files made.
    struct Outcome {
        var vectors = 0
        var wrong = 0
        var firstWrong: String?
        var injections = 0
    }

    /// Runs `lines` as one exec request; on a difference, runs each line alone to count
    /// the vectors that differ.
    static func runBatch(_ conn: SSHConnection, _ path: Path, _ shell: Shell, _ vectors: [[String]],
                         canary: String) async throws -> Outcome
    {
        var outcome = Outcome(vectors: vectors.count)
        let lines = try vectors.map { try path.line($0, shell) }
        let expected = vectors.flatMap { path.expected($0, shell) }
        let r = try await conn.execute(lines.joined(separator: "\n"))
        if r.stdout != expected || r.exitStatus != .exited(0) || !r.stderr.isEmpty {
            for (v, line) in zip(vectors, lines) {
                let one = try await conn.execute(line)
                if one.stdout != path.expected(v, shell) || one.exitStatus != .exited(0) {
                    outcome.wrong += 1
                    if outcome.firstWrong == nil {
                        outcome.firstWrong = "\(shell.name), \(path.name): \(v.map { Array($0.unicodeScalars.map(\.value)) }) "
                            + "printed \(one.stdout.prefix(200)) status \(one.exitStatus) stderr \(one.stderrString.prefix(200))"
                    }
                }
            }
            if outcome.wrong == 0 { outcome.firstWrong = "batch differed, no line alone did: \(r.stderrString.prefix(300))"; outcome.wrong = 1 }
        }
        let made = (try? FileManager.default.contentsOfDirectory(atPath: canary)) ?? []
        outcome.injections = made.count
        for f in made { try? FileManager.default.removeItem(atPath: canary + "/" + f) }
        return outcome
    }

    /// Vectors per run: 100,000 in the full run, 1,500 in CI.
    static let vectorCount = Reliability.full ? 100_000 : 1_500
    /// Vectors per shell and call through the public calls themselves.
    static let callSample = Reliability.full ? 100 : 4

    @Test(.timeLimit(.minutes(60)))
    func everyArgumentArrivesByteExactInEveryShell() async throws {
        let users = try TestServer.run("/bin/bash", ["\(TestServer.packageRoot)/scripts/test-shell-users.sh"])
        #expect(users.split(separator: "\n").count == Self.shells.count)
        let server = try TestServer.start(
            name: "quoting-proof", extraConfig: ["AllowUsers " + Self.shells.map(\.user).joined(separator: " ")])
        defer { server.stop() }
        let canary = try TestPaths.makeTemporaryDirectory("quoting-canary")
        defer { try? FileManager.default.removeItem(atPath: canary) }
        chmod(canary, 0o1777)
        let payloads = Self.payloads(canary)

        var rng = Reliability.generator("quoting")
        let vectors = (0..<Self.vectorCount).map { _ in Self.randomVector(&rng, payloads: payloads) }
        // batches of at most ~96 KiB of command line (Linux takes 128 KiB in one argument)
        var batches: [[Int]] = [[]]
        var size = 0
        for (i, v) in vectors.enumerated() {
            let cost = v.reduce(64) { $0 + 4 * $1.utf8.count + 24 }
            if size + cost > 96 * 1024 { batches.append([]); size = 0 }
            batches[batches.count - 1].append(i)
            size += cost
        }

        let started = ContinuousClock.now
        let batchList = batches
        // the shells run two at a time (this machine has 2 cores)
        let outcomes = try await withThrowingTaskGroup(of: (Shell, [String: Outcome]).self) { group in
            var pending = Self.shells[...]
            func add() {
                guard let shell = pending.popFirst() else { return }
                group.addTask {
                    let conn = try await Self.connect(server, shell)
                    var byPath: [String: Outcome] = [:]
                    for path in Self.paths {
                        var total = Outcome()
                        for batch in batchList {
                            let o = try await Self.runBatch(conn, path, shell, batch.map { vectors[$0] }, canary: canary)
                            total.vectors += o.vectors
                            total.wrong += o.wrong
                            total.injections += o.injections
                            total.firstWrong = total.firstWrong ?? o.firstWrong
                        }
                        byPath[path.name] = total
                    }
                    await conn.close()
                    return (shell, byPath)
                }
            }
            add(); add()
            var all: [(Shell, [String: Outcome])] = []
            for try await result in group { all.append(result); add() }
            return all
        }
        let seconds = Double((ContinuousClock.now - started).components.seconds)

        var wrong = 0, injections = 0, evaluated = 0
        for (shell, byPath) in outcomes {
            for (path, o) in byPath.sorted(by: { $0.key < $1.key }) {
                evaluated += o.vectors
                wrong += o.wrong
                injections += o.injections
                if let first = o.firstWrong { Issue.record("not byte-exact: \(first)") }
                if o.injections > 0 { Issue.record("\(o.injections) injections in \(shell.name), \(path)") }
            }
        }
        #expect(evaluated == Self.vectorCount * Self.paths.count * Self.shells.count)
        #expect(wrong == 0)
        #expect(injections == 0)
        Reliability.record("7 quoting", "random vectors (each through \(Self.paths.count) paths × \(Self.shells.count) shells)",
                           Self.vectorCount, goal: "≥ 100,000")
        Reliability.record("7 quoting", "command lines run", evaluated)
        Reliability.record("7 quoting", "arguments not byte-exact", wrong, goal: "0")
        Reliability.record("7 quoting", "injections (canary files made)", injections, goal: "0")
        Reliability.record("7 quoting", "seconds", Int(seconds))
    }

    /// The public calls, one vector per call, send the lines the batches ran.
    @Test(.timeLimit(.minutes(20)))
    func thePublicCallsSendThoseLines() async throws {
        _ = try TestServer.run("/bin/bash", ["\(TestServer.packageRoot)/scripts/test-shell-users.sh"])
        let server = try TestServer.start(
            name: "quoting-calls", extraConfig: ["AllowUsers " + Self.shells.map(\.user).joined(separator: " ")])
        defer { server.stop() }
        let canary = try TestPaths.makeTemporaryDirectory("quoting-canary-calls")
        defer { try? FileManager.default.removeItem(atPath: canary) }
        chmod(canary, 0o1777)
        let control = try TestPaths.makeTemporaryDirectory("quoting-openssh")
        chmod(control, 0o700)
        defer { try? FileManager.default.removeItem(atPath: control) }
        var rng = Reliability.generator("quoting-calls")
        let payloads = Self.payloads(canary)
        var calls = 0, wrong = 0
        for shell in Self.shells {
            let conn = try await Self.connect(server, shell)
            var config = server.configuration()
            config.user = shell.user
            let transport = SSHTransport(configuration: config)
            let openssh = try OpenSSHTransport(destination: server.host, options: .init(
                user: shell.user, port: server.port, identityFile: server.key("id_ed25519"),
                knownHostsFile: control + "/known_hosts", configFile: "/dev/null", controlDirectory: control))
            for _ in 0..<Self.callSample {
                let v = Self.randomVector(&rng, payloads: payloads)
                let expected = Self.printed(v)
                let plain = try await conn.execute(SSHShellQuoting.command(["printf"] + Self.printf + v))
                let reads = v.indices.map { "\"$Q\($0)\"" }.joined(separator: " ")
                let viaEnv = try await conn.execute("printf '%s\\0' '<' " + reads, environment: Self.environment(v))
                #expect(v.isEmpty || viaEnv.usedEnvironmentFallback)
                let sshT = try await transport.runProcess("printf", arguments: Self.printf + v, stdin: [],
                                                          environment: Self.environment(v), timeout: nil)
                let opensshT = try await openssh.runProcess("printf", arguments: Self.printf + v, stdin: [],
                                                            environment: Self.environment(v), timeout: nil)
                for (name, out) in [("execute", plain.stdout), ("environment", viaEnv.stdout),
                                    ("SSHTransport", sshT.stdout), ("OpenSSHTransport", opensshT.stdout)] {
                    calls += 1
                    if out != expected {
                        wrong += 1
                        Issue.record("\(shell.name) \(name): \(v.map { Array($0.unicodeScalars.map(\.value)) }) printed \(out.prefix(200))")
                    }
                }
            }
            await transport.close()
            await openssh.close()
            await conn.close()
        }
        let injections = (try? FileManager.default.contentsOfDirectory(atPath: canary).count) ?? 0
        #expect(wrong == 0)
        #expect(injections == 0)
        Reliability.record("7 quoting", "public calls (execute, environment, SSHTransport, OpenSSHTransport)", calls)
        Reliability.record("7 quoting", "public calls not byte-exact or injected", wrong + injections, goal: "0")
    }
}
