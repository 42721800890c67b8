import Foundation
import SSHKit
import ServerTransport
import Testing

/// The terminal contract, on the SSH transport (a PTY channel) and the local one (a
/// pseudo-terminal of this machine): a real controlling terminal of the given size and
/// TERM, keystrokes in, the screen out, resizes, Ctrl-C as a signal, hang-up.
@Suite("Terminal transports", .tags(.integration), .serialized)
struct TerminalTransportTests {
    enum Kind: String, CaseIterable, Sendable { case ssh, local }

    static func transport(_ kind: Kind) -> any TerminalTransport {
        switch kind {
        case .ssh: SSHTransport(configuration: TestServer.shared.configuration())
        case .local: LocalTransport()
        }
    }

    static func close(_ t: any TerminalTransport) async {
        if let s = t as? SSHTransport { await s.close() }
    }

    /// Reads the terminal's output until `text` appears (20 s at most); all of it.
    static func read(_ t: TransportTerminal, until text: String) async -> String {
        let result = await finishes(within: .seconds(20)) { () async -> String in
            var all = ""
            for await chunk in t.output {
                all += String(decoding: chunk, as: UTF8.self)
                if all.contains(text) { break }
            }
            return all
        }
        return (try? result?.get()) ?? ""
    }

    @Test(arguments: Kind.allCases)
    func aProgramHasAControllingTerminalOfTheGivenSizeThatFollowsResizes(_ kind: Kind) async throws {
        let t = Self.transport(kind)
        defer { Task { await Self.close(t) } }
        let script = "tty; echo \"term=$TERM\"; stty size; IFS= read -r line; echo \"got=$line\"; stty size"
        let term = try await t.startTerminal("/bin/sh", arguments: ["-c", script], environment: [:],
                                             terminal: SSHTerminal(term: "vt100", size: SSHTerminalSize(columns: 91, rows: 27)))
        let first = await Self.read(term, until: "27 91")
        #expect(first.contains("/dev/pts/"), "\(first)")
        #expect(first.contains("term=vt100"))
        try term.resize(to: SSHTerminalSize(columns: 100, rows: 33))
        try await Task.sleep(for: .milliseconds(200))
        try await term.input.write(Array("hello\r".utf8))
        let second = await Self.read(term, until: "33 100")
        #expect(second.contains("got=hello"), "\(second)")
        #expect(second.contains("33 100"))
        #expect(try await term.exitStatus() == .exited(0))
    }

    @Test(arguments: Kind.allCases)
    func ctrlCInterruptsTheForegroundProgramAndHangUpEndsIt(_ kind: Kind) async throws {
        let t = Self.transport(kind)
        defer { Task { await Self.close(t) } }
        // Ctrl-C is the terminal's: SIGINT to the foreground process group
        let sleeper = try await t.startTerminal("/bin/sh", arguments: ["-c", "echo ready; exec sleep 100"], environment: [:],
                                                terminal: SSHTerminal())
        #expect(await Self.read(sleeper, until: "ready").contains("ready"))
        try await Task.sleep(for: .milliseconds(100))
        try await sleeper.input.write([0x03])
        let status = await finishes(within: .seconds(20)) { try await sleeper.exitStatus() }
        #expect(try status?.get() == .signaled("INT", coreDumped: false))

        // a hang-up ends a program that ignores its input
        let other = try await t.startTerminal("/bin/sh", arguments: ["-c", "echo up; exec sleep 100"], environment: [:],
                                              terminal: SSHTerminal())
        #expect(await Self.read(other, until: "up").contains("up"))
        other.cancel()
        let ended = await finishes(within: .seconds(20)) { () async -> Bool in
            for await _ in other.output {}
            return true
        }
        #expect(ended != nil, "the output ended after the hang-up")
        await #expect(throws: TransportError.self) { try await other.input.write(Array("x".utf8)) }
    }

    @Test func aMissingProgramEndsWithStatus127OnTheLocalTerminal() async throws {
        let term = try await LocalTransport().startTerminal("/no/such/program", arguments: [], environment: [:],
                                                            terminal: SSHTerminal())
        #expect(await Self.read(term, until: "No such file").contains("/no/such/program"))
        #expect(try await term.exitStatus() == .exited(127))
        try term.resize(to: SSHTerminalSize(columns: 10, rows: 10))
    }
}
