import Foundation
import SSHKit
import Synchronization
import Testing

/// Streamed commands (SSHCommand) against the shared sshd: real bytes both ways.
@Suite("Streaming commands", .tags(.integration), .serialized)
struct StreamingTests {
    let server = TestServer.shared

    func connect() async throws -> SSHConnection {
        try await SSHClient.connect(server.configuration())
    }

    func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    @Test func stdoutAndStderrStreamSeparatelyAndTheExitStatusComesLast() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let cmd = try await conn.startCommand("printf out1; printf err1 >&2; sleep 0.2; printf out2; printf err2 >&2; exit 7")
            async let out = cmd.stdout.collect(upTo: 1 << 20)
            async let err = cmd.stderr.collect(upTo: 1 << 20)
            #expect(text(try await out) == "out1out2")
            #expect(text(try await err) == "err1err2")
            #expect(try await cmd.exitStatus() == .exited(7))
        }
    }

    @Test func mergedOutputKeepsArrivalOrder() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let cmd = try await conn.startCommand(
                "for i in 1 2 3 4; do echo o$i; sleep 0.05; echo e$i >&2; sleep 0.05; done")
            var seen: [String] = []
            for try await chunk in cmd.mergedOutput {
                switch chunk {
                case .stdout(let b): seen += text(b).split(separator: "\n").map { "out:" + $0 }
                case .stderr(let b): seen += text(b).split(separator: "\n").map { "err:" + $0 }
                }
            }
            #expect(seen == ["out:o1", "err:e1", "out:o2", "err:e2", "out:o3", "err:e3", "out:o4", "err:e4"])
            #expect(try await cmd.exitStatus() == .exited(0))
        }
    }

    @Test func bulkOutputComesInWholeChunksOfManyPacketsInOrder() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let cmd = try await conn.startCommand("seq 1 400000")
            // a reader that starts late finds many packets waiting: they come gathered
            try await Task.sleep(for: .milliseconds(300))
            var all: [UInt8] = [], sizes: [Int] = []
            for try await chunk in cmd.stdout {
                sizes.append(chunk.count)
                all += chunk
            }
            let expected = (1...400_000).map(String.init).joined(separator: "\n") + "\n"
            #expect(all.count == expected.utf8.count)
            #expect(text(all) == expected, "bytes lost, repeated or out of order")
            // never more than the buffer limit (1 MiB by default) at once
            #expect(sizes.allSatisfy { $0 > 0 && $0 <= 1 << 20 }, "largest chunk: \(sizes.max() ?? 0)")
            // an SSH data packet carries at most 32 KiB: larger chunks are packets gathered
            #expect(sizes.contains { $0 > 32 * 1024 }, "\(sizes.prefix(20))")
            #expect(try await cmd.exitStatus() == .exited(0))
        }
    }

    /// Keystrokes beside a bulk stream end the core's read passes early (a woken worker,
    /// short packets): both channels still get every byte, in order, and the stream keeps
    /// moving while the keystrokes go back and forth.
    @Test func keystrokesBesideABulkStreamEchoWhileEveryBulkByteArrivesInOrder() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let echo = try await conn.startCommand("stty raw -echo; cat", terminal: SSHTerminal())
            var echoed = echo.stdout.makeAsyncIterator()
            let line = Array("0123456789abcdef\n".utf8)
            let bulk = try await conn.startCommand("yes 0123456789abcdef")
            let received = Mutex(0)
            // checks each byte against the repeating line as it comes; -1 when all matched
            let reader = Task { () -> Int in
                var offset = 0
                do {
                    for try await chunk in bulk.stdout {
                        for byte in chunk {
                            if byte != line[offset % line.count] { return offset }
                            offset += 1
                        }
                        received.withLock { $0 = offset }
                    }
                } catch {}
                return -1
            }
            let watchdog = Task {
                try await Task.sleep(for: .seconds(60))
                echo.cancel()
                bulk.cancel()
            }
            defer { watchdog.cancel() }
            while received.withLock({ $0 }) < 1 << 20 { try await Task.sleep(for: .milliseconds(10)) }
            let before = received.withLock { $0 }
            // 200 keys, and more while the stream has not moved yet: the stream hands over in
            // chunks of up to 128 KiB, which a slow build (a sanitizer's) reads in tens of ms,
            // longer than 200 echoes take; a stream that the typing held still stays still
            // through all 5,000
            var got: [UInt8] = []
            var typed = 0
            while typed < 200 || (typed < 5000 && received.withLock({ $0 }) == before) {
                try await echo.input.write([UInt8(ascii: "a") + UInt8(typed % 26)])
                typed += 1
                while got.count < typed {
                    guard let chunk = try await echoed.next() else { break }
                    got += chunk
                }
            }
            let after = received.withLock { $0 }
            bulk.cancel()
            echo.cancel()
            let expectedKeys = (0..<typed).map { UInt8(ascii: "a") + UInt8($0 % 26) }
            #expect(got == expectedKeys, "echoes lost, repeated or out of order: \(text(got))")
            #expect(after > before, "the stream stood still while the keystrokes went back and forth")
            let mismatch = await reader.value
            #expect(mismatch == -1, "bulk byte \(mismatch) lost, repeated or out of order")
        }
    }

    @Test func stdinStreamsWhileOutputIsReadAndFinishSendsEOF() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let data = randomBytes(6 << 20)
            let cmd = try await conn.startCommand("cat")
            async let echoed = cmd.stdout.collect(upTo: 8 << 20)
            var offset = 0
            while offset < data.count {
                let end = min(offset + 100_000, data.count)
                try await cmd.input.write(Array(data[offset..<end]))
                offset = end
            }
            try cmd.input.finish()
            #expect(try await echoed == data)
            #expect(try await cmd.exitStatus() == .exited(0))
        }
    }

    @Test func aSignalReachesTheRemoteCommand() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let cmd = try await conn.startCommand(
                "trap 'echo got-usr1; exit 3' USR1; echo ready; while :; do sleep 0.05; done")
            var it = cmd.stdout.makeAsyncIterator()
            #expect(text(try await it.next() ?? []) == "ready\n")
            try cmd.send(.usr1)
            var rest: [UInt8] = []
            while let chunk = try await it.next() { rest += chunk }
            #expect(text(rest) == "got-usr1\n")
            #expect(try await cmd.exitStatus() == .exited(3))
            // the channel is gone: a late signal is a typed error
            let e = await expectSSHError { try cmd.send(.term) }
            #expect(e?.code == .channelClosed)
        }
    }

    @Test func environmentIsSentAndFallsBackWhenRefused() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let accepted = try await conn.startCommand(
                "echo \"$SSHKIT_STREAM\"", options: SSHChannelOptions(environment: ["SSHKIT_STREAM": "a b'c"]))
            #expect(text(try await accepted.stdout.collect(upTo: 1024)) == "a b'c\n")
            #expect(!accepted.usedEnvironmentFallback)
            let refused = try await conn.startCommand(
                "echo \"$NOT_ACCEPTED\"", options: SSHChannelOptions(environment: ["NOT_ACCEPTED": "x;y"]))
            #expect(text(try await refused.stdout.collect(upTo: 1024)) == "x;y\n")
            #expect(refused.usedEnvironmentFallback)
        }
    }

    @Test func aTimeoutStopsTheCommandAndIsTyped() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let marker = remoteSleepMarker()
            let cmd = try await conn.startCommand(
                "echo started; exec sleep \(marker)", options: SSHChannelOptions(timeout: .milliseconds(700)))
            var it = cmd.stdout.makeAsyncIterator()
            #expect(text(try await it.next() ?? []) == "started\n")
            let (e, seconds) = await measure { await expectSSHError { try await cmd.exitStatus() } }
            #expect(e?.code == .timedOut)
            #expect(seconds < 5)
            let reader = await expectSSHError { try await it.next() }
            #expect(reader?.code == .timedOut)
            try await expectNoRemoteProcess(conn, marker: marker)
            #expect(try await conn.execute("echo fine").stdoutString == "fine\n")
        }
    }

    /// The consumer stops reading: the remote writer must stall soon (window closed),
    /// then everything arrives once reading resumes.
    @Test func aSlowConsumerStallsTheRemoteWriter() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let progress = "/tmp/sshkit-progress-\(UInt32.random(in: 0...UInt32.max))"
            let blocks = 400 // 400 × 64 KiB = 25 MiB
            let cmd = try await conn.startCommand(
                "i=0; while [ $i -lt \(blocks) ]; do head -c 65536 /dev/zero; i=$((i+1)); echo $i > \(progress); done",
                options: SSHChannelOptions(bufferLimit: 1 << 20))
            try await Task.sleep(for: .seconds(1.5))
            let written = Int(try await conn.execute("cat \(progress)").stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
            print("backpressure: the remote wrote \(written * 64) KiB of \(blocks * 64) KiB while nobody read")
            // buffer limit (1 MiB) + libssh's buffer and window (< 4 MiB) + sshd and the pipe
            #expect(written >= 1 && written * 65536 <= 8 << 20, "the remote wrote \(written) blocks while nobody read")
            var total = 0
            for try await chunk in cmd.stdout { total += chunk.count }
            #expect(total == blocks * 65536)
            #expect(try await cmd.exitStatus() == .exited(0))
            _ = try await conn.execute("rm -f \(progress)")
        }
    }

    /// A consumer that keeps reading, but slower than the remote writes: the remote must
    /// never get far ahead of it (the window re-opens only as output is handed over).
    /// libssh 0.10 re-opens the window on every channel read; reading held output in
    /// small pieces once let its buffer grow until it dropped data.
    @Test func aSteadySlowConsumerKeepsTheRemoteLeadBounded() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let size = 96 << 20 + Int.random(in: 1...4095) // a unique command line to find
            let cmd = try await conn.startCommand("head -c \(size) /dev/zero",
                                                  options: SSHChannelOptions(bufferLimit: 1 << 20))
            /// bytes the remote `head` has written so far (its wchar)
            func written() async throws -> Int {
                let io = try await conn.execute("cat /proc/$(pgrep -xf 'head -c \(size) /dev/zero')/io 2>/dev/null")
                let line = io.stdoutString.split(separator: "\n").first { $0.hasPrefix("wchar:") }
                return line.flatMap { Int($0.dropFirst(6).trimmingCharacters(in: .whitespaces)) } ?? size
            }
            var total = 0, sinceNap = 0, nextCheck = 8 << 20, maxLead = 0, checks = 0
            for try await chunk in cmd.stdout {
                total += chunk.count
                sinceNap += chunk.count
                if sinceNap >= 256 << 10 { // at most ~50 MB/s: far below what `head` can write
                    sinceNap = 0
                    try await Task.sleep(for: .milliseconds(5))
                }
                if total >= nextCheck && total < size - (8 << 20) {
                    nextCheck += 8 << 20
                    maxLead = max(maxLead, try await written() - total)
                    checks += 1
                }
            }
            print("steady slow consumer: the remote was at most \(maxLead >> 10) KiB ahead (\(checks) checks)")
            #expect(total == size)
            #expect(try await cmd.exitStatus() == .exited(0))
            #expect(checks >= 8)
            // buffer limit (1 MiB) + libssh's buffer and the core's stash (< 4 MiB)
            // + sshd's channel buffer (one window) and the pipe
            #expect(maxLead <= 12 << 20, "the remote ran \(maxLead) bytes ahead of the consumer")
        }
    }

    @Test func heavyStderrNeverBlocksStdout() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let cmd = try await conn.startCommand(
                "head -c 5000000 /dev/zero >&2; head -c 5000000 /dev/zero; head -c 3000000 /dev/zero >&2")
            async let err = cmd.stderr.collect(upTo: 16 << 20)
            async let out = cmd.stdout.collect(upTo: 16 << 20)
            #expect(try await out.count == 5_000_000)
            #expect(try await err.count == 8_000_000)
            #expect(try await cmd.exitStatus() == .exited(0))
        }
    }

    @Test func cancellingOneCommandLeavesTheOthersAndStopsItsProcess() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let marker = remoteSleepMarker()
            let victim = try await conn.startCommand("echo up; exec sleep \(marker)")
            let sibling = try await conn.startCommand("sleep 0.5; echo sibling")
            var it = victim.stdout.makeAsyncIterator()
            #expect(text(try await it.next() ?? []) == "up\n")
            victim.cancel()
            let e = await expectSSHError { try await victim.exitStatus() }
            #expect(e?.code == .cancelled)
            #expect(text(try await sibling.stdout.collect(upTo: 1024)) == "sibling\n")
            #expect(try await sibling.exitStatus() == .exited(0))
            try await expectNoRemoteProcess(conn, marker: marker)
        }
    }

    @Test func withCommandCancelsACommandStillRunningWhenTheBodyEnds() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let marker = remoteSleepMarker()
            let first = try await conn.withCommand("echo hi; exec sleep \(marker)") { cmd in
                var it = cmd.stdout.makeAsyncIterator()
                return text(try await it.next() ?? [])
            }
            #expect(first == "hi\n")
            try await expectNoRemoteProcess(conn, marker: marker)
        }
    }

    /// A reader of one output ends with its task while the other output's unread bytes
    /// hold the command (its window closed), as when a tool's stdout reader went away.
    @Test func aReaderOfOneOutputEndsWithItsTaskWhileTheOtherIsUnread() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            try await conn.withCommand("cat /dev/zero") { cmd in
                let reader = Task { () async throws -> Int in
                    var n = 0
                    for try await chunk in cmd.stderr { n += chunk.count }
                    return n
                }
                try await Task.sleep(for: .milliseconds(300))
                reader.cancel()
                let ended = await finishes(within: .seconds(5)) { try await reader.value }
                #expect(ended != nil, "the stderr reader did not end with its task")
                if case .failure(let e as SSHError)? = ended { #expect(e.code == .cancelled) }
            }
        }
    }

    @Test func writingToACommandThatExitedIsChannelClosed() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let cmd = try await conn.startCommand("exit 0")
            #expect(try await cmd.exitStatus() == .exited(0))
            let e = await expectSSHError { try await cmd.input.write("late") }
            #expect(e?.code == .channelClosed)
            // and writing after finish() is refused
            let open = try await conn.startCommand("cat >/dev/null")
            try open.input.finish()
            let e2 = await expectSSHError { try await open.input.write("after eof") }
            #expect(e2?.code == .invalidState)
            #expect(try await open.exitStatus() == .exited(0))
        }
    }

    @Test func badOptionsAreRejectedBeforeAnythingIsSent() async throws {
        try await SSHClient.withConnection(server.configuration()) { conn in
            let e1 = await expectSSHError { try await conn.startCommand("true", options: SSHChannelOptions(bufferLimit: 10)) }
            #expect(e1?.code == .invalidArgument)
            let e2 = await expectSSHError { try await conn.startCommand("true", options: SSHChannelOptions(timeout: .zero)) }
            #expect(e2?.code == .invalidArgument)
            let e3 = await expectSSHError {
                try await conn.startCommand("true", options: SSHChannelOptions(environment: ["BAD-NAME": "x"]))
            }
            #expect(e3?.code == .invalidArgument)
            let e4 = await expectSSHError { try await conn.startCommand("true", terminal: SSHTerminal(term: "a b")) }
            #expect(e4?.code == .invalidArgument)
        }
    }
}

