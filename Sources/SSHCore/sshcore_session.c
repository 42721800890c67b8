/*
 * sshcore_session.c - session channels: commands and shells, with or without
 * a PTY, their output collected (exec) or streamed.
 *
 * Each is an operation on the connection's worker: open a session channel,
 * send env requests (falling back to a prefixed command when the server
 * refuses them), request a PTY, then exec or shell. While it runs, queued
 * stdin goes out within the peer's window, and output arrives through
 * libssh's channel data callback, so stdout and stderr are seen in the order
 * they arrived and neither can block the other.
 *
 * Collected output is bounded by output_limit. Streamed output is handed to
 * the caller at once while the bytes it has not consumed yet stay under
 * buffer_limit; above it the callback leaves new data in libssh's buffer,
 * which stops libssh from reopening the window, so the server stops sending.
 * The order of such held data is remembered (a FIFO of stream segments) and
 * it is read out in that order once the consumer catches up.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sshcore_internal.h"

enum { X_OPEN, X_AGENT, X_ENV, X_PTY, X_START, X_IO };

/* Per turn, write at most this much per channel, so one busy channel cannot
 * starve its siblings on the same connection. */
#define WRITE_CHUNK (64 * 1024)
/* Streamed output is handed over in batches of up to this much (one callback,
 * one wake-up of the reader, per batch instead of per packet). */
#define BATCH_MAX (128 * 1024)
/* Held output segments remembered for ordering; beyond, order is approximate. */
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
    char **env_names;
    char **env_values;
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
    int phase;
    bool use_fallback;
    bool env_optional; /* a refused env request is skipped */
    bool subsystem; /* command names a subsystem */
    bool start_sent; /* X_START: the exec/shell/subsystem request went out */
    sshcore_channel_kind kind;
    char *_Nullable target;     /* direct channels: host or socket path */
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
    sshcore_bytes out[2];   /* collected output */
    sshcore_bytes batch;    /* streamed output not handed over yet */
    int batch_stream;
    size_t held[2];         /* bytes libssh holds for us, per stream */
    held_seg held_fifo[HELD_MAX];
    size_t held_head;
    size_t held_count;
    sshcore_bytes stash;    /* held output moved out of libssh, not handed over */
    size_t stash_off;
    int stash_stream;

    sshcore_exit_kind exit_kind;
    int exit_status;
    char exit_signal[32];
    int core_dumped;

    /* bridged: a socket joined to the channel inside the worker (worker only) */
    bool bridged;
    int fd;                  /* -1 once closed */
    sshcore_bridge_callbacks bcb;
    bool fd_readable;        /* poll said so, or not tried yet; cleared on EAGAIN */
    bool fd_writable;
    bool fd_read_eof;        /* the socket's client finished sending (or failed) */
    bool fd_write_shut;      /* shutdown(SHUT_WR) done after the channel's EOF */
    bool fd_dead;            /* the client went away (reset, broken pipe) */
    sshcore_bytes fdin;      /* read from the socket, not yet in the channel */
    size_t fdin_off;
    sshcore_bytes fdout;     /* from the channel, not yet written to the socket */
    size_t fdout_off;
    _Atomic uint64_t to_fd;
    _Atomic uint64_t from_fd;

    /* a forwarded-tcpip channel already open, waiting in a remote forward op */
    sshcore_op *_Nullable adopt_parent; /* strong reference */
    uint64_t adopt_id;
    ssh_channel _Nullable preset_ch; /* a forwarded agent channel, open, to take */
} session_op;

/* ---------------------------------------------------------------------- */
/* Callbacks from libssh (worker)                                          */
/* ---------------------------------------------------------------------- */

static void on_exit_status(ssh_session session, ssh_channel channel, int status,
                           void *userdata)
{
    session_op *x = userdata;
    (void)session;
    (void)channel;
    x->exit_kind = SSHCORE_EXIT_STATUS;
    x->exit_status = status;
}

static void on_exit_signal(ssh_session session, ssh_channel channel,
                           const char *signal, int core, const char *errmsg,
                           const char *lang, void *userdata)
{
    session_op *x = userdata;
    (void)session;
    (void)channel;
    (void)errmsg;
    (void)lang;
    x->exit_kind = SSHCORE_EXIT_SIGNAL;
    snprintf(x->exit_signal, sizeof(x->exit_signal), "%s", signal != NULL ? signal : "");
    x->core_dumped = core;
}

static void complete_code(session_op *x, int code, const char *_Nullable detail)
{
    sshcore_error err;
    sshcore_error_set(&err, code, detail);
    (void)sshcore_op_complete(&x->base, &err);
}

/** Room left under the streamed buffer limit. */
static size_t room(session_op *x)
{
    size_t used = atomic_load(&x->unconsumed);
    return used >= x->limit ? 0 : x->limit - used;
}

/** Output that arrived but waits for room: in libssh or in the stash. */
static bool output_pending(const session_op *x)
{
    return x->held_count > 0 || x->stash_off < x->stash.len;
}

/** Hands the batched output to the caller (worker). */
static void flush_batch(session_op *x)
{
    if (x->batch.len == 0) {
        return;
    }
    if (atomic_load(&x->base.done) == 0) {
        x->cb.data(x->cb.ctx, x->batch_stream, x->batch.data, x->batch.len);
    }
    x->batch.len = 0;
}

/**
 * Hands `n` bytes to the caller (streamed) or to the collected output.
 * Returns false when the op ended because of it (output limit, memory).
 */
