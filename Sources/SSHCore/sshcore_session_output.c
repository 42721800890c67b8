/*
 * sshcore_session_output.c - a channel's output as every kind takes it (held
 * in libssh in arrival order while its consumer has no room, and read out in
 * that order once it has), and the streamed kind: output handed to the caller
 * in batches while the bytes it has not consumed stay under its buffer limit;
 * above it the data stays in libssh (so the window closes and the server
 * waits).
 */
#include <stdio.h>

#include "sshcore_session.h"

/* Output in a packet shorter than this is interactive (an echo, a reply), not a
 * bulk stream's (whose packets are the server's maximum, 32 KiB for OpenSSH).
 */
#define SHORT_PACKET 2048

/** Room left under the streamed buffer limit. */
size_t
sshcore__session_room(session_op *x)
{
    size_t used = atomic_load(&x->out.streamed.unconsumed);
    return used >= x->out.limit ? 0 : x->out.limit - used;
}

/** Output that arrived but waits for sshcore__session_room: in libssh or in the
 * stash. */
bool
sshcore__session_output_pending(const session_op *x)
{
    return x->out.held_count > 0 || x->out.stash_off < x->out.stash.len;
}

/** Hands the batched output to the caller (worker). */
static void
streamed_flush(session_op *x)
{
    if (x->cb.flush != NULL) {
        /* the caller gathered the packets: tell it the pass is over */
        if (x->out.streamed.unflushed && atomic_load(&x->base.done) == 0) {
            x->cb.flush(x->cb.ctx);
        }
        x->out.streamed.unflushed = false;
        return;
    }
    if (x->out.streamed.batch.len == 0) {
        return;
    }
    if (atomic_load(&x->base.done) == 0) {
        x->cb.data(x->cb.ctx,
                   x->out.streamed.batch_stream,
                   x->out.streamed.batch.data,
                   x->out.streamed.batch.len);
    }
    x->out.streamed.batch.len = 0;
}

/**
 * Hands `n` bytes to the caller, in the pass's batch or at once.
 * Returns false when the op ended because of it (memory).
 */
