/*
 * sshcore_fsm.c - the state machines' tables, apply functions and names, all
 * generated from the transition lists in sshcore_fsm.h.
 *
 * A machine's table holds one cell per (state, event): the next state and the
 * action for a listed pair, or nothing (a rejection). Applying an event is one
 * lookup: no I/O, no locks, no libssh. A pair listed twice does not compile
 * (the designated initializers would override each other, an error here).
 * The code that applies an event acts on the action it returns
 * (Docs/StateMachines.md says what each means).
 */
#include <stdio.h>

#include "sshcore.h"

#pragma clang diagnostic error "-Winitializer-overrides"

typedef struct fsm_cell {
    uint8_t listed; /* 0: the pair is rejected */
    uint8_t next;
    uint8_t action;
} fsm_cell;

#define CELL(P, s, e, n, a) [P##_##s][P##_EV_##e] = {1, P##_##n, P##_ACT_##a},
#define ROW(P, s, e, n, a)  {P##_##s, P##_EV_##e, P##_##n, P##_ACT_##a},
#define NAME(n, s)          s,
#define NAME3(n, s, c)      s,

#define PHASE_CELL(s, e, n, a) CELL(SSHCORE_PHASE, s, e, n, a)
#define PHASE_ROW(s, e, n, a)  ROW(SSHCORE_PHASE, s, e, n, a)
#define CHAN_CELL(s, e, n, a)  CELL(SSHCORE_CHAN, s, e, n, a)
#define CHAN_ROW(s, e, n, a)   ROW(SSHCORE_CHAN, s, e, n, a)
#define RF_CELL(s, e, n, a)    CELL(SSHCORE_RF, s, e, n, a)
#define RF_ROW(s, e, n, a)     ROW(SSHCORE_RF, s, e, n, a)
#define GSLOT_CELL(s, e, n, a) CELL(SSHCORE_GSLOT, s, e, n, a)
#define GSLOT_ROW(s, e, n, a)  ROW(SSHCORE_GSLOT, s, e, n, a)

static const fsm_cell phase_cells[SSHCORE_PHASE__COUNT]
                                 [SSHCORE_PHASE_EV__COUNT] = {
                                     SSHCORE_PHASE_TRANSITIONS(PHASE_CELL)};
static const fsm_cell chan_cells[SSHCORE_CHAN__COUNT][SSHCORE_CHAN_EV__COUNT] =
    {SSHCORE_CHAN_TRANSITIONS(CHAN_CELL)};
static const fsm_cell rf_cells[SSHCORE_RF__COUNT][SSHCORE_RF_EV__COUNT] = {
    SSHCORE_RF_TRANSITIONS(RF_CELL)};
static const fsm_cell gslot_cells[SSHCORE_GSLOT__COUNT]
                                 [SSHCORE_GSLOT_EV__COUNT] = {
                                     SSHCORE_GSLOT_TRANSITIONS(GSLOT_CELL)};

static const sshcore_fsm_row phase_rows[] = {
    SSHCORE_PHASE_TRANSITIONS(PHASE_ROW)};
static const sshcore_fsm_row chan_rows[] = {SSHCORE_CHAN_TRANSITIONS(CHAN_ROW)};
static const sshcore_fsm_row rf_rows[] = {SSHCORE_RF_TRANSITIONS(RF_ROW)};
static const sshcore_fsm_row gslot_rows[] = {
    SSHCORE_GSLOT_TRANSITIONS(GSLOT_ROW)};

static const char *const conn_state_names[] = {SSHCORE_CONN_STATE_MAP(NAME)};
static const char *const phase_names[] = {SSHCORE_PHASE_MAP(NAME3)};
static const char *const phase_event_names[] = {SSHCORE_PHASE_EVENT_MAP(NAME)};
static const char *const phase_action_names[] = {
    SSHCORE_PHASE_ACTION_MAP(NAME)};
