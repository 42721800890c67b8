/*
 * sshcore_fsm.c - the connection and channel state machines, and the names of
 * every machine's states, events and actions (sshcore_phase.c holds the
 * connect-phase and channel-setup machines).
 *
 * All are pure functions (state, event) -> (next state, action): no I/O, no
 * locks, no libssh. The worker applies the events and does the work itself:
 * a returned action is checked or ignored, and only three connect-phase
 * actions are acted on (Docs/StateMachines.md says which). The switches have
 * no `default:` so that a new state or event is a compile-time question here.
 * Docs/StateMachines.md holds the same tables; a test checks they agree.
 */
#include "sshcore.h"

#define NEXT(s, a)    \
    do {              \
        next = (s);   \
        action = (a); \
    } while (0)

sshcore_conn_action
sshcore_conn_fsm_apply(sshcore_conn_state *state, sshcore_conn_event event)
{
    sshcore_conn_state next = *state;
    sshcore_conn_action action = SSHCORE_CONN_ACT_REJECT;

    switch (*state) {
    case SSHCORE_CONN_IDLE:
        switch (event) {
        case SSHCORE_CONN_EV_START:
            NEXT(SSHCORE_CONN_CONNECTING, SSHCORE_CONN_ACT_CONNECT);
            break;
        case SSHCORE_CONN_EV_HANDSHAKE_DONE:
            break;
        case SSHCORE_CONN_EV_AUTH_OK:
            break;
        case SSHCORE_CONN_EV_FAILURE:
            NEXT(SSHCORE_CONN_FAILED, SSHCORE_CONN_ACT_TEAR_DOWN);
            break;
        case SSHCORE_CONN_EV_CLOSE:
            NEXT(SSHCORE_CONN_CLOSING, SSHCORE_CONN_ACT_TEAR_DOWN);
            break;
        case SSHCORE_CONN_EV_TORN_DOWN:
            break;
        case SSHCORE_CONN_EV_OPEN_CHANNEL:
            break;
        case SSHCORE_CONN_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_CONN_CONNECTING:
        switch (event) {
        case SSHCORE_CONN_EV_START:
            break;
        case SSHCORE_CONN_EV_HANDSHAKE_DONE:
            NEXT(SSHCORE_CONN_AUTHENTICATING, SSHCORE_CONN_ACT_AUTHENTICATE);
            break;
        case SSHCORE_CONN_EV_AUTH_OK:
            break;
        case SSHCORE_CONN_EV_FAILURE:
            NEXT(SSHCORE_CONN_FAILED, SSHCORE_CONN_ACT_TEAR_DOWN);
            break;
        case SSHCORE_CONN_EV_CLOSE:
            NEXT(SSHCORE_CONN_CLOSING, SSHCORE_CONN_ACT_TEAR_DOWN);
            break;
        case SSHCORE_CONN_EV_TORN_DOWN:
            break;
        case SSHCORE_CONN_EV_OPEN_CHANNEL:
            break;
        case SSHCORE_CONN_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_CONN_AUTHENTICATING:
        switch (event) {
        case SSHCORE_CONN_EV_START:
            break;
        case SSHCORE_CONN_EV_HANDSHAKE_DONE:
            break;
        case SSHCORE_CONN_EV_AUTH_OK:
            NEXT(SSHCORE_CONN_READY, SSHCORE_CONN_ACT_REPORT_READY);
            break;
        case SSHCORE_CONN_EV_FAILURE:
            NEXT(SSHCORE_CONN_FAILED, SSHCORE_CONN_ACT_TEAR_DOWN);
            break;
        case SSHCORE_CONN_EV_CLOSE:
            NEXT(SSHCORE_CONN_CLOSING, SSHCORE_CONN_ACT_TEAR_DOWN);
            break;
        case SSHCORE_CONN_EV_TORN_DOWN:
            break;
        case SSHCORE_CONN_EV_OPEN_CHANNEL:
            break;
        case SSHCORE_CONN_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_CONN_READY:
        switch (event) {
        case SSHCORE_CONN_EV_START:
            break;
        case SSHCORE_CONN_EV_HANDSHAKE_DONE:
            break;
        case SSHCORE_CONN_EV_AUTH_OK:
            break;
        case SSHCORE_CONN_EV_FAILURE:
            NEXT(SSHCORE_CONN_FAILED, SSHCORE_CONN_ACT_TEAR_DOWN);
            break;
        case SSHCORE_CONN_EV_CLOSE:
            NEXT(SSHCORE_CONN_CLOSING, SSHCORE_CONN_ACT_TEAR_DOWN);
            break;
        case SSHCORE_CONN_EV_TORN_DOWN:
            break;
        case SSHCORE_CONN_EV_OPEN_CHANNEL:
            NEXT(SSHCORE_CONN_READY, SSHCORE_CONN_ACT_OPEN_CHANNEL);
            break;
        case SSHCORE_CONN_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_CONN_CLOSING:
        switch (event) {
        case SSHCORE_CONN_EV_START:
            break;
        case SSHCORE_CONN_EV_HANDSHAKE_DONE:
            break;
        case SSHCORE_CONN_EV_AUTH_OK:
            break;
        case SSHCORE_CONN_EV_FAILURE:
            NEXT(SSHCORE_CONN_CLOSING, SSHCORE_CONN_ACT_NONE);
            break;
        case SSHCORE_CONN_EV_CLOSE:
            NEXT(SSHCORE_CONN_CLOSING, SSHCORE_CONN_ACT_NONE);
            break;
        case SSHCORE_CONN_EV_TORN_DOWN:
            NEXT(SSHCORE_CONN_CLOSED, SSHCORE_CONN_ACT_FINISH);
            break;
        case SSHCORE_CONN_EV_OPEN_CHANNEL:
            break;
        case SSHCORE_CONN_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_CONN_CLOSED:
        switch (event) {
        case SSHCORE_CONN_EV_START:
            break;
        case SSHCORE_CONN_EV_HANDSHAKE_DONE:
            break;
        case SSHCORE_CONN_EV_AUTH_OK:
            break;
        case SSHCORE_CONN_EV_FAILURE:
            NEXT(SSHCORE_CONN_CLOSED, SSHCORE_CONN_ACT_NONE);
            break;
        case SSHCORE_CONN_EV_CLOSE:
            NEXT(SSHCORE_CONN_CLOSED, SSHCORE_CONN_ACT_NONE);
            break;
        case SSHCORE_CONN_EV_TORN_DOWN:
            break;
        case SSHCORE_CONN_EV_OPEN_CHANNEL:
            break;
        case SSHCORE_CONN_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_CONN_FAILED:
        switch (event) {
        case SSHCORE_CONN_EV_START:
            break;
        case SSHCORE_CONN_EV_HANDSHAKE_DONE:
            break;
        case SSHCORE_CONN_EV_AUTH_OK:
            break;
        case SSHCORE_CONN_EV_FAILURE:
            NEXT(SSHCORE_CONN_FAILED, SSHCORE_CONN_ACT_NONE);
            break;
        case SSHCORE_CONN_EV_CLOSE:
            NEXT(SSHCORE_CONN_FAILED, SSHCORE_CONN_ACT_NONE);
            break;
        case SSHCORE_CONN_EV_TORN_DOWN:
            NEXT(SSHCORE_CONN_FAILED, SSHCORE_CONN_ACT_FINISH);
            break;
        case SSHCORE_CONN_EV_OPEN_CHANNEL:
            break;
        case SSHCORE_CONN_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_CONN__COUNT:
        break;
    }
    *state = next;
    return action;
}

sshcore_chan_action
sshcore_chan_fsm_apply(sshcore_chan_state *state, sshcore_chan_event event)
{
    sshcore_chan_state next = *state;
    sshcore_chan_action action = SSHCORE_CHAN_ACT_REJECT;

    switch (*state) {
    case SSHCORE_CHAN_OPENING:
        switch (event) {
        case SSHCORE_CHAN_EV_OPEN_OK:
            NEXT(SSHCORE_CHAN_OPEN, SSHCORE_CHAN_ACT_START_IO);
            break;
        case SSHCORE_CHAN_EV_OPEN_FAILED:
            NEXT(SSHCORE_CHAN_CLOSED, SSHCORE_CHAN_ACT_FAIL);
            break;
        case SSHCORE_CHAN_EV_SEND_EOF:
            break;
        case SSHCORE_CHAN_EV_RECV_EOF:
            break;
        case SSHCORE_CHAN_EV_RECV_CLOSE:
            break;
        case SSHCORE_CHAN_EV_CLOSE:
            NEXT(SSHCORE_CHAN_CLOSED, SSHCORE_CHAN_ACT_SEND_CLOSE);
            break;
        case SSHCORE_CHAN_EV_CONN_LOST:
            NEXT(SSHCORE_CHAN_CLOSED, SSHCORE_CHAN_ACT_FAIL);
            break;
        case SSHCORE_CHAN_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_CHAN_OPEN:
        switch (event) {
        case SSHCORE_CHAN_EV_OPEN_OK:
            break;
        case SSHCORE_CHAN_EV_OPEN_FAILED:
            break;
        case SSHCORE_CHAN_EV_SEND_EOF:
            NEXT(SSHCORE_CHAN_EOF_SENT, SSHCORE_CHAN_ACT_SEND_EOF);
            break;
        case SSHCORE_CHAN_EV_RECV_EOF:
            NEXT(SSHCORE_CHAN_EOF_RECEIVED, SSHCORE_CHAN_ACT_NONE);
            break;
        case SSHCORE_CHAN_EV_RECV_CLOSE:
            NEXT(SSHCORE_CHAN_CLOSED, SSHCORE_CHAN_ACT_FINISH);
            break;
        case SSHCORE_CHAN_EV_CLOSE:
            NEXT(SSHCORE_CHAN_CLOSING, SSHCORE_CHAN_ACT_SEND_CLOSE);
            break;
        case SSHCORE_CHAN_EV_CONN_LOST:
            NEXT(SSHCORE_CHAN_CLOSED, SSHCORE_CHAN_ACT_FAIL);
            break;
        case SSHCORE_CHAN_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_CHAN_EOF_SENT:
        switch (event) {
        case SSHCORE_CHAN_EV_OPEN_OK:
            break;
        case SSHCORE_CHAN_EV_OPEN_FAILED:
            break;
        case SSHCORE_CHAN_EV_SEND_EOF:
            break;
        case SSHCORE_CHAN_EV_RECV_EOF:
            NEXT(SSHCORE_CHAN_CLOSING, SSHCORE_CHAN_ACT_NONE);
            break;
        case SSHCORE_CHAN_EV_RECV_CLOSE:
            NEXT(SSHCORE_CHAN_CLOSED, SSHCORE_CHAN_ACT_FINISH);
            break;
        case SSHCORE_CHAN_EV_CLOSE:
            NEXT(SSHCORE_CHAN_CLOSING, SSHCORE_CHAN_ACT_SEND_CLOSE);
            break;
        case SSHCORE_CHAN_EV_CONN_LOST:
            NEXT(SSHCORE_CHAN_CLOSED, SSHCORE_CHAN_ACT_FAIL);
            break;
        case SSHCORE_CHAN_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_CHAN_EOF_RECEIVED:
        switch (event) {
        case SSHCORE_CHAN_EV_OPEN_OK:
            break;
        case SSHCORE_CHAN_EV_OPEN_FAILED:
            break;
        case SSHCORE_CHAN_EV_SEND_EOF:
            NEXT(SSHCORE_CHAN_CLOSING, SSHCORE_CHAN_ACT_SEND_EOF);
            break;
        case SSHCORE_CHAN_EV_RECV_EOF:
            break;
        case SSHCORE_CHAN_EV_RECV_CLOSE:
            NEXT(SSHCORE_CHAN_CLOSED, SSHCORE_CHAN_ACT_FINISH);
            break;
        case SSHCORE_CHAN_EV_CLOSE:
            NEXT(SSHCORE_CHAN_CLOSING, SSHCORE_CHAN_ACT_SEND_CLOSE);
            break;
        case SSHCORE_CHAN_EV_CONN_LOST:
            NEXT(SSHCORE_CHAN_CLOSED, SSHCORE_CHAN_ACT_FAIL);
            break;
        case SSHCORE_CHAN_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_CHAN_CLOSING:
        switch (event) {
        case SSHCORE_CHAN_EV_OPEN_OK:
            break;
        case SSHCORE_CHAN_EV_OPEN_FAILED:
            break;
        case SSHCORE_CHAN_EV_SEND_EOF:
            break;
        case SSHCORE_CHAN_EV_RECV_EOF:
            NEXT(SSHCORE_CHAN_CLOSING, SSHCORE_CHAN_ACT_NONE);
            break;
        case SSHCORE_CHAN_EV_RECV_CLOSE:
            NEXT(SSHCORE_CHAN_CLOSED, SSHCORE_CHAN_ACT_FINISH);
            break;
        case SSHCORE_CHAN_EV_CLOSE:
            NEXT(SSHCORE_CHAN_CLOSING, SSHCORE_CHAN_ACT_SEND_CLOSE);
            break;
        case SSHCORE_CHAN_EV_CONN_LOST:
            NEXT(SSHCORE_CHAN_CLOSED, SSHCORE_CHAN_ACT_FAIL);
            break;
        case SSHCORE_CHAN_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_CHAN_CLOSED:
        switch (event) {
        case SSHCORE_CHAN_EV_OPEN_OK:
            break;
        case SSHCORE_CHAN_EV_OPEN_FAILED:
            break;
        case SSHCORE_CHAN_EV_SEND_EOF:
            break;
        case SSHCORE_CHAN_EV_RECV_EOF:
            break;
        case SSHCORE_CHAN_EV_RECV_CLOSE:
            break;
        case SSHCORE_CHAN_EV_CLOSE:
            NEXT(SSHCORE_CHAN_CLOSED, SSHCORE_CHAN_ACT_NONE);
            break;
        case SSHCORE_CHAN_EV_CONN_LOST:
            NEXT(SSHCORE_CHAN_CLOSED, SSHCORE_CHAN_ACT_NONE);
            break;
        case SSHCORE_CHAN_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_CHAN__COUNT:
        break;
    }
    *state = next;
    return action;
}

#define SSHCORE_NAME_CASE(n, s) s,
static const char *const setup_names[] = {SSHCORE_SETUP_MAP(SSHCORE_NAME_CASE)};
static const char *const setup_event_names[] = {
    SSHCORE_SETUP_EVENT_MAP(SSHCORE_NAME_CASE)};
static const char *const setup_action_names[] = {
    SSHCORE_SETUP_ACTION_MAP(SSHCORE_NAME_CASE)};
static const char *const phase_names[] = {SSHCORE_PHASE_MAP(SSHCORE_NAME_CASE)};
static const char *const phase_event_names[] = {
    SSHCORE_PHASE_EVENT_MAP(SSHCORE_NAME_CASE)};
static const char *const phase_action_names[] = {
    SSHCORE_PHASE_ACTION_MAP(SSHCORE_NAME_CASE)};
static const char *const conn_state_names[] = {
    SSHCORE_CONN_STATE_MAP(SSHCORE_NAME_CASE)};
static const char *const conn_event_names[] = {
    SSHCORE_CONN_EVENT_MAP(SSHCORE_NAME_CASE)};
static const char *const conn_action_names[] = {
    SSHCORE_CONN_ACTION_MAP(SSHCORE_NAME_CASE)};
static const char *const chan_state_names[] = {
    SSHCORE_CHAN_STATE_MAP(SSHCORE_NAME_CASE)};
static const char *const chan_event_names[] = {
    SSHCORE_CHAN_EVENT_MAP(SSHCORE_NAME_CASE)};
static const char *const chan_action_names[] = {
    SSHCORE_CHAN_ACTION_MAP(SSHCORE_NAME_CASE)};
#undef SSHCORE_NAME_CASE

#define NAME_LOOKUP(table, i)                                                \
    (((i) >= 0 && (size_t)(i) < sizeof(table) / sizeof(table[0])) ? table[i] \
                                                                  : "?")

const char *
sshcore_setup_name(int s)
{
    return NAME_LOOKUP(setup_names, s);
}
const char *
sshcore_setup_event_name(int e)
{
    return NAME_LOOKUP(setup_event_names, e);
}
const char *
sshcore_setup_action_name(int a)
{
    return NAME_LOOKUP(setup_action_names, a);
}
const char *
sshcore_phase_name(int p)
{
    return NAME_LOOKUP(phase_names, p);
}
const char *
sshcore_phase_event_name(int e)
{
    return NAME_LOOKUP(phase_event_names, e);
}
const char *
sshcore_phase_action_name(int a)
{
    return NAME_LOOKUP(phase_action_names, a);
}
const char *
sshcore_conn_state_name(int s)
{
    return NAME_LOOKUP(conn_state_names, s);
}
const char *
sshcore_conn_event_name(int e)
{
    return NAME_LOOKUP(conn_event_names, e);
}
const char *
sshcore_conn_action_name(int a)
{
    return NAME_LOOKUP(conn_action_names, a);
}
const char *
sshcore_chan_state_name(int s)
{
    return NAME_LOOKUP(chan_state_names, s);
}
const char *
sshcore_chan_event_name(int e)
{
    return NAME_LOOKUP(chan_event_names, e);
}
const char *
sshcore_chan_action_name(int a)
{
    return NAME_LOOKUP(chan_action_names, a);
}
