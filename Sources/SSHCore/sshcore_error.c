/*
 * sshcore_error.c - setting errors, and the one place that reads libssh's
 * failure texts to classify what went wrong (disconnected, connection lost,
 * stream corrupted, key exchange failed).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sshcore_internal.h"

void
sshcore__copy_str(char *dst, size_t cap, const char *_Nullable src)
{
    if (cap == 0) {
        return;
    }
    snprintf(dst, cap, "%s", src != NULL ? src : "");
}

void
sshcore__error_set(sshcore_error *err, int code, const char *detail)
{
    memset(err, 0, sizeof(*err));
    err->code = code;
    sshcore__copy_str(err->detail, sizeof(err->detail), detail);
}

void
sshcore__error_from_session(sshcore_error *err,
                            int code,
                            ssh_session session,
                            const char *function)
{
    memset(err, 0, sizeof(*err));
    err->code = code;
    sshcore__copy_str(err->lib_function, sizeof(err->lib_function), function);
    if (session != NULL) {
        err->lib_code = ssh_get_error_code(session);
        sshcore__copy_str(err->lib_message,
                          sizeof(err->lib_message),
                          ssh_get_error(session));
    }
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

int
sshcore__conn_failure_code(sshcore_conn *conn)
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
        for (i = 0; msg != NULL && i < sizeof(integrity_failures) /
                                           sizeof(integrity_failures[0]);
             i++) {
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

/**
 * Classifies a failed ssh_connect() by libssh's message, with the same codes as
 * later in the connection's life: the server's disconnect or end of stream is
 * DISCONNECTED, a broken link (reset, any other socket error) CONNECTION_LOST,
 * a packet that failed its integrity check STREAM_CORRUPTED; the rest is the
 * key exchange's failure.
 */
int
sshcore__handshake_failure_code(sshcore_conn *conn)
{
    const char *msg = ssh_get_error(conn->session);
    int code = sshcore__conn_failure_code(conn);

    if (msg == NULL) {
        return SSHCORE_E_KEY_EXCHANGE;
    }
    if (strstr(msg, "timed out") != NULL) {
        return SSHCORE_E_CONNECT_TIMEOUT;
    }
    if (strstr(msg, "Socket error: disconnected") != NULL ||
        strstr(msg, "SSH_MSG_DISCONNECT") != NULL ||
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

/* The names and messages of the error table (SSHCORE_ERROR_MAP). */
#define NAME_LOOKUP(table, i)                                                \
    (((i) >= 0 && (size_t)(i) < sizeof(table) / sizeof(table[0])) ? table[i] \
                                                                  : "?")

#define SSHCORE_ERR_NAME(n, m) #n,
#define SSHCORE_ERR_MSG(n, m)  m,
static const char *const err_names[] = {SSHCORE_ERROR_MAP(SSHCORE_ERR_NAME)};
static const char *const err_messages[] = {SSHCORE_ERROR_MAP(SSHCORE_ERR_MSG)};

int
sshcore_code_count(void)
{
    return (int)(sizeof(err_names) / sizeof(err_names[0]));
}
const char *
sshcore_code_name(int code)
{
    return NAME_LOOKUP(err_names, code);
}
const char *
sshcore_code_message(int code)
{
    return NAME_LOOKUP(err_messages, code);
}
