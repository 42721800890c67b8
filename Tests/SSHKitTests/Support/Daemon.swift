import Foundation

/// A long-running child process (sshd, ssh-agent) started with posix_spawn and
/// reaped here. Foundation's Process is not used for these: sshd closes every
/// inherited fd at start-up, which Foundation takes for an exit, and its
/// reaper then blocks in wait4 on the still-running daemon.
struct Daemon: Sendable {
    let pid: pid_t

    static func spawn(_ exe: String, _ args: [String], log: String) throws -> Daemon {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // nothing else is inherited: a pipe another thread of the tests has open at this
        // moment (a command whose output it reads to the end) would otherwise stay open in
        // the daemon, and that reader would wait for the daemon to end
        // (glibc 2.34 and later; Swift's Glibc module does not declare it)
        if let closeFrom = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
            typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
            _ = unsafeBitCast(closeFrom, to: CloseFrom.self)(&actions, 3)
        }
        let argv: [UnsafeMutablePointer<CChar>?] = ([exe] + args).map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        // The calling thread may block signals (dispatch threads do) and posix_spawn
        // passes the mask on: dropbear then never sees SIGCHLD and never reports
        // an exit status. Start daemons with an empty mask and default handlers.
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var empty = sigset_t(), all = sigset_t()
        sigemptyset(&empty)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attr, &empty)
        posix_spawnattr_setsigdefault(&attr, &all)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, exe, &actions, &attr, argv, environ)
        guard rc == 0 else { throw FixtureError("posix_spawn \(exe): \(String(cString: strerror(rc)))") }
        ServerRegistry.add(pid)
        return Daemon(pid: pid)
    }

    /// Waits for a short-lived process started with `spawn` (one that forks a daemon
    /// of its own, like `tmux new-session -d`); its exit status.
    func wait() -> Int32 {
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        ServerRegistry.remove(pid)
        return (status >> 8) & 0xff
    }

    var isRunning: Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == 0
    }

    /// SIGTERM, a bounded wait, then SIGKILL; always reaps.
    func stop() {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        for _ in 0..<100 {
            if waitpid(pid, &status, WNOHANG) != 0 { ServerRegistry.remove(pid); return }
            usleep(20_000)
        }
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
        ServerRegistry.remove(pid)
    }
}
