// The options every example tool takes, as OpenSSH's ssh, sftp and scp spell them.
import ArgumentParser
import Foundation
import Logging
import SSHKit

/// `-i -F -J -o -A -v -q`: how the tools read the user's OpenSSH setup. The port and
/// the login name are each tool's own (`ssh -p -l`, `sftp -P`).
public struct SSHToolOptions: ParsableArguments {
    @Option(name: .customShort("i"),
            help: ArgumentHelp("A private key file to try before the configuration's (ssh -i); repeatable.",
                               valueName: "identity_file"))
    public var identityFiles: [String] = []
    @Option(name: .customShort("F"),
            help: ArgumentHelp("Read this configuration file instead of ~/.ssh/config and /etc/ssh/ssh_config; "
                               + "'none' reads none.", valueName: "configfile"))
    public var configFile: String?
    @Option(name: .customShort("J"),
            help: ArgumentHelp("Connect through these jump hosts first: [user@]host[:port], comma-separated "
                               + "(ProxyJump).", valueName: "destination"))
    public var jump: String?
    @Option(name: .customShort("o", allowingJoined: true),
            help: ArgumentHelp("An ssh_config option, Keyword=Value; repeatable; wins over the files.",
                               valueName: "option"))
    public var options: [String] = []
    @Flag(name: .customShort("A"), help: "Forward the ssh-agent connection (ForwardAgent yes).")
    public var forwardAgent = false
    @Flag(name: .customShort("v"), help: "Debug messages on stderr; -vv and -vvv add libssh's own.")
    public var verbosity: Int
    @Flag(name: .customShort("q"), help: "Quiet: no warnings or notices, only errors.")
    public var quiet = false

    public init() {}

    /// The `-o` list these options stand for, in ssh's order: `-i` keys before the
    /// configuration's, `-J` and `-A` as the keywords they set, then each `-o`.
    var configOptions: [String] {
        var list = identityFiles.map { "IdentityFile \"\($0)\"" }
        if let jump { list.append("ProxyJump \(jump)") }
        if forwardAgent { list.append("ForwardAgent yes") }
        return list + options
    }

    /// The logger of the connection: warnings by default (what ssh prints), debug
    /// messages with `-v`, nothing but errors with `-q`.
    public func logger(tool: String) -> Logger {
        var logger = Logger(label: tool) { _ in StandardErrorLogHandler() }
        logger.logLevel = quiet ? .error : verbosity > 0 ? .debug : .warning
        return logger
    }
}

/// One line on stderr per message, as ssh prints its own: `debug1: connecting host=…`.
public struct StandardErrorLogHandler: LogHandler {
    public var logLevel: Logger.Level = .warning
    public var metadata: Logger.Metadata = [:]

    public init() {}

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let prefix: String
        switch event.level {
        case .trace, .debug: prefix = "debug1: "
        case .info, .notice, .error, .critical: prefix = ""
        case .warning: prefix = "Warning: "
        }
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        let fields = all.sorted { $0.key < $1.key }.map { " \($0.key)=\($0.value)" }.joined()
        FileHandle.standardError.write(Data("\(prefix)\(event.message)\(fields)\n".utf8))
    }
}

/// `-p port` and `-l login_name`, as ssh takes them (sftp and scp spell the port `-P`).
public struct SSHLoginOptions: ParsableArguments {
    @Option(name: .customShort("p"), help: ArgumentHelp("Port to connect to (Port).", valueName: "port"))
    public var port: Int?
    @Option(name: .customShort("l"), help: ArgumentHelp("User to log in as (User).", valueName: "login_name"))
    public var login: String?

    public init() {}
}

/// The destination and what follows it, as ssh reads them: options go before the
/// destination; a `--` before or right after it is dropped.
public func splitDestination(_ arguments: [String]) throws -> (destination: SSHDestination, rest: [String]) {
    try rejectOptionsInOperands(arguments)
    var args = arguments[...]
    if args.first == "--" { args = args.dropFirst() }
    guard let first = args.first else { throw ValidationError("no destination given") }
    var rest = args.dropFirst()
    if rest.first == "--" { rest = rest.dropFirst() }
    return (try SSHDestination(parsing: first), Array(rest))
}

/// Operands captured for passing through start at the first word the parser did not
/// know: `--help`, or an option this tool does not have, lands there.
public func rejectOptionsInOperands(_ arguments: [String]) throws {
    guard let first = arguments.first, first.hasPrefix("-"), first != "--" else { return }
    if first == "-h" || first == "--help" { throw CleanExit.helpRequest() }
    throw ValidationError("unknown option '\(first)'")
}
