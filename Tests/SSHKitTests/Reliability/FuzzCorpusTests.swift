import Foundation
import Testing

/// Part 6 of the reliability suite in CI: every seed input of every fuzz target
/// (Fuzz/Corpus, and the inputs fuzzing once crashed on, kept there as regressions) runs
/// through the target's invariants, without libFuzzer. `scripts/fuzz.sh` does the fuzzing.
@Suite("Reliability: fuzz corpora", .tags(.process))
struct FuzzCorpusTests {
    static let targets = ["known-hosts", "socks", "sftp-reply", "terminal-modes", "environment", "quoting", "ssh-config"]

    @Test(arguments: targets)
    func everySeedInputKeepsTheInvariants(_ target: String) throws {
        let dir = TestServer.packageRoot + "/Fuzz/Corpus/" + target
        let files = try FileManager.default.contentsOfDirectory(atPath: dir).sorted().map { dir + "/" + $0 }
        #expect(!files.isEmpty)
        let r = try TestServer.runCapturing(TestServer.packageRoot + "/.build/debug/sshkit-fuzz", [target] + files)
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.contains("\(files.count) inputs, no invariant violated"), "\(r.out)")
    }
}