static bool deliver(session_op *x, int stream, const uint8_t *p, size_t n)
{
    if (n == 0) {
        return true;
    }
    if (!x->streamed) {
        if (x->out[0].len + x->out[1].len + n > x->limit) {
            char detail[96];
            snprintf(detail, sizeof(detail), "more than %zu bytes of output", x->limit);
            complete_code(x, SSHCORE_E_OUTPUT_LIMIT, detail);
            return false;
        }
        if (sshcore_bytes_append(&x->out[stream], p, n) != 0) {
            complete_code(x, SSHCORE_E_OUT_OF_MEMORY, NULL);
            return false;
        }
        return true;
    }
    /* counted at once: batched bytes are in memory as much as delivered ones */
    atomic_fetch_add(&x->unconsumed, n);
    if (x->bridged) {
        /* the socket is the consumer: bridge_out writes it and frees the room */
        if (sshcore_bytes_append(&x->fdout, p, n) != 0) {
            complete_code(x, SSHCORE_E_OUT_OF_MEMORY, NULL);
            return false;
        }
        return true;
    }
    if (x->batch.len > 0 && (x->batch_stream != stream || x->batch.len + n > BATCH_MAX)) {
        flush_batch(x);
    }
    if (x->batch.len == 0 && n >= BATCH_MAX) {
        x->cb.data(x->cb.ctx, stream, p, n); /* big enough alone: no copy */
        return true;
    }
    if (sshcore_bytes_append(&x->batch, p, n) != 0) {
        complete_code(x, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return false;
    }
    x->batch_stream = stream;
    return true;
}

/** Remembers that `n` new bytes of `stream` stay in libssh's buffer. */
static void hold(session_op *x, int stream, size_t n)
{
    size_t tail = 0;

    if (n == 0) {
        return;
    }
    x->held[stream] += n;
    if (x->held_count > 0) {
        tail = (x->held_head + x->held_count - 1) % HELD_MAX;
        if (x->held_fifo[tail].stream == stream) {
            x->held_fifo[tail].len += n;
            return;
        }
    }
    if (x->held_count == HELD_MAX) {
        /* pathological interleaving: keep the bytes, lose exact order */
        for (size_t i = x->held_count; i > 0; i--) {
            size_t k = (x->held_head + i - 1) % HELD_MAX;
            if (x->held_fifo[k].stream == stream) {
                x->held_fifo[k].len += n;
                return;
            }
        }
        return;
    }
    tail = (x->held_head + x->held_count) % HELD_MAX;
    x->held_fifo[tail].stream = stream;
    x->held_fifo[tail].len = n;
    x->held_count++;
}

/**
 * Bridged: with nothing waiting for the socket, writes channel data to it
 * straight from libssh's buffer, saving a copy through fdout. Returns how
 * many bytes went.
 */
static size_t bridge_send_direct(session_op *x, const uint8_t *data, size_t len)
{
    size_t sent = 0;

    /* not before the caller's `opened` ran: a SOCKS answer goes first, and a
     * target that speaks first (SSH, SMTP) can send with the open confirmation */
    if (x->phase != X_IO || !x->started_reported || x->fdout_off < x->fdout.len || !x->fd_writable ||
        x->fd_dead || x->fd < 0) {
        return 0;
    }
    while (sent < len) {
        ssize_t n = send(x->fd, data + sent, len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            sent += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            x->fd_writable = false;
        } else {
            x->fd_dead = true; /* the step ends the op */
        }
        break;
    }
    atomic_fetch_add(&x->to_fd, (uint64_t)sent);
    return sent;
}

/**
 * libssh calls this for every data packet, with everything it holds for the
 * stream (older held bytes first). Returns how many bytes we took.
 */
static int on_data(ssh_session session, ssh_channel channel, void *data,
                   uint32_t len, int is_stderr, void *userdata)
{
    session_op *x = userdata;
    int stream = is_stderr ? 1 : 0;
    size_t fresh = 0;
    size_t take = 0;
    (void)session;
    (void)channel;

    if (atomic_load(&x->base.done) != 0) {
        return (int)len; /* nobody wants it any more */
    }
    fresh = len >= x->held[stream] ? len - x->held[stream] : 0;
    if (!x->streamed) {
        /* collected output takes everything at once */
        if (!deliver(x, stream, data, len)) {
            return (int)len;
        }
        x->held[stream] = 0;
        return (int)len;
    }
    if (output_pending(x)) {
        /* older output is held: the new bytes queue behind it */
        hold(x, stream, fresh);
        return 0;
    }
    if (x->bridged) {
        size_t sent = bridge_send_direct(x, data, len);
        if (sent == len) {
            x->held[stream] = 0;
            return (int)len;
        }
        data = (uint8_t *)data + sent;
        len -= (uint32_t)sent;
        /* the rest waits in fdout, within the room, as below */
        take = room(x);
        take = take < len ? take : len;
        (void)deliver(x, stream, data, take);
        x->held[stream] = 0;
        hold(x, stream, len - take);
        return (int)(sent + take);
    }
    /* Mark starvation before looking at the room: a consumer that frees room
     * after this store sees the mark and wakes the worker (see consumed). */
    atomic_store(&x->starved, 1);
    take = room(x);
    if (take >= len) {
        take = len;
        atomic_store(&x->starved, 0);
    }
    (void)deliver(x, stream, data, take);
    /* libssh keeps what we did not take; with nothing held before, that is
     * the tail of this packet */
    x->held[stream] = 0;
    hold(x, stream, len - take);
    return (int)take;
}

/* ---------------------------------------------------------------------- */
/* Worker steps                                                            */
/* ---------------------------------------------------------------------- */

/** A libssh call on the channel failed: blame the connection if it is gone. */
static void fail_call(sshcore_conn *conn, session_op *x, int channel_code, const char *fn)
{
    int code = channel_code;
    sshcore_error err;

    if (!sshcore_session_usable(conn)) {
        code = sshcore_conn_failure_code(conn);
    }
    sshcore_error_from_session(&err, code, conn->session, fn);
    (void)sshcore_op_complete(&x->base, &err);
}

/** Apply a channel event; a rejected transition is a bug in this file. */
static sshcore_chan_action chan_event(session_op *x, sshcore_chan_event ev)
{
    sshcore_chan_state before = x->cstate;
    sshcore_chan_action act = sshcore_chan_fsm_apply(&x->cstate, ev);

    if (act == SSHCORE_CHAN_ACT_REJECT) {
        char detail[128];
        snprintf(detail, sizeof(detail), "channel event %s in state %s",
                 sshcore_chan_event_name(ev), sshcore_chan_state_name(before));
        complete_code(x, SSHCORE_E_INVALID_STATE, detail);
    }
    return act;
}

static bool can_write(const session_op *x)
{
    return x->cstate == SSHCORE_CHAN_OPEN || x->cstate == SSHCORE_CHAN_EOF_RECEIVED;
}

/** Completes a write request outside the lock and frees it. */
static void finish_wreq(wreq *w, int code)
{
    if (w->done != NULL) {
        w->done(w->ctx, code);
    }
    free(w->data);
    free(w);
}

/** Signals and a resize that arrived from other threads. */
static bool send_controls(sshcore_conn *conn, session_op *x)
{
    char signals[SIGNALS_MAX][16];
    size_t count = 0;
    size_t i;
    bool resize = false;
    uint32_t cols = 0;
    uint32_t rows = 0;

    pthread_mutex_lock(&x->mu);
    count = x->signal_count;
    memcpy(signals, x->signals, sizeof(signals));
    x->signal_count = 0;
    resize = x->resize_pending;
    cols = x->new_cols;
    rows = x->new_rows;
    x->resize_pending = false;
    pthread_mutex_unlock(&x->mu);

    if (ssh_channel_is_closed(x->ch)) {
        return true; /* nobody to tell */
    }
    for (i = 0; i < count; i++) {
        /* no reply is asked for: libssh sends it and returns */
        if (ssh_channel_request_send_signal(x->ch, signals[i]) == SSH_ERROR &&
            !sshcore_session_usable(conn)) {
            fail_call(conn, x, SSHCORE_E_PROTOCOL, "ssh_channel_request_send_signal");
            return false;
        }
    }
    if (resize && x->want_pty &&
        ssh_channel_change_pty_size(x->ch, (int)cols, (int)rows) == SSH_ERROR &&
        !sshcore_session_usable(conn)) {
        fail_call(conn, x, SSHCORE_E_PROTOCOL, "ssh_channel_change_pty_size");
        return false;
    }
    return true;
}

/**
 * Whether the socket is backed up (the network or the server is slower than
 * our writers): the kernel holds more than SSHCORE_SEND_BACKLOG_MAX bytes not
 * sent yet. Not libssh's SSH_WRITE_PENDING: libssh sets it after every packet
 * it sends until the next POLLOUT round, so under a bulk download (a
 * WINDOW_ADJUST per 640 KB) it is nearly always set, and gating on it held an
 * interactive channel's keystrokes back by up to seconds.
 *
 * A writer held back here must be woken when the queue drains even if libssh
 * has nothing left to flush and the server says nothing (it may be waiting for
 * the rest of our data): the connection then waits for POLLOUT, which
 * TCP_NOTSENT_LOWAT (set on the socket at twice this size) raises exactly when
 * the unsent bytes fall below it again. Without that wait an upload to a
 * server that reads slowly and answers only at the end stalled for good.
 */
static bool send_backlogged(sshcore_conn *conn)
{
    int unsent = 0;

    if (conn->sock_fd < 0 || ioctl(conn->sock_fd, SIOCOUTQNSD, &unsent) != 0) {
        return false; /* not TCP (a jump host's socketpair): libssh's own flow applies */
    }
    if (unsent > SSHCORE_SEND_BACKLOG_MAX) {
        conn->send_blocked = true;
        return true;
    }
    return false;
}

/**
 * Writes up to `len` bytes to the channel within the peer's window, the
 * pass's budget and the socket's backlog. Returns how many went (0: none can
 * go now; a WINDOW_ADJUST or the next pass retries), or -1 when the op ended.
 */
static long channel_send(sshcore_conn *conn, session_op *x, const uint8_t *p, size_t len,
                         size_t *budget)
{
    size_t n = len;
    int rc = 0;

    /* without piling up in libssh's output buffer */
    if (*budget == 0 || send_backlogged(conn)) {
        return 0;
    }
    if (n > ssh_channel_window_size(x->ch)) {
        n = ssh_channel_window_size(x->ch);
    }
    if (n > *budget) {
        n = *budget;
    }
    if (n == 0) {
        return 0; /* the window is closed: a WINDOW_ADJUST will wake us */
    }
    rc = ssh_channel_write(x->ch, p, (uint32_t)n);
    if (rc < 0) {
        if (!sshcore_session_usable(conn)) {
            fail_call(conn, x, SSHCORE_E_PROTOCOL, "ssh_channel_write");
            return -1;
        }
        return 0; /* closing: the close path deals with what is left */
    }
    /* rc == 0: a key re-exchange is running; libssh holds channel data until
     * it ends (its packets will wake us), retrying now would spin */
    *budget -= (size_t)rc < *budget ? (size_t)rc : *budget;
    return rc;
}

/** Sends the channel's EOF; false when the op ended. */
static bool send_channel_eof(sshcore_conn *conn, session_op *x)
{
    /* SSH_AGAIN: the EOF is queued, only the flush is pending */
    if (ssh_channel_send_eof(x->ch) == SSH_ERROR) {
        fail_call(conn, x, SSHCORE_E_PROTOCOL, "ssh_channel_send_eof");
        return false;
    }
    x->eof_sent = true;
    return chan_event(x, SSHCORE_CHAN_EV_SEND_EOF) != SSHCORE_CHAN_ACT_REJECT;
}

/** Queued stdin and EOF, in order, within the peer's window. */
static bool write_input(sshcore_conn *conn, session_op *x, bool *again)
{
    size_t budget = WRITE_CHUNK;

    for (;;) {
        wreq *w = NULL;
        long rc = 0;

        pthread_mutex_lock(&x->mu);
        w = x->wq_head;
        if (w != NULL && (w->cancelled || (!w->eof && w->off == w->len))) {
            x->wq_head = w->next;
            if (x->wq_head == NULL) {
                x->wq_tail = NULL;
            }
            pthread_mutex_unlock(&x->mu);
            finish_wreq(w, w->cancelled ? SSHCORE_E_CANCELLED : SSHCORE_E_OK);
            continue;
        }
        pthread_mutex_unlock(&x->mu);
        if (w == NULL) {
            return true;
        }
        if (!can_write(x) || ssh_channel_is_closed(x->ch)) {
            return true; /* the close path fails what is left */
        }
        if (w->eof) {
            if (!send_channel_eof(conn, x)) {
                return false;
            }
            pthread_mutex_lock(&x->mu);
            x->wq_head = w->next;
            if (x->wq_head == NULL) {
                x->wq_tail = NULL;
            }
            pthread_mutex_unlock(&x->mu);
            finish_wreq(w, SSHCORE_E_OK);
            continue;
        }
        rc = channel_send(conn, x, w->data + w->off, w->len - w->off, &budget);
        if (rc < 0) {
            return false;
        }
        if (rc == 0) {
            return true;
        }
        w->off += (size_t)rc;
        *again = true;
    }
}

/**
 * Held output, oldest first, as far as the consumer has room.
 *
 * Every ssh_channel_read() in libssh 0.10 re-opens the channel window to
 * 1.28 MB when it has fallen below half, however much libssh still buffers.
 * Reading held output out in consumer-sized pieces therefore re-opened the
 * window after each piece, and a slow consumer let libssh's buffer grow
 * without bound (measured: 256 MiB, libssh's buffer limit, after which it
 * dropped data). So a held segment is moved out whole, in one read, into the
 * stash, and the next read waits until the stash has been handed over: one
 * window re-opening per segment, and at most about two windows in memory.
 */
static bool read_held(sshcore_conn *conn, session_op *x, bool *again)
{
    while (atomic_load(&x->base.done) == 0) {
        if (x->stash_off < x->stash.len) {
            size_t want = x->stash.len - x->stash_off;
            if (x->streamed) {
                size_t r = 0;
                atomic_store(&x->starved, 1); /* before the look, as in on_data */
                r = room(x);
                if (r == 0) {
                    return true;
                }
                atomic_store(&x->starved, 0);
                if (want > r) {
                    want = r;
                }
            }
            if (!deliver(x, x->stash_stream, x->stash.data + x->stash_off, want)) {
                return false;
            }
            x->stash_off += want;
            if (x->stash_off == x->stash.len) {
                x->stash.len = 0;
                x->stash_off = 0;
            }
            *again = true; /* one piece per turn and channel, for fairness */
            return true;
        }
        if (x->held_count == 0) {
            return true;
        }
        held_seg *seg = &x->held_fifo[x->held_head];
        size_t want = seg->len > UINT32_MAX ? UINT32_MAX : seg->len;
        int n = 0;

        if (sshcore_bytes_reserve(&x->stash, want) != 0) {
            complete_code(x, SSHCORE_E_OUT_OF_MEMORY, NULL);
            return false;
        }
        n = ssh_channel_read_nonblocking(x->ch, x->stash.data, (uint32_t)want, seg->stream);
        if (n == SSH_ERROR) {
            fail_call(conn, x, SSHCORE_E_PROTOCOL, "ssh_channel_read_nonblocking");
            return false;
        }
        if (n <= 0) {
            /* libssh holds less than we counted: forget the difference */
            x->held[seg->stream] = 0;
            x->held_head = (x->held_head + 1) % HELD_MAX;
            x->held_count--;
            continue;
        }
        x->stash.len = (size_t)n;
        x->stash_off = 0;
        x->stash_stream = seg->stream;
        seg->len -= (size_t)n;
        x->held[seg->stream] -= (size_t)n < x->held[seg->stream] ? (size_t)n : x->held[seg->stream];
        if (seg->len == 0) {
            x->held_head = (x->held_head + 1) % HELD_MAX;
            x->held_count--;
        }
    }
    return true;
}

/** Fails the writes still queued (the channel or the op ended). */
static void fail_writes(session_op *x, int code)
{
    wreq *list = NULL;

    pthread_mutex_lock(&x->mu);
    list = x->wq_head;
    x->wq_head = NULL;
    x->wq_tail = NULL;
    pthread_mutex_unlock(&x->mu);
    while (list != NULL) {
        wreq *next = list->next;
        finish_wreq(list, code);
        list = next;
    }
}

/* ---------------------------------------------------------------------- */
/* Bridges: a socket joined to the channel (worker)                        */
/* ---------------------------------------------------------------------- */

static bool bridge_out_pending(const session_op *x)
{
    return x->bridged && !x->fd_dead && x->fdout_off < x->fdout.len;
}

/** Socket to channel, within the window; the socket's EOF becomes the channel's. */
static bool bridge_in(sshcore_conn *conn, session_op *x, bool *again)
{
    size_t budget = WRITE_CHUNK;

    while (!x->fd_dead) {
        ssize_t n = 0;
        size_t want = 0;

        if (!can_write(x) || ssh_channel_is_closed(x->ch)) {
            return true;
        }
        if (x->fdin_off < x->fdin.len) {
            long rc = channel_send(conn, x, x->fdin.data + x->fdin_off, x->fdin.len - x->fdin_off, &budget);
            if (rc < 0) {
                return false;
            }
            if (rc == 0) {
                return true;
            }
            x->fdin_off += (size_t)rc;
            atomic_fetch_add(&x->from_fd, (uint64_t)rc);
            if (x->fdin_off == x->fdin.len) {
                x->fdin.len = 0;
                x->fdin_off = 0;
            }
            *again = true;
            continue;
        }
        if (x->fd_read_eof) {
            /* everything read went out: the client's EOF follows it */
            return x->eof_sent || send_channel_eof(conn, x);
        }
        if (!x->fd_readable || send_backlogged(conn)) {
            return true;
        }
        want = ssh_channel_window_size(x->ch);
        want = want < budget ? want : budget;
        want = want < BRIDGE_READ ? want : BRIDGE_READ;
        if (want == 0) {
            return true;
        }
        if (sshcore_bytes_reserve(&x->fdin, want) != 0) {
            complete_code(x, SSHCORE_E_OUT_OF_MEMORY, NULL);
            return false;
        }
        n = recv(x->fd, x->fdin.data, want, 0);
        if (n > 0) {
            x->fdin.len = (size_t)n;
            x->fdin_off = 0;
            continue;
        }
        if (n == 0) {
            x->fd_read_eof = true;
            continue;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            x->fd_readable = false; /* poll() tells us when there is more */
            return true;
        }
        x->fd_read_eof = true; /* reset: the client is gone */
        x->fd_dead = true;
    }
    return true;
}

/** Channel to socket; after the channel's EOF, the socket's write side closes. */
static void bridge_out(session_op *x, bool *again)
{
    while (x->fdout_off < x->fdout.len && !x->fd_dead && x->fd_writable) {
        ssize_t n = send(x->fd, x->fdout.data + x->fdout_off, x->fdout.len - x->fdout_off, MSG_NOSIGNAL);
        if (n > 0) {
            size_t before = atomic_load(&x->unconsumed);
            x->fdout_off += (size_t)n;
            atomic_fetch_add(&x->to_fd, (uint64_t)n);
            while (!atomic_compare_exchange_weak(&x->unconsumed, &before,
                                                 before >= (size_t)n ? before - (size_t)n : 0)) {
            }
            if (output_pending(x)) {
                *again = true; /* room for held output */
            }
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            x->fd_writable = false;
            return;
        }
        x->fd_dead = true; /* EPIPE, ECONNRESET: nobody reads any more */
    }
    if (x->fdout_off == x->fdout.len) {
        x->fdout.len = 0;
        x->fdout_off = 0;
        if (x->eof_seen && !x->fd_write_shut && !x->fd_dead) {
            x->fd_write_shut = true;
            (void)shutdown(x->fd, SHUT_WR);
        }
    } else if (x->fdout_off > x->fdout.cap / 2) {
        /* keep appends from growing the buffer past what is unsent */
        memmove(x->fdout.data, x->fdout.data + x->fdout_off, x->fdout.len - x->fdout_off);
        x->fdout.len -= x->fdout_off;
        x->fdout_off = 0;
    }
}

static int bridge_poll_fd(sshcore_conn *conn, sshcore_op *op, short *events)
{
    session_op *x = (session_op *)op;
    short ev = 0;
    (void)conn;

    if (x->fd < 0 || x->fd_dead || x->phase != X_IO || x->ch == NULL) {
        return -1;
    }
    if (!x->fd_readable && !x->fd_read_eof && x->fdin_off == x->fdin.len && can_write(x) &&
        ssh_channel_window_size(x->ch) > 0) {
        ev |= POLLIN;
    }
    if (!x->fd_writable && x->fdout_off < x->fdout.len) {
        ev |= POLLOUT;
    }
    *events = ev;
    return ev != 0 ? x->fd : -1;
}

static void bridge_poll_event(sshcore_op *op, short revents)
{
    session_op *x = (session_op *)op;

    if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        x->fd_readable = true;
    }
    if ((revents & (POLLOUT | POLLHUP | POLLERR)) != 0) {
        x->fd_writable = true;
    }
}

