/*
 * sshcore_rforward.c - remote forwarding: a "tcpip-forward" global request,
 * then the "forwarded-tcpip" channels the server opens for connections to
 * its port, kept open and waiting until the caller hands each one on (a
 * bridge to a socket, or a stream) or rejects it.
 *
 * The request goes out through libssh's one global-request slot, which
 * keepalive probes share (sshcore_keepalive.c says how it is tracked).
 *
 * Incoming channels are queued by libssh as messages; any forward op's step
 * accepts them all and files each under the forward whose port it reached.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sshcore_internal.h"

typedef struct waiting {
    struct waiting *_Nullable next;
    uint64_t id;
    ssh_channel ch;
    int64_t deadline_ms;
} waiting;

typedef struct rforward_op {
    sshcore_op base;
    sshcore_rforward_callbacks cb;
    char *_Nullable address;
    int port;
    int accept_timeout_ms;
    bool released;

    /* inbox (any thread), guarded by mu */
    pthread_mutex_t mu;
    uint64_t *_Nullable rejects;
    size_t reject_count;
    size_t reject_cap;

    /* worker only */
    sshcore_rf_state state; /* its machine: sshcore_fsm.h */
    uint64_t next_id;
    waiting *_Nullable waiting_head;
} rforward_op;

static const sshcore_op_vtable rforward_vtable;

static void
rf_rejected(rforward_op *x, const char *detail)
{
    sshcore_error err;
    sshcore__error_set(&err, SSHCORE_E_INVALID_STATE, detail);
    (void)sshcore__op_complete(&x->base, &err);
}

/** Applies an event to the forward's machine and returns the action for the
 *  caller to act on; a rejected one (a core bug) fails the op. */
static SSHCORE_APPLIER(rf_event,
                       rf,
                       RF,
                       SSHCORE_MACHINE_RFORWARD,
                       rforward_op,
                       state,
                       rf_rejected)

    static void complete_code(rforward_op *x,
                              int code,
                              const char *_Nullable detail)
{
    sshcore_error err;
    sshcore__error_set(&err, code, detail);
    (void)sshcore__op_complete(&x->base, &err);
}

static void
close_waiting_channel(ssh_channel ch)
{
    (void)ssh_channel_close(ch);
    ssh_channel_free(ch);
}

static void
accept_incoming(sshcore_conn *conn)
{
    for (;;) {
        int dest_port = 0;
        int orig_port = 0;
        char *orig = NULL;
        ssh_channel ch = ssh_channel_open_forward_port(conn->session,
                                                       0,
                                                       &dest_port,
                                                       &orig,
                                                       &orig_port);
        rforward_op *owner = NULL;
        sshcore_op *op = NULL;

        if (ch == NULL) {
            return;
        }
        for (op = conn->active; op != NULL; op = op->next) {
            rforward_op *f = (rforward_op *)op;
            if (op->vt == &rforward_vtable && f->state == SSHCORE_RF_LISTEN &&
                f->port == dest_port && atomic_load(&op->done) == 0) {
                owner = f;
                break;
            }
        }
        if (owner == NULL) {
            /* a straggler for a forward that ended */
            close_waiting_channel(ch);
            ssh_string_free_char(orig);
            continue;
        }
        waiting *w = calloc(1, sizeof(*w));
        if (w == NULL) {
            close_waiting_channel(ch);
            ssh_string_free_char(orig);
            continue;
        }
        w->id = ++owner->next_id;
        w->ch = ch;
        w->deadline_ms = sshcore__now_ms() + owner->accept_timeout_ms;
        w->next = owner->waiting_head;
        owner->waiting_head = w;
        owner->cb.incoming(owner->cb.ctx,
                           w->id,
                           orig != NULL ? orig : "",
                           orig_port);
        ssh_string_free_char(orig);
    }
}

ssh_channel
sshcore__rforward_take(sshcore_op *forward, uint64_t id)
{
    rforward_op *x = (rforward_op *)forward;
    waiting **link = &x->waiting_head;

    if (forward->vt != &rforward_vtable) {
        return NULL;
    }
    while (*link != NULL) {
        waiting *w = *link;
        if (w->id == id) {
            ssh_channel ch = w->ch;
            *link = w->next;
            free(w);
            return ch;
        }
        link = &w->next;
    }
    return NULL;
}

/** Worker: rejected and expired waiting connections are closed. */
static void
sweep_waiting(rforward_op *x)
{
    uint64_t *rejects = NULL;
    size_t count = 0;
    size_t i;
    int64_t now = sshcore__now_ms();

    pthread_mutex_lock(&x->mu);
    rejects = x->rejects;
    count = x->reject_count;
    x->rejects = NULL;
    x->reject_count = 0;
    x->reject_cap = 0;
    pthread_mutex_unlock(&x->mu);
    for (i = 0; i < count; i++) {
        ssh_channel ch = sshcore__rforward_take(&x->base, rejects[i]);
        if (ch != NULL) {
            close_waiting_channel(ch);
        }
    }
    free(rejects);
    x->base.wake_ms = 0;
    waiting **link = &x->waiting_head;
    while (*link != NULL) {
        waiting *w = *link;
        if (w->deadline_ms <= now) {
            *link = w->next;
            close_waiting_channel(w->ch);
            free(w);
            continue;
        }
        if (x->base.wake_ms == 0 || w->deadline_ms < x->base.wake_ms) {
            x->base.wake_ms =
                w->deadline_ms; /* expire it even on an idle connection */
        }
        link = &w->next;
    }
}

