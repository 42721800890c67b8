/*
 * sshcore_worker.c - the worker thread: requests from other threads (new
 * operations, close, cancel, the caller's answers), the event loop (poll on the
 * wake-up eventfd, the socket and the operations' own fds; read batching and
 * ACKs; deadlines as poll timeouts), stepping the connection's phase and the
 * operations, and completing every operation at the end (sshcore_teardown.c
 * closes the connection's fds).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>

#include "sshcore_internal.h"

/* ---------------------------------------------------------------------- */
/* Requests from other threads                                            */
/* ---------------------------------------------------------------------- */

typedef struct conn_requests {
    sshcore_op *_Nullable pending;
    bool close;
    bool cancel;
    bool verdict;
    bool accept;
    char reason[256];
    bool kbd;
    char *_Nullable *_Nullable answers;
    size_t answer_count;
} conn_requests;

/**
 * Takes what other threads asked for. The eventfd is drained only when poll()
 * said it was readable: a wake that lands after this still shows there, and
 * the requests themselves are taken in any case (a read that finds nothing
 * was a syscall on every pass, two per keystroke).
 */
static void
take_requests(sshcore_conn *conn, conn_requests *rq, bool drain)
{
    uint64_t drained;

    memset(rq, 0, sizeof(*rq));
    atomic_store(&conn->woken, 0); /* before the drain: a later wake sets it */
    pthread_mutex_lock(&conn->mu);
    if (drain && conn->wake_fd >= 0) {
        (void)!read(conn->wake_fd, &drained, sizeof(drained));
    }
    rq->pending = conn->pending_head;
    conn->pending_head = NULL;
    conn->pending_tail = NULL;
    rq->close = conn->close_requested;
    rq->cancel = conn->connect_cancelled;
    if (conn->answers.verdict_ready) {
        rq->verdict = true;
        rq->accept = conn->answers.verdict_accept;
        sshcore__copy_str(rq->reason,
                          sizeof(rq->reason),
                          conn->answers.verdict_reason);
        conn->answers.verdict_ready = false;
    }
    if (conn->answers.kbd_ready) {
        rq->kbd = true;
        rq->answers = conn->answers.kbd;
        rq->answer_count = conn->answers.kbd_count;
        conn->answers.kbd = NULL;
        conn->answers.kbd_count = 0;
        conn->answers.kbd_ready = false;
    }
    pthread_mutex_unlock(&conn->mu);
}

static void
handle_requests(sshcore_conn *conn, conn_requests *rq)
{
    sshcore_op *op = NULL;
    sshcore_op *next = NULL;
    sshcore_error err;

    if (rq->cancel && sshcore__conn_live(conn) &&
        conn->phase != SSHCORE_PHASE_READY) {
        sshcore__conn_fail(conn, SSHCORE_E_CANCELLED, NULL);
    }
    if (rq->close && sshcore__conn_live(conn)) {
        if (conn->phase != SSHCORE_PHASE_READY) {
            sshcore__error_set(&err,
                               SSHCORE_E_CANCELLED,
                               "closed while connecting");
            sshcore__conn_connect_complete(conn, &err);
        }
        if (sshcore__conn_event(conn, SSHCORE_PHASE_EV_CLOSE) ==
            SSHCORE_PHASE_ACT_TEAR_DOWN) {
            sshcore__error_set(&err, SSHCORE_E_CLOSED, NULL);
            sshcore__conn_fail_ops(conn, conn->active, &err);
            conn->active = NULL;
        }
    }
    if (rq->verdict && conn->phase == SSHCORE_PHASE_HOSTKEY_WAIT) {
        if (!rq->accept) {
            sshcore__conn_fail(conn, SSHCORE_E_HOST_KEY_REJECTED, rq->reason);
        } else {
            (void)sshcore__conn_event(conn, SSHCORE_PHASE_EV_HOSTKEY_ACCEPTED);
        }
    }
    if (rq->kbd && conn->phase == SSHCORE_PHASE_ANSWER_WAIT) {
        sshcore__auth_answers(conn, rq->answers, rq->answer_count);
    }
    sshcore__free_answers(rq->answers, rq->answer_count);
    rq->answers = NULL;

    /* newly submitted operations join the active list in FIFO order */
    for (op = rq->pending; op != NULL; op = next) {
        next = op->next;
        op->next = NULL;
        if (atomic_load(&op->cancel_requested)) {
            op->vt->abort(conn, op);
            sshcore_op_release(op);
            continue;
        }
        /* an op that comes after the connection ended changes nothing */
        if (sshcore__conn_event(conn, SSHCORE_PHASE_EV_OPEN_CHANNEL) !=
            SSHCORE_PHASE_ACT_OPEN_CHANNEL) {
            int code = atomic_load(&conn->fail_code);
            sshcore__error_set(&err, code != 0 ? code : SSHCORE_E_CLOSED, NULL);
            sshcore__conn_fail_ops(conn, op, &err);
            continue;
        }
        if (conn->active == NULL) {
            conn->active = op;
        } else {
            sshcore_op *tail = conn->active;
            while (tail->next != NULL) {
                tail = tail->next;
            }
            tail->next = op;
        }
    }
}

