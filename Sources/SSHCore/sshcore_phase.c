/*
 * sshcore_phase.c - the connect-phase machine (resolve, TCP, handshake, host
 * key, authentication, each pausing for the caller's answers) and the
 * channel-setup machine (open, pty, env, exec or shell or subsystem).
 *
 * Pure functions like those of sshcore_fsm.c; Docs/StateMachines.md holds the
 * same tables and a test checks they agree.
 */
#include "sshcore.h"

#define NEXT(s, a)    \
    do {              \
        next = (s);   \
        action = (a); \
    } while (0)

/* Channel setup: a rejected event is a core bug (the operation fails with
 * INVALID_STATE naming the step and the event). */
sshcore_setup_action
sshcore_setup_fsm_apply(sshcore_setup *setup, sshcore_setup_event event)
{
    sshcore_setup next = *setup;
    sshcore_setup_action action = SSHCORE_SETUP_ACT_REJECT;

    switch (*setup) {
    case SSHCORE_SETUP_OPEN:
        switch (event) {
        case SSHCORE_SETUP_EV_SESSION_OPENED:
            NEXT(SSHCORE_SETUP_AGENT, SSHCORE_SETUP_ACT_REQUEST_AGENT);
            break;
        case SSHCORE_SETUP_EV_STREAM_OPENED:
            NEXT(SSHCORE_SETUP_IO, SSHCORE_SETUP_ACT_RUN_IO);
            break;
        case SSHCORE_SETUP_EV_AGENT_DONE:
            break;
        case SSHCORE_SETUP_EV_ENV_DONE:
            break;
        case SSHCORE_SETUP_EV_PTY_DONE:
            break;
        case SSHCORE_SETUP_EV_STARTED:
            break;
        case SSHCORE_SETUP_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_SETUP_AGENT:
        switch (event) {
        case SSHCORE_SETUP_EV_SESSION_OPENED:
            break;
        case SSHCORE_SETUP_EV_STREAM_OPENED:
            break;
        case SSHCORE_SETUP_EV_AGENT_DONE:
            NEXT(SSHCORE_SETUP_ENV, SSHCORE_SETUP_ACT_SEND_ENV);
            break;
        case SSHCORE_SETUP_EV_ENV_DONE:
            break;
        case SSHCORE_SETUP_EV_PTY_DONE:
            break;
        case SSHCORE_SETUP_EV_STARTED:
            break;
        case SSHCORE_SETUP_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_SETUP_ENV:
        switch (event) {
        case SSHCORE_SETUP_EV_SESSION_OPENED:
            break;
        case SSHCORE_SETUP_EV_STREAM_OPENED:
            break;
        case SSHCORE_SETUP_EV_AGENT_DONE:
            break;
        case SSHCORE_SETUP_EV_ENV_DONE:
            NEXT(SSHCORE_SETUP_PTY, SSHCORE_SETUP_ACT_REQUEST_PTY);
            break;
        case SSHCORE_SETUP_EV_PTY_DONE:
            break;
        case SSHCORE_SETUP_EV_STARTED:
            break;
        case SSHCORE_SETUP_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_SETUP_PTY:
        switch (event) {
        case SSHCORE_SETUP_EV_SESSION_OPENED:
            break;
        case SSHCORE_SETUP_EV_STREAM_OPENED:
            break;
        case SSHCORE_SETUP_EV_AGENT_DONE:
            break;
        case SSHCORE_SETUP_EV_ENV_DONE:
            break;
        case SSHCORE_SETUP_EV_PTY_DONE:
            NEXT(SSHCORE_SETUP_START, SSHCORE_SETUP_ACT_REQUEST_START);
            break;
        case SSHCORE_SETUP_EV_STARTED:
            break;
        case SSHCORE_SETUP_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_SETUP_START:
        switch (event) {
        case SSHCORE_SETUP_EV_SESSION_OPENED:
            break;
        case SSHCORE_SETUP_EV_STREAM_OPENED:
            break;
        case SSHCORE_SETUP_EV_AGENT_DONE:
            break;
        case SSHCORE_SETUP_EV_ENV_DONE:
            break;
        case SSHCORE_SETUP_EV_PTY_DONE:
            break;
        case SSHCORE_SETUP_EV_STARTED:
            NEXT(SSHCORE_SETUP_IO, SSHCORE_SETUP_ACT_RUN_IO);
            break;
        case SSHCORE_SETUP_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_SETUP_IO:
        switch (event) {
        case SSHCORE_SETUP_EV_SESSION_OPENED:
            break;
        case SSHCORE_SETUP_EV_STREAM_OPENED:
            break;
        case SSHCORE_SETUP_EV_AGENT_DONE:
            break;
        case SSHCORE_SETUP_EV_ENV_DONE:
            break;
        case SSHCORE_SETUP_EV_PTY_DONE:
            break;
        case SSHCORE_SETUP_EV_STARTED:
            break;
        case SSHCORE_SETUP_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_SETUP__COUNT:
        break;
    }
    *setup = next;
    return action;
}

/* The connect phases: a rejected event is a core bug (the connection fails
 * with INVALID_STATE naming the phase and the event). */
sshcore_phase_action
sshcore_phase_fsm_apply(sshcore_phase *phase, sshcore_phase_event event)
{
    sshcore_phase next = *phase;
    sshcore_phase_action action = SSHCORE_PHASE_ACT_REJECT;

    switch (*phase) {
    case SSHCORE_PHASE_RESOLVE:
        switch (event) {
        case SSHCORE_PHASE_EV_RESOLVED:
            NEXT(SSHCORE_PHASE_TCP_START, SSHCORE_PHASE_ACT_CONNECT_TCP);
            break;
        case SSHCORE_PHASE_EV_TCP_PENDING:
            break;
        case SSHCORE_PHASE_EV_TCP_CONNECTED:
            break;
        case SSHCORE_PHASE_EV_TCP_RETRY:
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ASKED:
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ACCEPTED:
            break;
        case SSHCORE_PHASE_EV_METHODS_LISTED:
            break;
        case SSHCORE_PHASE_EV_ANSWER_ASKED:
            break;
        case SSHCORE_PHASE_EV_ANSWERED:
            break;
        case SSHCORE_PHASE_EV_AUTHENTICATED:
            break;
        case SSHCORE_PHASE_EV_ENDED:
            NEXT(SSHCORE_PHASE_DONE, SSHCORE_PHASE_ACT_TEAR_DOWN);
            break;
        case SSHCORE_PHASE_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_PHASE_TCP_START:
        switch (event) {
        case SSHCORE_PHASE_EV_RESOLVED:
            break;
        case SSHCORE_PHASE_EV_TCP_PENDING:
            NEXT(SSHCORE_PHASE_TCP_WAIT, SSHCORE_PHASE_ACT_WAIT_WRITABLE);
            break;
        case SSHCORE_PHASE_EV_TCP_CONNECTED:
            NEXT(SSHCORE_PHASE_HANDSHAKE, SSHCORE_PHASE_ACT_HANDSHAKE);
            break;
        case SSHCORE_PHASE_EV_TCP_RETRY:
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ASKED:
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ACCEPTED:
            break;
        case SSHCORE_PHASE_EV_METHODS_LISTED:
            break;
        case SSHCORE_PHASE_EV_ANSWER_ASKED:
            break;
        case SSHCORE_PHASE_EV_ANSWERED:
            break;
        case SSHCORE_PHASE_EV_AUTHENTICATED:
            break;
        case SSHCORE_PHASE_EV_ENDED:
            NEXT(SSHCORE_PHASE_DONE, SSHCORE_PHASE_ACT_TEAR_DOWN);
            break;
        case SSHCORE_PHASE_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_PHASE_TCP_WAIT:
        switch (event) {
        case SSHCORE_PHASE_EV_RESOLVED:
            break;
        case SSHCORE_PHASE_EV_TCP_PENDING:
            break;
        case SSHCORE_PHASE_EV_TCP_CONNECTED:
            NEXT(SSHCORE_PHASE_HANDSHAKE, SSHCORE_PHASE_ACT_HANDSHAKE);
            break;
        case SSHCORE_PHASE_EV_TCP_RETRY:
            NEXT(SSHCORE_PHASE_TCP_START, SSHCORE_PHASE_ACT_CONNECT_TCP);
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ASKED:
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ACCEPTED:
            break;
        case SSHCORE_PHASE_EV_METHODS_LISTED:
            break;
        case SSHCORE_PHASE_EV_ANSWER_ASKED:
            break;
        case SSHCORE_PHASE_EV_ANSWERED:
            break;
        case SSHCORE_PHASE_EV_AUTHENTICATED:
            break;
        case SSHCORE_PHASE_EV_ENDED:
            NEXT(SSHCORE_PHASE_DONE, SSHCORE_PHASE_ACT_TEAR_DOWN);
            break;
        case SSHCORE_PHASE_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_PHASE_HANDSHAKE:
        switch (event) {
        case SSHCORE_PHASE_EV_RESOLVED:
            break;
        case SSHCORE_PHASE_EV_TCP_PENDING:
            break;
        case SSHCORE_PHASE_EV_TCP_CONNECTED:
            break;
        case SSHCORE_PHASE_EV_TCP_RETRY:
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ASKED:
            NEXT(SSHCORE_PHASE_HOSTKEY_WAIT, SSHCORE_PHASE_ACT_ASK_CALLER);
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ACCEPTED:
            break;
        case SSHCORE_PHASE_EV_METHODS_LISTED:
            break;
        case SSHCORE_PHASE_EV_ANSWER_ASKED:
            break;
        case SSHCORE_PHASE_EV_ANSWERED:
            break;
        case SSHCORE_PHASE_EV_AUTHENTICATED:
            break;
        case SSHCORE_PHASE_EV_ENDED:
            NEXT(SSHCORE_PHASE_DONE, SSHCORE_PHASE_ACT_TEAR_DOWN);
            break;
        case SSHCORE_PHASE_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_PHASE_HOSTKEY_WAIT:
        switch (event) {
        case SSHCORE_PHASE_EV_RESOLVED:
            break;
        case SSHCORE_PHASE_EV_TCP_PENDING:
            break;
        case SSHCORE_PHASE_EV_TCP_CONNECTED:
            break;
        case SSHCORE_PHASE_EV_TCP_RETRY:
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ASKED:
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ACCEPTED:
            NEXT(SSHCORE_PHASE_AUTH_NONE, SSHCORE_PHASE_ACT_AUTHENTICATE);
            break;
        case SSHCORE_PHASE_EV_METHODS_LISTED:
            break;
        case SSHCORE_PHASE_EV_ANSWER_ASKED:
            break;
        case SSHCORE_PHASE_EV_ANSWERED:
            break;
        case SSHCORE_PHASE_EV_AUTHENTICATED:
            break;
        case SSHCORE_PHASE_EV_ENDED:
            NEXT(SSHCORE_PHASE_DONE, SSHCORE_PHASE_ACT_TEAR_DOWN);
            break;
        case SSHCORE_PHASE_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_PHASE_AUTH_NONE:
        switch (event) {
        case SSHCORE_PHASE_EV_RESOLVED:
            break;
        case SSHCORE_PHASE_EV_TCP_PENDING:
            break;
        case SSHCORE_PHASE_EV_TCP_CONNECTED:
            break;
        case SSHCORE_PHASE_EV_TCP_RETRY:
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ASKED:
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ACCEPTED:
            break;
        case SSHCORE_PHASE_EV_METHODS_LISTED:
            NEXT(SSHCORE_PHASE_AUTH_METHOD, SSHCORE_PHASE_ACT_TRY_METHOD);
            break;
        case SSHCORE_PHASE_EV_ANSWER_ASKED:
            break;
        case SSHCORE_PHASE_EV_ANSWERED:
            break;
        case SSHCORE_PHASE_EV_AUTHENTICATED:
            NEXT(SSHCORE_PHASE_READY, SSHCORE_PHASE_ACT_RUN_OPERATIONS);
            break;
        case SSHCORE_PHASE_EV_ENDED:
            NEXT(SSHCORE_PHASE_DONE, SSHCORE_PHASE_ACT_TEAR_DOWN);
            break;
        case SSHCORE_PHASE_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_PHASE_AUTH_METHOD:
        switch (event) {
        case SSHCORE_PHASE_EV_RESOLVED:
            break;
        case SSHCORE_PHASE_EV_TCP_PENDING:
            break;
        case SSHCORE_PHASE_EV_TCP_CONNECTED:
            break;
        case SSHCORE_PHASE_EV_TCP_RETRY:
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ASKED:
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ACCEPTED:
            break;
        case SSHCORE_PHASE_EV_METHODS_LISTED:
            break;
        case SSHCORE_PHASE_EV_ANSWER_ASKED:
            NEXT(SSHCORE_PHASE_ANSWER_WAIT, SSHCORE_PHASE_ACT_ASK_CALLER);
            break;
        case SSHCORE_PHASE_EV_ANSWERED:
            break;
        case SSHCORE_PHASE_EV_AUTHENTICATED:
            NEXT(SSHCORE_PHASE_READY, SSHCORE_PHASE_ACT_RUN_OPERATIONS);
            break;
        case SSHCORE_PHASE_EV_ENDED:
            NEXT(SSHCORE_PHASE_DONE, SSHCORE_PHASE_ACT_TEAR_DOWN);
            break;
        case SSHCORE_PHASE_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_PHASE_ANSWER_WAIT:
        switch (event) {
        case SSHCORE_PHASE_EV_RESOLVED:
            break;
        case SSHCORE_PHASE_EV_TCP_PENDING:
            break;
        case SSHCORE_PHASE_EV_TCP_CONNECTED:
            break;
        case SSHCORE_PHASE_EV_TCP_RETRY:
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ASKED:
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ACCEPTED:
            break;
        case SSHCORE_PHASE_EV_METHODS_LISTED:
            break;
        case SSHCORE_PHASE_EV_ANSWER_ASKED:
            break;
        case SSHCORE_PHASE_EV_ANSWERED:
            NEXT(SSHCORE_PHASE_AUTH_METHOD, SSHCORE_PHASE_ACT_TRY_METHOD);
            break;
        case SSHCORE_PHASE_EV_AUTHENTICATED:
            break;
        case SSHCORE_PHASE_EV_ENDED:
            NEXT(SSHCORE_PHASE_DONE, SSHCORE_PHASE_ACT_TEAR_DOWN);
            break;
        case SSHCORE_PHASE_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_PHASE_READY:
        switch (event) {
        case SSHCORE_PHASE_EV_RESOLVED:
            break;
        case SSHCORE_PHASE_EV_TCP_PENDING:
            break;
        case SSHCORE_PHASE_EV_TCP_CONNECTED:
            break;
        case SSHCORE_PHASE_EV_TCP_RETRY:
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ASKED:
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ACCEPTED:
            break;
        case SSHCORE_PHASE_EV_METHODS_LISTED:
            break;
        case SSHCORE_PHASE_EV_ANSWER_ASKED:
            break;
        case SSHCORE_PHASE_EV_ANSWERED:
            break;
        case SSHCORE_PHASE_EV_AUTHENTICATED:
            break;
        case SSHCORE_PHASE_EV_ENDED:
            NEXT(SSHCORE_PHASE_DONE, SSHCORE_PHASE_ACT_TEAR_DOWN);
            break;
        case SSHCORE_PHASE_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_PHASE_DONE:
        switch (event) {
        case SSHCORE_PHASE_EV_RESOLVED:
            break;
        case SSHCORE_PHASE_EV_TCP_PENDING:
            break;
        case SSHCORE_PHASE_EV_TCP_CONNECTED:
            break;
        case SSHCORE_PHASE_EV_TCP_RETRY:
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ASKED:
            break;
        case SSHCORE_PHASE_EV_HOSTKEY_ACCEPTED:
            break;
        case SSHCORE_PHASE_EV_METHODS_LISTED:
            break;
        case SSHCORE_PHASE_EV_ANSWER_ASKED:
            break;
        case SSHCORE_PHASE_EV_ANSWERED:
            break;
        case SSHCORE_PHASE_EV_AUTHENTICATED:
            break;
        case SSHCORE_PHASE_EV_ENDED:
            NEXT(SSHCORE_PHASE_DONE, SSHCORE_PHASE_ACT_NONE);
            break;
        case SSHCORE_PHASE_EV__COUNT:
            break;
        }
        break;
    case SSHCORE_PHASE__COUNT:
        break;
    }
    *phase = next;
    return action;
}
