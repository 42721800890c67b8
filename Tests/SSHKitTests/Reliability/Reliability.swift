import Foundation
import Synchronization

/// The reliability suite's scale and its record. `scripts/reliability.sh` sets
/// `SSHKIT_RELIABILITY=full` and `SSHKIT_RELIABILITY_REPORT=FILE`; without them (CI, a
/// plain `swift test`) each part runs a reduced version. Every figure is printed as
/// `RELIABILITY part | figure | value | goal` and appended to the report file.
enum Reliability {
    static let full = ProcessInfo.processInfo.environment["SSHKIT_RELIABILITY"] == "full"

    /// Under a sanitizer (scripts/sanitizers.sh sets its options): resident memory says
    /// nothing there (ASan keeps freed memory in quarantine), so memory bounds are only
    /// printed, not checked.
    static let underSanitizer = ["ASAN_OPTIONS", "TSAN_OPTIONS"].contains { ProcessInfo.processInfo.environment[$0] != nil }

    /// The seed of every random choice (offsets, cancel moments, vectors): given by
    /// `SSHKIT_RELIABILITY_SEED` to replay a run, else fresh and printed.
    static let seed: UInt64 = {
        if let s = ProcessInfo.processInfo.environment["SSHKIT_RELIABILITY_SEED"].flatMap({ UInt64($0) }) { return s }
        return UInt64.random(in: 1...UInt64(UInt32.max))
    }()

    /// A generator seeded from `seed` and `stream` (one per part, so parts stay
    /// reproducible on their own).
    static func generator(_ stream: String) -> SplitMix64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in stream.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        return SplitMix64(seed: seed ^ h)
    }

    private static let reportLock = Mutex(())

    /// Prints a figure and appends it to the report file.
    static func record(_ part: String, _ figure: String, _ value: CustomStringConvertible, goal: String = "") {
        let line = "\(part)\t\(figure)\t\(value)\t\(goal)"
        print("RELIABILITY \(part) | \(figure) | \(value) | \(goal)")
        guard let path = ProcessInfo.processInfo.environment["SSHKIT_RELIABILITY_REPORT"] else { return }
        reportLock.withLock { _ in
            guard let h = FileHandle(forWritingAtPath: path) ?? {
                FileManager.default.createFile(atPath: path, contents: nil)
                return FileHandle(forWritingAtPath: path)
            }() else { return }
            h.seekToEndOfFile()
            h.write(Data((line + "\n").utf8))
            try? h.close()
        }
    }

    /// Milliseconds of a duration, with a fraction.
    static func ms(_ d: Duration) -> Double {
        Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
    }

    /// The p-th percentile (0...100) of `values`, nearest rank.
    static func percentile(_ values: [Double], _ p: Double) -> Double {
        guard !values.isEmpty else { return .nan }
        let sorted = values.sorted()
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
        return sorted[max(0, min(sorted.count - 1, rank - 1))]
    }
}

/// A small seeded generator (SplitMix64), so a run can be replayed from its seed.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
