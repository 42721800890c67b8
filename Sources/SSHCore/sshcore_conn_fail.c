/*
 * sshcore_conn_fail.c - how a connection ends (worker): the connect outcome
 * reported exactly once, the first failure kept as the code later calls
 * report, every active operation completed, and whether libssh's session can
 * still be used.
 */
#include <stdbool.h>

#include "sshcore_internal.h"

/* ---------------------------------------------------------------------- */
/* Completing the connect operation                                       */
/* ---------------------------------------------------------------------- */

/** Reports the connect outcome exactly once; returns false if already reported.
 */
bool
sshcore__conn_connect_complete(sshcore_conn *conn, const sshcore_error *err)
{
    int expected = 0;

    if (!atomic_compare_exchange_strong(&conn->connect_done, &expected, 1)) {
        return false;
    }
    conn->cb.connected(conn->cb.ctx, err);
    return true;
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
