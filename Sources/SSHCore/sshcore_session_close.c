/*
 * sshcore_session_close.c - how a session channel ends: an abort (cancel,
 * timeout, connection lost) applied through the channel machine, the close
 * (EOF, close, or handing a channel that is still starting to the orphan list),
 * the release of the caller's callbacks, and the destruction of the operation.
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

static void release_callbacks(session_op *x);
static void close_channel(sshcore_conn *conn, session_op *x);

void
sshcore__session_abort(sshcore_conn *conn, sshcore_op *op)
{
    session_op *x = (session_op *)op;
    int code =
        op->err.code != SSHCORE_E_OK ? op->err.code : SSHCORE_E_CHANNEL_CLOSED;

    pthread_mutex_lock(&x->in.mu);
    x->in.closed = true;
    pthread_mutex_unlock(&x->in.mu);
    sshcore__session_fail_writes(x, code);
    if (x->adopt.preset_ch != NULL) {
        /* an agent channel never taken: close it with the op */
        if (conn->session != NULL) {
            (void)ssh_channel_close(x->adopt.preset_ch);
            ssh_channel_free(x->adopt.preset_ch);
        }
        x->adopt.preset_ch = NULL;
    }
    if (x->chan.ch == NULL && x->adopt.parent != NULL &&
        conn->session != NULL) {
        /* ended before taking its forwarded connection: close it now, not at
         * the forward's accept timeout */
        ssh_channel ch = sshcore__rforward_take(x->adopt.parent, x->adopt.id);
        if (ch != NULL) {
            (void)ssh_channel_close(ch);
            ssh_channel_free(ch);
        }
    }
    if (x->chan.ch != NULL) {
        close_channel(conn, x);
    }
    if (x->bridge != NULL && x->bridge->fd >= 0) {
        if (!x->chan.started_reported) {
            x->chan.started_reported = true;
            x->bridge->cb.failed(x->bridge->cb.ctx, x->bridge->fd, &op->err);
        } else if (op->err.code != SSHCORE_E_OK && !x->bridge->fd_write_shut) {
            /* the stream was cut before the peer's EOF reached the socket
             * (connection lost, cancelled, closed): a reset, never a FIN that
             * the socket's client would take for a complete stream */
            struct linger lin = {.l_onoff = 1, .l_linger = 0};
            (void)setsockopt(x->bridge->fd,
                             SOL_SOCKET,
                             SO_LINGER,
                             &lin,
                             sizeof lin);
        }
        close(x->bridge->fd);
        x->bridge->fd = -1;
    }
    release_callbacks(x);
}

/** Tells the caller that no callback will come any more (once). */
static void
release_callbacks(session_op *x)
{
    if (x->bridge != NULL) {
        /* its callbacks are set with its socket */
        if (!x->chan.released && x->bridge->cb.released != NULL) {
            x->chan.released = true;
            x->bridge->cb.released(x->bridge->cb.ctx);
        }
        return;
    }
    if (x->streamed && !x->chan.released && x->cb.released != NULL) {
        x->chan.released = true;
        x->cb.released(x->cb.ctx);
    }
}

