internal import SSHCore

/// The Linux socket calls Swift's Glibc module does not expose, from the core.
enum CoreSockets {
    /// accept4(NONBLOCK | CLOEXEC), TCP_NODELAY on TCP; -1 with errno set.
    static func accept(_ listenFD: Int32) -> Int32 { sshcore_accept(listenFD) }
    /// A non-blocking, close-on-exec eventfd, or -1.
    static func eventFD() -> Int32 { sshcore_eventfd() }
    static func setThreadName(_ name: String) { sshcore_set_thread_name(name) }
}