/* ---------------------------------------------------------------------- */
/* The event loop                                                         */
/* ---------------------------------------------------------------------- */

/** Worker: step every active op; unlink the finished and the cancelled. */
static bool
step_ops(sshcore_conn *conn)
{
    sshcore_op **link = &conn->active;
    sshcore_op *op = NULL;
    bool again = false;

    while ((op = *link) != NULL) {
        if (op->deadline_ms != 0 && atomic_load(&op->done) == 0 &&
            sshcore__now_ms() >= op->deadline_ms) {
            sshcore_error err;
            sshcore__error_set(&err, SSHCORE_E_TIMED_OUT, NULL);
            (void)sshcore__op_complete(op, &err);
        }
        if (atomic_load(&op->cancel_requested) == 0 &&
            atomic_load(&op->done) == 0) {
            if (op->vt->step(conn, op)) {
                again = true;
            }
        }
        if (atomic_load(&op->done) != 0) {
            *link = op->next;
            op->next = NULL;
            op->vt->abort(conn, op);
            sshcore_op_release(op);
            continue;
        }
        link = &op->next;
    }
    return again;
}

static bool
advance(sshcore_conn *conn)
{
    switch (conn->phase) {
    case SSHCORE_PHASE_RESOLVE:
        sshcore__connect_resolve(conn);
        return conn->phase != SSHCORE_PHASE_RESOLVE;
    case SSHCORE_PHASE_TCP_START:
        sshcore__connect_tcp_start(conn);
        return conn->phase == SSHCORE_PHASE_HANDSHAKE;
    case SSHCORE_PHASE_TCP_WAIT:
        return false;
    case SSHCORE_PHASE_HANDSHAKE:
        sshcore__connect_handshake(conn);
        return false;
    case SSHCORE_PHASE_HOSTKEY_WAIT:
        return false;
    case SSHCORE_PHASE_AUTH_NONE:
        sshcore__auth_none(conn);
        sshcore__auth_check_session(conn);
        return conn->phase != SSHCORE_PHASE_AUTH_NONE;
    case SSHCORE_PHASE_AUTH_METHOD: {
        size_t idx = conn->setup->method_idx;
        sshcore__auth_method_step(conn);
        sshcore__auth_check_session(conn);
        return conn->phase == SSHCORE_PHASE_READY ||
               conn->setup->method_idx != idx;
    }
    case SSHCORE_PHASE_ANSWER_WAIT:
        return false;
    case SSHCORE_PHASE_READY: {
        /* Any libssh call may read and dispatch packets for every channel.
         * If a pass consumed packets, an op stepped earlier in the pass may
         * have new data, EOF or a close waiting that no poll() will announce:
         * step again. */
        uint64_t before = conn->packet_counter.in_packets;
        bool again = step_ops(conn);
        sshcore__keepalive_check(conn);
        if (conn->gslot.cancels != NULL && conn->phase == SSHCORE_PHASE_READY) {
            sshcore__global_service(conn);
        }
        if (conn->phase != SSHCORE_PHASE_READY) {
            return false;
        }
        if (conn->orphans != NULL) {
            sshcore__orphans_reap(conn);
        }
        if (conn->packet_counter.in_packets != before &&
            (conn->active != NULL || conn->orphans != NULL)) {
            again = true;
        }
        if (conn->phase == SSHCORE_PHASE_READY &&
            !sshcore__conn_libssh_usable(conn)) {
            sshcore__conn_fail_lib(conn,
                                   sshcore__conn_failure_code(conn),
                                   "ssh_is_connected");
        }
        return again;
    }
    case SSHCORE_PHASE_IDLE:
    case SSHCORE_PHASE_CLOSING:
    case SSHCORE_PHASE_CLOSED:
    case SSHCORE_PHASE_FAILED:
        return false;
    case SSHCORE_PHASE__COUNT:
        return false;
    }
    return false;
}

