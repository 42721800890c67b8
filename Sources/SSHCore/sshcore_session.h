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

/* What a channel is opened as and, for a session, what its setup asks the
 * server for: set when the op is made, read by the setup states and by the
 * close path (which may hand a starting channel on). */
typedef struct session_request {
    sshcore_channel_kind kind;
    char *_Nullable target; /* direct channels: host or socket path */
    int target_port;
    char *_Nullable originator;
    int originator_port;
    char *_Nullable command; /* NULL: shell */
    char *_Nullable fallback;
    char *_Nullable *_Nullable env_names;
    char *_Nullable *_Nullable env_values;
    size_t env_count;
    bool env_optional; /* a refused env request is skipped */
    bool subsystem;    /* command names a subsystem */
    bool want_pty;
    char term[64];
    uint32_t cols;
    uint32_t rows;

    /* worker only: how far the setup got */
    size_t env_idx;
    bool use_fallback;
    bool start_sent; /* START_REQUEST: the exec/shell/subsystem request went
                        out */
    /* OPENING: the first refusal of a session open that is tried again (a
     * slot of our own closing channels), and how often */
    int64_t open_refused_ms;
    int open_retries;
} session_request;

/* The channel and what the server reported on it (worker only). */
typedef struct session_channel {
    ssh_channel _Nullable ch;
    struct ssh_channel_callbacks_struct cbs;
    /* the channel's one state (sshcore_fsm.h): its setup steps, then its I/O;
     * applied with sshcore__session_chan_event */
    sshcore_chan_state state;
    bool eof_seen;
    bool eof_sent;
    bool started_reported; /* the caller heard it is open */
    bool released;         /* the caller heard no callback comes any more */
    sshcore_exit_kind exit_kind;
    int exit_status;
    char exit_signal[32];
    int core_dumped;
} session_channel;

/* What other threads hand the channel: data, EOF, signals, a resize. Guarded
 * by mu (a leaf lock). */
typedef struct session_inbox {
    pthread_mutex_t mu;
    wreq *_Nullable wq_head;
    wreq *_Nullable wq_tail;
    uint64_t next_id;
    bool eof_queued;
    bool closed; /* the op ended: nothing more is accepted */
    char signals[SIGNALS_MAX][16];
    size_t signal_count;
    bool resize_pending;
    uint32_t new_cols;
    uint32_t new_rows;
} session_inbox;

/* The channel's output: collected up to a limit, or streamed to the caller
 * (each part used only in its mode), and what libssh holds for a slow reader
 * in either. Worker only, but for the streamed counters. */
typedef struct session_output {
    size_t limit; /* collected: output limit; streamed: buffer limit */
    sshcore_bytes collected[2]; /* collected: stdout, stderr */
    struct {
        sshcore_bytes batch; /* not handed over yet */
        int batch_stream;
        bool unflushed; /* with cb.flush: data was passed since the last
                           flush */
        /* not yet consumed by the caller (any thread) */
        atomic_size_t unconsumed;
        atomic_int starved; /* the worker stopped reading for lack of room */
    } streamed;
    size_t held[2]; /* bytes libssh holds for us, per stream */
    held_seg held_fifo[HELD_MAX];
    size_t held_head;
    size_t held_count;
    sshcore_bytes stash; /* held output moved out of libssh, not handed over */
    size_t stash_off;
    int stash_stream;
} session_output;

/* A bridged op's socket, joined to the channel inside the worker (worker
 * only, but for the counters): libssh's ssh_connector is the shape. */
typedef struct session_bridge {
    int fd; /* -1 once closed */
    sshcore_bridge_callbacks cb;
    bool fd_readable; /* poll said so, or not tried yet; cleared on EAGAIN */
    bool fd_writable;
    bool fd_read_eof;   /* the socket's client finished sending (or failed) */
    bool fd_write_shut; /* shutdown(SHUT_WR) done after the channel's EOF */
    bool fd_dead;       /* the client went away (reset, broken pipe) */
    bool is_socket;     /* else a terminal: read/write, no shutdown */
    int detach_byte;    /* -1: none; read from the fd, it ends the op */
    bool detach_seen;   /* read: what came before it goes out, then the end */
    atomic_int end;     /* sshcore_bridge_end: why it ended (any thread) */
    sshcore_bytes fdin; /* read from the socket, not yet in the channel */
    size_t fdin_off;
    sshcore_bytes fdout; /* from the channel, not yet written to the socket */
    size_t fdout_off;
    _Atomic uint64_t to_fd;
    _Atomic uint64_t from_fd;
} session_bridge;

/* A channel that is already open when the op starts: a forwarded-tcpip
 * channel waiting in a remote forward op, or a forwarded agent channel. */
typedef struct session_adoption {
    sshcore_op *_Nullable parent; /* the remote forward; a strong reference */
    uint64_t id;
    ssh_channel _Nullable preset_ch; /* a forwarded agent channel, to take */
} session_adoption;

/* A session channel op: a command, shell or subsystem, or a direct or
 * forwarded channel; its output collected or streamed, or its bytes carried
 * to a socket (a bridge). */
typedef struct session_op {
    sshcore_op base;
    bool streamed;               /* else collected, unless bridged */
    sshcore_stream_callbacks cb; /* streamed: the caller's */
    session_request req;
    session_channel chan;
    session_inbox in;
    session_output out;
    session_bridge *_Nullable bridge; /* bridged ops only */
    session_adoption adopt;
} session_op;

/* sshcore_session.c */
void sshcore__session_complete_code(session_op *x,
                                    int code,
                                    const char *_Nullable detail);
void sshcore__session_fail_call(sshcore_conn *conn,
                                session_op *x,
                                int channel_code,
                                const char *fn);
/** Applies a channel event and returns its action for the caller to act on;
 *  a rejected one is a core bug: the operation fails with INVALID_STATE
 *  naming the state and the event. */
sshcore_chan_action sshcore__session_chan_event(session_op *x,
                                                sshcore_chan_event ev);
/** Whether the channel carries bytes: its setup is done and it has not closed
 *  (open, an EOF sent or received, or closing). */
static inline bool
sshcore__session_in_io(const session_op *x)
{
    return x->chan.state >= SSHCORE_CHAN_OPEN &&
           x->chan.state <= SSHCORE_CHAN_CLOSING;
}
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
/** A streamed session op from a SESSION spec, not yet submitted; NULL with
 *  `err` set for an incomplete spec or without memory. */
session_op *_Nullable sshcore__session_from_spec(
    const sshcore_stream_spec *spec,
    sshcore_error *err);
/** Whether `op` is a session channel that reports an exit and takes a resize:
 *  a STREAM, or a BRIDGE of a session (sshcore_bridge_terminal_start). */
bool sshcore__session_is_command(sshcore_op *op,
                                 const char *call,
                                 sshcore_error *_Nullable err);

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
bool sshcore__session_bridge_take(session_op *x,
                                  int fd,
                                  const sshcore_bridge_callbacks *callbacks);
sshcore_op *_Nullable sshcore__session_bridge_refuse(session_op *_Nullable x,
                                                     int fd);
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
session_op *_Nullable sshcore__session_direct_new(
    const sshcore_stream_spec *spec,
    sshcore_error *err);
session_op *_Nullable sshcore__session_adopted_new(sshcore_op *forward,
                                                   uint64_t id,
                                                   size_t buffer_limit,
                                                   sshcore_error *err);

#pragma clang assume_nonnull end

#endif
