/*
 * sshcore_orphan.c - channels whose operation ended while the server still had
 * work on them (an open or a start request pending, a cancelled process to
 * stop): the worker finishes that exchange, then closes the channel.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sshcore_internal.h"

/* STOPPING: TERM again after this long, close regardless after that long
 * (without a terminal, where only TERM stops the process; with one, where the
 * close hangs it up) */
#define ORPHAN_SIGNAL_INTERVAL_MS 100
#define ORPHAN_STOP_LIMIT_MS      10000
#define ORPHAN_PTY_STOP_LIMIT_MS  2000

static struct sshcore_orphan *_Nullable orphan_new(
    sshcore_conn *conn,
    ssh_channel ch,
    enum sshcore_orphan_stage stage)
{
    struct sshcore_orphan *o = calloc(1, sizeof(*o));

    if (o == NULL) {
        return NULL;
    }
    o->ch = ch;
    o->stage = stage;
    o->next = conn->orphans;
    conn->orphans = o;
    return o;
}

void
sshcore_conn_adopt_opening_channel(sshcore_conn *conn, ssh_channel ch)
{
    if (orphan_new(conn, ch, SSHCORE_ORPHAN_OPENING) == NULL) {
        ssh_channel_free(ch); /* out of memory: the server keeps the channel */
    }
}

void
sshcore_conn_adopt_starting_channel(sshcore_conn *conn,
                                    ssh_channel ch,
                                    const char *command,
                                    bool exec,
                                    bool signal,
                                    bool pty)
{
    char *start = strdup(exec && command != NULL ? command : "shell");
    struct sshcore_orphan *o =
        start != NULL ? orphan_new(conn, ch, SSHCORE_ORPHAN_STARTING) : NULL;

    if (o == NULL) {
        /* out of memory: close now; what the request started may run on */
        free(start);
        (void)ssh_channel_send_eof(ch);
        ssh_channel_free(ch);
        return;
    }
    o->start = start;
    o->exec = exec;
    o->signal = signal;
    o->pty = pty;
}

/** Sends TERM and moves `o` to STOPPING. */
static void
orphan_stop(struct sshcore_orphan *o)
{
    int64_t now = sshcore_now_ms();

    (void)ssh_channel_request_send_signal(o->ch, "TERM");
    o->stage = SSHCORE_ORPHAN_STOPPING;
    o->wake_ms = now + ORPHAN_SIGNAL_INTERVAL_MS;
    o->give_up_ms =
        now + (o->pty ? ORPHAN_PTY_STOP_LIMIT_MS : ORPHAN_STOP_LIMIT_MS);
}

void
sshcore_conn_adopt_stopping_channel(sshcore_conn *conn,
                                    ssh_channel ch,
                                    bool pty)
{
    struct sshcore_orphan *o = orphan_new(conn, ch, SSHCORE_ORPHAN_STOPPING);

    if (o == NULL) {
        (void)ssh_channel_request_send_signal(ch, "TERM");
        (void)ssh_channel_send_eof(ch);
        ssh_channel_free(ch);
        return;
    }
    o->pty = pty;
    orphan_stop(o);
}

int64_t
sshcore_conn_orphans_due_ms(const sshcore_conn *conn)
{
    const struct sshcore_orphan *o = NULL;
    int64_t due = -1;

    for (o = conn->orphans; o != NULL; o = o->next) {
        if (o->stage == SSHCORE_ORPHAN_STOPPING &&
            (due < 0 || o->wake_ms < due)) {
            due = o->wake_ms;
        }
    }
    return due;
}

/** Worker: whether orphan `o` is done with (then its channel is closed). */
static bool
orphan_step(struct sshcore_orphan *o)
{
    int rc = SSH_OK;
    int64_t now = 0;

    switch (o->stage) {
    case SSHCORE_ORPHAN_OPENING:
        return ssh_channel_open_session(o->ch) != SSH_AGAIN;
    case SSHCORE_ORPHAN_STARTING:
        /* the request went out already: libssh only waits for its reply */
        rc = o->exec ? ssh_channel_request_exec(o->ch, o->start)
                     : ssh_channel_request_shell(o->ch);
        if (rc == SSH_AGAIN) {
            return false;
        }
        if (rc != SSH_OK || !o->signal || ssh_channel_is_closed(o->ch)) {
            return true;
        }
        /* it started: a cancelled command must not run on (sshd lets a
         * process without a terminal outlive its channel) */
        orphan_stop(o);
        return false;
    case SSHCORE_ORPHAN_STOPPING:
        now = sshcore_now_ms();
        if (ssh_channel_is_closed(o->ch) || ssh_channel_is_eof(o->ch) ||
            now >= o->give_up_ms) {
            return true;
        }
        if (now >= o->wake_ms) {
            (void)ssh_channel_request_send_signal(o->ch, "TERM");
            o->wake_ms = now + ORPHAN_SIGNAL_INTERVAL_MS;
        }
        return false;
    }
    return true;
}

/** Worker: finish the pending exchange of each orphaned channel, then close it.
 */
void
sshcore_orphans_reap(sshcore_conn *conn)
{
    struct sshcore_orphan **link = &conn->orphans;
    struct sshcore_orphan *o = NULL;

    while ((o = *link) != NULL) {
        if (!orphan_step(o)) {
            link = &o->next;
            continue;
        }
        if (o->stage != SSHCORE_ORPHAN_OPENING &&
            !ssh_channel_is_closed(o->ch)) {
            (void)ssh_channel_send_eof(o->ch);
        }
        ssh_channel_free(o->ch); /* open: sends CLOSE; refused: just frees */
        *link = o->next;
        free(o->start);
        free(o);
    }
}

void
sshcore_orphans_free(sshcore_conn *conn)
{
    struct sshcore_orphan *o = conn->orphans;
    struct sshcore_orphan *next = NULL;

    while (o != NULL) {
        next = o->next;
        ssh_channel_free(o->ch);
        free(o->start);
        free(o);
        o = next;
    }
    conn->orphans = NULL;
}