/** Tells a streamed channel's caller that no more output comes (once, after
 *  every byte before it). */
static void report_eof(session_op *x)
{
    if (x->streamed && !x->bridged && x->cb.eof != NULL && atomic_load(&x->base.done) == 0) {
        flush_batch(x);
        x->cb.eof(x->cb.ctx);
    }
}

static bool session_io_pass(sshcore_conn *conn, session_op *x);

/** One I/O pass; what arrived during it is handed over at its end. */
static bool session_io(sshcore_conn *conn, session_op *x)
{
    bool again;

    flush_batch(x); /* output that arrived while other channels were stepped */
    again = session_io_pass(conn, x);
    flush_batch(x);
    return again;
}

static bool session_io_pass(sshcore_conn *conn, session_op *x)
{
    ssh_session s = conn->session;
    bool again = false;

    if (!send_controls(conn, x)) {
        return false;
    }
    if (!write_input(conn, x, &again)) {
        return false;
    }
    if (x->bridged) {
        bridge_out(x, &again); /* first: frees room for held output */
        if (!bridge_in(conn, x, &again)) {
            return false;
        }
    }
    if (output_pending(x) && !read_held(conn, x, &again)) {
        return false;
    }
    if (atomic_load(&x->base.done) != 0) {
        return false;
    }
    /* Processing may have flushed libssh's pending output without a packet
     * to announce it: if stdin waits only for that, take another turn. */
    if (can_write(x) && !send_backlogged(conn) && ssh_channel_window_size(x->ch) > 0) {
        pthread_mutex_lock(&x->mu); /* the inbox: callers append under mu (TSan) */
        again = again || x->wq_head != NULL;
        pthread_mutex_unlock(&x->mu);
    }

    if (!x->eof_seen && !output_pending(x) && ssh_channel_is_eof(x->ch)) {
        x->eof_seen = true;
        if ((x->cstate == SSHCORE_CHAN_OPEN || x->cstate == SSHCORE_CHAN_EOF_SENT) &&
            chan_event(x, SSHCORE_CHAN_EV_RECV_EOF) == SSHCORE_CHAN_ACT_REJECT) {
            return false;
        }
        report_eof(x);
    }
    if (x->bridged) {
        bridge_out(x, &again); /* what read_held delivered; the EOF's shutdown */
        if (x->fd_dead) {
            /* the client went away: nothing more to carry either way */
            complete_code(x, SSHCORE_E_OK, NULL);
            return false;
        }
    }

    if (ssh_channel_is_closed(x->ch)) {
        if (!sshcore_session_usable(conn)) {
            sshcore_error err;
            sshcore_error_from_session(&err, sshcore_conn_failure_code(conn), s,
                                       "ssh_channel_is_closed");
            (void)sshcore_op_complete(&x->base, &err);
            return false;
        }
        if (output_pending(x) || bridge_out_pending(x)) {
            return again; /* closed with output still held: deliver it first */
        }
        /* The command exited without reading all of its stdin: what is left
         * has nowhere to go. Not an error for collected exec (stdin given up
         * front); a streamed writer learns that the channel is closed. */
        fail_writes(x, x->streamed ? SSHCORE_E_CHANNEL_CLOSED : SSHCORE_E_OK);
        if (!x->eof_seen) {
            x->eof_seen = true;
            if ((x->cstate == SSHCORE_CHAN_OPEN || x->cstate == SSHCORE_CHAN_EOF_SENT) &&
                chan_event(x, SSHCORE_CHAN_EV_RECV_EOF) == SSHCORE_CHAN_ACT_REJECT) {
                return false;
            }
            report_eof(x);
        }
        if (chan_event(x, SSHCORE_CHAN_EV_RECV_CLOSE) == SSHCORE_CHAN_ACT_FINISH) {
            flush_batch(x); /* every byte before the end */
            complete_code(x, SSHCORE_E_OK, NULL);
        }
        return false;
    }
    return again;
}

