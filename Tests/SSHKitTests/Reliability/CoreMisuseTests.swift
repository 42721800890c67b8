import Foundation
import SSHCore
import Synchronization
import Testing

/// Part 5 of the reliability suite, the C API's misuse: a second host-key verdict, a
/// second keyboard-interactive answer and an answer on a closed connection are typed
/// errors (SSHCORE_E_INVALID_STATE), an answer after a cancel is SSHCORE_E_CANCELLED,
/// never a second release of the connection object; an operation of another kind is
/// SSHCORE_E_INVALID_ARGUMENT. The callbacks answer on the worker thread itself, the
/// tightest timing there is. Under AddressSanitizer (scripts/sanitizers.sh) a
/// use-after-free here would be a report.
@Suite("Reliability: C API misuse", .tags(.worker), .serialized)
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

    static let ok = Int32(sshcore_code.SSHCORE_E_OK.rawValue)
    static let invalidState = Int32(sshcore_code.SSHCORE_E_INVALID_STATE.rawValue)

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

    @Test func anAnswerAfterACancelIsACancelledErrorTakenOnce() async throws {
        let server = TestServer.shared
        let probe = Probe()
        probe.answerHostKey = false
        let conn = try Self.start(server, probe, kbdint: false)
        #expect(await eventually(timeout: .seconds(10)) { probe.held != nil })
        sshcore_conn_cancel_connect(conn)
        try await Task.sleep(for: .milliseconds(100))
        // the cancel does not answer for the caller: the one answer is still owed, and
        // taken (it releases the core's hold), but it is a typed error, not a success
        #expect(sshcore_conn_hostkey_verdict(conn, 1, nil) == Int32(sshcore_code.SSHCORE_E_CANCELLED.rawValue))
        #expect(sshcore_conn_hostkey_verdict(conn, 1, nil) == Self.invalidState)
        #expect(await eventually(timeout: .seconds(10)) { probe.connected != nil })
        #expect(probe.connected == Int32(sshcore_code.SSHCORE_E_CANCELLED.rawValue), "\(String(describing: probe.connected))")
        sshcore_conn_release(conn)
    }

    static let invalidArgument = Int32(sshcore_code.SSHCORE_E_INVALID_ARGUMENT.rawValue)
    static let execDone: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer) -> Void = { ctx, _ in
        Unmanaged<Probe>.fromOpaque(ctx!).takeUnretainedValue().record("exec done", 1)
    }

    /// One handle type stands for every kind of operation, so
    /// each call checks the kind it takes. An exec operation handed to the calls of
    /// streams, bridges and remote forwards is refused with INVALID_ARGUMENT (and
    /// an error naming both kinds where the call has one), never read as the wrong
    /// struct; its own calls still work.
    @Test func eachCallRefusesAnOperationOfAnotherKind() async throws {
        let server = TestServer.shared
        let probe = Probe()
        let conn = try Self.start(server, probe, kbdint: false)
        defer { sshcore_conn_release(conn) }
        #expect(await eventually(timeout: .seconds(10)) { probe.connected != nil })
        #expect(probe.connected == Self.ok)

        let command = strdup("echo kind-check")!
        defer { free(command) }
        var spec = sshcore_exec_spec(command: command, fallback_command: nil, stdin_data: nil, stdin_len: 0,
                                     env: nil, env_count: 0, output_limit: 1 << 20)
        var err = sshcore_error()
        let ctx = Unmanaged.passRetained(probe).toOpaque()
        defer { Unmanaged<Probe>.fromOpaque(ctx).release() }
        let op = try #require(sshcore_exec_start(conn, &spec, Self.execDone, ctx, &err))
        defer { sshcore_op_release(op) }
        #expect(await eventually(timeout: .seconds(10)) { probe.codes["exec done"] != nil })
        #expect(sshcore_op_get_kind(op) == SSHCORE_OP_EXEC)

        var id: UInt64 = 0
        let byte: [UInt8] = [0x41]
        err = sshcore_error()
        #expect(sshcore_stream_write(op, byte, 1, nil, nil, &id, &err) == Self.invalidArgument)
        let message = withUnsafeBytes(of: err.detail) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        #expect(message.contains("takes a stream operation, not an exec operation"), "\(message)")
        err = sshcore_error()
        #expect(sshcore_stream_send_eof(op, &err) == Self.invalidArgument && err.code == Self.invalidArgument)
        #expect(sshcore_stream_signal(op, "TERM", &err) == Self.invalidArgument)
        #expect(sshcore_stream_resize(op, 80, 24, 0, 0, &err) == Self.invalidArgument)
        #expect(sshcore_stream_write_cancel(op, 1) == Self.invalidArgument)
        #expect(sshcore_stream_consumed(op, 1) == Self.invalidArgument)
        var exit = sshcore_exit_info()
        #expect(sshcore_stream_get_exit(op, &exit) == Self.invalidArgument)
        var to: UInt64 = 7, from: UInt64 = 7
        #expect(sshcore_bridge_get_counts(op, &to, &from) == Self.invalidArgument && to == 0 && from == 0)
        #expect(sshcore_rforward_reject(op, 1) == Self.invalidArgument)
        // the remote-forward calls that make new operations refuse it too, and take
        // (close) the socket they were given, as on every other failure
        var fds: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        var bridgeCallbacks = sshcore_bridge_callbacks(ctx: nil, opened: { _, _ in }, failed: { _, _, _ in },
                                                       released: { _ in })
        err = sshcore_error()
        #expect(sshcore_rforward_bridge(op, 1, fds[0], 1 << 16, &bridgeCallbacks, Self.execDone, nil, &err) == nil)
        #expect(err.code == Self.invalidArgument)
        #expect(fcntl(fds[0], F_GETFD) == -1, "the socket was not closed")
        close(fds[1])
        var streamCallbacks = sshcore_stream_callbacks(ctx: nil, started: { _, _ in }, data: { _, _, _, _ in },
                                                       released: { _ in }, eof: nil, flush: nil)
        err = sshcore_error()
        #expect(sshcore_rforward_stream(op, 1, 1 << 16, &streamCallbacks, Self.execDone, nil, &err) == nil)
        #expect(err.code == Self.invalidArgument)

        // its own call works
        var result = sshcore_exec_result()
        #expect(sshcore_exec_get_result(op, &result) == Self.ok)
        #expect(result.out_len == "kind-check\n".utf8.count)
    }
}
