import Logging
internal import SSHCore
import Synchronization

/// The state shared between one connection's core callbacks and its Swift side.
/// Passed to the core as `ctx` (retained; the core's `released` callback drops it).
final class ConnectionContext: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Result<Void, SSHError>, Never>?
        var core: CoreConnection?
        var cancelled = false
        var presentedKey: SSHHostKey?
        var acceptedKey: SSHHostKey?
        var rejection: (reason: String, expected: [String], cause: (any Error & Sendable)?)?
        var responderError: (any Error & Sendable)?
        var terminated = false
        var terminationWaiters: [CheckedContinuation<Void, Never>] = []
        var terminationHandlers: [UInt64: @Sendable () -> Void] = [:]
        var nextHandlerToken: UInt64 = 0
    }

    private let state = Mutex(State())
    let host: String
    let port: Int
    let policy: SSHHostKeyPolicy
    let user: String
    let responder: (@Sendable (SSHKeyboardInteractiveChallenge) async throws -> [String])?
    let passwordResponder: (@Sendable (SSHPasswordRequest) async throws -> String?)?
    let passphraseResponder: (@Sendable (SSHPassphraseRequest) async throws -> String?)?
    let logger: Logger

    init(configuration c: SSHConfiguration) {
        host = c.host
        port = c.port
        policy = c.hostKeyPolicy
        logger = c.logger
        user = c.user
        responder = c.authentication.methods.lazy.compactMap { m in
            if case .keyboardInteractive(let r) = m { return r } else { return nil }
        }.first
        passwordResponder = c.authentication.methods.lazy.compactMap { m in
            if case .passwordPrompt(_, let r) = m { return r } else { return nil }
        }.first
        passphraseResponder = c.authentication.passphrase
    }

    // MARK: connect

    func setContinuation(_ c: CheckedContinuation<Result<Void, SSHError>, Never>) {
        state.withLock { $0.continuation = c }
    }

    func attach(_ core: CoreConnection) {
        let cancelNow = state.withLock { s in
            s.core = core
            return s.cancelled
        }
        if cancelNow { sshcore_conn_cancel_connect(core.pointer.raw) }
    }

    func takeCore() -> CoreConnection? {
        state.withLock { s in
            defer { s.core = nil }
            return s.core
        }
    }

    var acceptedKey: SSHHostKey? { state.withLock { $0.acceptedKey } }

    func cancelConnect() {
        // the handle is read under the lock that published it; `core` keeps it alive
        let (core, raw) = state.withLock { s in
            s.cancelled = true
            return (s.core, s.core?.pointer.raw)
        }
        if let raw { withExtendedLifetime(core) { sshcore_conn_cancel_connect(raw) } }
    }

    /// Called exactly once per connect attempt, on any thread.
    func connectFinished(_ err: sshcore_error) {
        let (continuation, outcome) = state.withLock { s in
            let outcome: Result<Void, SSHError>
            if err.code == Int32(sshcore_code.SSHCORE_E_OK.rawValue) {
                outcome = .success(())
            } else {
                var e = SSHError(core: err)
                e.host = host
                e.port = port
                e.presentedHostKey = s.presentedKey
                if e.code == .hostKeyRejected, let r = s.rejection {
                    e.message = "host key rejected: \(r.reason)"
                    e.context = .hostKeyRejected(expected: r.expected)
                    e.cause = r.cause
                }
                if e.code == .authenticationFailed {
                    e.cause = e.cause ?? s.responderError
                    // the core is attached long before authentication can fail
                    if let core = s.core {
                        e.context = .authenticationFailed(
                            offered: SSHAuthMethods(rawValue: sshcore_conn_offered_methods(core.pointer.raw)))
                    }
                }
                outcome = .failure(e)
            }
            defer { s.continuation = nil }
            return (s.continuation, outcome)
        }
        continuation?.resume(returning: outcome)
    }

    // MARK: host key and keyboard-interactive (answers go back to the core exactly once)

    func evaluateHostKey(_ key: SSHHostKey, conn: ConnPointer) {
        state.withLock { $0.presentedKey = key }
        let policy = self.policy
        let context = SSHHostKeyContext(host: host, port: port, presentedKey: key)
        Task {
            let verdict = await policy.evaluate(context)
            switch verdict {
            case .accept:
                self.state.withLock { $0.acceptedKey = key }
                _ = sshcore_conn_hostkey_verdict(conn.raw, 1, nil)
            case .reject(let reason, let expected, let cause):
                // info, not warning: the connect error that follows says it
                self.logger.info("host key rejected", metadata: [
                    "host": "\(self.host)", "key": "\(key)", "reason": "\(reason)",
                ])
                self.state.withLock { $0.rejection = (reason, expected, cause) }
                _ = sshcore_conn_hostkey_verdict(conn.raw, 0, reason)
            }
        }
    }

    func answerKeyboardInteractive(_ challenge: SSHKeyboardInteractiveChallenge, conn: ConnPointer) {
        guard let responder else {
            _ = sshcore_conn_kbdint_reply(conn.raw, nil, 0)
            return
        }
        Task {
            do {
                let answers = try await responder(challenge)
                guard answers.count == challenge.prompts.count else {
                    throw SSHError(.invalidArgument,
                                   "responder gave \(answers.count) answers to \(challenge.prompts.count) prompts")
                }
                try Self.checkAnswers(answers)
                Self.reply(answers, conn: conn)
            } catch {
                self.abortAnswer(error, conn: conn)
            }
        }
    }

    /// A password prompt: one answer, or none (the next method); a throw aborts.
    func answerPassword(_ request: SSHPasswordRequest, conn: ConnPointer) {
        answerOne(request, passwordResponder, conn: conn, skipsEmpty: false)
    }

    /// A key's passphrase: one answer, or none (the key is not used; an empty passphrase
    /// is ssh's "skip this key"); a throw aborts.
    func answerPassphrase(_ request: SSHPassphraseRequest, conn: ConnPointer) {
        answerOne(request, passphraseResponder, conn: conn, skipsEmpty: true)
    }

    /// One answer from `responder`, or none at all (not a NULL array: the core goes on
    /// without it); no responder, or a throw, aborts.
    private func answerOne<Request: Sendable>(_ request: Request,
                                              _ responder: (@Sendable (Request) async throws -> String?)?,
                                              conn: ConnPointer, skipsEmpty: Bool) {
        guard let responder else {
            _ = sshcore_conn_kbdint_reply(conn.raw, nil, 0)
            return
        }
        Task {
            do {
                let answers = try await responder(request).flatMap { skipsEmpty && $0.isEmpty ? nil : [$0] } ?? []
                try Self.checkAnswers(answers)
                Self.reply(answers, conn: conn)
            } catch {
                self.abortAnswer(error, conn: conn)
            }
        }
    }

    /// An answer with a NUL byte would reach the server cut short: authentication ends
    /// with `invalidArgument` as the cause instead.
    private static func checkAnswers(_ answers: [String]) throws(SSHError) {
        if answers.contains(where: { $0.utf8.contains(0) }) {
            throw SSHError(.invalidArgument, "an answer to the server's prompt contains a NUL byte")
        }
    }

    /// Hands `answers` to the core (which copies them); the copies here are wiped.
    private static func reply(_ answers: [String], conn: ConnPointer) {
        let arena = CStringArena()
        // never an empty array: its base address would be NULL, which aborts
        let pointers = (answers.isEmpty ? [""] : answers).map { arena.dup($0)! }
        pointers.withUnsafeBufferPointer { buf in
            _ = sshcore_conn_kbdint_reply(conn.raw, buf.baseAddress, answers.count)
        }
        arena.wipeAndFree()
    }

    /// A responder threw: authentication ends, with its error as the cause.
    private func abortAnswer(_ error: any Error, conn: ConnPointer) {
        state.withLock { $0.responderError = error }
        _ = sshcore_conn_kbdint_reply(conn.raw, nil, 0)
    }

    // MARK: termination

    func markTerminated() {
        let (waiters, handlers) = state.withLock { s in
            s.terminated = true
            defer {
                s.terminationWaiters = []
                s.terminationHandlers = [:]
            }
            return (s.terminationWaiters, Array(s.terminationHandlers.values))
        }
        for w in waiters { w.resume() }
        for h in handlers { h() }
    }

    /// Runs `body` once the connection has ended (at once, and nil returned, if it has).
    /// The token takes it back (`removeTerminationHandler`): for something that stops
    /// before its connection, where a task waiting on `waitUntilTerminated` would stay
    /// suspended until the connection ends.
    func onTerminated(_ body: @escaping @Sendable () -> Void) -> UInt64? {
        let token = state.withLock { s -> UInt64? in
            if s.terminated { return nil }
            s.nextHandlerToken += 1
            s.terminationHandlers[s.nextHandlerToken] = body
            return s.nextHandlerToken
        }
        if token == nil { body() }
        return token
    }

    func removeTerminationHandler(_ token: UInt64) {
        _ = state.withLock { $0.terminationHandlers.removeValue(forKey: token) }
    }

    /// How many termination handlers wait (tests: nothing that stopped stays registered).
    var terminationHandlerCount: Int { state.withLock { $0.terminationHandlers.count } }

    func waitUntilTerminated() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let done = state.withLock { s in
                if s.terminated { return true }
                s.terminationWaiters.append(c)
                return false
            }
            if done { c.resume() }
        }
    }
}
