/*
 * sshcore_session_setup.c - how a channel op gets its channel and its command
 * started: the origins (a channel the op opens, a remote forward's connection,
 * an agent channel), then one function per setup state of a session channel:
 * agent forwarding, env requests (falling back to a prefixed command when the
 * server refuses them), a PTY, then exec, shell or subsystem. The caller
 * learns the channel is open when it carries bytes.
 */
#include <stdio.h>
#include <string.h>

#include "sshcore_session.h"

/* ---------------------------------------------------------------------- */
/* The channel's callbacks, and telling the caller it is open              */
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
sshcore__session_set_callbacks(session_op *x)
{
    memset(&x->chan.cbs, 0, sizeof(x->chan.cbs));
    x->chan.cbs.userdata = x;
    x->chan.cbs.channel_data_function = sshcore__session_on_data;
    x->chan.cbs.channel_exit_status_function = on_exit_status;
    x->chan.cbs.channel_exit_signal_function = on_exit_signal;
    ssh_callbacks_init(&x->chan.cbs);
    ssh_set_channel_callbacks(x->chan.ch, &x->chan.cbs);
}

void
sshcore__session_report_open(session_op *x, int env_fallback_used)
{
    if (x->chan.started_reported) {
        return;
    }
    x->chan.started_reported = true;
    x->kind->report_open(x, env_fallback_used);
}

/** A byte stream's channel is open: it carries bytes from now on. */
static bool
stream_opened(session_op *x)
{
    if (sshcore__session_chan_event(x, SSHCORE_CHAN_EV_STREAM_OPENED) !=
        SSHCORE_CHAN_ACT_REPORT_OPEN) {
        return false;
    }
    sshcore__session_report_open(x, 0);
    return true;
}

/* ---------------------------------------------------------------------- */
/* Origins                                                                 */
/* ---------------------------------------------------------------------- */

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

/** Opened: a session or a direct channel, asked for by the op. */
static bool
opened_open(sshcore_conn *conn, session_op *x)
{
    static const char *const open_fn[] = {
        [SSHCORE_CHANNEL_SESSION] = "ssh_channel_open_session",
        [SSHCORE_CHANNEL_DIRECT_TCPIP] = "ssh_channel_open_forward",
        [SSHCORE_CHANNEL_DIRECT_STREAMLOCAL] = "ssh_channel_open_forward_unix",
    };
    int rc = SSH_ERROR;

    if (x->chan.ch == NULL) {
        if (x->base.wake_ms != 0) {
            if (sshcore__now_ms() < x->base.wake_ms) {
                return false; /* a refused open waits to go again */
            }
            x->base.wake_ms = 0;
        }
        x->chan.ch = ssh_channel_new(conn->session);
        if (x->chan.ch == NULL) {
            sshcore__session_fail_call(conn,
                                       x,
                                       SSHCORE_E_OUT_OF_MEMORY,
                                       "ssh_channel_new");
            return false;
        }
        sshcore__session_set_callbacks(x);
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
        if (sshcore__session_chan_event(x, SSHCORE_CHAN_EV_OPEN_FAILED) ==
            SSHCORE_CHAN_ACT_FAIL) {
            sshcore__session_fail_call(conn,
                                       x,
                                       SSHCORE_E_CHANNEL_OPEN_REFUSED,
                                       open_fn[x->req.kind]);
        }
        return false;
    }
    if (x->req.kind != SSHCORE_CHANNEL_SESSION) {
        return stream_opened(x); /* a direct channel carries bytes at once */
    }
    return sshcore__session_chan_event(x, SSHCORE_CHAN_EV_SESSION_OPENED) !=
           SSHCORE_CHAN_ACT_REJECT;
}

static void
opened_nothing(session_op *x)
{
    (void)x;
}

static void
opened_abandon(sshcore_conn *conn, session_op *x)
{
    (void)conn;
    (void)x;
}

const session_origin sshcore__opened_origin = {
    .open = opened_open,
    .abandon = opened_abandon,
    .destroy = opened_nothing,
};

/**
 * Takes over a channel that is already open. What arrived before our
 * callbacks were set waits in libssh's buffer: it is counted as held, so
 * sshcore__session_read_held() delivers it first.
 */
