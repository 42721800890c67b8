/*
 * sshcore_fsm.h - the core's state machines, one per object: a connection, a
 * channel, a remote forward and the connection's global-request slot. Each is
 * written once, as data: its states, events and actions, and the list of the
 * transitions it allows. The transition tables, the apply functions and the
 * names are generated from these lists (sshcore_fsm.c), and so are the tables
 * in Docs/StateMachines.md (scripts/state-tables.sh), which a test checks
 * against them both ways. A pair that is not listed is rejected.
 *
 * Part of the public interface of SSHCore (see sshcore.h) so that tests and
 * tools can read the machines; includes no libssh.
 */
#ifndef SSHCORE_FSM_H
#define SSHCORE_FSM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#pragma clang assume_nonnull begin

/* ---------------------------------------------------------------------- */
/* The connection                                                          */
/* ---------------------------------------------------------------------- */

/* What a caller sees of a connection: a pure function of its phase (the
 * third column of SSHCORE_PHASE_MAP). */
#define SSHCORE_CONN_STATE_MAP(XX)       \
    XX(IDLE, "idle")                     \
    XX(CONNECTING, "connecting")         \
    XX(AUTHENTICATING, "authenticating") \
    XX(READY, "ready")                   \
    XX(CLOSING, "closing")               \
    XX(CLOSED, "closed")                 \
    XX(FAILED, "failed")

/* A connection's one state: where it is from the first resolve to its end,
 * and the public state each phase is. */
#define SSHCORE_PHASE_MAP(XX)                     \
    XX(IDLE, "idle", IDLE)                        \
    XX(RESOLVE, "resolve", CONNECTING)            \
    XX(TCP_START, "tcpStart", CONNECTING)         \
    XX(TCP_WAIT, "tcpWait", CONNECTING)           \
    XX(HANDSHAKE, "handshake", CONNECTING)        \
    XX(HOSTKEY_WAIT, "hostKeyWait", CONNECTING)   \
    XX(AUTH_NONE, "authNone", AUTHENTICATING)     \
    XX(AUTH_METHOD, "authMethod", AUTHENTICATING) \
    XX(ANSWER_WAIT, "answerWait", AUTHENTICATING) \
    XX(READY, "ready", READY)                     \
    XX(CLOSING, "closing", CLOSING)               \
    XX(CLOSED, "closed", CLOSED)                  \
    XX(FAILED, "failed", FAILED)

#define SSHCORE_PHASE_EVENT_MAP(XX)         \
    XX(START, "start")                      \
    XX(START_ON_SOCKET, "startOnSocket")    \
    XX(RESOLVED, "resolved")                \
    XX(TCP_PENDING, "tcpPending")           \
    XX(TCP_CONNECTED, "tcpConnected")       \
    XX(TCP_RETRY, "tcpRetry")               \
    XX(HOSTKEY_ASKED, "hostKeyAsked")       \
    XX(HOSTKEY_ACCEPTED, "hostKeyAccepted") \
    XX(METHODS_LISTED, "methodsListed")     \
    XX(ANSWER_ASKED, "answerAsked")         \
    XX(ANSWERED, "answered")                \
    XX(AUTHENTICATED, "authenticated")      \
    XX(OPEN_CHANNEL, "openChannel")         \
    XX(FAILURE, "failure")                  \
    XX(CLOSE, "close")                      \
    XX(TORN_DOWN, "tornDown")

#define SSHCORE_PHASE_ACTION_MAP(XX) \
    XX(NONE, "none")                 \
    XX(ASK_CALLER, "askCaller")      \
    XX(RESUME, "resume")             \
    XX(REPORT_READY, "reportReady")  \
    XX(OPEN_CHANNEL, "openChannel")  \
    XX(TEAR_DOWN, "tearDown")        \
    XX(REJECT, "reject")

/* Every phase before the end can fail or be closed. */
#define SSHCORE_PHASE_ENDS(T, s)     \
    T(s, FAILURE, FAILED, TEAR_DOWN) \
    T(s, CLOSE, CLOSING, TEAR_DOWN)

