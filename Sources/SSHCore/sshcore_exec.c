/*
 * sshcore_exec.c - run one command on its own channel.
 *
 * Each exec is an operation on the connection's worker: it opens a session
 * channel, sends env requests (falling back to a prefixed command when the
 * server refuses them), execs, feeds stdin within the peer's window, and
 * drains stdout and stderr together on every turn so neither can block the
 * other. Collected output is bounded by output_limit. Exit status and exit
 * signal arrive through libssh channel callbacks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sshcore_internal.h"

enum { X_OPEN, X_ENV, X_EXEC, X_IO };

/* Per turn and stream, read at most this much, so one busy channel cannot
 * starve its siblings on the same connection. */
#define READ_BUDGET (256 * 1024)
#define READ_CHUNK (64 * 1024)
#define WRITE_CHUNK (64 * 1024)

typedef struct exec_op {
    sshcore_op base;
    char *command;
    char *_Nullable fallback;
    uint8_t *_Nullable stdin_buf;
    size_t stdin_len;
    size_t stdin_off;
    char **env_names;
    char **env_values;
    size_t env_count;
    size_t env_idx;
    size_t limit;

    int phase;
    bool use_fallback;
    ssh_channel _Nullable ch;
    struct ssh_channel_callbacks_struct cbs;
    sshcore_chan_state cstate;
    bool eof[2];
    bool eof_sent;
    sshcore_bytes out[2];

    sshcore_exit_kind exit_kind;
    int exit_status;
    char exit_signal[32];
    int core_dumped;
} exec_op;

static void on_exit_status(ssh_session session, ssh_channel channel, int status,
                           void *userdata)
{
    exec_op *x = userdata;
    (void)session;
    (void)channel;
    x->exit_kind = SSHCORE_EXIT_STATUS;
    x->exit_status = status;
}

static void on_exit_signal(ssh_session session, ssh_channel channel,
                           const char *signal, int core, const char *errmsg,
                           const char *lang, void *userdata)
{
    exec_op *x = userdata;
    (void)session;
    (void)channel;
    (void)errmsg;
    (void)lang;
    x->exit_kind = SSHCORE_EXIT_SIGNAL;
    snprintf(x->exit_signal, sizeof(x->exit_signal), "%s", signal != NULL ? signal : "");
    x->core_dumped = core;
}

static void exec_fail(exec_op *x, int code, ssh_session _Nullable s, const char *fn)
{
    sshcore_error err;
    sshcore_error_from_session(&err, code, s, fn);
    (void)sshcore_op_complete(&x->base, &err);
}

/** A libssh call on the channel failed: blame the connection if it is gone. */
static void exec_fail_call(sshcore_conn *conn, exec_op *x, int channel_code, const char *fn)
{
    int code = channel_code;
    if (!ssh_is_connected(conn->session)) {
        code = sshcore_conn_failure_code(conn);
    }
    exec_fail(x, code, conn->session, fn);
}

/** Apply a channel event; a rejected transition is a bug in this file. */
static sshcore_chan_action chan_event(exec_op *x, sshcore_chan_event ev)
{
    sshcore_chan_state before = x->cstate;
    sshcore_chan_action act = sshcore_chan_fsm_apply(&x->cstate, ev);

    if (act == SSHCORE_CHAN_ACT_REJECT) {
        sshcore_error err;
        char detail[128];
        snprintf(detail, sizeof(detail), "channel event %s in state %s",
                 sshcore_chan_event_name(ev), sshcore_chan_state_name(before));
        sshcore_error_set(&err, SSHCORE_E_INVALID_STATE, detail);
        (void)sshcore_op_complete(&x->base, &err);
    }
    return act;
}

