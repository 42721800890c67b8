/*
 * sshcore_connect.c - connecting, on the worker: resolve the name, the
 * non-blocking TCP connect (each address in turn), the libssh session and its
 * options (algorithms, the core's own fd), the key exchange, and handing the
 * host key to the caller.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "sshcore_internal.h"

static enum ssh_options_e algo_option(sshcore_algo_kind kind);

void
sshcore__connect_resolve(sshcore_conn *conn)
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
    rc = getaddrinfo(conn->host, port, &hints, &conn->setup->ai_list);
    atomic_store(&conn->resolving, 0);
    if (rc != 0) {
        sshcore_error err;
        sshcore__error_set(&err, SSHCORE_E_NAME_RESOLUTION, gai_strerror(rc));
        err.sys_errno = rc;
        sshcore__conn_fail_with(conn, &err);
        return;
    }
    conn->setup->ai_cur = conn->setup->ai_list;
    (void)sshcore__conn_event(conn, SSHCORE_PHASE_EV_RESOLVED);
}

void
sshcore__connect_tcp_start(sshcore_conn *conn)
{
    bool in_progress = false;
    int fd;

    while (conn->setup->ai_cur != NULL) {
        fd = sshcore__socket_connect_start(conn->setup->ai_cur, &in_progress);
        if (fd >= 0) {
            pthread_mutex_lock(&conn->mu);
            conn->sock_fd = fd;
            pthread_mutex_unlock(&conn->mu);
            (void)sshcore__conn_event(conn,
                                      in_progress
                                          ? SSHCORE_PHASE_EV_TCP_PENDING
                                          : SSHCORE_PHASE_EV_TCP_CONNECTED);
            return;
        }
        conn->setup->last_connect_errno = errno;
        conn->setup->ai_cur = conn->setup->ai_cur->ai_next;
    }
    {
        sshcore_error err;
        sshcore__error_set(
            &err,
            sshcore__errno_to_code(conn->setup->last_connect_errno),
            strerror(conn->setup->last_connect_errno));
        err.sys_errno = conn->setup->last_connect_errno;
        sshcore__conn_fail_with(conn, &err);
    }
}

void
sshcore__connect_tcp_wait(sshcore_conn *conn)
{
    int e = sshcore__socket_connect_result(conn->sock_fd);

    if (e == 0) {
        (void)sshcore__conn_event(conn, SSHCORE_PHASE_EV_TCP_CONNECTED);
        return;
    }
    conn->setup->last_connect_errno = e;
    sshcore__conn_close_socket(conn);
    conn->setup->ai_cur =
        conn->setup->ai_cur != NULL ? conn->setup->ai_cur->ai_next : NULL;
    (void)sshcore__conn_event(conn, SSHCORE_PHASE_EV_TCP_RETRY);
}

static int
session_create(sshcore_conn *conn)
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
    for (i = 0; i < conn->setup->method_count; i++) {
        if (conn->setup->methods[i].kind == SSHCORE_AUTH_AGENT &&
            conn->setup->methods[i].secret != NULL) {
            if (ssh_options_set(s,
                                SSH_OPTIONS_IDENTITY_AGENT,
                                conn->setup->methods[i].secret) != SSH_OK) {
                return -1;
            }
        }
    }
    for (i = 0; i < conn->setup->algorithm_count; i++) {
        if (ssh_options_set(s,
                            algo_option(conn->setup->algorithms[i].kind),
                            conn->setup->algorithms[i].list) != SSH_OK) {
            return 1;
        }
    }
    if (conn->setup->rsa_min_bits > 0 &&
        ssh_options_set(s,
                        SSH_OPTIONS_RSA_MIN_SIZE,
                        &conn->setup->rsa_min_bits) != SSH_OK) {
        return 1;
    }
    ssh_set_counters(s, &conn->socket_counter, &conn->packet_counter);
    ssh_set_blocking(s, 0);
    return 0;
}

static enum ssh_options_e
algo_option(sshcore_algo_kind kind)
{
    switch (kind) {
    case SSHCORE_ALGO_KEX:
        return SSH_OPTIONS_KEY_EXCHANGE;
    case SSHCORE_ALGO_HOSTKEY:
        return SSH_OPTIONS_HOSTKEYS;
    case SSHCORE_ALGO_CIPHER_C2S:
        return SSH_OPTIONS_CIPHERS_C_S;
    case SSHCORE_ALGO_CIPHER_S2C:
        return SSH_OPTIONS_CIPHERS_S_C;
    case SSHCORE_ALGO_MAC_C2S:
        return SSH_OPTIONS_HMAC_C_S;
    case SSHCORE_ALGO_MAC_S2C:
        return SSH_OPTIONS_HMAC_S_C;
    case SSHCORE_ALGO_COMPRESSION_C2S:
        return SSH_OPTIONS_COMPRESSION_C_S;
    case SSHCORE_ALGO_COMPRESSION_S2C:
        return SSH_OPTIONS_COMPRESSION_S_C;
    case SSHCORE_ALGO_PUBKEY_TYPES:
        return SSH_OPTIONS_PUBLICKEY_ACCEPTED_TYPES;
    }
    return SSH_OPTIONS_KEY_EXCHANGE;
}

int
sshcore_algorithm_supported(sshcore_algo_kind kind, const char *name)
{
    /* libssh silently drops unknown names from a list and fails only when
     * none is left: ask about one name at a time */
    ssh_session s = NULL;
    int ok = 0;

    if (name[0] == '\0' || strchr(name, ',') != NULL) {
        return 0;
    }
    if ((kind == SSHCORE_ALGO_COMPRESSION_C2S ||
         kind == SSHCORE_ALGO_COMPRESSION_S2C) &&
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

void
sshcore_conn_negotiated(sshcore_conn *conn, sshcore_negotiated *out)
{
    *out = conn->negotiated;
}

void
sshcore__connect_handshake(sshcore_conn *conn)
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
        sshcore__socket_tune(conn->sock_fd, conn->backstop_timeout_s * 1000);
        int crc = session_create(conn);
        if (crc < 0) {
            sshcore_error err;
            sshcore__error_set(&err,
                               SSHCORE_E_SYSTEM,
                               "dup() of the socket failed");
            err.sys_errno = -crc;
            sshcore__conn_fail_with(conn, &err);
            return;
        }
        if (crc != 0) {
            sshcore__conn_fail_lib(conn,
                                   SSHCORE_E_INVALID_ARGUMENT,
                                   "ssh_options_set");
            return;
        }
    }
    conn->ssh_connect_called = true;
    rc = ssh_connect(conn->session);
    /* libssh switches the socket to blocking when it first sees it writable
     * (socket.c, CONNECTING -> CONNECTED); the fd is a dup of ours, so that
     * clears O_NONBLOCK for both. The worker must never block in send(). */
    (void)fcntl(conn->sock_fd,
                F_SETFL,
                fcntl(conn->sock_fd, F_GETFL) | O_NONBLOCK);
    if (rc == SSH_AGAIN) {
        return;
    }
    if (rc != SSH_OK) {
        sshcore__conn_fail_lib(conn,
                               sshcore__handshake_failure_code(conn),
                               "ssh_connect");
        return;
    }
    banner = ssh_get_serverbanner(conn->session);
    sshcore__copy_str(conn->banner, sizeof(conn->banner), banner);
    sshcore__copy_str(conn->negotiated.kex,
                      sizeof(conn->negotiated.kex),
                      ssh_get_kex_algo(conn->session));
    sshcore__copy_str(conn->negotiated.cipher_c2s,
                      sizeof(conn->negotiated.cipher_c2s),
                      ssh_get_cipher_out(conn->session));
    sshcore__copy_str(conn->negotiated.cipher_s2c,
                      sizeof(conn->negotiated.cipher_s2c),
                      ssh_get_cipher_in(conn->session));
    sshcore__copy_str(conn->negotiated.mac_c2s,
                      sizeof(conn->negotiated.mac_c2s),
                      ssh_get_hmac_out(conn->session));
    sshcore__copy_str(conn->negotiated.mac_s2c,
                      sizeof(conn->negotiated.mac_s2c),
                      ssh_get_hmac_in(conn->session));

    if (ssh_get_server_publickey(conn->session, &key) != SSH_OK) {
        sshcore__conn_fail_lib(conn,
                               SSHCORE_E_KEY_EXCHANGE,
                               "ssh_get_server_publickey");
        return;
    }
    if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen) !=
            0 ||
        (fp =
             ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen)) ==
            NULL ||
        ssh_pki_export_pubkey_base64(key, &b64) != SSH_OK) {
        sshcore__conn_fail_lib(conn,
                               SSHCORE_E_KEY_EXCHANGE,
                               "ssh_get_publickey_hash");
        goto out;
    }
    type = ssh_key_type(key) == SSH_KEYTYPE_ECDSA_P256 ||
                   ssh_key_type(key) == SSH_KEYTYPE_ECDSA_P384 ||
                   ssh_key_type(key) == SSH_KEYTYPE_ECDSA_P521
               ? ssh_pki_key_ecdsa_name(key)
               : ssh_key_type_to_char(ssh_key_type(key));
    hk.type = type != NULL ? type : "unknown";
    sshcore__copy_str(conn->negotiated.hostkey,
                      sizeof(conn->negotiated.hostkey),
                      hk.type);
    hk.sha256 = fp;
    hk.base64 = b64;
    hk.host = conn->host;
    hk.port = conn->port;
    if (sshcore__conn_event(conn, SSHCORE_PHASE_EV_HOSTKEY_ASKED) ==
        SSHCORE_PHASE_ACT_REJECT) {
        goto out;
    }
    sshcore__conn_retain(conn); /* dropped by sshcore_conn_hostkey_verdict */
    pthread_mutex_lock(&conn->mu);
    conn->answers.verdict_awaited = true;
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
