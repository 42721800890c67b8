/*
 * sshcore_session.h - session channel operations (commands, shells,
 * subsystems, and sockets bridged to channels), shared by the files that
 * implement them; never exported.
 *
 * Locks: x->mu guards an op's inbox; it is a leaf lock (nothing else is taken
 * while holding it, and no callback runs under it). See sshcore_internal.h.
 */
#ifndef SSHCORE_SESSION_H
#define SSHCORE_SESSION_H

#include "sshcore_internal.h"

#pragma clang assume_nonnull begin

/* Per turn, write at most this much per channel, so one busy channel cannot
 * starve its siblings on the same connection. */
#define WRITE_CHUNK (64 * 1024)
/* Streamed output is handed over in batches of up to this much (one callback,
 * one wake-up of the reader, per batch instead of per packet). */
#define BATCH_MAX (128 * 1024)
/* Held output segments remembered for ordering; beyond, order is approximate.
 */
#define HELD_MAX 1024
/* A bridge reads its socket in pieces of at most this much. */
#define BRIDGE_READ (64 * 1024)
/* Signals queued before the command started. */
#define SIGNALS_MAX 8

typedef struct wreq {
    struct wreq *_Nullable next;
    uint64_t id;
    bool eof; /* an EOF marker instead of data */
    bool cancelled;
    uint8_t *_Nullable data;
    size_t len;
    size_t off;
    sshcore_write_done_fn _Nullable done;
    void *_Nullable ctx;
} wreq;

typedef struct held_seg {
    int stream;
    size_t len;
} held_seg;

typedef struct session_op {
    sshcore_op base;
    bool streamed;
    char *_Nullable command; /* NULL: shell */
    char *_Nullable fallback;
    char *_Nullable *_Nullable env_names;
    char *_Nullable *_Nullable env_values;
    size_t env_count;
    size_t env_idx;
    bool want_pty;
    char term[64];
    uint32_t cols;
    uint32_t rows;
    size_t limit; /* collected: output limit; streamed: buffer limit */
    sshcore_stream_callbacks cb;

    /* inbox, any thread, guarded by mu (a leaf lock) */
    pthread_mutex_t mu;
    wreq *_Nullable wq_head;
    wreq *_Nullable wq_tail;
    uint64_t next_id;
    bool eof_queued;
    bool inbox_closed; /* the op ended: nothing more is accepted */
    char signals[SIGNALS_MAX][16];
    size_t signal_count;
    bool resize_pending;
    uint32_t new_cols;
    uint32_t new_rows;

    /* streamed output not yet consumed by the caller (any thread) */
    atomic_size_t unconsumed;
    atomic_int starved; /* the worker stopped reading for lack of room */

    /* worker only */
    sshcore_setup phase; /* the channel setup machine (sshcore_phase.c) */
    bool use_fallback;
    bool env_optional; /* a refused env request is skipped */
    bool subsystem;    /* command names a subsystem */
    bool start_sent;   /* SSHCORE_SETUP_START: the exec/shell/subsystem request
                          went out */
    /* SSHCORE_SETUP_OPEN: the first refusal of a session open that is tried
     * again (a slot of our own closing channels), and how often */
    int64_t open_refused_ms;
    int open_retries;
    sshcore_channel_kind kind;
    char *_Nullable target; /* direct channels: host or socket path */
    int target_port;
    char *_Nullable originator;
    int originator_port;
    ssh_channel _Nullable ch;
    struct ssh_channel_callbacks_struct cbs;
    sshcore_chan_state cstate;
    bool eof_seen;
    bool eof_sent;
    bool started_reported;
    bool released;
    sshcore_bytes out[2]; /* collected output */
    sshcore_bytes batch;  /* streamed output not handed over yet */
    int batch_stream;
    bool unflushed; /* with cb.flush: data was passed since the last flush */
    size_t held[2]; /* bytes libssh holds for us, per stream */
    held_seg held_fifo[HELD_MAX];
    size_t held_head;
    size_t held_count;
    sshcore_bytes stash; /* held output moved out of libssh, not handed over */
    size_t stash_off;
    int stash_stream;

    sshcore_exit_kind exit_kind;
    int exit_status;
    char exit_signal[32];
    int core_dumped;

    /* bridged: a socket joined to the channel inside the worker (worker only)
     */
    bool bridged;
    int fd; /* -1 once closed */
    sshcore_bridge_callbacks bcb;
    bool fd_readable; /* poll said so, or not tried yet; cleared on EAGAIN */
    bool fd_writable;
    bool fd_read_eof;   /* the socket's client finished sending (or failed) */
    bool fd_write_shut; /* shutdown(SHUT_WR) done after the channel's EOF */
    bool fd_dead;       /* the client went away (reset, broken pipe) */
    sshcore_bytes fdin; /* read from the socket, not yet in the channel */
    size_t fdin_off;
    sshcore_bytes fdout; /* from the channel, not yet written to the socket */
    size_t fdout_off;
    _Atomic uint64_t to_fd;
    _Atomic uint64_t from_fd;

    /* a forwarded-tcpip channel already open, waiting in a remote forward op */
    sshcore_op *_Nullable adopt_parent; /* strong reference */
    uint64_t adopt_id;
    ssh_channel _Nullable preset_ch; /* a forwarded agent channel, open, to take
                                      */
} session_op;

