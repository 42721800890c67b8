/*
 * sshcore_rforward.h - remote forwarding (tcpip-forward) and its incoming
 * channels. Part of the public interface of SSHCore (see sshcore.h); includes
 * no libssh.
 */
#ifndef SSHCORE_RFORWARD_H
#define SSHCORE_RFORWARD_H

#include <stddef.h>
#include <stdint.h>
#include "sshcore_bridge.h"

#ifdef __cplusplus
extern "C" {
#endif

#pragma clang assume_nonnull begin

/* ---------------------------------------------------------------------- */
/* Operations: remote forwarding (tcpip-forward)                           */
/* ---------------------------------------------------------------------- */

typedef struct sshcore_rforward_callbacks {
    void *_Nullable ctx;
    /** Worker: the server listens on `bound_port` (the port asked for).
     *  Called once, before any `incoming`. */
    void (*listening)(void *_Nullable ctx, int bound_port);
    /** Worker: a connection to the server's port arrived as a forwarded-tcpip
     *  channel, open and waiting (its data is buffered, within its window).
     *  Answer with sshcore_rforward_bridge, _stream or _reject; unanswered, it
     *  is closed after the accept timeout. `originator` is valid during the
     * call. */
    void (*incoming)(void *_Nullable ctx,
                     uint64_t id,
                     const char *originator,
                     int originator_port);
    /** Worker (or the thread dropping the last reference of an op that never
     *  ran): no callback follows. */
    void (*released)(void *_Nullable ctx);
} sshcore_rforward_callbacks;

/**
 * @brief Ask the server to listen on `bind_address`:`port` ("tcpip-forward")
 * and hand each connection it forwards to the callbacks.
 *
 * `port` is 1...65535: a port the server chooses (0) is not asked for, since
 * libssh 0.10 reads it from whatever packet it processed last, which is
 * unreliable while other channels are busy; callers pick one (SSHKit picks
 * random ports and checks they reach the forward). Global requests (this one,
 * its cancel, keepalives) take turns: libssh has one slot for them. `done` runs
 * once: FORWARD_REFUSED when the server says no, CANCELLED after
 * sshcore_op_cancel (which also sends cancel-tcpip-forward and closes waiting
 * connections), or the connection's failure. Channels already handed on are
 * separate operations and live on.
 */
sshcore_op *_Nullable sshcore_rforward_start(
    sshcore_conn *conn,
    const char *_Nullable bind_address,
    int port,
    int accept_timeout_ms,
    const sshcore_rforward_callbacks *callbacks,
    sshcore_op_done_fn done,
    void *_Nullable ctx,
    sshcore_error *err);

/** @brief Join incoming connection `id` to the socket `fd` (owned by the core
 *  from this call on, also on failure), like sshcore_bridge_start. */
sshcore_op *_Nullable sshcore_rforward_bridge(
    sshcore_op *forward,
    uint64_t id,
    int fd,
    size_t buffer_limit,
    const sshcore_bridge_callbacks *callbacks,
    sshcore_op_done_fn done,
    void *_Nullable ctx,
    sshcore_error *err);

/** @brief Take incoming connection `id` as a streamed channel (like a
 *  direct channel from sshcore_stream_start; `started` runs once it is taken).
 */
sshcore_op *_Nullable sshcore_rforward_stream(
    sshcore_op *forward,
    uint64_t id,
    size_t buffer_limit,
    const sshcore_stream_callbacks *callbacks,
    sshcore_op_done_fn done,
    void *_Nullable ctx,
    sshcore_error *err);

/** @brief Close incoming connection `id` unused (any thread). */
int sshcore_rforward_reject(sshcore_op *forward, uint64_t id);

#pragma clang assume_nonnull end

#ifdef __cplusplus
}
#endif

#endif /* SSHCORE_RFORWARD_H */
