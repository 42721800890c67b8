/*
 * sshcore_auth.c - authentication, on the worker: "none" to learn the methods,
 * then each configured method in order (password, a password asked for, key
 * files and keys in memory with their certificates, the agent, keyboard-
 * interactive), skipping what cannot be used when asked to, as ssh(1) does.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "sshcore_internal.h"

static unsigned
methods_from_libssh(int m)
{
    unsigned r = 0;
    if (m & SSH_AUTH_METHOD_NONE) {
        r |= SSHCORE_METHOD_NONE;
    }
    if (m & SSH_AUTH_METHOD_PASSWORD) {
        r |= SSHCORE_METHOD_PASSWORD;
    }
    if (m & SSH_AUTH_METHOD_PUBLICKEY) {
        r |= SSHCORE_METHOD_PUBLICKEY;
    }
    if (m & SSH_AUTH_METHOD_HOSTBASED) {
        r |= SSHCORE_METHOD_HOSTBASED;
    }
    if (m & SSH_AUTH_METHOD_INTERACTIVE) {
        r |= SSHCORE_METHOD_KBDINT;
    }
    if (m & SSH_AUTH_METHOD_GSSAPI_MIC) {
        r |= SSHCORE_METHOD_GSSAPI;
    }
    return r;
}

static void
auth_succeeded(sshcore_conn *conn)
{
    sshcore_error ok;

    if (sshcore__conn_event(conn, SSHCORE_PHASE_EV_AUTHENTICATED) !=
        SSHCORE_PHASE_ACT_REPORT_READY) {
        return; /* rejected: the connection failed */
    }
    conn->event = ssh_event_new();
    if (conn->event == NULL ||
        ssh_event_add_session(conn->event, conn->session) != SSH_OK) {
        sshcore__conn_fail_lib(conn,
                               SSHCORE_E_OUT_OF_MEMORY,
                               "ssh_event_add_session");
        return;
    }
    conn->ka.seen_packets = conn->packet_counter.in_packets;
    conn->ka.last_rx_ms = sshcore__now_ms();
    conn->ka.probes = 0;
    sshcore__error_set(&ok, SSHCORE_E_OK, NULL);
    sshcore__conn_connect_complete(conn, &ok);
}

static const char *
method_name(sshcore_auth_kind k)
{
    switch (k) {
    case SSHCORE_AUTH_PASSWORD:
        return "password";
    case SSHCORE_AUTH_KEY_FILE:
        return "publickey(file)";
    case SSHCORE_AUTH_KEY_MEMORY:
        return "publickey(memory)";
    case SSHCORE_AUTH_AGENT:
        return "publickey(agent)";
    case SSHCORE_AUTH_KBDINT:
        return "keyboard-interactive";
    case SSHCORE_AUTH_PASSWORD_PROMPT:
        return "password";
    }
    return "?";
}

static unsigned
method_bit(sshcore_auth_kind k)
{
    switch (k) {
    case SSHCORE_AUTH_PASSWORD:
        return SSHCORE_METHOD_PASSWORD;
    case SSHCORE_AUTH_KEY_FILE:
        return SSHCORE_METHOD_PUBLICKEY;
    case SSHCORE_AUTH_KEY_MEMORY:
        return SSHCORE_METHOD_PUBLICKEY;
    case SSHCORE_AUTH_AGENT:
        return SSHCORE_METHOD_PUBLICKEY;
    case SSHCORE_AUTH_KBDINT:
        return SSHCORE_METHOD_KBDINT;
    case SSHCORE_AUTH_PASSWORD_PROMPT:
        return SSHCORE_METHOD_PASSWORD;
    }
    return 0;
}

static void
note_tried(sshcore_conn *conn, const char *what)
{
    size_t used = strlen(conn->setup->methods_tried);
    snprintf(conn->setup->methods_tried + used,
             sizeof(conn->setup->methods_tried) - used,
             "%s%s",
             used > 0 ? "," : "",
             what);
}

