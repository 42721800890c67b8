import CTransportSupport
import Foundation
import SSHKit
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A local process with streamed input and output (`startProcess`): one thread per
/// process drives its pipes with poll(), woken through a pipe of its own when a writer
/// or reader needs it. Output waits in bounded queues; a full queue is not read from,
/// so the process blocks on its pipe as it would under any reader.
final class LocalProcessStream: ProcessBackend, Sendable {
    private struct Input {
        var pending: [UInt8] = []
        var written = 0
        /// Each writer waits for the input offset its bytes end at.
        var writers: [(id: UInt64, end: Int, c: CheckedContinuation<Result<Void, TransportError>, Never>)] = []
        var total = 0
        var finishing = false
        var broken = false
        /// cancel() was called: new input is refused at once, as over SSH, where
        /// stopping a process closes its channel (the child may not be reaped yet).
        var stopped = false
    }
    private struct Exit {
        var status: SSHExitStatus?
        var waiters = WaitList<Result<SSHExitStatus, TransportError>>()
    }

    private let out: ChunkQueue
    private let err: ChunkQueue
    private let input = Mutex(Input())
    private let exit = Mutex(Exit())
    private let terminateAt = Mutex<Double?>(nil)
    private let wakeRead: Int32
    private let wakeWrite: WakePipe
    let pid: pid_t
    /// A terminal's master side, for resizing (a descriptor of its own, open as long as
    /// this object); nil for a process on pipes.
    let terminalFD: Int32?

    /// Starts `executable`; a program that cannot be started ends at once with status
    /// 127 and the reason on stderr, as a shell reports it.
    static func start(_ executable: String, _ arguments: [String], environment: [String: String])
        throws(TransportError) -> TransportProcess
    {
        switch LocalSpawn.spawn(executable, arguments, environment: environment) {
        case .failure(let e):
            throw e
        case .success(.notFound(let message)):
            return TransportProcess(backend: FinishedProcess(status: .exited(127), stderr: Array(message.utf8)))
        case .success(.started(let pid, let i, let o, let e)):
            var wake: [Int32] = [-1, -1]
            guard ctransport_pipe2(&wake, O_CLOEXEC | O_NONBLOCK) == 0 else {
                kill(-pid, SIGKILL)
                for fd in [i, o, e] { close(fd) }
                var status: Int32 = 0
                waitpid(pid, &status, 0)
                throw TransportError(.other, "pipe failed: \(String(cString: strerror(errno)))")
            }
            let backend = LocalProcessStream(pid: pid, wakeRead: wake[0], wakeWrite: wake[1])
            Thread.detachNewThread { backend.drive(stdin: i, stdout: o, stderr: e) }
            return TransportProcess(backend: backend)
        }
    }

    /// Starts `executable` on a new pseudo-terminal (see `LocalTransport.startTerminal`).
    static func startTerminal(_ executable: String, _ arguments: [String], environment: [String: String],
                              terminal: SSHTerminal) throws(TransportError) -> TransportTerminal
    {
        let env = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            .merging(["TERM": terminal.term]) { $1 }.map { "\($0.key)=\($0.value)" }
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup($0) } + [nil]
        defer { for p in argv + envp { free(p) } }
        var pid: pid_t = 0
        var master: Int32 = -1
        let rc = ctransport_spawn_pty(executable, argv, envp, UInt16(clamping: terminal.size.rows), UInt16(clamping: terminal.size.columns),
                                      &pid, &master)
        if rc == ENOENT || rc == EACCES {
            let message = "\(executable): \(String(cString: strerror(rc)))\r\n"
            return TransportTerminal(backend: FinishedProcess(status: .exited(127), stdout: Array(message.utf8), stderr: []))
        }
        guard rc == 0 else { throw TransportError(.other, "cannot open a terminal: \(String(cString: strerror(rc)))") }
        // the loop writes keystrokes to one descriptor and reads the screen from another
        // (it closes each on its own); a third stays for resizing
        let input = fcntl(master, F_DUPFD_CLOEXEC, 0)
        let resizing = fcntl(master, F_DUPFD_CLOEXEC, 0)
        var wake: [Int32] = [-1, -1]
        guard input >= 0, resizing >= 0, ctransport_pipe2(&wake, O_CLOEXEC | O_NONBLOCK) == 0 else {
            let e = errno
            kill(-pid, SIGKILL)
            for fd in [master, input, resizing] where fd >= 0 { close(fd) }
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            throw TransportError(.other, "cannot open a terminal: \(String(cString: strerror(e)))")
        }
        for fd in [master, input] { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        let backend = LocalProcessStream(pid: pid, wakeRead: wake[0], wakeWrite: wake[1], terminalFD: resizing)
        backend.err.end()
        let output = master
        Thread.detachNewThread { backend.drive(stdin: input, stdout: output, stderr: -1) }
        return TransportTerminal(backend: backend)
    }