static bool exec_io(sshcore_conn *conn, exec_op *x)
{
    ssh_session s = conn->session;
    uint8_t buf[READ_CHUNK];
    bool again = false;
    int stream;

    /* The peer closed the channel (the command exited without reading all of
     * its stdin): what is left of stdin has nowhere to go. Not an error. */
    if (!x->eof_sent && ssh_channel_is_closed(x->ch)) {
        x->stdin_off = x->stdin_len;
        x->eof_sent = true;
    }

    /* stdin, within the peer's window, without piling up in libssh's buffer */
    if (x->stdin_off < x->stdin_len &&
        (x->cstate == SSHCORE_CHAN_OPEN || x->cstate == SSHCORE_CHAN_EOF_RECEIVED) &&
        (ssh_get_poll_flags(s) & SSH_WRITE_PENDING) == 0) {
        size_t n = x->stdin_len - x->stdin_off;
        uint32_t win = ssh_channel_window_size(x->ch);
        if (n > win) {
            n = win;
        }
        if (n > WRITE_CHUNK) {
            n = WRITE_CHUNK;
        }
        if (n > 0) {
            int w = ssh_channel_write(x->ch, x->stdin_buf + x->stdin_off, (uint32_t)n);
            if (w < 0 && !ssh_is_connected(s)) {
                exec_fail_call(conn, x, SSHCORE_E_PROTOCOL, "ssh_channel_write");
                return false;
            }
            if (w < 0) {
                /* the channel is closing (libssh delays the close until its
                 * buffers are read): drop the rest of stdin, keep reading */
                x->stdin_off = x->stdin_len;
                x->eof_sent = true;
                w = 0;
            }
            x->stdin_off += (size_t)w;
            again = w > 0 && x->stdin_off < x->stdin_len;
        }
    }
    if (x->stdin_off == x->stdin_len && !x->eof_sent &&
        (x->cstate == SSHCORE_CHAN_OPEN || x->cstate == SSHCORE_CHAN_EOF_RECEIVED)) {
        /* SSH_AGAIN: the EOF is queued, only the flush is pending */
        if (ssh_channel_send_eof(x->ch) == SSH_ERROR) {
            exec_fail_call(conn, x, SSHCORE_E_PROTOCOL, "ssh_channel_send_eof");
            return false;
        }
        x->eof_sent = true;
        if (chan_event(x, SSHCORE_CHAN_EV_SEND_EOF) == SSHCORE_CHAN_ACT_REJECT) {
            return false;
        }
    }

    /* stdout and stderr, always both, so neither can fill its window and
     * stall the other */
    for (stream = 0; stream < 2; stream++) {
        size_t budget = READ_BUDGET;
        while (!x->eof[stream] && budget > 0) {
            int n = ssh_channel_read_nonblocking(x->ch, buf, sizeof(buf), stream);
            if (n > 0) {
                if (x->out[0].len + x->out[1].len + (size_t)n > x->limit) {
                    char detail[96];
                    sshcore_error err;
                    snprintf(detail, sizeof(detail), "more than %zu bytes of output", x->limit);
                    sshcore_error_set(&err, SSHCORE_E_OUTPUT_LIMIT, detail);
                    (void)sshcore_op_complete(&x->base, &err);
                    return false;
                }
                if (sshcore_bytes_append(&x->out[stream], buf, (size_t)n) != 0) {
                    exec_fail(x, SSHCORE_E_OUT_OF_MEMORY, NULL, "");
                    return false;
                }
                budget -= (size_t)n < budget ? (size_t)n : budget;
                continue;
            }
            if (n == SSH_EOF) {
                x->eof[stream] = true;
                break;
            }
            if (n == 0) {
                break;
            }
            exec_fail_call(conn, x, SSHCORE_E_PROTOCOL, "ssh_channel_read_nonblocking");
            return false;
        }
        if (budget == 0) {
            again = true;
        }
    }

    /* Reading may have flushed libssh's pending output as a side effect
     * (no packet arrives to announce it): if stdin is waiting only for that,
     * take another turn instead of sleeping in poll(). */
    if (x->stdin_off < x->stdin_len &&
        (x->cstate == SSHCORE_CHAN_OPEN || x->cstate == SSHCORE_CHAN_EOF_RECEIVED) &&
        (ssh_get_poll_flags(s) & SSH_WRITE_PENDING) == 0 && ssh_channel_window_size(x->ch) > 0) {
        again = true;
    }

    if (x->eof[0] && x->eof[1] &&
        (x->cstate == SSHCORE_CHAN_OPEN || x->cstate == SSHCORE_CHAN_EOF_SENT)) {
        if (chan_event(x, SSHCORE_CHAN_EV_RECV_EOF) == SSHCORE_CHAN_ACT_REJECT) {
            return false;
        }
    }

    if (ssh_channel_is_closed(x->ch)) {
        if (!ssh_is_connected(s)) {
            exec_fail(x, sshcore_conn_failure_code(conn), s, "ssh_channel_is_closed");
            return false;
        }
        if (x->eof[0] && x->eof[1]) {
            if (chan_event(x, SSHCORE_CHAN_EV_RECV_CLOSE) == SSHCORE_CHAN_ACT_FINISH) {
                sshcore_error ok;
                sshcore_error_set(&ok, SSHCORE_E_OK, NULL);
                (void)sshcore_op_complete(&x->base, &ok);
            }
            return false;
        }
        again = true; /* closed with data still buffered: drain it first */
    }
    return again;
}

