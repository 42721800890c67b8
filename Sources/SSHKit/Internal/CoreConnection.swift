import Logging
internal import SSHCore
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A connection handle from the core. Safe because: the pointer is only passed to
/// sshcore_* functions, which are documented thread-safe, and the core keeps the
/// object alive while a callback may still use it.
struct ConnPointer: @unchecked Sendable {
    let raw: OpaquePointer
}

/// Owns the caller's reference to one core connection.
final class CoreConnection: Sendable {
    let pointer: ConnPointer
    let context: ConnectionContext

    init(_ raw: OpaquePointer, context: ConnectionContext) {
        self.pointer = ConnPointer(raw: raw)
        self.context = context
    }

    deinit {
        // Closes the connection if still open and joins its worker thread
        // (teardown never waits on the network).
        sshcore_conn_release(pointer.raw)
    }

    var isReady: Bool { sshcore_conn_get_state(pointer.raw) == SSHCORE_CONN_READY }

    func close() async {
        sshcore_conn_close(pointer.raw)
        await context.waitUntilTerminated()
    }

    static func connect(_ config: SSHConfiguration, jumpConnections: [SSHConnection] = [],
                        jumpBridges: [CoreBridge] = [], proxy: ProxyCommandProcess? = nil) async throws(SSHError)
        -> SSHConnection {
        let logger = config.logger
        let context = ConnectionContext(configuration: config)
        logger.debug("connecting", metadata: ["host": "\(config.host)", "port": "\(config.port)"])
        let outcome: Result<Void, SSHError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, SSHError>, Never>) in
                context.setContinuation(continuation)
                start(config, context: context)
            }
        } onCancel: {
            context.cancelConnect()
        }
        let core = context.takeCore()
        switch outcome {
        case .failure(var error):
            logger.debug("connect failed", metadata: ["error": "\(error)"])
            _ = core // released here: closes and joins the worker
            if error.code == .authenticationFailed { error.message += certificateHints(config) }
            throw error
        case .success:
            guard let core, let key = context.acceptedKey else {
                throw SSHError(.protocolError, "connected without a host key")
            }
            var banner = [CChar](repeating: 0, count: 256)
            sshcore_conn_server_banner(core.pointer.raw, &banner, banner.count)
            let offered = SSHAuthMethods(rawValue: sshcore_conn_offered_methods(core.pointer.raw))
            logger.debug("connected", metadata: ["host": "\(config.host)", "hostKey": "\(key)"])
            return SSHConnection(
                core: core, configuration: config, hostKey: key,
                negotiatedAlgorithms: CoreAlgorithms.negotiated(core.pointer.raw),
                serverBanner: String(decoding: banner.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self),
                offeredAuthMethods: offered, jumpConnections: jumpConnections, jumpBridges: jumpBridges,
                proxy: proxy)
        }
    }

    /// Why the certificates offered would have been refused (expired, not yet valid,
    /// for other principals), for the message of an authentication failure.
    static func certificateHints(_ config: SSHConfiguration) -> String {
        var hints: [String] = []
        for case .privateKeyFile(_, _, let path?) in config.authentication.methods {
            if let problem = SSHCertificate(contentsOfFile: path)?.problem(user: config.user) {
                hints.append("certificate \(path): \(problem)")
            }
        }
        return hints.isEmpty ? "" : "; " + hints.joined(separator: "; ")
    }

    /// Starts the core connection; every outcome reaches the context's continuation.
    private static func start(_ config: SSHConfiguration, context: ConnectionContext) {
        let strings = CStringArena()
        var methods: [sshcore_auth_method] = []
        let flags: UInt32 = config.authentication.skipsUnusableMethods ? UInt32(SSHCORE_AUTH_SKIP_UNUSABLE) : 0
        let asks = config.authentication.passphrase != nil
        func add(_ kind: sshcore_auth_kind, _ secret: String? = nil, _ passphrase: String? = nil,
                 certificate: String? = nil, attempts: Int = 0, extraFlags: UInt32 = 0) {
            methods.append(.init(kind: kind, secret: strings.dup(secret), passphrase: strings.dup(passphrase),
                                 certificate: strings.dup(certificate), flags: flags | extraFlags,
                                 attempts: UInt32(clamping: attempts)))
        }
        // a key given without a passphrase has it asked for, when there is someone to ask
        let keyFlags: UInt32 = asks ? UInt32(SSHCORE_AUTH_ASK_PASSPHRASE) : 0
        let keyAttempts = max(1, config.authentication.passphraseAttempts)
        for method in config.authentication.methods {
            switch method {
            case .password(let pw): add(SSHCORE_AUTH_PASSWORD, pw)
            case .privateKeyFile(let path, let passphrase, let certificate):
                add(SSHCORE_AUTH_KEY_FILE, path, passphrase, certificate: certificate, attempts: keyAttempts,
                    extraFlags: keyFlags)
            case .privateKey(let text, let passphrase):
                add(SSHCORE_AUTH_KEY_MEMORY, text, passphrase, attempts: keyAttempts, extraFlags: keyFlags)
            case .agent(let socket): add(SSHCORE_AUTH_AGENT, socket)
            case .keyboardInteractive: add(SSHCORE_AUTH_KBDINT)
            case .passwordPrompt(let attempts, _): add(SSHCORE_AUTH_PASSWORD_PROMPT, attempts: max(1, attempts))
            }
        }
        var err = sshcore_error()
        let ctx = Unmanaged.passRetained(context).toOpaque()
        var callbacks = sshcore_conn_callbacks(
            ctx: ctx, connected: coreConnected, hostkey: coreHostKey, kbdint: coreKbdint,
            terminated: coreTerminated, released: coreReleased)
        let algorithms = CoreAlgorithms.lists(config.algorithms).map { kind, _, names in
            sshcore_algo_setting(kind: kind, list: strings.dup(names.joined(separator: ","))!)
        }
        let raw: OpaquePointer? = methods.withUnsafeBufferPointer { buf in
            algorithms.withUnsafeBufferPointer { algos in
                var cfg = sshcore_config(
                    host: strings.dup(config.host)!, port: UInt16(config.port), user: strings.dup(config.user)!,
                    connect_timeout_ms: Int32(clamping: config.connectTimeout.milliseconds),
                    backstop_timeout_s: Int32(clamping: max(1, config.socketTimeout.milliseconds / 1000)),
                    methods: buf.baseAddress!, method_count: buf.count,
                    libssh_verbosity: Int32(clamping: config.libsshVerbosity),
                    connected_fd: config.connectedSocket ?? -1,
                    algorithms: algos.baseAddress, algorithm_count: algos.count,
                    rsa_min_bits: Int32(clamping: config.algorithms.minimumRSABits ?? 0),
                    keepalive_interval_ms: Int32(clamping: config.keepalive?.interval.milliseconds ?? 0),
                    keepalive_max_missed: Int32(clamping: config.keepalive?.maxMissed ?? 0),
                    agent_forward_socket: strings.dup(config.agentForwarding))
                return sshcore_conn_start(&cfg, &callbacks, &err)
            }
        }
        strings.wipeAndFree()
        guard let raw else {
            Unmanaged<ConnectionContext>.fromOpaque(ctx).release()
            context.connectFinished(err)
            return
        }
        context.attach(CoreConnection(raw, context: context))
    }
}

