/*
 * sshcore_bridge.c - a socket joined to a channel inside the worker: direct
 * channels (direct-tcpip, direct-streamlocal), forwarded-tcpip channels taken
 * from a remote forward, and auth-agent channels joined to the local agent.
 * Bytes move between the socket and the channel with no hand-over to the
 * caller.
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

/**
 * Gives a new op its bridge over `fd` (a socket unless the caller says
 * otherwise) and the callbacks. From here the op owns the fd: it is made
 * non-blocking, and destroying the op closes it. False without memory: the
 * fd is still the caller's.
 */
bool
sshcore__session_bridge_take(session_op *x,
                             int fd,
                             const sshcore_bridge_callbacks *callbacks)
{
    int flags = fcntl(fd, F_GETFL);

    x->bridge = calloc(1, sizeof(*x->bridge));
    if (x->bridge == NULL) {
        return false;
    }
    if (flags >= 0) {
        (void)fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    }
    x->bridge->fd = fd;
    x->bridge->is_socket = true;
    x->bridge->detach_byte = -1;
    x->bridge->fd_readable = true; /* try once; EAGAIN hands over to poll() */
    x->bridge->fd_writable = true;
    x->bridge->cb = *callbacks;
    atomic_init(&x->bridge->end, SSHCORE_BRIDGE_END_CHANNEL);
    atomic_init(&x->bridge->to_fd, 0);
    atomic_init(&x->bridge->from_fd, 0);
    return true;
}

/**
 * A bridge refused before it was submitted: frees `x` (NULL when none was
 * made) and closes `fd`, whichever of the two holds it, since the caller
 * handed the fd over. Returns NULL.
 */
sshcore_op *_Nullable sshcore__session_bridge_refuse(session_op *_Nullable x,
                                                     int fd)
{
    bool held = x != NULL && x->bridge != NULL && x->bridge->fd == fd;

    if (x != NULL) {
        x->chan.released = true; /* the caller learns it from NULL: no
                                    callback */
        sshcore__session_destroy(&x->base); /* frees x */
    }
    if (!held && fd >= 0) {
        close(fd);
    }
    return NULL;
}

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
 * Bridged: with nothing waiting for the socket, writes channel data to it
 * straight from libssh's buffer, saving a copy through fdout. Returns how
 * many bytes went.
 */
