import CTransportSupport
import Foundation
import SSHKit
#if canImport(Glibc)
import Glibc
#endif

/// Starting a local process the way both `runProcess` and `startProcess` need it.
enum LocalSpawn {
    enum Started {
        /// Running, in a process group of its own; our pipe ends are non-blocking and close-on-exec.
        case started(pid: pid_t, stdin: Int32, stdout: Int32, stderr: Int32)
        /// posix_spawnp failed (no such program, not executable): a shell's status 127.
        case notFound(message: String)
    }

    /// posix_spawnp with three pipes. The child gets default SIGPIPE and an empty signal
    /// mask (our threads block signals), and a process group of its own, so a timeout or
    /// cancel stops what it started too (a shell's children would otherwise keep the
    /// output pipes open).
    static func spawn(_ executable: String, _ arguments: [String], environment: [String: String])
        -> Result<Started, TransportError>
    {
        var inPipe: [Int32] = [-1, -1], outPipe: [Int32] = [-1, -1], errPipe: [Int32] = [-1, -1]
        // close-on-exec from the start (pipe2), so a process another thread spawns in the
        // meantime cannot inherit our ends; dup2 onto 0, 1, 2 in our child clears the flag
        let made = ctransport_pipe2(&inPipe, O_CLOEXEC) == 0 && ctransport_pipe2(&outPipe, O_CLOEXEC) == 0
            && ctransport_pipe2(&errPipe, O_CLOEXEC) == 0
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
        posix_spawnattr_setsigmask(&attr, &empty)
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
            return .success(.notFound(message: "\(executable): \(String(cString: strerror(rc)))\n"))
        }
        for fd in [inPipe[1], outPipe[0], errPipe[0]] { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        return .success(.started(pid: child, stdin: inPipe[1], stdout: outPipe[0], stderr: errPipe[0]))
    }

    /// A wait status as SSHKit's exit status.
    static func exitStatus(_ status: Int32) -> SSHExitStatus {
        if status & 0x7f == 0 { return .exited((status >> 8) & 0xff) }
        let names: [Int32: String] = [1: "HUP", 2: "INT", 3: "QUIT", 6: "ABRT", 9: "KILL", 11: "SEGV", 13: "PIPE", 15: "TERM"]
        return .signaled(names[status & 0x7f] ?? "\(status & 0x7f)", coreDumped: status & 0x80 != 0)
    }

    /// Blocks SIGPIPE on the calling thread: a child that exits without reading its
    /// stdin must not kill the app; the signal stays pending, never delivered, and
    /// write gets EPIPE.
    static func blockSIGPIPE() {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }
}
