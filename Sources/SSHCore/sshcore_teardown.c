/*
 * sshcore_teardown.c - the end of a connection on its worker: libssh's session
 * freed, every fd the connection owns closed once (libssh's dup of the socket
 * only while that number is still ours).
 */

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <unistd.h>
#include <sys/stat.h>

#include "sshcore_internal.h"

/**
 * Whether lib_fd still names our socket. libssh closes its fd on its error
 * paths, one of them inside ssh_disconnect itself (the goodbye's write fails
 * on a socket already shut down or reset), and another thread of the process
 * may be given that number again at once: so what lib_fd names is compared
 * with the original socket. The worker is the only thread that closes either,
 * so an fd that is still the same socket stays ours until closed here.
 */
static bool
lib_fd_is_ours(const sshcore_conn *conn)
{
    struct stat lib;
    struct stat orig;

    if (conn->lib_fd < 0 || conn->sock_fd < 0) {
        return false;
    }
    if (fstat(conn->lib_fd, &lib) != 0 || fstat(conn->sock_fd, &orig) != 0) {
        return false;
    }
    return lib.st_dev == orig.st_dev && lib.st_ino == orig.st_ino;
}

static _Atomic(void (*)(int)) teardown_probe;

void
sshcore_testing_set_teardown_probe(void (*probe)(int lib_fd))
{
    atomic_store(&teardown_probe, probe);
}

void
sshcore__conn_teardown(sshcore_conn *conn)
{
    void (*probe)(int) = NULL;

    if (conn->event != NULL) {
        if (conn->session != NULL) {
            ssh_event_remove_session(conn->event, conn->session);
        }
        ssh_event_free(conn->event);
        conn->event = NULL;
    }
    sshcore__conn_setup_free(conn); /* while the session still exists */
    sshcore__orphans_free(
        conn); /* before ssh_disconnect, which frees every channel */
    if (conn->session != NULL) {
        if (conn->ssh_connect_called &&
            ssh_get_fd(conn->session) != SSH_INVALID_SOCKET) {
            /* with SSH_OPTIONS_FD a sent goodbye leaves the fd open; a
             * failed one closes it */
            ssh_disconnect(conn->session);
        }
        ssh_free(conn->session);
        conn->session = NULL;
    }
    probe = atomic_load(&teardown_probe);
    if (probe != NULL && conn->lib_fd >= 0) {
        probe(conn->lib_fd);
    }
    if (lib_fd_is_ours(conn)) {
        close(conn->lib_fd);
    }
    conn->lib_fd = -1;
    sshcore__conn_close_socket(conn);
}
