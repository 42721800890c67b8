/*
 * sshcore_keepalive.c - liveness and the global-request slot, on the worker.
 *
 * After each interval of silence a keepalive probe goes out; too many
 * unanswered probes lose the connection.
 *
 * libssh 0.10 has one slot for global requests with a reply: a second request
 * sent while one is pending takes the first one's answer, and an answer stays
 * in the slot until the next request call collects it (sending nothing).
 * Keepalive probes and remote forwards (sshcore_rforward.c) use it. The core
 * tracks who asked the question the slot holds (conn->gslot.state): a request
 * goes out only when the slot is free, an answer nobody waits for (a probe's, a
 * cancel's) is collected first, and probes wait while an op's question is
 * out. Tracking, not packet counters: processing packets can send some
 * (window adjusts), and a request queued during a key re-exchange is sent
 * later.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <libssh/server.h> /* ssh_send_keepalive: declared there, a client call too */

#include "sshcore_internal.h"

/* ---------------------------------------------------------------------- */
/* The global-request slot                                                */
/* ---------------------------------------------------------------------- */

static void
gslot_rejected(sshcore_conn *conn, const char *detail)
{
    sshcore__conn_fail(conn, SSHCORE_E_INVALID_STATE, detail);
}

SSHCORE_APPLIER(sshcore__gslot_event,
                gslot,
                GSLOT,
                SSHCORE_MACHINE_GSLOT,
                sshcore_conn,
                gslot.state,
                gslot_rejected)

bool
sshcore__global_slot_free(sshcore_conn *conn)
{
    int rc;

    switch (conn->gslot.state) {
    case SSHCORE_GSLOT_FREE:
        return true;
    case SSHCORE_GSLOT_OWNED:
        return false;
    case SSHCORE_GSLOT_KEEPALIVE:
    case SSHCORE_GSLOT_CANCEL:
    case SSHCORE_GSLOT_ORPHAN_FORWARD:
    case SSHCORE_GSLOT__COUNT:
        break;
    }
    /* libssh's slot is not idle: any global-request call only collects */
    rc = ssh_channel_cancel_forward(conn->session, "", 0);
    if (rc == SSH_AGAIN) {
        return false;
    }
    if (sshcore__gslot_event(conn, SSHCORE_GSLOT_EV_COLLECTED) ==
            SSHCORE_GSLOT_ACT_UNDO_IF_ACCEPTED &&
        rc == SSH_OK) {
        /* the server listens for an op that is gone: undo it */
        struct sshcore_gcancel *c = calloc(1, sizeof(*c));
        if (c != NULL) {
            c->address = conn->gslot.orphan_address;
            conn->gslot.orphan_address = NULL;
            c->port = conn->gslot.orphan_port;
            c->next = conn->gslot.cancels;
            conn->gslot.cancels = c;
        }
    }
    free(conn->gslot.orphan_address);
    conn->gslot.orphan_address = NULL;
    return conn->gslot.state == SSHCORE_GSLOT_FREE;
}

void
sshcore__global_service(sshcore_conn *conn)
{
    while (conn->gslot.cancels != NULL && sshcore__global_slot_free(conn)) {
        struct sshcore_gcancel *c = conn->gslot.cancels;
        int rc;

        conn->gslot.cancels = c->next;
        rc = ssh_channel_cancel_forward(conn->session, c->address, c->port);
        free(c->address);
        free(c);
        if (rc == SSH_AGAIN) {
            /* its answer is collected by the next user */
            (void)sshcore__gslot_event(conn, SSHCORE_GSLOT_EV_CANCEL_SENT);
            return;
        }
    }
}

void
sshcore__global_free_all(sshcore_conn *conn)
{
    while (conn->gslot.cancels != NULL) {
        struct sshcore_gcancel *c = conn->gslot.cancels;
        conn->gslot.cancels = c->next;
        free(c->address);
        free(c);
    }
    free(conn->gslot.orphan_address);
    conn->gslot.orphan_address = NULL;
}

/** Worker: files every forwarded connection libssh queued under its forward. */

/* ---------------------------------------------------------------------- */
/* Liveness                                                               */
/* ---------------------------------------------------------------------- */

/** How long the last probe may go unanswered: min(interval / 2, 1 s). */
static int64_t
keepalive_grace_ms(const sshcore_conn *conn)
{
    int64_t half = conn->ka.interval_ms / 2;
    return half < 1000 ? half : 1000;
}

/**
 * When the keepalive clock next needs the worker: the next probe, or the
 * moment the connection counts as lost. -1 when keepalive is off.
 */
int64_t
sshcore__keepalive_due_ms(const sshcore_conn *conn)
{
    int64_t interval = conn->ka.interval_ms;

    if (interval <= 0 || conn->phase != SSHCORE_PHASE_READY) {
        return -1;
    }
    if (conn->ka.probes < conn->ka.max_missed) {
        return conn->ka.last_rx_ms + interval * (conn->ka.probes + 1);
    }
    return conn->ka.last_rx_ms + interval * conn->ka.max_missed +
           keepalive_grace_ms(conn);
}

/**
 * Sends one keepalive@openssh.com request with want-reply. libssh 0.10's
 * ssh_send_keepalive() sends only when its single global-request slot is
 * idle: after an answer arrived, the next call just consumes that answer and
 * sends nothing. The core tracks the slot (conn->gslot.state) and collects such
 * an answer first. If the previous probe is still unanswered nothing is sent,
 * which is right: one outstanding probe is enough to make a live server talk.
 */
static void
keepalive_probe(sshcore_conn *conn)
{
    /* libssh has one global-request slot. While a question is out (an earlier
     * probe, a forward request or its cancel) nothing is sent: its answer makes
     * a live server talk just as well, and a probe would take it as its own. */
    if (!sshcore__global_slot_free(conn)) {
        return;
    }
    (void)ssh_send_keepalive(conn->session);
    (void)sshcore__gslot_event(conn, SSHCORE_GSLOT_EV_PROBE_SENT);
}

/**
 * Any packet from the server proves it alive. After each interval of silence
 * a probe goes out; once max_missed probes are unanswered and the last had
 * its grace, the connection is lost. A silent partition and a frozen server
 * (whose kernel still ACKs, so TCP alone never notices) look the same here.
 */
void
sshcore__keepalive_check(sshcore_conn *conn)
{
    int64_t now;
    int64_t due;

    if (conn->ka.interval_ms <= 0 || conn->phase != SSHCORE_PHASE_READY) {
        return;
    }
    now = sshcore__now_ms();
    if (conn->packet_counter.in_packets != conn->ka.seen_packets) {
        conn->ka.seen_packets = conn->packet_counter.in_packets;
        conn->ka.last_rx_ms = now;
        conn->ka.probes = 0;
    }
    due = sshcore__keepalive_due_ms(conn);
    if (now < due) {
        return;
    }
    if (conn->ka.probes >= conn->ka.max_missed) {
        char detail[160];
        snprintf(detail,
                 sizeof(detail),
                 "no answer from the server for %lld ms (%d keepalive%s "
                 "unanswered, interval %d ms)",
                 (long long)(now - conn->ka.last_rx_ms),
                 conn->ka.probes,
                 conn->ka.probes == 1 ? "" : "s",
                 conn->ka.interval_ms);
        sshcore__conn_fail(conn, SSHCORE_E_CONNECTION_LOST, detail);
        return;
    }
    conn->ka.probes++;
    keepalive_probe(conn);
}