/* A pass that read less than this is request/response traffic: ACK it now. */
#define QUICKACK_BELOW (16 * 1024)

/**
 * ACK what was just read at once. OpenSSH sends small packets back to back
 * (after authentication: a hostkeys notice, then our channel-open
 * confirmation); with our ACK delayed, the server's Nagle holds the second
 * one for ~40 ms. Linux sends a scheduled delayed ACK immediately when
 * TCP_QUICKACK is set, and the flag is not sticky, so set it after reads.
 *
 * Only after small reads: during a bulk download the kernel ACKs on its own
 * (every second full segment, and when a read empties the queue), and a
 * setsockopt plus a forced ACK per pass cost 17% of the worker's time and
 * extra ACK processing in sshd (measured with perf on `cat` of 256 MiB).
 */
static void
ack_now(sshcore_conn *conn, uint64_t read_bytes)
{
    int one = 1;
    if (conn->sock_fd >= 0 && read_bytes < QUICKACK_BELOW) {
        (void)setsockopt(conn->sock_fd,
                         IPPROTO_TCP,
                         TCP_QUICKACK,
                         &one,
                         sizeof(one));
    }
}

/* How often gated input is retried where POLLOUT cannot be trusted to mean
 * "the send queue drained below the gate" (see sshcore__conn_worker_main). */
#define SEND_WAKE_TICK_MS 2

/* One pass reads at most this much before the ops are stepped again. */
#define READ_PER_PASS (512 * 1024)
/* What libssh 0.10 asks the socket for in one recv (and 0.11 alike). */
#define LIBSSH_READ 4096

/**
 * Lets libssh read and dispatch what the socket holds. libssh 0.10 reads at
 * most 4 KiB per poll event, so one call per pass meant a poll, a recv and a
 * hand-over per 4 KiB (an SSH data packet is 32 KiB). Calling it again while
 * it still finds bytes, up to READ_PER_PASS, lets whole packets and batches
 * form first. Each call polls the socket itself with timeout 0, so pending
 * writes still go out in between.
 *
 * The pass also ends as soon as another thread has a request (a keystroke to
 * send) or a streamed op got a short packet (an echo to hand over): beside a
 * bulk stream, waiting for the rest of the pass added up to two passes, about
 * 0.5 ms each, to every keystroke's round trip.
 */
static void
read_socket(sshcore_conn *conn)
{
    uint64_t start = conn->socket_counter.in_bytes;
    uint64_t last = start;

    conn->end_pass = false;
    for (;;) {
        (void)ssh_event_dopoll(conn->event, 0);
        /* a dead link, or a packet that failed its integrity check (libssh then
         * stays "connected" and every later call fails: notes row 13) */
        if (!sshcore__conn_libssh_usable(conn)) {
            sshcore__conn_fail_lib(conn,
                                   sshcore__conn_failure_code(conn),
                                   "ssh_event_dopoll");
            return;
        }
        /* less than libssh reads at once: the socket is empty (another
         * call would only poll it) */
        if (conn->socket_counter.in_bytes - last < LIBSSH_READ ||
            conn->socket_counter.in_bytes - start >= READ_PER_PASS ||
            conn->end_pass || atomic_load(&conn->woken) != 0) {
            return;
        }
        last = conn->socket_counter.in_bytes;
    }
}

