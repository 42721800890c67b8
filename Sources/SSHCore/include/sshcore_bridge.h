/*
 * sshcore_bridge.h - bridged channels: a socket or a terminal joined to a
 * channel inside the worker (forwarding, attaching). Part of the public
 * interface of SSHCore (see sshcore.h); includes no libssh.
 */
#ifndef SSHCORE_BRIDGE_H
#define SSHCORE_BRIDGE_H

#include <stddef.h>
#include <stdint.h>
#include "sshcore_exec.h"

#ifdef __cplusplus
extern "C" {
#endif

#pragma clang assume_nonnull begin

/* ---------------------------------------------------------------------- */
/* Operations: bridged channels (forwarding)                               */
/* ---------------------------------------------------------------------- */

typedef struct sshcore_bridge_callbacks {
    void *_Nullable ctx;
    /** Worker: the channel is open and no byte has moved yet. The caller may
     *  write a short reply (a SOCKS answer) to `fd` during the call; the
     *  socket is non-blocking and must not be closed. */
    void (*opened)(void *_Nullable ctx, int fd);
    /** Worker: the channel never opened (refused, cancelled, timed out, the
     *  connection ended); `err` says why. `fd` is still open during the call
     *  (for a failure reply) and closed after it. */
    void (*failed)(void *_Nullable ctx, int fd, const sshcore_error *err);
    /** Worker (or the thread dropping the last reference of an op that never
     *  ran): no callback follows; `ctx` may be freed here. */
    void (*released)(void *_Nullable ctx);
} sshcore_bridge_callbacks;

/**
 * @brief Open a direct channel (spec->kind DIRECT_TCPIP or DIRECT_STREAMLOCAL)
 * and join it to the stream socket `fd` inside the worker: bytes move both
 * ways without reaching the caller.
 *
 * The core owns `fd` from this call on, also when it fails (returns NULL):
 * it makes it non-blocking, polls it on the worker and closes it once.
 * Flow control: reading the socket waits for the peer's window; data from
 * the channel waits in at most spec->buffer_limit bytes for the socket to
 * take it, and beyond that the channel stops reading (the SSH window closes).
 * EOF goes both ways (a socket EOF sends CHANNEL_EOF; CHANNEL_EOF shuts the
 * socket's write side down once everything was written). `done` runs once:
 * OK when the channel closed normally or the socket's client went away
 * (reset, broken pipe), an error otherwise (CHANNEL_OPEN_REFUSED,
 * CANCELLED, TIMED_OUT after spec->timeout_ms, the connection's failure).
 * An error after the channel opened, before the channel's EOF reached the
 * socket, resets the socket (RST) instead of closing it with a FIN, so its
 * client never takes a cut stream for a complete one.
 * `first_data` (copied) goes into the channel before anything read from the
 * socket: bytes a caller already read from it, e.g. behind a SOCKS request.
 */
sshcore_op *_Nullable sshcore_bridge_start(
    sshcore_conn *conn,
    const sshcore_stream_spec *spec,
    int fd,
    const uint8_t *_Nullable first_data,
    size_t first_len,
    const sshcore_bridge_callbacks *callbacks,
    sshcore_op_done_fn done,
    void *_Nullable ctx,
    sshcore_error *err);

/**
 * @brief Start a command or the login shell on a PTY (spec->kind SESSION with
 * spec->pty; not a subsystem) and join its terminal to `fd` inside the worker,
 * as ssh(1) carries its own terminal: what is read from `fd` goes to the
 * program and its screen is written to `fd`, with no hand-over to the caller.
 *
 * `fd` is a stream socket or a terminal (a pipe is refused: a write to one
 * without a reader would raise SIGPIPE on the worker). The core owns it from
 * this call on, also when it fails, as for sshcore_bridge_start; open a fresh
 * one for a terminal (open("/dev/tty")): it is made non-blocking, which the
 * caller's other descriptors of the same terminal then do not share.
 * `detach_byte` (0-255, or -1 for none), read from `fd`, ends the join: the
 * bytes before it go to the program, nothing after it is read, and the op
 * completes OK, sshcore_bridge_end_of() saying DETACHED; the channel closes
 * (the program gets its terminal's hang-up).
 * `done` runs once: OK when the channel closed (the exit is read with
 * sshcore_stream_get_exit), on the detach byte, or when `fd` ended (a
 * terminal's hang-up, a socket's reset); an error as for sshcore_bridge_start.
 * sshcore_stream_resize resizes the PTY. A socket's EOF sends the channel's
 * EOF; a terminal's end ends the op.
 */
sshcore_op *_Nullable sshcore_bridge_terminal_start(
    sshcore_conn *conn,
    const sshcore_stream_spec *spec,
    int fd,
    int detach_byte,
    const sshcore_bridge_callbacks *callbacks,
    sshcore_op_done_fn done,
    void *_Nullable ctx,
    sshcore_error *err);

/** Why a bridge that completed OK ended. */
typedef enum sshcore_bridge_end {
    /** The channel closed (a command's exit is then readable). */
    SSHCORE_BRIDGE_END_CHANNEL = 0,
    /** The detach byte was read (terminal bridges). */
    SSHCORE_BRIDGE_END_DETACHED = 1,
    /** The fd's side went away: a socket's reset or broken pipe, a terminal's
     *  hang-up. */
    SSHCORE_BRIDGE_END_FD = 2,
} sshcore_bridge_end;

/** @brief Why a bridge ended (any thread); valid once done ran with OK, and
 *  CHANNEL for an op that is not a bridge. */
sshcore_bridge_end sshcore_bridge_end_of(sshcore_op *op);

/** @brief Bytes a bridge moved so far: channel to socket, socket to channel. */
int sshcore_bridge_get_counts(sshcore_op *op,
                              uint64_t *to_socket,
                              uint64_t *from_socket);

#pragma clang assume_nonnull end

#ifdef __cplusplus
}
#endif

#endif /* SSHCORE_BRIDGE_H */