// MARK: - C callbacks (no captures: everything goes through ctx)

private func context(_ ctx: UnsafeMutableRawPointer?) -> ConnectionContext {
    Unmanaged<ConnectionContext>.fromOpaque(ctx!).takeUnretainedValue()
}

private let coreConnected: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<sshcore_error>) -> Void = {
    ctx, err in
    context(ctx).connectFinished(err.pointee)
}

private let coreHostKey: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer, UnsafePointer<sshcore_hostkey>)
    -> Void = { ctx, conn, key in
        let k = key.pointee
        let hostKey = SSHHostKey(type: String(cString: k.type), base64: String(cString: k.base64),
                                 sha256Fingerprint: String(cString: k.sha256))
        context(ctx).evaluateHostKey(hostKey, conn: ConnPointer(raw: conn))
    }

private let coreKbdint: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer, UnsafePointer<sshcore_kbdint>)
    -> Void = { ctx, conn, challenge in
        let c = challenge.pointee
        if c.passphrase != 0 {
            let request = SSHPassphraseRequest(keyPath: c.key_path.map { String(cString: $0) },
                                               prompt: String(cString: c.prompts[0]), attempt: Int(c.attempt))
            context(ctx).answerPassphrase(request, conn: ConnPointer(raw: conn))
            return
        }
        if c.password != 0 {
            let request = SSHPasswordRequest(user: context(ctx).user, host: context(ctx).host,
                                             prompt: String(cString: c.prompts[0]), attempt: Int(c.attempt))
            context(ctx).answerPassword(request, conn: ConnPointer(raw: conn))
            return
        }
        var prompts: [SSHKeyboardInteractiveChallenge.Prompt] = []
        for i in 0..<c.count {
            prompts.append(.init(text: String(cString: c.prompts[i]), echo: c.echo[i] != 0))
        }
        let ch = SSHKeyboardInteractiveChallenge(
            name: String(cString: c.name), instruction: String(cString: c.instruction), prompts: prompts)
        context(ctx).answerKeyboardInteractive(ch, conn: ConnPointer(raw: conn))
    }

private let coreTerminated: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
    context(ctx).markTerminated()
}

private let coreReleased: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
    Unmanaged<ConnectionContext>.fromOpaque(ctx!).release()
}