#define SSHCORE_PHASE_TRANSITIONS(T)                      \
    T(IDLE, START, RESOLVE, NONE)                         \
    T(IDLE, START_ON_SOCKET, HANDSHAKE, NONE)             \
    SSHCORE_PHASE_ENDS(T, IDLE)                           \
    T(RESOLVE, RESOLVED, TCP_START, NONE)                 \
    SSHCORE_PHASE_ENDS(T, RESOLVE)                        \
    T(TCP_START, TCP_PENDING, TCP_WAIT, NONE)             \
    T(TCP_START, TCP_CONNECTED, HANDSHAKE, NONE)          \
    SSHCORE_PHASE_ENDS(T, TCP_START)                      \
    T(TCP_WAIT, TCP_CONNECTED, HANDSHAKE, NONE)           \
    T(TCP_WAIT, TCP_RETRY, TCP_START, NONE)               \
    SSHCORE_PHASE_ENDS(T, TCP_WAIT)                       \
    T(HANDSHAKE, HOSTKEY_ASKED, HOSTKEY_WAIT, ASK_CALLER) \
    SSHCORE_PHASE_ENDS(T, HANDSHAKE)                      \
    T(HOSTKEY_WAIT, HOSTKEY_ACCEPTED, AUTH_NONE, RESUME)  \
    SSHCORE_PHASE_ENDS(T, HOSTKEY_WAIT)                   \
    T(AUTH_NONE, METHODS_LISTED, AUTH_METHOD, NONE)       \
    T(AUTH_NONE, AUTHENTICATED, READY, REPORT_READY)      \
    SSHCORE_PHASE_ENDS(T, AUTH_NONE)                      \
    T(AUTH_METHOD, ANSWER_ASKED, ANSWER_WAIT, ASK_CALLER) \
    T(AUTH_METHOD, AUTHENTICATED, READY, REPORT_READY)    \
    SSHCORE_PHASE_ENDS(T, AUTH_METHOD)                    \
    T(ANSWER_WAIT, ANSWERED, AUTH_METHOD, RESUME)         \
    SSHCORE_PHASE_ENDS(T, ANSWER_WAIT)                    \
    T(READY, OPEN_CHANNEL, READY, OPEN_CHANNEL)           \
    SSHCORE_PHASE_ENDS(T, READY)                          \
    T(CLOSING, FAILURE, CLOSING, NONE)                    \
    T(CLOSING, CLOSE, CLOSING, NONE)                      \
    T(CLOSING, OPEN_CHANNEL, CLOSING, NONE)               \
    T(CLOSING, TORN_DOWN, CLOSED, NONE)                   \
    T(CLOSED, FAILURE, CLOSED, NONE)                      \
    T(CLOSED, CLOSE, CLOSED, NONE)                        \
    T(CLOSED, OPEN_CHANNEL, CLOSED, NONE)                 \
    T(FAILED, FAILURE, FAILED, NONE)                      \
    T(FAILED, CLOSE, FAILED, NONE)                        \
    T(FAILED, OPEN_CHANNEL, FAILED, NONE)                 \
    T(FAILED, TORN_DOWN, FAILED, NONE)

/* ---------------------------------------------------------------------- */
/* A channel                                                               */
/* ---------------------------------------------------------------------- */

/* A session channel's setup steps are sub-states of its opening: the caller
 * learns the channel is open when its command has started. The third column
 * is what each state means for the code around it (flags below): every such
 * flag is derived from the state, none is kept beside it. */
#define SSHCORE_CHAN_F_IO      0x1u /* the channel carries bytes */
#define SSHCORE_CHAN_F_WRITES  0x2u /* our input may still go out */
#define SSHCORE_CHAN_F_EOF_IN  0x4u /* the peer's EOF came */
#define SSHCORE_CHAN_F_EOF_OUT 0x8u /* our EOF went */
#define SSHCORE_CHAN_STATE_MAP(XX)                                         \
    XX(OPENING, "opening", 0)                                              \
    XX(AGENT_REQUEST, "agentRequest", 0)                                   \
    XX(ENV_REQUESTS, "envRequests", 0)                                     \
    XX(PTY_REQUEST, "ptyRequest", 0)                                       \
    XX(START_REQUEST, "startRequest", 0)                                   \
    XX(OPEN, "open", SSHCORE_CHAN_F_IO | SSHCORE_CHAN_F_WRITES)            \
    XX(EOF_SENT, "eofSent", SSHCORE_CHAN_F_IO | SSHCORE_CHAN_F_EOF_OUT)    \
    XX(EOF_RECEIVED,                                                       \
       "eofReceived",                                                      \
       SSHCORE_CHAN_F_IO | SSHCORE_CHAN_F_WRITES | SSHCORE_CHAN_F_EOF_IN)  \
    XX(CLOSING,                                                            \
       "closing",                                                          \
       SSHCORE_CHAN_F_IO | SSHCORE_CHAN_F_EOF_IN | SSHCORE_CHAN_F_EOF_OUT) \
    XX(CLOSED, "closed", 0)

