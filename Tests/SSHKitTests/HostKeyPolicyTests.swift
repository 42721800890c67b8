@testable import SSHKit
import Testing

@Suite("Host key policies", .tags(.pure))
struct HostKeyPolicyTests {
    // Two real Ed25519 public keys (from ssh-keygen), fingerprints computed by libssh.
    static let keyA = try! SSHHostKey(openSSH: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBfw0lT2ET6y0E0l8pJ5wP6cqzm1lW0cIh2W6y8rj9xE test")
    static let keyB = try! SSHHostKey(openSSH: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG2ZfH8y5dV2JqWnR0bq8f8YwM3lVdRkq1jv0mYpN0aQ")

    func context(_ key: SSHHostKey) -> SSHHostKeyContext {
        SSHHostKeyContext(host: "example.test", port: 22, presentedKey: key)
    }

    func accepted(_ v: SSHHostKeyVerdict) -> Bool { if case .accept = v { true } else { false } }

    @Test func fingerprintsAreComputedAndNormalized() throws {
        #expect(Self.keyA.sha256Fingerprint.hasPrefix("SHA256:"))
        #expect(Self.keyA.sha256Fingerprint.count == 50)
        #expect(Self.keyA != Self.keyB)
        let bare = String(Self.keyA.sha256Fingerprint.dropFirst(7))
        #expect(SSHHostKey.normalizedSHA256(bare) == Self.keyA.sha256Fingerprint)
        #expect(SSHHostKey.normalizedSHA256(" \(Self.keyA.sha256Fingerprint)= ") == Self.keyA.sha256Fingerprint)
        #expect(SSHHostKey.normalizedSHA256("MD5:aa:bb") == nil)
        #expect(SSHHostKey.normalizedSHA256("") == nil)
    }

    @Test func unparsableKeysAreRejectedWithATypedError() {
        // the shape is wrong: no type and blob
        for bad in ["", "ssh-ed25519"] {
            let e = #expect(throws: SSHError.self) { try SSHHostKey(openSSH: bad) }
            #expect(e?.code == .invalidArgument && e?.message.contains("expected 'type base64") == true, "\(bad): \(String(describing: e))")
        }
        // the shape is right, the key is not: a bad blob, an unknown type, a blob of another type
        for bad in ["ssh-ed25519 not-base64!", "ssh-foo AAAA", "ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIBfw"] {
            let e = #expect(throws: SSHError.self) { try SSHHostKey(openSSH: bad) }
            let type = String(bad.prefix { $0 != " " })
            #expect(e?.code == .invalidArgument && e?.message == "not a valid \(type) public key", "\(bad): \(String(describing: e))")
        }
    }

    /// The reason a policy gives, for the error a refused connection carries.
    func reason(_ verdict: SSHHostKeyVerdict) -> String? {
        if case .reject(let reason, _, _) = verdict { return reason }
        return nil
    }

    @Test func pinnedAcceptsOnlyPinnedKeys() async {
        let fp = Self.keyA.sha256Fingerprint
        #expect(accepted(await SSHHostKeyPolicy.pinned([fp]).evaluate(context(Self.keyA))))
        #expect(accepted(await SSHHostKeyPolicy.pinned([String(fp.dropFirst(7))]).evaluate(context(Self.keyA))))
        #expect(reason(await SSHHostKeyPolicy.pinned([fp]).evaluate(context(Self.keyB))) == "fingerprint is not pinned")
        // fail closed: nothing valid pinned
        #expect(reason(await SSHHostKeyPolicy.pinned([]).evaluate(context(Self.keyA))) == "no valid SHA256 fingerprint is pinned")
        #expect(reason(await SSHHostKeyPolicy.pinned(["MD5:00:11"]).evaluate(context(Self.keyA)))
            == "no valid SHA256 fingerprint is pinned")
    }

    @Test func strictOnlyAcceptsKnownKeys() async throws {
        let store = SSHMemoryHostKeyStore()
        #expect(reason(await SSHHostKeyPolicy.strict(store).evaluate(context(Self.keyA))) == "host is not known")
        try await store.add(Self.keyA, host: "EXAMPLE.test", port: 22)
        #expect(accepted(await SSHHostKeyPolicy.strict(store).evaluate(context(Self.keyA))))
        let mismatch = await SSHHostKeyPolicy.strict(store).evaluate(context(Self.keyB))
        guard case .reject(let why, let expected, _) = mismatch else { Issue.record("another key accepted"); return }
        #expect(why == "host key does not match the known key" && expected == [Self.keyA.sha256Fingerprint])
        // another port is another host
        let other = SSHHostKeyContext(host: "example.test", port: 2222, presentedKey: Self.keyA)
        #expect(reason(await SSHHostKeyPolicy.strict(store).evaluate(other)) == "host is not known")
    }

    @Test func acceptNewRecordsFirstKeyAndRejectsAChange() async throws {
        let store = SSHMemoryHostKeyStore()
        let policy = SSHHostKeyPolicy.acceptNew(store)
        #expect(accepted(await policy.evaluate(context(Self.keyA))))
        #expect(try await store.lookup(host: "example.test", port: 22).keys == [Self.keyA])
        #expect(accepted(await policy.evaluate(context(Self.keyA))))
        let v = await policy.evaluate(context(Self.keyB))
        guard case .reject(let reason, let expected, _) = v else { Issue.record("changed key accepted"); return }
        #expect(reason.contains("changed"))
        #expect(expected == [Self.keyA.sha256Fingerprint])
        #expect(try await store.lookup(host: "example.test", port: 22).keys == [Self.keyA])
    }

    @Test func revokedKeysAreRejectedEvenWhenKnown() async throws {
        let store = SSHMemoryHostKeyStore()
        try await store.add(Self.keyA, host: "example.test", port: 22)
        store.revoke(Self.keyA, host: "example.test", port: 22)
        store.revoke(Self.keyA, host: "example.test", port: 22) // twice: recorded once
        #expect(try await store.lookup(host: "example.test", port: 22).revoked == [Self.keyA])
        #expect(reason(await SSHHostKeyPolicy.strict(store).evaluate(context(Self.keyA))) == "key is revoked")
        #expect(reason(await SSHHostKeyPolicy.acceptNew(store).evaluate(context(Self.keyA))) == "key is revoked")
        // for that host only: the same key elsewhere is unaffected
        try await store.add(Self.keyA, host: "other.test", port: 22)
        let elsewhere = SSHHostKeyContext(host: "other.test", port: 22, presentedKey: Self.keyA)
        #expect(accepted(await SSHHostKeyPolicy.strict(store).evaluate(elsewhere)))
    }

    struct StoreFailure: Error {}
    struct FailingStore: SSHHostKeyStore {
        func lookup(host: String, port: Int) async throws -> SSHKnownHostKeys { throw StoreFailure() }
        func add(_ key: SSHHostKey, host: String, port: Int) async throws { throw StoreFailure() }
    }

    @Test func storeAndCallbackFailuresFailClosed() async {
        for policy in [SSHHostKeyPolicy.strict(FailingStore()), .acceptNew(FailingStore())] {
            guard case .reject(let why, _, let cause) = await policy.evaluate(context(Self.keyA)) else {
                Issue.record("a failing store accepted"); continue
            }
            #expect(why == "host key store failed" && cause is StoreFailure)
        }
        let throwing = SSHHostKeyPolicy.custom { _ in throw StoreFailure() }
        guard case .reject(_, _, let cause) = await throwing.evaluate(context(Self.keyA)) else {
            Issue.record("throwing callback accepted"); return
        }
        #expect(cause is StoreFailure)
        let custom = SSHHostKeyPolicy.custom { ctx in ctx.presentedKey == Self.keyA ? .accept : .reject(reason: "no") }
        #expect(accepted(await custom.evaluate(context(Self.keyA))))
        #expect(!accepted(await custom.evaluate(context(Self.keyB))))
        #expect(accepted(await SSHHostKeyPolicy.insecureAcceptAnyHostKey.evaluate(context(Self.keyB))))
    }
}
