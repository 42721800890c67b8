/*
 * sshcore_conn.c - a connection: its worker thread, event loop, connect and
 * authentication phases, teardown and fd ownership.
 *
 * The session runs in libssh's non-blocking mode. The worker owns a poll()
 * over {the socket, an eventfd for submitted work}; deadlines are its poll
 * timeout. Nothing on the worker ever waits on the network inside libssh, so
 * cancellation is a wake-up; a connection-level cancel additionally
 * shutdown()s the socket (under conn->mu, which the close step also takes, so
 * a reused fd number is never shut down).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <libssh/server.h> /* ssh_send_keepalive: declared there, a client call too */

#include "sshcore_internal.h"

enum {
    PH_RESOLVE,
    PH_TCP_START,
    PH_TCP_WAIT,
    PH_HANDSHAKE,
    PH_HOSTKEY_WAIT,
    PH_AUTH_NONE,
    PH_AUTH_METHOD,
    PH_KBD_WAIT,
    PH_READY,
    PH_DONE,
};

static enum ssh_options_e algo_option(sshcore_algo_kind kind);

static atomic_long live_connections;
static atomic_long live_workers;

long sshcore_debug_live_connections(void) { return atomic_load(&live_connections); }
long sshcore_debug_live_workers(void) { return atomic_load(&live_workers); }

/*
 * Process exit. A program that returns from main (or calls exit) with a
 * connection still open leaves its worker inside libssh while the exit
 * handlers run, and OpenSSL's handler frees what that worker still uses
 * (a crash at exit, every time with streams open). Exit handlers run in
 * reverse order of registration, and OpenSSL registers its own at its first
 * use, which is during the first key exchange. So OpenSSL is initialised
 * first (through dlsym: libssh may be built on another crypto library), then
 * ours is registered; at exit it runs first, asks every running worker to
 * close and waits a bounded time for them.
 */
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static sshcore_conn *registry_head;
static pthread_once_t exit_handler_once = PTHREAD_ONCE_INIT;

/* How long the exit handler waits for workers to finish closing. */
#define EXIT_WAIT_MS 500

