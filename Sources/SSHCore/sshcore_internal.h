/*
 * sshcore_internal.h - shared between the core's own files; never exported.
 *
 * Locks the core takes, in the order they may nest (a lock is only ever taken
 * while holding locks above it):
 *
 *   1. registry_mu (sshcore_registry.c): the list of running workers. Held by
 * the exit handler while it asks each connection to close, so it nests
 *      conn->mu; taken alone when a worker starts or ends.
 *   2. conn->mu: one per connection. Guards what other threads hand the worker
 *      (submitted ops, close and cancel requests, the host-key verdict and the
 *      keyboard-interactive answers, the fds' take-for-close step).
 *   3. Leaves, never held together with another lock: an op's inbox lock,
 *      x->mu of a session channel (sshcore_session.h: queued writes, EOF,
 *      signals, resize) and of a remote forward (sshcore_rforward.c: rejects
 *      from other threads).
 *
 * No callback into the caller is ever made, and no libssh call is made, while
 * holding any of them.
 */
#ifndef SSHCORE_INTERNAL_H
#define SSHCORE_INTERNAL_H

#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "sshcore.h"

#pragma clang assume_nonnull begin

/* Channel input stops going into libssh while the kernel holds this much not
 * sent yet; the socket's TCP_NOTSENT_LOWAT is twice this, so POLLOUT comes
 * when the unsent bytes fall below it (see send_backlogged). */
#define SSHCORE_SEND_BACKLOG_MAX (512 * 1024)

/**
 * An object's one apply for its machine (sshcore_fsm.h), made from the
 * machine's list: `fn(obj, event)` applies `event` to the state `obj->field`
 * and returns the action for the caller to act on. Every event the code
 * applies is in the list (the events that change nothing as self-loops), so a
 * rejected one is a core bug: the state stays and `rejected(obj, detail)` ends
 * the object with the words of sshcore_fsm_rejection. `p`/`P`: the machine's
 * prefix, as in sshcore_<p>_fsm_apply and SSHCORE_<P>_ACT_REJECT.
 */
#define SSHCORE_APPLIER(fn, p, P, machine, Obj, field, rejected) \
    sshcore_##p##_action fn(Obj *obj, sshcore_##p##_event event) \
    {                                                            \
        int before = (int)obj->field;                            \
        sshcore_##p##_action act =                               \
            sshcore_##p##_fsm_apply(&obj->field, event);         \
        if (act == SSHCORE_##P##_ACT_REJECT) {                   \
            char detail[160];                                    \
            sshcore_fsm_rejection((machine),                     \
                                  before,                        \
                                  (int)event,                    \
                                  detail,                        \
                                  sizeof(detail));               \
            rejected(obj, detail);                               \
        }                                                        \
        return act;                                              \
    }

/** The monotonic clock in milliseconds. */
static inline int64_t
sshcore__now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A growable byte buffer (its functions: sshcore_op.c). */
typedef struct sshcore_bytes {
    uint8_t *_Nullable data;
    size_t len;
    size_t cap;
} sshcore_bytes;

/** Operation kinds plug into the worker through this table. */
typedef struct sshcore_op_vtable {
    /** Worker: start or advance. Returns true to be stepped again without
     *  waiting for the socket (more work is ready right now). */
    bool (*step)(sshcore_conn *conn, sshcore_op *op);
    /** Worker: release libssh resources after cancel or connection teardown. */
    void (*abort)(sshcore_conn *conn, sshcore_op *op);
    /** Any thread: free kind-specific memory (last reference dropped). */
    void (*destroy)(sshcore_op *op);
    /** Worker, optional: a file descriptor of the op's own to add to the
     *  worker's poll set this turn, and the events it waits for; -1 for none
     *  this turn. An op only asks for events it will act on (POLLHUP and
     *  POLLERR are always reported, so an op that waits for nothing must
     *  return -1 or the loop would spin). */
    int (*poll_fd)(sshcore_conn *conn, sshcore_op *op, short *events);
    /** Worker, with poll_fd: what poll() reported for that fd; the op is
     *  stepped afterwards in the same turn. */
    void (*poll_event)(sshcore_op *op, short revents);
} sshcore_op_vtable;