static void
auth_denied(sshcore_conn *conn)
{
    char detail[512];
    unsigned m = atomic_load(&conn->offered_methods);

    snprintf(detail,
             sizeof(detail),
             "server offers:%s%s%s%s%s; tried: %s",
             (m & SSHCORE_METHOD_PUBLICKEY) ? " publickey" : "",
             (m & SSHCORE_METHOD_PASSWORD) ? " password" : "",
             (m & SSHCORE_METHOD_KBDINT) ? " keyboard-interactive" : "",
             (m & SSHCORE_METHOD_HOSTBASED) ? " hostbased" : "",
             (m & SSHCORE_METHOD_GSSAPI) ? " gssapi-with-mic" : "",
             conn->setup->methods_tried[0] != '\0' ? conn->setup->methods_tried
                                                   : "nothing");
    sshcore__conn_fail(conn, SSHCORE_E_AUTH_DENIED, detail);
}

void
sshcore__auth_none(sshcore_conn *conn)
{
    int rc = ssh_userauth_none(conn->session, NULL);

    switch (rc) {
    case SSH_AUTH_AGAIN:
        return;
    case SSH_AUTH_SUCCESS:
        atomic_store(&conn->offered_methods, SSHCORE_METHOD_NONE);
        auth_succeeded(conn);
        return;
    case SSH_AUTH_DENIED:
    case SSH_AUTH_PARTIAL:
        atomic_store(
            &conn->offered_methods,
            methods_from_libssh(ssh_userauth_list(conn->session, NULL)));
        conn->setup->method_idx = 0;
        conn->setup->method_started = false;
        (void)sshcore__conn_event(conn, SSHCORE_PHASE_EV_METHODS_LISTED);
        return;
    default:
        sshcore__conn_fail_lib(conn,
                               sshcore__conn_failure_code(conn),
                               "ssh_userauth_none");
        return;
    }
}

/** Returns an SSH_AUTH_* code, or SSH_AUTH_INFO when waiting for answers. */
/*
 * Hands one keyboard-interactive round with `n` prompts to the caller, whose
 * answer comes back through sshcore_conn_kbdint_reply. Returns SSH_AUTH_INFO
 * (the round is pending), or SSH_AUTH_ERROR when out of memory.
 */
static int
ask_kbdint_round(sshcore_conn *conn, int n)
{
    const char **prompts = NULL;
    int *echo = NULL;
    sshcore_kbdint ch;
    char echo_c = 0;
    int rc = SSH_AUTH_INFO;
    int i;

    prompts = calloc((size_t)n, sizeof(char *));
    echo = calloc((size_t)n, sizeof(int));
    if (prompts == NULL || echo == NULL) {
        rc = SSH_AUTH_ERROR;
        goto out;
    }
    memset(&ch, 0, sizeof(ch));
    for (i = 0; i < n; i++) {
        prompts[i] =
            ssh_userauth_kbdint_getprompt(conn->session, (unsigned)i, &echo_c);
        echo[i] = echo_c != 0;
    }
    ch.name = ssh_userauth_kbdint_getname(conn->session);
    ch.instruction = ssh_userauth_kbdint_getinstruction(conn->session);
    ch.count = (size_t)n;
    ch.prompts = prompts;
    ch.echo = echo;
    if (sshcore__conn_event(conn, SSHCORE_PHASE_EV_ANSWER_ASKED) ==
        SSHCORE_PHASE_ACT_REJECT) {
        goto out;
    }
    sshcore__conn_retain(conn); /* dropped by sshcore_conn_kbdint_reply */
    pthread_mutex_lock(&conn->mu);
    conn->answers.kbd_awaited = true;
    pthread_mutex_unlock(&conn->mu);
    conn->cb.kbdint(conn->cb.ctx, conn, &ch);

out:
    free(prompts);
    free(echo);
    return rc;
}

static int
auth_kbdint_step(sshcore_conn *conn)
{
    int rc = ssh_userauth_kbdint(conn->session, NULL, NULL);
    int n;

    while (rc == SSH_AUTH_INFO) {
        n = ssh_userauth_kbdint_getnprompts(conn->session);
        if (n > 0) {
            return ask_kbdint_round(conn, n);
        }
        /* OpenSSH sends an empty round at the end; answer it directly. */
        rc = ssh_userauth_kbdint(conn->session, NULL, NULL);
    }
    return rc;
}

