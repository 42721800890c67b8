/// A remote path or file name as the server's bytes.
///
/// SFTP names are bytes, and a name that is not UTF-8 must survive a round trip
/// (listing, then opening what was listed). Build one from a `String` (its UTF-8) or
/// from raw bytes; `string` decodes for display, replacing invalid sequences.
/// Comparison is bytewise: "café" written two ways is two different paths.
public struct SFTPPath: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The bytes sent to the server.
    public let bytes: [UInt8]

    /// A path from raw bytes. A path with a NUL byte cannot be sent: every operation
    /// given one fails with `invalidArgument` (nothing reaches the server).
    public init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// A path from a string's UTF-8 bytes.
    public init(_ string: String) {
        self.init(bytes: Array(string.utf8))
    }

    /// A path from a string literal's UTF-8 bytes.
    public init(stringLiteral value: String) {
        self.init(value)
    }

    /// The path decoded as UTF-8, with invalid bytes replaced (for display only).
    public var string: String { String(decoding: bytes, as: UTF8.self) }

    /// Whether the bytes are valid UTF-8 (then `string` round-trips).
    public var isValidUTF8: Bool { String(validating: bytes, as: UTF8.self) != nil }

    public var description: String { string }

    /// `self/component` (one separator, whatever `self` ends with).
    public func appending(_ component: SFTPPath) -> SFTPPath {
        if bytes.isEmpty { return component }
        return SFTPPath(bytes: bytes.last == 0x2f ? bytes + component.bytes : bytes + [0x2f] + component.bytes)
    }

    /// `self/component`, the component given as a string (its UTF-8).
    public func appending(_ component: String) -> SFTPPath { appending(SFTPPath(component)) }

    /// The last component ("c" for "a/b/c", "b" for "a/b/").
    public var lastComponent: SFTPPath {
        var end = bytes.endIndex
        while end > bytes.startIndex + 1 && bytes[end - 1] == 0x2f { end -= 1 }
        let start = bytes[..<end].lastIndex(of: 0x2f).map { $0 + 1 } ?? bytes.startIndex
        return SFTPPath(bytes: Array(bytes[start..<end]))
    }

    /// Everything before the last component ("a/b" for "a/b/c", "." for "c", "/" for "/c").
    public var parent: SFTPPath {
        var end = bytes.endIndex
        while end > bytes.startIndex + 1 && bytes[end - 1] == 0x2f { end -= 1 }
        guard let slash = bytes[..<end].lastIndex(of: 0x2f) else { return "." }
        var cut = slash
        while cut > bytes.startIndex && bytes[cut - 1] == 0x2f { cut -= 1 }
        return cut == bytes.startIndex ? "/" : SFTPPath(bytes: Array(bytes[..<cut]))
    }

    /// A name that is safe to join under a local or remote directory: not empty, not
    /// "." or "..", and without "/" (a server-supplied name that fails this must not
    /// be used as a path component).
    public var isPlainName: Bool {
        !bytes.isEmpty && bytes != [0x2e] && bytes != [0x2e, 0x2e] && !bytes.contains(0x2f)
    }
}