static bool
adopt(session_op *x, ssh_channel _Nullable ch)
{
    size_t held_before = 0;
    int n = 0;

    x->chan.ch = ch;
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
    sshcore__session_set_callbacks(x);
    held_before = x->out.held[0];
    /* with an empty buffer this processes packets, and sshcore__session_on_data
     * counts them */
    n = ssh_channel_poll(x->chan.ch, 0);
    if (n > 0 && x->out.held[0] == held_before) {
        sshcore__session_hold(x, 0, (size_t)n);
    }
    return stream_opened(x);
}

/** Forwarded: a remote forward's waiting connection. */
static bool
forwarded_open(sshcore_conn *conn, session_op *x)
{
    (void)conn;
    return adopt(x, sshcore__rforward_take(x->adopt.parent, x->adopt.id));
}

/** Ended before taking its forwarded connection: it is closed now, not at
 *  the forward's accept timeout. */
static void
forwarded_abandon(sshcore_conn *conn, session_op *x)
{
    ssh_channel ch = NULL;

    if (x->chan.ch != NULL || conn->session == NULL) {
        return;
    }
    ch = sshcore__rforward_take(x->adopt.parent, x->adopt.id);
    if (ch != NULL) {
        (void)ssh_channel_close(ch);
        ssh_channel_free(ch);
    }
}

static void
forwarded_destroy(session_op *x)
{
    if (x->adopt.parent != NULL) {
        sshcore_op_release(x->adopt.parent);
    }
}

const session_origin sshcore__forwarded_origin = {
    .open = forwarded_open,
    .abandon = forwarded_abandon,
    .destroy = forwarded_destroy,
};

/** Agent: a channel the server opened for our agent. */
static bool
agent_open(sshcore_conn *conn, session_op *x)
{
    ssh_channel ch = x->adopt.preset_ch;
    (void)conn;

    x->adopt.preset_ch = NULL;
    return adopt(x, ch);
}

/** An agent channel never taken is closed with the op. */
static void
agent_abandon(sshcore_conn *conn, session_op *x)
{
    if (x->adopt.preset_ch == NULL) {
        return;
    }
    if (conn->session != NULL) {
        (void)ssh_channel_close(x->adopt.preset_ch);
        ssh_channel_free(x->adopt.preset_ch);
    }
    x->adopt.preset_ch = NULL;
}

const session_origin sshcore__agent_origin = {
    .open = agent_open,
    .abandon = agent_abandon,
    .destroy = opened_nothing,
};

/* ---------------------------------------------------------------------- */
/* The setup states                                                        */
/* ---------------------------------------------------------------------- */

bool
sshcore__session_setup_opening(sshcore_conn *conn, session_op *x)
{
    return x->origin->open(conn, x);
}

bool
sshcore__session_setup_agent(sshcore_conn *conn, session_op *x)
{
    /* like ssh -A: the server's sessions may use our agent (a request without
     * a reply; a server that does not allow it simply opens no agent
     * channel) */
    if (conn->agent.socket != NULL && !x->req.subsystem) {
        if (!sshcore__agent_forwarding_arm(conn)) {
            sshcore__session_fail_call(conn,
                                       x,
                                       SSHCORE_E_CHANNEL_REQUEST_FAILED,
                                       "ssh_set_callbacks");
            return false;
        }
        if (ssh_channel_request_auth_agent(x->chan.ch) == SSH_AGAIN) {
            return false;
        }
    }
    return sshcore__session_chan_event(x, SSHCORE_CHAN_EV_AGENT_DONE) !=
           SSHCORE_CHAN_ACT_REJECT;
}

bool
sshcore__session_setup_env(sshcore_conn *conn, session_op *x)
{
    int rc;

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
            x->req.env_idx++; /* refused by AcceptEnv: left unset, as ssh does
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
}

bool
sshcore__session_setup_pty(sshcore_conn *conn, session_op *x)
{
    int rc;

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
}

bool
sshcore__session_setup_start(sshcore_conn *conn, session_op *x)
{
    int rc;

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
    sshcore__session_report_open(x, x->req.use_fallback ? 1 : 0);
    return true;
}
