import AgentSettingsExample
import Foundation
import ServerTransport
import Testing

/// The example service, tested the way services are meant to be: on `MockTransport`,
/// with scripted processes and simulated failures, no server needed.
@Suite("Example service on the mock transport", .tags(.pure))
struct AgentSettingsServiceTests {
    static let paths = ProgramPaths(root: "~/.agent", executable: "agent")

    func service(_ script: @escaping MockTransport.ProcessScript = { _ in
        ProcessResult(exitStatus: .exited(127), stdout: [], stderr: Array("agent: not found\n".utf8))
    }) async throws -> (AgentSettingsService, MockTransport) {
        let mock = MockTransport(script: script)
        try await mock.createDirectory("~")
        return (AgentSettingsService(context: ServerContext(transport: mock, paths: Self.paths)), mock)
    }

    @Test func settingsDefaultUntilWrittenAndUnknownKeysSurviveAnUpdate() async throws {
        let (service, mock) = try await service()
        #expect(try await service.settings() == .defaults)
        try await mock.createDirectory("~/.agent")
        try await mock.writeTextFile("~/.agent/config.json", #"{"model": "small", "theme": "dark", "plugins": [1, 2]}"#)
        #expect(try await service.settings().model == "small")
        let new = try await service.updateSettings { $0.maxTurns = 7 }
        #expect(new == .init(model: "small", maxTurns: 7, autoUpdate: true))
        // re-read through the transport: what is on the server, with the user's own keys
        let written = try JSONSerialization.jsonObject(with: Data(try await mock.readFile("~/.agent/config.json")))
            as? [String: Any]
        #expect(written?["theme"] as? String == "dark" && (written?["plugins"] as? [Int]) == [1, 2])
        #expect(try await service.settings().maxTurns == 7)
        #expect(mock.calls.contains("writeFile /home/user/.agent/config.json"))
    }

    @Test func aBrokenConfigIsATypedErrorAndIsLeftAlone() async throws {
        let (service, mock) = try await service()
        try await mock.createDirectory("~/.agent")
        try await mock.writeTextFile("~/.agent/config.json", "{ not json")
        do {
            _ = try await service.updateSettings { $0.model = "x" }
            Issue.record("wrote over a broken config")
        } catch {
            #expect(error.code == .other && error.path == "~/.agent/config.json", "\(error)")
        }
        #expect(try await mock.readTextFile("~/.agent/config.json") == "{ not json")
    }

    @Test func credentialsGoToA0600EnvFileAndKeepTheOtherLines() async throws {
        let (service, mock) = try await service()
        #expect(try await !service.hasCredential("API_KEY"))
        try await service.setCredential("OTHER", "keep me")
        try await service.setCredential("API_KEY", "sk-1")
        try await service.setCredential("API_KEY", "sk-2")
        #expect(try await mock.readTextFile("~/.agent/.env") == "OTHER=keep me\nAPI_KEY=sk-2\n")
        #expect(try await mock.stat("~/.agent/.env").permissions == 0o600)
        #expect(try await service.hasCredential("API_KEY"))
        await #expect(throws: TransportError.self) { try await service.setCredential("API_KEY", "a\nINJECTED=1") }
        await #expect(throws: TransportError.self) { try await service.setCredential("BAD NAME", "x") }
        #expect(try await mock.readTextFile("~/.agent/.env") == "OTHER=keep me\nAPI_KEY=sk-2\n")
    }

    @Test func theInstalledVersionFromAScriptedProgram() async throws {
        let (service, _) = try await service { run throws(TransportError) in
            #expect(run.commandLine == "agent --version" && run.timeout == .seconds(10))
            return ProcessResult(exitStatus: .exited(0), stdout: Array("agent 1.2.3\n".utf8), stderr: [])
        }
        #expect(try await service.installedVersion() == "agent 1.2.3")
        let (missing, _) = try await self.service()
        #expect(try await missing.installedVersion() == nil)
        let (broken, _) = try await self.service { _ in
            ProcessResult(exitStatus: .exited(2), stdout: [], stderr: Array("config error\n".utf8))
        }
        do {
            _ = try await broken.installedVersion()
            Issue.record("a failing program had a version")
        } catch {
            #expect(error.code == .commandFailed && error.exitCode == 2 && error.stderr == "config error\n")
        }
        let (hanging, _) = try await self.service { run throws(TransportError) in
            throw TransportError.timedOut(after: run.timeout ?? .zero, partialStdout: Array("agent".utf8))
        }
        do {
            _ = try await hanging.installedVersion()
            Issue.record("no timeout")
        } catch {
            #expect(error.code == .timedOut && error.timeout == .seconds(10))
        }
    }

    @Test func anUnreachableServerIsReportedAsSuch() async throws {
        let (service, mock) = try await service()
        mock.setUnreachable(true)
        do {
            _ = try await service.settings()
            Issue.record("read settings from an unreachable server")
        } catch {
            #expect(error.code == .hostUnreachable)
        }
    }

    @Test func recentSessionsFromASnapshotAndFromTheCacheWhenUnreachable() async throws {
        // a real SQLite database, made here, put on the mock server
        let dir = try TestPaths.makeTemporaryDirectory("agentdb")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try TestServer.run("/usr/bin/sqlite3", [dir + "/state.db", """
            CREATE TABLE sessions(id TEXT, title TEXT, updated_at INTEGER);
            INSERT INTO sessions VALUES ('a', 'first', 1), ('b', 'second', 2), ('c', 'third', 3);
            """])
        let mock = MockTransport(cache: SnapshotCache(directory: dir + "/cache"))
        try await mock.createDirectory("~/.agent")
        try await mock.writeFile("~/.agent/state.db", contents: Array(try Data(contentsOf: URL(fileURLWithPath: dir + "/state.db"))))
        let service = AgentSettingsService(context: ServerContext(transport: mock, paths: Self.paths))
        let (sessions, cached) = try await service.recentSessions(limit: 2)
        #expect(sessions.map(\.title) == ["third", "second"] && !cached)
        mock.setUnreachable(true)
        let (again, fromCache) = try await service.recentSessions(limit: 2)
        #expect(again == sessions && fromCache)
    }
}