static bool finish_request(sshcore_conn *conn, rforward_op *x, int rc);

/** Whether another forward on this connection has `port` (requested or bound):
 *  forwarded connections are told apart by port only. */
static bool
port_taken(sshcore_conn *conn, rforward_op *x)
{
    for (sshcore_op *op = conn->active; op != NULL; op = op->next) {
        rforward_op *f = (rforward_op *)op;
        if (op != &x->base && op->vt == &rforward_vtable &&
            atomic_load(&op->done) == 0 &&
            (f->state == SSHCORE_RF_WAIT || f->state == SSHCORE_RF_LISTEN) &&
            f->port == x->port) {
            return true;
        }
    }
    return false;
}

/** Sends the tcpip-forward request once the slot is free. */
static bool
request_step(sshcore_conn *conn, rforward_op *x)
{
    ssh_session s = conn->session;
    int rc;

    if (port_taken(conn, x)) {
        complete_code(x,
                      SSHCORE_E_FORWARD_REFUSED,
                      "this connection already forwards that port");
        return false;
    }
    if (conn->gslot.cancels != NULL) {
        /* cancels go first: the port may be one being given back */
        sshcore__global_service(conn);
        return false;
    }
    if (!sshcore__global_slot_free(conn)) {
        return false; /* another question is out; its answer wakes us */
    }
    rc = ssh_channel_listen_forward(s, x->address, x->port, NULL);
    if (!sshcore__conn_libssh_usable(conn)) {
        sshcore_error err;
        sshcore__error_from_session(&err,
                                    sshcore__conn_failure_code(conn),
                                    s,
                                    "ssh_channel_listen_forward");
        (void)sshcore__op_complete(&x->base, &err);
        return false;
    }
    if (rf_event(x, SSHCORE_RF_EV_SENT) == SSHCORE_RF_ACT_REJECT) {
        return false;
    }
    if (rc == SSH_AGAIN) {
        if (sshcore__gslot_event(conn, SSHCORE_GSLOT_EV_REQUEST_SENT) !=
            SSHCORE_GSLOT_ACT_REJECT) {
            conn->gslot.owner = &x->base;
        }
        return false;
    }
    return finish_request(conn, x, rc); /* answered within the call */
}

/** The answer to our request: listening, or refused. */
static bool
finish_request(sshcore_conn *conn, rforward_op *x, int rc)
{
    ssh_session s = conn->session;

    if (conn->gslot.state == SSHCORE_GSLOT_OWNED &&
        conn->gslot.owner == &x->base) {
        conn->gslot.owner = NULL;
        (void)sshcore__gslot_event(conn, SSHCORE_GSLOT_EV_ANSWERED);
    }
    if (rc == SSH_OK) {
        if (rf_event(x, SSHCORE_RF_EV_ACCEPTED) ==
            SSHCORE_RF_ACT_REPORT_LISTENING) {
            x->cb.listening(x->cb.ctx, x->port);
            return true;
        }
        return false;
    }
    if (!sshcore__conn_libssh_usable(conn)) {
        sshcore_error err;
        sshcore__error_from_session(&err,
                                    sshcore__conn_failure_code(conn),
                                    s,
                                    "ssh_channel_listen_forward");
        (void)sshcore__op_complete(&x->base, &err);
        return false;
    }
    {
        sshcore_error err;
        sshcore__error_from_session(&err,
                                    SSHCORE_E_FORWARD_REFUSED,
                                    s,
                                    "ssh_channel_listen_forward");
        snprintf(err.detail,
                 sizeof(err.detail),
                 "tcpip-forward %s:%d",
                 x->address != NULL ? x->address : "",
                 x->port);
        (void)sshcore__op_complete(&x->base, &err);
    }
    return false;
}

static bool
wait_step(sshcore_conn *conn, rforward_op *x)
{
    int rc =
        ssh_channel_listen_forward(conn->session, x->address, x->port, NULL);

    if (rc == SSH_AGAIN) {
        return false;
    }
    return finish_request(conn, x, rc);
}

static bool
rforward_step(sshcore_conn *conn, sshcore_op *op)
{
    rforward_op *x = (rforward_op *)op;

    switch (x->state) {
    case SSHCORE_RF_REQUEST:
        return request_step(conn, x);
    case SSHCORE_RF_WAIT:
        return wait_step(conn, x);
    case SSHCORE_RF_LISTEN:
        accept_incoming(conn);
        sweep_waiting(x);
        return false;
    case SSHCORE_RF_ENDED:
    case SSHCORE_RF__COUNT:
        break;
    }
    return false;
}

