import Foundation
import SSHKit
import Testing

/// Interactive shells and PTY commands (SSHShell) against the shared sshd.
@Suite("Shells", .tags(.integration), .serialized)
struct ShellTests {
    let server = TestServer.shared

    func connect() async throws -> SSHConnection {
        try await SSHClient.connect(server.configuration())
    }

    /// Reads the shell's output until it contains `needle`; returns all of it. Bounded:
    /// after 10 s the shell is closed, which ends the read with an error.
    func read(_ it: inout SSHByteStream.AsyncIterator, until needle: String, shell: SSHShell,
              sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
        var seen = ""
        let watchdog = Task {
            try await Task.sleep(for: .seconds(10))
            shell.cancel()
        }
        defer { watchdog.cancel() }
        while !seen.contains(needle) {
            guard let chunk = try await it.next() else {
                Issue.record("never saw \(needle.debugDescription) in \(seen.debugDescription)",
                             sourceLocation: sourceLocation)
                return seen
            }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        return seen
    }

    @Test func aShellRunsCommandsEchoesInputAndReportsItsExitStatus() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let shell = try await conn.startShell()
            var it = shell.output.makeAsyncIterator()
            // type after the prompt: sshd's login messages (motd, "Last login") can
            // otherwise land in the middle of the echoed line
            _ = try await read(&it, until: "$ ", shell: shell)
            try await shell.input.write("echo hello-$((6*7))\n")
            let out = try await read(&it, until: "hello-42\r\n", shell: shell)
            #expect(out.contains("echo hello-$((6*7))"), "the terminal echoes input: \(out.debugDescription)")
            try await shell.input.write("exit 3\n")
            while try await it.next() != nil {}
            #expect(try await shell.exitStatus() == .exited(3))
        }
    }

    @Test func theTerminalTypeAndSizeReachTheRemoteProgram() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let terminal = SSHTerminal(term: "vt100", size: SSHTerminalSize(columns: 100, rows: 40))
            let cmd = try await conn.startCommand("echo $TERM; stty size; tty", terminal: terminal)
            let out = String(decoding: try await cmd.stdout.collect(upTo: 4096), as: UTF8.self)
            #expect(out.hasPrefix("vt100\r\n40 100\r\n/dev/pts/"), "\(out.debugDescription)")
            #expect(try await cmd.exitStatus() == .exited(0))
            // stderr goes through the terminal too
            let both = try await conn.startCommand("echo to-stderr >&2", terminal: terminal)
            #expect(String(decoding: try await both.stdout.collect(upTo: 4096), as: UTF8.self) == "to-stderr\r\n")
        }
    }

    /// libssh 0.10 sends no modes in pty-req; `stty` applies them before the program runs.
    @Test func terminalModesReachCommandsAndShells() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let modes: [SSHTerminalMode: UInt32] = [
                .echo: 0, .icrnl: 0, .iutf8: 1, .vintr: 1, .vquit: 28, .verase: 0x27, .veof: 255,
                .inputSpeed: 9600, .outputSpeed: 9600,
            ]
            let terminal = SSHTerminal(modes: modes)
            let cmd = try await conn.startCommand("stty -a", terminal: terminal)
            let out = String(decoding: try await cmd.stdout.collect(upTo: 8192), as: UTF8.self)
            #expect(try await cmd.exitStatus() == .exited(0))
            for expected in ["speed 9600 baud", "intr = ^A;", "quit = ^\\;", "erase = ';", "eof = <undef>;",
                             " -echo ", " -icrnl ", " iutf8"] {
                #expect(out.contains(expected), "\(expected) not in \(out.debugDescription)")
            }
            // a shell with modes: the login shell starts after stty, and keeps them
            let shell = try await conn.startShell(terminal: SSHTerminal(modes: [.echo: 0, .vintr: 1]))
            var it = shell.output.makeAsyncIterator()
            try await shell.input.write("stty -a; echo shell-$((6*7))\n")
            let seen = try await read(&it, until: "shell-42", shell: shell)
            #expect(seen.contains("intr = ^A;") && seen.contains(" -echo "), "\(seen.debugDescription)")
            try await shell.input.write("exit 3\n")
            #expect(try await shell.exitStatus() == .exited(3))
        }
    }

    @Test func terminalModeValuesOutOfRangeAreRejected() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            for modes: [SSHTerminalMode: UInt32] in [[.echo: 2], [.vintr: 256], [.inputSpeed: 0]] {
                do {
                    _ = try await conn.startCommand("true", terminal: SSHTerminal(modes: modes))
                    Issue.record("\(modes) was accepted")
                } catch {
                    #expect((error as? SSHError)?.code == .invalidArgument, "\(error)")
                }
            }
            // the connection is still fine
            let after = try await conn.execute("echo ok").stdoutString
            #expect(after == "ok\n")
        }
    }

    @Test func resizingReachesARunningShell() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let shell = try await conn.startShell(terminal: SSHTerminal(size: SSHTerminalSize(columns: 80, rows: 24)))
            var it = shell.output.makeAsyncIterator()
            try await shell.input.write("stty size\n")
            _ = try await read(&it, until: "24 80\r\n", shell: shell)
            try shell.resize(to: SSHTerminalSize(columns: 132, rows: 50))
            try await shell.input.write("stty size\n")
            _ = try await read(&it, until: "50 132\r\n", shell: shell)
            // a command without a terminal cannot be resized
            let plain = try await conn.startCommand("sleep 1")
            let e = await expectSSHError { try plain.resize(to: SSHTerminalSize(columns: 10, rows: 10)) }
            #expect(e?.code == .invalidState)
            plain.cancel()
        }
    }

    @Test func interruptCharacterStopsTheForegroundProgram() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let marker = remoteSleepMarker()
            let shell = try await conn.startShell()
            var it = shell.output.makeAsyncIterator()
            try await shell.input.write("sleep \(marker)\n")
            try await Task.sleep(for: .milliseconds(300))
            try await shell.input.write("\u{3}")
            // the shell is back at its prompt
            try await shell.input.write("echo after-$((1+1))\n")
            _ = try await read(&it, until: "after-2", shell: shell)
            try await expectNoRemoteProcess(conn, marker: marker)
            shell.cancel()
        }
    }

    @Test func closingAShellHangsUpItsProcesses() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let marker = remoteSleepMarker()
            let shell = try await conn.startShell()
            var it = shell.output.makeAsyncIterator()
            try await shell.input.write("sleep \(marker)\n")
            _ = try await read(&it, until: "sleep \(marker)", shell: shell)
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await conn.execute("pgrep -f 'sleep \(marker)' | wc -l").stdoutString != "0\n")
            shell.cancel()
            let e = await expectSSHError { try await shell.exitStatus() }
            #expect(e?.code == .cancelled)
            try await expectNoRemoteProcess(conn, marker: marker)
        }
    }

    @Test func cancellingACommandWithoutATerminalStopsItsProcesses() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let marker = remoteSleepMarker()
            // a compound command: the login shell stays, sleep is its child
            let cmd = try await conn.startCommand("echo go; sleep \(marker); echo never")
            var it = cmd.stdout.makeAsyncIterator()
            #expect(String(decoding: try await it.next() ?? [], as: UTF8.self) == "go\n")
            try await Task.sleep(for: .milliseconds(200))
            cmd.cancel()
            try await expectNoRemoteProcess(conn, marker: marker)
        }
    }

    @Test func manyChannelsOfEveryKindShareOneConnection() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let shells = try await withThrowingTaskGroup(of: Bool.self) { group in
                for i in 0..<4 {
                    group.addTask {
                        let shell = try await conn.startShell()
                        var it = shell.output.makeAsyncIterator()
                        try await shell.input.write("echo shell-\(i)-$((\(i)*10))\n")
                        var seen = ""
                        while !seen.contains("shell-\(i)-\(i * 10)\r\n"), let c = try await it.next() {
                            seen += String(decoding: c, as: UTF8.self)
                        }
                        try await shell.input.write("exit\n")
                        return try await shell.exitStatus() == .exited(0)
                    }
                    group.addTask {
                        let cmd = try await conn.startCommand("head -c 300000 /dev/zero | tr '\\0' x")
                        return try await cmd.stdout.collect(upTo: 1 << 20).count == 300_000
                    }
                    group.addTask {
                        try await conn.execute("echo exec-\(i)").stdoutString == "exec-\(i)\n"
                    }
                }
                var all: [Bool] = []
                for try await ok in group { all.append(ok) }
                return all
            }
            #expect(shells.count == 12 && shells.allSatisfy { $0 })
        }
    }
}