void
sshcore__wipe_secret(char *_Nullable *_Nonnull secret)
{
    if (*secret != NULL) {
        explicit_bzero(*secret, strlen(*secret));
        free(*secret);
        *secret = NULL;
    }
}

/** Forgets what the current method was asked for, before the next one. */
static void
forget_method_answers(sshcore_conn *conn)
{
    sshcore__wipe_secret(&conn->setup->prompted_password);
    sshcore__wipe_secret(&conn->setup->prompted_passphrase);
    conn->setup->password_attempts = 0;
    conn->setup->passphrase_attempts = 0;
}

/**
 * A method that cannot be used: with SSHCORE_AUTH_SKIP_UNUSABLE it is noted
 * ("publickey(file) skipped: why") and the next one tried, as ssh(1) skips an
 * identity it cannot load; otherwise the connection fails with `code`.
 */
void
sshcore__auth_method_unusable(sshcore_conn *conn,
                              const sshcore_auth_method *m,
                              int code,
                              const char *function,
                              int lib_code,
                              const char *why)
{
    sshcore_error err;
    char note[200];

    if ((m->flags & SSHCORE_AUTH_SKIP_UNUSABLE) != 0) {
        snprintf(note, sizeof(note), "skipped (%s)", why);
        note_tried(conn, note);
        sshcore__auth_release(conn);
        forget_method_answers(conn);
        conn->setup->method_idx++;
        conn->setup->method_started = false;
        return;
    }
    sshcore__error_set(&err, code, why);
    if (function != NULL) {
        sshcore__copy_str(err.lib_function, sizeof(err.lib_function), function);
        err.lib_code = lib_code;
    }
    sshcore__conn_fail_with(conn, &err);
}

/**
 * Hands one prompt to the caller through the kbdint callback (`passphrase`:
 * a key's, at `key_path`; else a password) and waits in
 * SSHCORE_PHASE_ANSWER_WAIT for sshcore_conn_kbdint_reply.
 */
void
sshcore__auth_ask_caller_once(sshcore_conn *conn,
                              const char *prompt,
                              bool passphrase,
                              const char *_Nullable key_path,
                              unsigned attempt)
{
    const char *prompts[1] = {prompt};
    int echo = 0;
    sshcore_kbdint ch;

    memset(&ch, 0, sizeof(ch));
    ch.name = "";
    ch.instruction = "";
    ch.count = 1;
    ch.prompts = prompts;
    ch.echo = &echo;
    ch.password = passphrase ? 0 : 1;
    ch.passphrase = passphrase ? 1 : 0;
    ch.key_path = key_path;
    ch.attempt = attempt;
    if (sshcore__conn_event(conn, SSHCORE_PHASE_EV_ANSWER_ASKED) ==
        SSHCORE_PHASE_ACT_REJECT) {
        return;
    }
    conn->setup->asking_passphrase = passphrase;
    sshcore__conn_retain(conn); /* dropped by sshcore_conn_kbdint_reply */
    pthread_mutex_lock(&conn->mu);
    conn->answers.kbd_awaited = true;
    pthread_mutex_unlock(&conn->mu);
    conn->cb.kbdint(conn->cb.ctx, conn, &ch);
}

/**
 * PASSWORD_PROMPT: asks the caller for a password through the kbdint callback
 * (one prompt, `password` set) and waits in SSHCORE_PHASE_ANSWER_WAIT; the
 * reply lands in conn->setup->prompted_password, or skips the method.
 */
static void
ask_password(sshcore_conn *conn)
{
    char prompt[300];

    snprintf(prompt,
             sizeof(prompt),
             "%s@%s's password: ",
             conn->user,
             conn->host);
    sshcore__auth_ask_caller_once(conn,
                                  prompt,
                                  false,
                                  NULL,
                                  conn->setup->password_attempts + 1);
}

/** The next method, after the current one was refused or skipped. */
static void
next_method(sshcore_conn *conn)
{
    sshcore__auth_release(conn);
    forget_method_answers(conn);
    conn->setup->method_idx++;
    conn->setup->method_started = false;
}

