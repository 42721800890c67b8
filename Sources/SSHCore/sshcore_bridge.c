/*
 * sshcore_bridge.c - the bridged kind: a socket (or a terminal) joined to a
 * channel inside the worker, bytes moving between the two with no hand-over to
 * the caller; the public starts of direct channels and remote forwards'
 * connections as bridges; and auth-agent channels the server opens, joined to
 * the local agent.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sshcore_session.h"

/** Writes to the bridged fd: a socket (no SIGPIPE) or a terminal. */
static ssize_t
fd_send(const session_bridge *b, const uint8_t *p, size_t len)
{
    return b->is_socket ? send(b->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)
                        : write(b->fd, p, len);
}

/**
 * Reads the bridged fd. Up to a detach byte: the read ends before it, and
 * nothing more is read (the op ends once what came before it went out).
 */
static ssize_t
fd_recv(session_bridge *b, uint8_t *p, size_t len)
{
    ssize_t n = b->is_socket ? recv(b->fd, p, len, 0) : read(b->fd, p, len);
    const uint8_t *at = NULL;

    if (n > 0 && b->detach_byte >= 0 &&
        (at = memchr(p, b->detach_byte, (size_t)n)) != NULL) {
        b->detach_seen = true;
        n = at - p;
    }
    return n;
}

/**
 * With nothing waiting for the socket, writes channel data to it straight
 * from libssh's buffer, saving a copy through fdout. Returns how many bytes
 * went.
 */
static size_t
send_direct(session_op *x, const uint8_t *data, size_t len)
{
    size_t sent = 0;

    /* not before the caller's `opened` ran: a SOCKS answer goes first, and a
     * target that speaks first (SSH, SMTP) can send with the open confirmation
     */
    if (!sshcore__chan_is(x, SSHCORE_CHAN_F_IO) || !x->chan.started_reported ||
        x->bridge->fdout_off < x->bridge->fdout.len ||
        !x->bridge->fd_writable || x->bridge->fd_dead || x->bridge->fd < 0) {
        return 0;
    }
    while (sent < len) {
        ssize_t n = fd_send(x->bridge, data + sent, len - sent);
        if (n > 0) {
            sent += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            x->bridge->fd_writable = false;
        } else {
            x->bridge->fd_dead = true; /* the step ends the op */
        }
        break;
    }
    atomic_fetch_add(&x->bridge->to_fd, (uint64_t)sent);
    return sent;
}

/* ---------------------------------------------------------------------- */
/* Bridges: a socket joined to the channel (worker)                        */
/* ---------------------------------------------------------------------- */

/** Channel data not yet written to the socket (while anyone reads it). */
static bool
bridge_output_waits(const session_op *x)
{
    return !x->bridge->fd_dead && x->bridge->fdout_off < x->bridge->fdout.len;
}

/** Socket to channel, within the window; the socket's EOF becomes the
 * channel's. */
