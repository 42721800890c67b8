import Foundation
@testable import SSHKit
import Testing

/// Commands on one shared connection: outputs, exit statuses, concurrency, limits.
@Suite("Exec", .tags(.integration))
struct ExecTests {
    let server = TestServer.shared

    func connect() async throws -> SSHConnection {
        try await SSHClient.connect(server.configuration())
    }

    @Test(arguments: [0, 1, 4095, 65536, 1_000_003, 64 * 1024 * 1024])
    func binaryRoundTripThroughCat(size: Int) async throws {
        let conn = try await connect()
        let data = randomBytes(size)
        let r = try await conn.execute("cat", stdin: data, outputLimit: size + 1)
        #expect(r.stdout.count == size)
        #expect(r.stdout == data)
        #expect(r.stderr.isEmpty)
        #expect(r.exitStatus == .exited(0))
        await conn.close()
    }

    @Test func aCommandThatIgnoresItsStdinStillReportsItsExitStatus() async throws {
        let conn = try await connect()
        // the command exits after one byte; the other 20 MB of stdin have nowhere to go
        let r = try await conn.execute("head -c 1; exit 5", stdin: randomBytes(20_000_000))
        #expect(r.stdout.count == 1)
        #expect(r.exitStatus == .exited(5))
        #expect(try await conn.execute("echo ok").stdoutString == "ok\n")
        await conn.close()
    }

    @Test func generatedOutputWithoutStdin() async throws {
        let conn = try await connect()
        let r = try await conn.execute("head -c 10000000 /dev/zero", outputLimit: 20_000_000)
        #expect(r.stdout.count == 10_000_000 && r.stdout.allSatisfy { $0 == 0 })
        let empty = try await conn.execute("true")
        #expect(empty.stdout.isEmpty && empty.stderr.isEmpty && empty.succeeded)
        await conn.close()
    }

    @Test func stderrFloodDoesNotStallStdout() async throws {
        let conn = try await connect()
        // far more than one channel window of stderr before any stdout
        let r = try await conn.execute("head -c 8000000 /dev/zero >&2; echo done", outputLimit: 9_000_000)
        #expect(r.stderr.count == 8_000_000)
        #expect(r.stdoutString == "done\n")
        // both streams flooding at once
        let both = try await conn.execute(
            "head -c 6000000 /dev/zero >&2 & head -c 6000000 /dev/zero; wait", outputLimit: 13_000_000)
        #expect(both.stdout.count == 6_000_000 && both.stderr.count == 6_000_000)
        await conn.close()
    }

    @Test(arguments: [Int32(0), 1, 42, 255])
    func exitCodesAreResults(code: Int32) async throws {
        let conn = try await connect()
        let r = try await conn.execute("echo out; echo err >&2; exit \(code)")
        #expect(r.exitStatus == .exited(code))
        #expect(r.stdoutString == "out\n" && r.stderrString == "err\n")
        await conn.close()
    }

    @Test(arguments: ["KILL", "TERM", "SEGV"])
    func signalsAreReportedByName(signal: String) async throws {
        let conn = try await connect()
        let r = try await conn.execute("kill -\(signal) $$")
        guard case .signaled(let name, _) = r.exitStatus else {
            Issue.record("expected a signal, got \(r.exitStatus)"); return
        }
        #expect(name == signal)
        await conn.close()
    }

    @Test func thirtyTwoConcurrentCommandsOnOneConnection() async throws {
        let conn = try await connect()
        let (results, seconds) = try await measure {
            try await withThrowingTaskGroup(of: (Int, SSHCommandResult).self) { group in
                for i in 0..<32 {
                    group.addTask { (i, try await conn.execute("sleep 1; echo \(i); echo e\(i) >&2")) }
                }
                var all: [Int: SSHCommandResult] = [:]
                for try await (i, r) in group { all[i] = r }
                return all
            }
        }
        #expect(results.count == 32)
        for (i, r) in results {
            #expect(r.stdoutString == "\(i)\n" && r.stderrString == "e\(i)\n" && r.succeeded)
        }
        // 32 one-second commands one after another would take 32 s
        #expect(seconds < 16, "took \(seconds) s: commands did not run concurrently")
        await conn.close()
    }

