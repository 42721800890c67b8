import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One resolution in progress: the lines of every file, in ssh's order, applied to
/// `settings` (first value wins). OpenSSH's `readconf.c`, for the keywords SSHKit
/// resolves; every other keyword ssh knows is kept as written in `settings.other`.
struct SSHConfigReader {
    struct Settings {
        var hostName: String?
        var user: String?
        var port: Int?
        var identityFiles: [(path: String, userProvided: Bool)] = []
        var certificateFiles: [(path: String, userProvided: Bool)] = []
        var identitiesOnly: Bool?
        var identityAgent: String?
        var proxyCommand: String?
        /// "none", or the raw hops (`a,b,c`) once parsed.
        var proxyJump: String?
        var proxyJumpHops: [SSHConfigJumpHost] = []
        var userKnownHostsFiles: [String]?
        var globalKnownHostsFiles: [String]?
        var strictHostKeyChecking: SSHHostConfig.StrictHostKeyChecking?
        var hostKeyAlias: String?
        var hashKnownHosts: Bool?
        var connectTimeout: Int?
        var serverAliveInterval: Int?
        var serverAliveCountMax: Int?
        var algorithms: [SSHConfigAlgorithms.Kind: String] = [:]
        /// Local and dynamic forwards, in order (ssh keeps them in one list).
        var localForwards: [SSHConfigForward] = []
        var remoteForwards: [SSHConfigForward] = []
        var forwardAgent: String?
        var setEnv: [String] = []
        var sendEnv: [String] = []
        var requestTTY: SSHHostConfig.RequestTTY?
        var controlMaster: SSHHostConfig.ControlMaster?
        var controlPath: String?
        var controlPersist: Int??
        var batchMode: Bool?
        var ignoreUnknown: String?
        var canonicalizeHostname = false
        var clearAllForwardings: Bool?
        /// First values of every keyword, as written.
        var other: [String: [String]] = [:]
    }

    let hostArgument: String
    let context: OpenSSHConfig.Context
    let allowsExec: Bool
    var settings = Settings()
    var warnings: [SSHConfigWarning] = []
    /// Set to list the names `Host` lines declare instead of resolving a host: `Match`
    /// blocks are then skipped without being evaluated.
    var collectsHostNames = false
    /// The declared names, once each, in reading order (when `collectsHostNames`).
    private(set) var declaredHostNames: [String] = []
    private var declaredHostNameSet: Set<String> = []
    private(set) var wantsFinalPass = false
    private var finalPass = false
    /// What `Host` lines match: the name as given, then in a final pass the final host.
    private var hostForHostLines: String
    /// The final host name once known (a final pass, and `Match host` in it).
    private var finalHost: String?

    init(hostArgument: String, context: OpenSSHConfig.Context, allowsExec: Bool) {
        self.hostArgument = hostArgument
        self.context = context
        self.allowsExec = allowsExec
        hostForHostLines = hostArgument
    }

    /// One file's state while its lines are read.
    private struct Position {
        let file: String
        let userConfig: Bool
        let depth: Int
        let neverMatch: Bool
    }

    // MARK: reading

    mutating func readOptions(_ options: [String]) throws(SSHConfigError) {
        let position = Position(file: "command-line", userConfig: true, depth: 0, neverMatch: false)
        for option in options {
            var active = true
            try apply(Array(option.utf8), line: 0, at: position, active: &active, commandLine: true)
        }
    }

    mutating func readTopLevel(_ path: String, userConfig: Bool, checkPermissions: Bool, mustExist: Bool)
        throws(SSHConfigError)
    {
        guard let lines = try readLines(path, checkPermissions: checkPermissions, missingIsError: mustExist,
                                        fromFile: path, line: 0)
        else { return }
        var active = true
        try readLines(lines, at: Position(file: path, userConfig: userConfig, depth: 0, neverMatch: false),
                      active: &active)
    }

    /// In-memory text read by `readPending` (each pass), as a user file.
    private var text: (lines: [[UInt8]], file: String)?

