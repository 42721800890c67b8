/*
 * sshcore_fsm.h - the four state machines (connection, channel, connect phase,
 * channel setup): pure transition functions, and the names of their states,
 * events and actions. Part of the public interface of SSHCore (see
 * sshcore.h); includes no libssh.
 */
#ifndef SSHCORE_FSM_H
#define SSHCORE_FSM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#pragma clang assume_nonnull begin

/* ---------------------------------------------------------------------- */
/* State machines: pure transition functions, no I/O.                      */
/* ---------------------------------------------------------------------- */

#define SSHCORE_CONN_STATE_MAP(XX)       \
    XX(IDLE, "idle")                     \
    XX(CONNECTING, "connecting")         \
    XX(AUTHENTICATING, "authenticating") \
    XX(READY, "ready")                   \
    XX(CLOSING, "closing")               \
    XX(CLOSED, "closed")                 \
    XX(FAILED, "failed")

#define SSHCORE_CONN_EVENT_MAP(XX)      \
    XX(START, "start")                  \
    XX(HANDSHAKE_DONE, "handshakeDone") \
    XX(AUTH_OK, "authOK")               \
    XX(FAILURE, "failure")              \
    XX(CLOSE, "close")                  \
    XX(TORN_DOWN, "tornDown")           \
    XX(OPEN_CHANNEL, "openChannel")

#define SSHCORE_CONN_ACTION_MAP(XX)  \
    XX(NONE, "none")                 \
    XX(CONNECT, "connect")           \
    XX(AUTHENTICATE, "authenticate") \
    XX(REPORT_READY, "reportReady")  \
    XX(TEAR_DOWN, "tearDown")        \
    XX(FINISH, "finish")             \
    XX(OPEN_CHANNEL, "openChannel")  \
    XX(REJECT, "reject")

#define SSHCORE_CHAN_STATE_MAP(XX)  \
    XX(OPENING, "opening")          \
    XX(OPEN, "open")                \
    XX(EOF_SENT, "eofSent")         \
    XX(EOF_RECEIVED, "eofReceived") \
    XX(CLOSING, "closing")          \
    XX(CLOSED, "closed")

#define SSHCORE_CHAN_EVENT_MAP(XX) \
    XX(OPEN_OK, "openOK")          \
    XX(OPEN_FAILED, "openFailed")  \
    XX(SEND_EOF, "sendEOF")        \
    XX(RECV_EOF, "recvEOF")        \
    XX(RECV_CLOSE, "recvClose")    \
    XX(CLOSE, "close")             \
    XX(CONN_LOST, "connectionLost")

#define SSHCORE_CHAN_ACTION_MAP(XX) \
    XX(NONE, "none")                \
    XX(START_IO, "startIO")         \
    XX(SEND_EOF, "sendEOF")         \
    XX(SEND_CLOSE, "sendClose")     \
    XX(FINISH, "finish")            \
    XX(FAIL, "fail")                \
    XX(REJECT, "reject")

/* The connect phases: where a connection is inside `connecting` and
 * `authenticating` (a machine of its own; the worker steps the current phase).
 */
#define SSHCORE_PHASE_MAP(XX)       \
    XX(RESOLVE, "resolve")          \
    XX(TCP_START, "tcpStart")       \
    XX(TCP_WAIT, "tcpWait")         \
    XX(HANDSHAKE, "handshake")      \
    XX(HOSTKEY_WAIT, "hostKeyWait") \
    XX(AUTH_NONE, "authNone")       \
    XX(AUTH_METHOD, "authMethod")   \
    XX(ANSWER_WAIT, "answerWait")   \
    XX(READY, "ready")              \
    XX(DONE, "done")

#define SSHCORE_PHASE_EVENT_MAP(XX)         \
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
    XX(ENDED, "ended")

#define SSHCORE_PHASE_ACTION_MAP(XX)    \
    XX(NONE, "none")                    \
    XX(CONNECT_TCP, "connectTCP")       \
    XX(WAIT_WRITABLE, "waitWritable")   \
    XX(HANDSHAKE, "handshake")          \
    XX(ASK_CALLER, "askCaller")         \
    XX(AUTHENTICATE, "authenticate")    \
    XX(TRY_METHOD, "tryMethod")         \
    XX(RUN_OPERATIONS, "runOperations") \
    XX(TEAR_DOWN, "tearDown")           \
    XX(REJECT, "reject")

/* Channel setup: how a session channel gets from open to its running command
 * while the channel machine is in `opening`/`open` (a machine of its own). */
#define SSHCORE_SETUP_MAP(XX) \
    XX(OPEN, "open")          \
    XX(AGENT, "agentRequest") \
    XX(ENV, "env")            \
    XX(PTY, "pty")            \
    XX(START, "start")        \
    XX(IO, "io")