struct sshcore_op {
    atomic_long refs;
    atomic_int claimed; /* the one completion has begun */
    atomic_int done;    /* 1 once err is final (set before done_fn runs) */
    atomic_int cancel_requested; /* set by sshcore_op_cancel */
    const sshcore_op_vtable *vt;
    sshcore_op_kind kind; /* checked by every public call that takes an op */
    sshcore_conn *conn;   /* strong reference */
    sshcore_op_done_fn done_fn;
    void *_Nullable ctx;
    sshcore_error err;
    /* absolute, monotonic; 0 = none. The worker completes the op with
     * TIMED_OUT when it passes, and polls no longer than until then. */
    int64_t deadline_ms;
    /* absolute, monotonic; 0 = none. The worker polls no longer than until
     * then, so the op is stepped (e.g. to expire something it holds). */
    int64_t wake_ms;
    sshcore_op *_Nullable next; /* pending FIFO, then active list */
};

/**
 * What a connection needs only while it connects and authenticates (worker
 * only): allocated with the connection, given back once it is ready
 * (sshcore__conn_setup_free), so that a long-lived connection keeps neither
 * its secrets nor the connect-time state.
 */
struct sshcore_conn_setup {
    /* the configuration's part of it */
    sshcore_auth_method *_Nullable methods; /* secrets wiped when freed */
    size_t method_count;
    sshcore_algo_setting *_Nullable algorithms; /* lists strdup'ed */
    size_t algorithm_count;
    int rsa_min_bits;
    /* connecting */
    struct addrinfo *_Nullable ai_list;
    struct addrinfo *_Nullable ai_cur;
    int last_connect_errno;
    int64_t deadline_ms;  /* the connect deadline: absolute, monotonic */
    int64_t paused_at_ms; /* while waiting for the caller */
    /* authenticating */
    size_t method_idx;
    bool method_started;
    char *_Nullable prompted_password; /* PASSWORD_PROMPT's answer, wiped after
                                          use */
    unsigned password_attempts;        /* passwords the server refused so far */
    char *_Nullable prompted_passphrase; /* ASK_PASSPHRASE's answer, wiped once
                                            the key is loaded */
    unsigned passphrase_attempts;        /* wrong passphrases so far */
    bool asking_passphrase; /* ANSWER_WAIT is for a key's passphrase */
    ssh_key _Nullable key;
    /* libssh 0.11.0-0.11.3 only: key's Ed25519 certificate, offered through
     * an in-process agent (sshcore_cert_agent.c) */
    struct sshcore_cert_agent *_Nullable cert_agent;
    /* the agent method's socket: opened by the core, lent to libssh with
     * ssh_set_agent_socket and taken back before it is closed; -1 */
    int agent_fd;
    char methods_tried[400];
};

/** The answers other threads hand the worker (guarded by conn->mu). A
 *  hostkey or kbdint callback ran and holds a reference that its one answer
 *  drops: a second answer (or one never asked for) is INVALID_STATE, not a
 *  second unref of a connection that may be gone. */
struct sshcore_answers {
    bool verdict_awaited;
    bool kbd_awaited;
    bool verdict_ready;
    bool verdict_accept;
    char verdict_reason[256];
    bool kbd_ready;
    char *_Nullable *_Nullable kbd; /* NULL with kbd_ready: abort */
    size_t kbd_count;
};

/** libssh's one slot for global requests with a reply (worker only): who
 *  asked the question whose answer libssh holds or awaits, and the cancels
 *  waiting for it (sshcore_keepalive.c; its machine is in sshcore_fsm.h).
 *  FREE means libssh's own state is idle. */
struct sshcore_global_slot {
    sshcore_gslot state;
    sshcore_op *_Nullable owner;    /* OWNED */
    char *_Nullable orphan_address; /* ORPHAN_FORWARD */
    int orphan_port;
    struct sshcore_gcancel
        *_Nullable cancels; /* cancel-tcpip-forward to send */
};

/** Liveness (worker only): the keepalive settings; when the last packet was
 *  seen (by packet_counter); the probes sent since then. */
struct sshcore_keepalive {
    int interval_ms;
    int max_missed;
    uint64_t seen_packets;
    int64_t last_rx_ms;
    int probes;
};