static bool
bridge_in(sshcore_conn *conn, session_op *x, bool *again)
{
    size_t budget = WRITE_CHUNK;

    while (!x->bridge->fd_dead) {
        ssize_t n = 0;
        size_t want = 0;

        if (!sshcore__chan_is(x, SSHCORE_CHAN_F_WRITES) ||
            ssh_channel_is_closed(x->chan.ch)) {
            return true;
        }
        if (x->bridge->fdin_off < x->bridge->fdin.len) {
            long rc = sshcore__session_channel_send(
                conn,
                x,
                x->bridge->fdin.data + x->bridge->fdin_off,
                x->bridge->fdin.len - x->bridge->fdin_off,
                &budget);
            if (rc < 0) {
                return false;
            }
            if (rc == 0) {
                return true;
            }
            x->bridge->fdin_off += (size_t)rc;
            atomic_fetch_add(&x->bridge->from_fd, (uint64_t)rc);
            if (x->bridge->fdin_off == x->bridge->fdin.len) {
                x->bridge->fdin.len = 0;
                x->bridge->fdin_off = 0;
            } else if (budget == 0) {
                *again = true; /* the rest goes in the next pass */
            }
            continue;
        }
        if (x->bridge->detach_seen) {
            /* everything before the detach byte went out: the end */
            atomic_store(&x->bridge->end, SSHCORE_BRIDGE_END_DETACHED);
            sshcore__session_complete_code(x, SSHCORE_E_OK, NULL);
            return false;
        }
        if (x->bridge->fd_read_eof) {
            /* everything read went out: the client's EOF follows it */
            return sshcore__session_send_channel_eof(conn, x);
        }
        if (!x->bridge->fd_readable || sshcore__session_send_backlogged(conn)) {
            return true;
        }
        want = ssh_channel_window_size(x->chan.ch);
        want = want < budget ? want : budget;
        want = want < BRIDGE_READ ? want : BRIDGE_READ;
        if (want == 0) {
            /* the pass's budget is spent (the next pass reads on: no poll()
             * would announce what is already there), or the window is closed
             * (a WINDOW_ADJUST wakes us) */
            *again = *again || budget == 0;
            return true;
        }
        if (sshcore__bytes_reserve(&x->bridge->fdin, want) != 0) {
            sshcore__session_complete_code(x, SSHCORE_E_OUT_OF_MEMORY, NULL);
            return false;
        }
        n = fd_recv(x->bridge, x->bridge->fdin.data, want);
        if (n > 0 || (n == 0 && x->bridge->detach_seen)) {
            x->bridge->fdin.len = (size_t)n;
            x->bridge->fdin_off = 0;
            if ((size_t)n < want && !x->bridge->detach_seen) {
                /* a short read took all there was: poll() says when there is
                 * more (one recv fewer per keystroke) */
                x->bridge->fd_readable = false;
            }
            continue;
        }
        if (n == 0) {
            x->bridge->fd_read_eof = true;
            /* a terminal has no half close: its end is a hang-up */
            x->bridge->fd_dead = !x->bridge->is_socket;
            continue;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            x->bridge->fd_readable =
                false; /* poll() tells us when there is more */
            return true;
        }
        x->bridge->fd_read_eof = true; /* reset: the client is gone */
        x->bridge->fd_dead = true;
    }
    return true;
}

/** Channel to socket; after the channel's EOF, the socket's write side closes.
 */
static void
bridge_out(session_op *x, bool *again)
{
    while (x->bridge->fdout_off < x->bridge->fdout.len && !x->bridge->fd_dead &&
           x->bridge->fd_writable) {
        ssize_t n = fd_send(x->bridge,
                            x->bridge->fdout.data + x->bridge->fdout_off,
                            x->bridge->fdout.len - x->bridge->fdout_off);
        if (n > 0) {
            size_t before = atomic_load(&x->out.streamed.unconsumed);
            x->bridge->fdout_off += (size_t)n;
            atomic_fetch_add(&x->bridge->to_fd, (uint64_t)n);
            while (!atomic_compare_exchange_weak(
                &x->out.streamed.unconsumed,
                &before,
                before >= (size_t)n ? before - (size_t)n : 0)) {
            }
            if (sshcore__session_output_pending(x)) {
                *again = true; /* sshcore__session_room for held output */
            }
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            x->bridge->fd_writable = false;
            return;
        }
        x->bridge->fd_dead =
            true; /* EPIPE, ECONNRESET: nobody reads any more */
    }
    if (x->bridge->fdout_off == x->bridge->fdout.len) {
        x->bridge->fdout.len = 0;
        x->bridge->fdout_off = 0;
        if (sshcore__chan_is(x, SSHCORE_CHAN_F_EOF_IN) &&
            !x->bridge->fd_write_shut && !x->bridge->fd_dead &&
            x->bridge->is_socket) {
            x->bridge->fd_write_shut = true;
            (void)shutdown(x->bridge->fd, SHUT_WR);
        }
    } else if (x->bridge->fdout_off > x->bridge->fdout.cap / 2) {
        /* keep appends from growing the buffer past what is unsent */
        memmove(x->bridge->fdout.data,
                x->bridge->fdout.data + x->bridge->fdout_off,
                x->bridge->fdout.len - x->bridge->fdout_off);
        x->bridge->fdout.len -= x->bridge->fdout_off;
        x->bridge->fdout_off = 0;
    }
}