#define SSHCORE_CHAN_EVENT_MAP(XX)      \
    XX(SESSION_OPENED, "sessionOpened") \
    XX(STREAM_OPENED, "streamOpened")   \
    XX(OPEN_FAILED, "openFailed")       \
    XX(AGENT_DONE, "agentDone")         \
    XX(ENV_DONE, "envDone")             \
    XX(PTY_DONE, "ptyDone")             \
    XX(STARTED, "started")              \
    XX(SEND_EOF, "sendEOF")             \
    XX(RECV_EOF, "recvEOF")             \
    XX(RECV_CLOSE, "recvClose")         \
    XX(CLOSE, "close")                  \
    XX(CONN_LOST, "connectionLost")

#define SSHCORE_CHAN_ACTION_MAP(XX) \
    XX(NONE, "none")                \
    XX(REPORT_OPEN, "reportOpen")   \
    XX(SEND_EOF, "sendEOF")         \
    XX(SEND_CLOSE, "sendClose")     \
    XX(REPORT_EOF, "reportEOF")     \
    XX(FINISH, "finish")            \
    XX(FAIL, "fail")                \
    XX(REJECT, "reject")

/* A channel open on the server (a setup step or its I/O) closes the same way
 * from every state. */
#define SSHCORE_CHAN_ENDS(T, s)      \
    T(s, CLOSE, CLOSING, SEND_CLOSE) \
    T(s, CONN_LOST, CLOSED, FAIL)

#define SSHCORE_CHAN_TRANSITIONS(T)                  \
    T(OPENING, SESSION_OPENED, AGENT_REQUEST, NONE)  \
    T(OPENING, STREAM_OPENED, OPEN, REPORT_OPEN)     \
    T(OPENING, OPEN_FAILED, CLOSED, FAIL)            \
    T(OPENING, CLOSE, CLOSED, SEND_CLOSE)            \
    T(OPENING, CONN_LOST, CLOSED, FAIL)              \
    T(AGENT_REQUEST, AGENT_DONE, ENV_REQUESTS, NONE) \
    SSHCORE_CHAN_ENDS(T, AGENT_REQUEST)              \
    T(ENV_REQUESTS, ENV_DONE, PTY_REQUEST, NONE)     \
    SSHCORE_CHAN_ENDS(T, ENV_REQUESTS)               \
    T(PTY_REQUEST, PTY_DONE, START_REQUEST, NONE)    \
    SSHCORE_CHAN_ENDS(T, PTY_REQUEST)                \
    T(START_REQUEST, STARTED, OPEN, REPORT_OPEN)     \
    SSHCORE_CHAN_ENDS(T, START_REQUEST)              \
    T(OPEN, SEND_EOF, EOF_SENT, SEND_EOF)            \
    T(OPEN, RECV_EOF, EOF_RECEIVED, REPORT_EOF)      \
    T(OPEN, RECV_CLOSE, CLOSED, FINISH)              \
    SSHCORE_CHAN_ENDS(T, OPEN)                       \
    T(EOF_SENT, RECV_EOF, CLOSING, REPORT_EOF)       \
    T(EOF_SENT, RECV_CLOSE, CLOSED, FINISH)          \
    SSHCORE_CHAN_ENDS(T, EOF_SENT)                   \
    T(EOF_RECEIVED, SEND_EOF, CLOSING, SEND_EOF)     \
    T(EOF_RECEIVED, RECV_EOF, EOF_RECEIVED, NONE)    \
    T(EOF_RECEIVED, RECV_CLOSE, CLOSED, FINISH)      \
    SSHCORE_CHAN_ENDS(T, EOF_RECEIVED)               \
    T(CLOSING, RECV_EOF, CLOSING, NONE)              \
    T(CLOSING, RECV_CLOSE, CLOSED, FINISH)           \
    SSHCORE_CHAN_ENDS(T, CLOSING)                    \
    T(CLOSED, CLOSE, CLOSED, NONE)                   \
    T(CLOSED, CONN_LOST, CLOSED, NONE)

