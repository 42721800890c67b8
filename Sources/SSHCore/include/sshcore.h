/*
 * sshcore.h - the public interface of SSHCore.
 *
 * SSHCore is the only code in this package that calls libssh. This header
 * deliberately does not include libssh: it exposes opaque handles, plain
 * structs and completion callbacks only, so `import SSHCore` in Swift exposes
 * no ssh_* symbol.
 *
 * Threading: every connection owns one worker thread. All libssh calls for a
 * connection run on that thread. Every function in this header may be called
 * from any thread and never blocks on the network. Completion callbacks run on
 * the worker thread, or, for a cancelled operation, on the thread that called
 * the cancel function. Each completion is called exactly once.
 */
#ifndef SSHCORE_H
#define SSHCORE_H

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

#define SSHCORE_ERROR_MAP(XX)                                                  \
    XX(OK, "success")                                                          \
    XX(INVALID_ARGUMENT, "invalid argument")                                   \
    XX(INVALID_STATE, "call not allowed in the current state")                 \
    XX(OUT_OF_MEMORY, "out of memory")                                         \
    XX(SYSTEM, "system call failed")                                           \
    XX(NAME_RESOLUTION, "host name could not be resolved")                     \
    XX(CONNECTION_REFUSED, "connection refused")                               \
    XX(HOST_UNREACHABLE, "host or network unreachable")                        \
    XX(CONNECT_TIMEOUT, "connection attempt timed out")                        \
    XX(KEY_EXCHANGE, "key exchange failed")                                    \
    XX(HOST_KEY_REJECTED, "host key rejected")                                 \
    XX(AUTH_DENIED, "authentication failed")                                   \
    XX(PRIVATE_KEY, "private key could not be loaded")                         \
    XX(AGENT, "ssh-agent could not be used")                                   \
    XX(DISCONNECTED, "the server closed the connection")                       \
    XX(CONNECTION_LOST, "connection lost")                                     \
    XX(CLOSED, "the connection was closed")                                    \
    XX(CHANNEL_OPEN_REFUSED, "the server refused to open a channel")           \
    XX(CHANNEL_REQUEST_FAILED, "the server refused a channel request")         \
    XX(OUTPUT_LIMIT, "command output exceeded the limit")                      \
    XX(CANCELLED, "operation cancelled")                                       \
    XX(PROTOCOL, "SSH protocol error")                                         \
    XX(KNOWN_HOSTS, "known_hosts file unusable")                              \
    XX(TIMED_OUT, "the operation timed out")                                   \
    XX(CHANNEL_CLOSED, "the channel is closed")                                \
    XX(FORWARD_REFUSED, "the server refused the port forwarding request")     \
    XX(STREAM_CORRUPTED, "data from the server failed its integrity check")

/* closed: Swift imports it as a frozen enum and switches over it exhaustively */
typedef enum __attribute__((enum_extensibility(closed))) sshcore_err {
#define SSHCORE_ERR_ENUM(name, msg) SSHCORE_E_##name,
    SSHCORE_ERROR_MAP(SSHCORE_ERR_ENUM)
#undef SSHCORE_ERR_ENUM
} sshcore_err;

/** @brief How many codes the table has (valid codes are 0 ..< count). */
int sshcore_err_count(void);
/** @brief The symbolic name of an error code ("CONNECTION_REFUSED"). */
const char *sshcore_err_name(int code);
/** @brief The fixed English message of an error code. */
const char *sshcore_err_message(int code);

/**
 * @brief A failure, filled on the worker right after the failing call.
 *
 * `lib_function`, `lib_code` and `lib_message` copy what libssh said
 * (ssh_get_error / ssh_get_error_code) at the moment of failure; they are
 * empty when libssh was not involved.
 */
typedef struct sshcore_error {
    int code;              /**< sshcore_err */
    int sys_errno;         /**< errno or getaddrinfo code, 0 if none */
    int lib_code;          /**< ssh_get_error_code(), 0 if none */
    char lib_function[48]; /**< the libssh function that failed */
    char lib_message[320]; /**< ssh_get_error() text */
    char detail[512];      /**< what the core adds: methods left, ... */
} sshcore_error;