static const char *const chan_names[] = {SSHCORE_CHAN_STATE_MAP(NAME3)};
static const char *const chan_event_names[] = {SSHCORE_CHAN_EVENT_MAP(NAME)};
static const char *const chan_action_names[] = {SSHCORE_CHAN_ACTION_MAP(NAME)};
static const char *const rf_names[] = {SSHCORE_RF_STATE_MAP(NAME)};
static const char *const rf_event_names[] = {SSHCORE_RF_EVENT_MAP(NAME)};
static const char *const rf_action_names[] = {SSHCORE_RF_ACTION_MAP(NAME)};
static const char *const gslot_names[] = {SSHCORE_GSLOT_STATE_MAP(NAME)};
static const char *const gslot_event_names[] = {SSHCORE_GSLOT_EVENT_MAP(NAME)};
static const char *const gslot_action_names[] = {
    SSHCORE_GSLOT_ACTION_MAP(NAME)};

#define COARSE(n, s, c) SSHCORE_CONN_##c,
static const uint8_t phase_coarse[SSHCORE_PHASE__COUNT] = {
    SSHCORE_PHASE_MAP(COARSE)};
#undef COARSE

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

typedef struct machine {
    const char *name;
    const char *noun;      /* in an error's detail */
    const fsm_cell *cells; /* [states][events] */
    const sshcore_fsm_row *rows;
    size_t row_count;
    const char *const *names[3]; /* states, events, actions */
    int counts[3];
} machine;

static const machine machines[SSHCORE_MACHINE__COUNT] = {
    [SSHCORE_MACHINE_CONN] = {"Connection",
                              "connection",
                              &phase_cells[0][0],
                              phase_rows,
                              COUNT(phase_rows),
                              {phase_names,
                               phase_event_names,
                               phase_action_names},
                              {SSHCORE_PHASE__COUNT,
                               SSHCORE_PHASE_EV__COUNT,
                               SSHCORE_PHASE_ACT__COUNT}},
    [SSHCORE_MACHINE_CHAN] = {"Channel",
                              "channel",
                              &chan_cells[0][0],
                              chan_rows,
                              COUNT(chan_rows),
                              {chan_names, chan_event_names, chan_action_names},
                              {SSHCORE_CHAN__COUNT,
                               SSHCORE_CHAN_EV__COUNT,
                               SSHCORE_CHAN_ACT__COUNT}},
    [SSHCORE_MACHINE_RFORWARD] = {"Remote forward",
                                  "remote forward",
                                  &rf_cells[0][0],
                                  rf_rows,
                                  COUNT(rf_rows),
                                  {rf_names, rf_event_names, rf_action_names},
                                  {SSHCORE_RF__COUNT,
                                   SSHCORE_RF_EV__COUNT,
                                   SSHCORE_RF_ACT__COUNT}},
    [SSHCORE_MACHINE_GSLOT] = {"Global-request slot",
                               "global-request slot",
                               &gslot_cells[0][0],
                               gslot_rows,
                               COUNT(gslot_rows),
                               {gslot_names,
                                gslot_event_names,
                                gslot_action_names},
                               {SSHCORE_GSLOT__COUNT,
                                SSHCORE_GSLOT_EV__COUNT,
                                SSHCORE_GSLOT_ACT__COUNT}},
};

/** The one apply: a lookup in the machine's table. */
static inline int
apply(const machine *m, int *state, int event)
{
    const fsm_cell *c = NULL;

    if (*state < 0 || *state >= m->counts[SSHCORE_FSM_STATE] || event < 0 ||
        event >= m->counts[SSHCORE_FSM_EVENT]) {
        return m->counts[SSHCORE_FSM_ACTION] - 1; /* REJECT */
    }
    c = &m->cells[*state * m->counts[SSHCORE_FSM_EVENT] + event];
    if (!c->listed) {
        return m->counts[SSHCORE_FSM_ACTION] - 1;
    }
    *state = c->next;
    return c->action;
}