/* ---------------------------------------------------------------------- */
/* A remote forward                                                        */
/* ---------------------------------------------------------------------- */

#define SSHCORE_RF_STATE_MAP(XX) \
    XX(REQUEST, "request")       \
    XX(WAIT, "wait")             \
    XX(LISTEN, "listen")         \
    XX(ENDED, "ended")

#define SSHCORE_RF_EVENT_MAP(XX) \
    XX(SENT, "sent")             \
    XX(ACCEPTED, "accepted")     \
    XX(END, "end")

#define SSHCORE_RF_ACTION_MAP(XX)           \
    XX(NONE, "none")                        \
    XX(REPORT_LISTENING, "reportListening") \
    XX(ABANDON_QUESTION, "abandonQuestion") \
    XX(CANCEL_FORWARD, "cancelForward")     \
    XX(REJECT, "reject")

#define SSHCORE_RF_TRANSITIONS(T)               \
    T(REQUEST, SENT, WAIT, NONE)                \
    T(REQUEST, END, ENDED, NONE)                \
    T(WAIT, ACCEPTED, LISTEN, REPORT_LISTENING) \
    T(WAIT, END, ENDED, ABANDON_QUESTION)       \
    T(LISTEN, END, ENDED, CANCEL_FORWARD)       \
    T(ENDED, END, ENDED, NONE)

/* ---------------------------------------------------------------------- */
/* The connection's global-request slot                                    */
/* ---------------------------------------------------------------------- */

/* libssh 0.10 has one slot for global requests with a reply: who asked the
 * question whose answer it holds or awaits (sshcore_keepalive.c). */
#define SSHCORE_GSLOT_STATE_MAP(XX) \
    XX(FREE, "free")                \
    XX(KEEPALIVE, "keepalive")      \
    XX(CANCEL, "cancel")            \
    XX(OWNED, "owned")              \
    XX(ORPHAN_FORWARD, "orphanForward")

#define SSHCORE_GSLOT_EVENT_MAP(XX) \
    XX(PROBE_SENT, "probeSent")     \
    XX(CANCEL_SENT, "cancelSent")   \
    XX(REQUEST_SENT, "requestSent") \
    XX(ANSWERED, "answered")        \
    XX(OWNER_GONE, "ownerGone")     \
    XX(COLLECTED, "collected")

#define SSHCORE_GSLOT_ACTION_MAP(XX)       \
    XX(NONE, "none")                       \
    XX(UNDO_IF_ACCEPTED, "undoIfAccepted") \
    XX(REJECT, "reject")

#define SSHCORE_GSLOT_TRANSITIONS(T)           \
    T(FREE, PROBE_SENT, KEEPALIVE, NONE)       \
    T(FREE, CANCEL_SENT, CANCEL, NONE)         \
    T(FREE, REQUEST_SENT, OWNED, NONE)         \
    T(OWNED, ANSWERED, FREE, NONE)             \
    T(OWNED, OWNER_GONE, ORPHAN_FORWARD, NONE) \
    T(KEEPALIVE, COLLECTED, FREE, NONE)        \
    T(CANCEL, COLLECTED, FREE, NONE)           \
    T(ORPHAN_FORWARD, COLLECTED, FREE, UNDO_IF_ACCEPTED)

/* ---------------------------------------------------------------------- */
/* The enums                                                               */
/* ---------------------------------------------------------------------- */

#define SSHCORE_ENUM_CONN_STATE(n, s) SSHCORE_CONN_##n,
typedef enum sshcore_conn_state {
    SSHCORE_CONN_STATE_MAP(SSHCORE_ENUM_CONN_STATE) SSHCORE_CONN__COUNT
} sshcore_conn_state;
#undef SSHCORE_ENUM_CONN_STATE

/* One machine's three enums: P_<state>, P_EV_<event>, P_ACT_<action>. */
#define SSHCORE_ENUM_STATE(P, n)  P##_##n,
#define SSHCORE_ENUM_EVENT(P, n)  P##_EV_##n,
#define SSHCORE_ENUM_ACTION(P, n) P##_ACT_##n,

