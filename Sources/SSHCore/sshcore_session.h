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

/* Where the channel comes from: opened by the op, or handed to it open. */
typedef struct session_adoption {
    sshcore_op *_Nullable parent; /* forwarded: the remote forward; a strong
                                     reference */
    uint64_t id;
    ssh_channel _Nullable preset_ch; /* agent: the channel, until taken */
} session_adoption;

typedef struct session_op session_op;

/**
 * An op's kind: what its channel's bytes are for (collected for the caller,
 * streamed to the caller, or carried to a socket). One table of hooks per
 * kind, with the worker's vtable first; nothing outside a kind's hooks asks
 * which kind an op is. Each kind's hooks sit in the file of that kind.
 */
typedef struct session_kind {
    sshcore_op_vtable op;        /* the worker's hooks */
    sshcore_op_kind public_kind; /* EXEC, STREAM or BRIDGE */
    /* what a write still queued learns when the channel closed first */
    int unsent_input_code;
    /** libssh's data callback, past the common checks: takes what it can of
     *  `len` bytes (`fresh` of them new) and returns how many. */
    int (*on_data)(session_op *x,
                   int stream,
                   const uint8_t *data,
                   uint32_t len,
                   size_t fresh);
    /** Hands `n` bytes of held output on; false when the op ended. */
    bool (*deliver)(session_op *x, int stream, const uint8_t *p, size_t n);
    /** How much held output may be handed on now. */
    size_t (*room)(session_op *x);
    /** Hands over what was gathered in this pass. */
    void (*flush)(session_op *x);
    /** The kind's part of an I/O pass before held output is read, and after
     *  the peer's EOF was looked at; false when the op ended. */
    bool (*pass_in)(sshcore_conn *conn, session_op *x, bool *again);
    bool (*pass_out)(sshcore_conn *conn, session_op *x, bool *again);
    /** Output taken from the channel that has not reached its consumer. */
    bool (*output_waits)(const session_op *x);
    void (*report_open)(session_op *x, int env_fallback_used);
    void (*report_eof)(session_op *x);
    /** Tells the caller that no callback comes any more (once). */
    void (*release)(session_op *x);
    /** Worker, at the op's end, after the channel was closed. */
    void (*ended)(sshcore_conn *conn, session_op *x);
    /** Any thread: frees what the kind holds. */
    void (*destroy)(session_op *x);
} session_kind;

/**
 * Where an op's channel comes from: opened by the op (a session or a direct
 * channel), or handed to it open (a remote forward's connection, an agent
 * channel). Its hooks sit in sshcore_session_setup.c.
 */
typedef struct session_origin {
    /** Worker, OPENING: gets the channel; true to be stepped again now. */
    bool (*open)(sshcore_conn *conn, session_op *x);
    /** Worker: the op ended before it took its channel. */
    void (*abandon)(sshcore_conn *conn, session_op *x);
    /** Any thread: drops what the origin holds. */
    void (*destroy)(session_op *x);
} session_origin;

/* A session channel op: a command, shell or subsystem, or a direct or
 * forwarded channel; its output collected or streamed, or its bytes carried
 * to a socket (a bridge). */
struct session_op {
    sshcore_op base;
    const session_kind *kind;
    const session_origin *origin;
    sshcore_stream_callbacks cb; /* streamed: the caller's */
    session_request req;
    session_channel chan;
    session_inbox in;
    session_output out;
    session_bridge *_Nullable bridge; /* bridged ops only */
    session_adoption adopt;
};

/* The kinds (each defined in its file) and the origins. */
extern const session_kind sshcore__collected_kind; /* sshcore_exec.c */
extern const session_kind sshcore__streamed_kind; /* sshcore_session_output.c */
extern const session_kind sshcore__bridged_kind;  /* sshcore_bridge.c */
extern const session_origin sshcore__opened_origin;
extern const session_origin sshcore__forwarded_origin;
extern const session_origin sshcore__agent_origin;

/** The channel's flags, derived from its state (sshcore_fsm.h). */
static inline bool
sshcore__chan_is(const session_op *x, unsigned flag)
{
    return (sshcore_chan_flags(x->chan.state) & flag) != 0;
}

/* sshcore_session_new.c: every channel op is made here */
/** A session channel's op of `kind` for a command (NULL: a shell), not yet
 *  submitted; NULL without memory. */
session_op *_Nullable sshcore__session_new(const session_kind *kind,
                                           const char *_Nullable command,
                                           const char *_Nullable fallback,
                                           const sshcore_env_var *_Nullable env,
                                           size_t env_count);
/** A session op of `kind` from a SESSION spec, not yet submitted; NULL with
 *  `err` set for an incomplete spec or without memory. */
session_op *_Nullable sshcore__session_from_spec(
    const session_kind *kind,
    const sshcore_stream_spec *spec,
    sshcore_error *err);