    deinit {
        if let terminalFD { close(terminalFD) }
    }

    private init(pid: pid_t, wakeRead: Int32, wakeWrite: Int32, terminalFD: Int32? = nil) {
        self.terminalFD = terminalFD
        self.pid = pid
        self.wakeRead = wakeRead
        let pipe = WakePipe(fd: wakeWrite)
        self.wakeWrite = pipe
        out = ChunkQueue(onRoom: { pipe.signal() })
        err = ChunkQueue(onRoom: { pipe.signal() })
    }

    /// Wakes the driving thread; nothing once it ended and closed the pipe.
    private func wake() {
        wakeWrite.signal()
    }

    func read(_ stream: ProcessOutput.Stream) async -> [UInt8]? {
        await (stream == .stdout ? out : err).next()
    }

    /// Returns once the child read the bytes; `cancelled` at once when the task is
    /// cancelled (the bytes stay queued: a prefix or all of them may still reach it).
    func write(_ bytes: [UInt8]) async throws(TransportError) {
        let r = await waitInList(cancelled: Result<Void, TransportError>.failure(.cancelled)) { c, id in
            let refused = input.withLock { s -> Result<Void, TransportError>? in
                if s.broken || s.stopped { return .failure(TransportError(.other, "the process no longer reads its input")) }
                if s.finishing { return .failure(TransportError(.other, "write after input.finish()")) }
                if Task.isCancelled { return .failure(.cancelled) }
                s.pending += bytes
                s.total += bytes.count
                s.writers.append((id, s.total, c))
                return nil
            }
            if refused == nil { wake() }
            return refused
        } leave: { [self] id in
            input.withLock { s in
                guard let i = s.writers.firstIndex(where: { $0.id == id }) else { return nil }
                return s.writers.remove(at: i).c
            }
        }
        try r.get()
    }

    func finishInput() {
        input.withLock { $0.finishing = true }
        wake()
    }

    func cancel() {
        let first = terminateAt.withLock { t -> Bool in
            if t != nil { return false }
            t = monotonicNow()
            return true
        }
        guard first else { return }
        input.withLock { $0.stopped = true }
        // under the lock the reaper holds: the group id cannot be reused meanwhile
        exit.withLock { s in if s.status == nil { kill(-pid, SIGTERM) } }
        wake()
    }

    /// How the process ended; `cancelled` at once when the waiting task is cancelled
    /// (the process goes on).
    func exitStatus() async throws(TransportError) -> SSHExitStatus {
        try await waitInList(cancelled: .failure(.cancelled)) { c, id in
            exit.withLock { s -> Result<SSHExitStatus, TransportError>? in
                if let st = s.status { return .success(st) }
                return s.waiters.insert(c, id: id) ? nil : .failure(.cancelled)
            }
        } leave: { [self] id in
            exit.withLock { $0.waiters.remove(id) }
        }.get()
    }

