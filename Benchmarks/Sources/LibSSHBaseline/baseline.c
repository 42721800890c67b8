/* The benchmark baseline: plain libssh, blocking mode, SSH_OPTIONS_NODELAY on,
 * ssh_config processing off, host key not verified (loopback benchmark only). */
#include <libssh/libssh.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <time.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "baseline.h"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define LSB_CALLGRIND_DUMP(label) CALLGRIND_DUMP_STATS_AT(label)
#else
#define LSB_CALLGRIND_DUMP(label) ((void)(label))
#endif

struct lsb_session {
    ssh_session s;
};

lsb_session *lsb_connect(const char *host, int port, const char *user, const char *key_path,
                         const char *cipher, char *err, size_t err_len)
{
    ssh_session s = ssh_new();
    ssh_key key = NULL;
    int one = 1, zero = 0;
    unsigned int p = (unsigned int)port;
    lsb_session *r = NULL;

    if (s == NULL) {
        snprintf(err, err_len, "ssh_new failed");
        return NULL;
    }
    ssh_options_set(s, SSH_OPTIONS_HOST, host);
    ssh_options_set(s, SSH_OPTIONS_PORT, &p);
    ssh_options_set(s, SSH_OPTIONS_USER, user);
    ssh_options_set(s, SSH_OPTIONS_NODELAY, &one);
    ssh_options_set(s, SSH_OPTIONS_PROCESS_CONFIG, &zero);
    if (cipher != NULL) {
        ssh_options_set(s, SSH_OPTIONS_CIPHERS_C_S, cipher);
        ssh_options_set(s, SSH_OPTIONS_CIPHERS_S_C, cipher);
    }
    if (ssh_connect(s) != SSH_OK) {
        snprintf(err, err_len, "connect: %s", ssh_get_error(s));
        goto fail;
    }
    if (ssh_pki_import_privkey_file(key_path, NULL, NULL, NULL, &key) != SSH_OK) {
        snprintf(err, err_len, "key import failed");
        goto fail;
    }
    if (ssh_userauth_publickey(s, NULL, key) != SSH_AUTH_SUCCESS) {
        snprintf(err, err_len, "auth: %s", ssh_get_error(s));
        goto fail;
    }
    ssh_key_free(key);
    /* the remedy the libssh notes give for the server's Nagle + our delayed ACK
     * at the first channel open, so the baseline is not penalized by it */
    setsockopt(ssh_get_fd(s), IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
    r = calloc(1, sizeof(*r));
    r->s = s;
    return r;
fail:
    ssh_key_free(key);
    ssh_disconnect(s);
    ssh_free(s);
    return NULL;
}

static int drain(ssh_channel ch)
{
    char buf[16384];
    int status;
    while (ssh_channel_read(ch, buf, sizeof(buf), 0) > 0) {
    }
    while (ssh_channel_read(ch, buf, sizeof(buf), 1) > 0) {
    }
    ssh_channel_send_eof(ch);
    status = ssh_channel_get_exit_status(ch);
    ssh_channel_close(ch);
    ssh_channel_free(ch);
    return status;
}

/* A new channel running `command`, or NULL. */
static ssh_channel open_exec(lsb_session *s, const char *command)
{
    ssh_channel ch = ssh_channel_new(s->s);
    if (ch == NULL || ssh_channel_open_session(ch) != SSH_OK ||
        ssh_channel_request_exec(ch, command) != SSH_OK) {
        if (ch != NULL) {
            ssh_channel_free(ch);
        }
        return NULL;
    }
    return ch;
}

int lsb_exec(lsb_session *s, const char *command)
{
    ssh_channel ch = open_exec(s, command);
    return ch == NULL ? -1 : drain(ch);
}

int lsb_exec_many(lsb_session *s, const char *command, int n)
{
    ssh_channel *chans = calloc((size_t)n, sizeof(ssh_channel));
    int ok = 0, i;
    for (i = 0; i < n; i++) {
        chans[i] = open_exec(s, command);
    }
    for (i = 0; i < n; i++) {
        if (chans[i] != NULL && drain(chans[i]) == 0) {
            ok++;
        }
    }
    free(chans);
    return ok;
}

long long lsb_read_all(lsb_session *s, const char *command)
{
    char buf[65536];
    long long total = 0;
    int n;
    ssh_channel ch = open_exec(s, command);

    if (ch == NULL) {
        return -1;
    }
    while ((n = ssh_channel_read(ch, buf, sizeof(buf), 0)) > 0) {
        total += n;
    }
    if (n < 0) {
        total = -1;
    }
    (void)drain(ch);
    return total;
}

long long lsb_forward_to_fd(lsb_session *s, const char *host, int port, int fd)
{
    char buf[65536];
    long long total = 0;
    int n;
    ssh_channel ch = ssh_channel_new(s->s);

    if (ch == NULL) {
        return -1;
    }
    if (ssh_channel_open_forward(ch, host, port, "127.0.0.1", 0) != SSH_OK) {
        ssh_channel_free(ch);
        return -1;
    }
    while ((n = ssh_channel_read(ch, buf, sizeof(buf), 0)) > 0) {
        int off = 0;
        while (off < n) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w <= 0) {
                total = -1;
                goto out;
            }
            off += (int)w;
        }
        total += n;
    }
    if (n < 0) {
        total = -1;
    }
