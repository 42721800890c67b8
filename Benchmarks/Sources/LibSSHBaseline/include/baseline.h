#ifndef LIBSSH_BASELINE_H
#define LIBSSH_BASELINE_H
#include <stddef.h>

#pragma clang assume_nonnull begin

/* A minimal libssh C client used as the benchmark baseline. */
typedef struct lsb_session lsb_session;

/** Connect and authenticate with a key file; NULL on failure (err filled). */
lsb_session *_Nullable lsb_connect(const char *host, int port, const char *user,
                                   const char *key_path, const char *_Nullable cipher,
                                   char *err, size_t err_len);
/** Run one command on a new channel, discard its output; returns the exit status or -1. */
int lsb_exec(lsb_session *s, const char *command);
/** Open n channels, exec the command on each, then drain them all; returns how many exited 0. */
int lsb_exec_many(lsb_session *s, const char *command, int n);
/** Run the command and read its stdout to the end (64 KiB reads); bytes read or -1. */
long long lsb_read_all(lsb_session *s, const char *command);
/** Open a direct-tcpip channel to host:port and copy what it sends to `fd` (64 KiB
 *  channel reads, blocking writes) until EOF; bytes copied or -1. `fd` is not closed. */
long long lsb_forward_to_fd(lsb_session *s, const char *host, int port, int fd);
/** Echo round trips (1 byte to `stty raw -echo; cat` on a PTY channel, into ms[0..samples))
 *  beside `cat /dev/zero` on a second channel of the same session, read in one loop. Bytes the
 *  stream moved in *streamed, over *seconds (300 ms of warm-up included). 0, or -1 on failure.
 *  The session is not reusable afterwards. */
int lsb_echo_beside_stream(lsb_session *s, int samples, double *ms, long long *streamed,
                           double *seconds);
void lsb_close(lsb_session *s);

#pragma clang assume_nonnull end
#endif