/**
 * libssh marks its socket for POLLOUT after every write, and sends the next
 * packet straight away only after that event. After a pass that wrote a
 * little (a keystroke) and read nothing, take the event now, while the server
 * answers, rather than in one more wake of the loop. True when the call read
 * data for the ops (they are stepped before the worker sleeps).
 */
static bool
settle_small_write(sshcore_conn *conn, uint64_t out_before)
{
    uint64_t in_before = conn->socket_counter.in_bytes;

    if (conn->phase != SSHCORE_PHASE_READY || conn->event == NULL ||
        conn->backlog.blocked ||
        conn->socket_counter.out_bytes - out_before >= LIBSSH_READ ||
        (ssh_get_poll_flags(conn->session) & SSH_WRITE_PENDING) == 0) {
        return false;
    }
    read_socket(conn);
    return conn->socket_counter.in_bytes != in_before;
}

static int
poll_timeout(sshcore_conn *conn)
{
    int64_t now;
    int64_t left;

    if (conn->phase == SSHCORE_PHASE_READY) {
        int64_t due = sshcore__keepalive_due_ms(conn);
        int64_t orphans = sshcore__conn_orphans_due_ms(conn);
        sshcore_op *op = NULL;
        if (orphans >= 0 && (due < 0 || orphans < due)) {
            due = orphans;
        }
        for (op = conn->active; op != NULL; op = op->next) {
            if (op->deadline_ms != 0 && (due < 0 || op->deadline_ms < due)) {
                due = op->deadline_ms;
            }
            if (op->wake_ms != 0 && (due < 0 || op->wake_ms < due)) {
                due = op->wake_ms;
            }
        }
        if (due < 0) {
            return -1;
        }
        left = due - sshcore__now_ms();
        return left <= 0 ? 0 : (left > 60000 ? 60000 : (int)left);
    }
    if (conn->setup == NULL || conn->setup->deadline_ms == 0 ||
        conn->setup->paused_at_ms != 0) {
        return -1;
    }
    now = sshcore__now_ms();
    left = conn->setup->deadline_ms - now;
    if (left <= 0) {
        return 0;
    }
    return left > 60000 ? 60000 : (int)left;
}

/** Worker: room for `need` entries in the op poll arrays; false without memory.
 */
static bool
reserve_pfds(sshcore_conn *conn, size_t need)
{
    size_t cap = conn->op_poll.cap == 0 ? 16 : conn->op_poll.cap;
    struct pollfd *p = NULL;
    sshcore_op **o = NULL;

    if (need <= conn->op_poll.cap) {
        return true;
    }
    while (cap < need) {
        cap *= 2;
    }
    p = realloc(conn->op_poll.fds, cap * sizeof(*p));
    if (p == NULL) {
        return false;
    }
    conn->op_poll.fds = p;
    o = realloc(conn->op_poll.ops, cap * sizeof(*o));
    if (o == NULL) {
        return false;
    }
    conn->op_poll.ops = o;
    conn->op_poll.cap = cap;
    return true;
}

/**
 * Worker: the poll set with the fds the active ops wait on (bridged sockets)
 * after the core's `base` entries. Returns its size and points *out at it;
 * without memory the ops' fds are left out (they are still stepped on the
 * socket's events) and *out is `core`.
 */
static nfds_t
add_op_fds(sshcore_conn *conn,
           struct pollfd *core,
           nfds_t base,
           struct pollfd *_Nonnull *_Nonnull out)
{
    nfds_t n = base;
    sshcore_op *op = NULL;

    *out = core;
    if (!reserve_pfds(conn, base)) {
        return base;
    }
    memcpy(conn->op_poll.fds, core, base * sizeof(*core));
    for (op = conn->active; op != NULL; op = op->next) {
        short events = 0;
        int fd = -1;

        if (op->vt->poll_fd == NULL || atomic_load(&op->done) != 0) {
            continue;
        }
        fd = op->vt->poll_fd(conn, op, &events);
        if (fd < 0) {
            continue;
        }
        if (!reserve_pfds(conn, n + 1)) {
            break;
        }
        conn->op_poll.fds[n].fd = fd;
        conn->op_poll.fds[n].events = events;
        conn->op_poll.fds[n].revents = 0;
        conn->op_poll.ops[n] = op;
        n++;
    }
    *out = conn->op_poll.fds;
    return n;
}

