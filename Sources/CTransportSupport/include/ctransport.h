/**
 * @file ctransport.h
 * @brief The few GNU C calls ServerTransport needs that Swift's Glibc module does
 *        not declare (it is built without _GNU_SOURCE). No libssh here.
 */
#ifndef CTRANSPORT_H
#define CTRANSPORT_H

/**
 * @brief pipe2(2): a pipe whose ends carry `flags` (O_CLOEXEC, O_NONBLOCK) from the
 *        start, so a process spawned by another thread cannot inherit them.
 * @return 0, or -1 with errno set.
 */
int ctransport_pipe2(int fds[_Nonnull 2], int flags);

/**
 * @brief mkostemp(3): creates the file named by `pattern` (ending in XXXXXX, which is
 *        replaced) exclusively, mode 0600, opened with O_RDWR | `flags`.
 * @return the descriptor, or -1 with errno set.
 */
int ctransport_mkostemp(char *_Nonnull pattern, int flags);

#endif
