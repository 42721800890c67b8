/*
 * sshcore_session.c - a channel op's step: its channel machine applied, one
 * function per state (the setup states in sshcore_session_setup.c), and the
 * I/O pass of an open channel: queued input out within the peer's window,
 * held output handed on as its consumer makes room, the peer's EOF and close
 * noticed. What a kind does with the bytes is in its hooks (sshcore_exec.c,
 * sshcore_session_output.c, sshcore_bridge.c); how an op ends is in
 * sshcore_session_close.c.
 */
#include "sshcore_session.h"

void
sshcore__session_complete_code(session_op *x,
                               int code,
                               const char *_Nullable detail)
{
    sshcore_error err;
    sshcore__error_set(&err, code, detail);
    (void)sshcore__op_complete(&x->base, &err);
}

/** A libssh call on the channel failed: blame the connection if it is gone. */
void
sshcore__session_fail_call(sshcore_conn *conn,
                           session_op *x,
                           int channel_code,
                           const char *fn)
{
    int code = channel_code;
    sshcore_error err;

    if (!sshcore__conn_libssh_usable(conn)) {
        code = sshcore__conn_failure_code(conn);
    }
    sshcore__error_from_session(&err, code, conn->session, fn);
    (void)sshcore__op_complete(&x->base, &err);
}

static void
chan_rejected(session_op *x, const char *detail)
{
    sshcore__session_complete_code(x, SSHCORE_E_INVALID_STATE, detail);
}

SSHCORE_APPLIER(sshcore__session_chan_event,
                chan,
                CHAN,
                SSHCORE_MACHINE_CHAN,
                session_op,
                chan.state,
                chan_rejected)

/** The peer's EOF, applied (any number of times: it is reported once, after
 *  every byte before it); false when the op ended. */
static bool
receive_eof(session_op *x)
{
    sshcore_chan_action act =
        sshcore__session_chan_event(x, SSHCORE_CHAN_EV_RECV_EOF);
    if (act == SSHCORE_CHAN_ACT_REPORT_EOF) {
        x->kind->report_eof(x);
    }
    return act != SSHCORE_CHAN_ACT_REJECT;
}

static bool
session_io_pass(sshcore_conn *conn, session_op *x)
{
    const session_kind *kind = x->kind;
    bool again = false;

    if (!sshcore__session_send_controls(conn, x) ||
        !sshcore__session_write_input(conn, x, &again) ||
        !kind->pass_in(conn, x, &again)) {
        return false;
    }
    if (sshcore__session_output_pending(x) &&
        !sshcore__session_read_held(conn, x, &again)) {
        return false;
    }
    if (atomic_load(&x->base.done) != 0) {
        return false;
    }
    /* Processing may have flushed libssh's pending output without a packet
     * to announce it: if stdin waits only for that, take another turn. */
    if (sshcore__chan_is(x, SSHCORE_CHAN_F_WRITES) &&
        !sshcore__session_send_backlogged(conn) &&
        ssh_channel_window_size(x->chan.ch) > 0) {
        pthread_mutex_lock(
            &x->in.mu); /* the inbox: callers append under mu (TSan) */
        again = again || x->in.wq_head != NULL;
        pthread_mutex_unlock(&x->in.mu);
    }
    if (!sshcore__session_output_pending(x) && ssh_channel_is_eof(x->chan.ch) &&
        !receive_eof(x)) {
        return false;
    }
    if (!kind->pass_out(conn, x, &again)) {
        return false;
    }
    if (!ssh_channel_is_closed(x->chan.ch)) {
        return again;
    }
    if (!sshcore__conn_libssh_usable(conn)) {
        sshcore__session_fail_call(conn,
                                   x,
                                   sshcore__conn_failure_code(conn),
                                   "ssh_channel_is_closed");
        return false;
    }
    if (sshcore__session_output_pending(x) || kind->output_waits(x)) {
        return again; /* closed with output still held: it goes first */
    }
    /* The command exited without reading all of its stdin: what is left has
     * nowhere to go (the kind says whether its writers learn it). */
    sshcore__session_fail_writes(x, kind->unsent_input_code);
    if (!receive_eof(x)) {
        return false;
    }
    if (sshcore__session_chan_event(x, SSHCORE_CHAN_EV_RECV_CLOSE) ==
        SSHCORE_CHAN_ACT_FINISH) {
        kind->flush(x); /* every byte before the end */
        sshcore__session_complete_code(x, SSHCORE_E_OK, NULL);
    }
    return false;
}

/** One I/O pass; what arrived during it is handed over at its end. */
static bool
session_io(sshcore_conn *conn, session_op *x)
{
    bool again;

    x->kind->flush(x); /* output that arrived while other channels stepped */
    again = session_io_pass(conn, x);
    x->kind->flush(x);
    return again;
}

/* The step of each state, as the channel machine lists them. */
static bool (*const state_steps[SSHCORE_CHAN__COUNT])(sshcore_conn *,
                                                      session_op *) = {
    [SSHCORE_CHAN_OPENING] = sshcore__session_setup_opening,
    [SSHCORE_CHAN_AGENT_REQUEST] = sshcore__session_setup_agent,
    [SSHCORE_CHAN_ENV_REQUESTS] = sshcore__session_setup_env,
    [SSHCORE_CHAN_PTY_REQUEST] = sshcore__session_setup_pty,
    [SSHCORE_CHAN_START_REQUEST] = sshcore__session_setup_start,
    [SSHCORE_CHAN_OPEN] = session_io,
    [SSHCORE_CHAN_EOF_SENT] = session_io,
    [SSHCORE_CHAN_EOF_RECEIVED] = session_io,
    [SSHCORE_CHAN_CLOSING] = session_io,
    [SSHCORE_CHAN_CLOSED] = NULL,
};

bool
sshcore__session_step(sshcore_conn *conn, sshcore_op *op)
{
    session_op *x = (session_op *)op;
    bool (*step)(sshcore_conn *, session_op *) = state_steps[x->chan.state];

    return step != NULL && step(conn, x);
}
