import Foundation

#if SSHKIT_FUZZ
// Built by scripts/fuzz.sh with libFuzzer (--sanitize=fuzzer): libFuzzer's main calls
// this for every input; SSHKIT_FUZZ_TARGET names the target.
private let target: @Sendable ([UInt8]) -> Void = {
    let name = ProcessInfo.processInfo.environment["SSHKIT_FUZZ_TARGET"] ?? ""
    guard let t = FuzzTargets.all[name] else {
        fatalError("SSHKIT_FUZZ_TARGET must be one of \(FuzzTargets.all.keys.sorted())")
    }
    return t
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    target(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}
#else
/// Without libFuzzer: `sshkit-fuzz TARGET FILE...` runs each file through the target (the
/// seed corpora's regression run, which the tests do).
@main
struct Replay {
    static func main() {
        let args = CommandLine.arguments.dropFirst()
        guard let name = args.first, let target = FuzzTargets.all[name] else {
            FileHandle.standardError.write(Data("usage: sshkit-fuzz \(FuzzTargets.all.keys.sorted().joined(separator: "|")) FILE...\n".utf8))
            exit(64)
        }
        var count = 0
        for path in args.dropFirst() {
            guard let data = FileManager.default.contents(atPath: path) else {
                FileHandle.standardError.write(Data("sshkit-fuzz: cannot read \(path)\n".utf8))
                exit(66)
            }
            target([UInt8](data))
            count += 1
        }
        print("\(name): \(count) inputs, no invariant violated")
    }
}
#endif
