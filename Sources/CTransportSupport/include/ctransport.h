/**
 * @file ctransport.h
 * @brief The few GNU C calls ServerTransport needs that Swift's Glibc module
 * does not declare (it is built without _GNU_SOURCE). No libssh here.
 */
#ifndef CTRANSPORT_H
#define CTRANSPORT_H

/**
 * @brief pipe2(2): a pipe whose ends carry `flags` (O_CLOEXEC, O_NONBLOCK) from
 * the start, so a process spawned by another thread cannot inherit them.
 * @return 0, or -1 with errno set.
 */
int ctransport_pipe2(int fds[_Nonnull 2], int flags);

/**
 * @brief mkostemp(3): creates the file named by `pattern` (ending in XXXXXX,
 * which is replaced) exclusively, mode 0600, opened with O_RDWR | `flags`.
 * @return the descriptor, or -1 with errno set.
 */
int ctransport_mkostemp(char *_Nonnull pattern, int flags);

#include <sys/types.h>

/**
 * @brief Starts `path` (searched on PATH like execvp) on a new pseudo-terminal
 * of `rows` x `columns`: the child is the leader of a new session whose
 * controlling terminal is the terminal's slave side on stdin, stdout and
 * stderr, with an empty signal mask and SIGPIPE at its default.
 * @param master receives the master side (close-on-exec); what the child writes
 * is read there, what is written there is the child's input.
 * @return 0 with `*pid` and `*master` set; otherwise an errno value (ENOENT: no
 * such program), with nothing left open.
 */
int ctransport_spawn_pty(const char *_Nonnull path,
                         char *_Nullable const argv[_Nonnull],
                         char *_Nullable const envp[_Nonnull],
                         unsigned short rows,
                         unsigned short columns,
                         pid_t *_Nonnull pid,
                         int *_Nonnull master);

/**
 * @brief Sets a terminal's size (TIOCSWINSZ on its master side; the child gets
 * SIGWINCH).
 * @return 0, or -1 with errno set.
 */
int ctransport_set_window_size(int master,
                               unsigned short rows,
                               unsigned short columns);

#endif
