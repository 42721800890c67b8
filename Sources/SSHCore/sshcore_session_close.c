/*
 * sshcore_session_close.c - how a channel op ends: an abort (cancel, timeout,
 * connection lost, or its end) applied through the channel machine, the close
 * (EOF, close, or handing a channel that is still starting or running to the
 * connection's orphans), the release of the caller's callbacks, and the
 * destruction of the op. What its origin and its kind hold goes through their
 * hooks.
 */
#include <stdlib.h>

#include "sshcore_session.h"

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
    x->origin->abandon(conn, x);
    if (x->chan.ch != NULL) {
        close_channel(conn, x);
    }
    x->kind->ended(conn, x);
    x->kind->release(x);
}

void
sshcore__session_release_to(session_op *x,
                            void (*_Nullable released)(void *_Nullable),
                            void *_Nullable ctx)
{
    if (!x->chan.released && released != NULL) {
        x->chan.released = true;
        released(ctx);
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
    x->kind->release(x);
    x->kind->destroy(x);
    x->origin->destroy(x);
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
