internal import SSHCore

enum CoreProxy {
    /// Spawns `shell -c "exec command"` on a socket pair (see sshcore_proxy_spawn):
    /// the connection's end of the pair and the pid, or the errno that stopped it.
    static func spawn(shell: String, command: String) -> Result<(fd: Int32, pid: Int32), SystemErrno> {
        var fd: Int32 = -1, pid: Int32 = -1
        let rc = sshcore_proxy_spawn(shell, command, &fd, &pid)
        return rc == 0 ? .success((fd, pid)) : .failure(SystemErrno(value: rc))
    }

    struct SystemErrno: Error {
        let value: Int32
    }
}
