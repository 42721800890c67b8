#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "ctransport.h"

int
ctransport_pipe2(int fds[2], int flags)
{
    return pipe2(fds, flags);
}

int
ctransport_mkostemp(char *pattern, int flags)
{
    return mkostemp(pattern, flags);
}

int
ctransport_set_window_size(int master,
                           unsigned short rows,
                           unsigned short columns)
{
    struct winsize ws = {.ws_row = rows, .ws_col = columns};
    return ioctl(master, TIOCSWINSZ, &ws);
}

int
ctransport_spawn_pty(const char *path,
                     char *const argv[],
                     char *const envp[],
                     unsigned short rows,
                     unsigned short columns,
                     pid_t *pid,
                     int *master)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0) {
        return errno;
    }
    char slave[128];
    if (grantpt(m) != 0 || unlockpt(m) != 0 ||
        ptsname_r(m, slave, sizeof slave) != 0 ||
        ctransport_set_window_size(m, rows, columns) != 0) {
        int e = errno;
        close(m);
        return e;
    }
    posix_spawnattr_t attr;
    posix_spawn_file_actions_t actions;
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
    sigset_t empty, defaults;
    sigemptyset(&empty);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigmask(&attr, &empty);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    /* glibc applies setsid before the file actions: opening the slave (without
       O_NOCTTY) then makes it the new session's controlling terminal */
    posix_spawnattr_setflags(&attr,
                             POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
                                 POSIX_SPAWN_SETSIGDEF);
    posix_spawn_file_actions_addopen(&actions, 0, slave, O_RDWR, 0);
    posix_spawn_file_actions_adddup2(&actions, 0, 1);
    posix_spawn_file_actions_adddup2(&actions, 0, 2);
    int rc = posix_spawnp(pid, path, &actions, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        close(m);
        return rc;
    }
    *master = m;
    return 0;
}