static void close_workers_at_exit(void)
{
    sshcore_conn *c = NULL;
    int64_t until = 0;

    pthread_mutex_lock(&registry_mu);
    for (c = registry_head; c != NULL; c = c->reg_next) {
        sshcore_conn_close(c);
    }
    pthread_mutex_unlock(&registry_mu);
    until = sshcore_now_ms() + EXIT_WAIT_MS;
    while (atomic_load(&live_workers) > 0 && sshcore_now_ms() < until) {
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
}

static void install_exit_handler(void)
{
    typedef int (*openssl_init_fn)(uint64_t opts, const void *settings);
    openssl_init_fn init = (openssl_init_fn)dlsym(RTLD_DEFAULT, "OPENSSL_init_crypto");

    if (init != NULL) {
        /* Registers OpenSSL's exit handler before ours. With no options
         * OPENSSL_init_crypto returns before registering it; these two
         * (OPENSSL_INIT_ADD_ALL_CIPHERS | _DIGESTS) are no-ops in OpenSSL 3
         * that take the full path. */
        (void)init(0x04 | 0x08, NULL);
    }
    (void)atexit(close_workers_at_exit);
}

static void registry_add(sshcore_conn *conn)
{
    pthread_once(&exit_handler_once, install_exit_handler);
    pthread_mutex_lock(&registry_mu);
    conn->reg_prev = NULL;
    conn->reg_next = registry_head;
    if (registry_head != NULL) {
        registry_head->reg_prev = conn;
    }
    registry_head = conn;
    pthread_mutex_unlock(&registry_mu);
}

static void registry_remove(sshcore_conn *conn)
{
    pthread_mutex_lock(&registry_mu);
    if (conn->reg_prev != NULL) {
        conn->reg_prev->reg_next = conn->reg_next;
    } else {
        registry_head = conn->reg_next;
    }
    if (conn->reg_next != NULL) {
        conn->reg_next->reg_prev = conn->reg_prev;
    }
    conn->reg_prev = NULL;
    conn->reg_next = NULL;
    pthread_mutex_unlock(&registry_mu);
}

int64_t sshcore_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void copy_str(char *dst, size_t cap, const char *_Nullable src)
{
    if (cap == 0) {
        return;
    }
    snprintf(dst, cap, "%s", src != NULL ? src : "");
}

void sshcore_error_set(sshcore_error *err, int code, const char *detail)
{
    memset(err, 0, sizeof(*err));
    err->code = code;
    copy_str(err->detail, sizeof(err->detail), detail);
}

void sshcore_error_from_session(sshcore_error *err, int code,
                                ssh_session session, const char *function)
{
    memset(err, 0, sizeof(*err));
    err->code = code;
    copy_str(err->lib_function, sizeof(err->lib_function), function);
    if (session != NULL) {
        err->lib_code = ssh_get_error_code(session);
        copy_str(err->lib_message, sizeof(err->lib_message), ssh_get_error(session));
    }
}

/* ---------------------------------------------------------------------- */
/* Reference counting, wake-up, state publication                         */
/* ---------------------------------------------------------------------- */

static void free_methods(sshcore_conn *conn)
{
    size_t i;

    free(conn->agent_socket); /* set up with the methods, freed with them */
    conn->agent_socket = NULL;
    if (conn->prompted_password != NULL) {
        explicit_bzero(conn->prompted_password, strlen(conn->prompted_password));
        free(conn->prompted_password);
        conn->prompted_password = NULL;
    }
    if (conn->methods == NULL) {
        return;
    }
    for (i = 0; i < conn->method_count; i++) {
        if (conn->methods[i].secret != NULL) {
            char *s = (char *)conn->methods[i].secret;
            explicit_bzero(s, strlen(s));
            free(s);
        }
        if (conn->methods[i].passphrase != NULL) {
            char *s = (char *)conn->methods[i].passphrase;
            explicit_bzero(s, strlen(s));
            free(s);
        }
        free((char *)conn->methods[i].certificate);
    }
    free(conn->methods);
    conn->methods = NULL;
}

/** libssh (worker): the server opens an auth-agent@openssh.com channel. */
static ssh_channel on_agent_channel(ssh_session session, void *userdata)
{
    return sshcore_agent_channel_open((sshcore_conn *)userdata, session);
}

static void free_kbd_answers(sshcore_conn *conn)
{
    size_t i;

    if (conn->kbd_answers != NULL) {
        for (i = 0; i < conn->kbd_count; i++) {
            if (conn->kbd_answers[i] != NULL) {
                explicit_bzero(conn->kbd_answers[i], strlen(conn->kbd_answers[i]));
                free(conn->kbd_answers[i]);
            }
        }
        free(conn->kbd_answers);
    }
    conn->kbd_answers = NULL;
    conn->kbd_count = 0;
}

static void free_algorithms(sshcore_conn *conn)
{
    size_t i;

    for (i = 0; conn->algorithms != NULL && i < conn->algorithm_count; i++) {
        free((char *)conn->algorithms[i].list);
    }
    free(conn->algorithms);
    conn->algorithms = NULL;
}

static void conn_free(sshcore_conn *conn)
{
    void (*released)(void *) = conn->cb.released;
    void *ctx = conn->cb.ctx;

    free_algorithms(conn);
    free_methods(conn);
    free_kbd_answers(conn);
    free(conn->host);
    free(conn->user);
    free(conn->op_pfds);
    free(conn->op_pfd_ops);
    sshcore_global_free_all(conn);
    pthread_mutex_destroy(&conn->mu);
    free(conn);
    atomic_fetch_sub(&live_connections, 1);
    if (released != NULL) {
        released(ctx);
    }
}

void sshcore_conn_retain(sshcore_conn *conn)
{
    atomic_fetch_add(&conn->refs, 1);
}

void sshcore_conn_unref(sshcore_conn *conn)
{
    if (atomic_fetch_sub(&conn->refs, 1) == 1) {
        conn_free(conn);
    }
}

void sshcore_conn_wake(sshcore_conn *conn)
{
    uint64_t one = 1;

    pthread_mutex_lock(&conn->mu);
    if (conn->wake_fd >= 0) {
        (void)!write(conn->wake_fd, &one, sizeof(one));
    }
    pthread_mutex_unlock(&conn->mu);
}

/** Shut the socket down from any thread; safe against fd reuse (rule 2). */
static void conn_shutdown_socket(sshcore_conn *conn)
{
    pthread_mutex_lock(&conn->mu);
    if (conn->sock_fd >= 0) {
        (void)shutdown(conn->sock_fd, SHUT_RDWR);
    }
    pthread_mutex_unlock(&conn->mu);
}

/** Worker: take the socket fd out under the lock, then close it, once. */
static void conn_close_socket(sshcore_conn *conn)
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

sshcore_conn_state sshcore_conn_get_state(sshcore_conn *conn)
{
    return (sshcore_conn_state)atomic_load(&conn->state_snapshot);
}

unsigned sshcore_conn_offered_methods(sshcore_conn *conn)
{
    return atomic_load(&conn->offered_methods);
}

void sshcore_conn_server_banner(sshcore_conn *conn, char *buf, size_t len)
{
    /* written once by the worker before `connected` reports success */
    copy_str(buf, len, conn->banner);
}

void sshcore_conn_debug_fds(sshcore_conn *conn, int *socket_fd, int *wake_fd)
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

/** Worker: apply a connection event; returns the action. */
static sshcore_conn_action conn_apply(sshcore_conn *conn, sshcore_conn_event ev)
{
    sshcore_conn_action act = sshcore_conn_fsm_apply(&conn->state, ev);
    atomic_store(&conn->state_snapshot, (int)conn->state);
    return act;
}

/* ---------------------------------------------------------------------- */
/* Completing the connect operation                                       */
/* ---------------------------------------------------------------------- */

/** Reports the connect outcome exactly once; returns false if already reported. */
static bool connect_complete(sshcore_conn *conn, const sshcore_error *err)
{
    int expected = 0;

    if (!atomic_compare_exchange_strong(&conn->connect_done, &expected, 1)) {
        return false;
    }
    conn->cb.connected(conn->cb.ctx, err);
    return true;
}

static void fail_ops(sshcore_conn *conn, sshcore_op *_Nullable list,
                     const sshcore_error *err)
{
    sshcore_op *op = list;
    sshcore_op *next = NULL;

    while (op != NULL) {
        next = op->next;
        op->next = NULL;
        (void)sshcore_op_complete(op, err);
        op->vt->abort(conn, op);
        sshcore_op_release(op);
        op = next;
    }
}

/** Worker: the connection failed or was closed; everything goes down. */
static void conn_fail(sshcore_conn *conn, const sshcore_error *err)
{
    sshcore_conn_action act;
    sshcore_error op_err = *err;

    int none = 0;

    /* the first failure is what later calls on this connection report */
    (void)atomic_compare_exchange_strong(&conn->fail_code, &none, err->code);
    act = conn_apply(conn, SSHCORE_CONN_EV_FAILURE);
    if (act != SSHCORE_CONN_ACT_TEAR_DOWN) {
        return;
    }
    connect_complete(conn, err);
    fail_ops(conn, conn->active, &op_err);
    conn->active = NULL;
    conn->phase = PH_DONE;
}

bool sshcore_session_usable(sshcore_conn *conn)
{
    return conn->session != NULL && ssh_is_connected(conn->session) &&
           (ssh_get_status(conn->session) & SSH_CLOSED_ERROR) == 0;
}

/* What libssh 0.10 says (packet.c) when incoming bytes fail the packet layer's
 * checks: the stream was altered on the way. */
static const char *const integrity_failures[] = {
    "HMAC error",
    "Decryption error",
    "Packet len too high",
    "Invalid padding",
    "Packet too short",
    "bytes left to be read",
};

int sshcore_conn_failure_code(sshcore_conn *conn)
{
    int status;
    const char *msg = NULL;
    size_t i;

    if (conn->session == NULL) {
        return SSHCORE_E_CONNECTION_LOST;
    }
    status = ssh_get_status(conn->session);
    msg = ssh_get_error(conn->session);
    if (ssh_is_connected(conn->session) && (status & SSH_CLOSED_ERROR) != 0) {
        /* libssh put the session in its error state without closing it: the
         * packet layer failed; its message tells an integrity failure */
        for (i = 0; msg != NULL && i < sizeof(integrity_failures) / sizeof(integrity_failures[0]); i++) {
            if (strstr(msg, integrity_failures[i]) != NULL) {
                return SSHCORE_E_STREAM_CORRUPTED;
            }
        }
        return SSHCORE_E_PROTOCOL;
    }
    /* libssh reports a server's SSH_MSG_DISCONNECT and a clean EOF as
     * SSH_CLOSED_ERROR too; only its message tells them from a broken link */
    if (msg != NULL && (strstr(msg, "SSH_MSG_DISCONNECT") != NULL ||
                        strstr(msg, "Socket error: disconnected") != NULL)) {
        return SSHCORE_E_DISCONNECTED;
    }
    if ((status & SSH_CLOSED_ERROR) != 0) {
        return SSHCORE_E_CONNECTION_LOST;
    }
    if ((status & SSH_CLOSED) != 0 || !ssh_is_connected(conn->session)) {
        return SSHCORE_E_DISCONNECTED;
    }
    return SSHCORE_E_PROTOCOL;
}

/* ---------------------------------------------------------------------- */
/* Connect phases (worker)                                                */
/* ---------------------------------------------------------------------- */

static void fail_code(sshcore_conn *conn, int code, const char *detail)
{
    sshcore_error err;
    sshcore_error_set(&err, code, detail);
    conn_fail(conn, &err);
}

static void fail_lib(sshcore_conn *conn, int code, const char *function)
{
    sshcore_error err;
    sshcore_error_from_session(&err, code, conn->session, function);
    conn_fail(conn, &err);
}

static void phase_resolve(sshcore_conn *conn)
{
    struct addrinfo hints;
    char port[8];
    int rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_ADDRCONFIG;
    snprintf(port, sizeof(port), "%u", (unsigned)conn->port);
    atomic_store(&conn->resolving, 1);
    rc = getaddrinfo(conn->host, port, &hints, &conn->ai_list);
    atomic_store(&conn->resolving, 0);
    if (rc != 0) {
        sshcore_error err;
        sshcore_error_set(&err, SSHCORE_E_NAME_RESOLUTION, gai_strerror(rc));
        err.sys_errno = rc;
        conn_fail(conn, &err);
        return;
    }
    conn->ai_cur = conn->ai_list;
    conn->phase = PH_TCP_START;
}

static void phase_tcp_start(sshcore_conn *conn)
{
    bool in_progress = false;
    int fd;

    while (conn->ai_cur != NULL) {
        fd = sshcore_socket_connect_start(conn->ai_cur, &in_progress);
        if (fd >= 0) {
            pthread_mutex_lock(&conn->mu);
            conn->sock_fd = fd;
            pthread_mutex_unlock(&conn->mu);
            conn->phase = in_progress ? PH_TCP_WAIT : PH_HANDSHAKE;
            return;
        }
        conn->last_connect_errno = errno;
        conn->ai_cur = conn->ai_cur->ai_next;
    }
    {
        sshcore_error err;
        sshcore_error_set(&err, sshcore_errno_to_code(conn->last_connect_errno),
                          strerror(conn->last_connect_errno));
        err.sys_errno = conn->last_connect_errno;
        conn_fail(conn, &err);
    }
}

static void phase_tcp_wait(sshcore_conn *conn)
{
    int e = sshcore_socket_connect_result(conn->sock_fd);

    if (e == 0) {
        conn->phase = PH_HANDSHAKE;
        return;
    }
    conn->last_connect_errno = e;
    conn_close_socket(conn);
    conn->ai_cur = conn->ai_cur != NULL ? conn->ai_cur->ai_next : NULL;
    conn->phase = PH_TCP_START;
}

static int session_create(sshcore_conn *conn)
{
    ssh_session s = NULL;
    int zero = 0;
    int one = 1;
    long timeout = conn->backstop_timeout_s;
    unsigned int port = conn->port;
    int verbosity = conn->verbosity;
    size_t i;

    conn->lib_fd = dup(conn->sock_fd);
    if (conn->lib_fd < 0) {
        return -errno;
    }
    (void)fcntl(conn->lib_fd, F_SETFD, FD_CLOEXEC);
    s = ssh_new();
    if (s == NULL) {
        return -1;
    }
    conn->session = s;
    if (ssh_options_set(s, SSH_OPTIONS_PROCESS_CONFIG, &zero) != SSH_OK ||
        ssh_options_set(s, SSH_OPTIONS_HOST, conn->host) != SSH_OK ||
        ssh_options_set(s, SSH_OPTIONS_PORT, &port) != SSH_OK ||
        ssh_options_set(s, SSH_OPTIONS_USER, conn->user) != SSH_OK ||
        ssh_options_set(s, SSH_OPTIONS_NODELAY, &one) != SSH_OK ||
        ssh_options_set(s, SSH_OPTIONS_TIMEOUT, &timeout) != SSH_OK ||
        ssh_options_set(s, SSH_OPTIONS_LOG_VERBOSITY, &verbosity) != SSH_OK ||
        ssh_options_set(s, SSH_OPTIONS_FD, &conn->lib_fd) != SSH_OK) {
        return -1;
    }
    for (i = 0; i < conn->method_count; i++) {
        if (conn->methods[i].kind == SSHCORE_AUTH_AGENT &&
            conn->methods[i].secret != NULL) {
            if (ssh_options_set(s, SSH_OPTIONS_IDENTITY_AGENT,
                                conn->methods[i].secret) != SSH_OK) {
                return -1;
            }
        }
    }
    for (i = 0; i < conn->algorithm_count; i++) {
        if (ssh_options_set(s, algo_option(conn->algorithms[i].kind), conn->algorithms[i].list) != SSH_OK) {
            return 1;
        }
    }
    if (conn->rsa_min_bits > 0 &&
        ssh_options_set(s, SSH_OPTIONS_RSA_MIN_SIZE, &conn->rsa_min_bits) != SSH_OK) {
        return 1;
    }
    if (conn->agent_socket != NULL) {
        memset(&conn->session_cbs, 0, sizeof(conn->session_cbs));
        conn->session_cbs.userdata = conn;
        conn->session_cbs.channel_open_request_auth_agent_function = on_agent_channel;
        ssh_callbacks_init(&conn->session_cbs);
        if (ssh_set_callbacks(s, &conn->session_cbs) != SSH_OK) {
            return -1;
        }
    }
    ssh_set_counters(s, &conn->socket_counter, &conn->packet_counter);
    ssh_set_blocking(s, 0);
    return 0;
}

static enum ssh_options_e algo_option(sshcore_algo_kind kind)
{
    switch (kind) {
    case SSHCORE_ALGO_KEX: return SSH_OPTIONS_KEY_EXCHANGE;
    case SSHCORE_ALGO_HOSTKEY: return SSH_OPTIONS_HOSTKEYS;
    case SSHCORE_ALGO_CIPHER_C2S: return SSH_OPTIONS_CIPHERS_C_S;
    case SSHCORE_ALGO_CIPHER_S2C: return SSH_OPTIONS_CIPHERS_S_C;
    case SSHCORE_ALGO_MAC_C2S: return SSH_OPTIONS_HMAC_C_S;
    case SSHCORE_ALGO_MAC_S2C: return SSH_OPTIONS_HMAC_S_C;
    case SSHCORE_ALGO_COMPRESSION_C2S: return SSH_OPTIONS_COMPRESSION_C_S;
    case SSHCORE_ALGO_COMPRESSION_S2C: return SSH_OPTIONS_COMPRESSION_S_C;
    case SSHCORE_ALGO_PUBKEY_TYPES: return SSH_OPTIONS_PUBLICKEY_ACCEPTED_TYPES;
    }
    return SSH_OPTIONS_KEY_EXCHANGE;
}

int sshcore_algorithm_supported(sshcore_algo_kind kind, const char *name)
{
    /* libssh silently drops unknown names from a list and fails only when
     * none is left: ask about one name at a time */
    ssh_session s = NULL;
    int ok = 0;

    if (name[0] == '\0' || strchr(name, ',') != NULL) {
        return 0;
    }
    if ((kind == SSHCORE_ALGO_COMPRESSION_C2S || kind == SSHCORE_ALGO_COMPRESSION_S2C) &&
        (strcmp(name, "yes") == 0 || strcmp(name, "no") == 0)) {
        return 0; /* libssh's shorthands, not algorithm names */
    }
    s = ssh_new();
    if (s == NULL) {
        return 0;
    }
    ok = ssh_options_set(s, algo_option(kind), name) == SSH_OK;
    ssh_free(s);
    return ok;
}

void sshcore_conn_negotiated(sshcore_conn *conn, sshcore_negotiated *out)
{
    *out = conn->negotiated;
}

static void pause_deadline(sshcore_conn *conn)
{
    conn->paused_at_ms = sshcore_now_ms();
}

static void resume_deadline(sshcore_conn *conn)
{
    if (conn->paused_at_ms != 0 && conn->deadline_ms != 0) {
        conn->deadline_ms += sshcore_now_ms() - conn->paused_at_ms;
    }
    conn->paused_at_ms = 0;
}

/**
 * Classifies a failed ssh_connect() by libssh's message, with the same codes as
 * later in the connection's life: the server's disconnect or end of stream is
 * DISCONNECTED, a broken link (reset, any other socket error) CONNECTION_LOST,
 * a packet that failed its integrity check STREAM_CORRUPTED; the rest is the
 * key exchange's failure.
 */
static int handshake_failure_code(sshcore_conn *conn)
{
    const char *msg = ssh_get_error(conn->session);
    int code = sshcore_conn_failure_code(conn);

    if (msg == NULL) {
        return SSHCORE_E_KEY_EXCHANGE;
    }
    if (strstr(msg, "timed out") != NULL) {
        return SSHCORE_E_CONNECT_TIMEOUT;
    }
    if (strstr(msg, "Socket error: disconnected") != NULL || strstr(msg, "SSH_MSG_DISCONNECT") != NULL ||
        strstr(msg, "Connection refused") != NULL) {
        return SSHCORE_E_DISCONNECTED;
    }
    if (strstr(msg, "Socket error:") != NULL) {
        return SSHCORE_E_CONNECTION_LOST; /* reset by peer, broken pipe, ... */
    }
    if (code == SSHCORE_E_STREAM_CORRUPTED) {
        return code;
    }
    return SSHCORE_E_KEY_EXCHANGE;
}

static void phase_handshake(sshcore_conn *conn)
{
    ssh_key key = NULL;
    unsigned char *hash = NULL;
    size_t hlen = 0;
    char *fp = NULL;
    char *b64 = NULL;
    const char *type = NULL;
    const char *banner = NULL;
    sshcore_hostkey hk;
    int rc;

    if (conn->session == NULL) {
        sshcore_socket_tune(conn->sock_fd, conn->backstop_timeout_s * 1000);
        int crc = session_create(conn);
        if (crc < 0) {
            sshcore_error err;
            sshcore_error_set(&err, SSHCORE_E_SYSTEM, "dup() of the socket failed");
            err.sys_errno = -crc;
            conn_fail(conn, &err);
            return;
        }
        if (crc != 0) {
            fail_lib(conn, SSHCORE_E_INVALID_ARGUMENT, "ssh_options_set");
            return;
        }
    }
    conn->ssh_connect_called = true;
    rc = ssh_connect(conn->session);
    /* libssh switches the socket to blocking when it first sees it writable
     * (socket.c, CONNECTING -> CONNECTED); the fd is a dup of ours, so that
     * clears O_NONBLOCK for both. The worker must never block in send(). */
    (void)fcntl(conn->sock_fd, F_SETFL, fcntl(conn->sock_fd, F_GETFL) | O_NONBLOCK);
    /* whether libssh took our dup (it may fail before, e.g. applying options) */
    conn->lib_took_fd = conn->lib_took_fd || ssh_get_fd(conn->session) == conn->lib_fd;
    if (rc == SSH_AGAIN) {
        return;
    }
    if (rc != SSH_OK) {
        fail_lib(conn, handshake_failure_code(conn), "ssh_connect");
        return;
    }
    banner = ssh_get_serverbanner(conn->session);
    copy_str(conn->banner, sizeof(conn->banner), banner);
    copy_str(conn->negotiated.kex, sizeof(conn->negotiated.kex), ssh_get_kex_algo(conn->session));
    copy_str(conn->negotiated.cipher_c2s, sizeof(conn->negotiated.cipher_c2s), ssh_get_cipher_out(conn->session));
    copy_str(conn->negotiated.cipher_s2c, sizeof(conn->negotiated.cipher_s2c), ssh_get_cipher_in(conn->session));
    copy_str(conn->negotiated.mac_c2s, sizeof(conn->negotiated.mac_c2s), ssh_get_hmac_out(conn->session));
    copy_str(conn->negotiated.mac_s2c, sizeof(conn->negotiated.mac_s2c), ssh_get_hmac_in(conn->session));

    if (ssh_get_server_publickey(conn->session, &key) != SSH_OK) {
        fail_lib(conn, SSHCORE_E_KEY_EXCHANGE, "ssh_get_server_publickey");
        return;
    }
    if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen) != 0 ||
        (fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen)) == NULL ||
        ssh_pki_export_pubkey_base64(key, &b64) != SSH_OK) {
        fail_lib(conn, SSHCORE_E_KEY_EXCHANGE, "ssh_get_publickey_hash");
        goto out;
    }
    type = ssh_key_type(key) == SSH_KEYTYPE_ECDSA_P256 ||
                   ssh_key_type(key) == SSH_KEYTYPE_ECDSA_P384 ||
                   ssh_key_type(key) == SSH_KEYTYPE_ECDSA_P521
               ? ssh_pki_key_ecdsa_name(key)
               : ssh_key_type_to_char(ssh_key_type(key));
    hk.type = type != NULL ? type : "unknown";
    copy_str(conn->negotiated.hostkey, sizeof(conn->negotiated.hostkey), hk.type);
    hk.sha256 = fp;
    hk.base64 = b64;
    hk.host = conn->host;
    hk.port = conn->port;
    conn->phase = PH_HOSTKEY_WAIT;
    pause_deadline(conn);
    sshcore_conn_retain(conn); /* dropped by sshcore_conn_hostkey_verdict */
    pthread_mutex_lock(&conn->mu);
    conn->verdict_awaited = true;
    pthread_mutex_unlock(&conn->mu);
    conn->cb.hostkey(conn->cb.ctx, conn, &hk);

