// ssh-sftp: copy files like scp, or run one file operation like sftp's batch mode.
//
//   ssh-sftp prod-db:/var/log/syslog ./syslog          (a progress bar when stderr is a terminal)
//   ssh-sftp -r ./site me@web:/srv/www                 (uploads are atomic: a temp file, then a rename)
//   ssh-sftp prod-db ls /var/log
//   ssh-sftp prod-db rm PATH | mkdir [-p] PATH | mv FROM TO | get REMOTE LOCAL | put LOCAL REMOTE
//
// Exit status: 0 on success, 1 when the server refused (no such file, permission denied,
// ...), 255 when the connection failed.
import ArgumentParser
import CBuildInfo
import ExampleSupport
import Foundation
import SSHKit

@main
struct SSHSFTP: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ssh-sftp",
        abstract: "Copy files like scp, or list, move and remove remote files, over SFTP.",
        usage: """
            ssh-sftp [-raqvA] [-P port] [-i identity_file] [-F configfile] [-J destination] [-o option]
                     source ... target                         (scp: [user@]host:path on one side)
            ssh-sftp [options] destination ls|get|put|rm|mkdir [-p]|mv path ...
            """,
        discussion: """
            Reads ~/.ssh/config and the known_hosts files as ssh does (see ssh-exec --help). As with \
            scp, an operand with a ':' before any '/' is remote ([user@]host:path; [addr]:path for \
            IPv6; an empty path is the login directory); write ./a:b for a local file with a colon. \
            Copying to an existing directory, or several sources, puts each file inside it.
            """,
        version: String(cString: sshkit_build_version_line()))

    /// Options may also follow the operands, as scp and sftp (with glibc's getopt) take
    /// them; in the `destination operation paths` form they end at the operation (`mkdir
    /// -p` is the operation's).
    static func main() async {
        let args = Array(CommandLine.arguments.dropFirst())
        if answersParserQuestions(args, configuration, manual: SSHSFTPManual.self) { return }
        let operations: Set<String> = ["ls", "get", "put", "rm", "mkdir", "mv"]
        let words = splitOptions(args, valued: Set("PiFJo")).operands.filter { $0 != "--" }
        let batch = words.count >= 2 && operations.contains(words[1]) && !words[0].contains(":")
        await Self.main(optionsFirst(args, valued: Set("PiFJo"), permuteAll: !batch))
    }

    @OptionGroup var ssh: SSHToolOptions
    @OptionGroup var copy: CopyOptions
    @Argument(parsing: .captureForPassthrough, help: Self.operandsHelp)
    var operands: [String] = []

    static let operandsHelp = ArgumentHelp("scp-like operands, or a destination, an operation and its paths.",
                                           valueName: "operands")
    var port: Int? { copy.port }
    var recursive: Bool { copy.recursive }
    var resume: Bool { copy.resume }

    func run() async throws {
        try rejectOptionsInOperands(operands)
        var args = operands
        if args.first == "--" { args.removeFirst() }
        guard let first = args.first else { throw ValidationError("nothing to do: give source and target") }
        let parsed = try args.map(SSHFileOperand.init)
        let destination: SSHDestination
        let work: @Sendable (SFTPClient) async throws -> Void
        if case .remote(let d, _) = parsed[0] {
            // scp: host:path ... local
            guard parsed.count >= 2, case .local(let target) = parsed.last! else {
                throw ValidationError("copy from the server to a local path (remote to remote is not supported)")
            }
            var sources: [SFTPPath] = []
            for operand in parsed.dropLast() {
                guard case .remote(let other, let path) = operand, other == d else {
                    throw ValidationError("every source must be on the same host")
                }
                sources.append(SFTPPath(path))
            }
            destination = d
            work = { [recursive, resume, sources] sftp in
                try await Self.download(sources, to: target, sftp: sftp, recursive: recursive, resume: resume)
            }
        } else if case .remote(let d, let path) = parsed.last!, parsed.count >= 2 {
            // scp: local ... host:path
            var sources: [String] = []
            for operand in parsed.dropLast() {
                guard case .local(let local) = operand else {
                    throw ValidationError("copy from local paths to the server (remote to remote is not supported)")
                }
                sources.append(local)
            }
            destination = d
            work = { [recursive, resume, sources] sftp in
                try await Self.upload(sources, to: SFTPPath(path), sftp: sftp, recursive: recursive, resume: resume)
            }
        } else {
            // sftp batch: destination operation paths
            destination = try SSHDestination(parsing: first)
            guard args.count >= 2 else { throw ValidationError("give an operation: ls, get, put, rm, mkdir, mv") }
            let operation = args[1]
            var paths = Array(args.dropFirst(2))
            let parents = operation == "mkdir" && paths.first == "-p"
            if parents { paths.removeFirst() }
            let arity = ["ls": 1, "get": 2, "put": 2, "rm": 1, "mkdir": 1, "mv": 2]
            guard let n = arity[operation] else { throw ValidationError("unknown operation \(operation)") }
            guard paths.count == n else { throw ValidationError("\(operation) takes \(n) path(s)") }
            work = { [recursive, resume, paths] sftp in
                try await Self.perform(operation, paths, parents: parents, sftp: sftp, recursive: recursive,
                                       resume: resume)
            }
        }

        let tool = try SSHToolConnection(tool: "ssh-sftp", options: ssh, destination: destination, port: port)
        do {
            try await SSHClient.withConnection(tool.configuration) { conn in
                try await conn.withSFTP { sftp in try await work(sftp) }
            }
        } catch let error as SSHError {
            let refused: Set<SSHError.Code> = [.noSuchFile, .permissionDenied, .sftpFailure, .unsupported,
                                               .localFileError, .invalidArgument, .outputLimitExceeded]
            guard refused.contains(error.code) else { throw tool.failure(error) }
            FileHandle.standardError.write(Data("ssh-sftp: \(error.message)\n".utf8))
            throw ExitCode(1)
        } catch {
            throw tool.failure(error)
        }
    }

    static func perform(_ op: String, _ paths: [String], parents: Bool, sftp: SFTPClient, recursive: Bool,
                        resume: Bool) async throws
    {
        switch op {
        case "ls":
            for e in try await sftp.listDirectory(at: SFTPPath(paths[0]))
                .sorted(by: { $0.name.bytes.lexicographicallyPrecedes($1.name.bytes) })
            {
                print(e.longName.isEmpty ? e.name.string : e.longName)
            }
        case "get":
            try await download([SFTPPath(paths[0])], to: paths[1], sftp: sftp, recursive: recursive, resume: resume)
        case "put":
            try await upload([paths[0]], to: SFTPPath(paths[1]), sftp: sftp, recursive: recursive, resume: resume)
        case "rm":
            try await sftp.removeFile(at: SFTPPath(paths[0]))
        case "mkdir":
            try await sftp.createDirectory(at: SFTPPath(paths[0]), parents: parents)
        default: // mv
            try await sftp.rename(SFTPPath(paths[0]), to: SFTPPath(paths[1]), replacing: true)
        }
    }

    /// Each source to `target`, or into it when it is a directory or there are several.
    static func download(_ sources: [SFTPPath], to target: String, sftp: SFTPClient, recursive: Bool,
                         resume: Bool) async throws
    {
        var isDirectory: ObjCBool = false
        let into = FileManager.default.fileExists(atPath: target, isDirectory: &isDirectory) && isDirectory.boolValue
        if sources.count > 1 && !into { throw SSHError(.invalidArgument, "\(target): not a directory") }
        let options = SFTPTransferOptions(resume: resume)
        for source in sources {
            let local = into ? target + "/" + source.lastComponent.string : target
            if recursive {
                report(try await sftp.downloadDirectory(source, to: local, options: options))
            } else {
                let bar = ProgressBar(label: source.string)
                try await sftp.download(source, to: local, options: options, progress: bar.update)
                bar.finish()
            }
        }
    }

    /// Each local source to `target`, or into it when it is a remote directory or there
    /// are several.
    static func upload(_ sources: [String], to target: SFTPPath, sftp: SFTPClient, recursive: Bool,
                       resume: Bool) async throws
    {
        let into = (try? await sftp.attributes(at: target))?.kind == .directory
        if sources.count > 1 && !into { throw SSHError(.invalidArgument, "\(target.string): not a directory") }
        let options = SFTPTransferOptions(resume: resume)
        for source in sources {
            let name = URL(fileURLWithPath: source).lastPathComponent
            let remote = into ? target.appending(name) : target
            if recursive {
                report(try await sftp.uploadDirectory(source, to: remote, options: options))
            } else {
                let bar = ProgressBar(label: source)
                try await sftp.upload(source, to: remote, options: options, progress: bar.update)
                bar.finish()
            }
        }
    }

    static func report(_ s: SFTPTreeTransferSummary) {
        print("\(s.files) files, \(s.directories) directories, \(s.bytes) bytes")
        for path in s.skipped { print("skipped \(path)") }
    }
}

