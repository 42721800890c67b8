import Foundation
@testable import SSHKit
import Testing

/// The known_hosts format and the file store, without a server.
@Suite("known_hosts", .tags(.pure))
struct KnownHostsTests {
    static let keyA = HostKeyPolicyTests.keyA
    static let keyB = HostKeyPolicyTests.keyB

    func tempPath() -> String {
        let dir = TestServer.directory(pid: getpid(), name: "kh-\(UUID().uuidString.prefix(8))")
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        ServerRegistry.dirs.withLock { _ = $0.insert(dir) } // removed at exit
        return dir + "/known_hosts"
    }

    @Test func patternsNegationWildcardsAndPorts() {
        let a = "\(Self.keyA.type) \(Self.keyA.base64)"
        let file = SSHKnownHostsFile.parse("""
            # a comment, then a blank line

            plain.example,10.0.0.1 \(a) some comment
            *.wild.example,!bad.wild.example \(a)
            [ported.example]:2222 \(a)
            [*.ports.example]:* \(a)
            host?.q.example \(a)
            """)
        #expect(file.entries.count == 5)
        #expect(file.skipped.isEmpty)
        func known(_ h: String, _ p: Int = 22) -> Bool { file.lookup(host: h, port: p).keys == [Self.keyA] }
        #expect(known("plain.example") && known("PLAIN.example") && known("10.0.0.1"))
        #expect(!known("plain.example", 2222), "port 22 patterns do not match other ports")
        #expect(known("a.wild.example") && !known("bad.wild.example") && !known("wild.example"))
        #expect(known("ported.example", 2222) && !known("ported.example"))
        #expect(known("x.ports.example", 8022))
        #expect(known("host1.q.example") && !known("host12.q.example"))
    }

    @Test func hashedEntriesMatchOnlyTheirHost() {
        let line22 = SSHKnownHostsFile.line(for: Self.keyA, host: "Secret.Example", port: 22, hashed: true)
        let line2222 = SSHKnownHostsFile.line(for: Self.keyB, host: "secret.example", port: 2222, hashed: true)
        #expect(line22.hasPrefix("|1|") && !line22.lowercased().contains("secret"))
        let file = SSHKnownHostsFile.parse(line22 + "\n" + line2222 + "\n")
        #expect(file.lookup(host: "secret.example", port: 22).keys == [Self.keyA])
        #expect(file.lookup(host: "secret.example", port: 2222).keys == [Self.keyB])
        #expect(file.lookup(host: "other.example", port: 22).keys.isEmpty)
    }

    @Test func markersRevokedAndCertAuthority() {
        let a = "\(Self.keyA.type) \(Self.keyA.base64)", b = "\(Self.keyB.type) \(Self.keyB.base64)"
        let file = SSHKnownHostsFile.parse("""
            h.example \(a)
            @revoked * \(a)
            @cert-authority *.example \(b)
            @unknown-marker h.example \(b)
            """)
        let known = file.lookup(host: "h.example", port: 22)
        #expect(known.keys == [Self.keyA])
        #expect(known.revoked == [Self.keyA])
        #expect(!known.keys.contains(Self.keyB), "a CA key is not a host key")
        #expect(file.skipped == [4])
    }

    @Test func garbageLinesAreSkippedNotFatal() {
        let a = "\(Self.keyA.type) \(Self.keyA.base64)"
        let junk = ["onlyonefield", "two fields", "h ssh-ed25519 !!!notbase64", "|1|bad|hash ssh-ed25519 AAAA",
                    "h ssh-ed25519 AAAAinvalidkey", ",,, \(a)", "! \(a)", String(repeating: "x", count: 100_000),
                    "\u{7}\u{1b}[31m h \(a)", "h.example \(a)\r"]
        let file = SSHKnownHostsFile.parse(junk.joined(separator: "\n"))
        // the CRLF line still counts; the invalid key parses but yields no key
        #expect(file.lookup(host: "h.example", port: 22).keys == [Self.keyA])
        #expect(file.skipped.count >= 7)
    }

