/*
 * sshcore_socket.c - the core creates its own sockets: non-blocking connect
 * over every address getaddrinfo returns (IPv4 and IPv6), TCP_NODELAY and
 * TCP_USER_TIMEOUT. libssh only ever receives a dup of the result.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sshcore_internal.h"

int
sshcore__socket_connect_start(const struct addrinfo *ai, bool *in_progress)
{
    int fd = -1;
    int rc;
    int one = 1;

    *in_progress = false;
    fd = socket(ai->ai_family,
                ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                ai->ai_protocol);
    if (fd < 0) {
        return -1;
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    do {
        rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    } while (rc != 0 && errno == EINTR);
    if (rc == 0) {
        return fd;
    }
    if (errno == EINPROGRESS) {
        *in_progress = true;
        return fd;
    }
    rc = errno;
    close(fd);
    errno = rc;
    return -1;
}

int
sshcore__socket_connect_result(int fd)
{
    int soerr = 0;
    socklen_t len = sizeof(soerr);

    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) {
        return errno;
    }
    return soerr;
}

void
sshcore__socket_tune(int fd, int user_timeout_ms)
{
    int one = 1;
    int lowat = 2 * SSHCORE_SEND_BACKLOG_MAX;
    unsigned int uto = user_timeout_ms > 0 ? (unsigned int)user_timeout_ms : 0;

    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    /* POLLOUT only once fewer than half of this is unsent: the edge that wakes
     * writers held back by SSHCORE_SEND_BACKLOG_MAX (sshcore_session_input.c)
     */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof(lowat));
    if (uto > 0) {
        (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &uto, sizeof(uto));
    }
}

int
sshcore__errno_to_code(int e)
{
    switch (e) {
    case ECONNREFUSED:
        return SSHCORE_E_CONNECTION_REFUSED;
    case ENETUNREACH:
    case EHOSTUNREACH:
    case ENETDOWN:
    case EHOSTDOWN:
    case EADDRNOTAVAIL:
        return SSHCORE_E_HOST_UNREACHABLE;
    case ETIMEDOUT:
        return SSHCORE_E_CONNECT_TIMEOUT;
    case ENOMEM:
        return SSHCORE_E_OUT_OF_MEMORY;
    default:
        return SSHCORE_E_SYSTEM;
    }
}

int
sshcore_accept(int listen_fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    int one = 1;
    int fd = accept4(listen_fd,
                     (struct sockaddr *)&ss,
                     &len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);

    if (fd >= 0 && (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)) {
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    return fd;
}

int
sshcore_eventfd(void)
{
    return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

void
sshcore_set_thread_name(const char *name)
{
    char buf[16];

    snprintf(buf, sizeof(buf), "%s", name);
    (void)pthread_setname_np(pthread_self(), buf);
}
