/*
 * sshcore_session_new.c - where every channel op is made: a session channel
 * for a command, shell or subsystem, a direct channel, a remote forward's
 * connection or an agent channel; a bridge's socket given to its op; and an
 * op queued on its connection. An op gets its kind (what its bytes are for)
 * and its origin (where its channel comes from) here, once.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sshcore_session.h"

/** A zeroed op of `kind` whose channel the op opens. */
static session_op *_Nullable op_alloc(const session_kind *kind)
{
    session_op *x = calloc(1, sizeof(*x));

    if (x == NULL) {
        return NULL;
    }
    pthread_mutex_init(&x->in.mu, NULL);
    atomic_init(&x->out.streamed.unconsumed, 0);
    atomic_init(&x->out.streamed.starved, 0);
    x->in.next_id = 1;
    x->chan.state = SSHCORE_CHAN_OPENING;
    x->kind = kind;
    x->origin = &sshcore__opened_origin;
    return x;
}

session_op *_Nullable sshcore__session_new(const session_kind *kind,
                                           const char *_Nullable command,
                                           const char *_Nullable fallback,
                                           const sshcore_env_var *_Nullable env,
                                           size_t env_count)
{
    session_op *x = op_alloc(kind);
    bool ok = true;
    size_t i;

    if (x == NULL) {
        return NULL;
    }
    if (command != NULL) {
        x->req.command = strdup(command);
        ok = x->req.command != NULL;
    }
    if (fallback != NULL) {
        x->req.fallback = strdup(fallback);
        ok = ok && x->req.fallback != NULL;
    }
    if (ok && env_count > 0) {
        x->req.env_names = calloc(env_count, sizeof(char *));
        x->req.env_values = calloc(env_count, sizeof(char *));
        ok = x->req.env_names != NULL && x->req.env_values != NULL;
        if (ok) {
            x->req.env_count = env_count;
            for (i = 0; ok && i < env_count; i++) {
                x->req.env_names[i] = strdup(env[i].name);
                x->req.env_values[i] = strdup(env[i].value);
                ok =
                    x->req.env_names[i] != NULL && x->req.env_values[i] != NULL;
            }
        }
    }
    if (!ok) {
        sshcore__session_destroy(&x->base);
        return NULL;
    }
    return x;
}

session_op *
sshcore__session_from_spec(const session_kind *kind,
                           const sshcore_stream_spec *spec,
                           sshcore_error *err)
{
    session_op *x = NULL;

    if (spec->kind != SSHCORE_CHANNEL_SESSION ||
        (spec->env_count > 0 && spec->env == NULL) || spec->buffer_limit == 0 ||
        spec->timeout_ms < 0 ||
        (spec->pty != NULL &&
         (spec->pty->term == NULL || spec->pty->cols == 0 ||
          spec->pty->rows == 0 || strlen(spec->pty->term) >= 64))) {
        sshcore__error_set(err,
                           SSHCORE_E_INVALID_ARGUMENT,
                           "incomplete stream spec");
        return NULL;
    }
    x = sshcore__session_new(kind,
                             spec->command,
                             spec->fallback_command,
                             spec->env,
                             spec->env_count);
    if (x == NULL) {
        sshcore__error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return NULL;
    }
    x->req.env_optional = spec->env_optional != 0;
    x->req.subsystem = spec->subsystem != 0 && spec->command != NULL;
    x->out.limit = spec->buffer_limit;
    if (spec->pty != NULL) {
        x->req.want_pty = true;
        snprintf(x->req.term, sizeof(x->req.term), "%s", spec->pty->term);
        x->req.cols = spec->pty->cols;
        x->req.rows = spec->pty->rows;
    }
    return x;
}

session_op *_Nullable sshcore__session_direct_new(
    const session_kind *kind,
    const sshcore_stream_spec *spec,
    sshcore_error *err)
{
    session_op *x = NULL;
    bool tcp = spec->kind == SSHCORE_CHANNEL_DIRECT_TCPIP;

    if ((spec->kind != SSHCORE_CHANNEL_DIRECT_TCPIP &&
         spec->kind != SSHCORE_CHANNEL_DIRECT_STREAMLOCAL) ||
        spec->target_host == NULL || spec->target_host[0] == '\0' ||
        (tcp && (spec->target_port < 1 || spec->target_port > 65535)) ||
        spec->originator_port < 0 || spec->originator_port > 65535 ||
        spec->buffer_limit == 0 || spec->timeout_ms < 0) {
        sshcore__error_set(err,
                           SSHCORE_E_INVALID_ARGUMENT,
                           "incomplete direct channel spec");
        return NULL;
    }
    x = op_alloc(kind);
    if (x == NULL) {
        sshcore__error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return NULL;
    }
    x->req.kind = spec->kind;
    x->req.target = strdup(spec->target_host);
    x->req.target_port = spec->target_port;
    x->req.originator = strdup(
        spec->originator_host != NULL ? spec->originator_host : "127.0.0.1");
    x->req.originator_port = spec->originator_port;
    if (x->req.target == NULL || x->req.originator == NULL) {
        sshcore__session_destroy(&x->base); /* frees x */
        sshcore__error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return NULL;
    }
    x->out.limit = spec->buffer_limit;
    return x;
}