    @Test func hostileFilesAreRefusedWithATypedError() async throws {
        let path = tempPath()
        try Data([0x68, 0x20, 0x00, 0x01, 0xff]).write(to: URL(fileURLWithPath: path))
        var e = await expectSSHError { try await SSHKnownHostsStore(path: path).lookup(host: "h", port: 22) }
        #expect(e?.code == .knownHostsUnusable)
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: path))
        e = await expectSSHError { try await SSHKnownHostsStore(path: path, maxFileSize: 1024).lookup(host: "h", port: 22) }
        #expect(e?.code == .knownHostsUnusable)
        #expect(e?.message.contains("limit") == true)
        let dir = (path as NSString).deletingLastPathComponent
        e = await expectSSHError { try await SSHKnownHostsStore(path: dir).lookup(host: "h", port: 22) }
        #expect(e?.code == .knownHostsUnusable)
        // a policy over an unusable store rejects
        let verdict = await SSHHostKeyPolicy.acceptNew(SSHKnownHostsStore(path: dir))
            .evaluate(SSHHostKeyContext(host: "h", port: 22, presentedKey: Self.keyA))
        guard case .reject = verdict else { Issue.record("accepted with an unusable store"); return }
        // a missing file is an empty store
        #expect(try await SSHKnownHostsStore(path: dir + "/missing").lookup(host: "h", port: 22).keys.isEmpty)
    }

    @Test func addCreatesA0600FileAndIsIdempotent() async throws {
        let path = tempPath()
        let store = SSHKnownHostsStore(path: path, hostFormat: .plain)
        try await store.add(Self.keyA, host: "h.example", port: 2222)
        try await store.add(Self.keyA, host: "h.example", port: 2222)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text == "[h.example]:2222 \(Self.keyA.type) \(Self.keyA.base64)\n")
        let attrs = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attrs[.posixPermissions] as? Int) == 0o600)
        // appending to a file without a final newline keeps the last line intact
        try "other \(Self.keyB.type) \(Self.keyB.base64)".write(toFile: path, atomically: false, encoding: .utf8)
        try await store.add(Self.keyA, host: "x.example", port: 22)
        let f = try store.read()
        #expect(f.lookup(host: "other", port: 22).keys == [Self.keyB])
        #expect(f.lookup(host: "x.example", port: 22).keys == [Self.keyA])
    }

    /// A file with CRLF line endings (edited on Windows): a replaced key must not stay
    /// trusted beside the new one.
    @Test func crlfFilesAreRewrittenLikeTheyAreRead() async throws {
        let path = tempPath()
        let lines = ["# crlf", "h.example \(Self.keyA.type) \(Self.keyA.base64)", "other.example \(Self.keyA.type) \(Self.keyA.base64)"]
        try (lines.joined(separator: "\r\n") + "\r\n").write(toFile: path, atomically: false, encoding: .utf8)
        let store = SSHKnownHostsStore(path: path)
        // read: before, "\r\n" (one Character) never split a line, and no key was found
        #expect(try store.read().lookup(host: "h.example", port: 22).keys == [Self.keyA])
        #expect(try store.read().lookup(host: "other.example", port: 22).keys == [Self.keyA])
        try await store.replace(host: "h.example", port: 22, with: Self.keyB)
        #expect(try store.read().lookup(host: "h.example", port: 22).keys == [Self.keyB], "the old key is gone")
        #expect(try await store.remove(host: "other.example", port: 22) == 1)
        #expect(try store.read().lookup(host: "other.example", port: 22).keys.isEmpty)
        #expect(try String(contentsOfFile: path, encoding: .utf8).hasPrefix("# crlf\r\n"), "kept lines keep their ending")
    }

    /// A FIFO at the path is refused at once (the open waited for a writer before).
    @Test func aFIFOIsRefusedNotWaitedOn() async throws {
        let path = tempPath()
        #expect(mkfifo(path, 0o600) == 0)
        let unblock = Task.detached { // bounds the test if the open ever blocks again
            try? await Task.sleep(for: .seconds(10))
            let fd = open(path, O_WRONLY | O_NONBLOCK)
            if fd >= 0 { close(fd) }
        }
        defer { unblock.cancel() }
        let started = ContinuousClock.now
        let e = await expectSSHError { try await SSHKnownHostsStore(path: path).lookup(host: "h", port: 22) }
        #expect(e?.code == .knownHostsUnusable)
        #expect(ContinuousClock.now - started < .seconds(5))
    }

    /// Written plainly, `a,*` would trust the key for every host: such names are refused.
    @Test func hostNamesThatWouldReadBackAsPatternsAreNotWritten() async throws {
        let path = tempPath()
        let store = SSHKnownHostsStore(path: path)
        for host in ["a,*", "*", "a b", "h\nx", "!h", "[h]:22", "@cert-authority", "|1|x", ""] {
            let e = await expectSSHError { try await store.add(Self.keyA, host: host, port: 22) }
            #expect(e?.code == .invalidArgument, "\(host.debugDescription)")
            let r = await expectSSHError { try await store.replace(host: host, port: 22, with: Self.keyA) }
            #expect(r?.code == .invalidArgument, "\(host.debugDescription)")
        }
        #expect(try !FileManager.default.fileExists(atPath: path) || String(contentsOfFile: path, encoding: .utf8).isEmpty)
        try await store.add(Self.keyA, host: "fe80::1", port: 2222) // an IPv6 address is fine
        #expect(try store.read().lookup(host: "fe80::1", port: 2222).keys == [Self.keyA])
    }

    @Test func replaceAndRemoveRewriteAtomicallyAndKeepTheMode() async throws {
        let path = tempPath()
        try """
            # keep this comment
            h.example \(Self.keyA.type) \(Self.keyA.base64)
            @revoked h.example \(Self.keyB.type) \(Self.keyB.base64)
            other.example \(Self.keyA.type) \(Self.keyA.base64)
            """.write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o644)
        let store = SSHKnownHostsStore(path: path, hostFormat: .hashed)
        try await store.replace(host: "h.example", port: 22, with: Self.keyB)
        let f = try store.read()
        #expect(f.lookup(host: "h.example", port: 22).keys == [Self.keyB])
        #expect(f.lookup(host: "h.example", port: 22).revoked == [Self.keyB], "@revoked lines stay")
        #expect(f.lookup(host: "other.example", port: 22).keys == [Self.keyA])
        #expect(try String(contentsOfFile: path, encoding: .utf8).hasPrefix("# keep this comment\n"))
        #expect((try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) == 0o644)
        #expect(try await store.remove(host: "other.example", port: 22) == 1)
        #expect(try store.read().lookup(host: "other.example", port: 22).keys.isEmpty)
        // no temporary file left behind
        let dir = (path as NSString).deletingLastPathComponent
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["known_hosts"])
    }

    @Test func concurrentWritersLoseNothing() async throws {
        let path = tempPath()
        // separate store objects open the file separately: flock treats them as
        // different processes would be treated
        let writers = (0..<4).map { _ in SSHKnownHostsStore(path: path, hostFormat: .hashed) }
        try await withThrowingTaskGroup(of: Void.self) { g in
            for (w, store) in writers.enumerated() {
                g.addTask {
                    for i in 0..<50 { try await store.add(Self.keyA, host: "h\(w)-\(i).example", port: 22) }
                }
            }
            // rewrites running at the same time must not drop the others' appends
            g.addTask {
                for i in 0..<20 { try await writers[0].replace(host: "churn.example", port: 22, with: i % 2 == 0 ? Self.keyA : Self.keyB) }
            }
            try await g.waitForAll()
        }
        let f = try writers[0].read()
        for w in 0..<4 {
            for i in 0..<50 { #expect(f.lookup(host: "h\(w)-\(i).example", port: 22).keys == [Self.keyA]) }
        }
        #expect(f.lookup(host: "churn.example", port: 22).keys == [Self.keyB])
        #expect(f.entries.count == 201)
    }
}