static void set_channel_callbacks(session_op *x)
{
    memset(&x->cbs, 0, sizeof(x->cbs));
    x->cbs.userdata = x;
    x->cbs.channel_data_function = on_data;
    x->cbs.channel_exit_status_function = on_exit_status;
    x->cbs.channel_exit_signal_function = on_exit_signal;
    ssh_callbacks_init(&x->cbs);
    ssh_set_channel_callbacks(x->ch, &x->cbs);
}

/** Reports the open channel to the caller (once). */
static void report_open(session_op *x, int env_fallback_used)
{
    if (x->started_reported) {
        return;
    }
    x->started_reported = true;
    if (x->bridged) {
        x->bcb.opened(x->bcb.ctx, x->fd); /* may answer on the socket first */
    } else if (x->streamed) {
        x->cb.started(x->cb.ctx, env_fallback_used);
    }
}

/**
 * Takes over a forwarded-tcpip channel a remote forward op holds open. What
 * arrived before our callbacks were set waits in libssh's buffer: it is
 * counted as held, so read_held() delivers it first.
 */
static bool adopt_channel(sshcore_conn *conn, session_op *x)
{
    size_t held_before = 0;
    int n = 0;
    (void)conn;

    if (x->preset_ch != NULL) {
        x->ch = x->preset_ch;
        x->preset_ch = NULL;
    } else {
        x->ch = sshcore_rforward_take(x->adopt_parent, x->adopt_id);
    }
    if (x->ch == NULL) {
        (void)chan_event(x, SSHCORE_CHAN_EV_OPEN_FAILED);
        complete_code(x, SSHCORE_E_CHANNEL_CLOSED,
                      "the forwarded connection is gone (rejected, timed out, or its forward ended)");
        return false;
    }
    set_channel_callbacks(x);
    held_before = x->held[0];
    /* with an empty buffer this processes packets, and on_data counts them */
    n = ssh_channel_poll(x->ch, 0);
    if (n > 0 && x->held[0] == held_before) {
        hold(x, 0, (size_t)n);
    }
    if (chan_event(x, SSHCORE_CHAN_EV_OPEN_OK) != SSHCORE_CHAN_ACT_START_IO) {
        return false;
    }
    x->phase = X_IO;
    report_open(x, 0);
    return true;
}

