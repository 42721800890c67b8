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
/** A PTY channel running `stty raw -echo; cat`, after one round trip; NULL on failure. */
typedef struct lsb_echo lsb_echo;
lsb_echo *_Nullable lsb_echo_open(lsb_session *s);
/** Starts `command` (a bulk stream, `cat /dev/zero`) on a second channel, reads it for
 *  `warmup_ms`, then times `samples`
 *  echo round trips (1 byte each, into ms[]) while one loop also reads the stream; closes the
 *  stream's channel. The stream's bytes and seconds during the round trips go to *streamed and
 *  *seconds. 0, or -1 on failure. */
int lsb_echo_beside_stream(lsb_echo *e, const char *command, int samples, double warmup_ms,
                           double *ms, long long *streamed, double *seconds);
void lsb_echo_close(lsb_echo *e);
void lsb_close(lsb_session *s);

/** Under `valgrind --tool=callgrind`: writes the instructions counted since the last dump
 *  (all threads) to a dump of their own, named `label`. Does nothing otherwise (and when
 *  valgrind's headers were missing at build time). */
void lsb_callgrind_dump(const char *label);

#pragma clang assume_nonnull end
#endif
