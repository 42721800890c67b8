// Destinations as ssh, sftp and scp take them.
import ArgumentParser

/// `[user@]host`, or `ssh://[user@]host[:port]` (ssh's URI form).
public struct SSHDestination: Equatable, Sendable {
    public var user: String?
    public var host: String
    public var port: Int?

    public init(user: String? = nil, host: String, port: Int? = nil) {
        self.user = user
        self.host = host
        self.port = port
    }

    /// - Throws: `ValidationError` for an empty host or a bad URI port.
    public init(parsing text: String) throws {
        var rest = Substring(text)
        var uriPort: Int?
        if rest.hasPrefix("ssh://") {
            rest = rest.dropFirst(6)
            if rest.hasSuffix("/") { rest = rest.dropLast() }
            // the port after the host (an IPv6 host is in brackets)
            if let colon = rest.lastIndex(of: ":"), !rest[colon...].contains("]") {
                guard let p = Int(rest[rest.index(after: colon)...]), (1...65535).contains(p) else {
                    throw ValidationError("bad port in \(text)")
                }
                uriPort = p
                rest = rest[..<colon]
            }
        }
        if let at = rest.lastIndex(of: "@") {
            user = String(rest[..<at])
            rest = rest[rest.index(after: at)...]
        }
        if rest.hasPrefix("["), rest.hasSuffix("]") { rest = rest.dropFirst().dropLast() }
        guard !rest.isEmpty else { throw ValidationError("no host in \(text.debugDescription)") }
        host = String(rest)
        port = uriPort
    }
}

/// A file operand of an scp-like command: a local path, or `[user@]host:path` on a
/// server (scp's rule: a `:` before any `/` makes it remote; `[v6addr]:path` too;
/// write `./a:b` for a local file with a colon).
public enum SSHFileOperand: Equatable, Sendable {
    case local(String)
    case remote(SSHDestination, path: String)

    public init(_ text: String) throws {
        var hostEnd: String.Index?
        if text.hasPrefix("[") || text.contains("@[") {
            if let close = text.firstIndex(of: "]"), text.index(after: close) < text.endIndex,
               text[text.index(after: close)] == ":"
            {
                hostEnd = text.index(after: close)
            }
        } else if let colon = text.firstIndex(of: ":"), colon != text.startIndex,
                  !text[..<colon].contains("/")
        {
            hostEnd = colon
        }
        guard let hostEnd else {
            self = .local(text)
            return
        }
        let path = String(text[text.index(after: hostEnd)...])
        // an empty path is the login directory, as in scp
        self = .remote(try SSHDestination(parsing: String(text[..<hostEnd])), path: path.isEmpty ? "." : path)
    }
}