void *_Nullable sshcore__conn_worker_main(void *arg)
{
    sshcore_conn *conn = arg;
    conn_requests rq;
    struct pollfd core_pfd[2];
    struct pollfd *pfd = core_pfd;
    nfds_t nfds;
    nfds_t core_nfds;
    bool again = false;
    int timeout;
    int wake_fd;
    char name[16];
    sigset_t all;

    /* signals are for the application's threads, not ours */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    snprintf(name, sizeof(name), "sshcore:%.7s", conn->host);
    pthread_setname_np(pthread_self(), name);

    (void)sshcore__conn_event(conn,
                              conn->sock_fd >= 0
                                  ? SSHCORE_PHASE_EV_START_ON_SOCKET
                                  : SSHCORE_PHASE_EV_START);
    conn->setup->deadline_ms = sshcore__now_ms() + conn->connect_timeout_ms;

    bool readable = false;
    bool pollout_seen = false;
    bool send_wake_by_timer = false;
    uint64_t read_mark = 0;
    uint64_t out_mark = 0;
    bool settle = false;
    bool wake_readable = true; /* nothing polled yet */
    while (sshcore__conn_live(conn)) {
        take_requests(conn, &rq, wake_readable);
        handle_requests(conn, &rq);
        if (!sshcore__conn_live(conn)) {
            break;
        }
        conn->backlog.blocked = false;
        out_mark = conn->socket_counter.out_bytes;
        again = advance(conn);
        if (conn->setup != NULL && conn->phase == SSHCORE_PHASE_READY) {
            /* what connecting and authenticating needed, secrets included */
            sshcore__conn_setup_free(conn);
        }
        /* POLLOUT came, yet the queue is still over the gate: a kernel without
         * the TCP_NOTSENT_LOWAT wake-up rule (before 4.20) raises POLLOUT below
         * the low-water mark, not half of it. Poll on a short timer instead of
         * for POLLOUT, which would spin. */
        send_wake_by_timer = conn->backlog.blocked && pollout_seen;
        /* a pass that read the socket (a download's window adjust) polls on */
        settle = !readable && out_mark != conn->socket_counter.out_bytes;
        if (readable) {
            /* read_socket() and advance() have read what poll() announced */
            ack_now(conn, conn->socket_counter.in_bytes - read_mark);
            readable = false;
        }
        if (!again && settle) {
            again = settle_small_write(conn, out_mark);
        }
        if (!sshcore__conn_live(conn)) {
            break;
        }
        /* More work is ready: poll without waiting rather than skip the poll,
         * so the socket is still serviced every pass. libssh writes a queued
         * packet only after a POLLOUT event: a busy channel that kept the loop
         * from polling held every other channel's writes back (measured: 60 to
         * 270 ms echo stalls beside a bulk stream). */
        if (!again && conn->phase != SSHCORE_PHASE_READY &&
            conn->setup != NULL && conn->setup->deadline_ms != 0 &&
            conn->setup->paused_at_ms == 0 &&
            sshcore__now_ms() >= conn->setup->deadline_ms) {
            sshcore__conn_fail(conn, SSHCORE_E_CONNECT_TIMEOUT, NULL);
            break;
        }

        pfd = core_pfd;
        nfds = 0;
        pthread_mutex_lock(&conn->mu);
        wake_fd = conn->wake_fd;
        pthread_mutex_unlock(&conn->mu);
        pfd[nfds].fd = wake_fd;
        pfd[nfds].events = POLLIN;
        pfd[nfds].revents = 0;
        nfds++;
        if (conn->phase == SSHCORE_PHASE_TCP_WAIT) {
            pfd[nfds].fd = conn->sock_fd;
            pfd[nfds].events = POLLOUT;
            pfd[nfds].revents = 0;
            nfds++;
        } else if (conn->session != NULL &&
                   conn->phase != SSHCORE_PHASE_HOSTKEY_WAIT &&
                   conn->phase != SSHCORE_PHASE_ANSWER_WAIT &&
                   conn->phase != SSHCORE_PHASE_RESOLVE &&
                   conn->phase != SSHCORE_PHASE_TCP_START) {
            pfd[nfds].fd = conn->lib_fd;
            pfd[nfds].events = POLLIN;
            /* libssh has output to flush, or an op held input back until the
             * kernel's send queue drains (nothing else may wake us then) */
            if ((ssh_get_poll_flags(conn->session) & SSH_WRITE_PENDING) != 0 ||
                (conn->backlog.blocked && !send_wake_by_timer)) {
                pfd[nfds].events |= POLLOUT;
            }
            pfd[nfds].revents = 0;
            nfds++;
        }
        /* with ops' own fds the whole set lives in conn->op_poll.fds */
        core_nfds = nfds;
        if (conn->phase == SSHCORE_PHASE_READY && conn->active != NULL) {
            nfds = add_op_fds(conn, core_pfd, core_nfds, &pfd);
        }
        timeout = again ? 0 : poll_timeout(conn);
        if (send_wake_by_timer &&
            (timeout < 0 || timeout > SEND_WAKE_TICK_MS)) {
            timeout = SEND_WAKE_TICK_MS;
        }
        pollout_seen = false;
        if (poll(pfd, nfds, timeout) < 0 && errno != EINTR) {
            sshcore__conn_fail(conn, SSHCORE_E_SYSTEM, "poll failed");
            break;
        }
        wake_readable = pfd[0].revents != 0;
        for (nfds_t i = core_nfds; i < nfds; i++) {
            if (pfd[i].revents != 0) {
                sshcore_op *op = conn->op_poll.ops[i];
                op->vt->poll_event(op, pfd[i].revents);
            }
        }
        if (core_nfds > 1 && pfd[1].revents != 0) {
            readable = (pfd[1].revents & POLLIN) != 0;
            pollout_seen = (pfd[1].revents & POLLOUT) != 0;
            read_mark = conn->socket_counter.in_bytes;
            if (conn->phase == SSHCORE_PHASE_TCP_WAIT) {
                sshcore__connect_tcp_wait(conn);
            } else if (conn->phase == SSHCORE_PHASE_READY &&
                       conn->event != NULL) {
                read_socket(conn);
            }
        }
    }

    /* closing: every op has been failed; release libssh and the fds */
    sshcore__conn_teardown(conn);
    {
        sshcore_error err;
        sshcore__error_set(&err, SSHCORE_E_CLOSED, NULL);
        (void)sshcore__conn_connect_complete(
            conn,
            &err); /* no-op unless never reported */
    }
    (void)sshcore__conn_event(conn, SSHCORE_PHASE_EV_TORN_DOWN);

    /* ops submitted after the end fail with the connection's final state */
    pthread_mutex_lock(&conn->mu);
    conn->worker_exited = true;
    wake_fd = conn->wake_fd;
    conn->wake_fd = -1;
    rq.pending = conn->pending_head;
    conn->pending_head = NULL;
    conn->pending_tail = NULL;
    pthread_mutex_unlock(&conn->mu);
    {
        sshcore_error err;
        int code = atomic_load(&conn->fail_code);
        sshcore__error_set(&err, code != 0 ? code : SSHCORE_E_CLOSED, NULL);
        sshcore__conn_fail_ops(conn, rq.pending, &err);
    }
    sshcore__global_free_all(conn); /* nothing of the worker's runs after */
    if (wake_fd >= 0) {
        close(wake_fd);
    }
    if (conn->cb.terminated != NULL) {
        conn->cb.terminated(conn->cb.ctx);
    }
    sshcore__conn_registry_remove(conn);
    atomic_fetch_sub(&sshcore_live_workers, 1);
    sshcore__conn_unref(conn);
    return NULL;
}
