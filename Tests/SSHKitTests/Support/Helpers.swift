import Foundation
import SSHKit
import ServerTransport
import Synchronization
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

/// This process's resident memory (VmRSS), in KiB.
func residentKiB() -> Int {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
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

/// Runs `body` in a task of its own and waits at most `limit` for it: its result, or
/// nil when it was still running then (it is then cancelled, but not waited for). The
/// bound that catches a hang without hanging the test itself.
func finishes<T: Sendable>(within limit: Duration, _ body: @escaping @Sendable () async throws -> T) async
    -> Result<T, any Error>?
{
    let task = Task { try await body() }
    let waiter = OneShot<Result<T, any Error>?>()
    return await withCheckedContinuation { c in
        waiter.set(c)
        Task { waiter.resume(returning: await task.result) }
        Task {
            try? await Task.sleep(for: limit)
            if waiter.resume(returning: nil) { task.cancel() }
        }
    }
}

/// A continuation resumed by whichever comes first.
final class OneShot<T: Sendable>: Sendable {
    private let continuation = Mutex<CheckedContinuation<T, Never>?>(nil)
    func set(_ c: CheckedContinuation<T, Never>) { continuation.withLock { $0 = c } }
    /// Whether this call was the one that resumed it.
    @discardableResult
    func resume(returning value: T) -> Bool {
        guard let c = continuation.withLock({ c in defer { c = nil }; return c }) else { return false }
        c.resume(returning: value)
        return true
    }
}

/// The SSHError a finished call threw, if it threw one.
func sshError<T>(_ r: Result<T, any Error>?) -> SSHError? {
    if case .failure(let e as SSHError)? = r { return e }
    return nil
}

/// Ends a test's private tmux server on the host and gives back the port claims its tasks
/// made there (a test that ends without deleting its tasks would leave them, and the next
/// runs' claims would take them over one by one); its status watcher is ended and its
/// directory removed (on a machine that runs the suite again and again they would pile up).
func endTmuxServer(_ socket: String, on transport: any ServerTransport) async {
    let script = #"""
        tmux -L "$1" kill-server 2>/dev/null
        w="$HOME/.cache/sshkit-agents/watch/tmux-$1"
        if [ -f "$w/pid" ]; then p=; read -r p < "$w/pid"; [ -z "$p" ] || kill "$p" 2>/dev/null; fi
        rm -rf "$w"
        for c in "$HOME/.cache/sshkit-agents/ports"/[0-9]*; do
            s=; [ -f "$c/tmux" ] && read -r s < "$c/tmux"
            [ "$s" = "$1" ] && rm -rf "$c"
        done
        exit 0
        """#
    _ = try? await transport.runProcess("/bin/sh", "-c", script, "sh", socket)
}

/// Ends (KILL) every process of the transport's user on the host with `home` (or a path in
/// it) in its environment (HOME, VIBE_HOME, …):
/// what an agent started outside its tmux session (a plugin's download, a language
/// server) and would go on writing into that home after the test removed it.
func endProcesses(home: String, on transport: any ServerTransport) async {
    let script = #"""
        for p in /proc/[0-9]*; do
            tr '\0' '\n' < "$p/environ" 2>/dev/null | grep -q "^[A-Za-z_]*=$1\(/\|$\)" && kill -KILL "${p#/proc/}" 2>/dev/null
        done
        exit 0
        """#
    _ = try? await transport.runProcess("/bin/sh", "-c", script, "sh", home)
}
