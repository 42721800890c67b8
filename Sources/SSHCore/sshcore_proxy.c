/*
 * sshcore_proxy.c - the socket of a ProxyCommand connection: a socket pair
 * whose one end becomes the command's stdin and stdout. The command is spawned
 * the way ssh(1) runs it ("$SHELL -c 'exec command'"), with default signal
 * handling, no blocked signals and no fd of this process but 0, 1 and 2.
 */
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sshcore_internal.h"

extern char **environ;

int
sshcore_proxy_spawn(const char *shell,
                    const char *command,
                    int *fd_out,
                    int *pid_out)
{
    int sv[2] = {-1, -1};
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    sigset_t defaults;
    sigset_t empty;
    char *line = NULL;
    char *argv[4] = {NULL, NULL, NULL, NULL};
    pid_t pid = -1;
    size_t len;
    int rc;

    *fd_out = -1;
    *pid_out = -1;
    len = strlen(command) + sizeof("exec ");
    line = malloc(len);
    if (line == NULL) {
        return ENOMEM;
    }
    snprintf(line, len, "exec %s", command);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        rc = errno;
        goto out;
    }
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attributes);
    posix_spawn_file_actions_adddup2(&actions, sv[1], 0);
    posix_spawn_file_actions_adddup2(&actions, sv[1], 1);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGHUP);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGQUIT);
    sigaddset(&defaults, SIGTERM);
    sigemptyset(&empty);
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    posix_spawnattr_setsigmask(&attributes, &empty);
    posix_spawnattr_setflags(&attributes,
                             POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    argv[0] = (char *)shell;
    argv[1] = "-c";
    argv[2] = line;
    rc = posix_spawn(&pid, shell, &actions, &attributes, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    if (rc != 0) {
        goto out;
    }
    *fd_out = sv[0];
    *pid_out = (int)pid;
    sv[0] = -1; /* the caller's */

out:
    free(line);
    if (sv[0] >= 0) {
        close(sv[0]);
    }
    if (sv[1] >= 0) {
        close(sv[1]); /* the child's end, dup'ed into it */
    }
    return rc;
}