static bool session_step(sshcore_conn *conn, sshcore_op *op)
{
    session_op *x = (session_op *)op;
    ssh_session s = conn->session;
    int rc;

    switch (x->phase) {
    case X_OPEN:
        if (x->adopt_parent != NULL || x->preset_ch != NULL) {
            return adopt_channel(conn, x);
        }
        if (x->ch == NULL) {
            x->ch = ssh_channel_new(s);
            if (x->ch == NULL) {
                fail_call(conn, x, SSHCORE_E_OUT_OF_MEMORY, "ssh_channel_new");
                return false;
            }
            set_channel_callbacks(x);
        }
        switch (x->kind) {
        case SSHCORE_CHANNEL_SESSION:
            rc = ssh_channel_open_session(x->ch);
            break;
        case SSHCORE_CHANNEL_DIRECT_TCPIP:
            rc = ssh_channel_open_forward(x->ch, x->target, x->target_port,
                                          x->originator, x->originator_port);
            break;
        case SSHCORE_CHANNEL_DIRECT_STREAMLOCAL:
            rc = ssh_channel_open_forward_unix(x->ch, x->target,
                                               x->originator, x->originator_port);
            break;
        }
        if (rc == SSH_AGAIN) {
            return false;
        }
        if (rc != SSH_OK) {
            (void)chan_event(x, SSHCORE_CHAN_EV_OPEN_FAILED);
            fail_call(conn, x, SSHCORE_E_CHANNEL_OPEN_REFUSED,
                      x->kind == SSHCORE_CHANNEL_SESSION      ? "ssh_channel_open_session"
                      : x->kind == SSHCORE_CHANNEL_DIRECT_TCPIP ? "ssh_channel_open_forward"
                                                                : "ssh_channel_open_forward_unix");
            return false;
        }
        if (chan_event(x, SSHCORE_CHAN_EV_OPEN_OK) != SSHCORE_CHAN_ACT_START_IO) {
            return false;
        }
        if (x->kind != SSHCORE_CHANNEL_SESSION) {
            /* a direct channel carries bytes from the moment it is open */
            x->phase = X_IO;
            report_open(x, 0);
            return true;
        }
        x->phase = X_AGENT;
        return true;
    case X_AGENT:
        /* like ssh -A: the server's sessions may use our agent (a request without
         * a reply; a server that does not allow it simply opens no agent channel) */
        if (conn->agent_socket != NULL && !x->subsystem &&
            ssh_channel_request_auth_agent(x->ch) == SSH_AGAIN) {
            return false;
        }
        x->phase = X_ENV;
        return true;
    case X_ENV:
        if (x->env_idx >= x->env_count || x->use_fallback) {
            x->phase = X_PTY;
            return true;
        }
        rc = ssh_channel_request_env(x->ch, x->env_names[x->env_idx], x->env_values[x->env_idx]);
        if (rc == SSH_AGAIN) {
            return false;
        }
        if (rc != SSH_OK) {
            if (sshcore_session_usable(conn) && x->fallback == NULL && x->env_optional) {
                x->env_idx++; /* refused by AcceptEnv: left unset, as ssh does */
                return true;
            }
            if (!sshcore_session_usable(conn) || x->fallback == NULL) {
                fail_call(conn, x, SSHCORE_E_CHANNEL_REQUEST_FAILED, "ssh_channel_request_env");
                return false;
            }
            x->use_fallback = true; /* the server's AcceptEnv refused it */
            return true;
        }
        x->env_idx++;
        return true;
    case X_PTY:
        if (!x->want_pty) {
            x->phase = X_START;
            return true;
        }
        rc = ssh_channel_request_pty_size(x->ch, x->term, (int)x->cols, (int)x->rows);
        if (rc == SSH_AGAIN) {
            return false;
        }
        if (rc != SSH_OK) {
            fail_call(conn, x, SSHCORE_E_CHANNEL_REQUEST_FAILED, "ssh_channel_request_pty_size");
            return false;
        }
        x->phase = X_START;
        return true;
    case X_START:
        if (x->command == NULL) {
            rc = ssh_channel_request_shell(x->ch);
        } else if (x->subsystem) {
            rc = ssh_channel_request_subsystem(x->ch, x->command);
        } else {
            rc = ssh_channel_request_exec(x->ch, x->use_fallback ? x->fallback : x->command);
        }
        if (rc == SSH_AGAIN) {
            x->start_sent = true;
            return false;
        }
        if (rc != SSH_OK) {
            fail_call(conn, x, SSHCORE_E_CHANNEL_REQUEST_FAILED,
                      x->command == NULL ? "ssh_channel_request_shell"
                      : x->subsystem     ? "ssh_channel_request_subsystem"
                                         : "ssh_channel_request_exec");
            return false;
        }
        x->phase = X_IO;
        report_open(x, x->use_fallback ? 1 : 0);
        return true;
    case X_IO:
        return session_io(conn, x);
    }
    return false;
}

static void release_callbacks(session_op *x);
static void close_channel(sshcore_conn *conn, session_op *x);

static void session_abort(sshcore_conn *conn, sshcore_op *op)
{
    session_op *x = (session_op *)op;
    int code = op->err.code != SSHCORE_E_OK ? op->err.code : SSHCORE_E_CHANNEL_CLOSED;

    pthread_mutex_lock(&x->mu);
    x->inbox_closed = true;
    pthread_mutex_unlock(&x->mu);
    fail_writes(x, code);
    if (x->preset_ch != NULL) {
        /* an agent channel never taken: close it with the op */
        if (conn->session != NULL) {
            (void)ssh_channel_close(x->preset_ch);
            ssh_channel_free(x->preset_ch);
        }
        x->preset_ch = NULL;
    }
    if (x->ch == NULL && x->adopt_parent != NULL && conn->session != NULL) {
        /* ended before taking its forwarded connection: close it now, not at
         * the forward's accept timeout */
        ssh_channel ch = sshcore_rforward_take(x->adopt_parent, x->adopt_id);
        if (ch != NULL) {
            (void)ssh_channel_close(ch);
            ssh_channel_free(ch);
        }
    }
    if (x->ch != NULL) {
        close_channel(conn, x);
    }
    if (x->bridged && x->fd >= 0) {
        if (!x->started_reported) {
            x->started_reported = true;
            x->bcb.failed(x->bcb.ctx, x->fd, &op->err);
        } else if (op->err.code != SSHCORE_E_OK && !x->fd_write_shut) {
            /* the stream was cut before the peer's EOF reached the socket
             * (connection lost, cancelled, closed): a reset, never a FIN that
             * the socket's client would take for a complete stream */
            struct linger lin = {.l_onoff = 1, .l_linger = 0};
            (void)setsockopt(x->fd, SOL_SOCKET, SO_LINGER, &lin, sizeof lin);
        }
        close(x->fd);
        x->fd = -1;
    }
    release_callbacks(x);
}

/** Tells the caller that no callback will come any more (once). */
static void release_callbacks(session_op *x)
{
    if (x->bridged) {
        if (!x->released) {
            x->released = true;
            x->bcb.released(x->bcb.ctx);
        }
        return;
    }
    if (x->streamed && !x->released && x->cb.released != NULL) {
        x->released = true;
        x->cb.released(x->cb.ctx);
    }
}