/** A direct-tcpip or direct-streamlocal channel's op of `kind`. */
session_op *_Nullable sshcore__session_direct_new(
    const session_kind *kind,
    const sshcore_stream_spec *spec,
    sshcore_error *err);
/** An op of `kind` for a waiting forwarded-tcpip connection of `forward`. */
session_op *_Nullable sshcore__session_adopted_new(const session_kind *kind,
                                                   sshcore_op *forward,
                                                   uint64_t id,
                                                   size_t buffer_limit,
                                                   sshcore_error *err);
/** A bridged op for a forwarded agent channel `ch`, joined to `fd`. */
session_op *_Nullable sshcore__session_agent_new(
    ssh_channel ch,
    int fd,
    const sshcore_bridge_callbacks *callbacks);
/** Gives a bridged op its socket `fd` and callbacks: from here the op owns
 *  the fd. False without memory (the fd is still the caller's). */
bool sshcore__session_bridge_take(session_op *x,
                                  int fd,
                                  const sshcore_bridge_callbacks *callbacks);
/** A bridge refused before it was submitted: frees `x` (when made) and closes
 *  `fd`, whichever holds it. Returns NULL. */
sshcore_op *_Nullable sshcore__session_bridge_refuse(session_op *_Nullable x,
                                                     int fd);
/** Queues a made op on its connection; NULL (the op freed) when refused. */
sshcore_op *_Nullable sshcore__session_submit(sshcore_conn *conn,
                                              session_op *x,
                                              sshcore_op_done_fn done,
                                              void *_Nullable ctx,
                                              int timeout_ms,
                                              sshcore_error *err);

/* sshcore_session.c: the op's step, its I/O pass and its machine */
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
bool sshcore__session_step(sshcore_conn *conn, sshcore_op *op);

/* sshcore_session_setup.c: the origins, and the setup states, one function
 * each */
/** Sets libssh's callbacks on the op's channel (data, exit status). */
void sshcore__session_set_callbacks(session_op *x);
/** Reports the open channel to the caller (once). */
void sshcore__session_report_open(session_op *x, int env_fallback_used);
bool sshcore__session_setup_opening(sshcore_conn *conn, session_op *x);
bool sshcore__session_setup_agent(sshcore_conn *conn, session_op *x);
bool sshcore__session_setup_env(sshcore_conn *conn, session_op *x);
bool sshcore__session_setup_pty(sshcore_conn *conn, session_op *x);
bool sshcore__session_setup_start(sshcore_conn *conn, session_op *x);

/* sshcore_session_close.c: how a channel op ends (the vtables' abort and
 * destroy) */
void sshcore__session_abort(sshcore_conn *conn, sshcore_op *op);
void sshcore__session_destroy(sshcore_op *op);
/** Tells the caller that no callback comes any more (once), through `cb`'s
 *  released callback when set. */
void sshcore__session_release_to(session_op *x,
                                 void (*_Nullable released)(void *_Nullable),
                                 void *_Nullable ctx);

/* sshcore_session_output.c */
size_t sshcore__session_room(session_op *x);
bool sshcore__session_output_pending(const session_op *x);
void sshcore__session_hold(session_op *x, int stream, size_t n);
int sshcore__session_on_data(ssh_session session,
                             ssh_channel channel,
                             void *data,
                             uint32_t len,
                             int is_stderr,
                             void *userdata);
bool sshcore__session_read_held(sshcore_conn *conn, session_op *x, bool *again);
/** Hands on up to `room` of `len` new bytes and leaves the rest held in
 *  libssh; returns how many went. */
size_t sshcore__session_take_within(session_op *x,
                                    int stream,
                                    const uint8_t *data,
                                    uint32_t len,
                                    size_t room);
/** The room under the buffer limit, marking the op starved when there is
 *  none (the consumer then wakes the worker). */
size_t sshcore__session_streamed_room(session_op *x);
/* hooks for a kind that has no such part */
void sshcore__session_no_op(session_op *x);
bool sshcore__session_no_pass(sshcore_conn *conn, session_op *x, bool *again);
bool sshcore__session_nothing_waits(const session_op *x);
void sshcore__session_nothing_ended(sshcore_conn *conn, session_op *x);

/* sshcore_session_input.c */
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
/** Whether `op` is a session channel that reports an exit and takes a resize:
 *  a STREAM, or a BRIDGE of a session (sshcore_bridge_terminal_start). */
bool sshcore__session_is_command(sshcore_op *op,
                                 const char *call,
                                 sshcore_error *_Nullable err);

/* sshcore_bridge.c */
/** Worker: arms the connection for auth-agent channels the server opens
 *  (once), before the first session asks for agent forwarding. */
bool sshcore__agent_forwarding_arm(sshcore_conn *conn);

#pragma clang assume_nonnull end

#endif