void
sshcore__auth_method_step(sshcore_conn *conn)
{
    const sshcore_auth_method *m = NULL;
    unsigned offered = atomic_load(&conn->offered_methods);
    int rc = SSH_AUTH_DENIED;

    for (;;) {
        if (conn->setup->method_idx >= conn->setup->method_count) {
            auth_denied(conn);
            return;
        }
        m = &conn->setup->methods[conn->setup->method_idx];
        if ((offered & method_bit(m->kind)) != 0) {
            break;
        }
        conn->setup->method_idx++;
    }
    if (!conn->setup->method_started) {
        conn->setup->method_started = true;
        note_tried(conn, method_name(m->kind));
    }

    switch (m->kind) {
    case SSHCORE_AUTH_PASSWORD:
        rc = ssh_userauth_password(conn->session,
                                   NULL,
                                   m->secret != NULL ? m->secret : "");
        break;
    case SSHCORE_AUTH_KEY_FILE:
    case SSHCORE_AUTH_KEY_MEMORY:
        if (conn->setup->key == NULL && !sshcore__auth_load_key(conn, m)) {
            return;
        }
        rc =
            conn->setup->cert_agent != NULL
                ? ssh_userauth_agent(conn->session, NULL)
                : ssh_userauth_publickey(conn->session, NULL, conn->setup->key);
        break;
    case SSHCORE_AUTH_AGENT:
        if (m->secret == NULL && getenv("SSH_AUTH_SOCK") == NULL) {
            sshcore__auth_method_unusable(
                conn,
                m,
                SSHCORE_E_AGENT,
                NULL,
                0,
                "SSH_AUTH_SOCK is not set and no agent socket was given");
            return;
        }
        if (conn->setup->agent_fd < 0) {
            const char *path =
                m->secret != NULL ? m->secret : getenv("SSH_AUTH_SOCK");
            char why[300];
            if (!sshcore__agent_connect(conn, path)) {
                snprintf(why,
                         sizeof(why),
                         "agent unreachable: %s: %s",
                         path,
                         strerror(errno));
                sshcore__auth_method_unusable(conn,
                                              m,
                                              SSHCORE_E_AGENT,
                                              NULL,
                                              0,
                                              why);
                return;
            }
        }
        rc = ssh_userauth_agent(conn->session, NULL);
        if (rc == SSH_AUTH_ERROR && sshcore__conn_libssh_usable(conn)) {
            if ((m->flags & SSHCORE_AUTH_SKIP_UNUSABLE) != 0) {
                sshcore__auth_method_unusable(conn,
                                              m,
                                              SSHCORE_E_AGENT,
                                              NULL,
                                              0,
                                              "agent unreachable");
            } else {
                sshcore__conn_fail_lib(conn,
                                       SSHCORE_E_AGENT,
                                       "ssh_userauth_agent");
            }
            return;
        }
        break;
    case SSHCORE_AUTH_KBDINT:
        rc = auth_kbdint_step(conn);
        if (rc == SSH_AUTH_INFO) {
            return;
        }
        break;
    case SSHCORE_AUTH_PASSWORD_PROMPT:
        if (conn->setup->prompted_password == NULL) {
            ask_password(conn);
            return;
        }
        rc = ssh_userauth_password(conn->session,
                                   NULL,
                                   conn->setup->prompted_password);
        if (rc == SSH_AUTH_DENIED && conn->setup->password_attempts + 1 <
                                         (m->attempts > 0 ? m->attempts : 1)) {
            /* refused: ask again, as ssh asks NumberOfPasswordPrompts times
             * (now: nothing else would wake the worker for it) */
            conn->setup->password_attempts++;
            sshcore__wipe_secret(&conn->setup->prompted_password);
            ask_password(conn);
            return;
        }
        break;
    }

    switch (rc) {
    case SSH_AUTH_AGAIN:
        return;
    case SSH_AUTH_SUCCESS:
        sshcore__wipe_secret(&conn->setup->prompted_password);
        sshcore__auth_release(conn);
        auth_succeeded(conn);
        return;
    case SSH_AUTH_PARTIAL:
        atomic_store(
            &conn->offered_methods,
            methods_from_libssh(ssh_userauth_list(conn->session, NULL)));
        /* fall through: continue with the next configured method */
    case SSH_AUTH_DENIED:
        next_method(conn);
        return;
    default:
        sshcore__conn_fail_lib(conn,
                               sshcore__conn_failure_code(conn),
                               "ssh_userauth");
        return;
    }
}

