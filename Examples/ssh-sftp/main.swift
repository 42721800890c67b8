// ssh-sftp: file operations over SFTP, like OpenSSH's `sftp` in batch mode.
//
//   ssh-sftp --host 127.0.0.1 --port 2222 --user me --key ~/.ssh/id_ed25519 \
//            --fingerprint SHA256:... ls /var/log
//   ssh-sftp ... get /var/log/syslog ./syslog      (a progress bar when stderr is a terminal)
//   ssh-sftp ... put ./app.tar /srv/app.tar        (atomic: a temp file, then a rename)
//   ssh-sftp ... rm PATH | mkdir [-p] PATH | mv FROM TO
//
// Exit status: 0 on success, 1 when the server refused (no such file, permission denied,
// ...), 255 when the connection failed.
import ArgumentParser
import ExampleSupport
import Foundation
import SSHKit

@main
struct SSHSFTP: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ssh-sftp",
        abstract: "List, copy, move and remove remote files over SFTP.",
        discussion: "Operations: ls PATH, get REMOTE LOCAL, put LOCAL REMOTE, rm PATH, mkdir [-p] PATH, mv FROM TO.")

    @OptionGroup var connection: ConnectionOptions
    @Flag(name: .customLong("recursive"), help: "get/put a whole directory tree.") var recursive = false
    @Flag(help: "Continue an interrupted get/put from its partial file.") var resume = false
    @Flag(name: [.customShort("p"), .customLong("parents")], help: "mkdir: create missing parents, accept an existing directory.")
    var parents = false
    @Argument(help: "The operation: ls, get, put, rm, mkdir, mv.") var operation: String
    @Argument(help: "Its paths.") var paths: [String] = []

    func run() async throws {
        let config = try connection.configuration()
        let op = operation, args = paths
        let arity = ["ls": 1, "get": 2, "put": 2, "rm": 1, "mkdir": 1, "mv": 2]
        let operands = args
        guard let n = arity[op] else { throw ValidationError("unknown operation \(op)") }
        guard operands.count == n else { throw ValidationError("\(op) takes \(n) path(s)") }
        let options = SFTPTransferOptions(resume: resume)
        do {
            try await SSHClient.withConnection(config) { conn in
                try await conn.withSFTP { sftp in
                    switch op {
                    case "ls":
                        for e in try await sftp.listDirectory(at: SFTPPath(operands[0])).sorted(by: { $0.name.bytes.lexicographicallyPrecedes($1.name.bytes) }) {
                            print(e.longName.isEmpty ? e.name.string : e.longName)
                        }
                    case "get" where recursive:
                        let s = try await sftp.downloadDirectory(SFTPPath(operands[0]), to: operands[1], options: options)
                        report(s)
                    case "get":
                        let bar = ProgressBar(label: operands[0])
                        try await sftp.download(SFTPPath(operands[0]), to: operands[1], options: options, progress: bar.update)
                        bar.finish()
                    case "put" where recursive:
                        let s = try await sftp.uploadDirectory(operands[0], to: SFTPPath(operands[1]), options: options)
                        report(s)
                    case "put":
                        let bar = ProgressBar(label: operands[0])
                        try await sftp.upload(operands[0], to: SFTPPath(operands[1]), options: options, progress: bar.update)
                        bar.finish()
                    case "rm":
                        try await sftp.removeFile(at: SFTPPath(operands[0]))
                    case "mkdir":
                        try await sftp.createDirectory(at: SFTPPath(operands[0]), parents: parents)
                    default: // mv
                        try await sftp.rename(SFTPPath(operands[0]), to: SFTPPath(operands[1]), replacing: true)
                    }
                }
            }
        } catch let error as SSHError {
            FileHandle.standardError.write(Data("ssh-sftp: \(error.message)\n".utf8))
            let refused: Set<SSHError.Code> = [.noSuchFile, .permissionDenied, .sftpFailure, .unsupported,
                                               .localFileError, .invalidArgument, .outputLimitExceeded]
            throw ExitCode(refused.contains(error.code) ? 1 : 255)
        }
    }

    func report(_ s: SFTPTreeTransferSummary) {
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