#define SSHCORE_SETUP_EVENT_MAP(XX)     \
    XX(SESSION_OPENED, "sessionOpened") \
    XX(STREAM_OPENED, "streamOpened")   \
    XX(AGENT_DONE, "agentDone")         \
    XX(ENV_DONE, "envDone")             \
    XX(PTY_DONE, "ptyDone")             \
    XX(STARTED, "started")

#define SSHCORE_SETUP_ACTION_MAP(XX)  \
    XX(REQUEST_AGENT, "requestAgent") \
    XX(SEND_ENV, "sendEnv")           \
    XX(REQUEST_PTY, "requestPTY")     \
    XX(REQUEST_START, "requestStart") \
    XX(RUN_IO, "runIO")               \
    XX(REJECT, "reject")

#define SSHCORE_ENUM_SETUP(n, s)        SSHCORE_SETUP_##n,
#define SSHCORE_ENUM_SETUP_EVENT(n, s)  SSHCORE_SETUP_EV_##n,
#define SSHCORE_ENUM_SETUP_ACTION(n, s) SSHCORE_SETUP_ACT_##n,

typedef enum sshcore_setup {
    SSHCORE_SETUP_MAP(SSHCORE_ENUM_SETUP) SSHCORE_SETUP__COUNT
} sshcore_setup;
typedef enum sshcore_setup_event {
    SSHCORE_SETUP_EVENT_MAP(SSHCORE_ENUM_SETUP_EVENT) SSHCORE_SETUP_EV__COUNT
} sshcore_setup_event;
typedef enum sshcore_setup_action {
    SSHCORE_SETUP_ACTION_MAP(SSHCORE_ENUM_SETUP_ACTION) SSHCORE_SETUP_ACT__COUNT
} sshcore_setup_action;

#define SSHCORE_ENUM_PHASE(n, s)        SSHCORE_PHASE_##n,
#define SSHCORE_ENUM_PHASE_EVENT(n, s)  SSHCORE_PHASE_EV_##n,
#define SSHCORE_ENUM_PHASE_ACTION(n, s) SSHCORE_PHASE_ACT_##n,

typedef enum sshcore_phase {
    SSHCORE_PHASE_MAP(SSHCORE_ENUM_PHASE) SSHCORE_PHASE__COUNT
} sshcore_phase;
typedef enum sshcore_phase_event {
    SSHCORE_PHASE_EVENT_MAP(SSHCORE_ENUM_PHASE_EVENT) SSHCORE_PHASE_EV__COUNT
} sshcore_phase_event;
typedef enum sshcore_phase_action {
    SSHCORE_PHASE_ACTION_MAP(SSHCORE_ENUM_PHASE_ACTION) SSHCORE_PHASE_ACT__COUNT
} sshcore_phase_action;

#define SSHCORE_ENUM_CONN_STATE(n, s)  SSHCORE_CONN_##n,
#define SSHCORE_ENUM_CONN_EVENT(n, s)  SSHCORE_CONN_EV_##n,
#define SSHCORE_ENUM_CONN_ACTION(n, s) SSHCORE_CONN_ACT_##n,
#define SSHCORE_ENUM_CHAN_STATE(n, s)  SSHCORE_CHAN_##n,
#define SSHCORE_ENUM_CHAN_EVENT(n, s)  SSHCORE_CHAN_EV_##n,
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
 * @return the transition's action (Docs/StateMachines.md says which actions
 *         the core acts on and which it only checks). REJECT leaves the state
 *         unchanged and means the event is not allowed in that state.
 */
sshcore_conn_action sshcore_conn_fsm_apply(sshcore_conn_state *state,
                                           sshcore_conn_event event);
/** @brief Apply an event to a channel state; see sshcore_conn_fsm_apply. */
sshcore_chan_action sshcore_chan_fsm_apply(sshcore_chan_state *state,
                                           sshcore_chan_event event);

/** @brief Apply an event to a connect phase; see sshcore_conn_fsm_apply. */
sshcore_phase_action sshcore_phase_fsm_apply(sshcore_phase *phase,
                                             sshcore_phase_event event);

/** @brief Apply an event to a channel's setup; see sshcore_conn_fsm_apply. */
sshcore_setup_action sshcore_setup_fsm_apply(sshcore_setup *setup,
                                             sshcore_setup_event event);

const char *sshcore_setup_name(int setup);
const char *sshcore_setup_event_name(int event);
const char *sshcore_setup_action_name(int action);
const char *sshcore_phase_name(int phase);
const char *sshcore_phase_event_name(int event);
const char *sshcore_phase_action_name(int action);
const char *sshcore_conn_state_name(int state);
const char *sshcore_conn_event_name(int event);
const char *sshcore_conn_action_name(int action);
const char *sshcore_chan_state_name(int state);
const char *sshcore_chan_event_name(int event);
const char *sshcore_chan_action_name(int action);

#pragma clang assume_nonnull end

#ifdef __cplusplus
}
#endif

#endif /* SSHCORE_FSM_H */
