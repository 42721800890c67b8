/*
 * sshcore_error.h - errors: one X-macro table generates the codes, names and
 * messages. Part of the public interface of SSHCore (see sshcore.h); includes
 * no libssh.
 */
#ifndef SSHCORE_ERROR_H
#define SSHCORE_ERROR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#pragma clang assume_nonnull begin

/* ---------------------------------------------------------------------- */
/* Errors: one X-macro table generates the enum, names and messages.       */
/* SSHKit's SSHError.Code mirrors it in one exhaustive switch.             */
/* ---------------------------------------------------------------------- */

#define SSHCORE_ERROR_MAP(XX)                                             \
    XX(OK, "success")                                                     \
    XX(INVALID_ARGUMENT, "invalid argument")                              \
    XX(INVALID_STATE, "call not allowed in the current state")            \
    XX(OUT_OF_MEMORY, "out of memory")                                    \
    XX(SYSTEM, "system call failed")                                      \
    XX(NAME_RESOLUTION, "host name could not be resolved")                \
    XX(CONNECTION_REFUSED, "connection refused")                          \
    XX(HOST_UNREACHABLE, "host or network unreachable")                   \
    XX(CONNECT_TIMEOUT, "connection attempt timed out")                   \
    XX(KEY_EXCHANGE, "key exchange failed")                               \
    XX(HOST_KEY_REJECTED, "host key rejected")                            \
    XX(AUTH_DENIED, "authentication failed")                              \
    XX(PRIVATE_KEY, "private key could not be loaded")                    \
    XX(AGENT, "ssh-agent could not be used")                              \
    XX(DISCONNECTED, "the server closed the connection")                  \
    XX(CONNECTION_LOST, "connection lost")                                \
    XX(CLOSED, "the connection was closed")                               \
    XX(CHANNEL_OPEN_REFUSED, "the server refused to open a channel")      \
    XX(CHANNEL_REQUEST_FAILED, "the server refused a channel request")    \
    XX(OUTPUT_LIMIT, "command output exceeded the limit")                 \
    XX(CANCELLED, "operation cancelled")                                  \
    XX(PROTOCOL, "SSH protocol error")                                    \
    XX(KNOWN_HOSTS, "known_hosts file unusable")                          \
    XX(TIMED_OUT, "the operation timed out")                              \
    XX(CHANNEL_CLOSED, "the channel is closed")                           \
    XX(FORWARD_REFUSED, "the server refused the port forwarding request") \
    XX(STREAM_CORRUPTED, "data from the server failed its integrity check")

/* closed: Swift imports it as a frozen enum and switches over it exhaustively
 */
typedef enum __attribute__((enum_extensibility(closed))) sshcore_code {
#define SSHCORE_ERR_ENUM(name, msg) SSHCORE_E_##name,
    SSHCORE_ERROR_MAP(SSHCORE_ERR_ENUM)
#undef SSHCORE_ERR_ENUM
} sshcore_code;

/** @brief How many codes the table has (valid codes are 0 ..< count). */
int sshcore_code_count(void);
/** @brief The symbolic name of an error code ("CONNECTION_REFUSED"). */
const char *sshcore_code_name(int code);
/** @brief The fixed English message of an error code. */
const char *sshcore_code_message(int code);

/**
 * @brief A failure, filled on the worker right after the failing call.
 *
 * `lib_function`, `lib_code` and `lib_message` copy what libssh said
 * (ssh_get_error / ssh_get_error_code) at the moment of failure; they are
 * empty when libssh was not involved.
 */
typedef struct sshcore_error {
    int code;              /**< sshcore_code */
    int sys_errno;         /**< errno or getaddrinfo code, 0 if none */
    int lib_code;          /**< ssh_get_error_code(), 0 if none */
    char lib_function[48]; /**< the libssh function that failed */
    char lib_message[320]; /**< ssh_get_error() text */
    char detail[512];      /**< what the core adds: methods left, ... */
} sshcore_error;

#pragma clang assume_nonnull end

#ifdef __cplusplus
}
#endif

#endif /* SSHCORE_ERROR_H */
