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

/* STOPPING: TERM again after this long; KILL instead after that long (a
 * process that ignores TERM must not run on); close regardless after that long
 * without a terminal, or after the shorter limit with one (the close hangs it
 * up). The server gives the session slot back only when the process has ended
 * and both sides have closed the channel. */
#define ORPHAN_SIGNAL_INTERVAL_MS 100
#define ORPHAN_KILL_AFTER_MS      5000
#define ORPHAN_STOP_LIMIT_MS      10000
#define ORPHAN_PTY_STOP_LIMIT_MS  2000

static void orphan_watch(struct sshcore_orphan *o);

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
sshcore__conn_adopt_opening_channel(sshcore_conn *conn, ssh_channel ch)
{
    if (orphan_new(conn, ch, SSHCORE_ORPHAN_OPENING) == NULL) {
        ssh_channel_free(ch); /* out of memory: the server keeps the channel */
    }
}

void
sshcore__conn_adopt_starting_channel(sshcore_conn *conn,
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
    /* what the request starts may write before its reply is read */
    orphan_watch(o);
}

/** libssh callback: output of a channel nobody reads any more is dropped, so
 *  the window reopens and the server can send what it owes, up to its end. */
static int
orphan_on_data(ssh_session session,
               ssh_channel channel,
               void *data,
               uint32_t len,
               int is_stderr,
               void *userdata)
{
    (void)session;
    (void)channel;
    (void)data;
    (void)is_stderr;
    (void)userdata;
    return (int)len;
}

static void
orphan_on_exit_status(ssh_session session,
                      ssh_channel channel,
                      int status,
                      void *userdata)
{
    struct sshcore_orphan *o = userdata;
    (void)session;
    (void)channel;
    (void)status;
    o->exited = true;
}

static void
orphan_on_exit_signal(ssh_session session,
                      ssh_channel channel,
                      const char *signal,
                      int core,
                      const char *errmsg,
                      const char *lang,
                      void *userdata)
{
    struct sshcore_orphan *o = userdata;
    (void)session;
    (void)channel;
    (void)signal;
    (void)core;
    (void)errmsg;
    (void)lang;
    o->exited = true;
}

/** Registers the orphan's callbacks on its channel (once). */
static void
orphan_watch(struct sshcore_orphan *o)
{
    if (o->cbs_set) {
        return;
    }
    memset(&o->cbs, 0, sizeof(o->cbs));
    o->cbs.userdata = o;
    o->cbs.channel_data_function = orphan_on_data;
    o->cbs.channel_exit_status_function = orphan_on_exit_status;
    o->cbs.channel_exit_signal_function = orphan_on_exit_signal;
    ssh_callbacks_init(&o->cbs);
    o->cbs_set = ssh_add_channel_callbacks(o->ch, &o->cbs) == SSH_OK;
}

/**
 * Drops what libssh still holds of the channel's output: bytes the operation
 * left unread (its reader was slow) keep the window closed, and then the
 * server can send neither the rest nor its EOF. Reading them reopens it.
 */
static void
orphan_drain(struct sshcore_orphan *o)
{
    char scratch[16384];
    int stream;
    int n;
    int rounds;

    for (stream = 0; stream < 2; stream++) {
        /* bounded: the callback takes what arrives while reading */
        for (rounds = 0; rounds < 256; rounds++) {
            n = ssh_channel_read_nonblocking(o->ch,
                                             scratch,
                                             sizeof(scratch),
                                             stream);
            if (n <= 0) {
                break;
            }
        }
    }
}

/** Sends TERM and moves `o` to STOPPING. */
static void
orphan_stop(struct sshcore_orphan *o)
{
    int64_t now = sshcore__now_ms();

    orphan_watch(o);
    orphan_drain(o);
    (void)ssh_channel_request_send_signal(o->ch, "TERM");
    o->stage = SSHCORE_ORPHAN_STOPPING;
    o->wake_ms = now + ORPHAN_SIGNAL_INTERVAL_MS;
    o->kill_ms = now + ORPHAN_KILL_AFTER_MS;
    o->give_up_ms =
        now + (o->pty ? ORPHAN_PTY_STOP_LIMIT_MS : ORPHAN_STOP_LIMIT_MS);
}

void
sshcore__conn_adopt_stopping_channel(sshcore_conn *conn,
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
sshcore__conn_orphans_due_ms(const sshcore_conn *conn)
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
        now = sshcore__now_ms();
        if (o->exited || ssh_channel_is_closed(o->ch) ||
            ssh_channel_is_eof(o->ch) || now >= o->give_up_ms) {
            /* ended: close now, without waiting for output still owed */
            return true;
        }
        orphan_drain(o);
        if (now >= o->wake_ms) {
            (void)ssh_channel_request_send_signal(
                o->ch,
                now >= o->kill_ms && !o->pty ? "KILL" : "TERM");
            o->wake_ms = now + ORPHAN_SIGNAL_INTERVAL_MS;
        }
        return false;
    }
    return true;
}

/** Worker: finish the pending exchange of each orphaned channel, then close it.
 */
void
sshcore__orphans_reap(sshcore_conn *conn)
{
    struct sshcore_orphan **link = &conn->orphans;
    struct sshcore_orphan *o = NULL;

    while ((o = *link) != NULL) {
        if (!orphan_step(o)) {
            link = &o->next;
            continue;
        }
        if (o->cbs_set) {
            /* libssh keeps the channel until the server's CLOSE: no callback
             * of ours may run after `o` is freed */
            ssh_remove_channel_callbacks(o->ch, &o->cbs);
        }
        if (o->stage != SSHCORE_ORPHAN_OPENING &&
            !ssh_channel_is_closed(o->ch)) {
            (void)ssh_channel_send_eof(o->ch);
        }
        ssh_channel_free(o->ch); /* open: sends CLOSE; refused: just frees */
        conn->channel_closed_ms = sshcore__now_ms();
        *link = o->next;
        free(o->start);
        free(o);
    }
}

void
sshcore__orphans_free(sshcore_conn *conn)
{
    struct sshcore_orphan *o = conn->orphans;
    struct sshcore_orphan *next = NULL;

    while (o != NULL) {
        next = o->next;
        if (o->cbs_set) {
            ssh_remove_channel_callbacks(o->ch, &o->cbs);
        }
        ssh_channel_free(o->ch);
        free(o->start);
        free(o);
        o = next;
    }
    conn->orphans = NULL;
}