/// A one-line progress bar on stderr, drawn only when stderr is a terminal.
final class ProgressBar: Sendable {
    let label: String
    let start = ContinuousClock.now
    let enabled = isatty(2) == 1

    init(label: String) { self.label = label }

    func update(_ p: SFTPTransferProgress) {
        guard enabled else { return }
        let width = 30
        let fraction = p.fraction ?? 0
        let filled = Int(fraction * Double(width))
        let seconds = Double((ContinuousClock.now - start).components.attoseconds) / 1e18
            + Double((ContinuousClock.now - start).components.seconds)
        let rate = seconds > 0 ? Double(p.bytesTransferred) / 1e6 / seconds : 0
        let line = String(format: "\r%@ [%@%@] %3d%% %.1f MB/s", label,
                          String(repeating: "#", count: filled), String(repeating: " ", count: width - filled),
                          Int(fraction * 100), rate)
        FileHandle.standardError.write(Data(line.utf8))
    }

    func finish() {
        if enabled { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}

/// ssh-sftp's own options.
struct CopyOptions: ParsableArguments {
    @Option(name: .customShort("P"), help: ArgumentHelp("Port to connect to (Port).", valueName: "port"))
    var port: Int?
    @Flag(name: [.customShort("r"), .customLong("recursive")], help: "Copy whole directory trees.")
    var recursive = false
    @Flag(name: [.customShort("a"), .customLong("resume")], help: "Continue an interrupted copy from its partial file.")
    var resume = false
}

/// ssh-sftp as its manual describes it (`--experimental-dump-help`): the same options, the
/// operands as a plain argument.
struct SSHSFTPManual: ParsableCommand {
    static let configuration = SSHSFTP.configuration
    @OptionGroup var ssh: SSHToolOptions
    @OptionGroup var copy: CopyOptions
    @Argument(help: SSHSFTP.operandsHelp) var operands: [String] = []
}