static bool exec_step(sshcore_conn *conn, sshcore_op *op)
{
    exec_op *x = (exec_op *)op;
    ssh_session s = conn->session;
    int rc;

    switch (x->phase) {
    case X_OPEN:
        if (x->ch == NULL) {
            x->ch = ssh_channel_new(s);
            if (x->ch == NULL) {
                exec_fail(x, SSHCORE_E_OUT_OF_MEMORY, s, "ssh_channel_new");
                return false;
            }
            memset(&x->cbs, 0, sizeof(x->cbs));
            x->cbs.userdata = x;
            x->cbs.channel_exit_status_function = on_exit_status;
            x->cbs.channel_exit_signal_function = on_exit_signal;
            ssh_callbacks_init(&x->cbs);
            ssh_set_channel_callbacks(x->ch, &x->cbs);
        }
        rc = ssh_channel_open_session(x->ch);
        if (rc == SSH_AGAIN) {
            return false;
        }
        if (rc != SSH_OK) {
            (void)chan_event(x, SSHCORE_CHAN_EV_OPEN_FAILED);
            exec_fail_call(conn, x, SSHCORE_E_CHANNEL_OPEN_REFUSED, "ssh_channel_open_session");
            return false;
        }
        if (chan_event(x, SSHCORE_CHAN_EV_OPEN_OK) != SSHCORE_CHAN_ACT_START_IO) {
            return false;
        }
        x->phase = X_ENV;
        return true;
    case X_ENV:
        if (x->env_idx >= x->env_count || x->use_fallback) {
            x->phase = X_EXEC;
            return true;
        }
        rc = ssh_channel_request_env(x->ch, x->env_names[x->env_idx], x->env_values[x->env_idx]);
        if (rc == SSH_AGAIN) {
            return false;
        }
        if (rc != SSH_OK) {
            if (!ssh_is_connected(s) || x->fallback == NULL) {
                exec_fail_call(conn, x, SSHCORE_E_CHANNEL_REQUEST_FAILED, "ssh_channel_request_env");
                return false;
            }
            x->use_fallback = true; /* the server's AcceptEnv refused it */
            return true;
        }
        x->env_idx++;
        return true;
    case X_EXEC:
        rc = ssh_channel_request_exec(x->ch, x->use_fallback ? x->fallback : x->command);
        if (rc == SSH_AGAIN) {
            return false;
        }
        if (rc != SSH_OK) {
            exec_fail_call(conn, x, SSHCORE_E_CHANNEL_REQUEST_FAILED, "ssh_channel_request_exec");
            return false;
        }
        x->phase = X_IO;
        return true;
    case X_IO:
        return exec_io(conn, x);
    }
    return false;
}

