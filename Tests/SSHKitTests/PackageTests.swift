import Foundation
import Testing

/// The Debian package scripts/package-deb.sh makes, as a user installs it: `dpkg -i` on this
/// machine, every tool answering `--version` with no Swift toolchain on `PATH` and no Swift
/// library in `ldd`'s answer, its pages and completions where Debian reads them, `lintian`
/// without an error, and `dpkg -r` taking back every file it put.
///
/// The test command makes the package before the tests run (a release build, as a packager
/// makes it); run alone, `bash scripts/package-deb.sh` makes it first.
@Suite("The Debian package", .tags(.process), .serialized)
struct PackageTests {
    static let tools = InstallTests.tools
    /// No Swift toolchain on PATH; dpkg needs the sbin directories (ldconfig).
    static let env = ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LD_LIBRARY_PATH": "", "HOME": NSHomeDirectory()]

    static func run(_ exe: String, _ args: [String]) throws -> (status: Int32, out: String, err: String) {
        try TestServer.runCapturing(exe, args, env: env)
    }

    /// The package in `.build/deb`, made from this checkout's commit.
    static func package() throws -> String {
        let dir = TestServer.packageRoot + "/.build/deb"
        let debs = ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".deb") }
        guard debs.count == 1, let deb = debs.first else {
            throw PackageError("expected one package in \(dir), found \(debs): make it with bash scripts/package-deb.sh")
        }
        return dir + "/" + deb
    }

    struct PackageError: Error, CustomStringConvertible {
        let description: String
        init(_ d: String) { description = d }
    }

    @Test func thePackageInstallsRunsWithoutSwiftAndRemovesWhatItPut() throws {
        let deb = try Self.package()
        let status = try Self.run("/usr/bin/dpkg-query", ["-W", "-f=${db:Status-Abbrev}", "agent-sessions"])
        guard !status.out.hasPrefix("ii") else {
            Issue.record("agent-sessions is installed on this machine (dpkg); this test installs and removes its own package, so it leaves yours alone: dpkg -r agent-sessions first")
            return
        }

        // what it says of itself
        let fields = try Self.run("/usr/bin/dpkg-deb", ["-f", deb, "Package", "Version", "Architecture", "Depends"])
        #expect(fields.status == 0, "\(fields)")
        for library in ["libssh-4", "libsqlite3-0", "libssl3", "libc6"] {
            #expect(fields.out.contains(library), "the package depends on \(library): \(fields.out)")
        }
        #expect(!fields.out.contains("swift"), "no Swift runtime package: \(fields.out)")
        let lintian = try Self.run("/usr/bin/lintian", ["--no-tag-display-limit", deb])
        let errors = lintian.out.split(separator: "\n").filter { $0.hasPrefix("E:") }
        #expect(errors.isEmpty, "lintian: \(errors)")

        let installed = try Self.run("/usr/bin/dpkg", ["-i", deb])
        defer { _ = try? Self.run("/usr/bin/dpkg", ["-r", "agent-sessions"]) }
        try #require(installed.status == 0, "dpkg -i: \(installed)")
        let listed = try Self.run("/usr/bin/dpkg-query", ["-L", "agent-sessions"]).out
            .split(separator: "\n").map(String.init)
        let files = listed.filter {
            var isDir: ObjCBool = false
            return FileManager.default.fileExists(atPath: $0, isDirectory: &isDir) && !isDir.boolValue
        }
        #expect(files.count > 20, "\(files)")

        // every tool runs where no Swift is: PATH without the toolchain, and the runtime linked in
        let commit = try TestServer.runCapturing("/usr/bin/git", ["-C", TestServer.packageRoot, "rev-parse", "--short=12", "HEAD"])
            .out.trimmingCharacters(in: .whitespacesAndNewlines)
        for t in Self.tools {
            let path = "/usr/bin/" + t
            #expect(files.contains(path))
            let version = try Self.run(path, ["--version"])
            #expect(version.status == 0 && version.out.range(of: #"^[0-9]+\.[0-9]+\.[0-9]+ \(.+\)\n$"#, options: .regularExpression) != nil,
                    "\(t) --version: \(version)")
            #expect(version.out.contains("(\(commit)"), "\(t) is of this checkout's commit \(commit): \(version.out)")
            let ldd = try Self.run("/usr/bin/ldd", [path])
            #expect(ldd.status == 0 && !ldd.out.contains("libswift") && !ldd.out.contains("libFoundation") && !ldd.out.contains("not found"),
                    "ldd \(path): \(ldd.out)")
            #expect(files.contains("/usr/share/man/man1/\(t).1.gz"))
            #expect(files.contains("/usr/share/bash-completion/completions/\(t)"))
            #expect(files.contains("/usr/share/zsh/vendor-completions/_\(t)"))
            #expect(files.contains("/usr/share/fish/vendor_completions.d/\(t).fish"))
        }
        // the installed command does its work, not only --version: a store and its board
        let home = try TestPaths.makeTemporaryDirectory("package-home")
        defer { try? FileManager.default.removeItem(atPath: home) }
        let board = try TestServer.runCapturing("/usr/bin/agent-sessions", ["status", "--store", home + "/store.sqlite"],
                                                env: Self.env.merging(["HOME": home]) { $1 })
        #expect(board.status == 0 && board.out.hasPrefix("no tasks"), "\(board)")
        // the page Debian's man finds by name
        let page = try Self.run("/usr/bin/man", ["-P", "cat", "agent-sessions"])
        #expect(page.status == 0 && page.out.contains("agent-sessions"), "man agent-sessions: \(page.err)")

        let removed = try Self.run("/usr/bin/dpkg", ["-r", "agent-sessions"])
        #expect(removed.status == 0, "dpkg -r: \(removed)")
        let left = files.filter { FileManager.default.fileExists(atPath: $0) }
        #expect(left.isEmpty, "dpkg -r left \(left)")
        let after = try Self.run("/usr/bin/dpkg-query", ["-W", "-f=${db:Status-Abbrev}", "agent-sessions"])
        #expect(!after.out.hasPrefix("ii") && !after.out.hasPrefix("rc"), "nothing of the package is kept: \(after)")
    }
}
