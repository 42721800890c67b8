import Foundation
import Testing

/// The ssh-exec example, run as a process against the fixture sshd.
@Suite("Examples")
struct ExampleTests {
    let server = TestServer.shared

    static var binary: String { TestServer.packageRoot + "/.build/debug/ssh-exec" }

    func run(_ args: [String], env: [String: String] = [:]) throws -> (status: Int32, out: String, err: String) {
        try TestServer.runCapturing(Self.binary, args, env: env)
    }

    var common: [String] { ["--host", server.host, "--port", "\(server.port)", "--user", server.user] }

    @Test func runsACommandAndExitsWithItsStatus() throws {
        #expect(FileManager.default.isExecutableFile(atPath: Self.binary), "build the package first (swift build)")
        let r = try run(common + ["--key", server.key("id_ed25519"), "--fingerprint", server.fingerprintEd25519,
                                  "--fingerprint", server.fingerprintECDSA, "--fingerprint", server.fingerprintRSA,
                                  "--", "echo hello; echo oops >&2; exit 7"])
        #expect(r.status == 7)
        #expect(r.out == "hello\n")
        #expect(r.err == "oops\n")
    }

    @Test func aSignaledCommandExitsWith128PlusTheSignal() throws {
        let r = try run(common + ["--key", server.key("id_ed25519"), "--insecure-accept-any-host-key",
                                  "--", "kill -KILL $$"])
        #expect(r.status == 128 + 9)
        #expect(r.err.contains("SIGKILL"))
    }

    @Test func passwordFromTheEnvironmentAndInsecureFlag() throws {
        let r = try run(common + ["--password-from-env", "--insecure-accept-any-host-key", "--", "id", "-un"],
                        env: ["SSHKIT_PASSWORD": server.password])
        #expect(r.status == 0)
        #expect(r.out == server.user + "\n")
    }

    @Test func wrongFingerprintIsRefusedWithAClearMessage() throws {
        let r = try run(common + ["--key", server.key("id_ed25519"), "--fingerprint", "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "--", "true"])
        #expect(r.status == 255)
        #expect(r.err.contains("hostKeyRejected"))
        #expect(r.err.contains("presented"))
    }

    @Test func refusesToRunWithoutAHostKeyDecision() throws {
        let r = try run(common + ["--key", server.key("id_ed25519"), "--", "true"])
        #expect(r.status != 0)
        #expect(r.err.contains("--fingerprint"))
    }
}
