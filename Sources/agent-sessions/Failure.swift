import AgentSessions
import ArgumentParser
import Foundation
import SSHKit
import ServerTransport

/// The exit statuses of agent-sessions (also in `agent-sessions --help` and the guide).
enum Exit: Int32 {
    case ok = 0
    /// The operation failed on the host: git, tmux or the agent.
    case failed = 1
    /// No such host, project, task or chat in the store.
    case notFound = 2
    /// Refused: it would lose work (`--force` overrides), or a name is taken.
    case refused = 3
    /// Could not connect: unreachable, authentication or host key.
    case connection = 4
    /// The local store or configuration cannot be read or written.
    case storage = 5
    /// A merge would conflict; nothing was changed.
    case conflict = 6
    /// Bad arguments or input (a missing prompt file, an unknown agent).
    case usage = 64
    /// Interrupted (Ctrl-C).
    case interrupted = 130

    static let table = """
        EXIT STATUS
          0    success
          1    the operation failed on the host (git, tmux, the agent)
          2    not found: no such host, project, task or chat in the store
          3    refused: it would lose work (use --force), a checkout has uncommitted
               changes, nothing to push or propose, a repository of another project
               (use --force), the task is archived, or a name is taken
          4    could not connect: unreachable, authentication or host key
          5    the local store or configuration cannot be read or written
          6    a merge would conflict (the files are listed); nothing was changed
          64   bad arguments or input
          130  interrupted
        """
}

/// A failure of the tool: one line for the user (what failed, what to do) and an exit status.
struct Failure: Error, CustomStringConvertible {
    var exit: Exit
    var message: String

    init(_ exit: Exit, _ message: String) {
        self.exit = exit
        self.message = message
    }

    var description: String { message }

    static func usage(_ message: String) -> Failure { Failure(.usage, message) }
    static func notFound(_ message: String) -> Failure { Failure(.notFound, message) }
    static func refused(_ message: String) -> Failure { Failure(.refused, message) }

    /// The engine's error as the user sees it.
    init(_ error: AgentError) {
        let text = Self.oneLine(error.message + (error.detail.map { $0.isEmpty ? "" : ": " + $0 } ?? ""))
        switch error.code {
        case .notFound: self.init(.notFound, text)
        case .worktreeHasUnsavedWork:
            self.init(.refused, text + "; commit or push it, or pass --force to discard it")
        case .storage: self.init(.storage, text)
        case .mergeConflict: self.init(.conflict, text)
        case .checkoutHasChanges, .nothingToLand, .notTheSameProject, .taskArchived, .nameTaken, .hasTasks, .notAnAttempt:
            self.init(.refused, text)
        case .cancelled: self.init(.interrupted, "interrupted")
        case .invalidArgument, .invalidEnvironmentName, .unknownProvider, .ambiguous: self.init(.usage, text)
        case .transport:
            if let t = error.cause as? TransportError {
                self.init(transport: t, context: error.message)
            } else {
                self.init(.failed, text)
            }
        case .tmuxUnavailable: self.init(.failed, text + "; install tmux on the host")
        case .notAGitRepository: self.init(.failed, text + "; give the path of a git checkout")
        default: self.init(.failed, text)
        }
    }

    /// A transport failure: connection problems are `connection`, the rest `failed`.
    init(transport t: TransportError, context: String? = nil) {
        let text = Self.oneLine(context ?? t.message)
        switch t.code {
        case .hostUnreachable, .noAnswer:
            self.init(.connection, text + "; check that the host is up and reachable (agent-sessions hosts test)")
        case .authenticationFailed:
            self.init(.connection, text + "; check the key, ssh-agent or password of the host")
        case .hostKeyRejected:
            self.init(.connection, text + "; if the host was reinstalled, remove its old key from known_hosts")
        default:
            self.init(t.isCancellation ? .interrupted : .failed, text)
        }
    }

    /// Any error, as a failure.
    static func from(_ error: any Error) -> Failure {
        switch error {
        case let f as Failure: return f
        case let e as AgentError: return Failure(e)
        case let t as TransportError: return Failure(transport: t)
        case let s as SSHError: return Failure(transport: TransportError(s))
        case let c as SSHConfigError: return Failure(.usage, oneLine("the OpenSSH configuration: \(c)"))
        case is CancellationError: return Failure(.interrupted, "interrupted")
        default: return Failure(.failed, oneLine("\(error)"))
        }
    }

    /// Messages are one line: inner newlines become "; ", and very long ones are cut.
    static func oneLine(_ text: String) -> String {
        let parts = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        let joined = parts.joined(separator: "; ")
        return joined.count > 400 ? String(joined.prefix(400)) + "…" : joined
    }
}

/// Runs a command's body: a failure is printed as one line on standard error and becomes
/// the process's exit status.
func running(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let e as ExitCode {
        throw e
    } catch let e as ValidationError {
        throw e
    } catch {
        let f = Failure.from(error)
        FileHandle.standardError.write(Data("agent-sessions: \(f.message)\n".utf8))
        throw ExitCode(f.exit.rawValue)
    }
}

/// Writes a line to standard error.
func note(_ text: String) {
    fflush(nil) // after what standard output holds, when both go to one place
    FileHandle.standardError.write(Data((text + "\n").utf8))
}
