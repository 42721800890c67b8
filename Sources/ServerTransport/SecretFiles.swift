/// Which file names mark secrets: created 0600 and kept 0600 by `writeFile`.
///
/// Matched against the last path component: an exact name (`.env`, `auth.json`) or a
/// pattern with one `*` (`*-tokens.json`).
public struct SecretFiles: Sendable, Equatable {
    /// The names and one-`*` patterns that mark a secret (from `init`: the defaults, then `extra`).
    public var patterns: [String]

    /// `.env`, `auth.json` and `*-tokens.json`.
    public static let defaultPatterns = [".env", "auth.json", "*-tokens.json"]

    /// The defaults plus `extra`.
    public init(extra: [String] = []) {
        patterns = Self.defaultPatterns + extra
    }

    /// Whether the last component of `path` matches one of `patterns`.
    public func isSecret(_ path: String) -> Bool {
        let name = path.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? path
        return patterns.contains { Self.matches(name, $0) }
    }

    static func matches(_ name: String, _ pattern: String) -> Bool {
        guard let star = pattern.firstIndex(of: "*") else { return name == pattern }
        let prefix = pattern[..<star], suffix = pattern[pattern.index(after: star)...]
        return name.count >= prefix.count + suffix.count && name.hasPrefix(prefix) && name.hasSuffix(suffix)
    }
}
