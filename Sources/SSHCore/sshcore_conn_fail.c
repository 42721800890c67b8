/*
 * sshcore_conn_fail.c - the connection's machine applied (worker): its
 * events, the public state they publish, the connect deadline paused while the
 * caller decides; and how a connection ends: the first failure kept as the
 * code later calls report, the connect outcome reported, every active
 * operation completed, and whether libssh's session can still be used.
 */
#include <stdbool.h>

#include "sshcore_internal.h"

/* ---------------------------------------------------------------------- */
/* The connection's machine (sshcore_fsm.h), applied                       */
/* ---------------------------------------------------------------------- */

static void
phase_rejected(sshcore_conn *conn, const char *detail)
{
    /* failure is allowed in every phase: this does not come back here */
    sshcore__conn_fail(conn, SSHCORE_E_INVALID_STATE, detail);
}

static SSHCORE_APPLIER(phase_apply,
                       phase,
                       PHASE,
                       SSHCORE_MACHINE_CONN,
                       sshcore_conn,
                       phase,
                       phase_rejected)

    void sshcore__conn_pause_deadline(sshcore_conn *conn)
{
    conn->setup->paused_at_ms = sshcore__now_ms();
}

void
sshcore__conn_resume_deadline(sshcore_conn *conn)
{
    if (conn->setup->paused_at_ms != 0 && conn->setup->deadline_ms != 0) {
        conn->setup->deadline_ms +=
            sshcore__now_ms() - conn->setup->paused_at_ms;
    }
    conn->setup->paused_at_ms = 0;
}

sshcore_phase_action
sshcore__conn_event(sshcore_conn *conn, sshcore_phase_event event)
{
    sshcore_phase before = conn->phase;
    sshcore_phase_action act = phase_apply(conn, event);

    switch (act) {
    case SSHCORE_PHASE_ACT_ASK_CALLER:
        sshcore__conn_pause_deadline(
            conn); /* the caller's time is not the network's */
        break;
    case SSHCORE_PHASE_ACT_RESUME:
        sshcore__conn_resume_deadline(conn); /* no-op unless paused */
        break;
    case SSHCORE_PHASE_ACT_REJECT:
        return act; /* the connection failed */
    case SSHCORE_PHASE_ACT_NONE:
    case SSHCORE_PHASE_ACT_REPORT_READY:
    case SSHCORE_PHASE_ACT_OPEN_CHANNEL:
    case SSHCORE_PHASE_ACT_TEAR_DOWN:
    case SSHCORE_PHASE_ACT__COUNT:
        break; /* the caller acts on these */
    }
    if (conn->phase != before) {
        atomic_store(&conn->state_snapshot,
                     (int)sshcore_conn_state_of(conn->phase));
    }
    return act;
}

void
sshcore__conn_fail_ops(sshcore_conn *conn,
                       sshcore_op *_Nullable list,
                       const sshcore_error *err)
{
    sshcore_op *op = list;
    sshcore_op *next = NULL;

    while (op != NULL) {
        next = op->next;
        op->next = NULL;
        (void)sshcore__op_complete(op, err);
        op->vt->abort(conn, op);
        sshcore_op_release(op);
        op = next;
    }
}

/** Worker: the connection failed or was closed; everything goes down. */
void
sshcore__conn_fail_with(sshcore_conn *conn, const sshcore_error *err)
{
    sshcore_phase_action act;
    sshcore_error op_err = *err;

    int none = 0;

    /* the first failure is what later calls on this connection report */
    (void)atomic_compare_exchange_strong(&conn->fail_code, &none, err->code);
    act = sshcore__conn_event(conn, SSHCORE_PHASE_EV_FAILURE);
    if (act != SSHCORE_PHASE_ACT_TEAR_DOWN) {
        return;
    }
    if (atomic_load(&conn->connect_done) == 0) {
        /* A failed connect is reported once the server can see the connection
         * gone (the teardown that closes the socket comes later): a caller
         * that counts connections at once (a fleet's handshake limit, sshd's
         * MaxStartups) never has one more open than it counted. */
        sshcore__conn_shutdown_socket(conn);
    }
    sshcore__conn_connect_complete(conn, err);
    sshcore__conn_fail_ops(conn, conn->active, &op_err);
    conn->active = NULL;
}

bool
sshcore__conn_libssh_usable(sshcore_conn *conn)
{
    return conn->session != NULL && ssh_is_connected(conn->session) &&
           (ssh_get_status(conn->session) & SSH_CLOSED_ERROR) == 0;
}

/* ---------------------------------------------------------------------- */
/* Failing (worker)                                                       */
/* ---------------------------------------------------------------------- */

void
sshcore__conn_fail(sshcore_conn *conn, int code, const char *_Nullable detail)
{
    sshcore_error err;
    sshcore__error_set(&err, code, detail);
    sshcore__conn_fail_with(conn, &err);
}

void
sshcore__conn_fail_lib(sshcore_conn *conn,
                       int code,
                       const char *_Nullable function)
{
    sshcore_error err;
    sshcore__error_from_session(&err, code, conn->session, function);
    sshcore__conn_fail_with(conn, &err);
}
