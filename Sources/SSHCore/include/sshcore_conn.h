/*
 * sshcore_conn.h - connections: configuration, authentication methods,
 * callbacks, lifetime. Part of the public interface of SSHCore (see sshcore.h);
 * includes no libssh.
 */
#ifndef SSHCORE_CONN_H
#define SSHCORE_CONN_H

#include <stddef.h>
#include <stdint.h>
#include "sshcore_error.h"
#include "sshcore_fsm.h"

#ifdef __cplusplus
extern "C" {
#endif

#pragma clang assume_nonnull begin

/* ---------------------------------------------------------------------- */
/* Connections                                                             */
/* ---------------------------------------------------------------------- */

typedef struct sshcore_conn sshcore_conn;
typedef struct sshcore_op sshcore_op;

typedef enum sshcore_auth_kind {
    SSHCORE_AUTH_PASSWORD = 1,   /**< secret: the password */
    SSHCORE_AUTH_KEY_FILE = 2,   /**< secret: path; passphrase optional */
    SSHCORE_AUTH_KEY_MEMORY = 3, /**< secret: PEM/OpenSSH text; passphrase */
    SSHCORE_AUTH_AGENT = 4,      /**< secret: agent socket path or NULL */
    SSHCORE_AUTH_KBDINT = 5,     /**< answers come via the kbdint callback */
    /** password authentication with the password asked for when the server
     *  offers it: the kbdint callback gets one prompt with `password` set, and
     *  up to `attempts` tries (ssh's NumberOfPasswordPrompts) */
    SSHCORE_AUTH_PASSWORD_PROMPT = 6,
} sshcore_auth_kind;

/** sshcore_auth_method.flags */
enum {
    /** A key that cannot be used (missing, unreadable, encrypted without a
     *  passphrase, open to others, a certificate that does not load) or an
     * agent that cannot be reached is skipped, as ssh(1) skips it, and the next
     * method tried; without it such a method fails the connection. */
    SSHCORE_AUTH_SKIP_UNUSABLE = 1 << 0,
    /** KEY_FILE and KEY_MEMORY without a passphrase: when the key turns out to
     *  be encrypted, its passphrase is asked for through the kbdint callback
     *  (one prompt, `passphrase` set), up to `attempts` times while it is
     *  wrong (ssh's NumberOfPasswordPrompts); without it such a key is
     *  unusable. */
    SSHCORE_AUTH_ASK_PASSPHRASE = 1 << 1,
};

/** One authentication method; methods are tried in the order given. */
typedef struct sshcore_auth_method {
    sshcore_auth_kind kind;
    const char *_Nullable secret;
    const char *_Nullable passphrase;
    /** KEY_FILE and KEY_MEMORY: an OpenSSH certificate file for the key (its
     *  public key must be the key's), offered instead of the plain key; or
     * NULL. */
    const char *_Nullable certificate;
    unsigned flags;
    /** PASSWORD_PROMPT: how many passwords to ask for (0 counts as 1);
     *  ASK_PASSPHRASE: how many passphrases (0 counts as 3). */
    unsigned attempts;
} sshcore_auth_method;

/** Bits of the methods a server offers (ssh_userauth_list). */
enum {
    SSHCORE_METHOD_NONE = 1 << 0,
    SSHCORE_METHOD_PASSWORD = 1 << 1,
    SSHCORE_METHOD_PUBLICKEY = 1 << 2,
    SSHCORE_METHOD_HOSTBASED = 1 << 3,
    SSHCORE_METHOD_KBDINT = 1 << 4,
    SSHCORE_METHOD_GSSAPI = 1 << 5,
};

/** The key a server presented during key exchange. */
typedef struct sshcore_hostkey {
    const char *type;   /**< "ssh-ed25519", "ecdsa-sha2-nistp256", ... */
    const char *sha256; /**< "SHA256:<base64 without padding>" */
    const char *base64; /**< the public key blob, base64 */
    const char *host;   /**< as configured */
    uint16_t port;
} sshcore_hostkey;

/** A keyboard-interactive challenge, a password prompt (`password` set) or a
 *  key's passphrase prompt (`passphrase` set); answer with
 *  sshcore_conn_kbdint_reply. */
typedef struct sshcore_kbdint {
    const char *name;
    const char *instruction;
    size_t count;
    const char *_Nonnull const *_Nonnull prompts;
    const int *echo;
    /** 1 for SSHCORE_AUTH_PASSWORD_PROMPT: one prompt, answer with the password
     *  (or zero answers to skip the method); 0 for keyboard-interactive. */
    int password;
    /** 1 for SSHCORE_AUTH_ASK_PASSPHRASE: one prompt, answer with the key's
     *  passphrase (or zero answers to skip the key). */
    int passphrase;
    /** passphrase prompts: the key file's path, or NULL for a key in memory */
    const char *_Nullable key_path;
    /** password prompts: 1 for the first, 2 after the server refused one, ...;
     *  passphrase prompts: 1, then 2 after a wrong one, ... */
    unsigned attempt;
} sshcore_kbdint;

typedef struct sshcore_conn_callbacks {
    /** Passed to every callback; owned by the caller until `released`. */
    void *_Nullable ctx;
    /** The connect operation ended; err->code is SSHCORE_E_OK on success. */
    void (*connected)(void *_Nullable ctx, const sshcore_error *err);
    /** Decide on the presented key: call sshcore_conn_hostkey_verdict exactly
     *  once (from any thread, later is fine). The core keeps the connection
     *  object alive until then. */
    void (*hostkey)(void *_Nullable ctx,
                    sshcore_conn *conn,
                    const sshcore_hostkey *key);
    /** Answer with sshcore_conn_kbdint_reply exactly once (NULL answers
     *  abort); the connection object stays alive until then. */
    void (*kbdint)(void *_Nullable ctx,
                   sshcore_conn *conn,
                   const sshcore_kbdint *challenge);
    /** The worker finished: every fd is closed, every operation completed. */
    void (*_Nullable terminated)(void *_Nullable ctx);
    /** The core will never use ctx again; the caller may free it. */
    void (*_Nullable released)(void *_Nullable ctx);
} sshcore_conn_callbacks;

/** Algorithm lists a connection may restrict (libssh option per kind). */
typedef enum sshcore_algo_kind {
    SSHCORE_ALGO_KEX = 0,
    SSHCORE_ALGO_HOSTKEY,
    SSHCORE_ALGO_CIPHER_C2S,
    SSHCORE_ALGO_CIPHER_S2C,
    SSHCORE_ALGO_MAC_C2S,
    SSHCORE_ALGO_MAC_S2C,
    SSHCORE_ALGO_COMPRESSION_C2S,
    SSHCORE_ALGO_COMPRESSION_S2C,
    SSHCORE_ALGO_PUBKEY_TYPES,
} sshcore_algo_kind;

/** One restriction: a comma-separated list, in order of preference. */
typedef struct sshcore_algo_setting {
    sshcore_algo_kind kind;
    const char *list;
} sshcore_algo_setting;

/** @brief Whether this libssh supports `name` for `kind` (checked on a scratch
 * session). */
int sshcore_algorithm_supported(sshcore_algo_kind kind, const char *name);

/** What key exchange settled on (empty strings when unknown). */
typedef struct sshcore_negotiated {
    char kex[64];
    char hostkey[64];
    char cipher_c2s[64];
    char cipher_s2c[64];
    char mac_c2s[64];
    char mac_s2c[64];
} sshcore_negotiated;

/** @brief After a successful connect: the negotiated algorithms. */
void sshcore_conn_negotiated(sshcore_conn *conn, sshcore_negotiated *out);

typedef struct sshcore_config {
    const char *host;
    uint16_t port;
    const char *user;
    /** Absolute deadline for TCP connect + key exchange + authentication,
     *  not counting time spent waiting for the hostkey / kbdint callbacks. */
    int connect_timeout_ms;
    /** libssh's own SSH_OPTIONS_TIMEOUT backstop in seconds (> 0). */
    int backstop_timeout_s;
    const sshcore_auth_method *methods;
    size_t method_count;
    /** libssh log verbosity (0 = none); logs go to stderr. */
    int libssh_verbosity;
    /** An already-connected stream socket to use instead of resolving and
     *  connecting, or -1. The core takes ownership of it from this call on
     *  (also when sshcore_conn_start fails): only the worker closes it, once.
     */
    int connected_fd;
    /** Algorithm restrictions (NULL/0: libssh's defaults). */
    const sshcore_algo_setting *_Nullable algorithms;
    size_t algorithm_count;
    /** Smallest RSA key accepted, in bits (0: libssh's default). */
    int rsa_min_bits;
    /** Keepalive (0: off). After this long without a packet from the server
     *  the worker sends a keepalive@openssh.com global request (want-reply),
     *  and again after each further interval of silence. */
    int keepalive_interval_ms;
    /** Probes without an answer before the connection is declared lost: it
     *  fails with CONNECTION_LOST once `keepalive_max_missed` probes went
     *  unanswered and the last one had min(interval / 2, 1 s) to be answered,
     *  i.e. after interval × max_missed + that grace of silence. */
    int keepalive_max_missed;
    /** Agent forwarding (ssh -A), or NULL: every session channel (exec, shell)
     *  asks for it (auth-agent-req@openssh.com), and each
     * auth-agent@openssh.com channel the server opens is joined, inside the
     * worker, to a new connection to this local agent socket. A channel that
     * cannot reach the agent is refused (the server's client sees its agent
     * fail). */
    const char *_Nullable agent_forward_socket;
} sshcore_config;

/**
 * @brief Create a connection and start connecting on a new worker thread.
 *
 * The configuration is copied. On success the caller holds one reference
 * (drop it with sshcore_conn_release) and `callbacks->connected` will be
 * called exactly once. On failure NULL is returned, `err` says why, and no
 * callback is ever called.
 */
sshcore_conn *_Nullable sshcore_conn_start(
    const sshcore_config *config,
    const sshcore_conn_callbacks *callbacks,
    sshcore_error *err);

/** @brief Cancel the connect operation (any thread, never blocks). */
void sshcore_conn_cancel_connect(sshcore_conn *conn);

/** @brief Answer the hostkey callback: nonzero accepts; anything else fails
 * closed.
 * @return SSHCORE_E_OK, or SSHCORE_E_INVALID_STATE when no callback awaits an
 * answer (a second verdict): it is ignored. After sshcore_conn_cancel_connect
 *         or sshcore_conn_close the owed answer is still taken (it releases the
 *         core's hold on the connection) but ignored: SSHCORE_E_CANCELLED or
 *         SSHCORE_E_CLOSED. */
int sshcore_conn_hostkey_verdict(sshcore_conn *conn,
                                 int accept,
                                 const char *_Nullable reason);

/** @brief Answer the kbdint callback; NULL answers abort authentication. A
 *  password prompt takes one answer, or zero (non-NULL) to go on to the next
 *  method.
 * @return SSHCORE_E_OK, or SSHCORE_E_INVALID_STATE when no challenge awaits an
 *         answer (a second reply): it is ignored. SSHCORE_E_OUT_OF_MEMORY when
 * the answers could not be copied (authentication is then aborted).
 *         SSHCORE_E_CANCELLED or SSHCORE_E_CLOSED after a cancel or close, as
 * for sshcore_conn_hostkey_verdict. */
int sshcore_conn_kbdint_reply(sshcore_conn *conn,
                              const char *_Nonnull const *_Nullable answers,
                              size_t count);

/** @brief Begin closing (idempotent, any thread). Open operations fail with
 * CLOSED. */
void sshcore_conn_close(sshcore_conn *conn);

/** @brief Drop the caller's reference. Closes the connection if still open
 *  and joins the worker thread unless called on it. */
void sshcore_conn_release(sshcore_conn *conn);

/** @brief The current state (a snapshot). */
sshcore_conn_state sshcore_conn_get_state(sshcore_conn *conn);

/** @brief After a successful connect: the SSHCORE_METHOD_* bits the server
 * offered. */
unsigned sshcore_conn_offered_methods(sshcore_conn *conn);

/** @brief Copy a string describing the server (its banner) into buf. */
void sshcore_conn_server_banner(sshcore_conn *conn, char *buf, size_t len);

/** @brief Test hook: the fds the core owns right now (-1 when closed). */
void sshcore_conn_debug_fds(sshcore_conn *conn,
                            int *_Nullable socket_fd,
                            int *_Nullable wake_fd);

#pragma clang assume_nonnull end

#ifdef __cplusplus
}
#endif

#endif /* SSHCORE_CONN_H */
