/*
 * state-tables.c - writes the transition tables of Docs/StateMachines.md from
 * the core's transition lists (Sources/SSHCore/include/sshcore_fsm.h).
 *
 * Reads the doc on stdin and writes it to stdout with the table under each
 * machine's section ("## Connection", ...) replaced by the generated one.
 * Built and run by scripts/state-tables.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sshcore.h"

static sshcore_machine
section_machine(const char *line)
{
    for (int m = 0; m < SSHCORE_MACHINE__COUNT; m++) {
        const char *name = sshcore_fsm_machine_name((sshcore_machine)m);
        size_t n = strlen(name);
        if (strncmp(line, "## ", 3) == 0 && strncmp(line + 3, name, n) == 0 &&
            (line[3 + n] == '\n' || line[3 + n] == '\0')) {
            return (sshcore_machine)m;
        }
    }
    return SSHCORE_MACHINE__COUNT;
}

static void
print_table(sshcore_machine m)
{
    sshcore_fsm_row r;

    printf("| state | event | next state | action |\n|---|---|---|---|\n");
    for (size_t i = 0; sshcore_fsm_row_at(m, i, &r); i++) {
        printf("| %s | %s | %s | %s |\n",
               sshcore_fsm_name(m, SSHCORE_FSM_STATE, r.state),
               sshcore_fsm_name(m, SSHCORE_FSM_EVENT, r.event),
               sshcore_fsm_name(m, SSHCORE_FSM_STATE, r.next),
               sshcore_fsm_name(m, SSHCORE_FSM_ACTION, r.action));
    }
}

int
main(void)
{
    char line[4096];
    sshcore_machine pending = SSHCORE_MACHINE__COUNT; /* its table comes next */
    int written = 0;

    while (fgets(line, sizeof(line), stdin) != NULL) {
        if (pending != SSHCORE_MACHINE__COUNT && line[0] == '|') {
            print_table(pending);
            written++;
            pending = SSHCORE_MACHINE__COUNT;
            while (line[0] == '|' && fgets(line, sizeof(line), stdin) != NULL) {
            }
            if (line[0] == '|') {
                return 0; /* the doc ended with the table */
            }
        }
        if (strncmp(line, "## ", 3) == 0) {
            pending = section_machine(line);
        }
        fputs(line, stdout);
    }
    if (written != SSHCORE_MACHINE__COUNT) {
        fprintf(stderr,
                "state-tables: %d of %d machines have a section with a table\n",
                written,
                SSHCORE_MACHINE__COUNT);
        return 1;
    }
    return 0;
}