#define SSHCORE_ENUM_PHASE(n, s, c)      SSHCORE_ENUM_STATE(SSHCORE_PHASE, n)
#define SSHCORE_ENUM_PHASE_EVENT(n, s)   SSHCORE_ENUM_EVENT(SSHCORE_PHASE, n)
#define SSHCORE_ENUM_PHASE_ACTION(n, s)  SSHCORE_ENUM_ACTION(SSHCORE_PHASE, n)
#define SSHCORE_ENUM_CHAN_STATE(n, s, f) SSHCORE_ENUM_STATE(SSHCORE_CHAN, n)
#define SSHCORE_ENUM_CHAN_EVENT(n, s)    SSHCORE_ENUM_EVENT(SSHCORE_CHAN, n)
#define SSHCORE_ENUM_CHAN_ACTION(n, s)   SSHCORE_ENUM_ACTION(SSHCORE_CHAN, n)
#define SSHCORE_ENUM_RF_STATE(n, s)      SSHCORE_ENUM_STATE(SSHCORE_RF, n)
#define SSHCORE_ENUM_RF_EVENT(n, s)      SSHCORE_ENUM_EVENT(SSHCORE_RF, n)
#define SSHCORE_ENUM_RF_ACTION(n, s)     SSHCORE_ENUM_ACTION(SSHCORE_RF, n)
#define SSHCORE_ENUM_GSLOT_STATE(n, s)   SSHCORE_ENUM_STATE(SSHCORE_GSLOT, n)
#define SSHCORE_ENUM_GSLOT_EVENT(n, s)   SSHCORE_ENUM_EVENT(SSHCORE_GSLOT, n)
#define SSHCORE_ENUM_GSLOT_ACTION(n, s)  SSHCORE_ENUM_ACTION(SSHCORE_GSLOT, n)

typedef enum sshcore_phase {
    SSHCORE_PHASE_MAP(SSHCORE_ENUM_PHASE) SSHCORE_PHASE__COUNT
} sshcore_phase;
typedef enum sshcore_phase_event {
    SSHCORE_PHASE_EVENT_MAP(SSHCORE_ENUM_PHASE_EVENT) SSHCORE_PHASE_EV__COUNT
} sshcore_phase_event;
typedef enum sshcore_phase_action {
    SSHCORE_PHASE_ACTION_MAP(SSHCORE_ENUM_PHASE_ACTION) SSHCORE_PHASE_ACT__COUNT
} sshcore_phase_action;

typedef enum sshcore_chan_state {
    SSHCORE_CHAN_STATE_MAP(SSHCORE_ENUM_CHAN_STATE) SSHCORE_CHAN__COUNT
} sshcore_chan_state;
typedef enum sshcore_chan_event {
    SSHCORE_CHAN_EVENT_MAP(SSHCORE_ENUM_CHAN_EVENT) SSHCORE_CHAN_EV__COUNT
} sshcore_chan_event;
typedef enum sshcore_chan_action {
    SSHCORE_CHAN_ACTION_MAP(SSHCORE_ENUM_CHAN_ACTION) SSHCORE_CHAN_ACT__COUNT
} sshcore_chan_action;

/** @brief The flags (SSHCORE_CHAN_F_*) a channel in `state` has. */
static inline unsigned
sshcore_chan_flags(sshcore_chan_state state)
{
#define SSHCORE_CHAN_FLAGS_CASE(n, s, f) \
    case SSHCORE_CHAN_##n:               \
        return (f);
    switch (state) {
        SSHCORE_CHAN_STATE_MAP(SSHCORE_CHAN_FLAGS_CASE)
    case SSHCORE_CHAN__COUNT:
        break;
    }
#undef SSHCORE_CHAN_FLAGS_CASE
    return 0;
}

typedef enum sshcore_rf_state {
    SSHCORE_RF_STATE_MAP(SSHCORE_ENUM_RF_STATE) SSHCORE_RF__COUNT
} sshcore_rf_state;
typedef enum sshcore_rf_event {
    SSHCORE_RF_EVENT_MAP(SSHCORE_ENUM_RF_EVENT) SSHCORE_RF_EV__COUNT
} sshcore_rf_event;
typedef enum sshcore_rf_action {
    SSHCORE_RF_ACTION_MAP(SSHCORE_ENUM_RF_ACTION) SSHCORE_RF_ACT__COUNT
} sshcore_rf_action;