/* ---------------------------------------------------------------------- */
/* State machines: pure transition functions, no I/O.                      */
/* ---------------------------------------------------------------------- */

#define SSHCORE_CONN_STATE_MAP(XX)                                             \
    XX(IDLE, "idle")                                                           \
    XX(CONNECTING, "connecting")                                               \
    XX(AUTHENTICATING, "authenticating")                                       \
    XX(READY, "ready")                                                         \
    XX(CLOSING, "closing")                                                     \
    XX(CLOSED, "closed")                                                       \
    XX(FAILED, "failed")

#define SSHCORE_CONN_EVENT_MAP(XX)                                             \
    XX(START, "start")                                                         \
    XX(HANDSHAKE_DONE, "handshakeDone")                                        \
    XX(AUTH_OK, "authOK")                                                      \
    XX(FAILURE, "failure")                                                     \
    XX(CLOSE, "close")                                                         \
    XX(TORN_DOWN, "tornDown")                                                  \
    XX(OPEN_CHANNEL, "openChannel")

#define SSHCORE_CONN_ACTION_MAP(XX)                                            \
    XX(NONE, "none")                                                           \
    XX(CONNECT, "connect")                                                     \
    XX(AUTHENTICATE, "authenticate")                                           \
    XX(REPORT_READY, "reportReady")                                            \
    XX(TEAR_DOWN, "tearDown")                                                  \
    XX(FINISH, "finish")                                                       \
    XX(OPEN_CHANNEL, "openChannel")                                            \
    XX(REJECT, "reject")

#define SSHCORE_CHAN_STATE_MAP(XX)                                             \
    XX(OPENING, "opening")                                                     \
    XX(OPEN, "open")                                                           \
    XX(EOF_SENT, "eofSent")                                                    \
    XX(EOF_RECEIVED, "eofReceived")                                            \
    XX(CLOSING, "closing")                                                     \
    XX(CLOSED, "closed")

#define SSHCORE_CHAN_EVENT_MAP(XX)                                             \
    XX(OPEN_OK, "openOK")                                                      \
    XX(OPEN_FAILED, "openFailed")                                              \
    XX(SEND_EOF, "sendEOF")                                                    \
    XX(RECV_EOF, "recvEOF")                                                    \
    XX(RECV_CLOSE, "recvClose")                                                \
    XX(CLOSE, "close")                                                         \
    XX(CONN_LOST, "connectionLost")

#define SSHCORE_CHAN_ACTION_MAP(XX)                                            \
    XX(NONE, "none")                                                           \
    XX(START_IO, "startIO")                                                    \
    XX(SEND_EOF, "sendEOF")                                                    \
    XX(SEND_CLOSE, "sendClose")                                                \
    XX(FINISH, "finish")                                                       \
    XX(FAIL, "fail")                                                           \
    XX(REJECT, "reject")

#define SSHCORE_ENUM_CONN_STATE(n, s) SSHCORE_CONN_##n,
#define SSHCORE_ENUM_CONN_EVENT(n, s) SSHCORE_CONN_EV_##n,
#define SSHCORE_ENUM_CONN_ACTION(n, s) SSHCORE_CONN_ACT_##n,
#define SSHCORE_ENUM_CHAN_STATE(n, s) SSHCORE_CHAN_##n,
#define SSHCORE_ENUM_CHAN_EVENT(n, s) SSHCORE_CHAN_EV_##n,
#define SSHCORE_ENUM_CHAN_ACTION(n, s) SSHCORE_CHAN_ACT_##n,

