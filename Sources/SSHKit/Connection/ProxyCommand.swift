import Foundation
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A running `ProxyCommand` (the OpenSSH client configuration keyword): a local command whose standard input and
/// output are the connection's byte stream, e.g. `nc bastion 22` or
/// `ssh -W %h:%p jump`.
///
/// Started as ssh starts it: `$SHELL -c "exec <command>"` (`/bin/sh` when `SHELL` is
/// unset), with one end of a socket pair as its stdin and stdout and this process's
/// stderr; the other end goes to the core as the connection's socket, the way jump
/// hosts hand over theirs. No fd of ours but those three reaches the command.
///
/// It is stopped with the connection (SIGHUP, as ssh sends it, then SIGKILL after a
/// second), and reaped by a thread that waits for it. The pid is signalled only
/// while the process is known not to have been reaped, so a reused pid is never hit.
final class ProxyCommandProcess: Sendable {
    private struct State {
        var exit: Int32?        // wait status, once the process has ended
        var reaped = false
        var stopping = false
    }

    /// What the waiter thread and `stop` share; the thread keeps only this alive.
    private final class Shared: Sendable {
        let state = Mutex(State())
    }

    let command: String
    let pid: pid_t
    private let shared: Shared

    private init(command: String, pid: pid_t, shared: Shared) {
        self.command = command
        self.pid = pid
        self.shared = shared
    }

    deinit { stop() }

    /// Starts `command`; returns it and the socket the connection runs over (the
    /// caller owns the fd).
    /// - Throws: `SSHError` `.proxyCommandFailed` when it cannot be started.
    static func start(_ command: String, logger: Logger) throws(SSHError) -> (ProxyCommandProcess, Int32) {
        let shell = getenv("SHELL").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/bin/sh"
        let fd: Int32, pid: pid_t
        switch CoreProxy.spawn(shell: shell, command: command) {
        case .success(let started): (fd, pid) = started
        case .failure(let e): throw failure(command, "could not run \(shell)", errno: e.value)
        }
        let shared = Shared()
        let process = ProxyCommandProcess(command: command, pid: pid, shared: shared)
        Thread { reap(pid: pid, shared: shared) }.start()
        logger.debug("ProxyCommand started", metadata: ["command": "\(command)", "pid": "\(pid)"])
        return (process, fd)
    }

    private static func failure(_ command: String, _ what: String, errno e: Int32) -> SSHError {
        var error = SSHError(.proxyCommandFailed, "ProxyCommand \(command): \(what): " + String(cString: strerror(e)))
        error.systemErrno = e
        return error
    }

    /// Asks the command to end (SIGHUP), and kills it if it is still there a second
    /// later. Idempotent.
    func stop() {
        let shared = self.shared, pid = self.pid
        let first = shared.state.withLock { s -> Bool in
            guard !s.stopping else { return false }
            s.stopping = true
            if !s.reaped && s.exit == nil { kill(pid, SIGHUP) }
            return true
        }
        guard first else { return }
        Task.detached {
            try? await Task.sleep(for: .seconds(1))
            shared.state.withLock { s in
                if !s.reaped && s.exit == nil { kill(pid, SIGKILL) }
            }
        }
    }

    /// How the command ended, when it ends within `grace` (nil if it is still
    /// running): "exited with status 1", "killed by signal 9".
    func exitReason(within grace: Duration) async -> String? {
        let deadline = ContinuousClock.now + grace
        while ContinuousClock.now < deadline, shared.state.withLock({ $0.exit == nil }) {
            try? await Task.sleep(for: .milliseconds(10))
        }
        guard let status = shared.state.withLock({ $0.exit }) else { return nil }
        let code = (status >> 8) & 0xff, signal = status & 0x7f
        return signal == 0 ? "exited with status \(code)" : "was killed by signal \(signal)"
    }

    private static func reap(pid: pid_t, shared: Shared) {
        // wait without reaping first: while the zombie exists, the pid cannot be reused,
        // so `stop` may still signal it under the lock
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR {}
        shared.state.withLock { s in
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            s.exit = status
            s.reaped = true
        }
    }
}
