/*
 * sshcore_conn.c - the connection object: its lifetime (references; the
 * registry of running workers is in sshcore_registry.c), its socket fd
 * (shutdown from any thread, close on the worker), the connect outcome
 * reported once, and its public entry points (start, cancel, the host-key
 * verdict and keyboard-interactive reply, close, release, submit).
 *
 * The session runs in libssh's non-blocking mode on one worker thread
 * (sshcore_worker.c). Nothing on the worker ever waits on the network inside
 * libssh, so cancellation is a wake-up; a connection-level cancel additionally
 * shutdown()s the socket (under conn->mu, which the close step also takes, so
 * a reused fd number is never shut down).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>

#include "sshcore_internal.h"

static atomic_long live_connections;

long
sshcore_debug_live_connections(void)
{
    return atomic_load(&live_connections);
}

/* ---------------------------------------------------------------------- */
/* Reference counting, wake-up, state publication                         */
/* ---------------------------------------------------------------------- */

static void
wipe_free(const char *_Nullable secret)
{
    if (secret != NULL) {
        explicit_bzero((char *)secret, strlen(secret));
        free((char *)secret);
    }
}

/** Frees the setup's copy of the configuration (secrets wiped). */
static void
free_setup_config(struct sshcore_conn_setup *setup)
{
    size_t i;

    wipe_free(setup->prompted_password);
    setup->prompted_password = NULL;
    wipe_free(setup->prompted_passphrase);
    setup->prompted_passphrase = NULL;
    for (i = 0; setup->methods != NULL && i < setup->method_count; i++) {
        wipe_free(setup->methods[i].secret);
        wipe_free(setup->methods[i].passphrase);
        free((char *)setup->methods[i].certificate);
    }
    free(setup->methods);
    setup->methods = NULL;
    for (i = 0; setup->algorithms != NULL && i < setup->algorithm_count; i++) {
        free((char *)setup->algorithms[i].list);
    }
    free(setup->algorithms);
    setup->algorithms = NULL;
}

void
sshcore__conn_setup_free(sshcore_conn *conn)
{
    struct sshcore_conn_setup *setup = conn->setup;

    if (setup == NULL) {
        return;
    }
    sshcore__auth_release(conn); /* the key, its agent, the agent socket */
    if (setup->ai_list != NULL) {
        freeaddrinfo(setup->ai_list);
    }
    free_setup_config(setup);
    free(setup);
    conn->setup = NULL;
}

static void
free_kbd_answers(sshcore_conn *conn)
{
    size_t i;

    if (conn->answers.kbd != NULL) {
        for (i = 0; i < conn->answers.kbd_count; i++) {
            if (conn->answers.kbd[i] != NULL) {
                explicit_bzero(conn->answers.kbd[i],
                               strlen(conn->answers.kbd[i]));
                free(conn->answers.kbd[i]);
            }
        }
        free(conn->answers.kbd);
    }
    conn->answers.kbd = NULL;
    conn->answers.kbd_count = 0;
}

void
sshcore__free_answers(char *_Nullable *_Nullable answers, size_t n)
{
    size_t i;
    if (answers == NULL) {
        return;
    }
    for (i = 0; i < n; i++) {
        if (answers[i] != NULL) {
            explicit_bzero(answers[i], strlen(answers[i]));
            free(answers[i]);
        }
    }
    free(answers);
}

static void
conn_free(sshcore_conn *conn)
{
    void (*released)(void *) = conn->cb.released;
    void *ctx = conn->cb.ctx;

    if (conn->setup != NULL) { /* the worker's teardown gives it back */
        free_setup_config(conn->setup);
        free(conn->setup);
    }
    free(conn->agent.socket);
    free_kbd_answers(conn);
    free(conn->host);
    free(conn->user);
    free(conn->op_poll.fds);
    free(conn->op_poll.ops);
    pthread_mutex_destroy(&conn->mu);
    free(conn);
    atomic_fetch_sub(&live_connections, 1);
    if (released != NULL) {
        released(ctx);
    }
}

void
sshcore__conn_retain(sshcore_conn *conn)
{
    atomic_fetch_add(&conn->refs, 1);
}

void
sshcore__conn_unref(sshcore_conn *conn)
{
    if (atomic_fetch_sub(&conn->refs, 1) == 1) {
        conn_free(conn);
    }
}

void
sshcore__conn_wake(sshcore_conn *conn)
{
    uint64_t one = 1;

    atomic_store(&conn->woken, 1);
    pthread_mutex_lock(&conn->mu);
    if (conn->wake_fd >= 0) {
        (void)!write(conn->wake_fd, &one, sizeof(one));
    }
    pthread_mutex_unlock(&conn->mu);
}

