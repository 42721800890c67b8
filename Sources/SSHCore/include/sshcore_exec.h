/*
 * sshcore_exec.h - session channels: collected commands (exec) and streamed
 * commands, shells and subsystems. Part of the public interface of SSHCore (see
 * sshcore.h); includes no libssh.
 */
#ifndef SSHCORE_EXEC_H
#define SSHCORE_EXEC_H

#include <stddef.h>
#include <stdint.h>
#include "sshcore_conn.h"

#ifdef __cplusplus
extern "C" {
#endif

#pragma clang assume_nonnull begin

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
    void (*data)(void *_Nullable ctx,
                 int stream,
                 const uint8_t *bytes,
                 size_t len);
    /** Worker: called once, after which the core never calls
     *  `started` or `data` again; `ctx` may be freed here. (Or the thread
     *  that drops the last reference of an operation that never ran.) */
    void (*released)(void *_Nullable ctx);
    /** Worker, optional: the peer sent EOF (after the last `data` call): no
     *  more output comes, while the channel may stay open (our side can still
     *  write, e.g. a tunnel answering a half-closed request). */
    void (*_Nullable eof)(void *_Nullable ctx);
    /** Worker, optional: the output passed to `data` since the last call is
     *  all there is for now (the end of an I/O pass, or before `eof` and the
     *  end): hand it to the reader. With it, `data` gets each packet as libssh
     *  has it, to be gathered by the caller (one copy); without it, the core
     *  gathers packets into batches of up to 128 KiB and `data` gets those. */
    void (*_Nullable flush)(void *_Nullable ctx);
} sshcore_stream_callbacks;

/** What a streamed channel is. */
typedef enum sshcore_channel_kind {
    /** A session: a command, the login shell or a subsystem. */
    SSHCORE_CHANNEL_SESSION = 0,
    /** "direct-tcpip" to target_host:target_port as the server sees it. */
    SSHCORE_CHANNEL_DIRECT_TCPIP = 1,
    /** "direct-streamlocal@openssh.com" to the server's Unix socket
       target_host. */
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
     *  variable stays unset, as ssh(1) leaves it) instead of failing the call.
     */
    int env_optional;
    /** Request a PTY first (NULL: none). */
    const sshcore_pty_spec *_Nullable pty;
    /** Output delivered but not yet consumed before the channel stops
     *  reading, which closes the SSH window (> 0). */
    size_t buffer_limit;
    /** 0: none. Otherwise the operation completes with TIMED_OUT after this
     *  long, and the remote command is signalled (TERM) and its channel closed.
     */
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
sshcore_op *_Nullable sshcore_stream_start(
    sshcore_conn *conn,
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
 * once, on the worker. Returns SSHCORE_E_OK and sets `id` (for
 * sshcore_stream_write_cancel), or the code of `err`, which it fills, when the
 * operation already ended, EOF was sent, or `op` is not a STREAM (then `done`
 * is never called).
 *
 * The calls on streams below return SSHCORE_E_OK or the code of the error they
 * fill in `err`; each refuses an operation that is not a STREAM with
 * SSHCORE_E_INVALID_ARGUMENT.
 */
int sshcore_stream_write(sshcore_op *op,
                         const uint8_t *_Nullable data,
                         size_t len,
                         sshcore_write_done_fn _Nullable done,
                         void *_Nullable ctx,
                         uint64_t *id,
                         sshcore_error *err);

/** @brief Give up a queued write (any thread): its `done` runs with CANCELLED
 *  soon, after a prefix of its bytes may have been sent. No-op if finished. */
int sshcore_stream_write_cancel(sshcore_op *op, uint64_t id);

/** @brief Send EOF after the queued writes (any thread); again is a no-op. */
int sshcore_stream_send_eof(sshcore_op *op, sshcore_error *err);

/** @brief Send a signal ("TERM", "INT", ...) to the remote command (any
 * thread). */
int sshcore_stream_signal(sshcore_op *op, const char *name, sshcore_error *err);

/** @brief Tell the PTY its new size (any thread); the latest size wins. Also
 *  takes a terminal bridge (sshcore_bridge_terminal_start). */
int sshcore_stream_resize(sshcore_op *op,
                          uint32_t cols,
                          uint32_t rows,
                          uint32_t px_width,
                          uint32_t px_height,
                          sshcore_error *err);

/** @brief The consumer is done with `n` delivered bytes (any thread). */
int sshcore_stream_consumed(sshcore_op *op, size_t n);

/* ---------------------------------------------------------------------- */
/* Every operation: results, cancel, release                              */
/* ---------------------------------------------------------------------- */

/**
 * What an operation is. Each call that takes an operation says which kinds it
 * takes, and returns SSHCORE_E_INVALID_ARGUMENT (filling `err` where it has
 * one) for another kind, never reading it as the wrong struct.
 */
typedef enum sshcore_op_kind {
    SSHCORE_OP_EXEC = 1,   /**< sshcore_exec_start: output collected */
    SSHCORE_OP_STREAM = 2, /**< sshcore_stream_start, sshcore_rforward_stream */
    SSHCORE_OP_BRIDGE = 3, /**< sshcore_bridge_start, sshcore_rforward_bridge,
                              sshcore_bridge_terminal_start */
    SSHCORE_OP_RFORWARD = 4, /**< sshcore_rforward_start */
} sshcore_op_kind;

/** @brief The operation's kind (any thread). */
sshcore_op_kind sshcore_op_get_kind(sshcore_op *op);

typedef struct sshcore_exit_info {
    sshcore_exit_kind kind;
    int status;
    char signal[32];
    int core_dumped;
} sshcore_exit_info;

/** @brief How the remote command ended; valid once done ran (zeros before).
 *  @return SSHCORE_E_OK, or INVALID_ARGUMENT for an op that is neither a
 *  STREAM nor a terminal bridge. */
int sshcore_stream_get_exit(sshcore_op *op, sshcore_exit_info *info);

/** @brief Cancel (any thread, never blocks): completes with CANCELLED at once
 *  unless already done, then the worker closes the channel. */
void sshcore_op_cancel(sshcore_op *op);

/** @brief The outcome; valid once done ran. */
const sshcore_error *sshcore_op_error(sshcore_op *op);

/** @brief The exec result; valid once done ran with SSHCORE_E_OK. Pointers
 *  stay valid until sshcore_op_release. */
int sshcore_exec_get_result(sshcore_op *op, sshcore_exec_result *result);

void sshcore_op_release(sshcore_op *op);

#pragma clang assume_nonnull end

#ifdef __cplusplus
}
#endif

#endif /* SSHCORE_EXEC_H */
