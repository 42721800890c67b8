import SSHKit
import Synchronization

/// One long-lived connection to a server, shared by every caller of an `SSHTransport`.
///
/// The first call connects; concurrent first calls wait for the same connect. A
/// connection that dropped (`isConnected` false, or an operation failed with a
/// connection-level error) is replaced on the next call. The SFTP session is opened on
/// the first file operation and shared the same way.
actor SharedConnection {
    /// A connected session and what was learned about it.
    final class Live: Sendable {
        let connection: SSHConnection
        /// nil when the server has no SFTP subsystem (file calls then fail, processes work).
        let sftp: SFTPClient?
        /// The login user's home directory (SFTP's `realpath(".")`, else `$HOME`).
        let home: String
        init(connection: SSHConnection, sftp: SFTPClient?, home: String) {
            self.connection = connection
            self.sftp = sftp
            self.home = home
        }
    }

    let configuration: SSHConfiguration
    private var live: Live?
    private var connecting: Task<Result<Live, SSHError>, Never>?
    private var closed = false
    /// How many connections were made (1 + reconnects); for tests and diagnostics.
    private(set) var connects = 0

    init(configuration: SSHConfiguration) {
        self.configuration = configuration
    }

    /// The current connection, connecting (once, for all waiters) when there is none.
    ///
    /// A cancelled caller returns `cancelled` at once; the connect goes on for the other
    /// callers (it is bounded by the configuration's `connectTimeout`) and, when it
    /// succeeds, stays for the next call.
    func get() async throws(SSHError) -> Live {
        if closed { throw SSHError(.invalidState, "the transport was closed") }
        if let live, live.connection.isConnected { return live }
        if let stale = live {
            live = nil
            Task { await stale.connection.close() }
        }
        let task: Task<Result<Live, SSHError>, Never>
        if let connecting {
            task = connecting
        } else {
            let configuration = configuration
            task = Task {
                // the connect installs its own result, so a waiter that resumes late can
                // never put back a connection that was replaced in the meantime
                await self.installed(Self.connect(configuration))
            }
            connecting = task
        }
        guard let result = await CancellableWait.value(of: task) else {
            throw SSHError(.cancelled, "cancelled while connecting")
        }
        return try result.get()
    }

    /// A new connection with its SFTP session (when the server has one) and home.
    private static func connect(_ configuration: SSHConfiguration) async -> Result<Live, SSHError> {
        do throws(SSHError) {
            let connection = try await SSHClient.connect(configuration)
            do throws(SSHError) {
                var sftp: SFTPClient?
                do throws(SSHError) {
                    sftp = try await connection.openSFTP()
                } catch where error.code == .sftpUnavailable {
                    sftp = nil
                }
                let home: String
                if let sftp {
                    home = try await sftp.canonicalPath(".").string
                } else {
                    home = try await connection.execute("printf %s \"$HOME\"").stdoutString
                }
                return .success(Live(connection: connection, sftp: sftp, home: home))
            } catch {
                await connection.close()
                throw error
            }
        } catch {
            return .failure(error)
        }
    }

    /// Makes a finished connect the current connection (or closes it when the
    /// transport was closed meanwhile).
    private func installed(_ result: Result<Live, SSHError>) async -> Result<Live, SSHError> {
        connecting = nil
        guard case .success(let l) = result else { return result }
        if closed {
            await l.connection.close()
            return .failure(SSHError(.invalidState, "the transport was closed"))
        }
        live = l
        connects += 1
        return result
    }

    /// Forgets `l` if it is still the current connection (it failed under a caller).
    func invalidate(_ l: Live) {
        guard live === l else { return }
        live = nil
        Task { await l.connection.close() }
    }

    /// The current connection is up.
    var isConnected: Bool { live?.connection.isConnected ?? false }

    /// Drops the current connection; the next `get` connects again.
    func disconnect() async {
        guard let l = live else { return }
        live = nil
        await l.connection.close()
    }

    func close() async {
        closed = true
        // a connect under way closes its connection itself when it ends (see `installed`)
        let l = live
        live = nil
        if let l { await l.connection.close() }
    }
}

/// Waits for a task's value, or returns nil as soon as the waiting task is cancelled
/// (the awaited task goes on).
enum CancellableWait {
    static func value<T: Sendable>(of task: Task<T, Never>) async -> T? {
        let state = Waiter<T>()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<T?, Never>) in
                let cancelledAlready = state.lock.withLock { s -> Bool in
                    if case .cancelled = s { return true }
                    s = .waiting(c)
                    return false
                }
                if cancelledAlready {
                    c.resume(returning: nil)
                    return
                }
                Task {
                    let v = await task.value
                    state.lock.withLock { $0.take() }?.resume(returning: v)
                }
            }
        } onCancel: {
            state.lock.withLock { s -> CheckedContinuation<T?, Never>? in
                if case .idle = s {
                    s = .cancelled
                    return nil
                }
                return s.take()
            }?.resume(returning: nil)
        }
    }

    private final class Waiter<T: Sendable>: Sendable {
        let lock = Mutex<WaitState<T>>(.idle)
    }

    private enum WaitState<T: Sendable> {
        case idle, waiting(CheckedContinuation<T?, Never>), cancelled, done

        /// The continuation, once: whoever takes it resumes it.
        mutating func take() -> CheckedContinuation<T?, Never>? {
            guard case .waiting(let c) = self else { return nil }
            self = .done
            return c
        }
    }
}