/* sshcore_session.c */
void sshcore__session_complete_code(session_op *x,
                                    int code,
                                    const char *_Nullable detail);
void sshcore__session_fail_call(sshcore_conn *conn,
                                session_op *x,
                                int channel_code,
                                const char *fn);
sshcore_chan_action sshcore__session_chan_event(session_op *x,
                                                sshcore_chan_event ev);
sshcore_op *_Nullable sshcore__session_submit(sshcore_conn *conn,
                                              session_op *x,
                                              sshcore_op_done_fn done,
                                              void *_Nullable ctx,
                                              int timeout_ms,
                                              sshcore_error *err);
/* sshcore_session_close.c: how a session channel ends (the vtables' abort and
 * destroy). */
void sshcore__session_abort(sshcore_conn *conn, sshcore_op *op);
void sshcore__session_destroy(sshcore_op *op);

/* sshcore_exec.c: the public calls that start session channels */
session_op *_Nullable sshcore__session_new(const char *_Nullable command,
                                           const char *_Nullable fallback,
                                           const sshcore_env_var *_Nullable env,
                                           size_t env_count);

/* sshcore_session_output.c */
size_t sshcore__session_room(session_op *x);
bool sshcore__session_output_pending(const session_op *x);
void sshcore__session_flush_batch(session_op *x);
bool
sshcore__session_deliver(session_op *x, int stream, const uint8_t *p, size_t n);
void sshcore__session_hold(session_op *x, int stream, size_t n);
int sshcore__session_on_data(ssh_session session,
                             ssh_channel channel,
                             void *data,
                             uint32_t len,
                             int is_stderr,
                             void *userdata);
bool sshcore__session_read_held(sshcore_conn *conn, session_op *x, bool *again);

/* sshcore_session_input.c */
bool sshcore__session_can_write(const session_op *x);
bool sshcore__session_send_controls(sshcore_conn *conn, session_op *x);
bool sshcore__session_send_backlogged(sshcore_conn *conn);
long sshcore__session_channel_send(sshcore_conn *conn,
                                   session_op *x,
                                   const uint8_t *p,
                                   size_t len,
                                   size_t *budget);
bool sshcore__session_send_channel_eof(sshcore_conn *conn, session_op *x);
bool
sshcore__session_write_input(sshcore_conn *conn, session_op *x, bool *again);
void sshcore__session_fail_writes(session_op *x, int code);
void sshcore__session_enqueue(session_op *x, wreq *w);

/* sshcore_bridge.c */
size_t sshcore__session_bridge_send_direct(session_op *x,
                                           const uint8_t *data,
                                           size_t len);
bool sshcore__session_bridge_out_pending(const session_op *x);
bool sshcore__session_bridge_in(sshcore_conn *conn, session_op *x, bool *again);
void sshcore__session_bridge_out(session_op *x, bool *again);
int sshcore__session_bridge_poll_fd(sshcore_conn *conn,
                                    sshcore_op *op,
                                    short *events);
void sshcore__session_bridge_poll_event(sshcore_op *op, short revents);
sshcore_op *_Nullable sshcore__session_direct_start(
    sshcore_conn *conn,
    const sshcore_stream_spec *spec,
    const sshcore_stream_callbacks *callbacks,
    sshcore_op_done_fn done,
    void *ctx,
    sshcore_error *err);
session_op *_Nullable sshcore__session_adopted_new(sshcore_op *forward,
                                                   uint64_t id,
                                                   size_t buffer_limit,
                                                   sshcore_error *err);

#pragma clang assume_nonnull end

#endif