static int
bridge_poll_fd(sshcore_conn *conn, sshcore_op *op, short *events)
{
    session_op *x = (session_op *)op;
    short ev = 0;
    (void)conn;

    if (x->bridge->fd < 0 || x->bridge->fd_dead ||
        !sshcore__chan_is(x, SSHCORE_CHAN_F_IO) || x->chan.ch == NULL) {
        return -1;
    }
    if (!x->bridge->fd_readable && !x->bridge->fd_read_eof &&
        x->bridge->fdin_off == x->bridge->fdin.len &&
        sshcore__chan_is(x, SSHCORE_CHAN_F_WRITES) &&
        ssh_channel_window_size(x->chan.ch) > 0) {
        ev |= POLLIN;
    }
    if (!x->bridge->fd_writable &&
        x->bridge->fdout_off < x->bridge->fdout.len) {
        ev |= POLLOUT;
    }
    *events = ev;
    return ev != 0 ? x->bridge->fd : -1;
}

static void
bridge_poll_event(sshcore_op *op, short revents)
{
    session_op *x = (session_op *)op;

    if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        x->bridge->fd_readable = true;
    }
    if ((revents & (POLLOUT | POLLHUP | POLLERR)) != 0) {
        x->bridge->fd_writable = true;
    }
}

sshcore_op *
sshcore_bridge_start(sshcore_conn *conn,
                     const sshcore_stream_spec *spec,
                     int fd,
                     const uint8_t *first_data,
                     size_t first_len,
                     const sshcore_bridge_callbacks *callbacks,
                     sshcore_op_done_fn done,
                     void *ctx,
                     sshcore_error *err)
{
    session_op *x = NULL;
    bool bad_fd = fd < 0 || fcntl(fd, F_GETFL) < 0;

    if (bad_fd || callbacks->opened == NULL || callbacks->failed == NULL ||
        callbacks->released == NULL || (first_len > 0 && first_data == NULL)) {
        sshcore__error_set(err,
                           SSHCORE_E_INVALID_ARGUMENT,
                           bad_fd ? "bad socket for a bridge"
                                  : "incomplete bridge callbacks");
        return sshcore__session_bridge_refuse(NULL, fd);
    }
    x = sshcore__session_direct_new(&sshcore__bridged_kind, spec, err);
    if (x == NULL) {
        return sshcore__session_bridge_refuse(NULL, fd);
    }
    if (!sshcore__session_bridge_take(x, fd, callbacks) ||
        (first_len > 0 &&
         sshcore__bytes_append(&x->bridge->fdin, first_data, first_len) != 0)) {
        sshcore__error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return sshcore__session_bridge_refuse(x, fd);
    }
    return sshcore__session_submit(conn, x, done, ctx, spec->timeout_ms, err);
}

int
sshcore_bridge_get_counts(sshcore_op *op,
                          uint64_t *to_socket,
                          uint64_t *from_socket)
{
    session_op *x = NULL;

    *to_socket = 0;
    *from_socket = 0;
    if (!sshcore__op_is(op,
                        SSHCORE_OP_BRIDGE,
                        "sshcore_bridge_get_counts",
                        NULL)) {
        return SSHCORE_E_INVALID_ARGUMENT;
    }
    x = (session_op *)op;
    *to_socket = atomic_load(&x->bridge->to_fd);
    *from_socket = atomic_load(&x->bridge->from_fd);
    return SSHCORE_E_OK;
}

