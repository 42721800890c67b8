import Foundation
import SSHKit
import ServerTransport
import Synchronization
import Testing

/// What only the SSHKit transport promises: one shared connection, reconnecting, the
/// remote home, quoting and the classification of SSH failures.
@Suite("SSHKit transport", .tags(.integration), .serialized)
struct SSHTransportTests {
    let server = TestServer.shared

    @Test func manyCallsInFlightShareOneConnection() async throws {
        let t = SSHTransport(configuration: server.configuration())
        defer { Task { await t.close() } }
        let root = "~/shared-\(UInt32.random(in: 0...UInt32.max))"
        try await t.createDirectory(root)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<48 {
                group.addTask {
                    switch i % 3 {
                    case 0:
                        try await t.writeTextFile("\(root)/f\(i)", "file \(i)")
                        #expect(try await t.readTextFile("\(root)/f\(i)") == "file \(i)")
                    case 1:
                        let r = try await t.runProcess("/bin/echo", "run", "\(i)")
                        #expect(r.stdoutString == "run \(i)\n")
                    default:
                        #expect(try await t.stat(root).kind == .directory)
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try await t.listDirectory(root).count == 16)
        #expect(await t.connectionsMade == 1)
        _ = try await t.runProcess("/bin/rm", "-rf", "--", String(root.dropFirst(2)))
    }

    @Test func aCancelledCallerDoesNotWaitForTheSharedConnect() async throws {
        let silent = try FakeServer(.silent)
        defer { silent.stop() }
        let t = SSHTransport(configuration: SSHConfiguration(
            host: "127.0.0.1", port: silent.port, user: "nobody", authentication: .password("x"),
            hostKeyPolicy: .pinned(["SHA256:AAAA"]), connectTimeout: .seconds(4)))
        defer { Task { await t.close() } }
        // two callers wait for one connect that the server never answers
        let patient = Task { try await t.fileExists("/") }
        let impatient = Task { try await t.fileExists("/") }
        try await Task.sleep(for: .milliseconds(300))
        let clock = ContinuousClock(), start = clock.now
        impatient.cancel()
        do {
            _ = try await impatient.value
            Issue.record("a cancelled call succeeded")
        } catch let e as TransportError {
            #expect(e.isCancellation, "\(e)")
        }
        let waited = clock.now - start
        // a generous bound that only catches waiting out the 4 s connect
        #expect(waited < .seconds(2), "the cancelled caller waited \(waited)")
        // the other caller still gets the connect's own outcome
        do {
            _ = try await patient.value
            Issue.record("connected to a silent server")
        } catch let e as TransportError {
            #expect(e.code == .hostUnreachable && !e.isCancellation, "\(e)")
        }
        #expect(silent.accepted.load(ordering: .relaxed) == 1, "one connect for both callers")
        #expect(await t.connectionsMade == 0)
    }

    /// More processes than the server's MaxSessions: the rest wait for a free session
    /// instead of being refused; a streamed process holds its session until it ends.
    @Test(arguments: ["sshkit", "openssh"])
    func callsBeyondMaxSessionsWaitForAFreeSession(_ name: String) async throws {
        let own = try TestServer.start(name: "transport-sessions-\(name)", extraConfig: ["MaxSessions 3"])
        defer { own.stop() }
        let t: any ServerTransport
        if name == "sshkit" {
            t = SSHTransport(configuration: own.configuration(), maxSessions: 3)
        } else {
            t = try TransportContractTests.openSSH(own, maxSessions: 3)
        }
        // the SFTP session (or the one kept for stopping commands) plus two processes at once
        let results = try await withThrowingTaskGroup(of: String.self) { group in
            for i in 0..<12 {
                group.addTask { try await t.runProcess("/bin/sh", "-c", "sleep 0.2; echo \(i)").stdoutString }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.sorted() == (0..<12).map { "\($0)\n" }.sorted())
        // two streamed processes hold both sessions: a third call waits until one ends
        let first = try await t.startProcess("/bin/cat", arguments: [], environment: [:])
        let second = try await t.startProcess("/bin/cat", arguments: [], environment: [:])
        let third = Task { try await t.runProcess("/bin/echo", "third").stdoutString }
        try await Task.sleep(for: .milliseconds(600))
        let waiting = Task { try await t.runProcess("/bin/echo", "never") }
        try await Task.sleep(for: .milliseconds(200))
        waiting.cancel() // a waiter that gives up leaves the line
        do {
            _ = try await waiting.value
            Issue.record("a cancelled waiter ran")
        } catch let e as TransportError {
            #expect(e.isCancellation, "\(e)")
        }
        first.input.finish()
        #expect(try await first.exitStatus() == .exited(0))
        #expect(try await third.value == "third\n")
        second.cancel()
        _ = try? await second.exitStatus()
        #expect(try await t.runProcess("/bin/echo", "after").stdoutString == "after\n")
        if let k = t as? SSHTransport {
            #expect(await k.connectionsMade == 1)
            await k.close()
        }
        if let o = t as? OpenSSHTransport {
            await o.close()
            try? FileManager.default.removeItem(atPath: o.controlDirectory)
        }
    }

    @Test func reconnectsWhenTheConnectionDropsAndNeverRerunsAProcess() async throws {
        let own = try TestServer.start(name: "transport-drop")
        defer { own.stop() }
        let t = SSHTransport(configuration: own.configuration())
        defer { Task { await t.close() } }
        try await t.writeTextFile("~/drop.txt", "before")
        try await t.removeFile("~/ran.log")
        // a process that records each start, then waits: killed with its session
        let running = Task {
            try await t.runProcess("/bin/sh", "-c", "echo start >> ~/ran.log; sleep 30")
        }
        try await Task.sleep(for: .milliseconds(500))
        for p in own.sessionProcessTree() { kill(p, SIGKILL) }
        do {
            _ = try await running.value
            Issue.record("the process survived its connection")
        } catch let e as TransportError {
            #expect(e.code == .hostUnreachable, "\(e)")
        }
        // the next call connects again by itself
        #expect(try await t.readTextFile("~/drop.txt") == "before")
        #expect(await t.connectionsMade == 2)
        #expect(try await t.readTextFile("~/ran.log") == "start\n") // ran once, not re-run
        try await t.removeFile("~/ran.log")
        try await t.removeFile("~/drop.txt")
    }

    @Test func tildeIsTheRemoteHomeForFilesAndExecutables() async throws {
        let t = SSHTransport(configuration: server.configuration())
        defer { Task { await t.close() } }
        let home = try await t.runProcess("/bin/sh", "-c", "printf %s \"$HOME\"").stdoutString
        #expect(home.hasPrefix("/") && home != "/root")
        let name = "tilde-\(UInt32.random(in: 0...UInt32.max)).sh"
        try await t.writeTextFile("~/\(name)", "#!/bin/sh\nprintf '%s|' \"$@\" \"$GREETING\"\n")
        #expect(try await t.fileExists(home + "/" + name))
        #expect(try await t.fileExists(name)) // relative paths are relative to the home too
        _ = try await t.runProcess("/bin/chmod", "755", "~/\(name)".replacingOccurrences(of: "~/", with: home + "/"))
        let r = try await t.runProcess("~/\(name)", arguments: ["a b", "'q'", "$(id)", "-x", ""], stdin: [],
                                       environment: ["GREETING": "hi there; $USER"], timeout: .seconds(30))
        #expect(r.stdoutString == "a b|'q'|$(id)|-x||hi there; $USER|", "\(r.stderrString)")
        try await t.removeFile("~/\(name)")
    }

    @Test func sshFailuresAreClassifiedForAUI() async throws {
        // a key the policy does not know
        let wrongKey = SSHTransport(configuration: server.configuration(policy: .pinned(["SHA256:AAAA"])))
        await #expect(throws: TransportError.self) { try await wrongKey.connect() }
        do {
            _ = try await wrongKey.readFile("~/x")
        } catch {
            #expect(error.code == .hostKeyRejected, "\(error)")
        }
        // a key the server does not accept
        let wrongAuth = SSHTransport(configuration: server.configuration(.privateKey(path: server.key("id_unauthorized"))))
        do {
            try await wrongAuth.connect()
            Issue.record("authenticated with an unauthorized key")
        } catch {
            #expect(error.code == .authenticationFailed, "\(error)")
        }
        // nothing listening
        let gone = try TestServer.start(name: "transport-gone")
        let config = gone.configuration(connectTimeout: .seconds(5))
        gone.stop()
        let unreachable = SSHTransport(configuration: config)
        do {
            _ = try await unreachable.runProcess("/bin/true")
            Issue.record("ran on a stopped server")
        } catch {
            #expect(error.code == .hostUnreachable, "\(error)")
        }
        // a closed transport says so, and connects no more
        let closed = SSHTransport(configuration: server.configuration())
        #expect(try await closed.fileExists("/"))
        await closed.close()
        do {
            _ = try await closed.fileExists("/")
            Issue.record("a closed transport still works")
        } catch {
            #expect(error.code == .other, "\(error)")
        }
        #expect(await closed.connectionsMade == 1)
    }

    @Test func aTimeoutStopsTheRemoteCommandAndKeepsTheConnection() async throws {
        let t = SSHTransport(configuration: server.configuration())
        defer { Task { await t.close() } }
        let (error, seconds) = await measure { () -> TransportError? in
            do {
                _ = try await t.runProcess("/bin/sh", arguments: ["-c", "echo partial; exec sleep 41.5"], stdin: [],
                                           environment: [:], timeout: .milliseconds(300))
                return nil
            } catch let e as TransportError {
                return e
            } catch {
                return nil
            }
        }
        #expect(error?.code == .timedOut && error?.timeout == .milliseconds(300), "\(String(describing: error))")
        #expect(error?.partialStdout == Array("partial\n".utf8))
        #expect(seconds < 10)
        // TERM reached the command (exec'd by the shell): nothing is left on the server
        try await Task.sleep(for: .milliseconds(300))
        let left = try TestServer.runCapturing("/usr/bin/pgrep", ["-f", "^sleep 41\\.5$"])
        #expect(left.out.isEmpty, "left running: \(left.out)")
        #expect(try await t.runProcess("/bin/echo", "still").stdoutString == "still\n")
        #expect(await t.connectionsMade == 1)
    }

    @Test func aWatchRidesOutADroppedConnection() async throws {
        let own = try TestServer.start(name: "transport-watch")
        defer { own.stop() }
        let t = SSHTransport(configuration: own.configuration())
        defer { Task { await t.close() } }
        let file = "~/watch-drop.txt"
        try await t.writeTextFile(file, "one")
        let log = ChangeLog()
        let reader = Task {
            for await change in t.watchPaths([file], pollInterval: .milliseconds(150)) { await log.add(change) }
        }
        defer { reader.cancel() }
        try await Task.sleep(for: .milliseconds(600))
        // the connection drops: polls fail for a moment, which is no change
        for p in own.sessionProcessTree() { kill(p, SIGKILL) }
        try await Task.sleep(for: .milliseconds(1500))
        let during = await log.changes
        #expect(during.isEmpty, "\(during)")
        // it reconnected by itself, and sees the next change
        try await t.writeTextFile(file, "two, longer")
        #expect(await log.waitFor(file))
        #expect(await t.connectionsMade >= 2)
        try await t.removeFile(file)
    }
}