    /// The process's thread: pipes until both outputs end and the child is reaped.
    private func drive(stdin stdinFD0: Int32, stdout outFD0: Int32, stderr errFD0: Int32) {
        LocalSpawn.blockSIGPIPE()
        var stdinFD = stdinFD0, outFD = outFD0, errFD = errFD0
        var buf = [UInt8](repeating: 0, count: 1 << 16)
        var reaped = false
        var killed = false
        // once both outputs ended the child is about to exit: its exit is looked for after
        // 1, 2, 4, … ms (up to the usual 100), not a whole period later
        var exitWait: Int32 = 1
        while outFD >= 0 || errFD >= 0 || !reaped {
            // input: written as the child reads; EOF once finished and drained
            if stdinFD >= 0 {
                let (hasData, closeNow) = input.withLock { s -> (Bool, Bool) in
                    (s.written < s.total, s.finishing && s.written == s.total)
                }
                if closeNow {
                    close(stdinFD)
                    stdinFD = -1
                } else if hasData {
                    writeInput(stdinFD, &stdinFD)
                }
            }
            var pfds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            if stdinFD >= 0, input.withLock({ $0.written < $0.total }) {
                pfds.append(pollfd(fd: stdinFD, events: Int16(POLLOUT), revents: 0))
            }
            if outFD >= 0 && !out.isFull { pfds.append(pollfd(fd: outFD, events: Int16(POLLIN), revents: 0)) }
            if errFD >= 0 && !err.isFull { pfds.append(pollfd(fd: errFD, events: Int16(POLLIN), revents: 0)) }
            var timeout: Int32 = 100
            if outFD < 0 && errFD < 0 {
                timeout = exitWait
                exitWait = min(100, exitWait * 2)
            }
            _ = poll(&pfds, nfds_t(pfds.count), timeout)
            for p in pfds where p.revents != 0 {
                if p.fd == wakeRead {
                    while Glibc.read(wakeRead, &buf, buf.count) > 0 {}
                } else if p.fd == stdinFD {
                    writeInput(stdinFD, &stdinFD)
                } else if p.fd == outFD || p.fd == errFD {
                    let n = Glibc.read(p.fd, &buf, buf.count)
                    if n > 0 {
                        (p.fd == outFD ? out : err).push(Array(buf[0..<n]))
                    } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
                        close(p.fd)
                        if p.fd == outFD { outFD = -1; out.end() } else { errFD = -1; err.end() }
                    }
                }
            }
            // TERM a second ago and still here: KILL the group
            if !killed, let t = terminateAt.withLock({ $0 }), monotonicNow() - t >= 1 {
                kill(-pid, SIGKILL)
                killed = true
            }
            if !reaped {
                var info = siginfo_t()
                if waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT | WNOHANG) == 0, info._sifields._sigchld.si_pid == pid {
                    reaped = true
                    reap()
                }
            }
            // after the child ended, a stopped process's pipes may be held by others;
            // once it was terminated, its outputs end too
            if reaped && killed {
                if outFD >= 0 { close(outFD); outFD = -1; out.end() }
                if errFD >= 0 { close(errFD); errFD = -1; err.end() }
            }
        }
        if stdinFD >= 0 { close(stdinFD) }
        failWriters()
        wakeWrite.close()
        close(wakeRead)
    }

    private func writeInput(_ fd: Int32, _ stdinFD: inout Int32) {
        let chunk = input.withLock { s -> [UInt8] in Array(s.pending.prefix(1 << 16)) }
        guard !chunk.isEmpty else { return }
        let n = chunk.withUnsafeBytes { Glibc.write(fd, $0.baseAddress!, $0.count) }
        if n > 0 {
            let done = input.withLock { s -> [CheckedContinuation<Result<Void, TransportError>, Never>] in
                s.pending.removeFirst(n)
                s.written += n
                let ready = s.writers.prefix { $0.end <= s.written }
                s.writers.removeFirst(ready.count)
                return ready.map(\.c)
            }
            for c in done { c.resume(returning: .success(())) }
        } else if n < 0 && errno != EAGAIN && errno != EINTR {
            close(fd)
            stdinFD = -1
            failWriters()
        }
    }

    private func failWriters() {
        let waiting = input.withLock { s -> [CheckedContinuation<Result<Void, TransportError>, Never>] in
            s.broken = true
            s.pending = []
            defer { s.writers = [] }
            return s.writers.map(\.c)
        }
        for c in waiting { c.resume(returning: .failure(TransportError(.other, "the process no longer reads its input"))) }
    }

    /// Reaps the exited child and answers `wait()`.
    private func reap() {
        let (status, waiters) = exit.withLock { s -> (SSHExitStatus, [CheckedContinuation<Result<SSHExitStatus, TransportError>, Never>]) in
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
            let status = LocalSpawn.exitStatus(raw)
            s.status = status
            return (status, s.waiters.removeAll())
        }
        for w in waiters { w.resume(returning: .success(status)) }
    }
}

/// A process that ended before it started (status and stderr only).
final class FinishedProcess: ProcessBackend, Sendable {
    let status: SSHExitStatus
    private let err: ChunkQueue
    private let out = ChunkQueue()

    init(status: SSHExitStatus, stdout: [UInt8] = [], stderr: [UInt8]) {
        self.status = status
        err = ChunkQueue()
        out.push(stdout)
        out.end()
        err.push(stderr)
        err.end()
    }

    func read(_ stream: ProcessOutput.Stream) async -> [UInt8]? { await (stream == .stdout ? out : err).next() }
    func write(_ bytes: [UInt8]) async throws(TransportError) {
        throw TransportError(.other, "the process no longer reads its input")
    }
    func finishInput() {}
    func cancel() {}
    func exitStatus() async throws(TransportError) -> SSHExitStatus { status }
}
