import Foundation
import SSHKit
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One local process (in a process group of its own): posix_spawn with three pipes, driven by poll() on a thread of its
/// own (stdin written as the child reads, stdout and stderr drained together), a timeout
/// that sends TERM and, a second later, KILL, and cancellation that does the same.
final class LocalProcessRun: Sendable {
    let executable: String
    let arguments: [String]
    let stdin: [UInt8]
    let environment: [String: String]
    let timeout: Duration?
    private let pid = Mutex<pid_t>(0)
    private let cancelled = Mutex(false)

    init(executable: String, arguments: [String], stdin: [UInt8], environment: [String: String], timeout: Duration?) {
        self.executable = executable
        self.arguments = arguments
        self.stdin = stdin
        self.environment = environment
        self.timeout = timeout
    }

    func run() async -> Result<ProcessResult, TransportError> {
        await withCheckedContinuation { c in
            Thread.detachNewThread { [self] in c.resume(returning: runBlocking()) }
        }
    }

    /// TERM to the process group now; the run escalates to KILL a second later.
    func cancel() {
        let p = pid.withLock { p -> pid_t in
            cancelled.withLock { $0 = true }
            return p
        }
        if p > 0 { kill(-p, SIGTERM) }
    }

    private func runBlocking() -> Result<ProcessResult, TransportError> {
        LocalSpawn.blockSIGPIPE()
        let child: pid_t, stdinFD0: Int32, outFD0: Int32, errFD0: Int32
        switch LocalSpawn.spawn(executable, arguments, environment: environment) {
        case .failure(let e):
            return .failure(e)
        case .success(.notFound(let message)):
            // what a shell (and so a remote transport) reports for it: status 127
            return .success(ProcessResult(exitStatus: .exited(127), stdout: [], stderr: Array(message.utf8)))
        case .success(.started(let p, let i, let o, let e)):
            (child, stdinFD0, outFD0, errFD0) = (p, i, o, e)
        }
        let cancelNow = pid.withLock { p -> Bool in
            p = child
            return cancelled.withLock { $0 }
        }
        if cancelNow { kill(-child, SIGTERM) }
        var out: [UInt8] = [], err: [UInt8] = []
        var stdinFD = stdinFD0, outFD = outFD0, errFD = errFD0
        var written = 0
        if stdin.isEmpty { close(stdinFD); stdinFD = -1 }
        let start = monotonicNow()
        let deadline = timeout.map { start + Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 }
        var termAt: Double?
        var timedOut = false
        var buf = [UInt8](repeating: 0, count: 1 << 16)
        // Ends when both pipes closed, or, once KILL was sent a second after TERM, a
        // second later still: a process that left the group (setsid) or an inherited fd
        // may keep a pipe open, and the timeout must still hold.
        var giveUpAt: Double?
        // stdin too: a child that closed its output may still be reading it (every byte
        // goes to it, as over SSH); a child that exits closes it (EPIPE ends the writes)
        while outFD >= 0 || errFD >= 0 || stdinFD >= 0 {
            var pfds: [pollfd] = []
            if stdinFD >= 0 { pfds.append(pollfd(fd: stdinFD, events: Int16(POLLOUT), revents: 0)) }
            if outFD >= 0 { pfds.append(pollfd(fd: outFD, events: Int16(POLLIN), revents: 0)) }
            if errFD >= 0 { pfds.append(pollfd(fd: errFD, events: Int16(POLLIN), revents: 0)) }
            let now = monotonicNow()
            if let deadline, !timedOut, now >= deadline {
                timedOut = true
                kill(-child, SIGTERM)
            }
            if termAt == nil && (timedOut || cancelled.withLock({ $0 })) {
                termAt = now
            }
            if let t = termAt, now - t >= 1, giveUpAt == nil {
                kill(-child, SIGKILL)
                giveUpAt = now + 1
            }
            if let g = giveUpAt, now >= g { break }
            // wake at least every 100 ms: a cancel arrives from another thread
            var wait = 100.0
            if let deadline, !timedOut { wait = min(wait, max(1, (deadline - now) * 1000)) }
            _ = poll(&pfds, nfds_t(pfds.count), Int32(wait))
            for p in pfds where p.revents != 0 {
                if p.fd == stdinFD {
                    let n = stdin[written...].withUnsafeBytes { write(stdinFD, $0.baseAddress!, $0.count) }
                    if n > 0 { written += n }
                    if (n < 0 && errno != EAGAIN && errno != EINTR) || written == stdin.count {
                        close(stdinFD)
                        stdinFD = -1
                    }
                } else {
                    let n = read(p.fd, &buf, buf.count)
                    if n > 0 {
                        if p.fd == outFD { out += buf[0..<n] } else { err += buf[0..<n] }
                    } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
                        close(p.fd)
                        if p.fd == outFD { outFD = -1 } else { errFD = -1 }
                    }
                }
            }
        }
        if outFD >= 0 { close(outFD) }
        if errFD >= 0 { close(errFD) }
        if stdinFD >= 0 { close(stdinFD) }
        // Reap without waiting forever: a child that closed its output early is still
        // bound by the timeout (TERM, then KILL). The group id stays known to cancel()
        // until the child is reaped, and is cleared under the lock before reaping.
        var status: Int32 = 0
        while true {
            var info = siginfo_t()
            let r = waitid(P_PID, id_t(child), &info, WEXITED | WNOWAIT | WNOHANG)
            if r == 0 && info._sifields._sigchld.si_pid == child { break }
            if r < 0 && errno != EINTR { break }
            let now = monotonicNow()
            if let deadline, !timedOut, now >= deadline {
                timedOut = true
                kill(-child, SIGTERM)
            }
            if termAt == nil && (timedOut || cancelled.withLock({ $0 })) { termAt = now }
            if let t = termAt, now - t >= 1 { kill(-child, SIGKILL) }
            usleep(10_000)
        }
        pid.withLock { $0 = 0 }
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        if timedOut {
            var e = TransportError.timedOut(after: timeout!, partialStdout: out, stderr: String(decoding: err, as: UTF8.self))
            e.message = "\(executable) ran longer than \(timeout!) and was stopped"
            return .failure(e)
        }
        if cancelled.withLock({ $0 }) {
            // what it printed, for a caller that needs it (the OpenSSH transport reads the
            // remote process group from it)
            var e = TransportError.cancelled
            e.context = .cancelled(partialStdout: out)
            return .failure(e)
        }
        let exit = LocalSpawn.exitStatus(status)
        return .success(ProcessResult(exitStatus: exit, stdout: out, stderr: err))
    }
}

func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
