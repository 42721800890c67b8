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

    pthread_mutex_lock(&x->mu);
    x->inbox_closed = true;
    pthread_mutex_unlock(&x->mu);
    sshcore__session_fail_writes(x, code);
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
        ssh_channel ch = sshcore__rforward_take(x->adopt_parent, x->adopt_id);
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
static void
release_callbacks(session_op *x)
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

static void
close_channel(sshcore_conn *conn, session_op *x)
{
    sshcore_op *op = &x->base;

    /* libssh keeps a channel the peer has not closed yet until its CLOSE
     * arrives and would still call our callbacks, whose struct lives in this
     * op: unregister them before letting go */
    ssh_remove_channel_callbacks(x->ch, &x->cbs);
    conn->channel_closed_ms = sshcore__now_ms();
    if (sshcore__conn_libssh_usable(conn)) {
        if (x->phase == SSHCORE_SETUP_OPEN) {
            /* Still opening: freed now, libssh would forget the channel and
             * the server's later confirmation would leave it open on the
             * server for good (counting against MaxSessions). */
            sshcore__conn_adopt_opening_channel(conn, x->ch);
            x->ch = NULL;
            (void)sshcore_chan_fsm_apply(&x->cstate, SSHCORE_CHAN_EV_CLOSE);
            return;
        }
        if (x->phase == SSHCORE_SETUP_START && x->start_sent &&
            !ssh_channel_is_closed(x->ch)) {
            /* The exec or shell request is on its way and libssh sends no
             * other request on the channel before its reply (a signal now
             * would be swallowed): the worker waits for that reply, stops
             * what it started, then closes. A subsystem gets no signal. */
            sshcore__conn_adopt_starting_channel(
                conn,
                x->ch,
                x->use_fallback ? x->fallback : x->command,
                x->command != NULL && !x->subsystem,
                x->kind == SSHCORE_CHANNEL_SESSION && !x->subsystem,
                x->want_pty);
            x->ch = NULL;
            (void)sshcore_chan_fsm_apply(&x->cstate, SSHCORE_CHAN_EV_CLOSE);
            return;
        }
        if (!ssh_channel_is_closed(x->ch) && x->phase == SSHCORE_SETUP_IO &&
            x->kind == SSHCORE_CHANNEL_SESSION && !x->subsystem &&
            (atomic_load(&op->cancel_requested) != 0 ||
             op->err.code == SSHCORE_E_TIMED_OUT ||
             op->err.code == SSHCORE_E_CANCELLED)) {
            /* a cancelled command should not keep running on the server:
             * the worker sends TERM until the server reports its end, then
             * closes; with a PTY, the close also hangs the terminal up.
             * Never a subsystem (SFTP): it has no process of the caller's to
             * stop, EOF and CLOSE end it; OpenSSH refuses such a signal and
             * logs it, asyncssh drops the whole connection. */
            sshcore__conn_adopt_stopping_channel(conn, x->ch, x->want_pty);
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
    if (sshcore__conn_libssh_usable(conn)) {
        (void)sshcore_chan_fsm_apply(&x->cstate, SSHCORE_CHAN_EV_CLOSE);
    } else if (sshcore_chan_fsm_apply(&x->cstate, SSHCORE_CHAN_EV_CONN_LOST) ==
               SSHCORE_CHAN_ACT_FAIL) {
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
    if (x->fd >= 0) {
        close(x->fd); /* never reached a worker */
    }
    sshcore__bytes_free(&x->fdin);
    sshcore__bytes_free(&x->fdout);
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
    sshcore__bytes_free(&x->out[0]);
    sshcore__bytes_free(&x->out[1]);
    sshcore__bytes_free(&x->batch);
    sshcore__bytes_free(&x->stash);
    pthread_mutex_destroy(&x->mu);
    free(x);
}
