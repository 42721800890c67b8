import Foundation

// What every bridge file uses to hand values to the core and read them back.

/// C strings that live until `wipeAndFree`; the core copies what it keeps.
final class CStringArena {
    private var pointers: [UnsafeMutablePointer<CChar>] = []

    func dup(_ s: String?) -> UnsafePointer<CChar>? {
        guard let s else { return nil }
        let p = strdup(s)!
        pointers.append(p)
        return UnsafePointer(p)
    }

    func wipeAndFree() {
        for p in pointers {
            memset(p, 0, strlen(p))
            free(p)
        }
        pointers.removeAll()
    }
}

/// Strings the core hands back in fixed-size buffers.
enum CoreStrings {
    /// Reads a fixed-size C char array (imported as a tuple) up to its NUL.
    static func string<T>(_ tuple: T) -> String {
        withUnsafeBytes(of: tuple) { raw in
            let bytes = raw.prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
    }
}