/** Shut the socket down from any thread; safe against fd reuse (rule 2). */
void
sshcore__conn_shutdown_socket(sshcore_conn *conn)
{
    pthread_mutex_lock(&conn->mu);
    if (conn->sock_fd >= 0) {
        (void)shutdown(conn->sock_fd, SHUT_RDWR);
    }
    pthread_mutex_unlock(&conn->mu);
}

/** Worker: take the socket fd out under the lock, then close it, once. */
void
sshcore__conn_close_socket(sshcore_conn *conn)
{
    int fd;

    pthread_mutex_lock(&conn->mu);
    fd = conn->sock_fd;
    conn->sock_fd = -1;
    pthread_mutex_unlock(&conn->mu);
    if (fd >= 0) {
        close(fd);
    }
}

sshcore_conn_state
sshcore_conn_get_state(sshcore_conn *conn)
{
    return (sshcore_conn_state)atomic_load(&conn->state_snapshot);
}

unsigned
sshcore_conn_offered_methods(sshcore_conn *conn)
{
    return atomic_load(&conn->offered_methods);
}

void
sshcore_conn_server_banner(sshcore_conn *conn, char *buf, size_t len)
{
    /* written once by the worker before `connected` reports success */
    sshcore__copy_str(buf, len, conn->banner);
}

void
sshcore_conn_debug_fds(sshcore_conn *conn, int *socket_fd, int *wake_fd)
{
    pthread_mutex_lock(&conn->mu);
    if (socket_fd != NULL) {
        *socket_fd = conn->sock_fd;
    }
    if (wake_fd != NULL) {
        *wake_fd = conn->wake_fd;
    }
    pthread_mutex_unlock(&conn->mu);
}

/* ---------------------------------------------------------------------- */
/* Public entry points                                                     */
/* ---------------------------------------------------------------------- */

static char *_Nullable dup_or_null(const char *_Nullable s, bool *ok)
{
    char *r = NULL;
    if (s == NULL) {
        return NULL;
    }
    r = strdup(s);
    if (r == NULL) {
        *ok = false;
    }
    return r;
}