/** The socket's send backlog (worker only, sshcore_session_input.c). */
struct sshcore_backlog {
    /* an op held input back this turn because the socket is backed up: the
     * worker waits for POLLOUT as well (cleared every turn) */
    bool blocked;
    /* the kernel's unsent bytes at the last look, and the bytes sent by then:
     * the queue only drains between looks, so until what was sent since fills
     * the room left, it cannot be over the gate */
    bool known;
    uint64_t room;
    uint64_t mark;
};

/** The poll set beyond the wake fd and the socket: ops' own fds (worker). */
struct sshcore_op_poll {
    struct pollfd *_Nullable fds;
    sshcore_op *_Nullable *_Nullable ops;
    size_t cap;
};

struct sshcore_conn {
    atomic_long refs;
    pthread_mutex_t mu;
    /* the registry of running workers (registry_mu), for the exit handler */
    struct sshcore_conn *_Nullable reg_prev;
    struct sshcore_conn *_Nullable reg_next;
    pthread_t thread;
    bool thread_started;
    bool thread_joined_or_detached;

    /* guarded by mu */
    int sock_fd; /* the socket the core created; shutdown target */
    int wake_fd; /* eventfd; -1 once the worker exited */
    sshcore_op *_Nullable pending_head;
    sshcore_op *_Nullable pending_tail;
    bool close_requested;
    bool connect_cancelled;
    bool worker_exited;
    /* the answers other threads hand the worker */
    struct sshcore_answers answers;

    /* published for other threads */
    _Atomic int state_snapshot;
    _Atomic int fail_code;
    _Atomic unsigned offered_methods;
    atomic_int connect_done;
    atomic_int resolving; /* the worker is inside getaddrinfo */
    /* a request came (sshcore__conn_wake) since the worker last took them: a
     * read pass ends early so that a keystroke is not sent after 512 KiB */
    atomic_int woken;

    /* worker only */
    /* a streamed op got a short packet (a keystroke's echo, a reply) in this
     * read pass: end the pass so that it is handed over now */
    bool end_pass;
    ssh_session _Nullable session;
    ssh_event _Nullable event;
    int lib_fd; /* dup handed to libssh */
    bool ssh_connect_called;
    /* the connection's one state (sshcore_fsm.h), applied with
     * sshcore__conn_event; the public state is derived from it */
    sshcore_phase phase;
    /* what only connecting and authenticating need: NULL once ready */
    struct sshcore_conn_setup *_Nullable setup;
    sshcore_op *_Nullable active;
    /* libssh's one slot for global requests with a reply */
    struct sshcore_global_slot gslot;
    struct sshcore_orphan
        *_Nullable orphans; /* channels the worker still finishes */
    /* when the worker last closed a channel of its own (worker only): the
     * server may count its session until it has seen the CLOSE */
    int64_t channel_closed_ms;
    /* ssh_set_counters: packets (and their payload bytes) libssh processed
     * and sent; a change of in_packets during a pass over the ops means one
     * op's call processed another op's packets. The socket counter has only
     * the bytes read from and written to the socket. */
    struct ssh_counter_struct packet_counter;
    struct ssh_counter_struct socket_counter;
    struct sshcore_keepalive ka;
    struct sshcore_backlog backlog;
    char banner[256];
    struct sshcore_op_poll op_poll;

    /* immutable after start */
    sshcore_conn_callbacks cb;
    char *host;
    char *user;
    uint16_t port;
    int connect_timeout_ms;
    int backstop_timeout_s;
    int verbosity;
    /* agent forwarding: the local agent's socket (immutable), and the session
     * callback that takes the server's agent channels, set by the worker
     * before the first session asks for forwarding (sshcore_bridge.c) */
    struct {
        char *_Nullable socket;
        struct ssh_callbacks_struct cbs;
        bool armed;
    } agent;
    sshcore_negotiated
        negotiated; /* written before `connected` reports success */
};

enum sshcore_orphan_stage {
    SSHCORE_ORPHAN_OPENING,  /* the open is pending */
    SSHCORE_ORPHAN_STARTING, /* the exec or shell request is pending */
    SSHCORE_ORPHAN_STOPPING, /* TERM sent: waiting for the process's end */
};