out:
    if (fp != NULL) {
        ssh_string_free_char(fp);
    }
    if (b64 != NULL) {
        ssh_string_free_char(b64);
    }
    if (hash != NULL) {
        ssh_clean_pubkey_hash(&hash);
    }
    ssh_key_free(key);
}

static unsigned methods_from_libssh(int m)
{
    unsigned r = 0;
    if (m & SSH_AUTH_METHOD_NONE) r |= SSHCORE_METHOD_NONE;
    if (m & SSH_AUTH_METHOD_PASSWORD) r |= SSHCORE_METHOD_PASSWORD;
    if (m & SSH_AUTH_METHOD_PUBLICKEY) r |= SSHCORE_METHOD_PUBLICKEY;
    if (m & SSH_AUTH_METHOD_HOSTBASED) r |= SSHCORE_METHOD_HOSTBASED;
    if (m & SSH_AUTH_METHOD_INTERACTIVE) r |= SSHCORE_METHOD_KBDINT;
    if (m & SSH_AUTH_METHOD_GSSAPI_MIC) r |= SSHCORE_METHOD_GSSAPI;
    return r;
}

static void auth_succeeded(sshcore_conn *conn)
{
    sshcore_error ok;

    if (conn_apply(conn, SSHCORE_CONN_EV_AUTH_OK) != SSHCORE_CONN_ACT_REPORT_READY) {
        fail_code(conn, SSHCORE_E_INVALID_STATE, "authentication finished in a wrong state");
        return;
    }
    conn->event = ssh_event_new();
    if (conn->event == NULL || ssh_event_add_session(conn->event, conn->session) != SSH_OK) {
        fail_lib(conn, SSHCORE_E_OUT_OF_MEMORY, "ssh_event_add_session");
        return;
    }
    conn->deadline_ms = 0;
    conn->phase = PH_READY;
    conn->ka_seen_packets = conn->packet_counter.in_packets;
    conn->ka_last_rx_ms = sshcore_now_ms();
    conn->ka_probes = 0;
    sshcore_error_set(&ok, SSHCORE_E_OK, NULL);
    connect_complete(conn, &ok);
}

static const char *method_name(sshcore_auth_kind k)
{
    switch (k) {
    case SSHCORE_AUTH_PASSWORD: return "password";
    case SSHCORE_AUTH_KEY_FILE: return "publickey(file)";
    case SSHCORE_AUTH_KEY_MEMORY: return "publickey(memory)";
    case SSHCORE_AUTH_AGENT: return "publickey(agent)";
    case SSHCORE_AUTH_KBDINT: return "keyboard-interactive";
    case SSHCORE_AUTH_PASSWORD_PROMPT: return "password";
    }
    return "?";
}

static unsigned method_bit(sshcore_auth_kind k)
{
    switch (k) {
    case SSHCORE_AUTH_PASSWORD: return SSHCORE_METHOD_PASSWORD;
    case SSHCORE_AUTH_KEY_FILE: return SSHCORE_METHOD_PUBLICKEY;
    case SSHCORE_AUTH_KEY_MEMORY: return SSHCORE_METHOD_PUBLICKEY;
    case SSHCORE_AUTH_AGENT: return SSHCORE_METHOD_PUBLICKEY;
    case SSHCORE_AUTH_KBDINT: return SSHCORE_METHOD_KBDINT;
    case SSHCORE_AUTH_PASSWORD_PROMPT: return SSHCORE_METHOD_PASSWORD;
    }
    return 0;
}

static void note_tried(sshcore_conn *conn, const char *what)
{
    size_t used = strlen(conn->methods_tried);
    snprintf(conn->methods_tried + used, sizeof(conn->methods_tried) - used,
             "%s%s", used > 0 ? "," : "", what);
}

static void auth_denied(sshcore_conn *conn)
{
    char detail[512];
    unsigned m = atomic_load(&conn->offered_methods);

    snprintf(detail, sizeof(detail), "server offers:%s%s%s%s%s; tried: %s",
             (m & SSHCORE_METHOD_PUBLICKEY) ? " publickey" : "",
             (m & SSHCORE_METHOD_PASSWORD) ? " password" : "",
             (m & SSHCORE_METHOD_KBDINT) ? " keyboard-interactive" : "",
             (m & SSHCORE_METHOD_HOSTBASED) ? " hostbased" : "",
             (m & SSHCORE_METHOD_GSSAPI) ? " gssapi-with-mic" : "",
             conn->methods_tried[0] != '\0' ? conn->methods_tried : "nothing");
    fail_code(conn, SSHCORE_E_AUTH_DENIED, detail);
}