sshcore_conn *
sshcore_conn_start(const sshcore_config *config,
                   const sshcore_conn_callbacks *callbacks,
                   sshcore_error *err)
{
    sshcore_conn *conn = NULL;
    bool ok = true;
    size_t i;

    if (config->host == NULL || config->host[0] == '\0' ||
        config->user == NULL || config->connect_timeout_ms <= 0 ||
        config->backstop_timeout_s <= 0 || config->keepalive_interval_ms < 0 ||
        (config->keepalive_interval_ms > 0 &&
         config->keepalive_max_missed < 1) ||
        callbacks->connected == NULL || callbacks->hostkey == NULL ||
        callbacks->kbdint == NULL) {
        sshcore__error_set(err,
                           SSHCORE_E_INVALID_ARGUMENT,
                           "incomplete configuration");
        if (config->connected_fd >= 0) {
            close(config->connected_fd);
        }
        return NULL;
    }
    conn = calloc(1, sizeof(*conn));
    if (conn != NULL &&
        (conn->setup = calloc(1, sizeof(*conn->setup))) == NULL) {
        free(conn);
        conn = NULL;
    }
    if (conn == NULL) {
        sshcore__error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        if (config->connected_fd >= 0) {
            close(config->connected_fd);
        }
        return NULL;
    }
    atomic_fetch_add(&live_connections, 1);
    atomic_init(&conn->refs, 2); /* the caller's and the worker's */
    pthread_mutex_init(&conn->mu, NULL);
    conn->sock_fd = -1;
    conn->lib_fd = -1;
    conn->setup->agent_fd = -1;
    conn->phase = SSHCORE_PHASE_IDLE;
    atomic_init(&conn->state_snapshot, SSHCORE_CONN_IDLE);
    if (config->connected_fd >= 0) {
        conn->sock_fd = config->connected_fd; /* owned from here on */
    }
    conn->port = config->port;
    conn->connect_timeout_ms = config->connect_timeout_ms;
    conn->backstop_timeout_s = config->backstop_timeout_s;
    conn->verbosity = config->libssh_verbosity;
    conn->host = strdup(config->host);
    conn->user = strdup(config->user);
    ok = conn->host != NULL && conn->user != NULL;
    if (config->method_count > 0) {
        conn->setup->methods =
            calloc(config->method_count, sizeof(sshcore_auth_method));
        ok = ok && conn->setup->methods != NULL;
        for (i = 0; ok && i < config->method_count; i++) {
            conn->setup->methods[i].kind = config->methods[i].kind;
            conn->setup->methods[i].secret =
                dup_or_null(config->methods[i].secret, &ok);
            conn->setup->methods[i].passphrase =
                dup_or_null(config->methods[i].passphrase, &ok);
            conn->setup->methods[i].certificate =
                dup_or_null(config->methods[i].certificate, &ok);
            conn->setup->methods[i].flags = config->methods[i].flags;
            conn->setup->methods[i].attempts = config->methods[i].attempts;
        }
        conn->setup->method_count = config->method_count;
    }
    if (ok && config->algorithm_count > 0) {
        conn->setup->algorithms =
            calloc(config->algorithm_count, sizeof(sshcore_algo_setting));
        ok = conn->setup->algorithms != NULL;
        for (i = 0; ok && i < config->algorithm_count; i++) {
            conn->setup->algorithms[i].kind = config->algorithms[i].kind;
            conn->setup->algorithms[i].list =
                dup_or_null(config->algorithms[i].list, &ok);
            ok = ok && conn->setup->algorithms[i].list != NULL;
        }
        conn->setup->algorithm_count = config->algorithm_count;
    }
    conn->setup->rsa_min_bits = config->rsa_min_bits;
    conn->agent.socket = dup_or_null(config->agent_forward_socket, &ok);
    conn->ka.interval_ms = config->keepalive_interval_ms;
    conn->ka.max_missed = config->keepalive_max_missed;
    conn->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (!ok || conn->wake_fd < 0) {
        sshcore__error_set(err,
                           conn->wake_fd < 0 ? SSHCORE_E_SYSTEM
                                             : SSHCORE_E_OUT_OF_MEMORY,
                           NULL);
        err->sys_errno = errno;
        goto fail;
    }
    conn->cb = *callbacks;
    /* counted and registered before the thread exists: an exit right after sees
     * it */
    atomic_fetch_add(&sshcore_live_workers, 1);
    sshcore__conn_registry_add(conn);
    if (pthread_create(&conn->thread, NULL, sshcore__conn_worker_main, conn) !=
        0) {
        sshcore__conn_registry_remove(conn);
        atomic_fetch_sub(&sshcore_live_workers, 1);
        sshcore__error_set(err, SSHCORE_E_SYSTEM, "pthread_create failed");
        conn->cb.released = NULL; /* the caller keeps ownership of ctx */
        goto fail;
    }
    conn->thread_started = true;
    return conn;

fail:
    /* no worker exists: everything taken above is given back here */
    if (conn->wake_fd >= 0) {
        close(conn->wake_fd);
    }
    if (conn->sock_fd >= 0) {
        close(conn->sock_fd);
    }
    free_setup_config(conn->setup);
    free(conn->setup);
    free(conn->agent.socket);
    free(conn->host);
    free(conn->user);
    pthread_mutex_destroy(&conn->mu);
    free(conn);
    atomic_fetch_sub(&live_connections, 1);
    return NULL;
}

/** Reports the connect outcome exactly once (any thread); false if it was
 *  already reported. */
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
sshcore_conn_cancel_connect(sshcore_conn *conn)
{
    sshcore_error err;

    pthread_mutex_lock(&conn->mu);
    conn->connect_cancelled = true;
    pthread_mutex_unlock(&conn->mu);
    /* Complete first: once the socket is shut down, the worker sees an error
     * and would otherwise report that instead of the cancellation. */
    sshcore__error_set(&err, SSHCORE_E_CANCELLED, NULL);
    if (sshcore__conn_connect_complete(conn, &err)) {
        /* break any wait on the network at once; the attempt is over anyway.
         * Only when the cancel won: a connection that just became ready stays.
         */
        sshcore__conn_shutdown_socket(conn);
    }
    sshcore__conn_wake(conn);
}

/**
 * Under conn->mu: takes the one answer a callback owes (clearing `*awaited`).
 * INVALID_STATE when none is owed (nothing is taken); otherwise OK, or
 * CANCELLED / CLOSED when the connect was cancelled or the connection closed:
 * the answer is taken (it releases the callback's hold) but ignored.
 */
static int
take_owed_answer_locked(sshcore_conn *conn, bool *awaited)
{
    if (!*awaited) {
        return SSHCORE_E_INVALID_STATE;
    }
    *awaited = false;
    if (conn->connect_cancelled) {
        return SSHCORE_E_CANCELLED;
    }
    return conn->close_requested ? SSHCORE_E_CLOSED : SSHCORE_E_OK;
}

