/*
 * sshcore_session_input.c - a channel's input: the inbox other threads write to
 * (data, EOF, signals, a resize), sent within the peer's window a chunk per
 * turn, held back while the socket is backed up; the public write, EOF,
 * signal and resize calls.
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

#include "sshcore_session.h"

/** Completes a write request outside the lock and frees it. */
static void
finish_wreq(wreq *w, int code)
{
    if (w->done != NULL) {
        w->done(w->ctx, code);
    }
    free(w->data);
    free(w);
}

/** Signals and a resize that arrived from other threads. */
bool
sshcore__session_send_controls(sshcore_conn *conn, session_op *x)
{
    char signals[SIGNALS_MAX][16];
    size_t count = 0;
    size_t i;
    bool resize = false;
    uint32_t cols = 0;
    uint32_t rows = 0;

    pthread_mutex_lock(&x->in.mu);
    count = x->in.signal_count;
    memcpy(signals, x->in.signals, sizeof(signals));
    x->in.signal_count = 0;
    resize = x->in.resize_pending;
    cols = x->in.new_cols;
    rows = x->in.new_rows;
    x->in.resize_pending = false;
    pthread_mutex_unlock(&x->in.mu);

    if (ssh_channel_is_closed(x->chan.ch)) {
        return true; /* nobody to tell */
    }
    for (i = 0; i < count; i++) {
        /* no reply is asked for: libssh sends it and returns */
        if (ssh_channel_request_send_signal(x->chan.ch, signals[i]) ==
                SSH_ERROR &&
            !sshcore__conn_libssh_usable(conn)) {
            sshcore__session_fail_call(conn,
                                       x,
                                       SSHCORE_E_PROTOCOL,
                                       "ssh_channel_request_send_signal");
            return false;
        }
    }
    if (resize && x->req.want_pty &&
        ssh_channel_change_pty_size(x->chan.ch, (int)cols, (int)rows) ==
            SSH_ERROR &&
        !sshcore__conn_libssh_usable(conn)) {
        sshcore__session_fail_call(conn,
                                   x,
                                   SSHCORE_E_PROTOCOL,
                                   "ssh_channel_change_pty_size");
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
bool
sshcore__session_send_backlogged(sshcore_conn *conn)
{
    int unsent = 0;
    uint64_t sent = conn->socket_counter.out_bytes;

    /* no ioctl while the bytes sent since the last look still fit in the room
     * it showed (it was 3 syscalls per keystroke) */
    if (conn->backlog.known &&
        sent - conn->backlog.mark <= conn->backlog.room) {
        return false;
    }
    conn->backlog.known = false;
    if (conn->sock_fd < 0 || ioctl(conn->sock_fd, SIOCOUTQNSD, &unsent) != 0) {
        return false; /* not TCP (a jump host's socketpair): libssh's own flow
                         applies */
    }
    if (unsent > SSHCORE_SEND_BACKLOG_MAX) {
        conn->backlog.blocked = true;
        return true;
    }
    conn->backlog.known = true;
    conn->backlog.room = (uint64_t)(SSHCORE_SEND_BACKLOG_MAX - unsent);
    conn->backlog.mark = sent;
    return false;
}

/**
 * Writes up to `len` bytes to the channel within the peer's window, the
 * pass's budget and the socket's backlog. Returns how many went (0: none can
 * go now; a WINDOW_ADJUST or the next pass retries), or -1 when the op ended.
 */
long
sshcore__session_channel_send(sshcore_conn *conn,
                              session_op *x,
                              const uint8_t *p,
                              size_t len,
                              size_t *budget)
{
    size_t n = len;
    int rc = 0;

    /* without piling up in libssh's output buffer */
    if (*budget == 0 || sshcore__session_send_backlogged(conn)) {
        return 0;
    }
    if (n > ssh_channel_window_size(x->chan.ch)) {
        n = ssh_channel_window_size(x->chan.ch);
    }
    if (n > *budget) {
        n = *budget;
    }
    if (n == 0) {
        return 0; /* the window is closed: a WINDOW_ADJUST will wake us */
    }
    rc = ssh_channel_write(x->chan.ch, p, (uint32_t)n);
    if (rc < 0) {
        if (!sshcore__conn_libssh_usable(conn)) {
            sshcore__session_fail_call(conn,
                                       x,
                                       SSHCORE_E_PROTOCOL,
                                       "ssh_channel_write");
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
bool
sshcore__session_send_channel_eof(sshcore_conn *conn, session_op *x)
{
    if (sshcore__session_chan_event(x, SSHCORE_CHAN_EV_SEND_EOF) !=
        SSHCORE_CHAN_ACT_SEND_EOF) {
        return false; /* rejected: the op failed */
    }
    /* SSH_AGAIN: the EOF is queued, only the flush is pending */
    if (ssh_channel_send_eof(x->chan.ch) == SSH_ERROR) {
        sshcore__session_fail_call(conn,
                                   x,
                                   SSHCORE_E_PROTOCOL,
                                   "ssh_channel_send_eof");
        return false;
    }
    return true;
}

/** Queued stdin and EOF, in order, within the peer's window. */
bool
sshcore__session_write_input(sshcore_conn *conn, session_op *x, bool *again)
{
    size_t budget = WRITE_CHUNK;

    for (;;) {
        wreq *w = NULL;
        long rc = 0;

        pthread_mutex_lock(&x->in.mu);
        w = x->in.wq_head;
        if (w != NULL && (w->cancelled || (!w->eof && w->off == w->len))) {
            x->in.wq_head = w->next;
            if (x->in.wq_head == NULL) {
                x->in.wq_tail = NULL;
            }
            pthread_mutex_unlock(&x->in.mu);
            finish_wreq(w, w->cancelled ? SSHCORE_E_CANCELLED : SSHCORE_E_OK);
            continue;
        }
        pthread_mutex_unlock(&x->in.mu);
        if (w == NULL) {
            return true;
        }
        if (!sshcore__chan_is(x, SSHCORE_CHAN_F_WRITES) ||
            ssh_channel_is_closed(x->chan.ch)) {
            return true; /* the close path fails what is left */
        }
        if (w->eof) {
            if (!sshcore__session_send_channel_eof(conn, x)) {
                return false;
            }
            pthread_mutex_lock(&x->in.mu);
            x->in.wq_head = w->next;
            if (x->in.wq_head == NULL) {
                x->in.wq_tail = NULL;
            }
            pthread_mutex_unlock(&x->in.mu);
            finish_wreq(w, SSHCORE_E_OK);
            continue;
        }
        rc = sshcore__session_channel_send(conn,
                                           x,
                                           w->data + w->off,
                                           w->len - w->off,
                                           &budget);
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

/** Fails the writes still queued (the channel or the op ended). */
void
sshcore__session_fail_writes(session_op *x, int code)
{
    wreq *list = NULL;

    pthread_mutex_lock(&x->in.mu);
    list = x->in.wq_head;
    x->in.wq_head = NULL;
    x->in.wq_tail = NULL;
    pthread_mutex_unlock(&x->in.mu);
    while (list != NULL) {
        wreq *next = list->next;
        finish_wreq(list, code);
        list = next;
    }
}

/** Appends a request to the inbox (caller holds mu). */
void
sshcore__session_enqueue(session_op *x, wreq *w)
{
    w->id = x->in.next_id++;
    if (x->in.wq_tail != NULL) {
        x->in.wq_tail->next = w;
    } else {
        x->in.wq_head = w;
    }
    x->in.wq_tail = w;
}

bool
sshcore__session_is_command(sshcore_op *op,
                            const char *call,
                            sshcore_error *err)
{
    if (op->kind == SSHCORE_OP_BRIDGE &&
        ((session_op *)op)->req.kind == SSHCORE_CHANNEL_SESSION) {
        return true;
    }
    return sshcore__op_is(op, SSHCORE_OP_STREAM, call, err);
}

/* ---------------------------------------------------------------------- */
/* Requests from any thread                                                */
/* ---------------------------------------------------------------------- */

/** Whether the inbox still takes requests (caller holds mu). */
static bool
inbox_open(session_op *x, sshcore_error *err)
{
    if (x->in.closed || atomic_load(&x->base.done) != 0) {
        int code = x->base.err.code;
        if (atomic_load(&x->base.done) == 0 || code == SSHCORE_E_OK) {
            code = SSHCORE_E_CHANNEL_CLOSED;
        }
        sshcore__error_set(err, code, NULL);
        return false;
    }
    return true;
}

int
sshcore_stream_write(sshcore_op *op,
                     const uint8_t *data,
                     size_t len,
                     sshcore_write_done_fn done,
                     void *ctx,
                     uint64_t *id,
                     sshcore_error *err)
{
    session_op *x = NULL;
    wreq *w = NULL;
    int rc = SSHCORE_E_OK;

    if (!sshcore__op_is(op, SSHCORE_OP_STREAM, "sshcore_stream_write", err)) {
        return SSHCORE_E_INVALID_ARGUMENT;
    }
    x = (session_op *)op;
    w = calloc(1, sizeof(*w));
    if (w == NULL || (len > 0 && (w->data = malloc(len)) == NULL)) {
        free(w);
        sshcore__error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return err->code;
    }
    if (len > 0) {
        memcpy(w->data, data, len);
    }
    w->len = len;
    w->done = done;
    w->ctx = ctx;
    pthread_mutex_lock(&x->in.mu);
    if (!inbox_open(x, err) || x->in.eof_queued) {
        if (x->in.eof_queued && atomic_load(&op->done) == 0 && !x->in.closed) {
            sshcore__error_set(err,
                               SSHCORE_E_INVALID_STATE,
                               "stdin was already finished (EOF)");
        }
        rc = err->code;
        goto out;
    }
    sshcore__session_enqueue(x, w);
    *id = w->id;
    w = NULL; /* the inbox owns it */

out:
    pthread_mutex_unlock(&x->in.mu);
    if (w != NULL) {
        free(w->data);
        free(w);
    }
    if (rc == SSHCORE_E_OK) {
        sshcore__conn_wake(op->conn);
    }
    return rc;
}

int
sshcore_stream_write_cancel(sshcore_op *op, uint64_t id)
{
    session_op *x = NULL;
    wreq *w = NULL;
    bool found = false;

    if (!sshcore__op_is(op,
                        SSHCORE_OP_STREAM,
                        "sshcore_stream_write_cancel",
                        NULL)) {
        return SSHCORE_E_INVALID_ARGUMENT;
    }
    x = (session_op *)op;
    pthread_mutex_lock(&x->in.mu);
    for (w = x->in.wq_head; w != NULL; w = w->next) {
        if (w->id == id) {
            w->cancelled = true;
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&x->in.mu);
    if (found) {
        sshcore__conn_wake(op->conn);
    }
    return SSHCORE_E_OK;
}

int
sshcore_stream_send_eof(sshcore_op *op, sshcore_error *err)
{
    session_op *x = NULL;
    wreq *w = NULL;
    int rc = SSHCORE_E_OK;

    if (!sshcore__op_is(op,
                        SSHCORE_OP_STREAM,
                        "sshcore_stream_send_eof",
                        err)) {
        return SSHCORE_E_INVALID_ARGUMENT;
    }
    x = (session_op *)op;
    w = calloc(1, sizeof(*w));
    if (w == NULL) {
        sshcore__error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return err->code;
    }
    w->eof = true;
    pthread_mutex_lock(&x->in.mu);
    if (!inbox_open(x, err)) {
        rc = err->code;
        goto out;
    }
    if (x->in.eof_queued) {
        goto out; /* idempotent: nothing to wake for */
    }
    x->in.eof_queued = true;
    sshcore__session_enqueue(x, w);
    w = NULL; /* the inbox owns it */

out:
    pthread_mutex_unlock(&x->in.mu);
    if (w == NULL) {
        sshcore__conn_wake(op->conn);
    }
    free(w);
    return rc;
}

int
sshcore_stream_signal(sshcore_op *op, const char *name, sshcore_error *err)
{
    session_op *x = NULL;
    int rc = SSHCORE_E_OK;

    if (!sshcore__op_is(op, SSHCORE_OP_STREAM, "sshcore_stream_signal", err)) {
        return SSHCORE_E_INVALID_ARGUMENT;
    }
    x = (session_op *)op;
    if (name == NULL || name[0] == '\0' ||
        strlen(name) >= sizeof(x->in.signals[0])) {
        sshcore__error_set(err, SSHCORE_E_INVALID_ARGUMENT, "bad signal name");
        return err->code;
    }
    pthread_mutex_lock(&x->in.mu);
    if (!inbox_open(x, err)) {
        rc = err->code;
        goto out;
    }
    if (x->in.signal_count == SIGNALS_MAX) {
        sshcore__error_set(err,
                           SSHCORE_E_INVALID_STATE,
                           "too many signals waiting to be sent");
        rc = err->code;
        goto out;
    }
    snprintf(x->in.signals[x->in.signal_count],
             sizeof(x->in.signals[0]),
             "%s",
             name);
    x->in.signal_count++;

out:
    pthread_mutex_unlock(&x->in.mu);
    if (rc == SSHCORE_E_OK) {
        sshcore__conn_wake(op->conn);
    }
    return rc;
}

int
sshcore_stream_resize(sshcore_op *op,
                      uint32_t cols,
                      uint32_t rows,
                      uint32_t px_width,
                      uint32_t px_height,
                      sshcore_error *err)
{
    session_op *x = NULL;
    int rc = SSHCORE_E_OK;
    (void)px_width; /* libssh 0.10 sends 0 pixels */
    (void)px_height;

    if (!sshcore__session_is_command(op, "sshcore_stream_resize", err)) {
        return SSHCORE_E_INVALID_ARGUMENT;
    }
    x = (session_op *)op;
    if (cols == 0 || rows == 0 || cols > 0x7fffffff || rows > 0x7fffffff) {
        sshcore__error_set(err,
                           SSHCORE_E_INVALID_ARGUMENT,
                           "terminal size out of range");
        return err->code;
    }
    pthread_mutex_lock(&x->in.mu);
    if (!inbox_open(x, err)) {
        rc = err->code;
        goto out;
    }
    if (!x->req.want_pty) {
        sshcore__error_set(err,
                           SSHCORE_E_INVALID_STATE,
                           "the channel has no PTY");
        rc = err->code;
        goto out;
    }
    x->in.resize_pending = true;
    x->in.new_cols = cols;
    x->in.new_rows = rows;

out:
    pthread_mutex_unlock(&x->in.mu);
    if (rc == SSHCORE_E_OK) {
        sshcore__conn_wake(op->conn);
    }
    return rc;
}