sshcore_phase_action
sshcore_phase_fsm_apply(sshcore_phase *phase, sshcore_phase_event event)
{
    int s = (int)*phase;
    int a = apply(&machines[SSHCORE_MACHINE_CONN], &s, (int)event);
    *phase = (sshcore_phase)s;
    return (sshcore_phase_action)a;
}

sshcore_chan_action
sshcore_chan_fsm_apply(sshcore_chan_state *state, sshcore_chan_event event)
{
    int s = (int)*state;
    int a = apply(&machines[SSHCORE_MACHINE_CHAN], &s, (int)event);
    *state = (sshcore_chan_state)s;
    return (sshcore_chan_action)a;
}

sshcore_rf_action
sshcore_rf_fsm_apply(sshcore_rf_state *state, sshcore_rf_event event)
{
    int s = (int)*state;
    int a = apply(&machines[SSHCORE_MACHINE_RFORWARD], &s, (int)event);
    *state = (sshcore_rf_state)s;
    return (sshcore_rf_action)a;
}

sshcore_gslot_action
sshcore_gslot_fsm_apply(sshcore_gslot *state, sshcore_gslot_event event)
{
    int s = (int)*state;
    int a = apply(&machines[SSHCORE_MACHINE_GSLOT], &s, (int)event);
    *state = (sshcore_gslot)s;
    return (sshcore_gslot_action)a;
}

sshcore_conn_state
sshcore_conn_state_of(sshcore_phase phase)
{
    if ((int)phase < 0 || phase >= SSHCORE_PHASE__COUNT) {
        return SSHCORE_CONN_FAILED;
    }
    return (sshcore_conn_state)phase_coarse[phase];
}

const char *
sshcore_conn_state_name(int state)
{
    return state >= 0 && (size_t)state < COUNT(conn_state_names)
               ? conn_state_names[state]
               : "?";
}

const char *
sshcore_fsm_machine_name(sshcore_machine machine)
{
    return (int)machine >= 0 && machine < SSHCORE_MACHINE__COUNT
               ? machines[machine].name
               : "?";
}

int
sshcore_fsm_count(sshcore_machine machine, sshcore_fsm_part part)
{
    if ((int)machine < 0 || machine >= SSHCORE_MACHINE__COUNT ||
        (int)part < 0 || part > SSHCORE_FSM_ACTION) {
        return 0;
    }
    return machines[machine].counts[part];
}

const char *
sshcore_fsm_name(sshcore_machine machine, sshcore_fsm_part part, int value)
{
    if (value < 0 || value >= sshcore_fsm_count(machine, part)) {
        return "?";
    }
    return machines[machine].names[part][value];
}

size_t
sshcore_fsm_row_count(sshcore_machine machine)
{
    return (int)machine >= 0 && machine < SSHCORE_MACHINE__COUNT
               ? machines[machine].row_count
               : 0;
}

bool
sshcore_fsm_row_at(sshcore_machine machine, size_t index, sshcore_fsm_row *row)
{
    if (index >= sshcore_fsm_row_count(machine)) {
        return false;
    }
    *row = machines[machine].rows[index];
    return true;
}

void
sshcore_fsm_rejection(sshcore_machine machine,
                      int state,
                      int event,
                      char *buf,
                      size_t cap)
{
    snprintf(buf,
             cap,
             "%s in %s: event %s not allowed (a core bug)",
             (int)machine >= 0 && machine < SSHCORE_MACHINE__COUNT
                 ? machines[machine].noun
                 : "?",
             sshcore_fsm_name(machine, SSHCORE_FSM_STATE, state),
             sshcore_fsm_name(machine, SSHCORE_FSM_EVENT, event));
}

int
sshcore_fsm_apply(sshcore_machine machine, int *state, int event)
{
    if ((int)machine < 0 || machine >= SSHCORE_MACHINE__COUNT) {
        return -1;
    }
    return apply(&machines[machine], state, event);
}