/// A `sleep` duration unique to one test ("300.<random digits>"), so the process can
/// be found on the server by its command line.
func remoteSleepMarker() -> String { "300.\(UInt32.random(in: 100_000_000...999_999_999))" }

/// Bounded wait until no `sleep <marker>` process is left on the server.
func expectNoRemoteProcess(_ conn: SSHConnection, marker: String,
                           sourceLocation: SourceLocation = #_sourceLocation) async throws {
    var left = ""
    for _ in 0..<50 {
        left = try await conn.execute("pgrep -af -- 'sleep \(marker)' | grep -v pgrep || true").stdoutString
        if left.isEmpty { return }
        try await Task.sleep(for: .milliseconds(100))
    }
    Issue.record("processes left on the server: \(left)", sourceLocation: sourceLocation)
}

extension StreamingTests {
    /// Tests that count this process's fds, threads, sockets or memory: they run alone,
    /// before the other tests run in parallel (Support/Tiers.swift, scripts/test.sh).
    @Suite("Streaming commands (alone)", .tags(.exclusive), .serialized)
    struct Exclusive {
        func connect() async throws -> SSHConnection { try await StreamingTests().connect() }

        @Test func closingTheConnectionEndsEveryStreamWithATypedError() async throws {
            let fds = countFDs()
            let threads = countThreads()
            do {
                let conn = try await connect()
                let a = try await conn.startCommand("sleep 30")
                let b = try await conn.startCommand("cat")
                let reader = Task { try await a.stdout.collect(upTo: 1024) }
                try await Task.sleep(for: .milliseconds(200))
                await conn.close()
                let e1 = await expectSSHError { try await reader.value }
                #expect(e1?.code == .connectionClosed)
                let e2 = await expectSSHError { try await b.exitStatus() }
                #expect(e2?.code == .connectionClosed)
                let e3 = await expectSSHError { try await b.input.write("x") }
                #expect(e3?.code == .connectionClosed)
            }
            try await Task.sleep(for: .milliseconds(200))
            #expect(countFDs() <= fds)
            #expect(countThreads() <= threads)
        }
    }
}
