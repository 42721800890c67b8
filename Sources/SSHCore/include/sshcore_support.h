/*
 * sshcore_support.h - small helpers: listener sockets, thread names, key
 * fingerprints and HMAC, ProxyCommand, diagnostics. Part of the public
 * interface of SSHCore (see sshcore.h); includes no libssh.
 */
#ifndef SSHCORE_SUPPORT_H
#define SSHCORE_SUPPORT_H

#include <stddef.h>
#include <stdint.h>
#include "sshcore_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#pragma clang assume_nonnull begin

/* ---------------------------------------------------------------------- */
/* Small socket helpers for listeners (Linux calls Swift's Glibc lacks)    */
/* ---------------------------------------------------------------------- */

/** @brief accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC and TCP_NODELAY on TCP.
 *  @return the fd, or -1 with errno set (EAGAIN: nothing pending). */
int sshcore_accept(int listen_fd);

/** @brief A non-blocking, close-on-exec eventfd (counter 0), or -1. */
int sshcore_eventfd(void);

/** @brief Names the calling thread (truncated to 15 bytes). */
void sshcore_set_thread_name(const char *name);

/* ---------------------------------------------------------------------- */
/* Keys                                                                    */
/* ---------------------------------------------------------------------- */

/**
 * @brief Tests only: offer every Ed25519 user certificate through the core's
 * in-process agent, the way the core must on libssh 0.11.0-0.11.3 (whose
 * ssh_pki_copy_cert_to_privkey refuses Ed25519), so that path runs on any
 * libssh. Off by default; affects connections that load a key afterwards.
 */
void sshcore_testing_force_cert_agent(int on);

/**
 * @brief Tests only: called by every worker at teardown with libssh's fd
 * number, once libssh is done with the session and before the worker decides
 * whether that fd is still its own to close. A probe may open a file at that
 * number when it is free, as another thread of the process may. NULL (the
 * default) calls nothing.
 */
void sshcore_testing_set_teardown_probe(void (*_Nullable probe)(int lib_fd));

/**
 * @brief Parse a public key given as type name and base64 blob and write its
 * SHA256 fingerprint ("SHA256:...") into out.
 * @return SSHCORE_E_OK, or INVALID_ARGUMENT when the key does not parse.
 */
int sshcore_key_fingerprint_sha256(const char *type,
                                   const char *base64,
                                   char *out,
                                   size_t out_len);

/**
 * @brief HMAC-SHA1 (OpenSSL), as used by hashed known_hosts entries.
 * @param[out] out 20 bytes.
 * @return SSHCORE_E_OK or SSHCORE_E_SYSTEM.
 */
int sshcore_hmac_sha1(const uint8_t *key,
                      size_t key_len,
                      const uint8_t *data,
                      size_t data_len,
                      uint8_t *out);

/**
 * @brief SHA-256 (sha256 != 0) or SHA-1 (OpenSSL) of data: the one
 * implementation of each digest in the package.
 * @param[out] out 32 bytes for SHA-256, 20 for SHA-1.
 * @return SSHCORE_E_OK or SSHCORE_E_SYSTEM.
 */
int sshcore_digest(int sha256, const uint8_t *data, size_t len, uint8_t *out);

/**
 * @brief Starts a ProxyCommand: `shell -c "exec command"` with one end of a new
 * socket pair as its stdin and stdout (stderr inherited, every other fd closed,
 * default signal handling). The caller owns the other end (`*fd_out`,
 * close-on-exec; give it to sshcore_conn_start as connected_fd) and must reap
 * `*pid_out`.
 * @return 0, or an errno value (nothing was started).
 */
int sshcore_proxy_spawn(const char *shell,
                        const char *command,
                        int *fd_out,
                        int *pid_out);

/* ---------------------------------------------------------------------- */
/* Diagnostics                                                             */
/* ---------------------------------------------------------------------- */

/** @brief Number of live connection objects (for leak tests). */
long sshcore_debug_live_connections(void);
/** @brief Number of worker threads running (for leak tests). */
long sshcore_debug_live_workers(void);

#pragma clang assume_nonnull end

#ifdef __cplusplus
}
#endif

#endif /* SSHCORE_SUPPORT_H */
