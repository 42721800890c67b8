import SSHKit

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
            connecting = task
        }
        // the connect is bounded by the configuration's connectTimeout; a cancelled
        // caller still waits for it (others may be waiting too), then gets `cancelled`
        let result = await task.value
        if connecting == task { connecting = nil }
        switch result {
        case .success(let l):
            if closed {
                await l.connection.close()
                throw SSHError(.invalidState, "the transport was closed")
            }
            if live == nil {
                live = l
                connects += 1
            }
            // the connection stays for the other callers; this one was cancelled
            if Task.isCancelled { throw SSHError(.cancelled, "cancelled while connecting") }
            return live!
        case .failure(let e):
            throw e
        }
    }

    /// Forgets `l` if it is still the current connection (it failed under a caller).
    func invalidate(_ l: Live) {
        guard live === l else { return }
        live = nil
        Task { await l.connection.close() }
    }

    func close() async {
        closed = true
        let l = live
        live = nil
        if let l { await l.connection.close() }
    }
}
