/*
 * sshcore_session.c - session channels as operations: creation, the steps from
 * open to the running command (env, PTY, exec, shell or subsystem), the I/O
 * pass, exit status, close and teardown. Output is in sshcore_session_output.c,
 * input in sshcore_session_input.c, sockets joined to channels in
 * sshcore_bridge.c, the public starts in sshcore_exec.c.
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

#include "sshcore_session.h"

static bool session_io_pass(sshcore_conn *conn, session_op *x);

/* ---------------------------------------------------------------------- */
/* Callbacks from libssh (worker)                                          */
/* ---------------------------------------------------------------------- */

static void
on_exit_status(ssh_session session,
               ssh_channel channel,
               int status,
               void *userdata)
{
    session_op *x = userdata;
    (void)session;
    (void)channel;
    x->chan.exit_kind = SSHCORE_EXIT_STATUS;
    x->chan.exit_status = status;
}

static void
on_exit_signal(ssh_session session,
               ssh_channel channel,
               const char *signal,
               int core,
               const char *errmsg,
               const char *lang,
               void *userdata)
{
    session_op *x = userdata;
    (void)session;
    (void)channel;
    (void)errmsg;
    (void)lang;
    x->chan.exit_kind = SSHCORE_EXIT_SIGNAL;
    snprintf(x->chan.exit_signal,
             sizeof(x->chan.exit_signal),
             "%s",
             signal != NULL ? signal : "");
    x->chan.core_dumped = core;
}

void
sshcore__session_complete_code(session_op *x,
                               int code,
                               const char *_Nullable detail)
{
    sshcore_error err;
    sshcore__error_set(&err, code, detail);
    (void)sshcore__op_complete(&x->base, &err);
}

/* ---------------------------------------------------------------------- */
/* Worker steps                                                            */
/* ---------------------------------------------------------------------- */

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

sshcore_chan_action
sshcore__session_chan_event(session_op *x, sshcore_chan_event ev)
{
    sshcore_chan_state before = x->chan.state;
    sshcore_chan_action act = sshcore_chan_fsm_apply(&x->chan.state, ev);

    if (act == SSHCORE_CHAN_ACT_REJECT) {
        char detail[128];
        sshcore_fsm_rejection(SSHCORE_MACHINE_CHAN,
                              (int)before,
                              (int)ev,
                              detail,
                              sizeof(detail));
        sshcore__session_complete_code(x, SSHCORE_E_INVALID_STATE, detail);
    }
    return act;
}

/** Tells a streamed channel's caller that no more output comes (once, after
 *  every byte before it). */
static void
report_eof(session_op *x)
{
    if (x->streamed && x->bridge == NULL && x->cb.eof != NULL &&
        atomic_load(&x->base.done) == 0) {
        sshcore__session_flush_batch(x);
        x->cb.eof(x->cb.ctx);
    }
}

/** One I/O pass; what arrived during it is handed over at its end. */
static bool
session_io(sshcore_conn *conn, session_op *x)
{
    bool again;

    sshcore__session_flush_batch(
        x); /* output that arrived while other channels were stepped */
    again = session_io_pass(conn, x);
    sshcore__session_flush_batch(x);
    return again;
}