/** An op handed an open channel: a byte stream with no requests and no exit
 *  status, buffered up to `buffer_limit`. */
static session_op *_Nullable adopted_alloc(const session_kind *kind,
                                           const session_origin *origin,
                                           size_t buffer_limit)
{
    session_op *x = op_alloc(kind);

    if (x == NULL) {
        return NULL;
    }
    x->req.kind = SSHCORE_CHANNEL_DIRECT_TCPIP;
    x->origin = origin;
    x->out.limit = buffer_limit;
    return x;
}

session_op *_Nullable sshcore__session_adopted_new(const session_kind *kind,
                                                   sshcore_op *forward,
                                                   uint64_t id,
                                                   size_t buffer_limit,
                                                   sshcore_error *err)
{
    session_op *x = NULL;

    if (buffer_limit == 0) {
        sshcore__error_set(err,
                           SSHCORE_E_INVALID_ARGUMENT,
                           "buffer limit must be positive");
        return NULL;
    }
    x = adopted_alloc(kind, &sshcore__forwarded_origin, buffer_limit);
    if (x == NULL) {
        sshcore__error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return NULL;
    }
    sshcore__op_retain(forward);
    x->adopt.parent = forward;
    x->adopt.id = id;
    return x;
}

session_op *_Nullable sshcore__session_agent_new(
    ssh_channel ch,
    int fd,
    const sshcore_bridge_callbacks *callbacks)
{
    session_op *x = adopted_alloc(&sshcore__bridged_kind,
                                  &sshcore__agent_origin,
                                  256 << 10);

    if (x == NULL) {
        return NULL;
    }
    if (!sshcore__session_bridge_take(x, fd, callbacks)) {
        sshcore__session_destroy(&x->base); /* the fd is still the caller's */
        return NULL;
    }
    x->adopt.preset_ch = ch;
    return x;
}

bool
sshcore__session_bridge_take(session_op *x,
                             int fd,
                             const sshcore_bridge_callbacks *callbacks)
{
    int flags = fcntl(fd, F_GETFL);

    x->bridge = calloc(1, sizeof(*x->bridge));
    if (x->bridge == NULL) {
        return false;
    }
    if (flags >= 0) {
        (void)fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    }
    x->bridge->fd = fd;
    x->bridge->is_socket = true;
    x->bridge->detach_byte = -1;
    x->bridge->fd_readable = true; /* try once; EAGAIN hands over to poll() */
    x->bridge->fd_writable = true;
    x->bridge->cb = *callbacks;
    atomic_init(&x->bridge->end, SSHCORE_BRIDGE_END_CHANNEL);
    atomic_init(&x->bridge->to_fd, 0);
    atomic_init(&x->bridge->from_fd, 0);
    return true;
}

sshcore_op *_Nullable sshcore__session_bridge_refuse(session_op *_Nullable x,
                                                     int fd)
{
    bool held = x != NULL && x->bridge != NULL && x->bridge->fd == fd;

    if (x != NULL) {
        x->chan.released = true; /* the caller learns it from NULL: no
                                    callback */
        sshcore__session_destroy(&x->base); /* frees x */
    }
    if (!held && fd >= 0) {
        close(fd);
    }
    return NULL;
}

sshcore_op *_Nullable sshcore__session_submit(sshcore_conn *conn,
                                              session_op *x,
                                              sshcore_op_done_fn done,
                                              void *_Nullable ctx,
                                              int timeout_ms,
                                              sshcore_error *err)
{
    sshcore__op_init(&x->base,
                     &x->kind->op,
                     x->kind->public_kind,
                     conn,
                     done,
                     ctx);
    if (timeout_ms > 0) {
        x->base.deadline_ms = sshcore__now_ms() + timeout_ms;
    }
    if (sshcore__conn_submit(conn, &x->base, err) != 0) {
        sshcore_conn *c = x->base.conn;
        x->chan.released =
            true; /* the caller learns it from NULL: no callback */
        sshcore__session_destroy(&x->base);
        sshcore__conn_unref(c);
        return NULL;
    }
    return &x->base;
}
