#if canImport(Glibc)
import Glibc
#endif

/// The user's OpenSSH client configuration (the ssh_config manual page), read and resolved for a
/// host exactly as OpenSSH 9.2's `ssh` does, so that what works with `ssh prod-db`
/// works here.
///
/// ```swift
/// let config = try OpenSSHConfig().resolve("prod-db")
/// print(config.hostName, config.user, config.port, config.identityFiles)
/// ```
///
/// The rules are OpenSSH's: the first value of a keyword wins (`IdentityFile`,
/// `CertificateFile`, the forwards and `SendEnv` add up instead); `Host` patterns
/// (`*`, `?`, `!`) match the name as given, case-sensitively; `Match` takes `all`,
/// `host`, `originalhost`, `user`, `localuser`, `canonical`, `final` and (only when
/// `allowsMatchExec`) `exec`; `Include` reads globs relative to `~/.ssh` (or
/// `/etc/ssh` for the system file) and continues the block it is in; keywords are
/// case-insensitive, `=` or spaces separate them from values, quotes group words;
/// `%` tokens and `${VAR}` are expanded where OpenSSH expands them; algorithm lists
/// take `+`, `-` and `^`. `ssh -G` prints the same values (a conformance test checks
/// every field `SSHHostConfig` has). See the OpenSSH guide for what is not supported.
public struct OpenSSHConfig: Sendable {
    /// The facts a configuration is resolved against: who and where the client is.
    public struct Context: Sendable {
        /// The local user's home (`%d`, `~`), from the password database as ssh takes it.
        public var homeDirectory: String
        /// `%u`, and what `Match localuser` and the default `User` are.
        public var localUser: String
        /// `%i`.
        public var uid: UInt32
        /// `%l` (and `%L`, up to the first dot).
        public var localHostName: String
        /// For `${VAR}`, `Include`'s `~` (`HOME`) and `Match exec`'s shell (`SHELL`).
        public var environment: [String: String]

        /// A context with these facts; `current` reads this process's.
        public init(homeDirectory: String, localUser: String, uid: UInt32, localHostName: String,
                    environment: [String: String])
        {
            self.homeDirectory = homeDirectory
            self.localUser = localUser
            self.uid = uid
            self.localHostName = localHostName
            self.environment = environment
        }