/** A channel whose operation ended while the server still had work on it: an
 *  open or a start request pending, or a cancelled process to stop. The worker
 *  finishes that exchange, then closes the channel. */
struct sshcore_orphan {
    ssh_channel ch;
    enum sshcore_orphan_stage stage;
    /* STARTING: "shell", or the exec command (`exec`); `signal`: stop what the
     * request started */
    char *_Nullable start;
    bool exec;
    bool signal;
    bool pty; /* the channel has a terminal: the close hangs it up */
    /* STOPPING: when TERM goes again, when KILL replaces it, and when to
     * close regardless */
    int64_t wake_ms;
    int64_t kill_ms;
    int64_t give_up_ms;
    /* the server reported the process's end (exit-status or exit-signal,
     * which no closed window holds back) */
    bool exited;
    /* while adopted: output is read and dropped (so the window stays open
     * and the server can send its end), the end is noted */
    struct ssh_channel_callbacks_struct cbs;
    bool cbs_set;
    struct sshcore_orphan *_Nullable next;
};

/* sshcore_conn.c: the clock, references, waking the worker, queueing, the
 * socket */
void sshcore__conn_retain(sshcore_conn *conn);
void sshcore__conn_unref(sshcore_conn *conn);
void sshcore__conn_wake(sshcore_conn *conn);
/** Queue an operation (any thread); fails unless the connection is ready. */
int
sshcore__conn_submit(sshcore_conn *conn, sshcore_op *op, sshcore_error *err);
void sshcore__free_answers(char *_Nullable *_Nullable answers, size_t n);
void sshcore__conn_close_socket(sshcore_conn *conn);
/** Worker: gives back what only connecting and authenticating needed
 *  (conn->setup), once the connection is ready or at its teardown. */
void sshcore__conn_setup_free(sshcore_conn *conn);
void sshcore__conn_shutdown_socket(sshcore_conn *conn);
bool sshcore__conn_connect_complete(sshcore_conn *conn,
                                    const sshcore_error *err);

/* sshcore_error.c */
/** Fill err from the session's last libssh error (worker only). */
void sshcore__error_from_session(sshcore_error *err,
                                 int code,
                                 ssh_session _Nullable session,
                                 const char *function);
void
sshcore__error_set(sshcore_error *err, int code, const char *_Nullable detail);
/** Classify the session's failure after libssh reported an error. */
int sshcore__conn_failure_code(sshcore_conn *conn);
void sshcore__copy_str(char *dst, size_t cap, const char *_Nullable src);
int sshcore__handshake_failure_code(sshcore_conn *conn);

/* sshcore_conn_fail.c: the connection's machine applied, and failing a
 * connection and its operations */
/** Worker: applies an event to the connection's phase, publishes the public
 *  state it maps to, and acts on the deadline actions (the connect deadline
 *  pauses while the caller is asked, and resumes with the answer). Returns the
 *  action for the caller to act on; a rejected event fails the connection
 *  with INVALID_STATE naming the phase and the event. */
sshcore_phase_action sshcore__conn_event(sshcore_conn *conn,
                                         sshcore_phase_event event);
void sshcore__conn_pause_deadline(sshcore_conn *conn);
void sshcore__conn_resume_deadline(sshcore_conn *conn);
/** Worker: whether the session can still carry packets: connected, and not
 *  in libssh's error state (which a failed MAC or decryption sets while
 *  ssh_is_connected() stays true). Use it, never ssh_is_connected() alone. */
bool sshcore__conn_libssh_usable(sshcore_conn *conn);
void sshcore__conn_fail_ops(sshcore_conn *conn,
                            sshcore_op *_Nullable list,
                            const sshcore_error *err);
void sshcore__conn_fail_with(sshcore_conn *conn, const sshcore_error *err);
void
sshcore__conn_fail(sshcore_conn *conn, int code, const char *_Nullable detail);
void sshcore__conn_fail_lib(sshcore_conn *conn,
                            int code,
                            const char *_Nullable function);

/* sshcore_orphan.c (worker): channels closed properly after their op ended */
/** Worker: keep a channel whose open is pending until the server answers,
 *  then close it properly. */