typedef enum sshcore_gslot {
    SSHCORE_GSLOT_STATE_MAP(SSHCORE_ENUM_GSLOT_STATE) SSHCORE_GSLOT__COUNT
} sshcore_gslot;
typedef enum sshcore_gslot_event {
    SSHCORE_GSLOT_EVENT_MAP(SSHCORE_ENUM_GSLOT_EVENT) SSHCORE_GSLOT_EV__COUNT
} sshcore_gslot_event;
typedef enum sshcore_gslot_action {
    SSHCORE_GSLOT_ACTION_MAP(SSHCORE_ENUM_GSLOT_ACTION) SSHCORE_GSLOT_ACT__COUNT
} sshcore_gslot_action;

/* ---------------------------------------------------------------------- */
/* Applying events                                                         */
/* ---------------------------------------------------------------------- */

/**
 * @brief Apply an event to a connection's phase.
 * @param[in,out] phase the current phase; replaced by the next one.
 * @return the transition's action (Docs/StateMachines.md says what the core
 *         does for each). REJECT leaves the phase unchanged: the event is not
 *         allowed there.
 */
sshcore_phase_action sshcore_phase_fsm_apply(sshcore_phase *phase,
                                             sshcore_phase_event event);
/** @brief Apply an event to a channel; see sshcore_phase_fsm_apply. */
sshcore_chan_action sshcore_chan_fsm_apply(sshcore_chan_state *state,
                                           sshcore_chan_event event);
/** @brief Apply an event to a remote forward; see sshcore_phase_fsm_apply. */
sshcore_rf_action sshcore_rf_fsm_apply(sshcore_rf_state *state,
                                       sshcore_rf_event event);
/** @brief Apply an event to a global-request slot; see
 *  sshcore_phase_fsm_apply. */
sshcore_gslot_action sshcore_gslot_fsm_apply(sshcore_gslot *state,
                                             sshcore_gslot_event event);

/** @brief The public state a connection in `phase` is in. */
sshcore_conn_state sshcore_conn_state_of(sshcore_phase phase);
const char *sshcore_conn_state_name(int state);

/* ---------------------------------------------------------------------- */
/* The machines as data (for tests and tools)                              */
/* ---------------------------------------------------------------------- */

typedef enum sshcore_machine {
    SSHCORE_MACHINE_CONN,     /* "Connection": sshcore_phase */
    SSHCORE_MACHINE_CHAN,     /* "Channel": sshcore_chan_state */
    SSHCORE_MACHINE_RFORWARD, /* "Remote forward": sshcore_rf_state */
    SSHCORE_MACHINE_GSLOT,    /* "Global-request slot": sshcore_gslot */
    SSHCORE_MACHINE__COUNT
} sshcore_machine;

typedef enum sshcore_fsm_part {
    SSHCORE_FSM_STATE,
    SSHCORE_FSM_EVENT,
    SSHCORE_FSM_ACTION,
} sshcore_fsm_part;

/** One listed transition, as the enums' values. */
typedef struct sshcore_fsm_row {
    int state;
    int event;
    int next;
    int action;
} sshcore_fsm_row;

/** @brief The machine's name: its section in Docs/StateMachines.md. */
const char *sshcore_fsm_machine_name(sshcore_machine machine);
/** @brief How many states, events or actions (REJECT included) it has. */
int sshcore_fsm_count(sshcore_machine machine, sshcore_fsm_part part);
/** @brief The name of a state, event or action; "?" when out of range. */
const char *
sshcore_fsm_name(sshcore_machine machine, sshcore_fsm_part part, int value);
/** @brief How many transitions the machine lists. */
size_t sshcore_fsm_row_count(sshcore_machine machine);
/** @brief The index-th listed transition, in list order; false past the end. */
bool
sshcore_fsm_row_at(sshcore_machine machine, size_t index, sshcore_fsm_row *row);
/**
 * @brief What a rejected event means, for an error's detail: "channel in
 *        opening: event sendEOF not allowed (a core bug)".
 */
void sshcore_fsm_rejection(sshcore_machine machine,
                           int state,
                           int event,
                           char *buf,
                           size_t cap);
/**
 * @brief Apply an event through the machine's generated table (what the typed
 *        apply functions do).
 * @return the action, or the machine's REJECT with the state unchanged.
 */
int sshcore_fsm_apply(sshcore_machine machine, int *state, int event);

#pragma clang assume_nonnull end

#ifdef __cplusplus
}
#endif

#endif /* SSHCORE_FSM_H */