    @Test func environmentIsSentOrFallsBackWhenRefused() async throws {
        let conn = try await connect()
        // AcceptEnv SSHKIT_* on the fixture: sent as env requests
        let accepted = try await conn.execute("printf %s \"$SSHKIT_GREETING\"", environment: ["SSHKIT_GREETING": "hi there"])
        #expect(accepted.stdoutString == "hi there")
        #expect(!accepted.usedEnvironmentFallback)
        // refused by AcceptEnv: set by prefixing the command
        let refused = try await conn.execute("printf %s \"$OTHER_VAR\"", environment: ["OTHER_VAR": "it's $(id)"])
        #expect(refused.stdoutString == "it's $(id)")
        #expect(refused.usedEnvironmentFallback)
        let e = await expectSSHError { try await conn.execute("true", environment: ["BAD-NAME": "x"]) }
        #expect(e?.code == .invalidArgument)
        await conn.close()
    }

    @Test func outputLimitIsEnforcedAndTheConnectionSurvives() async throws {
        let conn = try await connect()
        let e = await expectSSHError { try await conn.execute("head -c 300000 /dev/zero", outputLimit: 100_000) }
        #expect(e?.code == .outputLimitExceeded)
        let r = try await conn.execute("echo still here", outputLimit: 100)
        #expect(r.stdoutString == "still here\n")
        await conn.close()
    }

    @Test func cancellingOneCommandClosesOnlyItsChannel() async throws {
        let conn = try await connect()
        let marker = "sleep 37.\(Int.random(in: 100...999))"
        let long = Task { try await conn.execute(marker) }
        let sibling = Task { try await conn.execute("sleep 1; echo sibling") }
        try await Task.sleep(for: .milliseconds(400))
        let (e, seconds) = await measure { () async -> SSHError? in
            long.cancel()
            return await expectSSHError { try await long.value }
        }
        #expect(e?.code == .cancelled)
        #expect(seconds < 5) // catches a hang, not a benchmark
        #expect(try await sibling.value.stdoutString == "sibling\n")
        #expect(try await conn.execute("echo after").stdoutString == "after\n")
        #expect(conn.isConnected)
        // the cancelled command does not keep running on the server
        var left = ""
        for _ in 0..<50 {
            left = try TestServer.run("/usr/bin/pgrep", ["-f", marker], allowFailure: true)
            if left.isEmpty { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(left.isEmpty, "remote process still running: \(left)")
        await conn.close()
    }

    @Test func closingTheConnectionFailsRunningCommandsAndLaterCallsAreMisuse() async throws {
        let conn = try await connect()
        let running = Task { try await conn.execute("sleep 20") }
        try await Task.sleep(for: .milliseconds(300))
        await conn.close()
        #expect(!conn.isConnected)
        #expect(await expectSSHError { try await running.value }?.code == .connectionClosed)
        await conn.close() // idempotent
        SSHMisuse.trapsInDebugBuilds.store(false, ordering: .relaxed)
        defer { SSHMisuse.trapsInDebugBuilds.store(true, ordering: .relaxed) }
        let e = await expectSSHError { try await conn.execute("true") }
        #expect(e?.code == .invalidState)
        #expect(e?.message.contains("execute") == true)
    }

    @Test func useAfterCloseTrapsInDebugBuilds() async {
        _ = TestServer.shared // the child process uses its parent's server
        // the child process must die in the trap; if it got an error back instead, it exits 0
        await #expect(processExitsWith: .failure) {
            do {
                let server = try TestServer.attach(dir: TestServer.directory(pid: getppid(), name: "shared"))
                let conn = try await SSHClient.connect(server.configuration())
                await conn.close()
                _ = try await conn.execute("true")
            } catch {}
            exit(0)
        }
    }

    @Test func withConnectionClosesAfterTheBody() async throws {
        let kept = try await SSHClient.withConnection(server.configuration()) { conn in
            let r = try await conn.execute("echo x")
            #expect(r.stdoutString == "x\n")
            return conn
        }
        #expect(!kept.isConnected)
    }

    @Test func invalidArguments() async throws {
        let conn = try await connect()
        #expect(await expectSSHError { try await conn.execute("echo \0") }?.code == .invalidArgument)
        #expect(await expectSSHError { try await conn.execute("true", outputLimit: -1) }?.code == .invalidArgument)
        await conn.close()
    }
}