static void close_channel(sshcore_conn *conn, session_op *x)
{
    sshcore_op *op = &x->base;

    /* libssh keeps a channel the peer has not closed yet until its CLOSE
     * arrives and would still call our callbacks, whose struct lives in this
     * op: unregister them before letting go */
    ssh_remove_channel_callbacks(x->ch, &x->cbs);
    if (sshcore_session_usable(conn)) {
        if (x->phase == X_OPEN) {
            /* Still opening: freed now, libssh would forget the channel and
             * the server's later confirmation would leave it open on the
             * server for good (counting against MaxSessions). */
            sshcore_conn_adopt_opening_channel(conn, x->ch);
            x->ch = NULL;
            (void)sshcore_chan_fsm_apply(&x->cstate, SSHCORE_CHAN_EV_CLOSE);
            return;
        }
        if (x->phase == X_START && x->start_sent && !ssh_channel_is_closed(x->ch)) {
            /* The exec or shell request is on its way and libssh sends no
             * other request on the channel before its reply (a signal now
             * would be swallowed): the worker waits for that reply, stops
             * what it started, then closes. A subsystem gets no signal. */
            sshcore_conn_adopt_starting_channel(conn, x->ch, x->use_fallback ? x->fallback : x->command,
                                                x->command != NULL && !x->subsystem,
                                                x->kind == SSHCORE_CHANNEL_SESSION && !x->subsystem);
            x->ch = NULL;
            (void)sshcore_chan_fsm_apply(&x->cstate, SSHCORE_CHAN_EV_CLOSE);
            return;
        }
        if (!ssh_channel_is_closed(x->ch) && x->phase == X_IO && x->kind == SSHCORE_CHANNEL_SESSION &&
            !x->subsystem &&
            (atomic_load(&op->cancel_requested) != 0 || op->err.code == SSHCORE_E_TIMED_OUT ||
             op->err.code == SSHCORE_E_CANCELLED)) {
            /* a cancelled command should not keep running on the server:
             * the worker sends TERM until the server reports its end, then
             * closes; with a PTY, the close also hangs the terminal up.
             * Never a subsystem (SFTP): it has no process of the caller's to
             * stop, EOF and CLOSE end it; OpenSSH refuses such a signal and
             * logs it, asyncssh drops the whole connection. */
            sshcore_conn_adopt_stopping_channel(conn, x->ch);
            x->ch = NULL;
            (void)sshcore_chan_fsm_apply(&x->cstate, SSHCORE_CHAN_EV_CLOSE);
            return;
        }
        /* ssh_channel_close gives up when its EOF's flush returns SSH_AGAIN;
         * with the EOF already queued it goes on to send CLOSE */
        (void)ssh_channel_send_eof(x->ch);
    }
    /* sends CLOSE (once) unless the session is gone */
    ssh_channel_free(x->ch);
    x->ch = NULL;
    (void)sshcore_chan_fsm_apply(&x->cstate, SSHCORE_CHAN_EV_CLOSE);
}

static void session_destroy(sshcore_op *op)
{
    session_op *x = (session_op *)op;
    size_t i;

    fail_writes(x, SSHCORE_E_CLOSED); /* never started: nothing was queued */
    release_callbacks(x);
    if (x->fd >= 0) {
        close(x->fd); /* never reached a worker */
    }
    sshcore_bytes_free(&x->fdin);
    sshcore_bytes_free(&x->fdout);
    if (x->adopt_parent != NULL) {
        sshcore_op_release(x->adopt_parent);
    }
    free(x->command);
    free(x->fallback);
    free(x->target);
    free(x->originator);
    for (i = 0; i < x->env_count; i++) {
        free(x->env_names != NULL ? x->env_names[i] : NULL);
        free(x->env_values != NULL ? x->env_values[i] : NULL);
    }
    free(x->env_names);
    free(x->env_values);
    sshcore_bytes_free(&x->out[0]);
    sshcore_bytes_free(&x->out[1]);
    sshcore_bytes_free(&x->batch);
    sshcore_bytes_free(&x->stash);
    pthread_mutex_destroy(&x->mu);
    free(x);
}

static const sshcore_op_vtable session_vtable = {
    .step = session_step,
    .abort = session_abort,
    .destroy = session_destroy,
};

static const sshcore_op_vtable bridge_vtable = {
    .step = session_step,
    .abort = session_abort,
    .destroy = session_destroy,
    .poll_fd = bridge_poll_fd,
    .poll_event = bridge_poll_event,
};

/* ---------------------------------------------------------------------- */
/* Creation                                                                */
/* ---------------------------------------------------------------------- */

static session_op *_Nullable session_new(const char *_Nullable command,
                                         const char *_Nullable fallback,
                                         const sshcore_env_var *_Nullable env,
                                         size_t env_count)
{
    session_op *x = calloc(1, sizeof(*x));
    bool ok = true;
    size_t i;

    if (x == NULL) {
        return NULL;
    }
    pthread_mutex_init(&x->mu, NULL);
    x->fd = -1;
    atomic_init(&x->unconsumed, 0);
    atomic_init(&x->starved, 0);
    x->next_id = 1;
    x->cstate = SSHCORE_CHAN_OPENING;
    x->phase = X_OPEN;
    if (command != NULL) {
        x->command = strdup(command);
        ok = x->command != NULL;
    }
    if (fallback != NULL) {
        x->fallback = strdup(fallback);
        ok = ok && x->fallback != NULL;
    }
    if (ok && env_count > 0) {
        x->env_names = calloc(env_count, sizeof(char *));
        x->env_values = calloc(env_count, sizeof(char *));
        ok = x->env_names != NULL && x->env_values != NULL;
        if (ok) {
            x->env_count = env_count;
            for (i = 0; ok && i < env_count; i++) {
                x->env_names[i] = strdup(env[i].name);
                x->env_values[i] = strdup(env[i].value);
                ok = x->env_names[i] != NULL && x->env_values[i] != NULL;
            }
        }
    }
    if (!ok) {
        session_destroy(&x->base);
        return NULL;
    }
    return x;
}

/** Appends a request to the inbox (caller holds mu). */
static void enqueue(session_op *x, wreq *w)
{
    w->id = x->next_id++;
    if (x->wq_tail != NULL) {
        x->wq_tail->next = w;
    } else {
        x->wq_head = w;
    }
    x->wq_tail = w;
}

static sshcore_op *_Nullable session_submit(sshcore_conn *conn, session_op *x,
                                            sshcore_op_done_fn done, void *_Nullable ctx,
                                            int timeout_ms, sshcore_error *err)
{
    sshcore_op_init(&x->base, x->bridged ? &bridge_vtable : &session_vtable, conn, done, ctx);
    if (timeout_ms > 0) {
        x->base.deadline_ms = sshcore_now_ms() + timeout_ms;
    }
    if (sshcore_conn_submit(conn, &x->base, err) != 0) {
        sshcore_conn *c = x->base.conn;
        x->released = true; /* the caller learns it from NULL: no callback */
        session_destroy(&x->base);
        sshcore_conn_unref(c);
        return NULL;
    }
    return &x->base;
}

sshcore_op *sshcore_exec_start(sshcore_conn *conn, const sshcore_exec_spec *spec,
                               sshcore_op_done_fn done, void *ctx, sshcore_error *err)
{
    session_op *x = NULL;
    wreq *input = NULL;
    wreq *eof = NULL;

    if (spec->command == NULL || (spec->stdin_len > 0 && spec->stdin_data == NULL) ||
        (spec->env_count > 0 && spec->env == NULL)) {
        sshcore_error_set(err, SSHCORE_E_INVALID_ARGUMENT, "incomplete exec spec");
        return NULL;
    }
    x = session_new(spec->command, spec->fallback_command, spec->env, spec->env_count);
    eof = calloc(1, sizeof(*eof));
    if (spec->stdin_len > 0) {
        input = calloc(1, sizeof(*input));
        if (input != NULL) {
            input->data = malloc(spec->stdin_len);
        }
    }
    if (x == NULL || eof == NULL || (spec->stdin_len > 0 && (input == NULL || input->data == NULL))) {
        if (input != NULL) {
            free(input->data);
        }
        free(input);
        free(eof);
        if (x != NULL) {
            session_destroy(&x->base);
        }
        sshcore_error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return NULL;
    }
    x->limit = spec->output_limit;
    /* stdin goes up front, then EOF: the queue the streamed form fills later */
    if (input != NULL) {
        memcpy(input->data, spec->stdin_data, spec->stdin_len);
        input->len = spec->stdin_len;
        enqueue(x, input);
    }
    eof->eof = true;
    enqueue(x, eof);
    x->eof_queued = true;
    return session_submit(conn, x, done, ctx, 0, err);
}

/** A direct-tcpip or direct-streamlocal channel's op, not yet submitted. */
static session_op *_Nullable direct_new(const sshcore_stream_spec *spec, sshcore_error *err)
{
    session_op *x = NULL;
    bool tcp = spec->kind == SSHCORE_CHANNEL_DIRECT_TCPIP;

    if ((spec->kind != SSHCORE_CHANNEL_DIRECT_TCPIP && spec->kind != SSHCORE_CHANNEL_DIRECT_STREAMLOCAL) ||
        spec->target_host == NULL || spec->target_host[0] == '\0' ||
        (tcp && (spec->target_port < 1 || spec->target_port > 65535)) ||
        spec->originator_port < 0 || spec->originator_port > 65535 ||
        spec->buffer_limit == 0 || spec->timeout_ms < 0) {
        sshcore_error_set(err, SSHCORE_E_INVALID_ARGUMENT, "incomplete direct channel spec");
        return NULL;
    }
    x = session_new("", NULL, NULL, 0);
    if (x == NULL) {
        sshcore_error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return NULL;
    }
    x->kind = spec->kind;
    x->target = strdup(spec->target_host);
    x->target_port = spec->target_port;
    x->originator = strdup(spec->originator_host != NULL ? spec->originator_host : "127.0.0.1");
    x->originator_port = spec->originator_port;
    if (x->target == NULL || x->originator == NULL) {
        session_destroy(&x->base); /* frees x */
        sshcore_error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return NULL;
    }
    x->streamed = true;
    x->limit = spec->buffer_limit;
    return x;
}

