/*
 * sshcore_op.c - the op interface: what every operation shares (reference
 * counting, the exactly-once completion, cancel, its kind checked by the public
 * calls), and the growable byte buffer ops use. The worker reaches an op only
 * through its vtable (sshcore_internal.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sshcore_internal.h"

void
sshcore__op_init(sshcore_op *op,
                 const sshcore_op_vtable *vt,
                 sshcore_op_kind kind,
                 sshcore_conn *conn,
                 sshcore_op_done_fn done,
                 void *ctx)
{
    atomic_init(&op->refs, 2); /* the caller's and the worker's */
    atomic_init(&op->claimed, 0);
    atomic_init(&op->done, 0);
    atomic_init(&op->cancel_requested, 0);
    op->vt = vt;
    op->kind = kind;
    op->conn = conn;
    sshcore__conn_retain(conn);
    op->done_fn = done;
    op->ctx = ctx;
    memset(&op->err, 0, sizeof(op->err));
    op->deadline_ms = 0;
    op->next = NULL;
}

bool
sshcore__op_complete(sshcore_op *op, const sshcore_error *err)
{
    int expected = 0;

    if (!atomic_compare_exchange_strong(&op->claimed, &expected, 1)) {
        return false;
    }
    /* err is final before anyone can see done: the worker reads it when it
     * aborts the op, which may happen before done_fn below has returned */
    op->err = *err;
    atomic_store(&op->done, 1);
    op->done_fn(op->ctx, op);
    return true;
}

void
sshcore__op_retain(sshcore_op *op)
{
    atomic_fetch_add(&op->refs, 1);
}

void
sshcore_op_release(sshcore_op *op)
{
    sshcore_conn *conn = NULL;

    if (atomic_fetch_sub(&op->refs, 1) != 1) {
        return;
    }
    conn = op->conn;
    op->vt->destroy(op);
    sshcore__conn_unref(conn);
}

void
sshcore_op_cancel(sshcore_op *op)
{
    sshcore_error err;
    /* Once the completion has run, the caller may drop its reference and the
     * worker its own: `op` can be gone before the wake-up. Hold the
     * connection, not the op, across it. */
    sshcore_conn *conn = op->conn;

    sshcore__conn_retain(conn);
    atomic_store(&op->cancel_requested, 1);
    sshcore__error_set(&err, SSHCORE_E_CANCELLED, NULL);
    (void)sshcore__op_complete(op, &err);
    sshcore__conn_wake(conn);
    sshcore__conn_unref(conn);
}

const sshcore_error *
sshcore_op_error(sshcore_op *op)
{
    return &op->err;
}

sshcore_op_kind
sshcore_op_get_kind(sshcore_op *op)
{
    return op->kind;
}

static const char *
kind_name(sshcore_op_kind kind)
{
    switch (kind) {
    case SSHCORE_OP_EXEC:
        return "an exec";
    case SSHCORE_OP_STREAM:
        return "a stream";
    case SSHCORE_OP_BRIDGE:
        return "a bridge";
    case SSHCORE_OP_RFORWARD:
        return "a remote forward";
    }
    return "an unknown";
}

bool
sshcore__op_is(sshcore_op *op,
               sshcore_op_kind kind,
               const char *call,
               sshcore_error *err)
{
    char detail[160];

    if (op->kind == kind) {
        return true;
    }
    if (err != NULL) {
        snprintf(detail,
                 sizeof(detail),
                 "%s takes %s operation, not %s operation",
                 call,
                 kind_name(kind),
                 kind_name(op->kind));
        sshcore__error_set(err, SSHCORE_E_INVALID_ARGUMENT, detail);
    }
    return false;
}

int
sshcore__bytes_reserve(sshcore_bytes *b, size_t n)
{
    uint8_t *grown = NULL;
    size_t cap = 0;

    if (b->len + n <= b->cap) {
        return 0;
    }
    cap = b->cap == 0 ? 16384 : b->cap;
    while (cap < b->len + n) {
        cap *= 2;
    }
    grown = realloc(b->data, cap);
    if (grown == NULL) {
        return -1;
    }
    b->data = grown;
    b->cap = cap;
    return 0;
}

int
sshcore__bytes_append(sshcore_bytes *b, const void *p, size_t n)
{
    if (n == 0) {
        return 0;
    }
    if (sshcore__bytes_reserve(b, n) != 0) {
        return -1;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

void
sshcore__bytes_free(sshcore_bytes *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}