int
sshcore_conn_hostkey_verdict(sshcore_conn *conn, int accept, const char *reason)
{
    int code = SSHCORE_E_OK;

    pthread_mutex_lock(&conn->mu);
    code = take_owed_answer_locked(conn, &conn->answers.verdict_awaited);
    if (code == SSHCORE_E_INVALID_STATE) {
        goto out; /* nothing is owed: no reference to drop */
    }
    conn->answers.verdict_ready = true;
    conn->answers.verdict_accept = accept != 0;
    sshcore__copy_str(conn->answers.verdict_reason,
                      sizeof(conn->answers.verdict_reason),
                      reason);

out:
    pthread_mutex_unlock(&conn->mu);
    if (code != SSHCORE_E_INVALID_STATE) {
        sshcore__conn_wake(conn);
        sshcore__conn_unref(conn);
    }
    return code;
}

int
sshcore_conn_kbdint_reply(sshcore_conn *conn,
                          const char *const *answers,
                          size_t count)
{
    char **copy = NULL;
    size_t i;
    bool ok = true;
    int code = SSHCORE_E_OK;

    pthread_mutex_lock(&conn->mu);
    code = take_owed_answer_locked(conn, &conn->answers.kbd_awaited);
    pthread_mutex_unlock(&conn->mu);
    if (code == SSHCORE_E_INVALID_STATE) {
        return code;
    }
    if (code != SSHCORE_E_OK) {
        answers = NULL; /* taken and ignored: the attempt is over */
    }

    if (answers != NULL) {
        copy = calloc(count > 0 ? count : 1, sizeof(char *));
        ok = copy != NULL;
        for (i = 0; ok && i < count; i++) {
            copy[i] = strdup(answers[i]);
            ok = copy[i] != NULL;
        }
        if (!ok) {
            sshcore__free_answers(copy, count);
            copy = NULL;
        }
    }
    pthread_mutex_lock(&conn->mu);
    free_kbd_answers(conn);
    conn->answers.kbd_ready = true;
    conn->answers.kbd = copy;
    conn->answers.kbd_count = copy != NULL ? count : 0;
    pthread_mutex_unlock(&conn->mu);
    sshcore__conn_wake(conn);
    sshcore__conn_unref(conn);
    if (code != SSHCORE_E_OK) {
        return code;
    }
    return answers != NULL && copy == NULL ? SSHCORE_E_OUT_OF_MEMORY
                                           : SSHCORE_E_OK;
}

void
sshcore_conn_close(sshcore_conn *conn)
{
    pthread_mutex_lock(&conn->mu);
    conn->close_requested = true;
    pthread_mutex_unlock(&conn->mu);
    sshcore__conn_wake(conn);
}

void
sshcore_conn_release(sshcore_conn *conn)
{
    bool join = false;

    sshcore_conn_close(conn);
    pthread_mutex_lock(&conn->mu);
    if (conn->thread_started && !conn->thread_joined_or_detached) {
        conn->thread_joined_or_detached = true;
        /* never wait for DNS: a worker inside getaddrinfo finishes on its own
         */
        join = !pthread_equal(pthread_self(), conn->thread) &&
               atomic_load(&conn->resolving) == 0;
        if (!join) {
            pthread_detach(conn->thread);
        }
    }
    pthread_mutex_unlock(&conn->mu);
    if (join) {
        pthread_join(conn->thread, NULL);
    }
    sshcore__conn_unref(conn);
}

int
sshcore__conn_submit(sshcore_conn *conn, sshcore_op *op, sshcore_error *err)
{
    int st = atomic_load(&conn->state_snapshot);
    int code = SSHCORE_E_OK;

    pthread_mutex_lock(&conn->mu);
    if (st == SSHCORE_CONN_FAILED) {
        code = atomic_load(&conn->fail_code);
        if (code == SSHCORE_E_OK) {
            code = SSHCORE_E_CONNECTION_LOST;
        }
    } else if (conn->close_requested || conn->worker_exited ||
               st != SSHCORE_CONN_READY) {
        code = SSHCORE_E_INVALID_STATE;
    }
    if (code == SSHCORE_E_OK) {
        if (conn->pending_tail == NULL) {
            conn->pending_head = op;
        } else {
            conn->pending_tail->next = op;
        }
        conn->pending_tail = op;
    }
    pthread_mutex_unlock(&conn->mu);
    if (code != SSHCORE_E_OK) {
        char detail[96];
        snprintf(detail,
                 sizeof(detail),
                 "connection is %s",
                 st == SSHCORE_CONN_READY ? "closing"
                                          : sshcore_conn_state_name(st));
        sshcore__error_set(err, code, detail);
        return -1;
    }
    sshcore__conn_wake(conn);
    return 0;
}
