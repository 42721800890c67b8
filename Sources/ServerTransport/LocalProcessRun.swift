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
        // a child that exits without reading its stdin must not kill the app with SIGPIPE:
        // on this thread it stays blocked (pending, never delivered) and write gets EPIPE
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
        var inPipe: [Int32] = [-1, -1], outPipe: [Int32] = [-1, -1], errPipe: [Int32] = [-1, -1]
        let made = pipe(&inPipe) == 0 && pipe(&outPipe) == 0 && pipe(&errPipe) == 0
        // close-on-exec at once, so a process another call spawns does not inherit our
        // ends (dup2 onto 0, 1, 2 in our child clears the flag)
        for fd in inPipe + outPipe + errPipe where fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        guard made else {
            let e = errno
            for fd in inPipe + outPipe + errPipe where fd >= 0 { close(fd) }
            return .failure(TransportError(.other, "pipe failed: \(String(cString: strerror(e)))"))
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        for fd in inPipe + outPipe + errPipe { posix_spawn_file_actions_addclose(&actions, fd) }
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attr, &empty) // threads block signals; the child must not
        // its own process group: a timeout or cancel stops what it started too (a shell's
        // children would otherwise keep the output pipes open)
        posix_spawnattr_setpgroup(&attr, 0)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE) // even if the app ignores it
        posix_spawnattr_setsigdefault(&attr, &defaults)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF))
        let env = ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { "\($0.key)=\($0.value)" }
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup($0) } + [nil]
        defer { for p in argv + envp { free(p) } }
        var child: pid_t = 0
        let rc = posix_spawnp(&child, executable, &actions, &attr, argv, envp)
        close(inPipe[0]); close(outPipe[1]); close(errPipe[1])
        guard rc == 0 else {
            close(inPipe[1]); close(outPipe[0]); close(errPipe[0])
            // what a shell (and so a remote transport) reports for it: status 127
            return .success(ProcessResult(exitStatus: .exited(127), stdout: [],
                                          stderr: Array("\(executable): \(String(cString: strerror(rc)))\n".utf8)))
        }
        let cancelNow = pid.withLock { p -> Bool in
            p = child
            return cancelled.withLock { $0 }
        }
        if cancelNow { kill(-child, SIGTERM) }
        for fd in [inPipe[1], outPipe[0], errPipe[0]] { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }

        var out: [UInt8] = [], err: [UInt8] = []
        var stdinFD: Int32 = inPipe[1], outFD: Int32 = outPipe[0], errFD: Int32 = errPipe[0]
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
        while outFD >= 0 || errFD >= 0 {
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
            var e = TransportError(.timeout, "\(executable) ran longer than \(timeout!) and was stopped")
            e.seconds = timeout.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 }
            e.partialStdout = out
            e.stderr = String(decoding: err, as: UTF8.self)
            return .failure(e)
        }
        if cancelled.withLock({ $0 }) {
            return .failure(TransportError(.other, "cancelled", cause: CancellationError()))
        }
        let exit: SSHExitStatus
        if status & 0x7f == 0 {
            exit = .exited((status >> 8) & 0xff)
        } else {
            let names: [Int32: String] = [1: "HUP", 2: "INT", 3: "QUIT", 6: "ABRT", 9: "KILL", 11: "SEGV", 13: "PIPE", 15: "TERM"]
            exit = .signaled(names[status & 0x7f] ?? "\(status & 0x7f)", coreDumped: status & 0x80 != 0)
        }
        return .success(ProcessResult(exitStatus: exit, stdout: out, stderr: err))
    }
}

func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
