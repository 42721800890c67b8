import Foundation
import SSHKit
import Testing

@Suite("Shell quoting")
struct QuotingTests {
    @Test func quotesForPOSIXShells() {
        #expect(SSHShellQuoting.quote("abc") == "abc")
        #expect(SSHShellQuoting.quote("") == "''")
        #expect(SSHShellQuoting.quote("a b") == "'a b'")
        #expect(SSHShellQuoting.quote("it's") == "'it'\\''s'")
        #expect(SSHShellQuoting.quote("$(rm -rf /)") == "'$(rm -rf /)'")
        #expect(SSHShellQuoting.quote("A=b") == "'A=b'")
        #expect(SSHShellQuoting.command(["printf", "%s", "a'b"]) == "printf '%s' 'a'\\''b'")
    }

    @Test(arguments: ["plain", "", "sp ace", "quote'inside", "\"dq\"", "$HOME", "`id`", "back\\slash",
                      "new\nline", "tab\there", "ümlaut", "*?[glob]", ";&|<>", "-n", "!bang"])
    func roundTripsThroughSh(_ s: String) throws {
        let out = try TestServer.run("/bin/sh", ["-c", "printf %s " + SSHShellQuoting.quote(s)])
        #expect(out == s)
        let outDash = try TestServer.run("/bin/bash", ["-c", "printf %s " + SSHShellQuoting.quote(s)])
        #expect(outDash == s)
    }

    @Test func environmentNames() {
        for ok in ["A", "_", "SSHKIT_X1", "lower_case"] { #expect(SSHShellQuoting.isValidEnvironmentName(ok)) }
        for bad in ["", "1A", "A-B", "A B", "A=B", "Ä", "A;B"] { #expect(!SSHShellQuoting.isValidEnvironmentName(bad)) }
    }
}