    mutating func readText(_ data: [UInt8], file: String) {
        text = (Self.lines(data), file)
    }

    /// Lines without their `\n` (a last line needs none).
    static func lines(_ data: [UInt8]) -> [[UInt8]] {
        var lines = data.split(separator: SSHConfigSyntax.lf, omittingEmptySubsequences: false).map(Array.init)
        if data.last == SSHConfigSyntax.lf { lines.removeLast() }
        return lines
    }

    mutating func readPending() throws(SSHConfigError) {
        guard let text else { return }
        var active = true
        try readLines(text.lines, at: Position(file: text.file, userConfig: true, depth: 0, neverMatch: false),
                      active: &active)
    }

    private mutating func readLines(_ lines: [[UInt8]], at position: Position, active: inout Bool)
        throws(SSHConfigError)
    {
        for (i, line) in lines.enumerated() {
            try apply(line, line: i + 1, at: position, active: &active, commandLine: false)
        }
    }

    /// A file's lines; nil when it is missing (or a directory) and that is allowed.
    private func readLines(_ path: String, checkPermissions: Bool, missingIsError: Bool, fromFile: String, line: Int)
        throws(SSHConfigError) -> [[UInt8]]?
    {
        // the main file's problems are its own; an included file's are the Include line's
        let code: SSHConfigError.Code = fromFile == path ? .unreadableFile : .include
        var st = stat()
        if stat(path, &st) != 0 {
            let e = errno
            if e == ENOENT && !missingIsError { return nil }
            throw SSHConfigError(code,
                                 "Can't open user config file \(path): \(String(cString: strerror(e)))",
                                 file: fromFile, line: line)
        }
        let type = st.st_mode & S_IFMT
        if type == S_IFDIR { return nil }
        // a FIFO or socket could block forever; /dev/null (a character device) is fine
        if type != S_IFREG && type != S_IFCHR {
            throw SSHConfigError(code,
                                 "Can't open user config file \(path): not a regular file", file: fromFile, line: line)
        }
        if checkPermissions && !Self.securePermissions(st, uid: context.uid, user: context.localUser) {
            throw SSHConfigError(code, "Bad owner or permissions on \(path)",
                                 file: fromFile, line: line)
        }
        guard let f = fopen(path, "r") else {
            let e = errno
            if e == ENOENT && !missingIsError { return nil }
            throw SSHConfigError(code,
                                 "Can't open user config file \(path): \(String(cString: strerror(e)))",
                                 file: fromFile, line: line)
        }
        defer { fclose(f) }
        var data: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&buf, 1, buf.count, f)
            if n > 0 { data += buf[0..<n] }
            if n < buf.count { break }
            if data.count > Self.maximumFileSize {
                throw SSHConfigError(code,
                                     "\(path) is larger than \(Self.maximumFileSize >> 20) MiB", file: fromFile, line: line)
            }
        }
        return Self.lines(data)
    }

    /// Larger files are refused (`/dev/zero` would never end).
    static let maximumFileSize = 16 << 20

    /// OpenSSH's check for files it reads with CHECKPERM (`~/.ssh/config` and every
    /// Include): owned by root or the user, not writable by others; writable by the
    /// group only when the user is its one member (Debian's rule, `secure_permissions`
    /// with the user-group-modes patch): every account whose primary group it is must be
    /// the user, a supplementary member list may name only the user, and a group with no
    /// member at all does not count as the user's.
    private static func securePermissions(_ st: stat, uid: UInt32, user: String) -> Bool {
        if st.st_uid != 0 && st.st_uid != uid { return false }
        if st.st_mode & S_IWOTH != 0 { return false }
        if st.st_mode & S_IWGRP != 0 {
            guard let group = getgrgid(st.st_gid) else { return false }
            let gid = group.pointee.gr_gid
            var supplementary: [String] = []
            if var p = group.pointee.gr_mem {
                while let m = p.pointee { supplementary.append(String(cString: m)); p += 1 }
            }
            // accounts whose primary group it is (getpwent's cursor is the process's)
            let primary: [UInt32]? = passwdScan.withLock { _ in
                var uids: [UInt32] = []
                setpwent()
                defer { endpwent() }
                while let pw = getpwent() {
                    if pw.pointee.pw_gid == gid { uids.append(pw.pointee.pw_uid) }
                }
                return uids
            }
            guard let primary, primary.allSatisfy({ $0 == uid }) else { return false }
            guard let owner = getpwuid(st.st_uid).map({ String(cString: $0.pointee.pw_name) }) else { return false }
            if !supplementary.isEmpty && supplementary != [owner] { return false }
            return !primary.isEmpty || !supplementary.isEmpty
        }
        return true
    }

    private static let passwdScan = Mutex(())

    // MARK: one line

    private mutating func apply(_ bytes: [UInt8], line: Int, at position: Position, active: inout Bool,
                                commandLine: Bool) throws(SSHConfigError)
    {
        let file = position.file
        func fail(_ code: SSHConfigError.Code, _ message: String) -> SSHConfigError {
            SSHConfigError(code, message, file: file, line: line)
        }
        guard let (keyword0, restBytes) = SSHConfigSyntax.keyword(of: bytes) else { return }
        guard let rest = restBytes else {
            throw fail(.syntax, "no argument after keyword \"\(keyword0)\"")
        }
        let keyword = SSHConfigKeywords.aliases[keyword0] ?? keyword0
        guard SSHConfigKeywords.known.contains(keyword) else {
            if let ignored = settings.ignoreUnknown,
               SSHConfigSyntax.matchList(keyword, ignored, lowercasePatterns: true) == 1
            {
                return
            }
            throw fail(.unknownKeyword, "Bad configuration option: \(keyword)")
        }
        if SSHConfigKeywords.deprecated.contains(keyword) { return }
        if SSHConfigKeywords.unsupported.contains(keyword) {
            warnings.append(SSHConfigWarning("Unsupported option \"\(keyword)\"", file: file, line: line))
            return
        }
        guard let words = SSHConfigSyntax.words(rest) else { throw fail(.syntax, "invalid quotes") }
        let isActive = active && !position.neverMatch

        // keywords that take the raw line or change the block
        switch keyword {
        case "host":
            if commandLine { throw fail(.syntax, "Host directive not supported as a command-line option") }
            active = false
            if collectsHostNames { declare(words) }
            for word in words {
                if word.isEmpty { throw fail(.syntax, "keyword host empty argument") }
                if position.neverMatch { break }
                let negated = word.hasPrefix("!")
                if SSHConfigSyntax.match(hostForHostLines, negated ? String(word.dropFirst()) : word) {
                    if negated { active = false; break }
                    active = true
                }
            }
            return
        case "match":
            if commandLine { throw fail(.syntax, "Match directive not supported as a command-line option") }
            if collectsHostNames {
                active = false
                return
            }
            let result = try matchLine(rest, file: file, line: line)
            active = position.neverMatch ? false : result
            return
        case "include":
            if commandLine { throw fail(.syntax, "Include directive not supported as a command-line option") }
            try include(words, line: line, at: position, parentActive: isActive, active: &active)
            return
        case "proxycommand":
            let value = SSHConfigSyntax.rawValue(rest)
            if isActive && settings.proxyCommand == nil { settings.proxyCommand = value }
            recordOther(keyword, [value], active: isActive)
            return
        case "proxyjump":
            try proxyJump(SSHConfigSyntax.rawValue(rest), active: isActive, fail: fail)
            return
        case "localcommand", "remotecommand", "knownhostscommand":
            recordOther(keyword, [SSHConfigSyntax.rawValue(rest)], active: isActive)
            return
        default:
            break
        }
        try SSHConfigKeywords.apply(keyword, words, to: &settings, active: isActive, userConfig: position.userConfig,
                                    environment: context.environment, fail: fail)
        recordOther(keyword, words, active: isActive)
    }

    /// Records the names among a `Host` line's words: those that are not patterns.
    private mutating func declare(_ words: [String]) {
        for word in words where !word.isEmpty && !word.contains(where: { $0 == "*" || $0 == "?" || $0 == "!" }) {
            if declaredHostNameSet.insert(word).inserted { declaredHostNames.append(word) }
        }
    }

    private mutating func recordOther(_ keyword: String, _ words: [String], active: Bool) {
        if active && settings.other[keyword] == nil { settings.other[keyword] = words }
    }

    // MARK: Include

    private mutating func include(_ words: [String], line: Int, at position: Position, parentActive: Bool,
                                  active: inout Bool) throws(SSHConfigError)
    {
        let file = position.file
        for word in words {
            if word.isEmpty { throw SSHConfigError(.syntax, "keyword include empty argument", file: file, line: line) }
            var path = word
            if path.hasPrefix("~") && !position.userConfig {
                throw SSHConfigError(.include, "bad include path \(path).", file: file, line: line)
            }
            if !path.hasPrefix("/") && !path.hasPrefix("~") {
                path = (position.userConfig ? "~/.ssh/" : "/etc/ssh/") + path
            }
            // glob(3)'s GLOB_TILDE: `~` is $HOME (then the password database)
            if path == "~" || path.hasPrefix("~/") {
                path = (context.environment["HOME"] ?? context.homeDirectory) + path.dropFirst()
            } else if path.hasPrefix("~") {
                do {
                    path = try SSHConfigExpansion.tilde(path, home: context.homeDirectory)
                } catch {
                    throw SSHConfigError(.include, SSHConfigExpansion.message(error, in: path), file: file, line: line)
                }
            }
            let matches = try Self.glob(path, file: file, line: line)
            if matches.isEmpty {
                // ssh ignores it; a glob that matches nothing is normal (Debian's own
                // `Include /etc/ssh/ssh_config.d/*.conf`), a missing named file likely a mistake
                if !word.contains(where: { $0 == "*" || $0 == "?" || $0 == "[" }) {
                    warnings.append(SSHConfigWarning("include \(word): no such file", file: file, line: line))
                }
                continue
            }
            for match in matches {
                if position.depth + 1 > 16 {
                    throw SSHConfigError(.include, "Too many recursive configuration includes", file: file, line: line)
                }
                guard let lines = try readLines(match, checkPermissions: true, missingIsError: false, fromFile: file,
                                                line: line)
                else { continue }
                let saved = active
                let inner = Position(file: match, userConfig: position.userConfig, depth: position.depth + 1,
                                     neverMatch: position.neverMatch || !parentActive)
                try readLines(lines, at: inner, active: &active)
                active = saved
            }
        }
    }

    /// Paths matching `pattern` (`*`, `?`, `[…]`), in byte order.
    private static func glob(_ pattern: String, file: String, line: Int) throws(SSHConfigError) -> [String] {
        var g = glob_t()
        defer { globfree(&g) }
        let rc = Glibc.glob(pattern, GLOB_NOSORT, nil, &g)
        if rc == GLOB_NOMATCH { return [] }
        if rc != 0 { throw SSHConfigError(.include, "glob failed for \(pattern).", file: file, line: line) }
        var out: [String] = []
        for i in 0..<Int(g.gl_pathc) {
            if let p = g.gl_pathv[i] { out.append(String(cString: p)) }
        }
        return out.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
    }

    // MARK: ProxyJump

    private mutating func proxyJump(_ value: String, active: Bool,
                                    fail: (SSHConfigError.Code, String) -> SSHConfigError) throws(SSHConfigError)
    {
        if value.lowercased() == "none" {
            if active && settings.proxyJump == nil { settings.proxyJump = "none" }
            return
        }
        // ssh 9.2 cuts at '#' and then, through its rtrim(), at the first blank after
        // the first byte
        var bytes = Array(value.utf8)
        if let hash = bytes.firstIndex(of: SSHConfigSyntax.hash) { bytes = Array(bytes[..<hash]) }
        if let blank = bytes.indices.dropFirst().first(where: { bytes[$0] == 0x20 || (bytes[$0] >= 0x09 && bytes[$0] <= 0x0D) }) {
            bytes = Array(bytes[..<blank])
        }
        let spec = String(decoding: bytes, as: UTF8.self)
        var hops: [SSHConfigJumpHost] = []
        for part in spec.split(separator: ",", omittingEmptySubsequences: false) {
            guard let hop = Self.parseHop(String(part)) else { throw fail(.invalidValue, "Invalid ProxyJump \"\(value)\"") }
            hops.append(hop)
        }
        if active && settings.proxyCommand == nil && settings.proxyJump == nil {
            settings.proxyJump = spec
            settings.proxyJumpHops = hops
            settings.proxyCommand = "none"
        }
    }

    /// `ssh://[user@]host[:port]` or `[user@]host[:port]` (`[v6]` in brackets).
    static func parseHop(_ s0: String) -> SSHConfigJumpHost? {
        var s = Substring(s0)
        if s.hasPrefix("ssh://") {
            s = s.dropFirst(6)
            if s.contains("/") { return nil }
        }
        var user: String?
        if let at = s.lastIndex(of: "@") {
            let u = s[..<at]
            if u.isEmpty { return nil }
            user = String(u.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)[0])
            s = s[s.index(after: at)...]
        }
        var host: Substring
        var rest: Substring?
        if s.hasPrefix("[") {
            guard let close = s.firstIndex(of: "]") else { return nil }
            host = s[s.index(after: s.startIndex)..<close]
            let after = s[s.index(after: close)...]
            if after.isEmpty {
                rest = nil
            } else if after.first == ":" || after.first == "/" {
                rest = after.dropFirst()
            } else {
                return nil
            }
        } else if let sep = s.firstIndex(where: { $0 == ":" || $0 == "/" }) {
            host = s[..<sep]
            rest = s[s.index(after: sep)...]
        } else {
            host = s
        }
        if host.isEmpty { return nil }
        var port: Int?
        if let rest, !rest.isEmpty {
            guard let p = SSHConfigSyntax.port(String(rest)), p > 0 else { return nil }
            port = p
        }
        return SSHConfigJumpHost(user: user, host: String(host), port: port)
    }

    // MARK: Match

    private mutating func matchLine(_ rest: [UInt8], file: String, line: Int) throws(SSHConfigError) -> Bool {
        func bad(_ message: String) -> SSHConfigError {
            SSHConfigError(.match, "\(message) (Bad Match condition)", file: file, line: line)
        }
        let port = settings.port ?? 22
        let ruser = settings.user ?? context.localUser
        let host: String
        if finalPass, let finalHost {
            host = finalHost
        } else if let hostName = settings.hostName {
            host = (try? SSHConfigExpansion.expand(hostName, tokens: ["h": hostArgument])) ?? hostName
        } else {
            host = hostArgument
        }
        let words = SSHConfigSyntax.matchWords(rest)
        var result = true
        var attributes = 0
        var i = 0
        while i < words.count {
            var attribute = words[i]
            i += 1
            let negate = attribute.hasPrefix("!")
            if negate { attribute.removeFirst() }
            let name = attribute.lowercased()
            if name == "all" {
                if attributes > 1 || i < words.count {
                    throw bad("'\(words[i - 1])' cannot be combined with other Match attributes")
                }
                if result { result = !negate }
                return result
            }
            attributes += 1
            if name == "canonical" || name == "final" {
                if name == "final" { wantsFinalPass = true }
                if finalPass == negate { result = false }
                continue
            }
            guard i < words.count else { throw bad("Missing Match criteria for \(attribute)") }
            let argument = words[i]
            i += 1
            let matched: Bool
            switch name {
            case "host":
                matched = SSHConfigSyntax.matchList(SSHConfigSyntax.lowercased(host), argument, lowercasePatterns: true) == 1
            case "originalhost":
                matched = SSHConfigSyntax.matchList(SSHConfigSyntax.lowercased(hostArgument), argument,
                                                    lowercasePatterns: true) == 1
            case "user":
                matched = SSHConfigSyntax.matchList(ruser, argument, lowercasePatterns: false) == 1
            case "localuser":
                matched = SSHConfigSyntax.matchList(context.localUser, argument, lowercasePatterns: false) == 1
            case "exec":
                var tokens = localTokens()
                tokens["C"] = SSHConfigExpansion.sha1Hex(context.localHostName + host + "\(port)" + ruser)
                tokens["h"] = host
                tokens["k"] = settings.hostKeyAlias ?? host
                tokens["n"] = hostArgument
                tokens["p"] = "\(port)"
                tokens["r"] = ruser
                let command: String
                do {
                    command = try SSHConfigExpansion.expand(argument, tokens: tokens)
                } catch {
                    throw SSHConfigError(.match, SSHConfigExpansion.message(error, in: argument), file: file, line: line)
                }
                if !result { continue }
                guard allowsExec else {
                    throw SSHConfigError(.match, "Match exec '\(command)' not run: OpenSSHConfig.allowsMatchExec is off",
                                         file: file, line: line)
                }
                guard let status = Self.runShell(command, shell: context.environment["SHELL"]) else {
                    throw SSHConfigError(.match, "match exec '\(command)' error", file: file, line: line)
                }
                matched = status == 0
            default:
                throw bad("Unsupported Match attribute \(attribute)")
            }
            if matched == negate { result = false }
        }
        if attributes == 0 { throw bad("One or more attributes required for Match") }
        return result
    }

    /// The tokens that do not depend on the resolution.
    func localTokens() -> [Character: String] {
        let short = context.localHostName.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false).first
        return ["L": short.map(String.init) ?? "", "l": context.localHostName, "d": context.homeDirectory,
                "u": context.localUser, "i": "\(context.uid)"]
    }

    /// Runs `command` with `$SHELL -c` (or /bin/sh), stdin and stdout on /dev/null;
    /// its exit status, nil when it did not exit normally.
    private static func runShell(_ command: String, shell: String?) -> Int32? {
        let sh = shell.flatMap { $0.isEmpty ? nil : $0 } ?? "/bin/sh"
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup(sh), strdup("-c"), strdup(command), nil]
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, sh, &actions, nil, argv, environ) == 0 else { return nil }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            if errno != EINTR { return nil }
        }
        // WIFEXITED / WEXITSTATUS
        guard status & 0x7F == 0 else { return nil }
        return (status >> 8) & 0xFF
    }

    // MARK: the final pass and the result

    /// HostName with `%h` expanded, lowercased unless an address (which is written as
    /// getnameinfo writes it).
    func finalHostName() throws(SSHConfigError) -> String {
        var host = hostArgument
        if let hostName = settings.hostName {
            do {
                host = try SSHConfigExpansion.expand(hostName, tokens: ["h": hostArgument])
            } catch {
                throw SSHConfigError(.invalidValue, "HostName: " + SSHConfigExpansion.message(error, in: hostName),
                                     file: "HostName", line: 0)
            }
        }
        if SSHConfigExpansion.isAddress(host) {
            if let canonical = SSHConfigExpansion.canonicalAddress(host), canonical.lowercased() != host.lowercased() {
                return canonical
            }
            return host
        }
        return SSHConfigSyntax.lowercased(host)
    }

    mutating func beginFinalPass(host: String) {
        finalPass = true
        finalHost = host
        hostForHostLines = host
        // ssh freezes the host name before the final pass
        settings.hostName = settings.hostName ?? host
    }

    /// Defaults and expansions (OpenSSH's fill_default_options and ssh.c).
    func finish(hostName: String) throws(SSHConfigError) -> SSHHostConfig {
        try SSHConfigDefaults.finish(self, hostName: hostName)
    }
}
