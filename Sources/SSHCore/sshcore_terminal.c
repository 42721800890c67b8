/*
 * sshcore_terminal.c - a terminal joined to a command's PTY channel inside the
 * worker (attaching to a remote program): keystrokes from the fd go to the
 * channel and the program's screen comes back to it with no hand-over to the
 * caller, as ssh(1) carries its own terminal; a detach byte ends the join.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sshcore_session.h"

sshcore_op *
sshcore_bridge_terminal_start(sshcore_conn *conn,
                              const sshcore_stream_spec *spec,
                              int fd,
                              int detach_byte,
                              const sshcore_bridge_callbacks *callbacks,
                              sshcore_op_done_fn done,
                              void *ctx,
                              sshcore_error *err)
{
    session_op *x = NULL;
    struct stat st;
    bool socket = fd >= 0 && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);

    if (fd < 0 || fcntl(fd, F_GETFL) < 0 || (!socket && isatty(fd) != 1)) {
        sshcore__error_set(err,
                           SSHCORE_E_INVALID_ARGUMENT,
                           "a terminal bridge takes a stream socket or a "
                           "terminal");
        return sshcore__session_bridge_refuse(NULL, fd);
    }
    if (callbacks->opened == NULL || callbacks->failed == NULL ||
        callbacks->released == NULL || detach_byte < -1 || detach_byte > 255 ||
        spec->kind != SSHCORE_CHANNEL_SESSION || spec->pty == NULL ||
        spec->subsystem != 0) {
        sshcore__error_set(err,
                           SSHCORE_E_INVALID_ARGUMENT,
                           "a terminal bridge takes a session with a PTY, "
                           "its callbacks and a detach byte of -1 to 255");
        return sshcore__session_bridge_refuse(NULL, fd);
    }
    x = sshcore__session_from_spec(&sshcore__bridged_kind, spec, err);
    if (x == NULL) {
        return sshcore__session_bridge_refuse(NULL, fd);
    }
    if (!sshcore__session_bridge_take(x, fd, callbacks)) {
        sshcore__error_set(err, SSHCORE_E_OUT_OF_MEMORY, NULL);
        return sshcore__session_bridge_refuse(x, fd);
    }
    x->bridge->is_socket = socket;
    x->bridge->detach_byte = detach_byte;
    return sshcore__session_submit(conn, x, done, ctx, spec->timeout_ms, err);
}

sshcore_bridge_end
sshcore_bridge_end_of(sshcore_op *op)
{
    session_op *x = (session_op *)op;

    if (op->kind != SSHCORE_OP_BRIDGE) {
        return SSHCORE_BRIDGE_END_CHANNEL;
    }
    return (sshcore_bridge_end)atomic_load(&x->bridge->end);
}
