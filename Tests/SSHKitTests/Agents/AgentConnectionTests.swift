@testable import AgentSessions
import Foundation
import SSHKit
import ServerTransport
import Synchronization
import Testing

/// The connection monitor against real sshd connections: states as events, the limit of
/// connected hosts, hosts in use never dropped, and a lost connection retried with
/// backoff (given up without live agents, retried without end with them), through a
/// proxy that resets every connection on command.
@Suite("Agent connections", .tags(.integration), .serialized)
struct AgentConnectionTests {
    /// Short intervals, so the backoff runs in a test's time; health checks only when asked.
    static func quickPolicy(maxHosts: Int = 10, health: Duration = .seconds(3600)) -> AgentConnectionPolicy {
        AgentConnectionPolicy(maxConnectedHosts: maxHosts, healthCheckInterval: health, healthCheckTimeout: .seconds(10),
                              backoff: [.milliseconds(200), .milliseconds(400), .milliseconds(600)],
                              slowRetryInterval: .milliseconds(300))
    }

    /// A host on the shared sshd under its own server id (the monitor counts hosts by id).
    static func host(_ name: String, port: Int? = nil) -> (AgentHost, SSHTransport) {
        var c = TestServer.shared.configuration()
        if let port { c.port = port }
        let t = SSHTransport(configuration: c, serverID: ServerID("test:\(name)"))
        return (AgentHost(transport: t, tmuxSocket: "sshkit-conn-\(UInt32.random(in: 0...UInt32.max))",
                          extraSearchPath: [FakeAgents.directory]), t)
    }

    /// Collects a monitor's events in the background.
    final class Recorder: Sendable {
        final class Log: Sendable {
            let events = Mutex<[AgentConnectionEvent]>([])
        }
        private let log = Log()
        var events: [AgentConnectionEvent] { log.events.withLock { $0 } }
        init(_ monitor: AgentConnections) async {
            let stream = await monitor.events()
            let log = log
            Task { for await e in stream { log.events.withLock { $0.append(e) } } }
        }
        func states(of id: ServerID) -> [AgentConnectionState] {
            events.filter { $0.host == id }.map(\.state)
        }
        func all(of id: ServerID) -> [AgentConnectionEvent] { events.filter { $0.host == id } }
    }

