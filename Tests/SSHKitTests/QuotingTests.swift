import Foundation
import SSHKit
@testable import ServerTransport
import Testing

@Suite("Shell quoting", .tags(.pure))
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

    /// A quote followed by a combining mark is one Swift Character that is not "'": the
    /// quoting once compared Characters and left that quote unescaped, so the rest of the
    /// argument ran as shell code (found by the quoting proof, Reliability part 7).
    @Test func aQuoteWithACombiningMarkStaysQuoted() throws {
        let dir = try TestPaths.makeTemporaryDirectory("quote-mark")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for mark in ["\u{301}", "\u{20DD}", "\u{FE0F}", "\u{200D}"] {
            let s = "'\(mark); touch \(dir)/injected; '\(mark)"
            #expect(SSHShellQuoting.quote(s).utf8.count == s.utf8.count + 2 + 2 * 3)
            for shell in ["/bin/sh", "/bin/bash"] {
                let out = try TestServer.run(shell, ["-c", "printf %s " + SSHShellQuoting.quote(s)])
                #expect(Array(out.utf8) == Array(s.utf8), "\(shell) \(mark.unicodeScalars.map { $0.value })")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: dir + "/injected"))
    }

    /// "~/" or "/" followed by a combining mark is one Character: paths were once tested
    /// with Character prefixes, so such a path lost its home or became relative.
    @Test func pathPrefixesAreBytes() {
        #expect(SSHTransport.resolve("~/\u{200D}x", home: "/h") == "/h/\u{200D}x")
        #expect(OpenSSHTransport.word("~/\u{301}a") == "\"$HOME\"/'\u{301}a'")
        #expect(LocalTransport().resolve("~/\u{301}").hasSuffix("/\u{301}"))
        #expect(!LocalTransport().resolve("~/\u{301}").hasPrefix("~"))
        #expect("/\u{301}a".byteHasPrefix("/"))
        #expect(!"/\u{301}a".hasPrefix("/")) // what Swift's own hasPrefix says
        #expect("a/\u{301}b//c".byteComponents(separatedBy: UInt8(ascii: "/")) == ["a", "\u{301}b", "c"])
    }

    @Test func environmentNames() {
        for ok in ["A", "_", "SSHKIT_X1", "lower_case"] { #expect(SSHShellQuoting.isValidEnvironmentName(ok)) }
        for bad in ["", "1A", "A-B", "A B", "A=B", "Ä", "A;B"] { #expect(!SSHShellQuoting.isValidEnvironmentName(bad)) }
    }
}
