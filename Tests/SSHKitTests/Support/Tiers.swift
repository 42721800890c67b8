import Testing

/// The test tiers (Docs/TestFixture.md, "Tiers"). Every suite carries one of the first
/// four; a test that needs the machine to itself carries `exclusive` as well, and one that
/// depends on timing under load `paced`.
extension Tag {
    /// No server and no child process: parsers, tables, models, checks of the sources.
    @Tag static var pure: Self
    /// The C core's worker and API through the bridge: threads, fds, misuse.
    @Tag static var worker: Self
    /// Real servers on 127.0.0.1 (OpenSSH's sshd, dropbear, asyncssh) through the library.
    @Tag static var integration: Self
    /// The built tools run as processes: the ssh-like examples, known-hosts, agent-sessions.
    @Tag static var process: Self
    /// Needs the machine to itself: counts this process's fds, threads, sockets or memory,
    /// or stops every session of a shared server. Runs alone, before the others run in
    /// parallel (scripts/test.sh).
    @Tag static var exclusive: Self
    /// Depends on timing under load: drives a terminal program, or waits for a watcher to
    /// see an agent's screen change. Runs one at a time, apart from the rest, which run two
    /// at once (scripts/test.sh). Set on a top-level suite, beside its tier.
    @Tag static var paced: Self
}
