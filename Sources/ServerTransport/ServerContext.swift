/// What a service needs to manage a program on one server: the transport, and where
/// the program keeps its things there.
///
/// Services are built on a context, never on a concrete transport, so the same service
/// runs against this machine, a server over SSHKit or OpenSSH, and `MockTransport` in
/// tests. See Docs/Guide-Transports.md, "Adding a service".
public struct ServerContext: Sendable {
    /// The server's files and processes.
    public let transport: any ServerTransport
    /// Where the program keeps its things on that server.
    public let paths: ProgramPaths

    /// The program at `paths`, reached through `transport`.
    public init(transport: any ServerTransport, paths: ProgramPaths) {
        self.transport = transport
        self.paths = paths
    }

    /// Namespaces whatever a service caches about this server.
    public var serverID: ServerID { transport.serverID }
}

/// The well-known paths of a managed program on its server (`~/` is the server's home).
public struct ProgramPaths: Sendable, Equatable {
    /// The program's own directory, e.g. `~/.agent`.
    public var root: String
    /// The program to run (a path, or a name the server's PATH resolves).
    public var executable: String
    /// Its configuration (`config.json` under `root` by default).
    public var configFile: String
    /// `KEY=value` lines with credentials (a secret: 0600).
    public var environmentFile: String
    /// Its SQLite state.
    public var database: String
    /// Where its logs go (`logs` under `root` by default).
    public var logDirectory: String

    /// The conventional layout under `root`: `config.json`, `.env`, `state.db`, `logs`.
    public init(root: String, executable: String) {
        self.root = root
        self.executable = executable
        configFile = root + "/config.json"
        environmentFile = root + "/.env"
        database = root + "/state.db"
        logDirectory = root + "/logs"
    }
}