typedef enum sshcore_conn_state {
    SSHCORE_CONN_STATE_MAP(SSHCORE_ENUM_CONN_STATE) SSHCORE_CONN__COUNT
} sshcore_conn_state;
typedef enum sshcore_conn_event {
    SSHCORE_CONN_EVENT_MAP(SSHCORE_ENUM_CONN_EVENT) SSHCORE_CONN_EV__COUNT
} sshcore_conn_event;
typedef enum sshcore_conn_action {
    SSHCORE_CONN_ACTION_MAP(SSHCORE_ENUM_CONN_ACTION) SSHCORE_CONN_ACT__COUNT
} sshcore_conn_action;
typedef enum sshcore_chan_state {
    SSHCORE_CHAN_STATE_MAP(SSHCORE_ENUM_CHAN_STATE) SSHCORE_CHAN__COUNT
} sshcore_chan_state;
typedef enum sshcore_chan_event {
    SSHCORE_CHAN_EVENT_MAP(SSHCORE_ENUM_CHAN_EVENT) SSHCORE_CHAN_EV__COUNT
} sshcore_chan_event;
typedef enum sshcore_chan_action {
    SSHCORE_CHAN_ACTION_MAP(SSHCORE_ENUM_CHAN_ACTION) SSHCORE_CHAN_ACT__COUNT
} sshcore_chan_action;

/**
 * @brief Apply an event to a connection state.
 * @param[in,out] state the current state; replaced by the next state.
 * @return the action the caller must perform. REJECT leaves the state
 *         unchanged and means the event is not allowed in that state.
 */
sshcore_conn_action sshcore_conn_fsm_apply(sshcore_conn_state *state,
                                           sshcore_conn_event event);
/** @brief Apply an event to a channel state; see sshcore_conn_fsm_apply. */
sshcore_chan_action sshcore_chan_fsm_apply(sshcore_chan_state *state,
                                           sshcore_chan_event event);

const char *sshcore_conn_state_name(int state);
const char *sshcore_conn_event_name(int event);
const char *sshcore_conn_action_name(int action);
const char *sshcore_chan_state_name(int state);
const char *sshcore_chan_event_name(int event);
const char *sshcore_chan_action_name(int action);

/* ---------------------------------------------------------------------- */
/* Connections                                                             */
/* ---------------------------------------------------------------------- */

typedef struct sshcore_conn sshcore_conn;
typedef struct sshcore_op sshcore_op;

typedef enum sshcore_auth_kind {
    SSHCORE_AUTH_PASSWORD = 1,     /**< secret: the password */
    SSHCORE_AUTH_KEY_FILE = 2,     /**< secret: path; passphrase optional */
    SSHCORE_AUTH_KEY_MEMORY = 3,   /**< secret: PEM/OpenSSH text; passphrase */
    SSHCORE_AUTH_AGENT = 4,        /**< secret: agent socket path or NULL */
    SSHCORE_AUTH_KBDINT = 5,       /**< answers come via the kbdint callback */
    /** password authentication with the password asked for when the server
     *  offers it: the kbdint callback gets one prompt with `password` set, and
     *  up to `attempts` tries (ssh's NumberOfPasswordPrompts) */
    SSHCORE_AUTH_PASSWORD_PROMPT = 6,
} sshcore_auth_kind;

/** sshcore_auth_method.flags */
enum {
    /** A key that cannot be used (missing, unreadable, encrypted without a
     *  passphrase, open to others, a certificate that does not load) or an agent
     *  that cannot be reached is skipped, as ssh(1) skips it, and the next method
     *  tried; without it such a method fails the connection. */
    SSHCORE_AUTH_SKIP_UNUSABLE = 1 << 0,
};

/** One authentication method; methods are tried in the order given. */
typedef struct sshcore_auth_method {
    sshcore_auth_kind kind;
    const char *_Nullable secret;
    const char *_Nullable passphrase;
    /** KEY_FILE and KEY_MEMORY: an OpenSSH certificate file for the key (its
     *  public key must be the key's), offered instead of the plain key; or NULL. */
    const char *_Nullable certificate;
    unsigned flags;
    /** PASSWORD_PROMPT: how many passwords to ask for (0 counts as 1). */
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
    const char *type;        /**< "ssh-ed25519", "ecdsa-sha2-nistp256", ... */
    const char *sha256;      /**< "SHA256:<base64 without padding>" */
    const char *base64;      /**< the public key blob, base64 */
    const char *host;        /**< as configured */
    uint16_t port;
} sshcore_hostkey;

