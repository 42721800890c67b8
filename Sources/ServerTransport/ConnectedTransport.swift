/// A transport that holds a connection the caller can manage: make it now, drop it,
/// ask whether it is up. `SSHTransport` is one; a local transport has no connection.
///
/// Dropping is not closing: the next call on the transport connects again. A
/// connection monitor (the agent-sessions engine has one) uses this to keep a bounded
/// number of hosts connected and to replace a connection that stopped answering.
public protocol ConnectedTransport: ServerTransport {
    /// Connects now unless connected; concurrent calls share one connect.
    /// - Throws: `hostUnreachable`, `authenticationFailed`, `hostKeyRejected`, …
    func connect() async throws(TransportError)
    /// Drops the current connection (calls running on it fail); the next call connects
    /// again. Drop only a connection nothing is using.
    func disconnect() async
    /// The connection is up, as far as the client knows (a server that froze is found
    /// by a call or the keepalive, not by this).
    var isConnected: Bool { get async }
    /// How many connections were made so far: 1, plus one per reconnect.
    var connectionsMade: Int { get async }
}
