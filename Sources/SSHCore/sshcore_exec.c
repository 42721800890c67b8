/*
 * sshcore_exec.c - creating session channel ops, and the public starts (a
 * collected command, a streamed command, shell or subsystem, a remote forward's
 * connection as a stream) and their results.
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

session_op *_Nullable sshcore__session_new(const char *_Nullable command,
                                           const char *_Nullable fallback,
                                           const sshcore_env_var *_Nullable env,
                                           size_t env_count)
{
    session_op *x = calloc(1, sizeof(*x));
    bool ok = true;
    size_t i;

    if (x == NULL) {
        return NULL;
    }
    pthread_mutex_init(&x->in.mu, NULL);
    atomic_init(&x->out.streamed.unconsumed, 0);
    atomic_init(&x->out.streamed.starved, 0);
    x->in.next_id = 1;
    x->chan.state = SSHCORE_CHAN_OPENING;
    if (command != NULL) {
        x->req.command = strdup(command);
        ok = x->req.command != NULL;
    }
    if (fallback != NULL) {
        x->req.fallback = strdup(fallback);
        ok = ok && x->req.fallback != NULL;
    }
    if (ok && env_count > 0) {
        x->req.env_names = calloc(env_count, sizeof(char *));
        x->req.env_values = calloc(env_count, sizeof(char *));
        ok = x->req.env_names != NULL && x->req.env_values != NULL;
        if (ok) {
            x->req.env_count = env_count;
            for (i = 0; ok && i < env_count; i++) {
                x->req.env_names[i] = strdup(env[i].name);
                x->req.env_values[i] = strdup(env[i].value);
                ok =
                    x->req.env_names[i] != NULL && x->req.env_values[i] != NULL;
            }
        }
    }
    if (!ok) {
        sshcore__session_destroy(&x->base);
        return NULL;
    }
    return x;
}

sshcore_op *
sshcore_exec_start(sshcore_conn *conn,
                   const sshcore_exec_spec *spec,
                   sshcore_op_done_fn done,
                   void *ctx,
                   sshcore_error *err)
{
    session_op *x = NULL;
    wreq *input = NULL;
    wreq *eof = NULL;

    if (spec->command == NULL ||
        (spec->stdin_len > 0 && spec->stdin_data == NULL) ||
        (spec->env_count > 0 && spec->env == NULL)) {
        sshcore__error_set(err,
                           SSHCORE_E_INVALID_ARGUMENT,
                           "incomplete exec spec");
        return NULL;
    }
    x = sshcore__session_new(spec->command,
                             spec->fallback_command,
                             spec->env,
                             spec->env_count);
    eof = calloc(1, sizeof(*eof));
    if (spec->stdin_len > 0) {
        input = calloc(1, sizeof(*input));
        if (input != NULL) {
            input->data = malloc(spec->stdin_len);
        }
    }
    if (x == NULL || eof == NULL ||
        (spec->stdin_len > 0 && (input == NULL || input->data == NULL))) {
        if (input != NULL) {
            free(input->data);
        }
        free(input);
        free(eof);
        if (x != NULL) {
            sshcore__session_destroy(&x->base);
        }
        sshcore__error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return NULL;
    }
    x->out.limit = spec->output_limit;
    /* stdin goes up front, then EOF: the queue the streamed form fills later */
    if (input != NULL) {
        memcpy(input->data, spec->stdin_data, spec->stdin_len);
        input->len = spec->stdin_len;
        sshcore__session_enqueue(x, input);
    }
    eof->eof = true;
    sshcore__session_enqueue(x, eof);
    x->in.eof_queued = true;
    return sshcore__session_submit(conn, x, done, ctx, 0, err);
}

sshcore_op *
sshcore_rforward_stream(sshcore_op *forward,
                        uint64_t id,
                        size_t buffer_limit,
                        const sshcore_stream_callbacks *callbacks,
                        sshcore_op_done_fn done,
                        void *ctx,
                        sshcore_error *err)
{
    session_op *x = NULL;

    if (!sshcore__op_is(forward,
                        SSHCORE_OP_RFORWARD,
                        "sshcore_rforward_stream",
                        err)) {
        return NULL;
    }
    if (callbacks->data == NULL || callbacks->started == NULL ||
        callbacks->released == NULL) {
        sshcore__error_set(err,
                           SSHCORE_E_INVALID_ARGUMENT,
                           "incomplete stream callbacks");
        return NULL;
    }
    x = sshcore__session_adopted_new(forward, id, buffer_limit, err);
    if (x == NULL) {
        return NULL;
    }
    x->cb = *callbacks;
    return sshcore__session_submit(forward->conn, x, done, ctx, 0, err);
}

