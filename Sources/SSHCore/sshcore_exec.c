/*
 * sshcore_exec.c - the public starts of commands and streams (a collected
 * command, a streamed command, shell or subsystem, a direct channel as a
 * stream, a remote forward's connection as a stream), their results, and the
 * collected kind: a command's output gathered up to its limit for the caller.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sshcore_session.h"

/* ---------------------------------------------------------------------- */
/* The collected kind                                                      */
/* ---------------------------------------------------------------------- */

/** Adds `n` bytes to the collected output; false when the op ended because
 *  of it (output limit, memory). */
static bool
collected_deliver(session_op *x, int stream, const uint8_t *p, size_t n)
{
    if (n == 0) {
        return true;
    }
    if (x->out.collected[0].len + x->out.collected[1].len + n > x->out.limit) {
        char detail[96];
        snprintf(detail,
                 sizeof(detail),
                 "more than %zu bytes of output",
                 x->out.limit);
        sshcore__session_complete_code(x, SSHCORE_E_OUTPUT_LIMIT, detail);
        return false;
    }
    if (sshcore__bytes_append(&x->out.collected[stream], p, n) != 0) {
        sshcore__session_complete_code(x, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return false;
    }
    return true;
}

/** Collected output takes everything at once: nothing is ever held. */
static int
collected_on_data(session_op *x,
                  int stream,
                  const uint8_t *data,
                  uint32_t len,
                  size_t fresh)
{
    (void)fresh;
    (void)collected_deliver(x, stream, data, len);
    x->out.held[stream] = 0;
    return (int)len;
}

static size_t
collected_room(session_op *x)
{
    (void)x;
    return SIZE_MAX;
}

static void
collected_report_open(session_op *x, int env_fallback_used)
{
    (void)x;
    (void)env_fallback_used;
}

const session_kind sshcore__collected_kind = {
    .op =
        {
            .step = sshcore__session_step,
            .abort = sshcore__session_abort,
            .destroy = sshcore__session_destroy,
        },
    .public_kind = SSHCORE_OP_EXEC,
    /* stdin was given up front: a command that did not read it all is no
     * error */
    .unsent_input_code = SSHCORE_E_OK,
    .on_data = collected_on_data,
    .deliver = collected_deliver,
    .room = collected_room,
    .flush = sshcore__session_no_op,
    .pass_in = sshcore__session_no_pass,
    .pass_out = sshcore__session_no_pass,
    .output_waits = sshcore__session_nothing_waits,
    .report_open = collected_report_open,
    .report_eof = sshcore__session_no_op,
    .release = sshcore__session_no_op,
    .ended = sshcore__session_nothing_ended,
    .destroy = sshcore__session_no_op,
};

/* ---------------------------------------------------------------------- */
/* The public starts                                                       */
/* ---------------------------------------------------------------------- */

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
    x = sshcore__session_new(&sshcore__collected_kind,
                             spec->command,
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
    x = sshcore__session_adopted_new(&sshcore__streamed_kind,
                                     forward,
                                     id,
                                     buffer_limit,
                                     err);
    if (x == NULL) {
        return NULL;
    }
    x->cb = *callbacks;
    return sshcore__session_submit(forward->conn, x, done, ctx, 0, err);
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
            ? sshcore__session_from_spec(&sshcore__streamed_kind, spec, err)
            : sshcore__session_direct_new(&sshcore__streamed_kind, spec, err);
    if (x == NULL) {
        return NULL;
    }
    x->cb = *callbacks;
    return sshcore__session_submit(conn, x, done, ctx, spec->timeout_ms, err);
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