static void
release_callbacks(rforward_op *x)
{
    if (!x->released) {
        x->released = true;
        x->cb.released(x->cb.ctx);
    }
}

static void
rforward_abort(sshcore_conn *conn, sshcore_op *op)
{
    rforward_op *x = (rforward_op *)op;
    ssh_session s = conn->session;
    sshcore_rf_action act;

    while (x->waiting_head != NULL) {
        waiting *w = x->waiting_head;
        x->waiting_head = w->next;
        if (s != NULL) {
            close_waiting_channel(w->ch);
        }
        free(w);
    }
    act = rf_event(x, SSHCORE_RF_EV_END);
    if (act == SSHCORE_RF_ACT_ABANDON_QUESTION &&
        conn->gslot.state == SSHCORE_GSLOT_OWNED && conn->gslot.owner == op) {
        /* our question is still out: if the server says yes, it listens for
         * nobody; the next user of the slot collects the answer and cancels */
        (void)sshcore__gslot_event(conn, SSHCORE_GSLOT_EV_OWNER_GONE);
        conn->gslot.owner = NULL;
        free(conn->gslot.orphan_address);
        conn->gslot.orphan_address =
            strdup(x->address != NULL ? x->address : "");
        conn->gslot.orphan_port = x->port;
    } else if (act == SSHCORE_RF_ACT_CANCEL_FORWARD &&
               sshcore__conn_libssh_usable(conn)) {
        struct sshcore_gcancel *c = calloc(1, sizeof(*c));
        if (c != NULL) {
            c->address = strdup(x->address != NULL ? x->address : "");
            c->port = x->port;
            c->next = conn->gslot.cancels;
            conn->gslot.cancels = c;
            sshcore__global_service(conn); /* now if the slot is free */
        }
    }
    release_callbacks(x);
}

static void
rforward_destroy(sshcore_op *op)
{
    rforward_op *x = (rforward_op *)op;

    release_callbacks(x);
    free(x->address);
    free(x->rejects);
    pthread_mutex_destroy(&x->mu);
    free(x);
}

static const sshcore_op_vtable rforward_vtable = {
    .step = rforward_step,
    .abort = rforward_abort,
    .destroy = rforward_destroy,
};

sshcore_op *
sshcore_rforward_start(sshcore_conn *conn,
                       const char *bind_address,
                       int port,
                       int accept_timeout_ms,
                       const sshcore_rforward_callbacks *callbacks,
                       sshcore_op_done_fn done,
                       void *ctx,
                       sshcore_error *err)
{
    rforward_op *x = NULL;

    if (port < 1 || port > 65535 || accept_timeout_ms <= 0 ||
        callbacks->listening == NULL || callbacks->incoming == NULL ||
        callbacks->released == NULL) {
        sshcore__error_set(err,
                           SSHCORE_E_INVALID_ARGUMENT,
                           "incomplete remote forward spec");
        return NULL;
    }
    x = calloc(1, sizeof(*x));
    if (x == NULL ||
        (bind_address != NULL && (x->address = strdup(bind_address)) == NULL)) {
        free(x);
        sshcore__error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return NULL;
    }
    pthread_mutex_init(&x->mu, NULL);
    x->cb = *callbacks;
    x->port = port;
    x->accept_timeout_ms = accept_timeout_ms;
    x->state = SSHCORE_RF_REQUEST;
    sshcore__op_init(&x->base,
                     &rforward_vtable,
                     SSHCORE_OP_RFORWARD,
                     conn,
                     done,
                     ctx);
    if (sshcore__conn_submit(conn, &x->base, err) != 0) {
        sshcore_conn *c = x->base.conn;
        x->released = true; /* the caller learns it from NULL */
        rforward_destroy(&x->base);
        sshcore__conn_unref(c);
        return NULL;
    }
    return &x->base;
}

int
sshcore_rforward_reject(sshcore_op *forward, uint64_t id)
{
    rforward_op *x = NULL;
    int rc = SSHCORE_E_OK;

    if (!sshcore__op_is(forward,
                        SSHCORE_OP_RFORWARD,
                        "sshcore_rforward_reject",
                        NULL)) {
        return SSHCORE_E_INVALID_ARGUMENT;
    }
    x = (rforward_op *)forward;
    pthread_mutex_lock(&x->mu);
    if (x->reject_count == x->reject_cap) {
        size_t cap = x->reject_cap == 0 ? 8 : x->reject_cap * 2;
        uint64_t *r = realloc(x->rejects, cap * sizeof(*r));
        if (r == NULL) {
            rc = SSHCORE_E_OUT_OF_MEMORY; /* it will time out instead */
            goto out;
        }
        x->rejects = r;
        x->reject_cap = cap;
    }
    x->rejects[x->reject_count++] = id;

out:
    pthread_mutex_unlock(&x->mu);
    if (rc == SSHCORE_E_OK) {
        sshcore__conn_wake(forward->conn);
    }
    return rc;
}