static bool
session_io_pass(sshcore_conn *conn, session_op *x)
{
    ssh_session s = conn->session;
    bool again = false;

    if (!sshcore__session_send_controls(conn, x)) {
        return false;
    }
    if (!sshcore__session_write_input(conn, x, &again)) {
        return false;
    }
    if (x->bridge != NULL) {
        sshcore__session_bridge_out(
            x,
            &again); /* first: frees sshcore__session_room for held output */
        if (!sshcore__session_bridge_in(conn, x, &again)) {
            return false;
        }
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
    if (sshcore__session_can_write(x) &&
        !sshcore__session_send_backlogged(conn) &&
        ssh_channel_window_size(x->chan.ch) > 0) {
        pthread_mutex_lock(
            &x->in.mu); /* the inbox: callers append under mu (TSan) */
        again = again || x->in.wq_head != NULL;
        pthread_mutex_unlock(&x->in.mu);
    }

    if (!x->chan.eof_seen && !sshcore__session_output_pending(x) &&
        ssh_channel_is_eof(x->chan.ch)) {
        x->chan.eof_seen = true;
        if ((x->chan.state == SSHCORE_CHAN_OPEN ||
             x->chan.state == SSHCORE_CHAN_EOF_SENT) &&
            sshcore__session_chan_event(x, SSHCORE_CHAN_EV_RECV_EOF) ==
                SSHCORE_CHAN_ACT_REJECT) {
            return false;
        }
        report_eof(x);
    }
    if (x->bridge != NULL) {
        sshcore__session_bridge_out(x,
                                    &again); /* what sshcore__session_read_held
                                                delivered; the EOF's shutdown */
        if (x->bridge->fd_dead) {
            /* the client went away: nothing more to carry either way */
            atomic_store(&x->bridge->end, SSHCORE_BRIDGE_END_FD);
            sshcore__session_complete_code(x, SSHCORE_E_OK, NULL);
            return false;
        }
    }

    if (ssh_channel_is_closed(x->chan.ch)) {
        if (!sshcore__conn_libssh_usable(conn)) {
            sshcore_error err;
            sshcore__error_from_session(&err,
                                        sshcore__conn_failure_code(conn),
                                        s,
                                        "ssh_channel_is_closed");
            (void)sshcore__op_complete(&x->base, &err);
            return false;
        }
        if (sshcore__session_output_pending(x) ||
            sshcore__session_bridge_out_pending(x)) {
            return again; /* closed with output still held:
                             sshcore__session_deliver it first */
        }
        /* The command exited without reading all of its stdin: what is left
         * has nowhere to go. Not an error for collected exec (stdin given up
         * front); a streamed writer learns that the channel is closed. */
        sshcore__session_fail_writes(x,
                                     x->streamed ? SSHCORE_E_CHANNEL_CLOSED
                                                 : SSHCORE_E_OK);
        if (!x->chan.eof_seen) {
            x->chan.eof_seen = true;
            if ((x->chan.state == SSHCORE_CHAN_OPEN ||
                 x->chan.state == SSHCORE_CHAN_EOF_SENT) &&
                sshcore__session_chan_event(x, SSHCORE_CHAN_EV_RECV_EOF) ==
                    SSHCORE_CHAN_ACT_REJECT) {
                return false;
            }
            report_eof(x);
        }
        if (sshcore__session_chan_event(x, SSHCORE_CHAN_EV_RECV_CLOSE) ==
            SSHCORE_CHAN_ACT_FINISH) {
            sshcore__session_flush_batch(x); /* every byte before the end */
            sshcore__session_complete_code(x, SSHCORE_E_OK, NULL);
        }
        return false;
    }
    return again;
}

static void
set_channel_callbacks(session_op *x)
{
    memset(&x->chan.cbs, 0, sizeof(x->chan.cbs));
    x->chan.cbs.userdata = x;
    x->chan.cbs.channel_data_function = sshcore__session_on_data;
    x->chan.cbs.channel_exit_status_function = on_exit_status;
    x->chan.cbs.channel_exit_signal_function = on_exit_signal;
    ssh_callbacks_init(&x->chan.cbs);
    ssh_set_channel_callbacks(x->chan.ch, &x->chan.cbs);
}

/** Reports the open channel to the caller (once). */
static void
report_open(session_op *x, int env_fallback_used)
{
    if (x->chan.started_reported) {
        return;
    }
    x->chan.started_reported = true;
    if (x->bridge != NULL) {
        x->bridge->cb.opened(
            x->bridge->cb.ctx,
            x->bridge->fd); /* may answer on the socket first */
    } else if (x->streamed) {
        x->cb.started(x->cb.ctx, env_fallback_used);
    }
}

/**
 * Takes over a forwarded-tcpip channel a remote forward op holds open. What
 * arrived before our callbacks were set waits in libssh's buffer: it is
 * counted as held, so sshcore__session_read_held() delivers it first.
 */
static bool
adopt_channel(sshcore_conn *conn, session_op *x)
{
    size_t held_before = 0;
    int n = 0;
    (void)conn;

    if (x->adopt.preset_ch != NULL) {
        x->chan.ch = x->adopt.preset_ch;
        x->adopt.preset_ch = NULL;
    } else {
        x->chan.ch = sshcore__rforward_take(x->adopt.parent, x->adopt.id);
    }
    if (x->chan.ch == NULL) {
        if (sshcore__session_chan_event(x, SSHCORE_CHAN_EV_OPEN_FAILED) ==
            SSHCORE_CHAN_ACT_FAIL) {
            sshcore__session_complete_code(
                x,
                SSHCORE_E_CHANNEL_CLOSED,
                "the forwarded connection is gone (rejected, timed out, or its "
                "forward ended)");
        }
        return false;
    }
    set_channel_callbacks(x);
    held_before = x->out.held[0];
    /* with an empty buffer this processes packets, and sshcore__session_on_data
     * counts them */
    n = ssh_channel_poll(x->chan.ch, 0);
    if (n > 0 && x->out.held[0] == held_before) {
        sshcore__session_hold(x, 0, (size_t)n);
    }
    if (sshcore__session_chan_event(x, SSHCORE_CHAN_EV_STREAM_OPENED) !=
        SSHCORE_CHAN_ACT_REPORT_OPEN) {
        return false;
    }
    report_open(x, 0);
    return true;
}

/* A refused session open is tried again while channels of ours were closing
 * this recently (or still are), for at most this long after its first refusal;
 * the pause starts at the first and doubles up to the second. */
#define OPEN_RETRY_AFTER_CLOSE_MS 1000
#define OPEN_RETRY_LIMIT_MS       3000
#define OPEN_RETRY_FIRST_PAUSE_MS 5
#define OPEN_RETRY_MAX_PAUSE_MS   100

/**
 * Whether a refused session open is tried again. OpenSSH counts a session
 * against MaxSessions until it has seen our CLOSE and the channel's process has
 * ended, and it handles an open that arrives in the same read as our CLOSE
 * before it frees the slot: a command started right after a cancelled one
 * would be refused for a slot that is ours and about to be free. So while our
 * own channels are closing, the open waits and goes again; a refusal with
 * nothing of ours closing is the server's answer.
 */
static bool
open_retry_later(sshcore_conn *conn, session_op *x)
{
    int64_t now = sshcore__now_ms();
    int pause = OPEN_RETRY_FIRST_PAUSE_MS;
    bool closing = conn->orphans != NULL ||
                   (conn->channel_closed_ms != 0 &&
                    now - conn->channel_closed_ms < OPEN_RETRY_AFTER_CLOSE_MS);

    if (x->req.kind != SSHCORE_CHANNEL_SESSION || !closing) {
        return false;
    }
    if (x->req.open_refused_ms == 0) {
        x->req.open_refused_ms = now;
    } else if (now - x->req.open_refused_ms >= OPEN_RETRY_LIMIT_MS) {
        return false;
    }
    if (x->req.open_retries < 5) {
        pause <<= x->req.open_retries;
    } else {
        pause = OPEN_RETRY_MAX_PAUSE_MS;
    }
    if (pause > OPEN_RETRY_MAX_PAUSE_MS) {
        pause = OPEN_RETRY_MAX_PAUSE_MS;
    }
    x->req.open_retries++;
    x->base.wake_ms = now + pause;
    return true;
}

static bool
session_step(sshcore_conn *conn, sshcore_op *op)
{
    session_op *x = (session_op *)op;
    ssh_session s = conn->session;
    int rc;

    switch (x->chan.state) {
    case SSHCORE_CHAN_OPENING:
        if (x->adopt.parent != NULL || x->adopt.preset_ch != NULL) {
            return adopt_channel(conn, x);
        }
        if (x->chan.ch == NULL) {
            if (x->base.wake_ms != 0) {
                if (sshcore__now_ms() < x->base.wake_ms) {
                    return false; /* a refused open waits to go again */
                }
                x->base.wake_ms = 0;
            }
            x->chan.ch = ssh_channel_new(s);
            if (x->chan.ch == NULL) {
                sshcore__session_fail_call(conn,
                                           x,
                                           SSHCORE_E_OUT_OF_MEMORY,
                                           "ssh_channel_new");
                return false;
            }
            set_channel_callbacks(x);
        }
        switch (x->req.kind) {
        case SSHCORE_CHANNEL_SESSION:
            rc = ssh_channel_open_session(x->chan.ch);
            break;
        case SSHCORE_CHANNEL_DIRECT_TCPIP:
            rc = ssh_channel_open_forward(x->chan.ch,
                                          x->req.target,
                                          x->req.target_port,
                                          x->req.originator,
                                          x->req.originator_port);
            break;
        case SSHCORE_CHANNEL_DIRECT_STREAMLOCAL:
            rc = ssh_channel_open_forward_unix(x->chan.ch,
                                               x->req.target,
                                               x->req.originator,
                                               x->req.originator_port);
            break;
        }
        if (rc == SSH_AGAIN) {
            return false;
        }
        if (rc != SSH_OK && open_retry_later(conn, x)) {
            ssh_channel_free(x->chan.ch); /* refused: nothing on the server */
            x->chan.ch = NULL;
            return false;
        }
        if (rc != SSH_OK) {
            if (sshcore__session_chan_event(x, SSHCORE_CHAN_EV_OPEN_FAILED) !=
                SSHCORE_CHAN_ACT_FAIL) {
                return false; /* rejected: the op failed */
            }
            sshcore__session_fail_call(conn,
                                       x,
                                       SSHCORE_E_CHANNEL_OPEN_REFUSED,
                                       x->req.kind == SSHCORE_CHANNEL_SESSION
                                           ? "ssh_channel_open_session"
                                       : x->req.kind ==
                                               SSHCORE_CHANNEL_DIRECT_TCPIP
                                           ? "ssh_channel_open_forward"
                                           : "ssh_channel_open_forward_unix");
            return false;
        }
        if (x->req.kind != SSHCORE_CHANNEL_SESSION) {
            /* a direct channel carries bytes from the moment it is open */
            if (sshcore__session_chan_event(x, SSHCORE_CHAN_EV_STREAM_OPENED) !=
                SSHCORE_CHAN_ACT_REPORT_OPEN) {
                return false;
            }
            report_open(x, 0);
            return true;
        }
        return sshcore__session_chan_event(x, SSHCORE_CHAN_EV_SESSION_OPENED) !=
               SSHCORE_CHAN_ACT_REJECT;
    case SSHCORE_CHAN_AGENT_REQUEST:
        /* like ssh -A: the server's sessions may use our agent (a request
         * without a reply; a server that does not allow it simply opens no
         * agent channel) */
        if (conn->agent_socket != NULL && !x->req.subsystem &&
            ssh_channel_request_auth_agent(x->chan.ch) == SSH_AGAIN) {
            return false;
        }
        return sshcore__session_chan_event(x, SSHCORE_CHAN_EV_AGENT_DONE) !=
               SSHCORE_CHAN_ACT_REJECT;
    case SSHCORE_CHAN_ENV_REQUESTS:
        if (x->req.env_idx >= x->req.env_count || x->req.use_fallback) {
            return sshcore__session_chan_event(x, SSHCORE_CHAN_EV_ENV_DONE) !=
                   SSHCORE_CHAN_ACT_REJECT;
        }
        rc = ssh_channel_request_env(x->chan.ch,
                                     x->req.env_names[x->req.env_idx],
                                     x->req.env_values[x->req.env_idx]);
        if (rc == SSH_AGAIN) {
            return false;
        }
        if (rc != SSH_OK) {
            if (sshcore__conn_libssh_usable(conn) && x->req.fallback == NULL &&
                x->req.env_optional) {
                x->req
                    .env_idx++; /* refused by AcceptEnv: left unset, as ssh does
                                 */
                return true;
            }
            if (!sshcore__conn_libssh_usable(conn) || x->req.fallback == NULL) {
                sshcore__session_fail_call(conn,
                                           x,
                                           SSHCORE_E_CHANNEL_REQUEST_FAILED,
                                           "ssh_channel_request_env");
                return false;
            }
            x->req.use_fallback = true; /* the server's AcceptEnv refused it */
            return true;
        }
        x->req.env_idx++;
        return true;
    case SSHCORE_CHAN_PTY_REQUEST:
        if (!x->req.want_pty) {
            return sshcore__session_chan_event(x, SSHCORE_CHAN_EV_PTY_DONE) !=
                   SSHCORE_CHAN_ACT_REJECT;
        }
        rc = ssh_channel_request_pty_size(x->chan.ch,
                                          x->req.term,
                                          (int)x->req.cols,
                                          (int)x->req.rows);
        if (rc == SSH_AGAIN) {
            return false;
        }
        if (rc != SSH_OK) {
            sshcore__session_fail_call(conn,
                                       x,
                                       SSHCORE_E_CHANNEL_REQUEST_FAILED,
                                       "ssh_channel_request_pty_size");
            return false;
        }
        return sshcore__session_chan_event(x, SSHCORE_CHAN_EV_PTY_DONE) !=
               SSHCORE_CHAN_ACT_REJECT;
    case SSHCORE_CHAN_START_REQUEST:
        if (x->req.command == NULL) {
            rc = ssh_channel_request_shell(x->chan.ch);
        } else if (x->req.subsystem) {
            rc = ssh_channel_request_subsystem(x->chan.ch, x->req.command);
        } else {
            rc = ssh_channel_request_exec(x->chan.ch,
                                          x->req.use_fallback ? x->req.fallback
                                                              : x->req.command);
        }
        if (rc == SSH_AGAIN) {
            x->req.start_sent = true;
            return false;
        }
        if (rc != SSH_OK) {
            sshcore__session_fail_call(
                conn,
                x,
                SSHCORE_E_CHANNEL_REQUEST_FAILED,
                x->req.command == NULL ? "ssh_channel_request_shell"
                : x->req.subsystem     ? "ssh_channel_request_subsystem"
                                       : "ssh_channel_request_exec");
            return false;
        }
        if (sshcore__session_chan_event(x, SSHCORE_CHAN_EV_STARTED) !=
            SSHCORE_CHAN_ACT_REPORT_OPEN) {
            return false;
        }
        report_open(x, x->req.use_fallback ? 1 : 0);
        return true;
    case SSHCORE_CHAN_OPEN:
    case SSHCORE_CHAN_EOF_SENT:
    case SSHCORE_CHAN_EOF_RECEIVED:
    case SSHCORE_CHAN_CLOSING:
        return session_io(conn, x);
    case SSHCORE_CHAN_CLOSED:
    case SSHCORE_CHAN__COUNT:
        break;
    }
    return false;
}

static const sshcore_op_vtable session_vtable = {
    .step = session_step,
    .abort = sshcore__session_abort,
    .destroy = sshcore__session_destroy,
};

static const sshcore_op_vtable bridge_vtable = {
    .step = session_step,
    .abort = sshcore__session_abort,
    .destroy = sshcore__session_destroy,
    .poll_fd = sshcore__session_bridge_poll_fd,
    .poll_event = sshcore__session_bridge_poll_event,
};

/* ---------------------------------------------------------------------- */
/* Creation                                                                */
/* ---------------------------------------------------------------------- */

sshcore_op *_Nullable sshcore__session_submit(sshcore_conn *conn,
                                              session_op *x,
                                              sshcore_op_done_fn done,
                                              void *_Nullable ctx,
                                              int timeout_ms,
                                              sshcore_error *err)
{
    sshcore__op_init(&x->base,
                     x->bridge != NULL ? &bridge_vtable : &session_vtable,
                     x->bridge != NULL ? SSHCORE_OP_BRIDGE
                     : x->streamed     ? SSHCORE_OP_STREAM
                                       : SSHCORE_OP_EXEC,
                     conn,
                     done,
                     ctx);
    if (timeout_ms > 0) {
        x->base.deadline_ms = sshcore__now_ms() + timeout_ms;
    }
    if (sshcore__conn_submit(conn, &x->base, err) != 0) {
        sshcore_conn *c = x->base.conn;
        x->chan.released =
            true; /* the caller learns it from NULL: no callback */
        sshcore__session_destroy(&x->base);
        sshcore__conn_unref(c);
        return NULL;
    }
    return &x->base;
}
