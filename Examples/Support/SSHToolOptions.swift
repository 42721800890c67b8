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
        var list = identityFiles.filter { Self.unreachable($0) == nil }.map { "IdentityFile \"\($0)\"" }
        if let jump { list.append("ProxyJump \(jump)") }
        if forwardAgent { list.append("ForwardAgent yes") }
        return list + options
    }

    /// ssh's warnings for `-i` files it cannot stat: such a file is left out, so the
    /// configuration's identities (or ssh's defaults) are tried as if it was not given.
    var identityWarnings: [String] {
        identityFiles.compactMap { file in
            Self.unreachable(file).map { "Warning: Identity file \(file) not accessible: \($0).\n" }
        }
    }

    /// Why `path` cannot be looked at (`stat` fails), or nil.
    static func unreachable(_ path: String) -> String? {
        var info = stat()
        return stat(path, &info) == 0 ? nil : String(cString: strerror(errno))
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

/// A command line read as ssh reads it: options may come before the destination and
/// after it, up to the first word that is not an option (the remote command) or `--`.
/// `ssh host -p 2222 uptime` connects to port 2222; passed through as it was, `-p 2222`
/// would become part of the remote command. Returns `arguments` with the options after the
/// destination moved before it, where the argument parser reads them.
///
/// - Parameters:
///   - valued: the letters of the options that take a value (`p` of `-p 2222` or `-p2222`).
///   - permuteAll: options are read between all operands (scp and sftp on Linux, whose
///     getopt permutes), not only up to the word after the destination.
/// Answers the argument parser's own questions for a tool that reads its destination and
/// command itself (its parser passes every word after its options through unread, so the
/// parser never sees these): `--version` alone prints the version; `--experimental-dump-help`
/// alone (what the manual generator asks) is answered by `manual`, the same options with the
/// trailing words as a plain argument. True when it answered.
public func answersParserQuestions(_ arguments: [String], _ configuration: CommandConfiguration,
                                   manual: any ParsableCommand.Type) -> Bool
{
    switch arguments {
    case ["--version"] where !configuration.version.isEmpty:
        print(configuration.version)
        return true
    case ["--experimental-dump-help"]:
        manual.main(arguments) // exits
        return true
    default:
        return false
    }
}

public func optionsFirst(_ arguments: [String], valued: Set<Character>, permuteAll: Bool = false) -> [String] {
    let (options, operands) = splitOptions(arguments, valued: valued, permuteAll: permuteAll)
    return options + operands
}

/// The options (with their values) and the operands of a command line, as `optionsFirst`
/// reads them.
public func splitOptions(_ arguments: [String], valued: Set<Character>, permuteAll: Bool = false)
    -> (options: [String], operands: [String])
{
    var options: [String] = []
    var operands: [String] = []
    var i = arguments.startIndex
    var optionsEnded = false
    while i < arguments.endIndex {
        let word = arguments[i]
        i += 1
        if optionsEnded {
            operands.append(word)
            continue
        }
        if word == "--" {
            // options end here; the `--` stays for the tool (it drops one before the command)
            optionsEnded = true
            operands.append(word)
            continue
        }
        guard word.hasPrefix("-"), word.count > 1 else {
            operands.append(word)
            // ssh: the destination, then options again until the command's first word
            if !permuteAll && operands.count >= 2 { optionsEnded = true }
            continue
        }
        // `-nqv`, `-p 2222`, `-p2222`, `-oPort=22`: the first valued letter takes the rest of
        // the word or the next word; a joined value is split off (the argument parser would
        // take `-oPort=22` for an option called `oPort`)
        let letters = word.dropFirst()
        guard !word.hasPrefix("--"), let v = letters.firstIndex(where: { valued.contains($0) }) else {
            options.append(word)
            continue
        }
        let joined = letters[letters.index(after: v)...]
        options.append("-" + letters[...v])
        if !joined.isEmpty {
            options.append(String(joined))
        } else if i < arguments.endIndex {
            options.append(arguments[i])
            i += 1
        }
    }
    return (options, operands)
}