static void phase_auth_none(sshcore_conn *conn)
{
    int rc = ssh_userauth_none(conn->session, NULL);

    switch (rc) {
    case SSH_AUTH_AGAIN:
        return;
    case SSH_AUTH_SUCCESS:
        atomic_store(&conn->offered_methods, SSHCORE_METHOD_NONE);
        auth_succeeded(conn);
        return;
    case SSH_AUTH_DENIED:
    case SSH_AUTH_PARTIAL:
        atomic_store(&conn->offered_methods,
                     methods_from_libssh(ssh_userauth_list(conn->session, NULL)));
        conn->method_idx = 0;
        conn->method_started = false;
        conn->phase = PH_AUTH_METHOD;
        return;
    default:
        fail_lib(conn, sshcore_conn_failure_code(conn), "ssh_userauth_none");
        return;
    }
}

/** Returns an SSH_AUTH_* code, or SSH_AUTH_INFO when waiting for answers. */
static int auth_kbdint_step(sshcore_conn *conn)
{
    int rc = ssh_userauth_kbdint(conn->session, NULL, NULL);
    int n;
    int i;

    while (rc == SSH_AUTH_INFO) {
        n = ssh_userauth_kbdint_getnprompts(conn->session);
        if (n <= 0) {
            /* OpenSSH sends an empty round at the end; answer it directly. */
            rc = ssh_userauth_kbdint(conn->session, NULL, NULL);
            continue;
        }
        {
            const char **prompts = calloc((size_t)n, sizeof(char *));
            int *echo = calloc((size_t)n, sizeof(int));
            sshcore_kbdint ch;
            char echo_c = 0;

            if (prompts == NULL || echo == NULL) {
                free(prompts);
                free(echo);
                return SSH_AUTH_ERROR;
            }
            memset(&ch, 0, sizeof(ch));
            for (i = 0; i < n; i++) {
                prompts[i] = ssh_userauth_kbdint_getprompt(conn->session, (unsigned)i, &echo_c);
                echo[i] = echo_c != 0;
            }
            ch.name = ssh_userauth_kbdint_getname(conn->session);
            ch.instruction = ssh_userauth_kbdint_getinstruction(conn->session);
            ch.count = (size_t)n;
            ch.prompts = prompts;
            ch.echo = echo;
            conn->phase = PH_KBD_WAIT;
            pause_deadline(conn);
            sshcore_conn_retain(conn); /* dropped by sshcore_conn_kbdint_reply */
            pthread_mutex_lock(&conn->mu);
            conn->kbd_awaited = true;
            pthread_mutex_unlock(&conn->mu);
            conn->cb.kbdint(conn->cb.ctx, conn, &ch);
            free(prompts);
            free(echo);
        }
        return SSH_AUTH_INFO;
    }
    return rc;
}

/**
 * A method that cannot be used: with SSHCORE_AUTH_SKIP_UNUSABLE it is noted
 * ("publickey(file) skipped: why") and the next one tried, as ssh(1) skips an
 * identity it cannot load; otherwise the connection fails with `code`.
 */
static void method_unusable(sshcore_conn *conn, const sshcore_auth_method *m, int code,
                            const char *function, int lib_code, const char *why)
{
    sshcore_error err;
    char note[200];

    if ((m->flags & SSHCORE_AUTH_SKIP_UNUSABLE) != 0) {
        snprintf(note, sizeof(note), "skipped (%s)", why);
        note_tried(conn, note);
        ssh_key_free(conn->key);
        conn->key = NULL;
        conn->method_idx++;
        conn->method_started = false;
        return;
    }
    sshcore_error_set(&err, code, why);
    if (function != NULL) {
        copy_str(err.lib_function, sizeof(err.lib_function), function);
        err.lib_code = lib_code;
    }
    conn_fail(conn, &err);
}

/**
 * Like ssh(1): a private key file of ours that others may read or write is
 * refused (OpenSSH's "UNPROTECTED PRIVATE KEY FILE"), before anything reads it.
 * libssh itself does not look. Returns false (the method is unusable) then.
 */
static bool key_file_permissions_ok(sshcore_conn *conn, const sshcore_auth_method *m)
{
    struct stat st;
    char detail[400];
    const char *path = m->secret;

    if (path == NULL || stat(path, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 077) == 0) {
        return true; /* a missing file fails in the import, with its own text */
    }
    snprintf(detail, sizeof(detail),
             "%s: permissions %04o are too open: a private key must not be accessible to others "
             "(chmod 600), as ssh requires",
             path, (unsigned)(st.st_mode & 07777));
    method_unusable(conn, m, SSHCORE_E_PRIVATE_KEY, NULL, 0, detail);
    return false;
}

/** Decodes base64 into a new buffer; returns its length, or -1. */
static long decode_base64(const char *text, unsigned char **out)
{
    size_t len = strlen(text);
    long n;
    unsigned char *buf = NULL;

    *out = NULL;
    if (len == 0 || len % 4 != 0 || len > (1u << 20)) {
        return -1;
    }
    buf = malloc(len);
    if (buf == NULL) {
        return -1;
    }
    n = EVP_DecodeBlock(buf, (const unsigned char *)text, (int)len);
    if (n < 0) {
        free(buf);
        return -1;
    }
    n -= (text[len - 1] == '=') + (text[len - 2] == '='); /* DecodeBlock counts the padding */
    *out = buf;
    return n;
}

/** Skips one SSH string (uint32 length, bytes); returns the new offset or -1. */
static long skip_string(const unsigned char *blob, long len, long at)
{
    unsigned long n;

    if (at < 0 || at + 4 > len) {
        return -1;
    }
    n = ((unsigned long)blob[at] << 24) | ((unsigned long)blob[at + 1] << 16) |
        ((unsigned long)blob[at + 2] << 8) | (unsigned long)blob[at + 3];
    if (n > (unsigned long)(len - at - 4)) {
        return -1;
    }
    return at + 4 + (long)n;
}

/**
 * Whether `cert` certifies the public half of `key`: the certificate blob (type,
 * nonce, then the key's own fields) carries the same fields as the key's plain
 * blob (type, fields). libssh 0.10's ssh_pki_copy_cert_to_privkey does not check.
 */
static bool cert_matches_key(ssh_key cert, ssh_key key)
{
    char *cert_b64 = NULL;
    char *key_b64 = NULL;
    unsigned char *cert_blob = NULL;
    unsigned char *key_blob = NULL;
    long cert_len;
    long key_len;
    long cert_at;
    long key_at;
    bool ok = false;

    if (ssh_pki_export_pubkey_base64(cert, &cert_b64) != SSH_OK ||
        ssh_pki_export_pubkey_base64(key, &key_b64) != SSH_OK) {
        goto out;
    }
    cert_len = decode_base64(cert_b64, &cert_blob);
    key_len = decode_base64(key_b64, &key_blob);
    if (cert_len < 0 || key_len < 0) {
        goto out;
    }
    cert_at = skip_string(cert_blob, cert_len, skip_string(cert_blob, cert_len, 0)); /* type, nonce */
    key_at = skip_string(key_blob, key_len, 0);                                        /* type */
    ok = cert_at >= 0 && key_at >= 0 && key_len - key_at > 0 && cert_len - cert_at >= key_len - key_at &&
         memcmp(cert_blob + cert_at, key_blob + key_at, (size_t)(key_len - key_at)) == 0;
out:
    ssh_string_free_char(cert_b64);
    ssh_string_free_char(key_b64);
    free(cert_blob);
    free(key_blob);
    return ok;
}

/**
 * Loads the method's private key (and its certificate) into conn->key.
 * Returns false when the method is unusable (handled by method_unusable).
 */
static bool load_method_key(sshcore_conn *conn, const sshcore_auth_method *m)
{
    char detail[400];
    const char *where = m->kind == SSHCORE_AUTH_KEY_FILE ? (m->secret != NULL ? m->secret : "")
                                                          : "key given in memory";
    ssh_key cert = NULL;
    int irc;

    if (m->kind == SSHCORE_AUTH_KEY_FILE && !key_file_permissions_ok(conn, m)) {
        return false;
    }
    if (m->kind == SSHCORE_AUTH_KEY_FILE) {
        irc = ssh_pki_import_privkey_file(m->secret != NULL ? m->secret : "", m->passphrase, NULL, NULL,
                                          &conn->key);
    } else {
        irc = ssh_pki_import_privkey_base64(m->secret != NULL ? m->secret : "", m->passphrase, NULL, NULL,
                                            &conn->key);
    }
    if (irc != SSH_OK || conn->key == NULL) {
        /* the import functions do not set the session's error text */
        snprintf(detail, sizeof(detail), "%s: unreadable, unsupported format, or wrong passphrase", where);
        method_unusable(conn, m, SSHCORE_E_PRIVATE_KEY,
                        m->kind == SSHCORE_AUTH_KEY_FILE ? "ssh_pki_import_privkey_file"
                                                         : "ssh_pki_import_privkey_base64",
                        irc, detail);
        return false;
    }
    if (m->certificate == NULL) {
        return true;
    }
    irc = ssh_pki_import_cert_file(m->certificate, &cert);
    if (irc != SSH_OK || cert == NULL) {
        snprintf(detail, sizeof(detail), "%s: certificate unreadable or not an OpenSSH certificate",
                 m->certificate);
        method_unusable(conn, m, SSHCORE_E_PRIVATE_KEY, "ssh_pki_import_cert_file", irc, detail);
        return false;
    }
    irc = cert_matches_key(cert, conn->key) ? ssh_pki_copy_cert_to_privkey(cert, conn->key) : SSH_ERROR;
    ssh_key_free(cert);
    if (irc != SSH_OK) {
        snprintf(detail, sizeof(detail), "%s: certificate is not for the key %s", m->certificate, where);
        method_unusable(conn, m, SSHCORE_E_PRIVATE_KEY, "ssh_pki_copy_cert_to_privkey", irc, detail);
        return false;
    }
    return true;
}

static void wipe_prompted_password(sshcore_conn *conn)
{
    if (conn->prompted_password != NULL) {
        explicit_bzero(conn->prompted_password, strlen(conn->prompted_password));
        free(conn->prompted_password);
        conn->prompted_password = NULL;
    }
}

/**
 * PASSWORD_PROMPT: asks the caller for a password through the kbdint callback
 * (one prompt, `password` set) and waits in PH_KBD_WAIT; the reply lands in
 * conn->prompted_password, or skips the method.
 */
