import Foundation
import Testing

/// scripts/install.sh as a user runs it (with the tools this test run built, `--from`):
/// every tool in PREFIX/bin answering `--version`, a man page per tool made from its
/// argument definitions, bash, zsh and fish completions where those shells look, an
/// install again that puts the same files, and `--uninstall` taking back exactly what it
/// put and nothing else.
@Suite("Installing the tools", .tags(.process), .serialized)
struct InstallTests {
    static let tools = ["agent-sessions", "ssh-exec", "ssh-shell", "ssh-sftp", "ssh-forward", "ssh-fleet", "known-hosts"]

    static func install(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        try TestServer.runCapturing("/bin/bash", [TestServer.packageRoot + "/scripts/install.sh"] + arguments,
                                    env: ["PATH": "/opt/swift/usr/bin:/usr/local/bin:/usr/bin:/bin", "HOME": NSHomeDirectory()])
    }

    static func files(under dir: String) -> Set<String> {
        guard let e = FileManager.default.enumerator(atPath: dir) else { return [] }
        return Set(e.compactMap { $0 as? String }.filter {
            var isDir: ObjCBool = false
            return FileManager.default.fileExists(atPath: dir + "/" + $0, isDirectory: &isDir) && !isDir.boolValue
        })
    }

    @Test func installPutsToolsPagesAndCompletionsAndUninstallTakesExactlyThemBack() throws {
        let prefix = try TestPaths.makeTemporaryDirectory("install")
        defer { try? FileManager.default.removeItem(atPath: prefix) }
        // something of the user's own in the prefix, which neither step may touch
        try FileManager.default.createDirectory(atPath: prefix + "/bin", withIntermediateDirectories: true)
        try "#!/bin/sh\n".write(toFile: prefix + "/bin/mine", atomically: true, encoding: .utf8)

        let nothing = try Self.install(["--prefix", prefix, "--uninstall"])
        #expect(nothing.status == 1 && nothing.err.contains("nothing was installed under \(prefix)"), "\(nothing)")

        let bin = TestServer.packageRoot + "/.build/debug"
        let first = try Self.install(["--prefix", prefix, "--from", bin])
        #expect(first.status == 0, "\(first.out)\n\(first.err)")
        let installed = Self.files(under: prefix)
        for t in Self.tools {
            #expect(installed.contains("bin/\(t)"))
            let version = try TestServer.runCapturing(prefix + "/bin/\(t)", ["--version"])
            #expect(version.status == 0 && version.out.range(of: #"^[0-9]+\.[0-9]+\.[0-9]+ \(.+\)\n$"#, options: .regularExpression) != nil,
                    "\(t) --version: \(version)")
            let page = try String(contentsOfFile: prefix + "/share/man/man1/\(t).1", encoding: .utf8)
            #expect(page.contains(".Dt \(t.uppercased()) 1") && page.contains(".Nm \(t)"), "\(t).1: \(page.prefix(300))")
            #expect(installed.contains("share/bash-completion/completions/\(t)"))
            #expect(installed.contains("share/zsh/site-functions/_\(t)"))
            #expect(installed.contains("share/fish/vendor_completions.d/\(t).fish"))
            let syntax = try TestServer.runCapturing("/bin/bash", ["-n", prefix + "/share/bash-completion/completions/\(t)"])
            #expect(syntax.status == 0, "\(t)'s bash completion: \(syntax.err)")
        }
        // the options of a tool that reads its destination itself are in its page too
        let exec = try String(contentsOfFile: prefix + "/share/man/man1/ssh-exec.1", encoding: .utf8)
        #expect(exec.contains("identity_file") && exec.contains("Send no standard input"), "\(exec.prefix(600))")
        #expect(installed.contains("share/man/man1/agent-sessions.tasks.new.1"), "a page per subcommand")
        let manifest = try String(contentsOfFile: prefix + "/share/sshkit/installed-files", encoding: .utf8)
        let listed = Set(manifest.split(separator: "\n").map { String($0.dropFirst(prefix.count + 1)) })
        #expect(listed == installed.subtracting(["bin/mine", "share/sshkit/installed-files"]), "the list is what was put")

        // again: the same files
        let again = try Self.install(["--prefix", prefix, "--from", bin])
        #expect(again.status == 0, "\(again.err)")
        #expect(Self.files(under: prefix) == installed)

        let removed = try Self.install(["--prefix", prefix, "--uninstall"])
        #expect(removed.status == 0 && removed.out.contains("removed \(listed.count) files"), "\(removed)")
        #expect(Self.files(under: prefix) == ["bin/mine"], "exactly what it put is gone: \(Self.files(under: prefix))")
        #expect(!FileManager.default.fileExists(atPath: prefix + "/share"), "the directories it made are gone once empty")

        let bad = try Self.install(["--prefix"])
        #expect(bad.status == 64 && bad.err.contains("usage"))
    }
}