/** A keyboard-interactive challenge, or a password prompt (`password` set);
 *  answer with sshcore_conn_kbdint_reply. */
typedef struct sshcore_kbdint {
    const char *name;
    const char *instruction;
    size_t count;
    const char *_Nonnull const *_Nonnull prompts;
    const int *echo;
    /** 1 for SSHCORE_AUTH_PASSWORD_PROMPT: one prompt, answer with the password
     *  (or zero answers to skip the method); 0 for keyboard-interactive. */
    int password;
    /** password prompts: 1 for the first, 2 after the server refused one, ... */
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
    void (*hostkey)(void *_Nullable ctx, sshcore_conn *conn, const sshcore_hostkey *key);
    /** Answer with sshcore_conn_kbdint_reply exactly once (NULL answers
     *  abort); the connection object stays alive until then. */
    void (*kbdint)(void *_Nullable ctx, sshcore_conn *conn, const sshcore_kbdint *challenge);
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

/** @brief Whether this libssh supports `name` for `kind` (checked on a scratch session). */
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
     *  (also when sshcore_conn_start fails): only the worker closes it, once. */
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
     *  asks for it (auth-agent-req@openssh.com), and each auth-agent@openssh.com
     *  channel the server opens is joined, inside the worker, to a new connection
     *  to this local agent socket. A channel that cannot reach the agent is
     *  refused (the server's client sees its agent fail). */
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
sshcore_conn *_Nullable sshcore_conn_start(const sshcore_config *config,
                                           const sshcore_conn_callbacks *callbacks,
                                           sshcore_error *err);

/** @brief Cancel the connect operation (any thread, never blocks). */
void sshcore_conn_cancel_connect(sshcore_conn *conn);

/** @brief Answer the hostkey callback: nonzero accepts; anything else fails closed.
 * @return SSHCORE_E_OK, or SSHCORE_E_INVALID_STATE when no callback awaits an answer
 *         (a second verdict): it is ignored. */
int sshcore_conn_hostkey_verdict(sshcore_conn *conn, int accept,
                                 const char *_Nullable reason);

/** @brief Answer the kbdint callback; NULL answers abort authentication. A
 *  password prompt takes one answer, or zero (non-NULL) to go on to the next
 *  method.
 * @return SSHCORE_E_OK, or SSHCORE_E_INVALID_STATE when no challenge awaits an
 *         answer (a second reply): it is ignored. SSHCORE_E_OUT_OF_MEMORY when the
 *         answers could not be copied (authentication is then aborted). */
int sshcore_conn_kbdint_reply(sshcore_conn *conn,
                              const char *_Nonnull const *_Nullable answers,
                              size_t count);

/** @brief Begin closing (idempotent, any thread). Open operations fail with CLOSED. */
void sshcore_conn_close(sshcore_conn *conn);

/** @brief Drop the caller's reference. Closes the connection if still open
 *  and joins the worker thread unless called on it. */
void sshcore_conn_release(sshcore_conn *conn);

/** @brief The current state (a snapshot). */
sshcore_conn_state sshcore_conn_get_state(sshcore_conn *conn);

/** @brief After a successful connect: the SSHCORE_METHOD_* bits the server offered. */
unsigned sshcore_conn_offered_methods(sshcore_conn *conn);

/** @brief Copy a string describing the server (its banner) into buf. */
void sshcore_conn_server_banner(sshcore_conn *conn, char *buf, size_t len);

/** @brief Test hook: the fds the core owns right now (-1 when closed). */
void sshcore_conn_debug_fds(sshcore_conn *conn, int *_Nullable socket_fd,
                            int *_Nullable wake_fd);

/* ---------------------------------------------------------------------- */
/* Operations: exec                                                        */
/* ---------------------------------------------------------------------- */

typedef void (*sshcore_op_done_fn)(void *_Nullable ctx, sshcore_op *op);

typedef struct sshcore_env_var {
    const char *name;
    const char *value;
} sshcore_env_var;

typedef struct sshcore_exec_spec {
    const char *command;
    /** Used instead of `command` when the server refuses an env request. */
    const char *_Nullable fallback_command;
    const uint8_t *_Nullable stdin_data;
    size_t stdin_len;
    const sshcore_env_var *_Nullable env;
    size_t env_count;
    /** Limit on stdout + stderr bytes collected; exceeding it fails the
     *  operation with OUTPUT_LIMIT and closes the channel. */
    size_t output_limit;
} sshcore_exec_spec;

typedef enum sshcore_exit_kind {
    SSHCORE_EXIT_UNKNOWN = 0,
    SSHCORE_EXIT_STATUS = 1,
    SSHCORE_EXIT_SIGNAL = 2,
} sshcore_exit_kind;

typedef struct sshcore_exec_result {
    const uint8_t *_Nullable out;
    size_t out_len;
    const uint8_t *_Nullable err;
    size_t err_len;
    sshcore_exit_kind exit_kind;
    int exit_status;
    char exit_signal[32];
    int core_dumped;
    int env_fallback_used;
} sshcore_exec_result;

/**
 * @brief Start a command on a new channel of `conn`.
 *
 * Returns an operation holding one reference for the caller (drop it with
 * sshcore_op_release after `done` ran), or NULL with `err` filled (for
 * example INVALID_STATE before the connection is ready or after close).
 * `done` runs exactly once.
 */
sshcore_op *_Nullable sshcore_exec_start(sshcore_conn *conn,
                                         const sshcore_exec_spec *spec,
                                         sshcore_op_done_fn done,
                                         void *_Nullable ctx,
                                         sshcore_error *err);

/* ---------------------------------------------------------------------- */
/* Operations: streamed session channels (commands, shells, PTYs)          */
/* ---------------------------------------------------------------------- */

/** A pseudo-terminal for a session channel. */
typedef struct sshcore_pty_spec {
    /** TERM value, e.g. "xterm-256color". */
    const char *term;
    uint32_t cols;
    uint32_t rows;
    /** Pixel sizes: libssh 0.10 always sends 0 (no API for them). */
    uint32_t px_width;
    uint32_t px_height;
} sshcore_pty_spec;

typedef struct sshcore_stream_callbacks {
    void *_Nullable ctx;
    /** Worker: the command or shell started (exec/shell request accepted).
     *  Not called if the operation fails before; `done` says why then. */
    void (*started)(void *_Nullable ctx, int env_fallback_used);
    /** Worker: output in the order it arrived; stream 0 is stdout, 1 stderr.
     *  `bytes` is valid during the call only. Each delivered byte counts
     *  against the buffer limit until sshcore_stream_consumed returns it. */
    void (*data)(void *_Nullable ctx, int stream, const uint8_t *bytes, size_t len);
    /** Worker: called once, after which the core never calls
     *  `started` or `data` again; `ctx` may be freed here. (Or the thread
     *  that drops the last reference of an operation that never ran.) */
    void (*released)(void *_Nullable ctx);
    /** Worker, optional: the peer sent EOF (after the last `data` call): no
     *  more output comes, while the channel may stay open (our side can still
     *  write, e.g. a tunnel answering a half-closed request). */
    void (*_Nullable eof)(void *_Nullable ctx);
} sshcore_stream_callbacks;

/** What a streamed channel is. */
typedef enum sshcore_channel_kind {
    /** A session: a command, the login shell or a subsystem. */
    SSHCORE_CHANNEL_SESSION = 0,
    /** "direct-tcpip" to target_host:target_port as the server sees it. */
    SSHCORE_CHANNEL_DIRECT_TCPIP = 1,
    /** "direct-streamlocal@openssh.com" to the server's Unix socket target_host. */
    SSHCORE_CHANNEL_DIRECT_STREAMLOCAL = 2,
} sshcore_channel_kind;

typedef struct sshcore_stream_spec {
    /** SESSION unless set; the direct kinds use the target fields below and
     *  ignore command, env and pty (they have no exit status). */
    sshcore_channel_kind kind;
    const char *_Nullable target_host;
    int target_port;
    /** Where the forwarded connection came from, as told to the server. */
    const char *_Nullable originator_host;
    int originator_port;
    /** The command; NULL starts the login shell (a "shell" request). */
    const char *_Nullable command;
    /** Non-zero: `command` names a subsystem (e.g. "sftp") to request instead
     *  of an exec; a refusal is CHANNEL_REQUEST_FAILED. */
    int subsystem;
    /** Used instead of `command` when the server refuses an env request. */
    const char *_Nullable fallback_command;
    const sshcore_env_var *_Nullable env;
    size_t env_count;
    /** Non-zero, without a fallback: a refused env request is skipped (the
     *  variable stays unset, as ssh(1) leaves it) instead of failing the call. */
    int env_optional;
    /** Request a PTY first (NULL: none). */
    const sshcore_pty_spec *_Nullable pty;
    /** Output delivered but not yet consumed before the channel stops
     *  reading, which closes the SSH window (> 0). */
    size_t buffer_limit;
    /** 0: none. Otherwise the operation completes with TIMED_OUT after this
     *  long, and the remote command is signalled (TERM) and its channel closed. */
    int timeout_ms;
} sshcore_stream_spec;

/**
 * @brief Start a streamed command or shell on a new channel of `conn`.
 *
 * Like sshcore_exec_start, but output goes to `callbacks->data` as it arrives
 * and input is written with sshcore_stream_write while it runs. `done` runs
 * exactly once, after the last `data` call, when the channel closed (OK; the
 * exit status is then readable) or failed.
 */
sshcore_op *_Nullable sshcore_stream_start(sshcore_conn *conn,
                                           const sshcore_stream_spec *spec,
                                           const sshcore_stream_callbacks *callbacks,
                                           sshcore_op_done_fn done,
                                           void *_Nullable ctx,
                                           sshcore_error *err);

/** Completion of one write: SSHCORE_E_OK once every byte went to libssh
 *  within the peer's window; otherwise why not (some bytes may have gone). */
typedef void (*sshcore_write_done_fn)(void *_Nullable ctx, int code);

/**
 * @brief Queue bytes for the channel's stdin (any thread; copies them).
 *
 * Writes go out in order, as fast as the peer's window allows. `done` runs
 * once, on the worker. Returns 0 and sets `id` (for sshcore_stream_write_cancel),
 * or -1 with `err` set when the operation already ended or EOF was sent
 * (then `done` is never called).
 */
int sshcore_stream_write(sshcore_op *op, const uint8_t *_Nullable data, size_t len,
                         sshcore_write_done_fn _Nullable done, void *_Nullable ctx,
                         uint64_t *id, sshcore_error *err);

/** @brief Give up a queued write (any thread): its `done` runs with CANCELLED
 *  soon, after a prefix of its bytes may have been sent. No-op if finished. */
void sshcore_stream_write_cancel(sshcore_op *op, uint64_t id);

/** @brief Send EOF after the queued writes (any thread). -1 if already ended. */
int sshcore_stream_send_eof(sshcore_op *op, sshcore_error *err);

/** @brief Send a signal ("TERM", "INT", ...) to the remote command (any thread). */
int sshcore_stream_signal(sshcore_op *op, const char *name, sshcore_error *err);

/** @brief Tell the PTY its new size (any thread); the latest size wins. */
int sshcore_stream_resize(sshcore_op *op, uint32_t cols, uint32_t rows,
                          uint32_t px_width, uint32_t px_height, sshcore_error *err);

/** @brief The consumer is done with `n` delivered bytes (any thread). */
void sshcore_stream_consumed(sshcore_op *op, size_t n);

/* ---------------------------------------------------------------------- */
/* Operations: bridged channels (forwarding)                               */
/* ---------------------------------------------------------------------- */

typedef struct sshcore_bridge_callbacks {
    void *_Nullable ctx;
    /** Worker: the channel is open and no byte has moved yet. The caller may
     *  write a short reply (a SOCKS answer) to `fd` during the call; the
     *  socket is non-blocking and must not be closed. */
    void (*opened)(void *_Nullable ctx, int fd);
    /** Worker: the channel never opened (refused, cancelled, timed out, the
     *  connection ended); `err` says why. `fd` is still open during the call
     *  (for a failure reply) and closed after it. */
    void (*failed)(void *_Nullable ctx, int fd, const sshcore_error *err);
    /** Worker (or the thread dropping the last reference of an op that never
     *  ran): no callback follows; `ctx` may be freed here. */
    void (*released)(void *_Nullable ctx);
} sshcore_bridge_callbacks;

/**
 * @brief Open a direct channel (spec->kind DIRECT_TCPIP or DIRECT_STREAMLOCAL)
 * and join it to the stream socket `fd` inside the worker: bytes move both
 * ways without reaching the caller.
 *
 * The core owns `fd` from this call on, also when it fails (returns NULL):
 * it makes it non-blocking, polls it on the worker and closes it once.
 * Flow control: reading the socket waits for the peer's window; data from
 * the channel waits in at most spec->buffer_limit bytes for the socket to
 * take it, and beyond that the channel stops reading (the SSH window closes).
 * EOF goes both ways (a socket EOF sends CHANNEL_EOF; CHANNEL_EOF shuts the
 * socket's write side down once everything was written). `done` runs once:
 * OK when the channel closed normally or the socket's client went away
 * (reset, broken pipe), an error otherwise (CHANNEL_OPEN_REFUSED,
 * CANCELLED, TIMED_OUT after spec->timeout_ms, the connection's failure).
 * An error after the channel opened, before the channel's EOF reached the
 * socket, resets the socket (RST) instead of closing it with a FIN, so its
 * client never takes a cut stream for a complete one.
 * `first_data` (copied) goes into the channel before anything read from the
 * socket: bytes a caller already read from it, e.g. behind a SOCKS request.
 */
sshcore_op *_Nullable sshcore_bridge_start(sshcore_conn *conn,
                                           const sshcore_stream_spec *spec, int fd,
                                           const uint8_t *_Nullable first_data,
                                           size_t first_len,
                                           const sshcore_bridge_callbacks *callbacks,
                                           sshcore_op_done_fn done,
                                           void *_Nullable ctx,
                                           sshcore_error *err);

/** @brief Bytes a bridge moved so far: channel to socket, socket to channel. */
void sshcore_bridge_get_counts(sshcore_op *op, uint64_t *to_socket,
                               uint64_t *from_socket);

typedef struct sshcore_exit_info {
    sshcore_exit_kind kind;
    int status;
    char signal[32];
    int core_dumped;
} sshcore_exit_info;

/** @brief How the remote command ended; valid once done ran. */
void sshcore_stream_get_exit(sshcore_op *op, sshcore_exit_info *info);

/** @brief Cancel (any thread, never blocks): completes with CANCELLED at once
 *  unless already done, then the worker closes the channel. */
void sshcore_op_cancel(sshcore_op *op);

/** @brief The outcome; valid once done ran. */
const sshcore_error *sshcore_op_error(sshcore_op *op);

/** @brief The exec result; valid once done ran with SSHCORE_E_OK. Pointers
 *  stay valid until sshcore_op_release. */
void sshcore_exec_get_result(sshcore_op *op, sshcore_exec_result *result);

void sshcore_op_release(sshcore_op *op);

/* ---------------------------------------------------------------------- */
/* Operations: remote forwarding (tcpip-forward)                           */
/* ---------------------------------------------------------------------- */

typedef struct sshcore_rforward_callbacks {
    void *_Nullable ctx;
    /** Worker: the server listens on `bound_port` (the port asked for, or the
     *  one chosen when 0 was asked). Called once, before any `incoming`. */
    void (*listening)(void *_Nullable ctx, int bound_port);
    /** Worker: a connection to the server's port arrived as a forwarded-tcpip
     *  channel, open and waiting (its data is buffered, within its window).
     *  Answer with sshcore_rforward_bridge, _stream or _reject; unanswered, it
     *  is closed after the accept timeout. `originator` is valid during the call. */
    void (*incoming)(void *_Nullable ctx, uint64_t id, const char *originator,
                     int originator_port);
    /** Worker (or the thread dropping the last reference of an op that never
     *  ran): no callback follows. */
    void (*released)(void *_Nullable ctx);
} sshcore_rforward_callbacks;

/**
 * @brief Ask the server to listen on `bind_address`:`port` ("tcpip-forward")
 * and hand each connection it forwards to the callbacks.
 *
 * Port 0 picks a random port in 20000...32767, below the kernel's ephemeral
 * range (retried up to 8 times while the server refuses): libssh 0.10 reads the server's chosen port from whatever
 * packet it processed last, which is unreliable while other channels are busy.
 * Global requests (this one, its cancel, keepalives) take turns: libssh has
 * one slot for them. `done` runs once: FORWARD_REFUSED when the server says
 * no, CANCELLED after sshcore_op_cancel (which also sends cancel-tcpip-forward
 * and closes waiting connections), or the connection's failure. Channels
 * already handed on are separate operations and live on.
 */
sshcore_op *_Nullable sshcore_rforward_start(sshcore_conn *conn,
                                             const char *_Nullable bind_address,
                                             int port, int accept_timeout_ms,
                                             const sshcore_rforward_callbacks *callbacks,
                                             sshcore_op_done_fn done,
                                             void *_Nullable ctx,
                                             sshcore_error *err);

/** @brief Join incoming connection `id` to the socket `fd` (owned by the core
 *  from this call on, also on failure), like sshcore_bridge_start. */
sshcore_op *_Nullable sshcore_rforward_bridge(sshcore_op *forward, uint64_t id, int fd,
                                              size_t buffer_limit,
                                              const sshcore_bridge_callbacks *callbacks,
                                              sshcore_op_done_fn done,
                                              void *_Nullable ctx,
                                              sshcore_error *err);

/** @brief Take incoming connection `id` as a streamed channel (like a
 *  direct channel from sshcore_stream_start; `started` runs once it is taken). */
sshcore_op *_Nullable sshcore_rforward_stream(sshcore_op *forward, uint64_t id,
                                              size_t buffer_limit,
                                              const sshcore_stream_callbacks *callbacks,
                                              sshcore_op_done_fn done,
                                              void *_Nullable ctx,
                                              sshcore_error *err);

/** @brief Close incoming connection `id` unused (any thread). */
void sshcore_rforward_reject(sshcore_op *forward, uint64_t id);

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
 * @brief Parse a public key given as type name and base64 blob and write its
 * SHA256 fingerprint ("SHA256:...") into out.
 * @return SSHCORE_E_OK, or INVALID_ARGUMENT when the key does not parse.
 */
int sshcore_key_fingerprint_sha256(const char *type, const char *base64,
                                   char *out, size_t out_len);

/**
 * @brief HMAC-SHA1 (OpenSSL), as used by hashed known_hosts entries.
 * @param[out] out 20 bytes.
 * @return SSHCORE_E_OK or SSHCORE_E_SYSTEM.
 */
int sshcore_hmac_sha1(const uint8_t *key, size_t key_len, const uint8_t *data,
                      size_t data_len, uint8_t *out);

/**
 * @brief Starts a ProxyCommand: `shell -c "exec command"` with one end of a new
 * socket pair as its stdin and stdout (stderr inherited, every other fd closed,
 * default signal handling). The caller owns the other end (`*fd_out`, close-on-exec;
 * give it to sshcore_conn_start as connected_fd) and must reap `*pid_out`.
 * @return 0, or an errno value (nothing was started).
 */
int sshcore_proxy_spawn(const char *shell, const char *command, int *fd_out, int *pid_out);

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

#endif /* SSHCORE_H */
