/*
 * sshcore_registry.c - the running workers, and what happens to them when the
 * process exits (the exit handler that closes them before OpenSSL's own runs).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "sshcore_internal.h"

atomic_long sshcore_live_workers;

long
sshcore_debug_live_workers(void)
{
    return atomic_load(&sshcore_live_workers);
}

/*
 * Process exit. A program that returns from main (or calls exit) with a
 * connection still open leaves its worker inside libssh while the exit
 * handlers run, and OpenSSL's handler frees what that worker still uses
 * (a crash at exit, every time with streams open). Exit handlers run in
 * reverse order of registration, and OpenSSL registers its own at its first
 * use, which is during the first key exchange. So OpenSSL is initialised
 * first (through dlsym: libssh may be built on another crypto library), then
 * ours is registered; at exit it runs first, asks every running worker to
 * close and waits a bounded time for them.
 */
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static sshcore_conn *registry_head;
static pthread_once_t exit_handler_once = PTHREAD_ONCE_INIT;

/* How long the exit handler waits for workers to finish closing. */
#define EXIT_WAIT_MS 500

static void
close_workers_at_exit(void)
{
    sshcore_conn *c = NULL;
    int64_t until = 0;

    pthread_mutex_lock(&registry_mu);
    for (c = registry_head; c != NULL; c = c->reg_next) {
        sshcore_conn_close(c);
    }
    pthread_mutex_unlock(&registry_mu);
    until = sshcore__now_ms() + EXIT_WAIT_MS;
    while (atomic_load(&sshcore_live_workers) > 0 &&
           sshcore__now_ms() < until) {
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
}

static void
install_exit_handler(void)
{
    typedef int (*openssl_init_fn)(uint64_t opts, const void *settings);
    openssl_init_fn init =
        (openssl_init_fn)dlsym(RTLD_DEFAULT, "OPENSSL_init_crypto");

    if (init != NULL) {
        /* Registers OpenSSL's exit handler before ours. With no options
         * OPENSSL_init_crypto returns before registering it; these two
         * (OPENSSL_INIT_ADD_ALL_CIPHERS | _DIGESTS) are no-ops in OpenSSL 3
         * that take the full path. */
        (void)init(0x04 | 0x08, NULL);
    }
    (void)atexit(close_workers_at_exit);
}

void
sshcore__conn_registry_add(sshcore_conn *conn)
{
    pthread_once(&exit_handler_once, install_exit_handler);
    pthread_mutex_lock(&registry_mu);
    conn->reg_prev = NULL;
    conn->reg_next = registry_head;
    if (registry_head != NULL) {
        registry_head->reg_prev = conn;
    }
    registry_head = conn;
    pthread_mutex_unlock(&registry_mu);
}

void
sshcore__conn_registry_remove(sshcore_conn *conn)
{
    pthread_mutex_lock(&registry_mu);
    if (conn->reg_prev != NULL) {
        conn->reg_prev->reg_next = conn->reg_next;
    } else {
        registry_head = conn->reg_next;
    }
    if (conn->reg_next != NULL) {
        conn->reg_next->reg_prev = conn->reg_prev;
    }
    conn->reg_prev = NULL;
    conn->reg_next = NULL;
    pthread_mutex_unlock(&registry_mu);
}