void sshcore__conn_adopt_opening_channel(sshcore_conn *conn, ssh_channel ch);
/* Takes a channel whose exec (`exec`, with `command`) or shell request is
 * pending: once answered, what it started gets TERM (when `signal`), then
 * EOF and CLOSE. `pty`: the channel has a terminal (see below). */
void sshcore__conn_adopt_starting_channel(sshcore_conn *conn,
                                          ssh_channel ch,
                                          const char *_Nullable command,
                                          bool exec,
                                          bool signal,
                                          bool pty);
/* Takes a channel whose process is to stop: TERM now and again every 100 ms
 * until the server reports the end (EOF or CLOSE); then EOF and CLOSE. (sshd
 * answers an exec before its child made its process group: a TERM that early
 * finds no group and is lost.) Without a terminal for up to 10 s: nothing else
 * stops such a process, and a loaded server may start it seconds late. With
 * one (`pty`) for up to 2 s: the close hangs the terminal up, which ends what
 * TERM does not (a shell ignores it). */
void sshcore__conn_adopt_stopping_channel(sshcore_conn *conn,
                                          ssh_channel ch,
                                          bool pty);
/* The earliest time an orphan needs the worker, or -1. */
int64_t sshcore__conn_orphans_due_ms(const sshcore_conn *conn);
void sshcore__orphans_reap(sshcore_conn *conn);
void sshcore__orphans_free(sshcore_conn *conn);

/* sshcore_registry.c: the running workers and the exit handler */
void sshcore__conn_registry_add(sshcore_conn *conn);
void sshcore__conn_registry_remove(sshcore_conn *conn);
extern atomic_long sshcore_live_workers;

/** Worker: whether the connection is still live: its public state is not
 *  closing, closed or failed. */
static inline bool
sshcore__conn_live(const sshcore_conn *conn)
{
    switch (sshcore_conn_state_of(conn->phase)) {
    case SSHCORE_CONN_CLOSING:
    case SSHCORE_CONN_CLOSED:
    case SSHCORE_CONN_FAILED:
        return false;
    default:
        return true;
    }
}

/* sshcore_connect.c (worker) */
void sshcore__connect_resolve(sshcore_conn *conn);
void sshcore__connect_tcp_start(sshcore_conn *conn);
void sshcore__connect_tcp_wait(sshcore_conn *conn);
void sshcore__connect_handshake(sshcore_conn *conn);

/* sshcore_auth.c (worker) */
void sshcore__auth_none(sshcore_conn *conn);
void sshcore__auth_method_step(sshcore_conn *conn);
void sshcore__auth_check_session(sshcore_conn *conn);
void sshcore__auth_answers(sshcore_conn *conn,
                           char *_Nullable *_Nullable answers,
                           size_t count);
/* a method that cannot be used: skipped (SKIP_UNUSABLE) or the connection
 * fails with `code` */
void sshcore__auth_method_unusable(sshcore_conn *conn,
                                   const sshcore_auth_method *m,
                                   int code,
                                   const char *_Nullable function,
                                   int lib_code,
                                   const char *why);
/* one prompt (a password, or a key's passphrase at `key_path`) handed to the
 * caller; the worker waits in ANSWER_WAIT */
void sshcore__auth_ask_caller_once(sshcore_conn *conn,
                                   const char *prompt,
                                   bool passphrase,
                                   const char *_Nullable key_path,
                                   unsigned attempt);
/* wipes and frees a secret string, leaving NULL */
void sshcore__wipe_secret(char *_Nullable *_Nonnull secret);

/* sshcore_auth_key.c (worker) */
/* loads the method's key (and certificate) into conn->key; false when the
 * method is unusable (handled) or its passphrase is being asked for */
bool sshcore__auth_load_key(sshcore_conn *conn, const sshcore_auth_method *m);

/* sshcore_keys.c */
bool sshcore__cert_matches_key(ssh_key cert, ssh_key key);

/* sshcore_cert_agent.c (worker): an Ed25519 key's certificate offered through
 * an in-process agent, for libssh 0.11.0-0.11.3, whose
 * ssh_pki_copy_cert_to_privkey refuses every Ed25519 certificate */