session_op *
sshcore__session_from_spec(const sshcore_stream_spec *spec, sshcore_error *err)
{
    session_op *x = NULL;

    if (spec->kind != SSHCORE_CHANNEL_SESSION ||
        (spec->env_count > 0 && spec->env == NULL) || spec->buffer_limit == 0 ||
        spec->timeout_ms < 0 ||
        (spec->pty != NULL &&
         (spec->pty->term == NULL || spec->pty->cols == 0 ||
          spec->pty->rows == 0 || strlen(spec->pty->term) >= 64))) {
        sshcore__error_set(err,
                           SSHCORE_E_INVALID_ARGUMENT,
                           "incomplete stream spec");
        return NULL;
    }
    x = sshcore__session_new(spec->command,
                             spec->fallback_command,
                             spec->env,
                             spec->env_count);
    if (x == NULL) {
        sshcore__error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return NULL;
    }
    x->streamed = true;
    x->req.env_optional = spec->env_optional != 0;
    x->req.subsystem = spec->subsystem != 0 && spec->command != NULL;
    x->out.limit = spec->buffer_limit;
    if (spec->pty != NULL) {
        x->req.want_pty = true;
        snprintf(x->req.term, sizeof(x->req.term), "%s", spec->pty->term);
        x->req.cols = spec->pty->cols;
        x->req.rows = spec->pty->rows;
    }
    return x;
}

sshcore_op *
sshcore_stream_start(sshcore_conn *conn,
                     const sshcore_stream_spec *spec,
                     const sshcore_stream_callbacks *callbacks,
                     sshcore_op_done_fn done,
                     void *ctx,
                     sshcore_error *err)
{
    session_op *x = NULL;

    if (callbacks->data == NULL || callbacks->started == NULL ||
        callbacks->released == NULL) {
        sshcore__error_set(err,
                           SSHCORE_E_INVALID_ARGUMENT,
                           "incomplete stream callbacks");
        return NULL;
    }
    /* a direct channel is a byte stream with no requests */
    x = spec->kind == SSHCORE_CHANNEL_SESSION
            ? sshcore__session_from_spec(spec, err)
            : sshcore__session_direct_new(spec, err);
    if (x == NULL) {
        return NULL;
    }
    x->cb = *callbacks;
    return sshcore__session_submit(conn, x, done, ctx, spec->timeout_ms, err);
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

int
sshcore_stream_get_exit(sshcore_op *op, sshcore_exit_info *info)
{
    session_op *x = NULL;

    memset(info, 0, sizeof(*info));
    if (!sshcore__session_is_command(op, "sshcore_stream_get_exit", NULL)) {
        return SSHCORE_E_INVALID_ARGUMENT;
    }
    x = (session_op *)op;
    if (atomic_load(&op->done) == 0) {
        return SSHCORE_E_OK;
    }
    info->kind = x->chan.exit_kind;
    info->status = x->chan.exit_status;
    snprintf(info->signal, sizeof(info->signal), "%s", x->chan.exit_signal);
    info->core_dumped = x->chan.core_dumped;
    return SSHCORE_E_OK;
}

int
sshcore_exec_get_result(sshcore_op *op, sshcore_exec_result *r)
{
    session_op *x = NULL;

    memset(r, 0, sizeof(*r));
    if (!sshcore__op_is(op, SSHCORE_OP_EXEC, "sshcore_exec_get_result", NULL)) {
        return SSHCORE_E_INVALID_ARGUMENT;
    }
    x = (session_op *)op;
    if (atomic_load(&op->done) == 0 || op->err.code != SSHCORE_E_OK) {
        return SSHCORE_E_OK;
    }
    r->out = x->out.collected[0].data;
    r->out_len = x->out.collected[0].len;
    r->err = x->out.collected[1].data;
    r->err_len = x->out.collected[1].len;
    r->exit_kind = x->chan.exit_kind;
    r->exit_status = x->chan.exit_status;
    snprintf(r->exit_signal, sizeof(r->exit_signal), "%s", x->chan.exit_signal);
    r->core_dumped = x->chan.core_dumped;
    r->env_fallback_used = x->req.use_fallback;
    return SSHCORE_E_OK;
}