static void
close_channel(sshcore_conn *conn, session_op *x)
{
    sshcore_op *op = &x->base;
    sshcore_chan_state before = x->chan.state;
    bool usable = sshcore__conn_libssh_usable(conn);
    sshcore_chan_action act;

    /* libssh keeps a channel the peer has not closed yet until its CLOSE
     * arrives and would still call our callbacks, whose struct lives in this
     * op: unregister them before letting go */
    ssh_remove_channel_callbacks(x->chan.ch, &x->chan.cbs);
    conn->channel_closed_ms = sshcore__now_ms();
    act = sshcore__session_chan_event(x,
                                      usable ? SSHCORE_CHAN_EV_CLOSE
                                             : SSHCORE_CHAN_EV_CONN_LOST);
    if (act == SSHCORE_CHAN_ACT_SEND_CLOSE) {
        if (before == SSHCORE_CHAN_OPENING) {
            /* Still opening: freed now, libssh would forget the channel and
             * the server's later confirmation would leave it open on the
             * server for good (counting against MaxSessions). */
            sshcore__conn_adopt_opening_channel(conn, x->chan.ch);
            x->chan.ch = NULL;
            return;
        }
        if (before == SSHCORE_CHAN_START_REQUEST && x->req.start_sent &&
            !ssh_channel_is_closed(x->chan.ch)) {
            /* The exec or shell request is on its way and libssh sends no
             * other request on the channel before its reply (a signal now
             * would be swallowed): the worker waits for that reply, stops
             * what it started, then closes. A subsystem gets no signal. */
            sshcore__conn_adopt_starting_channel(
                conn,
                x->chan.ch,
                x->req.use_fallback ? x->req.fallback : x->req.command,
                x->req.command != NULL && !x->req.subsystem,
                x->req.kind == SSHCORE_CHANNEL_SESSION && !x->req.subsystem,
                x->req.want_pty);
            x->chan.ch = NULL;
            return;
        }
        if (!ssh_channel_is_closed(x->chan.ch) && before >= SSHCORE_CHAN_OPEN &&
            x->req.kind == SSHCORE_CHANNEL_SESSION && !x->req.subsystem &&
            (atomic_load(&op->cancel_requested) != 0 ||
             op->err.code == SSHCORE_E_TIMED_OUT ||
             op->err.code == SSHCORE_E_CANCELLED)) {
            /* a cancelled command should not keep running on the server:
             * the worker sends TERM until the server reports its end, then
             * closes; with a PTY, the close also hangs the terminal up.
             * Never a subsystem (SFTP): it has no process of the caller's to
             * stop, EOF and CLOSE end it; OpenSSH refuses such a signal and
             * logs it, asyncssh drops the whole connection. */
            sshcore__conn_adopt_stopping_channel(conn,
                                                 x->chan.ch,
                                                 x->req.want_pty);
            x->chan.ch = NULL;
            return;
        }
        /* ssh_channel_close gives up when its EOF's flush returns SSH_AGAIN;
         * with the EOF already queued it goes on to send CLOSE */
        (void)ssh_channel_send_eof(x->chan.ch);
    }
    /* sends CLOSE (once) unless the session is gone */
    ssh_channel_free(x->chan.ch);
    x->chan.ch = NULL;
    if (act == SSHCORE_CHAN_ACT_FAIL) {
        /* the connection went first: the op ends with the connection's failure
         * (a no-op when teardown already completed it with that code) */
        int code = atomic_load(&conn->fail_code);
        sshcore__session_complete_code(
            x,
            code != SSHCORE_E_OK ? code : SSHCORE_E_CONNECTION_LOST,
            NULL);
    }
}

void
sshcore__session_destroy(sshcore_op *op)
{
    session_op *x = (session_op *)op;
    size_t i;

    sshcore__session_fail_writes(
        x,
        SSHCORE_E_CLOSED); /* never started: nothing was queued */
    release_callbacks(x);
    if (x->bridge != NULL) {
        if (x->bridge->fd >= 0) {
            close(x->bridge->fd); /* never reached a worker */
        }
        sshcore__bytes_free(&x->bridge->fdin);
        sshcore__bytes_free(&x->bridge->fdout);
        free(x->bridge);
    }
    if (x->adopt.parent != NULL) {
        sshcore_op_release(x->adopt.parent);
    }
    free(x->req.command);
    free(x->req.fallback);
    free(x->req.target);
    free(x->req.originator);
    for (i = 0; i < x->req.env_count; i++) {
        free(x->req.env_names != NULL ? x->req.env_names[i] : NULL);
        free(x->req.env_values != NULL ? x->req.env_values[i] : NULL);
    }
    free(x->req.env_names);
    free(x->req.env_values);
    sshcore__bytes_free(&x->out.collected[0]);
    sshcore__bytes_free(&x->out.collected[1]);
    sshcore__bytes_free(&x->out.streamed.batch);
    sshcore__bytes_free(&x->out.stash);
    pthread_mutex_destroy(&x->in.mu);
    free(x);
}