static bool
streamed_deliver(session_op *x, int stream, const uint8_t *p, size_t n)
{
    if (n == 0) {
        return true;
    }
    /* counted at once: batched bytes are in memory as much as delivered ones */
    atomic_fetch_add(&x->out.streamed.unconsumed, n);
    if (n < SHORT_PACKET) {
        /* an echo or a reply: the pass ends and it is handed over now, whether
         * the caller gathers packets (flush) or the core batches them */
        x->base.conn->end_pass = true;
    }
    if (x->cb.flush != NULL) {
        /* straight from libssh's buffer: the caller copies it once */
        x->cb.data(x->cb.ctx, stream, p, n);
        x->out.streamed.unflushed = true;
        return true;
    }
    if (x->out.streamed.batch.len > 0 &&
        (x->out.streamed.batch_stream != stream ||
         x->out.streamed.batch.len + n > BATCH_MAX)) {
        streamed_flush(x);
    }
    if (x->out.streamed.batch.len == 0 && n >= BATCH_MAX) {
        x->cb.data(x->cb.ctx, stream, p, n); /* big enough alone: no copy */
        return true;
    }
    if (sshcore__bytes_append(&x->out.streamed.batch, p, n) != 0) {
        sshcore__session_complete_code(x, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return false;
    }
    x->out.streamed.batch_stream = stream;
    return true;
}

/** Remembers that `n` new bytes of `stream` stay in libssh's buffer. */
void
sshcore__session_hold(session_op *x, int stream, size_t n)
{
    size_t tail = 0;

    if (n == 0) {
        return;
    }
    x->out.held[stream] += n;
    if (x->out.held_count > 0) {
        tail = (x->out.held_head + x->out.held_count - 1) % HELD_MAX;
        if (x->out.held_fifo[tail].stream == stream) {
            x->out.held_fifo[tail].len += n;
            return;
        }
    }
    if (x->out.held_count == HELD_MAX) {
        /* pathological interleaving: keep the bytes, lose exact order */
        for (size_t i = x->out.held_count; i > 0; i--) {
            size_t k = (x->out.held_head + i - 1) % HELD_MAX;
            if (x->out.held_fifo[k].stream == stream) {
                x->out.held_fifo[k].len += n;
                return;
            }
        }
        return;
    }
    tail = (x->out.held_head + x->out.held_count) % HELD_MAX;
    x->out.held_fifo[tail].stream = stream;
    x->out.held_fifo[tail].len = n;
    x->out.held_count++;
}

/**
 * libssh calls this for every data packet, with everything it holds for the
 * stream (older held bytes first). Returns how many bytes we took.
 */
int
sshcore__session_on_data(ssh_session session,
                         ssh_channel channel,
                         void *data,
                         uint32_t len,
                         int is_stderr,
                         void *userdata)
{
    session_op *x = userdata;
    int stream = is_stderr ? 1 : 0;
    size_t fresh = 0;
    (void)session;
    (void)channel;

    if (atomic_load(&x->base.done) != 0) {
        return (int)len; /* nobody wants it any more */
    }
    fresh = len >= x->out.held[stream] ? len - x->out.held[stream] : 0;
    if (sshcore__session_output_pending(x)) {
        /* older output is held: the new bytes queue behind it */
        sshcore__session_hold(x, stream, fresh);
        return 0;
    }
    return x->kind->on_data(x, stream, data, len, fresh);
}

size_t
sshcore__session_streamed_room(session_op *x)
{
    size_t room = 0;

    /* marked before the look, as in streamed_on_data */
    atomic_store(&x->out.streamed.starved, 1);
    room = sshcore__session_room(x);
    if (room > 0) {
        atomic_store(&x->out.streamed.starved, 0);
    }
    return room;
}

size_t
sshcore__session_take_within(session_op *x,
                             int stream,
                             const uint8_t *data,
                             uint32_t len,
                             size_t room)
{
    size_t take = room < len ? room : len;

    (void)x->kind->deliver(x, stream, data, take);
    /* libssh keeps what we did not take; with nothing held before, that is
     * the tail of this packet */
    x->out.held[stream] = 0;
    sshcore__session_hold(x, stream, len - take);
    return take;
}

static int
streamed_on_data(session_op *x,
                 int stream,
                 const uint8_t *data,
                 uint32_t len,
                 size_t fresh)
{
    size_t room = 0;
    (void)fresh;

    /* Mark starvation before looking at the room: a consumer that frees room
     * after this store sees the mark and wakes the worker (see
     * sshcore_stream_consumed). It stays marked while anything is held. */
    atomic_store(&x->out.streamed.starved, 1);
    room = sshcore__session_room(x);
    if (room >= len) {
        atomic_store(&x->out.streamed.starved, 0);
    }
    return (int)sshcore__session_take_within(x, stream, data, len, room);
}

/**
 * Held output, oldest first, as far as the consumer has sshcore__session_room.
 *
 * Every ssh_channel_read() in libssh 0.10 re-opens the channel window to
 * 1.28 MB when it has fallen below half, however much libssh still buffers.
 * Reading held output out in consumer-sized pieces therefore re-opened the
 * window after each piece, and a slow consumer let libssh's buffer grow
 * without bound (measured: 256 MiB, libssh's buffer limit, after which it
 * dropped data). So a held segment is moved out whole, in one read, into the
 * stash, and the next read waits until the stash has been handed over: one
 * window re-opening per segment, and at most about two windows in memory.
 */
bool
sshcore__session_read_held(sshcore_conn *conn, session_op *x, bool *again)
{
    while (atomic_load(&x->base.done) == 0) {
        if (x->out.stash_off < x->out.stash.len) {
            size_t want = x->out.stash.len - x->out.stash_off;
            size_t room = x->kind->room(x);
            if (room == 0) {
                return true;
            }
            if (want > room) {
                want = room;
            }
            if (!x->kind->deliver(x,
                                  x->out.stash_stream,
                                  x->out.stash.data + x->out.stash_off,
                                  want)) {
                return false;
            }
            x->out.stash_off += want;
            if (x->out.stash_off == x->out.stash.len) {
                x->out.stash.len = 0;
                x->out.stash_off = 0;
            }
            *again = true; /* one piece per turn and channel, for fairness */
            return true;
        }
        if (x->out.held_count == 0) {
            return true;
        }
        held_seg *seg = &x->out.held_fifo[x->out.held_head];
        size_t want = seg->len > UINT32_MAX ? UINT32_MAX : seg->len;
        int n = 0;

        if (sshcore__bytes_reserve(&x->out.stash, want) != 0) {
            sshcore__session_complete_code(x, SSHCORE_E_OUT_OF_MEMORY, NULL);
            return false;
        }
        n = ssh_channel_read_nonblocking(x->chan.ch,
                                         x->out.stash.data,
                                         (uint32_t)want,
                                         seg->stream);
        if (n == SSH_ERROR) {
            sshcore__session_fail_call(conn,
                                       x,
                                       SSHCORE_E_PROTOCOL,
                                       "ssh_channel_read_nonblocking");
            return false;
        }
        if (n <= 0) {
            /* libssh holds less than we counted: forget the difference */
            x->out.held[seg->stream] = 0;
            x->out.held_head = (x->out.held_head + 1) % HELD_MAX;
            x->out.held_count--;
            continue;
        }
        x->out.stash.len = (size_t)n;
        x->out.stash_off = 0;
        x->out.stash_stream = seg->stream;
        seg->len -= (size_t)n;
        x->out.held[seg->stream] -= (size_t)n < x->out.held[seg->stream]
                                        ? (size_t)n
                                        : x->out.held[seg->stream];
        if (seg->len == 0) {
            x->out.held_head = (x->out.held_head + 1) % HELD_MAX;
            x->out.held_count--;
        }
    }
    return true;
}

int
sshcore_stream_consumed(sshcore_op *op, size_t n)
{
    session_op *x = NULL;
    size_t before = 0;

    if (!sshcore__op_is(op,
                        SSHCORE_OP_STREAM,
                        "sshcore_stream_consumed",
                        NULL)) {
        return SSHCORE_E_INVALID_ARGUMENT;
    }
    x = (session_op *)op;
    before = atomic_load(&x->out.streamed.unconsumed);

    while (!atomic_compare_exchange_weak(&x->out.streamed.unconsumed,
                                         &before,
                                         before >= n ? before - n : 0)) {
    }
    if (atomic_exchange(&x->out.streamed.starved, 0) != 0) {
        sshcore__conn_wake(op->conn);
    }
    return SSHCORE_E_OK;
}

/* ---------------------------------------------------------------------- */
/* The streamed kind, and the hooks a kind without that part shares        */
/* ---------------------------------------------------------------------- */

static void
streamed_report_open(session_op *x, int env_fallback_used)
{
    x->cb.started(x->cb.ctx, env_fallback_used);
}

/** No more output comes: told once, after every byte before it. */
static void
streamed_report_eof(session_op *x)
{
    if (x->cb.eof != NULL && atomic_load(&x->base.done) == 0) {
        streamed_flush(x);
        x->cb.eof(x->cb.ctx);
    }
}

static void
streamed_release(session_op *x)
{
    sshcore__session_release_to(x, x->cb.released, x->cb.ctx);
}

void
sshcore__session_no_op(session_op *x)
{
    (void)x;
}

bool
sshcore__session_no_pass(sshcore_conn *conn, session_op *x, bool *again)
{
    (void)conn;
    (void)x;
    (void)again;
    return true;
}

bool
sshcore__session_nothing_waits(const session_op *x)
{
    (void)x;
    return false;
}

void
sshcore__session_nothing_ended(sshcore_conn *conn, session_op *x)
{
    (void)conn;
    (void)x;
}

const session_kind sshcore__streamed_kind = {
    .op =
        {
            .step = sshcore__session_step,
            .abort = sshcore__session_abort,
            .destroy = sshcore__session_destroy,
        },
    .public_kind = SSHCORE_OP_STREAM,
    .unsent_input_code = SSHCORE_E_CHANNEL_CLOSED,
    .on_data = streamed_on_data,
    .deliver = streamed_deliver,
    .room = sshcore__session_streamed_room,
    .flush = streamed_flush,
    .pass_in = sshcore__session_no_pass,
    .pass_out = sshcore__session_no_pass,
    .output_waits = sshcore__session_nothing_waits,
    .report_open = streamed_report_open,
    .report_eof = streamed_report_eof,
    .release = streamed_release,
    .ended = sshcore__session_nothing_ended,
    .destroy = sshcore__session_no_op,
};
