import Foundation
import SSHKit
import Testing

/// A remote program's terminal joined to a local descriptor (SSHJoinedTerminal): the
/// connection's worker carries the bytes; here the descriptor is one end of a socket
/// pair that the test reads and writes, against the shared sshd.
@Suite("Joined terminals", .tags(.integration), .serialized)
struct JoinedTerminalTests {
    let server = TestServer.shared

    /// The test's end of a socket pair and the end to join.
    final class Pair {
        let mine: Int32
        private(set) var joined: Int32

        init() throws {
            var sv: [Int32] = [-1, -1]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &sv) == 0 else { throw POSIXError(.EMFILE) }
            mine = sv[0]
            joined = sv[1]
        }

        deinit {
            close(mine)
            if joined >= 0 { close(joined) }
        }

        /// Closes the test's copy of the joined end (the terminal holds a duplicate), so
        /// that its end shows as EOF here.
        func closeJoined() {
            close(joined)
            joined = -1
        }

        func write(_ s: String) {
            _ = Array(s.utf8).withUnsafeBytes { Foundation.write(mine, $0.baseAddress!, $0.count) }
        }

        /// What arrives until `needle` (or EOF, or 10 s); returns all of it.
        func read(until needle: String?) -> String {
            var seen = [UInt8]()
            let deadline = Date().addingTimeInterval(10)
            var buf = [UInt8](repeating: 0, count: 4096)
            while Date() < deadline {
                if let needle, String(decoding: seen, as: UTF8.self).contains(needle) { break }
                var p = pollfd(fd: mine, events: Int16(POLLIN), revents: 0)
                guard poll(&p, 1, 100) > 0 else { continue }
                let n = Foundation.read(mine, &buf, buf.count)
                if n <= 0 { break }
                seen += buf[0..<n]
            }
            return String(decoding: seen, as: UTF8.self)
        }
    }

    /// Whether no process matches `pattern` on the server, within 5 s.
    static func gone(_ pattern: String, _ conn: SSHConnection) async throws -> Bool {
        for _ in 0..<100 {
            if try await conn.execute("pgrep -f '\(pattern)' || true").stdoutString.isEmpty { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    @Test func keysGoInTheScreenComesBackTheSizeFollowsAndTheExitIsReported() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let pair = try Pair()
            let t = try await conn.startJoinedTerminal(
                "printf 'READY\\n'; read line; stty size; echo \"got:$line\"; exit 4",
                terminal: SSHTerminal(size: SSHTerminalSize(columns: 80, rows: 24)), joining: pair.joined)
            pair.closeJoined()
            #expect(pair.read(until: "READY").contains("READY"))
            try t.resize(to: SSHTerminalSize(columns: 90, rows: 33))
            pair.write("hello\r")
            let out = pair.read(until: "got:hello")
            #expect(out.contains("hello"), "the terminal echoes: \(out.debugDescription)")
            #expect(out.contains("33 90\r\n"), "the resize reached the PTY first: \(out.debugDescription)")
            #expect(out.contains("got:hello"))
            #expect(try await t.waitUntilEnded() == .exited(.exited(4)))
            // the joined duplicate is closed once it ended: the test's end reads EOF
            _ = pair.read(until: nil)
            var b: UInt8 = 0
            #expect(Foundation.read(pair.mine, &b, 1) == 0)
        }
    }

    /// (What comes before the detach byte in the same read is sent too, but the hang-up
    /// that follows can flush it from the remote terminal before the program reads it,
    /// so only what the program read before is checked here.)
    @Test func theDetachByteEndsTheJoinAndNothingAfterItReachesTheProgram() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let file = "/tmp/sshkit-joined-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            func written() async throws -> String { try await conn.execute("cat \(file)").stdoutString }
            let pair = try Pair()
            let t = try await conn.startJoinedTerminal(
                "trap '' HUP; stty raw -echo; printf READY; exec cat > \(file)", joining: pair.joined, detachByte: 0x1D)
            #expect(pair.read(until: "READY").contains("READY"))
            pair.write("abc")
            for _ in 0..<100 where try await written() != "abc" {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(try await written() == "abc")
            pair.write("\u{1D}xyz")
            #expect(try await t.waitUntilEnded() == .detached)
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await written() == "abc", "nothing after the detach byte")
            #expect(try await conn.execute("rm -f \(file)").succeeded)
        }
    }

    @Test func aCancelHangsUpAndTheWaitAndTheLocalEndSaySo() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let pair = try Pair()
            let t = try await conn.startJoinedTerminal("printf READY; sleep 37", joining: pair.joined)
            pair.closeJoined()
            #expect(pair.read(until: "READY").contains("READY"))
            let waiter = Task { try await t.waitUntilEnded() }
            t.cancel()
            await #expect(throws: SSHError.self) { _ = try await waiter.value }
            do {
                _ = try await t.waitUntilEnded()
                Issue.record("a cancelled terminal ended normally")
            } catch let error as SSHError {
                #expect(error.code == .cancelled)
            }
            _ = pair.read(until: nil) // EOF: the joined end was closed
            #expect(try await Self.gone("[s]leep 37", conn), "the hang-up ended it")
        }
    }

    @Test func aLocalEndThatGoesAwayEndsTheJoin() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            var sv: [Int32] = [-1, -1]
            #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &sv) == 0)
            let t = try await conn.startJoinedTerminal("printf READY; sleep 1; printf more; sleep 38", joining: sv[1])
            close(sv[1]) // the joined duplicate keeps the socket open
            var buf = [UInt8](repeating: 0, count: 16)
            #expect(Foundation.read(sv[0], &buf, buf.count) > 0)
            // the peer goes away: the next screen bytes find nobody (a socket's EOF alone
            // is a half close, which ssh sends on as the channel's EOF)
            close(sv[0])
            #expect(try await t.waitUntilEnded() == .terminalClosed)
            #expect(try await Self.gone("[s]leep 38", conn), "the hang-up ended it")
        }
    }

    @Test func badDescriptorsAndSizesAreRefusedAndTheCallersDescriptorStays() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            var p: [Int32] = [-1, -1]
            #expect(pipe(&p) == 0)
            defer { close(p[0]); close(p[1]) }
            do {
                _ = try await conn.startJoinedTerminal("true", joining: p[0])
                Issue.record("a pipe was joined")
            } catch let error as SSHError {
                #expect(error.code == .invalidArgument, "\(error)")
            }
            #expect(fcntl(p[0], F_GETFD) >= 0, "the caller's descriptor is still open")
            do {
                _ = try await conn.startJoinedTerminal("true", joining: -1)
                Issue.record("descriptor -1 was joined")
            } catch let error as SSHError {
                #expect(error.code == .invalidArgument, "\(error)")
            }
            let pair = try Pair()
            do {
                _ = try await conn.startJoinedTerminal("true", terminal: SSHTerminal(term: String(repeating: "x", count: 70)),
                                                       joining: pair.joined)
                Issue.record("a 70-character terminal type was taken")
            } catch let error as SSHError {
                #expect(error.code == .invalidArgument, "\(error)")
            }
            do {
                _ = try await conn.startJoinedTerminal("a\0b", joining: pair.joined)
                Issue.record("a NUL in the command was taken")
            } catch let error as SSHError {
                #expect(error.code == .invalidArgument, "\(error)")
            }
            // the connection is fine after the refusals
            #expect(try await conn.execute("echo ok").stdoutString == "ok\n")
        }
    }
}