size_t
sshcore__session_bridge_send_direct(session_op *x,
                                    const uint8_t *data,
                                    size_t len)
{
    size_t sent = 0;

    /* not before the caller's `opened` ran: a SOCKS answer goes first, and a
     * target that speaks first (SSH, SMTP) can send with the open confirmation
     */
    if (!sshcore__session_in_io(x) || !x->chan.started_reported ||
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

bool
sshcore__session_bridge_out_pending(const session_op *x)
{
    return x->bridge != NULL && !x->bridge->fd_dead &&
           x->bridge->fdout_off < x->bridge->fdout.len;
}

/** Socket to channel, within the window; the socket's EOF becomes the
 * channel's. */
bool
sshcore__session_bridge_in(sshcore_conn *conn, session_op *x, bool *again)
{
    size_t budget = WRITE_CHUNK;

    while (!x->bridge->fd_dead) {
        ssize_t n = 0;
        size_t want = 0;

        if (!sshcore__session_can_write(x) ||
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
            return x->chan.eof_sent ||
                   sshcore__session_send_channel_eof(conn, x);
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
void
sshcore__session_bridge_out(session_op *x, bool *again)
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
        if (x->chan.eof_seen && !x->bridge->fd_write_shut &&
            !x->bridge->fd_dead && x->bridge->is_socket) {
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

int
sshcore__session_bridge_poll_fd(sshcore_conn *conn,
                                sshcore_op *op,
                                short *events)
{
    session_op *x = (session_op *)op;
    short ev = 0;
    (void)conn;

    if (x->bridge->fd < 0 || x->bridge->fd_dead || !sshcore__session_in_io(x) ||
        x->chan.ch == NULL) {
        return -1;
    }
    if (!x->bridge->fd_readable && !x->bridge->fd_read_eof &&
        x->bridge->fdin_off == x->bridge->fdin.len &&
        sshcore__session_can_write(x) &&
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

void
sshcore__session_bridge_poll_event(sshcore_op *op, short revents)
{
    session_op *x = (session_op *)op;

    if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        x->bridge->fd_readable = true;
    }
    if ((revents & (POLLOUT | POLLHUP | POLLERR)) != 0) {
        x->bridge->fd_writable = true;
    }
}

/** A direct-tcpip or direct-streamlocal channel's op, not yet submitted. */
session_op *_Nullable sshcore__session_direct_new(
    const sshcore_stream_spec *spec,
    sshcore_error *err)
{
    session_op *x = NULL;
    bool tcp = spec->kind == SSHCORE_CHANNEL_DIRECT_TCPIP;

    if ((spec->kind != SSHCORE_CHANNEL_DIRECT_TCPIP &&
         spec->kind != SSHCORE_CHANNEL_DIRECT_STREAMLOCAL) ||
        spec->target_host == NULL || spec->target_host[0] == '\0' ||
        (tcp && (spec->target_port < 1 || spec->target_port > 65535)) ||
        spec->originator_port < 0 || spec->originator_port > 65535 ||
        spec->buffer_limit == 0 || spec->timeout_ms < 0) {
        sshcore__error_set(err,
                           SSHCORE_E_INVALID_ARGUMENT,
                           "incomplete direct channel spec");
        return NULL;
    }
    x = sshcore__session_new("", NULL, NULL, 0);
    if (x == NULL) {
        sshcore__error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return NULL;
    }
    x->req.kind = spec->kind;
    x->req.target = strdup(spec->target_host);
    x->req.target_port = spec->target_port;
    x->req.originator = strdup(
        spec->originator_host != NULL ? spec->originator_host : "127.0.0.1");
    x->req.originator_port = spec->originator_port;
    if (x->req.target == NULL || x->req.originator == NULL) {
        sshcore__session_destroy(&x->base); /* frees x */
        sshcore__error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return NULL;
    }
    x->streamed = true;
    x->out.limit = spec->buffer_limit;
    return x;
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
    x = sshcore__session_direct_new(spec, err);
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

/** An op for a waiting forwarded-tcpip connection of `forward`. */
session_op *_Nullable sshcore__session_adopted_new(sshcore_op *forward,
                                                   uint64_t id,
                                                   size_t buffer_limit,
                                                   sshcore_error *err)
{
    session_op *x = NULL;

    if (buffer_limit == 0) {
        sshcore__error_set(err,
                           SSHCORE_E_INVALID_ARGUMENT,
                           "buffer limit must be positive");
        return NULL;
    }
    x = sshcore__session_new("", NULL, NULL, 0);
    if (x == NULL) {
        sshcore__error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return NULL;
    }
    x->req.kind = SSHCORE_CHANNEL_DIRECT_TCPIP; /* a byte stream: no requests,
                                               no exit status */
    x->streamed = true;
    x->out.limit = buffer_limit;
    sshcore__op_retain(forward);
    x->adopt.parent = forward;
    x->adopt.id = id;
    return x;
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
    x = sshcore__session_adopted_new(forward, id, buffer_limit, err);
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

ssh_channel
sshcore__agent_channel_open(sshcore_conn *conn, ssh_session session)
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

    if (conn->agent_socket == NULL ||
        strlen(conn->agent_socket) >= sizeof(addr.sun_path)) {
        return NULL;
    }
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, conn->agent_socket, strlen(conn->agent_socket));
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
        goto fail; /* a local agent answers at once or not at all */
    }
    ch = ssh_channel_new(session);
    x = sshcore__session_new("", NULL, NULL, 0);
    if (ch == NULL || x == NULL ||
        !sshcore__session_bridge_take(x, fd, &callbacks)) {
        goto fail;
    }
    fd = -1;                                    /* x's now */
    x->req.kind = SSHCORE_CHANNEL_DIRECT_TCPIP; /* a byte stream: no requests,
                                               no exit status */
    x->streamed = true;
    x->out.limit = 256 << 10;
    x->adopt.preset_ch = ch;
    op = sshcore__session_submit(conn, x, agent_bridge_done, NULL, 0, &err);
    if (op == NULL) {
        /* sshcore__session_submit freed x and closed the socket; the channel
         * is still ours */
        x = NULL;
        goto fail;
    }
    sshcore_op_release(op); /* the worker's reference keeps it until it ends */
    return ch;

fail:
    if (ch != NULL) {
        ssh_channel_free(ch);
    }
    if (x != NULL) {
        sshcore__session_destroy(&x->base);
    }
    if (fd >= 0) {
        close(fd);
    }
    return NULL;
}