sshcore_op *
sshcore_rforward_bridge(sshcore_op *forward,
                        uint64_t id,
                        int fd,
                        size_t buffer_limit,
                        const sshcore_bridge_callbacks *callbacks,
                        sshcore_op_done_fn done,
                        void *ctx,
                        sshcore_error *err)
{
    session_op *x = NULL;

    if (!sshcore__op_is(forward,
                        SSHCORE_OP_RFORWARD,
                        "sshcore_rforward_bridge",
                        err)) {
        return sshcore__session_bridge_refuse(NULL, fd);
    }
    if (fd < 0 || fcntl(fd, F_GETFL) < 0 || callbacks->opened == NULL ||
        callbacks->failed == NULL || callbacks->released == NULL) {
        sshcore__error_set(err,
                           SSHCORE_E_INVALID_ARGUMENT,
                           "bad socket or callbacks for a bridge");
        return sshcore__session_bridge_refuse(NULL, fd);
    }
    x = sshcore__session_adopted_new(&sshcore__bridged_kind,
                                     forward,
                                     id,
                                     buffer_limit,
                                     err);
    if (x == NULL) {
        return sshcore__session_bridge_refuse(NULL, fd);
    }
    if (!sshcore__session_bridge_take(x, fd, callbacks)) {
        sshcore__error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return sshcore__session_bridge_refuse(x, fd);
    }
    return sshcore__session_submit(forward->conn, x, done, ctx, 0, err);
}

static void
agent_bridge_opened(void *_Nullable ctx, int fd)
{
    (void)ctx;
    (void)fd;
}

static void
agent_bridge_failed(void *_Nullable ctx, int fd, const sshcore_error *err)
{
    (void)ctx;
    (void)fd;
    (void)err;
}

static void
agent_bridge_released(void *_Nullable ctx)
{
    (void)ctx;
}

static void
agent_bridge_done(void *_Nullable ctx, sshcore_op *op)
{
    (void)ctx;
    (void)op;
}

/** libssh (worker): the server opens an auth-agent@openssh.com channel: a new
 *  channel joined by a bridged op to a new connection to the local agent; NULL
 *  (libssh refuses the open) when the agent cannot be reached or the
 *  connection is ending. */
static ssh_channel
on_agent_channel(ssh_session session, void *userdata)
{
    static const sshcore_bridge_callbacks callbacks = {
        .ctx = NULL,
        .opened = agent_bridge_opened,
        .failed = agent_bridge_failed,
        .released = agent_bridge_released,
    };
    sshcore_conn *conn = userdata;
    struct sockaddr_un addr;
    session_op *x = NULL;
    ssh_channel ch = NULL;
    sshcore_op *op = NULL;
    sshcore_error err;
    int fd = -1;

    if (conn->agent.socket == NULL ||
        strlen(conn->agent.socket) >= sizeof(addr.sun_path)) {
        return NULL;
    }
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, conn->agent.socket, strlen(conn->agent.socket));
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
        goto fail; /* a local agent answers at once or not at all */
    }
    ch = ssh_channel_new(session);
    if (ch == NULL ||
        (x = sshcore__session_agent_new(ch, fd, &callbacks)) == NULL) {
        goto fail;
    }
    fd = -1; /* x's now */
    op = sshcore__session_submit(conn, x, agent_bridge_done, NULL, 0, &err);
    if (op == NULL) {
        /* sshcore__session_submit freed x and closed the socket; the channel
         * is still ours */
        goto fail;
    }
    sshcore_op_release(op); /* the worker's reference keeps it until it ends */
    return ch;

fail:
    if (ch != NULL) {
        ssh_channel_free(ch);
    }
    if (fd >= 0) {
        close(fd);
    }
    return NULL;
}

bool
sshcore__agent_forwarding_arm(sshcore_conn *conn)
{
    if (conn->agent.armed) {
        return true;
    }
    memset(&conn->agent.cbs, 0, sizeof(conn->agent.cbs));
    conn->agent.cbs.userdata = conn;
    conn->agent.cbs.channel_open_request_auth_agent_function = on_agent_channel;
    ssh_callbacks_init(&conn->agent.cbs);
    conn->agent.armed =
        ssh_set_callbacks(conn->session, &conn->agent.cbs) == SSH_OK;
    return conn->agent.armed;
}

/* ---------------------------------------------------------------------- */
/* The bridged kind                                                        */
/* ---------------------------------------------------------------------- */

static int
bridge_on_data(session_op *x,
               int stream,
               const uint8_t *data,
               uint32_t len,
               size_t fresh)
{
    size_t sent = send_direct(x, data, len);
    (void)fresh;

    if (sent == len) {
        x->out.held[stream] = 0;
        return (int)len;
    }
    /* the rest waits in fdout, within the room */
    return (int)(sent + sshcore__session_take_within(x,
                                                     stream,
                                                     data + sent,
                                                     len - (uint32_t)sent,
                                                     sshcore__session_room(x)));
}