    @Test func aHostConnectsOnFirstUseAndItsStatesAreEvents() async throws {
        let monitor = AgentConnections(policy: Self.quickPolicy())
        let (host, t) = Self.host("a")
        defer { Task { await monitor.close(); await t.close() } }
        await monitor.add(host)
        let recorder = await Recorder(monitor)
        #expect(await monitor.state(of: host.serverID) == .disconnected)
        #expect(await t.connectionsMade == 0, "adding a host connects nothing")

        let home = try await monitor.withHost(host.serverID) { h in try await h.home() }
        #expect(home.hasPrefix("/"))
        #expect(await monitor.state(of: host.serverID) == .connected)
        #expect(await monitor.connectedHosts == [host.serverID])
        _ = await eventually { recorder.states(of: host.serverID).count >= 3 ? true : nil }
        #expect(recorder.states(of: host.serverID) == [.disconnected, .connecting, .connected])

        // the health check lists the host's live tmux sessions: none yet
        await monitor.checkAll()
        #expect(await monitor.liveSessions(on: host.serverID) == 0)
        #expect(await monitor.state(of: host.serverID) == .connected)

        await #expect(throws: AgentError.self) {
            try await monitor.withHost(ServerID("test:unknown")) { _ in }
        }
        // a host whose transport has no connection is always connected and not counted
        let local = AgentHost(transport: LocalTransport())
        await monitor.add(local)
        #expect(await monitor.state(of: local.serverID) == .connected)
        #expect(await monitor.connectedHosts == [host.serverID])
    }

    /// A failure names the host as its user does (its display name), not by the id the
    /// monitor keys it by, and says the cause once.
    @Test func aFailureNamesTheHostAsItsUserDoes() async throws {
        let monitor = AgentConnections(policy: Self.quickPolicy())
        var c = TestServer.shared.configuration()
        c.port = 1
        let t = SSHTransport(configuration: c, serverID: ServerID("5f0e6a1c-id-nobody-knows"))
        let host = AgentHost(transport: t, displayName: "build-1 (me@127.0.0.1:1)")
        defer { Task { await monitor.close(); await t.close() } }
        await monitor.add(host)
        let e = await #expect(throws: AgentError.self) { try await monitor.withHost(host.serverID) { h in try await h.home() } }
        #expect(e?.message == "connecting to build-1 (me@127.0.0.1:1): connection refused", "\(String(describing: e))")
    }

    @Test func atMostTheLimitIsConnectedAndOnlyIdleHostsAreDropped() async throws {
        let monitor = AgentConnections(policy: Self.quickPolicy(maxHosts: 2))
        let hosts = ["a", "b", "c"].map { Self.host($0) }
        let (a, b, c) = (hosts[0].0, hosts[1].0, hosts[2].0)
        defer { Task { await monitor.close(); for (_, t) in hosts { await t.close() } } }
        for (h, _) in hosts { await monitor.add(h) }

        for h in [a, b, c] {
            _ = try await monitor.withHost(h.serverID) { h in try await h.home() }
        }
        // c took a's place: a was the least recently used
        #expect(Set(await monitor.connectedHosts) == [b.serverID, c.serverID])
        #expect(await monitor.state(of: a.serverID) == .disconnected)
        #expect(await hosts[0].1.isConnected == false, "the dropped host's connection is closed")

        // a host in use is not dropped: with b in use, a takes c's place
        try await monitor.withHost(b.serverID) { _ in
            _ = try await monitor.withHost(a.serverID) { h in try await h.home() }
        }
        #expect(Set(await monitor.connectedHosts) == [a.serverID, b.serverID])
        #expect(await monitor.state(of: c.serverID) == .disconnected)
        // and c comes back on its next use (connects again)
        _ = try await monitor.withHost(c.serverID) { h in try await h.home() }
        #expect(await hosts[2].1.connectionsMade == 2)
    }

    @Test func anAttachedHostIsInUseUntilDetachedAndAnotherWaitsForIt() async throws {
        let monitor = AgentConnections(policy: Self.quickPolicy(maxHosts: 1))
        let (a, ta) = Self.host("a")
        let (b, tb) = Self.host("b")
        defer {
            Task {
                await monitor.close()
                _ = try? await ta.runProcess("tmux", "-L", a.tmuxSocket, "kill-server")
                await ta.close()
                await tb.close()
            }
        }
        await monitor.add(a)
        await monitor.add(b)
        let spec = AgentSessionSpec(ptyID: AgentPTYID(providerID: "claude", kind: .main, suffix: "conn\(UInt32.random(in: 0...UInt32.max))"),
                                    provider: try AgentProvider.named("claude"),
                                    settings: AgentProviderSettings(binary: "fake-tui"), workingDirectory: "/tmp",
                                    statusHooks: false)
        let session = try await monitor.withHost(a.serverID) { h in try await h.startAgent(spec) }
        let terminal = try await monitor.attach(session)
        #expect(await read(terminal, until: "READY>").contains("READY>"))

        // b needs the only slot, which a holds while attached: b waits
        let waiting = Task { try await monitor.withHost(b.serverID) { h in try await h.home() } }
        try await Task.sleep(for: .milliseconds(500))
        #expect(await monitor.state(of: b.serverID) == .disconnected)
        #expect(await monitor.connectedHosts == [a.serverID])
        #expect(await ta.isConnected)

        terminal.cancel()
        let home = await finishes(within: .seconds(20)) { try await waiting.value }
        #expect(try home?.get().hasPrefix("/") == true, "b connected once a was detached")
        #expect(await monitor.connectedHosts == [b.serverID])
        // the agent ran on in tmux while its host was dropped
        #expect(try await monitor.withHost(a.serverID) { h in try await h.state(of: session) } == .running)
    }

    /// Calls waiting for a connection slot wait in line on the gate, not in a sleep loop:
    /// a cancelled one leaves the line at once, and shutting the monitor down sends the
    /// rest away, while the host holding the slot keeps it.
    @Test func waitersForASlotLeaveWhenCancelledOrShutDown() async throws {
        let monitor = AgentConnections(policy: Self.quickPolicy(maxHosts: 1))
        let (a, ta) = Self.host("a")
        let (b, tb) = Self.host("b")
        let (c, tc) = Self.host("c")
        defer {
            Task {
                await ta.close()
                await tb.close()
                await tc.close()
            }
        }
        for h in [a, b, c] { await monitor.add(h) }
        let release = AsyncStream<Void>.makeStream()
        // a holds the only slot while its call runs
        let holding = Task {
            try await monitor.withHost(a.serverID) { _ in for await _ in release.stream { break } }
        }
        _ = await eventually { await monitor.connectedHosts == [a.serverID] ? true : nil }
        let waitingB = Task { try await monitor.withHost(b.serverID) { h in try await h.home() } }
        let waitingC = Task { try await monitor.withHost(c.serverID) { h in try await h.home() } }
        try await Task.sleep(for: .milliseconds(300))
        #expect(await monitor.state(of: b.serverID) == .disconnected)
        #expect(await monitor.state(of: c.serverID) == .disconnected)

        waitingB.cancel()
        let b1 = await finishes(within: .seconds(5)) { try await waitingB.value }
        #expect((b1?.error as? AgentError)?.code == .cancelled, "\(String(describing: b1))")
        #expect(await monitor.connectedHosts == [a.serverID], "a kept its slot")

        await monitor.close()
        let c1 = await finishes(within: .seconds(5)) { try await waitingC.value }
        #expect((c1?.error as? AgentError)?.code == .cancelled, "\(String(describing: c1))")
        let bConnected = await tb.isConnected, cConnected = await tc.isConnected
        #expect(!bConnected && !cConnected, "neither waiter connected")
        release.continuation.finish()
        _ = await finishes(within: .seconds(5)) { try await holding.value }
    }

    @Test func aLostConnectionIsRetriedWithBackoffThenGivenUpWithoutLiveAgents() async throws {
        let proxy = try FaultProxy(target: TestServer.shared.port)
        defer { proxy.stop() }
        let monitor = AgentConnections(policy: Self.quickPolicy())
        let (host, t) = Self.host("lost", port: proxy.port)
        defer { Task { await monitor.close(); await t.close() } }
        await monitor.add(host)
        let recorder = await Recorder(monitor)
        let id = host.serverID

        let first = try await monitor.withHost(id) { h in try await h.detectAgents() }
        #expect(try await monitor.withHost(id) { h in try await h.detectAgents() }.probedAt == first.probedAt, "cached")

        // every connection through the proxy is reset from now on
        proxy.arm { f, _, _ in f.resetServerToClientAt = 0 }
        await monitor.checkAll()
        let gaveUp = await eventually { () -> AgentConnectionEvent? in
            recorder.all(of: id).last.flatMap { $0.state == .disconnected && $0.attempt > 0 ? $0 : nil }
        }
        let events = recorder.all(of: id)
        #expect(gaveUp?.attempt == 3, "\(events)")
        #expect(gaveUp?.error?.code == .transport)
        #expect(events.compactMap(\.retryIn) == [.milliseconds(200), .milliseconds(400), .milliseconds(600)], "\(events)")
        #expect(events.filter { $0.state == .connecting }.count == 1 + 3, "the first connect and three retries")

        // the next use connects again, and what was cached about the host is gone
        proxy.arm { f, _, _ in f.resetServerToClientAt = nil }
        let again = try await monitor.withHost(id) { h in try await h.detectAgents() }
        #expect(again.probedAt > first.probedAt, "the detection cache was dropped on reconnect")
        #expect(await monitor.state(of: id) == .connected)
    }

    /// A host that stops answering (its bytes held back, the connection open) fails its
    /// health check with `noAnswer`, its own code: not `timedOut`, which is a process
    /// that ran past its limit on a host that answered.
    @Test func aHealthCheckWithNoAnswerSaysSo() async throws {
        let proxy = try FaultProxy(target: TestServer.shared.port)
        defer { proxy.stop() }
        let policy = AgentConnectionPolicy(maxConnectedHosts: 10, healthCheckInterval: .milliseconds(300),
                                           healthCheckTimeout: .seconds(1), backoff: [.milliseconds(200)],
                                           slowRetryInterval: .milliseconds(300))
        let monitor = AgentConnections(policy: policy)
        let (host, t) = Self.host("silent", port: proxy.port)
        await monitor.add(host)
        let recorder = await Recorder(monitor)
        let id = host.serverID
        _ = try await monitor.withHost(id) { h in try await h.home() }
        await monitor.setLiveSessions(1, on: id)
        let before = recorder.all(of: id).count
        proxy.arm { f, _, _ in f.holdServerToClient = true }
        let silent = await eventually { () -> AgentConnectionEvent? in
            recorder.all(of: id).dropFirst(before).first { $0.error != nil }
        }
        let cause = silent?.error?.cause as? TransportError
        #expect(silent?.error?.code == .transport && cause?.code == .noAnswer, "\(recorder.all(of: id).suffix(4))")
        #expect(silent?.error?.message.contains("health check") == true, "\(String(describing: silent))")
        proxy.arm { f, _, _ in f.holdServerToClient = false }
        // closed before the test ends, not by a task left behind
        await monitor.close()
        await t.close()
    }

    @Test func aHostWithLiveAgentsIsRetriedUntilItComesBack() async throws {
        let proxy = try FaultProxy(target: TestServer.shared.port)
        defer { proxy.stop() }
        let monitor = AgentConnections(policy: Self.quickPolicy(health: .milliseconds(300)))
        let (host, t) = Self.host("live", port: proxy.port)
        defer { Task { await monitor.close(); await t.close() } }
        await monitor.add(host)
        let recorder = await Recorder(monitor)
        let id = host.serverID
        _ = try await monitor.withHost(id) { h in try await h.home() }
        await monitor.setLiveSessions(1, on: id)

        proxy.arm { f, _, _ in f.resetServerToClientAt = 0 }
        // the health check (every 300 ms) finds the loss; past the backoff, slow retries go on
        let slow = await eventually { () -> AgentConnectionEvent? in
            recorder.all(of: id).last.flatMap { $0.state == .error && $0.attempt >= 5 ? $0 : nil }
        }
        #expect(slow?.retryIn == .milliseconds(300), "\(recorder.all(of: id).suffix(4))")
        #expect(!recorder.states(of: id).dropFirst().contains(.disconnected), "never given up while agents live")

        // the network comes back: the monitor reconnects by itself
        proxy.arm { f, _, _ in f.resetServerToClientAt = nil }
        let back = await eventually { () -> AgentConnectionEvent? in
            recorder.all(of: id).last.flatMap { $0.state == .connected && $0.reconnected ? $0 : nil }
        }
        #expect(back != nil, "\(recorder.all(of: id).suffix(4))")
        #expect(await monitor.state(of: id) == .connected)
    }
}

