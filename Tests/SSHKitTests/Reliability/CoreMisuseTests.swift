import Foundation
import SSHCore
import Synchronization
import Testing

/// Part 5 of the reliability suite, the C API's misuse: a second host-key verdict, a
/// second keyboard-interactive answer, an answer after a cancel and an answer on a
/// closed connection are typed errors (SSHCORE_E_INVALID_STATE), never a second release
/// of the connection object. The callbacks answer on the worker thread itself, the
/// tightest timing there is. Under AddressSanitizer (scripts/sanitizers.sh) a
/// use-after-free here would be a report.
@Suite("Reliability: C API misuse", .serialized)
struct CoreMisuseTests {
    /// What the callbacks saw, shared with the test through the callbacks' ctx.
    final class Probe: @unchecked Sendable {
        // safe because: every field is behind `lock`
        private let lock = NSLock()
        private var _codes: [String: Int32] = [:]
        private var _connected: Int32?
        var answerHostKey = true
        var answerTwice = true
        var password = ""
        var heldConn: OpaquePointer?

        func record(_ name: String, _ code: Int32) { lock.withLock { _codes[name] = code } }
        var codes: [String: Int32] { lock.withLock { _codes } }
        func setConnected(_ c: Int32) { lock.withLock { _connected = c } }
        var connected: Int32? { lock.withLock { _connected } }
        func hold(_ c: OpaquePointer) { lock.withLock { heldConn = c } }
        var held: OpaquePointer? { lock.withLock { heldConn } }
    }

    static let connected: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<sshcore_error>) -> Void = { ctx, err in
        Unmanaged<Probe>.fromOpaque(ctx!).takeUnretainedValue().setConnected(err.pointee.code)
    }
    static let hostkey: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer, UnsafePointer<sshcore_hostkey>) -> Void = { ctx, conn, _ in
        let probe = Unmanaged<Probe>.fromOpaque(ctx!).takeUnretainedValue()
        guard probe.answerHostKey else { probe.hold(conn); return }
        probe.record("verdict", sshcore_conn_hostkey_verdict(conn, 1, nil))
        if probe.answerTwice { probe.record("second verdict", sshcore_conn_hostkey_verdict(conn, 0, "again")) }
    }
    static let kbdint: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer, UnsafePointer<sshcore_kbdint>) -> Void = { ctx, conn, challenge in
        let probe = Unmanaged<Probe>.fromOpaque(ctx!).takeUnretainedValue()
        let count = challenge.pointee.count
        let answers = (0..<count).map { _ in strdup(probe.password) }
        defer { answers.forEach { free($0) } }
        let pointers = answers.map { UnsafePointer<CChar>($0!) }
        pointers.withUnsafeBufferPointer { buf in
            probe.record("reply", sshcore_conn_kbdint_reply(conn, buf.baseAddress, buf.count))
            probe.record("second reply", sshcore_conn_kbdint_reply(conn, buf.baseAddress, buf.count))
        }
    }
    static let released: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
        Unmanaged<Probe>.fromOpaque(ctx!).release()
    }

    /// Starts a core connection with `method`; the connection and its probe.
    static func start(_ server: TestServer, _ probe: Probe, kbdint useKbdint: Bool) throws -> OpaquePointer {
        let host = strdup(server.host)!, user = strdup(server.user)!, key = strdup(server.key("id_ed25519"))!
        defer { free(host); free(user); free(key) }
        var methods = [useKbdint ? sshcore_auth_method(kind: SSHCORE_AUTH_KBDINT, secret: nil, passphrase: nil, certificate: nil, flags: 0, attempts: 0)
                                 : sshcore_auth_method(kind: SSHCORE_AUTH_KEY_FILE, secret: key, passphrase: nil, certificate: nil, flags: 0, attempts: 0)]
        var callbacks = sshcore_conn_callbacks(
            ctx: Unmanaged.passRetained(probe).toOpaque(), connected: connected, hostkey: hostkey, kbdint: kbdint,
            terminated: nil, released: released)
        var err = sshcore_error()
        let conn: OpaquePointer? = methods.withUnsafeMutableBufferPointer { buf in
            var cfg = sshcore_config(
                host: host, port: UInt16(server.port), user: user, connect_timeout_ms: 10_000, backstop_timeout_s: 10,
                methods: buf.baseAddress!, method_count: buf.count, libssh_verbosity: 0, connected_fd: -1,
                algorithms: nil, algorithm_count: 0, rsa_min_bits: 0, keepalive_interval_ms: 0, keepalive_max_missed: 0,
                agent_forward_socket: nil)
            return sshcore_conn_start(&cfg, &callbacks, &err)
        }
        guard let conn else { throw FixtureError("sshcore_conn_start: \(err.code)") }
        return conn
    }

    static let ok = Int32(sshcore_err.SSHCORE_E_OK.rawValue)
    static let invalidState = Int32(sshcore_err.SSHCORE_E_INVALID_STATE.rawValue)

    @Test func secondAnswersAreInvalidStateAndTheConnectionWorks() async throws {
        let server = TestServer.shared
        // host key: two verdicts from inside the callback
        let probe = Probe()
        let conn = try Self.start(server, probe, kbdint: false)
        #expect(await eventually(timeout: .seconds(10)) { probe.connected != nil })
        #expect(probe.connected == Self.ok)
        #expect(probe.codes["verdict"] == Self.ok)
        #expect(probe.codes["second verdict"] == Self.invalidState)
        // answers nobody asked for, on a connected and then a closed connection
        #expect(sshcore_conn_hostkey_verdict(conn, 1, nil) == Self.invalidState)
        #expect(sshcore_conn_kbdint_reply(conn, nil, 0) == Self.invalidState)
        sshcore_conn_close(conn)
        #expect(sshcore_conn_hostkey_verdict(conn, 1, nil) == Self.invalidState)
        #expect(sshcore_conn_kbdint_reply(conn, nil, 0) == Self.invalidState)
        sshcore_conn_release(conn)

        // keyboard-interactive: two replies from inside the callback
        let kbd = Probe()
        kbd.password = server.password
        let conn2 = try Self.start(server, kbd, kbdint: true)
        #expect(await eventually(timeout: .seconds(10)) { kbd.connected != nil })
        #expect(kbd.connected == Self.ok, "kbdint connect: \(String(describing: kbd.connected))")
        #expect(kbd.codes["reply"] == Self.ok)
        #expect(kbd.codes["second reply"] == Self.invalidState)
        sshcore_conn_release(conn2)
    }

    @Test func anAnswerAfterACancelIsTakenOnceAndIgnored() async throws {
        let server = TestServer.shared
        let probe = Probe()
        probe.answerHostKey = false
        let conn = try Self.start(server, probe, kbdint: false)
        #expect(await eventually(timeout: .seconds(10)) { probe.held != nil })
        sshcore_conn_cancel_connect(conn)
        try await Task.sleep(for: .milliseconds(100))
        // the cancel does not answer for the caller: the one answer is still owed, and taken
        #expect(sshcore_conn_hostkey_verdict(conn, 1, nil) == Self.ok)
        #expect(sshcore_conn_hostkey_verdict(conn, 1, nil) == Self.invalidState)
        #expect(await eventually(timeout: .seconds(10)) { probe.connected != nil })
        #expect(probe.connected == Int32(sshcore_err.SSHCORE_E_CANCELLED.rawValue), "\(String(describing: probe.connected))")
        sshcore_conn_release(conn)
    }
}
