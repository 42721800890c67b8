import Foundation
import SSHKit
import Testing

/// Runs `body` and returns the SSHError it throws; records an issue if it does not.
func expectSSHError<T>(
    _ body: () async throws -> T, sourceLocation: SourceLocation = #_sourceLocation
) async -> SSHError? {
    do {
        let value = try await body()
        Issue.record("expected an SSHError, got \(value)", sourceLocation: sourceLocation)
        return nil
    } catch let e as SSHError {
        return e
    } catch {
        Issue.record("expected an SSHError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

func randomBytes(_ n: Int) -> [UInt8] {
    var g = SystemRandomNumberGenerator()
    var out = [UInt8](repeating: 0, count: n)
    var i = 0
    while i < n {
        let v = g.next()
        withUnsafeBytes(of: v) { raw in
            for b in raw where i < n { out[i] = b; i += 1 }
        }
    }
    return out
}

/// Elapsed seconds of an async block.
func measure<T>(_ body: () async throws -> T) async rethrows -> (T, Double) {
    let clock = ContinuousClock()
    let start = clock.now
    let v = try await body()
    let d = clock.now - start
    return (v, Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18)
}

func countFDs() -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
}

func countThreads() -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? -1
}

/// Open sockets of this process (what a leaked bridge, listener or connection would
/// leave behind); unlike `countFDs`, blind to the runtime's own timer and event fds.
func countSockets() -> Int {
    let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return fds.filter { ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)) ?? "").hasPrefix("socket:") }.count
}

/// Waits (bounded, 5 s) until this process has at most `limit` sockets: sockets closed
/// asynchronously (a worker's teardown, a server's side) settle, a leak does not.
func socketsSettle(atMost limit: Int) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(5)
    while countSockets() > limit && ContinuousClock.now < deadline {
        try? await Task.sleep(for: .milliseconds(20))
    }
    return countSockets() <= limit
}