static void ask_password(sshcore_conn *conn)
{
    char prompt[300];
    const char *prompts[1];
    int echo = 0;
    sshcore_kbdint ch;

    snprintf(prompt, sizeof(prompt), "%s@%s's password: ", conn->user, conn->host);
    prompts[0] = prompt;
    memset(&ch, 0, sizeof(ch));
    ch.name = "";
    ch.instruction = "";
    ch.count = 1;
    ch.prompts = prompts;
    ch.echo = &echo;
    ch.password = 1;
    ch.attempt = conn->password_attempts + 1;
    conn->phase = PH_KBD_WAIT;
    pause_deadline(conn);
    sshcore_conn_retain(conn); /* dropped by sshcore_conn_kbdint_reply */
    pthread_mutex_lock(&conn->mu);
    conn->kbd_awaited = true;
    pthread_mutex_unlock(&conn->mu);
    conn->cb.kbdint(conn->cb.ctx, conn, &ch);
}

/** The next method, after the current one was refused or skipped. */
static void next_method(sshcore_conn *conn)
{
    ssh_key_free(conn->key);
    conn->key = NULL;
    wipe_prompted_password(conn);
    conn->password_attempts = 0;
    conn->method_idx++;
    conn->method_started = false;
}

static void phase_auth_method(sshcore_conn *conn)
{
    const sshcore_auth_method *m = NULL;
    unsigned offered = atomic_load(&conn->offered_methods);
    int rc = SSH_AUTH_DENIED;

    for (;;) {
        if (conn->method_idx >= conn->method_count) {
            auth_denied(conn);
            return;
        }
        m = &conn->methods[conn->method_idx];
        if ((offered & method_bit(m->kind)) != 0) {
            break;
        }
        conn->method_idx++;
    }
    if (!conn->method_started) {
        conn->method_started = true;
        note_tried(conn, method_name(m->kind));
    }

    switch (m->kind) {
    case SSHCORE_AUTH_PASSWORD:
        rc = ssh_userauth_password(conn->session, NULL, m->secret != NULL ? m->secret : "");
        break;
    case SSHCORE_AUTH_KEY_FILE:
    case SSHCORE_AUTH_KEY_MEMORY:
        if (conn->key == NULL && !load_method_key(conn, m)) {
            return;
        }
        rc = ssh_userauth_publickey(conn->session, NULL, conn->key);
        break;
    case SSHCORE_AUTH_AGENT:
        if (m->secret == NULL && getenv("SSH_AUTH_SOCK") == NULL) {
            method_unusable(conn, m, SSHCORE_E_AGENT, NULL, 0,
                            "SSH_AUTH_SOCK is not set and no agent socket was given");
            return;
        }
        rc = ssh_userauth_agent(conn->session, NULL);
        if (rc == SSH_AUTH_ERROR && sshcore_session_usable(conn)) {
            if ((m->flags & SSHCORE_AUTH_SKIP_UNUSABLE) != 0) {
                method_unusable(conn, m, SSHCORE_E_AGENT, NULL, 0, "agent unreachable");
            } else {
                fail_lib(conn, SSHCORE_E_AGENT, "ssh_userauth_agent");
            }
            return;
        }
        break;
    case SSHCORE_AUTH_KBDINT:
        rc = auth_kbdint_step(conn);
        if (rc == SSH_AUTH_INFO) {
            return;
        }
        break;
    case SSHCORE_AUTH_PASSWORD_PROMPT:
        if (conn->prompted_password == NULL) {
            ask_password(conn);
            return;
        }
        rc = ssh_userauth_password(conn->session, NULL, conn->prompted_password);
        if (rc == SSH_AUTH_DENIED &&
            conn->password_attempts + 1 < (m->attempts > 0 ? m->attempts : 1)) {
            /* refused: ask again, as ssh asks NumberOfPasswordPrompts times
             * (now: nothing else would wake the worker for it) */
            conn->password_attempts++;
            wipe_prompted_password(conn);
            ask_password(conn);
            return;
        }
        break;
    }

    switch (rc) {
    case SSH_AUTH_AGAIN:
        return;
    case SSH_AUTH_SUCCESS:
        wipe_prompted_password(conn);
        auth_succeeded(conn);
        return;
    case SSH_AUTH_PARTIAL:
        atomic_store(&conn->offered_methods,
                     methods_from_libssh(ssh_userauth_list(conn->session, NULL)));
        /* fall through: continue with the next configured method */
    case SSH_AUTH_DENIED:
        next_method(conn);
        return;
    default:
        fail_lib(conn, sshcore_conn_failure_code(conn), "ssh_userauth");
        return;
    }
}

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

static void take_requests(sshcore_conn *conn, conn_requests *rq)
{
    uint64_t drained;

    memset(rq, 0, sizeof(*rq));
    pthread_mutex_lock(&conn->mu);
    if (conn->wake_fd >= 0) {
        (void)!read(conn->wake_fd, &drained, sizeof(drained));
    }
    rq->pending = conn->pending_head;
    conn->pending_head = NULL;
    conn->pending_tail = NULL;
    rq->close = conn->close_requested;
    rq->cancel = conn->connect_cancelled;
    if (conn->verdict_ready) {
        rq->verdict = true;
        rq->accept = conn->verdict_accept;
        copy_str(rq->reason, sizeof(rq->reason), conn->verdict_reason);
        conn->verdict_ready = false;
    }
    if (conn->kbd_ready) {
        rq->kbd = true;
        rq->answers = conn->kbd_answers;
        rq->answer_count = conn->kbd_count;
        conn->kbd_answers = NULL;
        conn->kbd_count = 0;
        conn->kbd_ready = false;
    }
    pthread_mutex_unlock(&conn->mu);
}

static void free_answers(char *_Nullable *_Nullable answers, size_t n)
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

