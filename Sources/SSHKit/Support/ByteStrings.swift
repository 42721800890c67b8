/// Byte-wise tests for paths and command words.
///
/// `String.hasPrefix`, `split` and `dropFirst` work on Characters: "/" or "'" followed by
/// a combining mark (U+0301, U+200D, ...) is one Character that is neither "/" nor "'",
/// so "~/\u{200D}x" does not have the prefix "~/" and "a/\u{301}b" has no "/" to split
/// at, although the shell and the kernel see those bytes. Paths and shell words are
/// bytes to everything that reads them; these helpers look at the UTF-8 bytes.
extension StringProtocol {
    /// Whether the UTF-8 bytes start with those of `prefix`.
    package func byteHasPrefix(_ prefix: String) -> Bool { utf8.starts(with: prefix.utf8) }

    /// The string after its first `count` UTF-8 bytes (an ASCII prefix, so a scalar boundary).
    package func byteDropFirst(_ count: Int) -> String { String(decoding: utf8.dropFirst(count), as: UTF8.self) }

    /// The parts between the `separator` bytes (an ASCII byte); empty parts dropped unless
    /// `keepingEmpty`.
    package func byteComponents(separatedBy separator: UInt8, keepingEmpty: Bool = false) -> [String] {
        utf8.split(separator: separator, maxSplits: .max, omittingEmptySubsequences: !keepingEmpty)
            .map { String(decoding: $0, as: UTF8.self) }
    }
}
