// The targets reach parsers that are internal to SSHKit: debug builds only (as the tests
// and scripts/fuzz.sh build); a release build of the package gets an empty target list.
#if DEBUG
import Foundation
@testable import SSHKit

/// The fuzz targets of Reliability part 6: each takes arbitrary bytes, feeds them to one
/// parser or validator of untrusted input, and checks what must hold whatever the input
/// (a violated invariant is a crash, which libFuzzer reports with the input).
enum FuzzTargets {
    static let all: [String: @Sendable ([UInt8]) -> Void] = [
        "known-hosts": knownHosts,
        "socks": socks,
        "sftp-reply": sftpReply,
        "terminal-modes": terminalModes,
        "environment": environment,
        "quoting": quoting,
        "ssh-config": sshConfig,
    ]

    static func require(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { fatalError("invariant violated: \(message())") }
    }

    /// known_hosts text: every line parses to an entry or is skipped; nothing crashes;
    /// lookups of any host answer.
    static func knownHosts(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        let file = SSHKnownHostsFile.parse(text)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).count
        require(file.entries.count <= lines, "\(file.entries.count) entries from \(lines) lines")
        _ = file.entries.map { "\($0)" }
    }

    /// ssh_config text resolved for a host: a typed error on a line the text has (or 0
    /// for what is checked after reading), or a result with a valid port and non-empty
    /// algorithm lists; `Match exec` never runs (not allowed).
    static func sshConfig(_ bytes: [UInt8]) {
        let context = OpenSSHConfig.Context(homeDirectory: "/nonexistent", localUser: "fuzz", uid: 65534,
                                            localHostName: "fuzz.example", environment: ["HOME": "/nonexistent"])
        let lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).count
        do {
            let c = try OpenSSHConfig.resolve("fuzz-host", text: bytes, context: context)
            require((1...65535).contains(c.port), "port \(c.port)")
            require(!c.ciphers.isEmpty && !c.kexAlgorithms.isEmpty && !c.macs.isEmpty, "an empty algorithm list")
            require(!c.hostName.isEmpty && !c.user.isEmpty, "an empty host or user")
            _ = c.sshGLines
        } catch {
            require(error.line >= 0 && error.line <= lines, "error on line \(error.line) of \(lines): \(error)")
            require(!error.message.isEmpty, "an error without a message")
        }
    }

    /// A SOCKS4/4a/5 handshake fed in pieces whose sizes come from the input: it asks for
    /// more, connects to a sane target, or rejects; never reads past its limit.
    static func socks(_ bytes: [UInt8]) {
        guard let first = bytes.first else { return }
        let step = Int(first % 7) + 1
        var handshake = SOCKSHandshake()
        var fed = 0
        var rest = bytes.dropFirst()[...]
        while !rest.isEmpty {
            let piece = rest.prefix(step)
            rest = rest.dropFirst(step)
            fed += piece.count
            switch handshake.feed(piece) {
            case .needMore:
                require(fed <= SOCKSHandshake.maxLength + 16, "still reading after \(fed) bytes")
            case .connect(let host, let port, _, let leftover, _):
                require(!host.isEmpty && !host.utf8.contains(0), "host \(Array(host.utf8))")
                require((0...65535).contains(port), "port \(port)")
                require(leftover.count <= fed, "leftover \(leftover.count) of \(fed)")
                return
            case .reject:
                return
            }
        }
    }

    /// An SFTP reply packet (its first byte the type): decoded or refused with an
    /// SSHError, never more entries than the payload can hold.
    static func sftpReply(_ bytes: [UInt8]) {
        guard let type = bytes.first else { return }
        let payload = Array(bytes.dropFirst())
        do {
            let (_, reply) = try SFTPSession.decode(type: type, payload)
            if case .name(let entries) = reply {
                require(entries.count * 12 <= payload.count, "\(entries.count) entries from \(payload.count) bytes")
                require(entries.allSatisfy { !$0.name.bytes.contains(0) }, "a name with NUL")
            }
        } catch {
            require(!error.message.isEmpty, "an error without a message")
        }
    }

    static let modes: [SSHTerminalMode] = [
        .vintr, .vquit, .verase, .vkill, .veof, .veol, .vstart, .vstop, .vsusp, .vlnext,
        .ignpar, .icrnl, .ixon, .isig, .icanon, .echo, .echoe, .opost, .onlcr, .inputSpeed, .outputSpeed,
    ]

    /// A terminal (TERM and modes from the input): validation accepts it or throws; what
    /// an accepted one adds to a command line is `stty` with words of printable ASCII,
    /// never a single quote or a backslash (those characters go as numbers), each quoted.
    static func terminalModes(_ bytes: [UInt8]) {
        guard bytes.count >= 2 else { return }
        let termLength = Int(bytes[0] % 70)
        let term = String(decoding: bytes.dropFirst().prefix(termLength), as: UTF8.self)
        var modes: [SSHTerminalMode: UInt32] = [:]
        var i = 1 + termLength
        while i + 5 <= bytes.count {
            let mode = modes.count < 64 ? Self.modes[Int(bytes[i]) % Self.modes.count] : .echo
            let value = bytes[(i + 1)...(i + 4)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            modes[mode] = value % 3 == 0 ? value % 2 : value % 300
            i += 5
        }
        let terminal = SSHTerminal(term: term, modes: modes)
        do {
            try terminal.validate()
        } catch {
            return
        }
        require(term.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7f }, "TERM \(Array(term.utf8)) accepted")
        for word in terminal.sttyArguments {
            require(!word.isEmpty && word.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7f && $0 != 0x27 && $0 != 0x5c },
                    "stty word \(Array(word.utf8))")
            require(line(terminal).contains(" " + SSHShellQuoting.quote(word)), "stty word \(word) not quoted")
        }
        let full = line(terminal)
        require(full.hasSuffix("; CMD") || full == "CMD", "\(full)")
    }

    static func line(_ terminal: SSHTerminal) -> String { terminal.applyingModes(to: "CMD") }

    /// Environment names and values (NUL-separated pairs): invalid names and NUL values
    /// refused; an accepted set makes a fallback line that sets exactly those values.
    static func environment(_ bytes: [UInt8]) {
        let parts = bytes.split(separator: 0xff, omittingEmptySubsequences: false)
        var env: [String: String] = [:]
        var it = parts.makeIterator()
        while let name = it.next(), let value = it.next(), env.count < 8 {
            env[String(decoding: name, as: UTF8.self)] = String(decoding: value, as: UTF8.self)
        }
        do {
            let (requests, fallback) = try SSHConnection.environmentRequests(env, command: "true")
            require(requests.count == env.count, "\(requests.count) of \(env.count)")
            for (name, value) in requests {
                require(SSHShellQuoting.isValidEnvironmentName(name), "name \(Array(name.utf8)) accepted")
                require(!value.utf8.contains(0), "a NUL value accepted")
            }
            if let fallback {
                require(fallback.hasPrefix("export ") && fallback.hasSuffix("; true"), fallback)
            }
        } catch {
            require(env.contains { !SSHShellQuoting.isValidEnvironmentName($0.key) || $0.value.utf8.contains(0) },
                    "a valid set refused: \(error)")
        }
    }

    /// Any string (the input as UTF-8, NULs dropped) quoted and printed by /bin/sh comes
    /// back byte for byte.
    static func quoting(_ bytes: [UInt8]) {
        let s = String(decoding: bytes.filter { $0 != 0 }, as: UTF8.self)
        let script = "printf %s " + SSHShellQuoting.quote(s)
        let out = runShell(script)
        require(out == Array(s.utf8), "sh printed \(out.prefix(64)) for \(Array(s.utf8).prefix(64))")
    }

    /// Runs `/bin/sh -c script` and returns its stdout.
    static func runShell(_ script: String) -> [UInt8] {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { fatalError("pipe: \(errno)") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_addclose(&actions, fds[0])
        let argv: [UnsafeMutablePointer<CChar>?] = ["/bin/sh", "-c", script].map { (w: String) in strdup(w) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, "/bin/sh", &actions, nil, argv, environ)
        close(fds[1])
        guard rc == 0 else { close(fds[0]); fatalError("posix_spawn: \(rc)") }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fds[0], &buf, buf.count)
            if n > 0 { out += buf[0..<n]; continue }
            if n < 0 && errno == EINTR { continue }
            break
        }
        close(fds[0])
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return out
    }
}
#else
enum FuzzTargets {
    static let all: [String: @Sendable ([UInt8]) -> Void] = [:]
}
#endif