        /// This process's user, host and environment.
        public static var current: Context {
            let uid = getuid()
            var home = "/", name = "\(uid)"
            if let pw = getpwuid(uid) {
                if let d = pw.pointee.pw_dir { home = String(cString: d) }
                if let n = pw.pointee.pw_name { name = String(cString: n) }
            }
            var host = [CChar](repeating: 0, count: 1025)
            let hostName = gethostname(&host, host.count - 1) == 0
                ? String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "localhost"
            var env: [String: String] = [:]
            var p = environ
            while let entry = p.pointee {
                let s = String(cString: entry)
                if let eq = s.firstIndex(of: "=") { env[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
                p += 1
            }
            return Context(homeDirectory: home, localUser: name, uid: uid, localHostName: hostName, environment: env)
        }
    }

    /// Which files are read: `nil` for ssh's own (`~/.ssh/config`, then
    /// `/etc/ssh/ssh_config`, each skipped when missing), `"none"` for no file, or one
    /// file (ssh's `-F`: then the system file is not read, and a missing file is an error).
    public var configFile: String?
    /// `-o` options (`"Port=2222"`, `"User alice"`): they come before every file, so
    /// they win.
    public var options: [String]
    /// Who and where the client is; `Context.current` by default.
    public var context: Context
    /// Whether `Match exec` may run its command (through `$SHELL -c`). Off by default:
    /// a library should not run commands from a file unless asked; a `Match exec` that
    /// would have to run is then an error.
    public var allowsMatchExec: Bool

    /// A configuration to resolve hosts with; nothing is read until `resolve`.
    public init(configFile: String? = nil, options: [String] = [], context: Context = .current,
                allowsMatchExec: Bool = false)
    {
        self.configFile = configFile
        self.options = options
        self.context = context
        self.allowsMatchExec = allowsMatchExec
    }

    /// Resolves `host` (a name or alias as you would give it to `ssh`), with `user` and
    /// `port` as `ssh -l` and `-p` give them: they win over `options` and the files.
    /// - Throws: `SSHConfigError` with the file and line, where `ssh` would refuse.
    public func resolve(_ host: String, user: String? = nil, port: Int? = nil) throws(SSHConfigError) -> SSHHostConfig {
        if let port, !(1...65535).contains(port) {
            throw SSHConfigError(.invalidValue, "Bad port '\(port)'.", file: "command-line", line: 0)
        }
        var reader = SSHConfigReader(hostArgument: host, context: context, allowsExec: allowsMatchExec)
        reader.settings.user = user
        reader.settings.port = port
        try reader.readOptions(options)
        try readFiles(&reader, finalPass: false)
        // the host `Host` lines see in a final pass: HostName applied, lowercased
        let finalHost = try reader.finalHostName()
        if reader.wantsFinalPass || reader.settings.canonicalizeHostname {
            reader.beginFinalPass(host: finalHost)
            try readFiles(&reader, finalPass: true)
        }
        return try reader.finish(hostName: finalHost)
    }

    /// The hosts the files name: every word of a `Host` line that is not a pattern (has no
    /// `*`, `?` or `!`), in the order ssh reads the files (`Include`s followed), each once.
    /// With `patterns`, only the names that list matches as a `Host` line would: a
    /// comma-separated list of `*`/`?` patterns, `!` excluding (`"web*,!web3"`). This is
    /// how a fleet takes "every `web` host" from ssh_config.
    /// - Throws: `SSHConfigError` where `resolve` would (an unreadable file, a bad keyword).
    public func declaredHosts(matching patterns: String? = nil) throws(SSHConfigError) -> [String] {
        var reader = SSHConfigReader(hostArgument: "", context: context, allowsExec: false)
        reader.collectsHostNames = true
        try readFiles(&reader, finalPass: false)
        return Self.filter(reader.declaredHostNames, patterns)
    }

    /// `declaredHosts` with `text` as the only configuration file, for the tests of the parser.
    static func declaredHosts(text: [UInt8], matching patterns: String?, context: Context) throws(SSHConfigError)
        -> [String]
    {
        var reader = SSHConfigReader(hostArgument: "", context: context, allowsExec: false)
        reader.collectsHostNames = true
        reader.readText(text, file: "<text>")
        try reader.readPending()
        return filter(reader.declaredHostNames, patterns)
    }

    private static func filter(_ names: [String], _ patterns: String?) -> [String] {
        guard let patterns else { return names }
        return names.filter { SSHConfigSyntax.matchList($0, patterns, lowercasePatterns: false) == 1 }
    }

    /// Resolves `host` with `text` as the only configuration file (`<text>` in errors):
    /// for the fuzzer and the tests of the parser.
    static func resolve(_ host: String, text: [UInt8], context: Context) throws(SSHConfigError) -> SSHHostConfig {
        var reader = SSHConfigReader(hostArgument: host, context: context, allowsExec: false)
        reader.readText(text, file: "<text>")
        try reader.readPending()
        let finalHost = try reader.finalHostName()
        if reader.wantsFinalPass || reader.settings.canonicalizeHostname {
            reader.beginFinalPass(host: finalHost)
            try reader.readPending()
        }
        return try reader.finish(hostName: finalHost)
    }

    /// The files `resolve` starts from, in the order it reads them: the `configFile` given
    /// (none for `"none"`), else `~/.ssh/config` and `/etc/ssh/ssh_config`. Either may be
    /// absent; the files they `Include` are read too and are not listed.
    public var topLevelFiles: [String] {
        switch configFile {
        case .some(let f) where f.lowercased() == "none": []
        case .some(let f): [f]
        case .none: [context.homeDirectory + "/.ssh/config", "/etc/ssh/ssh_config"]
        }
    }

    private func readFiles(_ reader: inout SSHConfigReader, finalPass: Bool) throws(SSHConfigError) {
        switch configFile {
        case .some(let f) where f.lowercased() == "none":
            return
        case .some(let f):
            try reader.readTopLevel(f, userConfig: true, checkPermissions: false, mustExist: true)
        case .none:
            try reader.readTopLevel(context.homeDirectory + "/.ssh/config", userConfig: true, checkPermissions: true,
                                    mustExist: false)
            try reader.readTopLevel("/etc/ssh/ssh_config", userConfig: false, checkPermissions: false, mustExist: false)
        }
    }
}