/** A direct channel as a byte stream for the caller: no requests. */
static sshcore_op *direct_start(sshcore_conn *conn, const sshcore_stream_spec *spec,
                                const sshcore_stream_callbacks *callbacks,
                                sshcore_op_done_fn done, void *ctx, sshcore_error *err)
{
    session_op *x = NULL;

    if (callbacks->data == NULL || callbacks->started == NULL || callbacks->released == NULL) {
        sshcore_error_set(err, SSHCORE_E_INVALID_ARGUMENT, "incomplete direct channel callbacks");
        return NULL;
    }
    x = direct_new(spec, err);
    if (x == NULL) {
        return NULL;
    }
    x->cb = *callbacks;
    return session_submit(conn, x, done, ctx, spec->timeout_ms, err);
}

sshcore_op *sshcore_bridge_start(sshcore_conn *conn, const sshcore_stream_spec *spec, int fd,
                                 const uint8_t *first_data, size_t first_len,
                                 const sshcore_bridge_callbacks *callbacks,
                                 sshcore_op_done_fn done, void *ctx, sshcore_error *err)
{
    session_op *x = NULL;
    int flags = fd >= 0 ? fcntl(fd, F_GETFL) : -1;

    if (fd < 0 || flags < 0 || callbacks->opened == NULL || callbacks->failed == NULL ||
        callbacks->released == NULL || (first_len > 0 && first_data == NULL)) {
        if (fd >= 0) {
            close(fd);
        }
        sshcore_error_set(err, SSHCORE_E_INVALID_ARGUMENT,
                          fd < 0 || flags < 0 ? "bad socket for a bridge" : "incomplete bridge callbacks");
        return NULL;
    }
    x = direct_new(spec, err);
    if (x == NULL) {
        close(fd);
        return NULL;
    }
    if (first_len > 0 && sshcore_bytes_append(&x->fdin, first_data, first_len) != 0) {
        session_destroy(&x->base); /* frees x */
        close(fd);
        sshcore_error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return NULL;
    }
    (void)fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    x->bridged = true;
    x->fd = fd;
    x->fd_readable = true; /* try once; EAGAIN hands over to poll() */
    x->fd_writable = true;
    x->bcb = *callbacks;
    return session_submit(conn, x, done, ctx, spec->timeout_ms, err);
}

void sshcore_bridge_get_counts(sshcore_op *op, uint64_t *to_socket, uint64_t *from_socket)
{
    session_op *x = (session_op *)op;

    *to_socket = atomic_load(&x->to_fd);
    *from_socket = atomic_load(&x->from_fd);
}

/** An op for a waiting forwarded-tcpip connection of `forward`. */
static session_op *_Nullable adopted_new(sshcore_op *forward, uint64_t id, size_t buffer_limit,
                                         sshcore_error *err)
{
    session_op *x = NULL;

    if (buffer_limit == 0) {
        sshcore_error_set(err, SSHCORE_E_INVALID_ARGUMENT, "buffer limit must be positive");
        return NULL;
    }
    x = session_new("", NULL, NULL, 0);
    if (x == NULL) {
        sshcore_error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return NULL;
    }
    x->kind = SSHCORE_CHANNEL_DIRECT_TCPIP; /* a byte stream: no requests, no exit status */
    x->streamed = true;
    x->limit = buffer_limit;
    sshcore_op_retain(forward);
    x->adopt_parent = forward;
    x->adopt_id = id;
    return x;
}

sshcore_op *sshcore_rforward_bridge(sshcore_op *forward, uint64_t id, int fd, size_t buffer_limit,
                                    const sshcore_bridge_callbacks *callbacks,
                                    sshcore_op_done_fn done, void *ctx, sshcore_error *err)
{
    session_op *x = NULL;
    int flags = fd >= 0 ? fcntl(fd, F_GETFL) : -1;

    if (fd < 0 || flags < 0 || callbacks->opened == NULL || callbacks->failed == NULL ||
        callbacks->released == NULL) {
        if (fd >= 0) {
            close(fd);
        }
        sshcore_error_set(err, SSHCORE_E_INVALID_ARGUMENT, "bad socket or callbacks for a bridge");
        return NULL;
    }
    x = adopted_new(forward, id, buffer_limit, err);
    if (x == NULL) {
        close(fd);
        return NULL;
    }
    (void)fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    x->bridged = true;
    x->fd = fd;
    x->fd_readable = true;
    x->fd_writable = true;
    x->bcb = *callbacks;
    return session_submit(forward->conn, x, done, ctx, 0, err);
}

static void agent_bridge_opened(void *_Nullable ctx, int fd)
{
    (void)ctx;
    (void)fd;
}

static void agent_bridge_failed(void *_Nullable ctx, int fd, const sshcore_error *err)
{
    (void)ctx;
    (void)fd;
    (void)err;
}

static void agent_bridge_released(void *_Nullable ctx)
{
    (void)ctx;
}

static void agent_bridge_done(void *_Nullable ctx, sshcore_op *op)
{
    (void)ctx;
    (void)op;
}

ssh_channel sshcore_agent_channel_open(sshcore_conn *conn, ssh_session session)
{
    static const sshcore_bridge_callbacks callbacks = {
        .ctx = NULL,
        .opened = agent_bridge_opened,
        .failed = agent_bridge_failed,
        .released = agent_bridge_released,
    };
    struct sockaddr_un addr;
    session_op *x = NULL;
    ssh_channel ch = NULL;
    sshcore_op *op = NULL;
    sshcore_error err;
    int fd = -1;

    if (conn->agent_socket == NULL || strlen(conn->agent_socket) >= sizeof(addr.sun_path)) {
        return NULL;
    }
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, conn->agent_socket, strlen(conn->agent_socket));
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
        /* a local agent answers at once or not at all */
        if (fd >= 0) {
            close(fd);
        }
        return NULL;
    }
    ch = ssh_channel_new(session);
    x = session_new("", NULL, NULL, 0);
    if (ch == NULL || x == NULL) {
        if (ch != NULL) {
            ssh_channel_free(ch);
        }
        if (x != NULL) {
            session_destroy(&x->base);
        }
        close(fd);
        return NULL;
    }
    x->kind = SSHCORE_CHANNEL_DIRECT_TCPIP; /* a byte stream: no requests, no exit status */
    x->streamed = true;
    x->limit = 256 << 10;
    x->preset_ch = ch;
    x->bridged = true;
    x->fd = fd;
    x->fd_readable = true;
    x->fd_writable = true;
    x->bcb = callbacks;
    op = session_submit(conn, x, agent_bridge_done, NULL, 0, &err);
    if (op == NULL) {
        /* session_submit freed x and closed fd; the channel is still ours */
        ssh_channel_free(ch);
        return NULL;
    }
    sshcore_op_release(op); /* the worker's reference keeps it until it ends */
    return ch;
}

sshcore_op *sshcore_rforward_stream(sshcore_op *forward, uint64_t id, size_t buffer_limit,
                                    const sshcore_stream_callbacks *callbacks,
                                    sshcore_op_done_fn done, void *ctx, sshcore_error *err)
{
    session_op *x = NULL;

    if (callbacks->data == NULL || callbacks->started == NULL || callbacks->released == NULL) {
        sshcore_error_set(err, SSHCORE_E_INVALID_ARGUMENT, "incomplete stream callbacks");
        return NULL;
    }
    x = adopted_new(forward, id, buffer_limit, err);
    if (x == NULL) {
        return NULL;
    }
    x->cb = *callbacks;
    return session_submit(forward->conn, x, done, ctx, 0, err);
}