/** The socket is the consumer: bridge_out writes it and frees the room. */
static bool
bridge_deliver(session_op *x, int stream, const uint8_t *p, size_t n)
{
    (void)stream;
    if (n == 0) {
        return true;
    }
    atomic_fetch_add(&x->out.streamed.unconsumed, n);
    if (sshcore__bytes_append(&x->bridge->fdout, p, n) != 0) {
        sshcore__session_complete_code(x, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return false;
    }
    return true;
}

static bool
bridge_pass_in(sshcore_conn *conn, session_op *x, bool *again)
{
    bridge_out(x, again); /* first: frees room for held output */
    return bridge_in(conn, x, again);
}

static bool
bridge_pass_out(sshcore_conn *conn, session_op *x, bool *again)
{
    (void)conn;
    bridge_out(x, again); /* what read_held delivered; the EOF's shutdown */
    if (x->bridge->fd_dead) {
        /* the client went away: nothing more to carry either way */
        atomic_store(&x->bridge->end, SSHCORE_BRIDGE_END_FD);
        sshcore__session_complete_code(x, SSHCORE_E_OK, NULL);
        return false;
    }
    return true;
}

static void
bridge_report_open(session_op *x, int env_fallback_used)
{
    (void)env_fallback_used;
    x->bridge->cb.opened(x->bridge->cb.ctx,
                         x->bridge->fd); /* may answer on the socket first */
}

static void
bridge_release(session_op *x)
{
    /* its callbacks come with its socket */
    if (x->bridge != NULL) {
        sshcore__session_release_to(x,
                                    x->bridge->cb.released,
                                    x->bridge->cb.ctx);
    }
}

/** The op ended: the socket closes, and a client that was never told the
 *  channel opened learns that it failed. */
static void
bridge_ended(sshcore_conn *conn, session_op *x)
{
    (void)conn;
    if (x->bridge->fd < 0) {
        return;
    }
    if (!x->chan.started_reported) {
        x->chan.started_reported = true;
        x->bridge->cb.failed(x->bridge->cb.ctx, x->bridge->fd, &x->base.err);
    } else if (x->base.err.code != SSHCORE_E_OK && !x->bridge->fd_write_shut) {
        /* the stream was cut before the peer's EOF reached the socket
         * (connection lost, cancelled, closed): a reset, never a FIN that the
         * socket's client would take for a complete stream */
        struct linger lin = {.l_onoff = 1, .l_linger = 0};
        (void)
            setsockopt(x->bridge->fd, SOL_SOCKET, SO_LINGER, &lin, sizeof lin);
    }
    close(x->bridge->fd);
    x->bridge->fd = -1;
}

static void
bridge_destroy(session_op *x)
{
    if (x->bridge == NULL) {
        return; /* its socket was never taken */
    }
    if (x->bridge->fd >= 0) {
        close(x->bridge->fd); /* never reached a worker */
    }
    sshcore__bytes_free(&x->bridge->fdin);
    sshcore__bytes_free(&x->bridge->fdout);
    free(x->bridge);
}

const session_kind sshcore__bridged_kind = {
    .op =
        {
            .step = sshcore__session_step,
            .abort = sshcore__session_abort,
            .destroy = sshcore__session_destroy,
            .poll_fd = bridge_poll_fd,
            .poll_event = bridge_poll_event,
        },
    .public_kind = SSHCORE_OP_BRIDGE,
    .unsent_input_code = SSHCORE_E_CHANNEL_CLOSED,
    .on_data = bridge_on_data,
    .deliver = bridge_deliver,
    .room = sshcore__session_streamed_room,
    .flush = sshcore__session_no_op,
    .pass_in = bridge_pass_in,
    .pass_out = bridge_pass_out,
    .output_waits = bridge_output_waits,
    .report_open = bridge_report_open,
    .report_eof = sshcore__session_no_op,
    .release = bridge_release,
    .ended = bridge_ended,
    .destroy = bridge_destroy,
};