/**
 * libssh's authentication calls look at the authentication state only: after
 * a packet failed its integrity check they keep answering SSH_AUTH_AGAIN, and
 * the attempt would end at the connect deadline as a timeout. Fail it at once
 * with what happened.
 */
void
sshcore__auth_check_session(sshcore_conn *conn)
{
    if ((conn->phase == SSHCORE_PHASE_AUTH_NONE ||
         conn->phase == SSHCORE_PHASE_AUTH_METHOD) &&
        !sshcore__conn_libssh_usable(conn)) {
        sshcore__conn_fail_lib(conn,
                               sshcore__conn_failure_code(conn),
                               "ssh_userauth");
    }
}

/**
 * Worker, in SSHCORE_PHASE_ANSWER_WAIT: the caller's reply to a passphrase
 * prompt (the passphrase, kept until the key is loaded, or none: the key is
 * skipped), to a password prompt
 * (the password, kept until the server answered, or none: the next method) or
 * to a keyboard- interactive round (handed to libssh). NULL answers abort
 * authentication. Takes what it keeps out of `answers`; the caller frees the
 * rest.
 */
void
sshcore__auth_answers(sshcore_conn *conn,
                      char *_Nullable *_Nullable answers,
                      size_t count)
{
    if (conn->setup->asking_passphrase) {
        conn->setup->asking_passphrase = false;
        if (answers == NULL) {
            sshcore__conn_fail(conn,
                               SSHCORE_E_AUTH_DENIED,
                               "passphrase prompt gave no answer");
        } else if (sshcore__conn_event(conn, SSHCORE_PHASE_EV_ANSWERED) !=
                   SSHCORE_PHASE_ACT_REJECT) {
            if (count == 0) {
                sshcore__auth_method_unusable(
                    conn,
                    &conn->setup->methods[conn->setup->method_idx],
                    SSHCORE_E_PRIVATE_KEY,
                    NULL,
                    0,
                    "encrypted, and no passphrase was given");
            } else {
                sshcore__wipe_secret(&conn->setup->prompted_passphrase);
                conn->setup->prompted_passphrase = answers[0];
                answers[0] = NULL; /* kept until the key is loaded */
            }
        }
    } else if (conn->setup->method_idx < conn->setup->method_count &&
               conn->setup->methods[conn->setup->method_idx].kind ==
                   SSHCORE_AUTH_PASSWORD_PROMPT) {
        if (answers == NULL) {
            sshcore__conn_fail(conn,
                               SSHCORE_E_AUTH_DENIED,
                               "password prompt gave no answer");
        } else if (sshcore__conn_event(conn, SSHCORE_PHASE_EV_ANSWERED) !=
                   SSHCORE_PHASE_ACT_REJECT) {
            if (count == 0) {
                next_method(conn); /* no password: the next method */
            } else {
                sshcore__wipe_secret(&conn->setup->prompted_password);
                conn->setup->prompted_password = answers[0];
                answers[0] = NULL; /* kept until the server answered */
            }
        }
    } else {
        size_t i;
        if (answers == NULL) {
            sshcore__conn_fail(
                conn,
                SSHCORE_E_AUTH_DENIED,
                "keyboard-interactive responder gave no answers");
        } else {
            for (i = 0; i < count; i++) {
                if (ssh_userauth_kbdint_setanswer(conn->session,
                                                  (unsigned)i,
                                                  answers[i]) < 0) {
                    sshcore__conn_fail_lib(conn,
                                           SSHCORE_E_AUTH_DENIED,
                                           "ssh_userauth_kbdint_setanswer");
                    break;
                }
            }
            if (conn->phase == SSHCORE_PHASE_ANSWER_WAIT) {
                (void)sshcore__conn_event(conn, SSHCORE_PHASE_EV_ANSWERED);
            }
        }
    }
}