static void handle_requests(sshcore_conn *conn, conn_requests *rq)
{
    sshcore_op *op = NULL;
    sshcore_op *next = NULL;
    sshcore_error err;

    if (rq->cancel && conn->phase != PH_DONE && conn->state != SSHCORE_CONN_READY) {
        fail_code(conn, SSHCORE_E_CANCELLED, NULL);
    }
    if (rq->close && conn->phase != PH_DONE) {
        if (conn->state != SSHCORE_CONN_READY) {
            sshcore_error_set(&err, SSHCORE_E_CANCELLED, "closed while connecting");
            connect_complete(conn, &err);
        }
        if (conn_apply(conn, SSHCORE_CONN_EV_CLOSE) == SSHCORE_CONN_ACT_TEAR_DOWN) {
            sshcore_error_set(&err, SSHCORE_E_CLOSED, NULL);
            fail_ops(conn, conn->active, &err);
            conn->active = NULL;
            conn->phase = PH_DONE;
        }
    }
    if (rq->verdict && conn->phase == PH_HOSTKEY_WAIT) {
        resume_deadline(conn);
        if (!rq->accept) {
            fail_code(conn, SSHCORE_E_HOST_KEY_REJECTED, rq->reason);
        } else if (conn_apply(conn, SSHCORE_CONN_EV_HANDSHAKE_DONE) ==
                   SSHCORE_CONN_ACT_AUTHENTICATE) {
            conn->phase = PH_AUTH_NONE;
        } else {
            fail_code(conn, SSHCORE_E_INVALID_STATE, "host key verdict in a wrong state");
        }
    }
    if (rq->kbd && conn->phase == PH_KBD_WAIT && conn->method_idx < conn->method_count &&
        conn->methods[conn->method_idx].kind == SSHCORE_AUTH_PASSWORD_PROMPT) {
        resume_deadline(conn);
        if (rq->answers == NULL) {
            fail_code(conn, SSHCORE_E_AUTH_DENIED, "password prompt gave no answer");
        } else {
            conn->phase = PH_AUTH_METHOD;
            if (rq->answer_count == 0) {
                next_method(conn); /* no password: the next method */
            } else {
                wipe_prompted_password(conn);
                conn->prompted_password = rq->answers[0];
                rq->answers[0] = NULL; /* kept until the server answered */
            }
        }
    } else if (rq->kbd && conn->phase == PH_KBD_WAIT) {
        size_t i;
        resume_deadline(conn);
        if (rq->answers == NULL) {
            fail_code(conn, SSHCORE_E_AUTH_DENIED, "keyboard-interactive responder gave no answers");
        } else {
            for (i = 0; i < rq->answer_count; i++) {
                if (ssh_userauth_kbdint_setanswer(conn->session, (unsigned)i,
                                                  rq->answers[i]) < 0) {
                    fail_lib(conn, SSHCORE_E_AUTH_DENIED, "ssh_userauth_kbdint_setanswer");
                    break;
                }
            }
            if (conn->phase == PH_KBD_WAIT) {
                conn->phase = PH_AUTH_METHOD;
            }
        }
    }
    free_answers(rq->answers, rq->answer_count);
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
        if (conn->phase != PH_READY ||
            conn_apply(conn, SSHCORE_CONN_EV_OPEN_CHANNEL) != SSHCORE_CONN_ACT_OPEN_CHANNEL) {
            int code = atomic_load(&conn->fail_code);
            sshcore_error_set(&err, code != 0 ? code : SSHCORE_E_CLOSED, NULL);
            fail_ops(conn, op, &err);
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
/* The worker                                                              */
/* ---------------------------------------------------------------------- */

/* STOPPING: TERM again after this long, close regardless after that long */
#define ORPHAN_SIGNAL_INTERVAL_MS 100
#define ORPHAN_STOP_LIMIT_MS 2000

static struct sshcore_orphan *_Nullable orphan_new(sshcore_conn *conn, ssh_channel ch,
                                                   enum sshcore_orphan_stage stage)
{
    struct sshcore_orphan *o = calloc(1, sizeof(*o));

    if (o == NULL) {
        return NULL;
    }
    o->ch = ch;
    o->stage = stage;
    o->next = conn->orphans;
    conn->orphans = o;
    return o;
}

void sshcore_conn_adopt_opening_channel(sshcore_conn *conn, ssh_channel ch)
{
    if (orphan_new(conn, ch, SSHCORE_ORPHAN_OPENING) == NULL) {
        ssh_channel_free(ch); /* out of memory: the server keeps the channel */
    }
}

void sshcore_conn_adopt_starting_channel(sshcore_conn *conn, ssh_channel ch, const char *command, bool exec,
                                         bool signal)
{
    char *start = strdup(exec && command != NULL ? command : "shell");
    struct sshcore_orphan *o = start != NULL ? orphan_new(conn, ch, SSHCORE_ORPHAN_STARTING) : NULL;

    if (o == NULL) {
        /* out of memory: close now; what the request started may run on */
        free(start);
        (void)ssh_channel_send_eof(ch);
        ssh_channel_free(ch);
        return;
    }
    o->start = start;
    o->exec = exec;
    o->signal = signal;
}

/** Sends TERM and moves `o` to STOPPING. */
static void orphan_stop(struct sshcore_orphan *o)
{
    int64_t now = sshcore_now_ms();

    (void)ssh_channel_request_send_signal(o->ch, "TERM");
    o->stage = SSHCORE_ORPHAN_STOPPING;
    o->wake_ms = now + ORPHAN_SIGNAL_INTERVAL_MS;
    o->give_up_ms = now + ORPHAN_STOP_LIMIT_MS;
}

void sshcore_conn_adopt_stopping_channel(sshcore_conn *conn, ssh_channel ch)
{
    struct sshcore_orphan *o = orphan_new(conn, ch, SSHCORE_ORPHAN_STOPPING);

    if (o == NULL) {
        (void)ssh_channel_request_send_signal(ch, "TERM");
        (void)ssh_channel_send_eof(ch);
        ssh_channel_free(ch);
        return;
    }
    orphan_stop(o);
}

int64_t sshcore_conn_orphans_due_ms(const sshcore_conn *conn)
{
    const struct sshcore_orphan *o = NULL;
    int64_t due = -1;

    for (o = conn->orphans; o != NULL; o = o->next) {
        if (o->stage == SSHCORE_ORPHAN_STOPPING && (due < 0 || o->wake_ms < due)) {
            due = o->wake_ms;
        }
    }
    return due;
}

/** Worker: whether orphan `o` is done with (then its channel is closed). */
static bool orphan_step(struct sshcore_orphan *o)
{
    int rc = SSH_OK;
    int64_t now = 0;

    switch (o->stage) {
    case SSHCORE_ORPHAN_OPENING:
        return ssh_channel_open_session(o->ch) != SSH_AGAIN;
    case SSHCORE_ORPHAN_STARTING:
        /* the request went out already: libssh only waits for its reply */
        rc = o->exec ? ssh_channel_request_exec(o->ch, o->start) : ssh_channel_request_shell(o->ch);
        if (rc == SSH_AGAIN) {
            return false;
        }
        if (rc != SSH_OK || !o->signal || ssh_channel_is_closed(o->ch)) {
            return true;
        }
        /* it started: a cancelled command must not run on (sshd lets a
         * process without a terminal outlive its channel) */
        orphan_stop(o);
        return false;
    case SSHCORE_ORPHAN_STOPPING:
        now = sshcore_now_ms();
        if (ssh_channel_is_closed(o->ch) || ssh_channel_is_eof(o->ch) || now >= o->give_up_ms) {
            return true;
        }
        if (now >= o->wake_ms) {
            (void)ssh_channel_request_send_signal(o->ch, "TERM");
            o->wake_ms = now + ORPHAN_SIGNAL_INTERVAL_MS;
        }
        return false;
    }
    return true;
}

/** Worker: finish the pending exchange of each orphaned channel, then close it. */
static void reap_orphans(sshcore_conn *conn)
{
    struct sshcore_orphan **link = &conn->orphans;
    struct sshcore_orphan *o = NULL;

    while ((o = *link) != NULL) {
        if (!orphan_step(o)) {
            link = &o->next;
            continue;
        }
        if (o->stage != SSHCORE_ORPHAN_OPENING && !ssh_channel_is_closed(o->ch)) {
            (void)ssh_channel_send_eof(o->ch);
        }
        ssh_channel_free(o->ch); /* open: sends CLOSE; refused: just frees */
        *link = o->next;
        free(o->start);
        free(o);
    }
}

static void free_orphans(sshcore_conn *conn)
{
    struct sshcore_orphan *o = conn->orphans;
    struct sshcore_orphan *next = NULL;

    while (o != NULL) {
        next = o->next;
        ssh_channel_free(o->ch);
        free(o->start);
        free(o);
        o = next;
    }
    conn->orphans = NULL;
}

/** Worker: step every active op; unlink the finished and the cancelled. */
static bool step_ops(sshcore_conn *conn)
{
    sshcore_op **link = &conn->active;
    sshcore_op *op = NULL;
    bool again = false;

    while ((op = *link) != NULL) {
        if (op->deadline_ms != 0 && atomic_load(&op->done) == 0 &&
            sshcore_now_ms() >= op->deadline_ms) {
            sshcore_error err;
            sshcore_error_set(&err, SSHCORE_E_TIMED_OUT, NULL);
            (void)sshcore_op_complete(op, &err);
        }
        if (atomic_load(&op->cancel_requested) == 0 && atomic_load(&op->done) == 0) {
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

/* ---------------------------------------------------------------------- */
/* Liveness (worker)                                                       */
/* ---------------------------------------------------------------------- */

/** How long the last probe may go unanswered: min(interval / 2, 1 s). */
static int64_t keepalive_grace_ms(const sshcore_conn *conn)
{
    int64_t half = conn->ka_interval_ms / 2;
    return half < 1000 ? half : 1000;
}

/**
 * When the keepalive clock next needs the worker: the next probe, or the
 * moment the connection counts as lost. -1 when keepalive is off.
 */
static int64_t keepalive_due_ms(const sshcore_conn *conn)
{
    int64_t interval = conn->ka_interval_ms;

    if (interval <= 0 || conn->phase != PH_READY) {
        return -1;
    }
    if (conn->ka_probes < conn->ka_max_missed) {
        return conn->ka_last_rx_ms + interval * (conn->ka_probes + 1);
    }
    return conn->ka_last_rx_ms + interval * conn->ka_max_missed + keepalive_grace_ms(conn);
}

/**
 * Sends one keepalive@openssh.com request with want-reply. libssh 0.10's
 * ssh_send_keepalive() sends only when its single global-request slot is
 * idle: after an answer arrived, the next call just consumes that answer and
 * sends nothing. The core tracks the slot (conn->gslot) and collects such an
 * answer first. If the previous probe is still unanswered nothing is sent,
 * which is right: one outstanding probe is enough to make a live server talk.
 */
static void keepalive_probe(sshcore_conn *conn)
{
    /* libssh has one global-request slot. While a question is out (an earlier
     * probe, a forward request or its cancel) nothing is sent: its answer makes
     * a live server talk just as well, and a probe would take it as its own. */
    if (!sshcore_global_slot_free(conn)) {
        return;
    }
    (void)ssh_send_keepalive(conn->session);
    conn->gslot = GSLOT_KEEPALIVE;
}

/**
 * Any packet from the server proves it alive. After each interval of silence
 * a probe goes out; once max_missed probes are unanswered and the last had
 * its grace, the connection is lost. A silent partition and a frozen server
 * (whose kernel still ACKs, so TCP alone never notices) look the same here.
 */
static void keepalive_check(sshcore_conn *conn)
{
    int64_t now;
    int64_t due;

    if (conn->ka_interval_ms <= 0 || conn->phase != PH_READY) {
        return;
    }
    now = sshcore_now_ms();
    if (conn->packet_counter.in_packets != conn->ka_seen_packets) {
        conn->ka_seen_packets = conn->packet_counter.in_packets;
        conn->ka_last_rx_ms = now;
        conn->ka_probes = 0;
    }
    due = keepalive_due_ms(conn);
    if (now < due) {
        return;
    }
    if (conn->ka_probes >= conn->ka_max_missed) {
        char detail[160];
        snprintf(detail, sizeof(detail),
                 "no answer from the server for %lld ms (%d keepalive%s unanswered, interval %d ms)",
                 (long long)(now - conn->ka_last_rx_ms), conn->ka_probes,
                 conn->ka_probes == 1 ? "" : "s", conn->ka_interval_ms);
        fail_code(conn, SSHCORE_E_CONNECTION_LOST, detail);
        return;
    }
    conn->ka_probes++;
    keepalive_probe(conn);
}

/**
 * libssh's authentication calls look at the authentication state only: after
 * a packet failed its integrity check they keep answering SSH_AUTH_AGAIN, and
 * the attempt would end at the connect deadline as a timeout. Fail it at once
 * with what happened.
 */
static void auth_check_session(sshcore_conn *conn)
{
    if ((conn->phase == PH_AUTH_NONE || conn->phase == PH_AUTH_METHOD) && !sshcore_session_usable(conn)) {
        fail_lib(conn, sshcore_conn_failure_code(conn), "ssh_userauth");
    }
}

static bool advance(sshcore_conn *conn)
{
    switch (conn->phase) {
    case PH_RESOLVE: phase_resolve(conn); return conn->phase != PH_RESOLVE;
    case PH_TCP_START: phase_tcp_start(conn); return conn->phase == PH_HANDSHAKE;
    case PH_TCP_WAIT: return false;
    case PH_HANDSHAKE: phase_handshake(conn); return false;
    case PH_HOSTKEY_WAIT: return false;
    case PH_AUTH_NONE:
        phase_auth_none(conn);
        auth_check_session(conn);
        return conn->phase != PH_AUTH_NONE;
    case PH_AUTH_METHOD: {
        size_t idx = conn->method_idx;
        phase_auth_method(conn);
        auth_check_session(conn);
        return conn->phase == PH_READY || conn->method_idx != idx;
    }
    case PH_KBD_WAIT: return false;
    case PH_READY: {
        /* Any libssh call may read and dispatch packets for every channel.
         * If a pass consumed packets, an op stepped earlier in the pass may
         * have new data, EOF or a close waiting that no poll() will announce:
         * step again. */
        uint64_t before = conn->packet_counter.in_packets;
        bool again = step_ops(conn);
        keepalive_check(conn);
        if (conn->gcancels != NULL && conn->phase == PH_READY) {
            sshcore_global_service(conn);
        }
        if (conn->phase != PH_READY) {
            return false;
        }
        if (conn->orphans != NULL) {
            reap_orphans(conn);
        }
        if (conn->packet_counter.in_packets != before && (conn->active != NULL || conn->orphans != NULL)) {
            again = true;
        }
        if (conn->phase == PH_READY && !sshcore_session_usable(conn)) {
            fail_lib(conn, sshcore_conn_failure_code(conn), "ssh_is_connected");
        }
        return again;
    }
    case PH_DONE: return false;
    }
    return false;
}

static void teardown(sshcore_conn *conn)
{
    bool lib_owns_fd = true;

    if (conn->event != NULL) {
        if (conn->session != NULL) {
            ssh_event_remove_session(conn->event, conn->session);
        }
        ssh_event_free(conn->event);
        conn->event = NULL;
    }
    if (conn->key != NULL) {
        ssh_key_free(conn->key);
        conn->key = NULL;
    }
    free_orphans(conn); /* before ssh_disconnect, which frees every channel */
    if (conn->session != NULL) {
        if (conn->ssh_connect_called && conn->lib_took_fd) {
            /* error paths inside libssh close its fd and set it to -1 */
            lib_owns_fd = ssh_get_fd(conn->session) != -1;
            ssh_disconnect(conn->session); /* with SSH_OPTIONS_FD: leaves the fd open */
        }
        ssh_free(conn->session);
        conn->session = NULL;
    }
    if (conn->lib_fd >= 0 && lib_owns_fd) {
        close(conn->lib_fd);
    }
    conn->lib_fd = -1;
    conn_close_socket(conn);
    if (conn->ai_list != NULL) {
        freeaddrinfo(conn->ai_list);
        conn->ai_list = NULL;
    }
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
static void ack_now(sshcore_conn *conn, uint64_t read_bytes)
{
    int one = 1;
    if (conn->sock_fd >= 0 && read_bytes < QUICKACK_BELOW) {
        (void)setsockopt(conn->sock_fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
    }
}

/* How often gated input is retried where POLLOUT cannot be trusted to mean
 * "the send queue drained below the gate" (see worker_main). */
#define SEND_WAKE_TICK_MS 2

/* One pass reads at most this much before the ops are stepped again. */
#define READ_PER_PASS (256 * 1024)

/**
 * Lets libssh read and dispatch what the socket holds. libssh 0.10 reads at
 * most 4 KiB per poll event, so one call per pass meant a poll, a recv and a
 * hand-over per 4 KiB (an SSH data packet is 32 KiB). Calling it again while
 * it still finds bytes, up to READ_PER_PASS, lets whole packets and batches
 * form first. Each call polls the socket itself with timeout 0, so pending
 * writes still go out in between.
 */
static void read_socket(sshcore_conn *conn)
{
    uint64_t start = conn->socket_counter.in_bytes;
    uint64_t last = start;

    for (;;) {
        (void)ssh_event_dopoll(conn->event, 0);
        /* a dead link, or a packet that failed its integrity check (libssh then
         * stays "connected" and every later call fails: notes row 13) */
        if (!sshcore_session_usable(conn)) {
            fail_lib(conn, sshcore_conn_failure_code(conn), "ssh_event_dopoll");
            return;
        }
        if (conn->socket_counter.in_bytes == last || conn->socket_counter.in_bytes - start >= READ_PER_PASS) {
            return;
        }
        last = conn->socket_counter.in_bytes;
    }
}

static int poll_timeout(sshcore_conn *conn)
{
    int64_t now;
    int64_t left;

    if (conn->phase == PH_READY) {
        int64_t due = keepalive_due_ms(conn);
        int64_t orphans = sshcore_conn_orphans_due_ms(conn);
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
        left = due - sshcore_now_ms();
        return left <= 0 ? 0 : (left > 60000 ? 60000 : (int)left);
    }
    if (conn->deadline_ms == 0 || conn->paused_at_ms != 0) {
        return -1;
    }
    now = sshcore_now_ms();
    left = conn->deadline_ms - now;
    if (left <= 0) {
        return 0;
    }
    return left > 60000 ? 60000 : (int)left;
}

/** Worker: room for `need` entries in the op poll arrays; false without memory. */
static bool reserve_pfds(sshcore_conn *conn, size_t need)
{
    size_t cap = conn->op_pfd_cap == 0 ? 16 : conn->op_pfd_cap;
    struct pollfd *p = NULL;
    sshcore_op **o = NULL;

    if (need <= conn->op_pfd_cap) {
        return true;
    }
    while (cap < need) {
        cap *= 2;
    }
    p = realloc(conn->op_pfds, cap * sizeof(*p));
    if (p == NULL) {
        return false;
    }
    conn->op_pfds = p;
    o = realloc(conn->op_pfd_ops, cap * sizeof(*o));
    if (o == NULL) {
        return false;
    }
    conn->op_pfd_ops = o;
    conn->op_pfd_cap = cap;
    return true;
}

/**
 * Worker: the poll set with the fds the active ops wait on (bridged sockets)
 * after the core's `base` entries. Returns its size and points *out at it;
 * without memory the ops' fds are left out (they are still stepped on the
 * socket's events) and *out is `core`.
 */
static nfds_t add_op_fds(sshcore_conn *conn, struct pollfd *core, nfds_t base,
                         struct pollfd *_Nonnull *_Nonnull out)
{
    nfds_t n = base;
    sshcore_op *op = NULL;

    *out = core;
    if (!reserve_pfds(conn, base)) {
        return base;
    }
    memcpy(conn->op_pfds, core, base * sizeof(*core));
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
        conn->op_pfds[n].fd = fd;
        conn->op_pfds[n].events = events;
        conn->op_pfds[n].revents = 0;
        conn->op_pfd_ops[n] = op;
        n++;
    }
    *out = conn->op_pfds;
    return n;
}

static void *worker_main(void *arg)
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

    (void)conn_apply(conn, SSHCORE_CONN_EV_START);
    conn->deadline_ms = sshcore_now_ms() + conn->connect_timeout_ms;

    bool readable = false;
    bool pollout_seen = false;
    bool send_wake_by_timer = false;
    uint64_t read_mark = 0;
    while (conn->phase != PH_DONE) {
        take_requests(conn, &rq);
        handle_requests(conn, &rq);
        if (conn->phase == PH_DONE) {
            break;
        }
        conn->send_blocked = false;
        again = advance(conn);
        /* POLLOUT came, yet the queue is still over the gate: a kernel without
         * the TCP_NOTSENT_LOWAT wake-up rule (before 4.20) raises POLLOUT below
         * the low-water mark, not half of it. Poll on a short timer instead of
         * for POLLOUT, which would spin. */
        send_wake_by_timer = conn->send_blocked && pollout_seen;
        if (readable) {
            /* read_socket() and advance() have read what poll() announced */
            ack_now(conn, conn->socket_counter.in_bytes - read_mark);
            readable = false;
        }
        if (conn->phase == PH_DONE) {
            break;
        }
        /* More work is ready: poll without waiting rather than skip the poll,
         * so the socket is still serviced every pass. libssh writes a queued
         * packet only after a POLLOUT event: a busy channel that kept the loop
         * from polling held every other channel's writes back (measured: 60 to
         * 270 ms echo stalls beside a bulk stream). */
        if (!again && conn->phase != PH_READY && conn->deadline_ms != 0 && conn->paused_at_ms == 0 &&
            sshcore_now_ms() >= conn->deadline_ms) {
            fail_code(conn, SSHCORE_E_CONNECT_TIMEOUT, NULL);
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
        if (conn->phase == PH_TCP_WAIT) {
            pfd[nfds].fd = conn->sock_fd;
            pfd[nfds].events = POLLOUT;
            pfd[nfds].revents = 0;
            nfds++;
        } else if (conn->session != NULL && conn->phase != PH_HOSTKEY_WAIT &&
                   conn->phase != PH_KBD_WAIT && conn->phase != PH_RESOLVE &&
                   conn->phase != PH_TCP_START) {
            pfd[nfds].fd = conn->lib_fd;
            pfd[nfds].events = POLLIN;
            /* libssh has output to flush, or an op held input back until the
             * kernel's send queue drains (nothing else may wake us then) */
            if ((ssh_get_poll_flags(conn->session) & SSH_WRITE_PENDING) != 0 ||
                (conn->send_blocked && !send_wake_by_timer)) {
                pfd[nfds].events |= POLLOUT;
            }
            pfd[nfds].revents = 0;
            nfds++;
        }
        /* with ops' own fds the whole set lives in conn->op_pfds */
        core_nfds = nfds;
        if (conn->phase == PH_READY && conn->active != NULL) {
            nfds = add_op_fds(conn, core_pfd, core_nfds, &pfd);
        }
        timeout = again ? 0 : poll_timeout(conn);
        if (send_wake_by_timer && (timeout < 0 || timeout > SEND_WAKE_TICK_MS)) {
            timeout = SEND_WAKE_TICK_MS;
        }
        pollout_seen = false;
        if (poll(pfd, nfds, timeout) < 0 && errno != EINTR) {
            fail_code(conn, SSHCORE_E_SYSTEM, "poll failed");
            break;
        }
        for (nfds_t i = core_nfds; i < nfds; i++) {
            if (pfd[i].revents != 0) {
                sshcore_op *op = conn->op_pfd_ops[i];
                op->vt->poll_event(op, pfd[i].revents);
            }
        }
        if (core_nfds > 1 && pfd[1].revents != 0) {
            readable = (pfd[1].revents & POLLIN) != 0;
            pollout_seen = (pfd[1].revents & POLLOUT) != 0;
            read_mark = conn->socket_counter.in_bytes;
            if (conn->phase == PH_TCP_WAIT) {
                phase_tcp_wait(conn);
            } else if (conn->phase == PH_READY && conn->event != NULL) {
                read_socket(conn);
            }
        }
    }

    /* closing: every op has been failed; release libssh and the fds */
    teardown(conn);
    {
        sshcore_error err;
        sshcore_error_set(&err, SSHCORE_E_CLOSED, NULL);
        (void)connect_complete(conn, &err); /* no-op unless never reported */
    }
    (void)conn_apply(conn, SSHCORE_CONN_EV_TORN_DOWN);

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
        sshcore_error_set(&err, code != 0 ? code : SSHCORE_E_CLOSED, NULL);
        fail_ops(conn, rq.pending, &err);
    }
    if (wake_fd >= 0) {
        close(wake_fd);
    }
    if (conn->cb.terminated != NULL) {
        conn->cb.terminated(conn->cb.ctx);
    }
    registry_remove(conn);
    atomic_fetch_sub(&live_workers, 1);
    sshcore_conn_unref(conn);
    return NULL;
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

sshcore_conn *sshcore_conn_start(const sshcore_config *config,
                                 const sshcore_conn_callbacks *callbacks,
                                 sshcore_error *err)
{
    sshcore_conn *conn = NULL;
    bool ok = true;
    size_t i;

    if (config->host == NULL || config->host[0] == '\0' || config->user == NULL ||
        config->connect_timeout_ms <= 0 || config->backstop_timeout_s <= 0 ||
        config->keepalive_interval_ms < 0 ||
        (config->keepalive_interval_ms > 0 && config->keepalive_max_missed < 1) ||
        callbacks->connected == NULL || callbacks->hostkey == NULL ||
        callbacks->kbdint == NULL) {
        sshcore_error_set(err, SSHCORE_E_INVALID_ARGUMENT, "incomplete configuration");
        if (config->connected_fd >= 0) {
            close(config->connected_fd);
        }
        return NULL;
    }
    conn = calloc(1, sizeof(*conn));
    if (conn == NULL) {
        sshcore_error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
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
    conn->state = SSHCORE_CONN_IDLE;
    atomic_init(&conn->state_snapshot, SSHCORE_CONN_IDLE);
    conn->phase = PH_RESOLVE;
    if (config->connected_fd >= 0) {
        conn->sock_fd = config->connected_fd; /* owned from here on */
        conn->phase = PH_HANDSHAKE;
    }
    conn->port = config->port;
    conn->connect_timeout_ms = config->connect_timeout_ms;
    conn->backstop_timeout_s = config->backstop_timeout_s;
    conn->verbosity = config->libssh_verbosity;
    conn->host = strdup(config->host);
    conn->user = strdup(config->user);
    ok = conn->host != NULL && conn->user != NULL;
    if (config->method_count > 0) {
        conn->methods = calloc(config->method_count, sizeof(sshcore_auth_method));
        ok = ok && conn->methods != NULL;
        for (i = 0; ok && i < config->method_count; i++) {
            conn->methods[i].kind = config->methods[i].kind;
            conn->methods[i].secret = dup_or_null(config->methods[i].secret, &ok);
            conn->methods[i].passphrase = dup_or_null(config->methods[i].passphrase, &ok);
            conn->methods[i].certificate = dup_or_null(config->methods[i].certificate, &ok);
            conn->methods[i].flags = config->methods[i].flags;
            conn->methods[i].attempts = config->methods[i].attempts;
        }
        conn->method_count = config->method_count;
    }
    if (ok && config->algorithm_count > 0) {
        conn->algorithms = calloc(config->algorithm_count, sizeof(sshcore_algo_setting));
        ok = conn->algorithms != NULL;
        for (i = 0; ok && i < config->algorithm_count; i++) {
            conn->algorithms[i].kind = config->algorithms[i].kind;
            conn->algorithms[i].list = dup_or_null(config->algorithms[i].list, &ok);
            ok = ok && conn->algorithms[i].list != NULL;
        }
        conn->algorithm_count = config->algorithm_count;
    }
    conn->rsa_min_bits = config->rsa_min_bits;
    conn->agent_socket = dup_or_null(config->agent_forward_socket, &ok);
    conn->ka_interval_ms = config->keepalive_interval_ms;
    conn->ka_max_missed = config->keepalive_max_missed;
    conn->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (!ok || conn->wake_fd < 0) {
        sshcore_error_set(err, conn->wake_fd < 0 ? SSHCORE_E_SYSTEM : SSHCORE_E_OUT_OF_MEMORY, NULL);
        err->sys_errno = errno;
        if (conn->wake_fd >= 0) {
            close(conn->wake_fd);
        }
        if (conn->sock_fd >= 0) {
            close(conn->sock_fd);
        }
        free_algorithms(conn);
        free_methods(conn);
        free(conn->host);
        free(conn->user);
        pthread_mutex_destroy(&conn->mu);
        free(conn);
        atomic_fetch_sub(&live_connections, 1);
        return NULL;
    }
    conn->cb = *callbacks;
    /* counted and registered before the thread exists: an exit right after sees it */
    atomic_fetch_add(&live_workers, 1);
    registry_add(conn);
    if (pthread_create(&conn->thread, NULL, worker_main, conn) != 0) {
        registry_remove(conn);
        atomic_fetch_sub(&live_workers, 1);
        sshcore_error_set(err, SSHCORE_E_SYSTEM, "pthread_create failed");
        close(conn->wake_fd);
        if (conn->sock_fd >= 0) {
            close(conn->sock_fd);
        }
        conn->cb.released = NULL; /* the caller keeps ownership of ctx */
        free_algorithms(conn);
        free_methods(conn);
        free(conn->host);
        free(conn->user);
        pthread_mutex_destroy(&conn->mu);
        free(conn);
        atomic_fetch_sub(&live_connections, 1);
        return NULL;
    }
    conn->thread_started = true;
    return conn;
}

void sshcore_conn_cancel_connect(sshcore_conn *conn)
{
    sshcore_error err;

    pthread_mutex_lock(&conn->mu);
    conn->connect_cancelled = true;
    pthread_mutex_unlock(&conn->mu);
    /* Complete first: once the socket is shut down, the worker sees an error
     * and would otherwise report that instead of the cancellation. */
    sshcore_error_set(&err, SSHCORE_E_CANCELLED, NULL);
    if (connect_complete(conn, &err)) {
        /* break any wait on the network at once; the attempt is over anyway.
         * Only when the cancel won: a connection that just became ready stays. */
        conn_shutdown_socket(conn);
    }
    sshcore_conn_wake(conn);
}

int sshcore_conn_hostkey_verdict(sshcore_conn *conn, int accept, const char *reason)
{
    pthread_mutex_lock(&conn->mu);
    if (!conn->verdict_awaited) {
        pthread_mutex_unlock(&conn->mu);
        return SSHCORE_E_INVALID_STATE;
    }
    conn->verdict_awaited = false;
    conn->verdict_ready = true;
    conn->verdict_accept = accept != 0;
    copy_str(conn->verdict_reason, sizeof(conn->verdict_reason), reason);
    pthread_mutex_unlock(&conn->mu);
    sshcore_conn_wake(conn);
    sshcore_conn_unref(conn);
    return SSHCORE_E_OK;
}

int sshcore_conn_kbdint_reply(sshcore_conn *conn, const char *const *answers, size_t count)
{
    char **copy = NULL;
    size_t i;
    bool ok = true;

    pthread_mutex_lock(&conn->mu);
    if (!conn->kbd_awaited) {
        pthread_mutex_unlock(&conn->mu);
        return SSHCORE_E_INVALID_STATE;
    }
    conn->kbd_awaited = false;
    pthread_mutex_unlock(&conn->mu);

    if (answers != NULL) {
        copy = calloc(count > 0 ? count : 1, sizeof(char *));
        ok = copy != NULL;
        for (i = 0; ok && i < count; i++) {
            copy[i] = strdup(answers[i]);
            ok = copy[i] != NULL;
        }
        if (!ok) {
            free_answers(copy, count);
            copy = NULL;
        }
    }
    pthread_mutex_lock(&conn->mu);
    free_kbd_answers(conn);
    conn->kbd_ready = true;
    conn->kbd_answers = copy;
    conn->kbd_count = copy != NULL ? count : 0;
    pthread_mutex_unlock(&conn->mu);
    sshcore_conn_wake(conn);
    sshcore_conn_unref(conn);
    return answers != NULL && copy == NULL ? SSHCORE_E_OUT_OF_MEMORY : SSHCORE_E_OK;
}

void sshcore_conn_close(sshcore_conn *conn)
{
    pthread_mutex_lock(&conn->mu);
    conn->close_requested = true;
    pthread_mutex_unlock(&conn->mu);
    sshcore_conn_wake(conn);
}

void sshcore_conn_release(sshcore_conn *conn)
{
    bool join = false;

    sshcore_conn_close(conn);
    pthread_mutex_lock(&conn->mu);
    if (conn->thread_started && !conn->thread_joined_or_detached) {
        conn->thread_joined_or_detached = true;
        /* never wait for DNS: a worker inside getaddrinfo finishes on its own */
        join = !pthread_equal(pthread_self(), conn->thread) && atomic_load(&conn->resolving) == 0;
        if (!join) {
            pthread_detach(conn->thread);
        }
    }
    pthread_mutex_unlock(&conn->mu);
    if (join) {
        pthread_join(conn->thread, NULL);
    }
    sshcore_conn_unref(conn);
}

int sshcore_conn_submit(sshcore_conn *conn, sshcore_op *op, sshcore_error *err)
{
    int st = atomic_load(&conn->state_snapshot);
    int code = SSHCORE_E_OK;

    pthread_mutex_lock(&conn->mu);
    if (st == SSHCORE_CONN_FAILED) {
        code = atomic_load(&conn->fail_code);
        if (code == SSHCORE_E_OK) {
            code = SSHCORE_E_CONNECTION_LOST;
        }
    } else if (conn->close_requested || conn->worker_exited || st != SSHCORE_CONN_READY) {
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
        snprintf(detail, sizeof(detail), "connection is %s",
                 st == SSHCORE_CONN_READY ? "closing" : sshcore_conn_state_name(st));
        sshcore_error_set(err, code, detail);
        return -1;
    }
    sshcore_conn_wake(conn);
    return 0;
}

int sshcore_key_fingerprint_sha256(const char *type, const char *base64, char *out,
                                   size_t out_len)
{
    ssh_key key = NULL;
    unsigned char *hash = NULL;
    size_t hlen = 0;
    char *fp = NULL;
    enum ssh_keytypes_e kt = ssh_key_type_from_name(type);
    int rc = SSHCORE_E_INVALID_ARGUMENT;

    if (out_len > 0) {
        out[0] = '\0';
    }
    if (kt == SSH_KEYTYPE_UNKNOWN ||
        ssh_pki_import_pubkey_base64(base64, kt, &key) != SSH_OK) {
        goto out;
    }
    if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen) != 0) {
        goto out;
    }
    fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen);
    if (fp == NULL) {
        goto out;
    }
    copy_str(out, out_len, fp);
    rc = SSHCORE_E_OK;
out:
    if (fp != NULL) {
        ssh_string_free_char(fp);
    }
    if (hash != NULL) {
        ssh_clean_pubkey_hash(&hash);
    }
    ssh_key_free(key);
    return rc;
}

int sshcore_hmac_sha1(const uint8_t *key, size_t key_len, const uint8_t *data,
                      size_t data_len, uint8_t *out)
{
    unsigned int len = 20;

    if (HMAC(EVP_sha1(), key, (int)key_len, data, data_len, out, &len) == NULL || len != 20) {
        return SSHCORE_E_SYSTEM;
    }
    return SSHCORE_E_OK;
}