typedef struct sshcore_cert_agent sshcore_cert_agent;
sshcore_cert_agent *_Nullable sshcore__cert_agent_start(ssh_session session,
                                                        ssh_key cert,
                                                        ssh_key key);
/* frees what the current auth method holds: its key, its certificate agent,
 * the agent socket lent to libssh (worker) */
void sshcore__auth_release(sshcore_conn *conn);
/* whether tests forced the certificate agent (sshcore_testing_force_cert_agent)
 */
bool sshcore__cert_agent_forced(void);
/* connects to the agent at `path` and lends the socket to libssh (worker) */
bool sshcore__agent_connect(sshcore_conn *conn, const char *path);
void sshcore__cert_agent_stop(ssh_session session,
                              sshcore_cert_agent *_Nullable agent);

/* sshcore_worker.c */
void *_Nullable sshcore__conn_worker_main(void *arg);

/* sshcore_teardown.c (worker) */
void sshcore__conn_teardown(sshcore_conn *conn);

/* sshcore_keepalive.c: the global-request slot (keepalive probes and remote
 * forwards share it), and the keepalive probes */
struct sshcore_gcancel {
    struct sshcore_gcancel *_Nullable next;
    char *_Nullable address;
    int port;
};
/** Worker: applies an event to the slot's machine and returns its action; a
 *  rejected event (a core bug) fails the connection with INVALID_STATE. */
sshcore_gslot_action sshcore__gslot_event(sshcore_conn *conn,
                                          sshcore_gslot_event event);
/** Worker: whether the slot is free for a new question. An answer nobody waits
 *  for is collected first (an abandoned forward's success queues its cancel).
 */
bool sshcore__global_slot_free(sshcore_conn *conn);
/** Worker: sends queued cancel-tcpip-forward requests when the slot is free. */
void sshcore__global_service(sshcore_conn *conn);
/** Worker, at its end: frees the slot's bookkeeping. */
void sshcore__global_free_all(sshcore_conn *conn);
/* keepalive probes (worker) */
int64_t sshcore__keepalive_due_ms(const sshcore_conn *conn);
void sshcore__keepalive_check(sshcore_conn *conn);

/* sshcore_rforward.c */
/** Worker: removes waiting connection `id` from a remote forward op and
 *  returns its open channel (NULL when it is gone: timed out, rejected, the
 *  forward ended). */
ssh_channel _Nullable sshcore__rforward_take(sshcore_op *forward, uint64_t id);

/* sshcore_op.c */
void sshcore__op_init(sshcore_op *op,
                      const sshcore_op_vtable *vt,
                      sshcore_op_kind kind,
                      sshcore_conn *conn,
                      sshcore_op_done_fn done,
                      void *_Nullable ctx);
/** Whether `op` is of `kind`; otherwise false, with `err` (when given) set to
 *  INVALID_ARGUMENT naming `call` and both kinds. */
bool sshcore__op_is(sshcore_op *op,
                    sshcore_op_kind kind,
                    const char *call,
                    sshcore_error *_Nullable err);
/** Complete exactly once; returns false if someone else already did. */
bool sshcore__op_complete(sshcore_op *op, const sshcore_error *err);
void sshcore__op_retain(sshcore_op *op);
/* the growable byte buffer */
int sshcore__bytes_append(sshcore_bytes *b, const void *p, size_t n);
/** Makes room for `n` more bytes after `len`; 0 or -1 (out of memory). */
int sshcore__bytes_reserve(sshcore_bytes *b, size_t n);
void sshcore__bytes_free(sshcore_bytes *b);

/* sshcore_socket.c */
/** Start a non-blocking TCP connect to ai; returns fd or -1 (errno set). */
int sshcore__socket_connect_start(const struct addrinfo *ai, bool *in_progress);
/** After POLLOUT: 0 when connected, else the errno of the failure. */
int sshcore__socket_connect_result(int fd);
/** TCP_NODELAY, TCP_USER_TIMEOUT, keepalive options on a connected socket. */
void sshcore__socket_tune(int fd, int user_timeout_ms);
int sshcore__errno_to_code(int e);

#pragma clang assume_nonnull end

#endif