sshcore_op *sshcore_stream_start(sshcore_conn *conn, const sshcore_stream_spec *spec,
                                 const sshcore_stream_callbacks *callbacks,
                                 sshcore_op_done_fn done, void *ctx, sshcore_error *err)
{
    session_op *x = NULL;

    if (spec->kind != SSHCORE_CHANNEL_SESSION) {
        return direct_start(conn, spec, callbacks, done, ctx, err);
    }
    if ((spec->env_count > 0 && spec->env == NULL) || spec->buffer_limit == 0 ||
        spec->timeout_ms < 0 || callbacks->data == NULL || callbacks->started == NULL ||
        callbacks->released == NULL ||
        (spec->pty != NULL && (spec->pty->term == NULL || spec->pty->cols == 0 ||
                               spec->pty->rows == 0 || strlen(spec->pty->term) >= 64))) {
        sshcore_error_set(err, SSHCORE_E_INVALID_ARGUMENT, "incomplete stream spec");
        return NULL;
    }
    x = session_new(spec->command, spec->fallback_command, spec->env, spec->env_count);
    if (x == NULL) {
        sshcore_error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return NULL;
    }
    x->streamed = true;
    x->env_optional = spec->env_optional != 0;
    x->subsystem = spec->subsystem != 0 && spec->command != NULL;
    x->cb = *callbacks;
    x->limit = spec->buffer_limit;
    if (spec->pty != NULL) {
        x->want_pty = true;
        snprintf(x->term, sizeof(x->term), "%s", spec->pty->term);
        x->cols = spec->pty->cols;
        x->rows = spec->pty->rows;
    }
    return session_submit(conn, x, done, ctx, spec->timeout_ms, err);
}

/* ---------------------------------------------------------------------- */
/* Requests from any thread                                                */
/* ---------------------------------------------------------------------- */

/** Whether the inbox still takes requests (caller holds mu). */
static bool inbox_open(session_op *x, sshcore_error *err)
{
    if (x->inbox_closed || atomic_load(&x->base.done) != 0) {
        int code = x->base.err.code;
        if (atomic_load(&x->base.done) == 0 || code == SSHCORE_E_OK) {
            code = SSHCORE_E_CHANNEL_CLOSED;
        }
        sshcore_error_set(err, code, NULL);
        return false;
    }
    return true;
}

int sshcore_stream_write(sshcore_op *op, const uint8_t *data, size_t len,
                         sshcore_write_done_fn done, void *ctx, uint64_t *id,
                         sshcore_error *err)
{
    session_op *x = (session_op *)op;
    wreq *w = calloc(1, sizeof(*w));

    if (w == NULL || (len > 0 && (w->data = malloc(len)) == NULL)) {
        free(w);
        sshcore_error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return -1;
    }
    if (len > 0) {
        memcpy(w->data, data, len);
    }
    w->len = len;
    w->done = done;
    w->ctx = ctx;
    pthread_mutex_lock(&x->mu);
    if (!inbox_open(x, err) || x->eof_queued) {
        if (x->eof_queued && atomic_load(&op->done) == 0 && !x->inbox_closed) {
            sshcore_error_set(err, SSHCORE_E_INVALID_STATE, "stdin was already finished (EOF)");
        }
        pthread_mutex_unlock(&x->mu);
        free(w->data);
        free(w);
        return -1;
    }
    enqueue(x, w);
    *id = w->id;
    pthread_mutex_unlock(&x->mu);
    sshcore_conn_wake(op->conn);
    return 0;
}

void sshcore_stream_write_cancel(sshcore_op *op, uint64_t id)
{
    session_op *x = (session_op *)op;
    wreq *w = NULL;
    bool found = false;

    pthread_mutex_lock(&x->mu);
    for (w = x->wq_head; w != NULL; w = w->next) {
        if (w->id == id) {
            w->cancelled = true;
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&x->mu);
    if (found) {
        sshcore_conn_wake(op->conn);
    }
}

int sshcore_stream_send_eof(sshcore_op *op, sshcore_error *err)
{
    session_op *x = (session_op *)op;
    wreq *w = calloc(1, sizeof(*w));

    if (w == NULL) {
        sshcore_error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return -1;
    }
    w->eof = true;
    pthread_mutex_lock(&x->mu);
    if (!inbox_open(x, err)) {
        pthread_mutex_unlock(&x->mu);
        free(w);
        return -1;
    }
    if (x->eof_queued) {
        pthread_mutex_unlock(&x->mu);
        free(w);
        return 0; /* idempotent */
    }
    x->eof_queued = true;
    enqueue(x, w);
    pthread_mutex_unlock(&x->mu);
    sshcore_conn_wake(op->conn);
    return 0;
}

int sshcore_stream_signal(sshcore_op *op, const char *name, sshcore_error *err)
{
    session_op *x = (session_op *)op;

    if (name == NULL || name[0] == '\0' || strlen(name) >= sizeof(x->signals[0])) {
        sshcore_error_set(err, SSHCORE_E_INVALID_ARGUMENT, "bad signal name");
        return -1;
    }
    pthread_mutex_lock(&x->mu);
    if (!inbox_open(x, err)) {
        pthread_mutex_unlock(&x->mu);
        return -1;
    }
    if (x->signal_count == SIGNALS_MAX) {
        pthread_mutex_unlock(&x->mu);
        sshcore_error_set(err, SSHCORE_E_INVALID_STATE, "too many signals waiting to be sent");
        return -1;
    }
    snprintf(x->signals[x->signal_count], sizeof(x->signals[0]), "%s", name);
    x->signal_count++;
    pthread_mutex_unlock(&x->mu);
    sshcore_conn_wake(op->conn);
    return 0;
}

int sshcore_stream_resize(sshcore_op *op, uint32_t cols, uint32_t rows,
                          uint32_t px_width, uint32_t px_height, sshcore_error *err)
{
    session_op *x = (session_op *)op;
    (void)px_width; /* libssh 0.10 sends 0 pixels */
    (void)px_height;

    if (cols == 0 || rows == 0 || cols > 0x7fffffff || rows > 0x7fffffff) {
        sshcore_error_set(err, SSHCORE_E_INVALID_ARGUMENT, "terminal size out of range");
        return -1;
    }
    pthread_mutex_lock(&x->mu);
    if (!inbox_open(x, err)) {
        pthread_mutex_unlock(&x->mu);
        return -1;
    }
    if (!x->want_pty) {
        pthread_mutex_unlock(&x->mu);
        sshcore_error_set(err, SSHCORE_E_INVALID_STATE, "the channel has no PTY");
        return -1;
    }
    x->resize_pending = true;
    x->new_cols = cols;
    x->new_rows = rows;
    pthread_mutex_unlock(&x->mu);
    sshcore_conn_wake(op->conn);
    return 0;
}

void sshcore_stream_consumed(sshcore_op *op, size_t n)
{
    session_op *x = (session_op *)op;
    size_t before = atomic_load(&x->unconsumed);

    while (!atomic_compare_exchange_weak(&x->unconsumed, &before, before >= n ? before - n : 0)) {
    }
    if (atomic_exchange(&x->starved, 0) != 0) {
        sshcore_conn_wake(op->conn);
    }
}

void sshcore_stream_get_exit(sshcore_op *op, sshcore_exit_info *info)
{
    session_op *x = (session_op *)op;

    memset(info, 0, sizeof(*info));
    if (atomic_load(&op->done) == 0) {
        return;
    }
    info->kind = x->exit_kind;
    info->status = x->exit_status;
    snprintf(info->signal, sizeof(info->signal), "%s", x->exit_signal);
    info->core_dumped = x->core_dumped;
}

void sshcore_exec_get_result(sshcore_op *op, sshcore_exec_result *r)
{
    session_op *x = (session_op *)op;

    memset(r, 0, sizeof(*r));
    if (atomic_load(&op->done) == 0 || op->err.code != SSHCORE_E_OK) {
        return;
    }
    r->out = x->out[0].data;
    r->out_len = x->out[0].len;
    r->err = x->out[1].data;
    r->err_len = x->out[1].len;
    r->exit_kind = x->exit_kind;
    r->exit_status = x->exit_status;
    snprintf(r->exit_signal, sizeof(r->exit_signal), "%s", x->exit_signal);
    r->core_dumped = x->core_dumped;
    r->env_fallback_used = x->use_fallback;
}
