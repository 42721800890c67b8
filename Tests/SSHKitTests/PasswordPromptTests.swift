import Foundation
import SSHKit
import Testing

/// `SSHAuthentication.Method.passwordPrompt`: the password asked for when the server
/// offers password authentication, again after a refusal, against the fixture sshd
/// (whose PAM delays each refusal by about two seconds).
@Suite("Password prompts", .tags(.integration))
struct PasswordPromptTests {
    let server = TestServer.shared

    actor Requests {
        var all: [SSHPasswordRequest] = []
        func add(_ r: SSHPasswordRequest) { all.append(r) }
    }

    @Test func aRefusedPasswordIsAskedForAgainUntilTheRightOne() async throws {
        let seen = Requests()
        let pw = server.password
        let conn = try await SSHClient.connect(server.configuration(SSHAuthentication([
            .passwordPrompt(attempts: 3) { request in
                await seen.add(request)
                return request.attempt == 1 ? "wrong-\(UUID())" : pw
            },
        ])))
        let r = try await conn.execute("id -un")
        #expect(r.stdoutString == server.user + "\n")
        await conn.close()
        let requests = await seen.all
        #expect(requests.map(\.attempt) == [1, 2])
        #expect(requests.first?.prompt == "\(server.user)@\(server.host)'s password: ")
        #expect(requests.first?.user == server.user && requests.first?.host == server.host)
    }

    @Test func afterTheLastAttemptAuthenticationFails() async throws {
        let seen = Requests()
        let e = await expectSSHError {
            try await SSHClient.connect(server.configuration(SSHAuthentication([
                .passwordPrompt(attempts: 2) { request in
                    await seen.add(request)
                    return "wrong"
                },
            ])))
        }
        #expect(e?.code == .authenticationFailed)
        #expect(e?.message.contains("tried: password") == true, "\(String(describing: e))")
        #expect(await seen.all.map(\.attempt) == [1, 2])
    }

    /// nil: no password, the next method is tried at once (no refusal waited for).
    @Test func noAnswerGoesOnToTheNextMethod() async throws {
        let seen = Requests()
        let conn = try await SSHClient.connect(server.configuration(SSHAuthentication([
            .passwordPrompt(attempts: 3) { request in
                await seen.add(request)
                return nil
            },
            .privateKeyFile(path: server.key("id_ed25519"), passphrase: nil),
        ])))
        #expect(try await conn.execute("true").exitStatus == .exited(0))
        await conn.close()
        #expect(await seen.all.count == 1)
    }

    @Test func aResponderThatThrowsEndsAuthenticationWithTheCause() async {
        struct Interrupted: Error {}
        let e = await expectSSHError {
            try await SSHClient.connect(server.configuration(SSHAuthentication([
                .passwordPrompt(attempts: 3) { _ in throw Interrupted() },
                .privateKeyFile(path: server.key("id_ed25519"), passphrase: nil),
            ])))
        }
        #expect(e?.code == .authenticationFailed)
        #expect(e?.cause is Interrupted)
    }

    /// A server that does not offer password authentication is never asked about one.
    @Test func notAskedWhenTheServerDoesNotOfferPasswords() async throws {
        let keysOnly = try TestServer.start(name: "keys-only-\(UUID().uuidString.prefix(6))",
                                            extraConfig: ["PasswordAuthentication no"])
        defer { keysOnly.stop() }
        let seen = Requests()
        let conn = try await SSHClient.connect(keysOnly.configuration(SSHAuthentication([
            .passwordPrompt(attempts: 3) { request in
                await seen.add(request)
                return "x"
            },
            .privateKeyFile(path: keysOnly.key("id_ed25519"), passphrase: nil),
        ])))
        await conn.close()
        #expect(await seen.all.isEmpty)
    }
}