out:
    ssh_channel_close(ch);
    ssh_channel_free(ch);
    return total;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* Reads what `bulk` has (counting it) until `echo` yields a byte or `until` (a
 * now_ms() time, 0 for none) passes. 1 when the echo came, 0 at `until`, -1 on
 * an error. The loop a plain libssh client would write: non-blocking reads of
 * both channels, and a poll() on the socket when neither had anything. */
static int pump(lsb_session *s, ssh_channel echo, ssh_channel bulk, long long *streamed,
                double until)
{
    char buf[65536];
    char e[64];
    for (;;) {
        int n = ssh_channel_read_nonblocking(bulk, buf, sizeof(buf), 0);
        int m = echo == NULL ? 0 : ssh_channel_read_nonblocking(echo, e, sizeof(e), 0);
        if (n < 0 || m < 0) {
            return -1;
        }
        *streamed += n;
        if (m > 0) {
            return 1;
        }
        if (until != 0 && now_ms() >= until) {
            return 0;
        }
        if (n == 0) {
            struct pollfd p = {.fd = ssh_get_fd(s->s), .events = POLLIN, .revents = 0};
            (void)poll(&p, 1, 1);
        }
    }
}

struct lsb_echo {
    lsb_session *s;
    ssh_channel ch;
};

lsb_echo *lsb_echo_open(lsb_session *s)
{
    lsb_echo *e = calloc(1, sizeof(*e));
    char x = 'x';

    if (e == NULL) {
        return NULL;
    }
    e->s = s;
    e->ch = ssh_channel_new(s->s);
    if (e->ch == NULL || ssh_channel_open_session(e->ch) != SSH_OK ||
        ssh_channel_request_pty_size(e->ch, "xterm", 80, 24) != SSH_OK ||
        ssh_channel_request_exec(e->ch, "stty raw -echo; cat") != SSH_OK ||
        /* the first round trip also waits for stty */
        ssh_channel_write(e->ch, &x, 1) != 1 || ssh_channel_read(e->ch, &x, 1, 0) != 1) {
        lsb_echo_close(e);
        return NULL;
    }
    return e;
}

int lsb_echo_beside_stream(lsb_echo *e, const char *command, int samples, double warmup_ms,
                           double *ms, long long *streamed, double *seconds)
{
    ssh_channel bulk = open_exec(e->s, command);
    long long warm = 0;
    char x = 'x';
    double t0;
    int i, ok = -1;

    *streamed = 0;
    if (bulk == NULL || pump(e->s, NULL, bulk, &warm, now_ms() + warmup_ms) < 0) {
        goto out; /* for the stream to reach full speed */
    }
    t0 = now_ms();
    for (i = 0; i < samples; i++) {
        double start = now_ms();
        if (ssh_channel_write(e->ch, &x, 1) != 1 ||
            pump(e->s, e->ch, bulk, streamed, 0) != 1) {
            goto out;
        }
        ms[i] = now_ms() - start;
    }
    *seconds = (now_ms() - t0) / 1000;
    ok = 0;
out:
    if (bulk != NULL) {
        /* what the server sent before it saw the close arrives for a channel
         * libssh no longer knows, and is dropped */
        ssh_channel_close(bulk);
        ssh_channel_free(bulk);
    }
    return ok;
}

void lsb_echo_close(lsb_echo *e)
{
    if (e->ch != NULL) {
        ssh_channel_close(e->ch);
        ssh_channel_free(e->ch);
    }
    free(e);
}

void lsb_close(lsb_session *s)
{
    ssh_disconnect(s->s);
    ssh_free(s->s);
    free(s);
}

void lsb_callgrind_dump(const char *label)
{
    LSB_CALLGRIND_DUMP(label);
}