static void exec_abort(sshcore_conn *conn, sshcore_op *op)
{
    exec_op *x = (exec_op *)op;

    if (x->ch == NULL) {
        return;
    }
    /* libssh keeps a channel the peer has not closed yet until its CLOSE
     * arrives and would still call our callbacks, whose struct lives in this
     * op: unregister them before letting go */
    ssh_remove_channel_callbacks(x->ch, &x->cbs);
    if (conn->session != NULL && ssh_is_connected(conn->session)) {
        if (x->phase == X_OPEN) {
            /* Still opening: freed now, libssh would forget the channel and
             * the server's later confirmation would leave it open on the
             * server for good (counting against MaxSessions). */
            sshcore_conn_adopt_opening_channel(conn, x->ch);
            x->ch = NULL;
            (void)sshcore_chan_fsm_apply(&x->cstate, SSHCORE_CHAN_EV_CLOSE);
            return;
        }
        if (!ssh_channel_is_closed(x->ch) && x->phase == X_IO &&
            atomic_load(&op->cancel_requested) != 0) {
            /* a cancelled command should not keep running on the server */
            (void)ssh_channel_request_send_signal(x->ch, "TERM");
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

static void exec_destroy(sshcore_op *op)
{
    exec_op *x = (exec_op *)op;
    size_t i;

    free(x->command);
    free(x->fallback);
    free(x->stdin_buf);
    for (i = 0; i < x->env_count; i++) {
        free(x->env_names != NULL ? x->env_names[i] : NULL);
        free(x->env_values != NULL ? x->env_values[i] : NULL);
    }
    free(x->env_names);
    free(x->env_values);
    sshcore_bytes_free(&x->out[0]);
    sshcore_bytes_free(&x->out[1]);
    free(x);
}

static const sshcore_op_vtable exec_vtable = {
    .step = exec_step,
    .abort = exec_abort,
    .destroy = exec_destroy,
};

sshcore_op *sshcore_exec_start(sshcore_conn *conn, const sshcore_exec_spec *spec,
                               sshcore_op_done_fn done, void *ctx, sshcore_error *err)
{
    exec_op *x = NULL;
    bool ok = true;
    size_t i;

    if (spec->command == NULL || (spec->stdin_len > 0 && spec->stdin_data == NULL) ||
        (spec->env_count > 0 && spec->env == NULL)) {
        sshcore_error_set(err, SSHCORE_E_INVALID_ARGUMENT, "incomplete exec spec");
        return NULL;
    }
    x = calloc(1, sizeof(*x));
    if (x == NULL) {
        sshcore_error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return NULL;
    }
    x->command = strdup(spec->command);
    ok = x->command != NULL;
    if (spec->fallback_command != NULL) {
        x->fallback = strdup(spec->fallback_command);
        ok = ok && x->fallback != NULL;
    }
    if (spec->stdin_len > 0) {
        x->stdin_buf = malloc(spec->stdin_len);
        ok = ok && x->stdin_buf != NULL;
        if (x->stdin_buf != NULL) {
            memcpy(x->stdin_buf, spec->stdin_data, spec->stdin_len);
            x->stdin_len = spec->stdin_len;
        }
    }
    if (spec->env_count > 0) {
        x->env_names = calloc(spec->env_count, sizeof(char *));
        x->env_values = calloc(spec->env_count, sizeof(char *));
        ok = ok && x->env_names != NULL && x->env_values != NULL;
        if (ok) {
            x->env_count = spec->env_count;
            for (i = 0; ok && i < spec->env_count; i++) {
                x->env_names[i] = strdup(spec->env[i].name);
                x->env_values[i] = strdup(spec->env[i].value);
                ok = x->env_names[i] != NULL && x->env_values[i] != NULL;
            }
        }
    }
    x->limit = spec->output_limit;
    x->cstate = SSHCORE_CHAN_OPENING;
    x->phase = X_OPEN;
    if (!ok) {
        exec_destroy(&x->base);
        sshcore_error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return NULL;
    }
    sshcore_op_init(&x->base, &exec_vtable, conn, done, ctx);
    if (sshcore_conn_submit(conn, &x->base, err) != 0) {
        sshcore_conn *c = x->base.conn;
        exec_destroy(&x->base);
        sshcore_conn_unref(c);
        return NULL;
    }
    return &x->base;
}

void sshcore_exec_get_result(sshcore_op *op, sshcore_exec_result *r)
{
    exec_op *x = (exec_op *)op;

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
