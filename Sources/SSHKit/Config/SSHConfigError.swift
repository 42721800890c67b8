/// A configuration that `ssh` would refuse too: the file and line, and what is wrong there.
///
/// Thrown by `OpenSSHConfig.resolve`. The messages follow OpenSSH's own where it has one
/// (`Bad configuration option: foo`, `Bad port '0'.`), so a user can search for them.
public struct SSHConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of problem it is.
    public enum Code: Sendable, Equatable {
        /// A keyword no OpenSSH client knows (and `IgnoreUnknown` does not cover).
        case unknownKeyword
        /// A line that cannot be split (unbalanced quotes), a keyword without its
        /// argument, extra arguments at the end of a line.
        case syntax
        /// A value that does not parse: a port, a time, a yes/no, an algorithm name,
        /// a forward, a `%` token or `${VAR}` that cannot be expanded.
        case invalidValue
        /// A `Match` line that is malformed, or `Match exec` when the caller did not
        /// allow commands to run, or a command that ended abnormally.
        case match
        /// An `Include` that cannot be read, or includes nested deeper than 16.
        case include
        /// A top-level configuration file that cannot be read (`configFile`,
        /// `~/.ssh/config` or `/etc/ssh/ssh_config`), or `~/.ssh/config` with a bad owner
        /// or permissions.
        case unreadableFile
        /// A setting SSHKit acts on only when the caller explicitly allows it:
        /// `StrictHostKeyChecking no` (see `SSHConfigInteraction`).
        case insecure
    }

    /// What kind of problem it is.
    public var code: Code
    /// What is wrong, in OpenSSH's words where it has them.
    public var message: String
    /// The file the line is in (as given or as found by `Include`); `command-line` for
    /// `options:` and the `port:` given to `resolve`; the keyword (`HostName`,
    /// `ProxyJump`, `StrictHostKeyChecking`, …) for an error found only after the files
    /// are read (an expansion, an algorithm list, a refused setting).
    public var file: String
    /// 1-based; 0 for `options:`, for errors about a whole file, and where `file` is a
    /// keyword.
    public var line: Int

    /// An error of kind `code` at `line` of `file`.
    public init(_ code: Code, _ message: String, file: String, line: Int) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
    }

    public var description: String { "\(file) line \(line): \(message)" }
}

/// Something `ssh` would accept but that SSHKit does not act on, or that OpenSSH only
/// logs (an `Include` that matched no file): where it is and why.
public struct SSHConfigWarning: Sendable, Equatable, CustomStringConvertible {
    /// What ssh would say or ignore (`Unsupported option "…"`, `include …: no such file`).
    public var message: String
    /// The file the line is in; `command-line` for `options:`.
    public var file: String
    /// 1-based; 0 for `options:`.
    public var line: Int

    /// A warning about `line` of `file`.
    public init(_ message: String, file: String, line: Int) {
        self.message = message
        self.file = file
        self.line = line
    }

    public var description: String { "\(file) line \(line): \(message)" }
}
