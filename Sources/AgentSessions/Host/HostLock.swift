/// A lock on the host, for the scripts the engine runs there: one worktree change at a time
/// in a repository, one takeover of the task ports at a time.
enum HostLock {
    /// Shell lines that take a lock on the host, one holder at a time, and set `unlock`
    /// to the line that gives it back (`eval "$unlock"`; the script's end gives it back
    /// too, however it ends). Where util-linux's `flock` is (`flock`, a real file, not
    /// busybox's), the lock is `flock` on the file `<path>.flock` held as descriptor 9:
    /// a waiter sleeps in the kernel and runs the moment the holder lets go, nothing is
    /// polled, and a holder that dies lets go with it. Commands that may outlive the hold
    /// (git, whose hooks may start anything) are run with `9>&-`. Elsewhere a lock
    /// directory at `path`, tried every 50 ms and taken over after a minute from a holder
    /// that died. After `tries` × 50 ms the script exits with `failure`. The lines stand
    /// alone: they begin and end with a newline.
    static func lines(at path: String, tries: Int, failure: Int, flock: String = "/usr/bin/flock") -> String {
        // begins and ends a line of its own: it is spliced between two parts of a script
        """

        lock=\(path) i=0
        if [ -x \(flock) ] && [ ! -L \(flock) ] && { command exec 9>>"$lock.flock"; } 2>/dev/null; then
            \(flock) -w \(max(1, tries / 20)) 9 || exit \(failure)
            unlock='exec 9>&-'
        else
            until mkdir "$lock" 2>/dev/null; do
                [ $((i % 20)) != 0 ] || [ -z "$(find "$lock" -maxdepth 0 -mmin +1 2>/dev/null)" ] || rmdir "$lock" 2>/dev/null
                i=$((i + 1)); [ $i -lt \(tries) ] || exit \(failure)
                sleep 0.05
            done
            trap 'rmdir "$lock" 2>/dev/null' EXIT
            trap 'rmdir "$lock" 2>/dev/null; exit 129' HUP INT TERM
            unlock='rmdir "$lock" 2>/dev/null; trap - EXIT; trap - HUP INT TERM'
        fi

        """
    }
}
