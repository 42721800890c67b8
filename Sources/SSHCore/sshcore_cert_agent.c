/*
 * sshcore_cert_agent.c - an Ed25519 key and its OpenSSH certificate offered
 * through a private, in-process ssh-agent, for libssh 0.11.0-0.11.3: there
 * ssh_key_cmp() with the certificate first sends Ed25519 keys to the generic
 * comparison, which refuses them, so ssh_pki_copy_cert_to_privkey() always
 * fails for Ed25519 (upstream fix 38f3d158, in 0.11.4). ssh_userauth_agent()
 * takes the certificate blob from the agent and has the agent sign, so no
 * libssh call needs to attach the certificate to the key.
 *
 * The agent speaks just enough of the ssh-agent protocol (draft-miller-ssh-
 * agent): REQUEST_IDENTITIES answers the one certificate, SIGN_REQUEST for
 * that blob signs with OpenSSL's Ed25519, anything else is a FAILURE. It runs
 * on its own thread because libssh blocks on the agent socket.
 *
 * Also here: the socket of an ssh-agent method, which the core opens itself and
 * lends to libssh (see sshcore__auth_release), and the tests' switch.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <libssh/libssh.h>

#include "sshcore_internal.h"

#define AGENT_FAILURE             5
#define AGENTC_REQUEST_IDENTITIES 11
#define AGENT_IDENTITIES_ANSWER   12
#define AGENTC_SIGN_REQUEST       13
#define AGENT_SIGN_RESPONSE       14
#define AGENT_MAX_MESSAGE         (256 * 1024)

struct sshcore_cert_agent {
    int lib_fd;   /* handed to libssh by ssh_set_agent_socket */
    int serve_fd; /* ours, read by the thread */
    pthread_t thread;
    EVP_PKEY *pkey;
    unsigned char *blob; /* the certificate blob */
    size_t blob_len;
};

static uint32_t
get_u32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
           ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static void
put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/** Reads one SSH string at *at; false when it does not fit. */
static bool
get_string(const unsigned char *buf,
           size_t len,
           size_t *at,
           const unsigned char **s,
           size_t *slen)
{
    uint32_t n;

    if (*at > len || len - *at < 4) {
        return false;
    }
    n = get_u32(buf + *at);
    if (n > len - *at - 4) {
        return false;
    }
    *s = buf + *at + 4;
    *slen = n;
    *at += 4 + (size_t)n;
    return true;
}

/** Decodes base64 (whitespace ignored) into a new buffer; 0 on failure. */
static size_t
decode_base64_text(const char *text, unsigned char **out)
{
    size_t len = strlen(text), n = 0, i;
    char *clean = malloc(len + 1);
    unsigned char *buf = NULL;
    int dec;

    *out = NULL;
    if (clean == NULL) {
        return 0;
    }
    for (i = 0; i < len; i++) {
        if (text[i] != '\n' && text[i] != '\r' && text[i] != ' ') {
            clean[n++] = text[i];
        }
    }
    clean[n] = '\0';
    if (n == 0 || n % 4 != 0 || (buf = malloc(n)) == NULL) {
        free(clean);
        return 0;
    }
    dec = EVP_DecodeBlock(buf, (const unsigned char *)clean, (int)n);
    if (dec >= 0) {
        dec -= (clean[n - 1] == '=') + (clean[n - 2] == '=');
    }
    explicit_bzero(clean, n);
    free(clean);
    if (dec <= 0) {
        free(buf);
        return 0;
    }
    *out = buf;
    return (size_t)dec;
}

/**
 * The Ed25519 private key of `key` as an OpenSSL key: libssh exports it in
 * the OpenSSH container (unencrypted, as no passphrase is given), whose
 * private section holds the 32-byte seed followed by the public key.
 */
static EVP_PKEY *
ed25519_pkey(ssh_key key)
{
    static const char begin[] = "-----BEGIN OPENSSH PRIVATE KEY-----";
    static const char end[] = "-----END OPENSSH PRIVATE KEY-----";
    static const char magic[] = "openssh-key-v1"; /* and its NUL */
    char *text = NULL, *body, *stop;
    unsigned char *blob = NULL;
    size_t len = 0, at, n;
    const unsigned char *s, *pub, *priv;
    size_t slen, pub_len, priv_len;
    unsigned char check[32];
    size_t check_len = sizeof(check);
    EVP_PKEY *pkey = NULL;

    if (ssh_key_type(key) != SSH_KEYTYPE_ED25519 ||
        ssh_pki_export_privkey_base64(key, NULL, NULL, NULL, &text) != SSH_OK ||
        text == NULL) {
        goto out;
    }
    body = strstr(text, begin);
    stop = body != NULL ? strstr(body, end) : NULL;
    if (stop == NULL) {
        goto out;
    }
    *stop = '\0';
    len = decode_base64_text(body + sizeof(begin) - 1, &blob);
    at = sizeof(magic);
    if (len < at || memcmp(blob, magic, sizeof(magic)) != 0 ||
        !get_string(blob, len, &at, &s, &slen) || /* cipher */
        slen != 4 || memcmp(s, "none", 4) != 0 ||
        !get_string(blob, len, &at, &s, &slen) || /* kdf */
        !get_string(blob, len, &at, &s, &slen) || /* kdf options */
        len - at < 4 || get_u32(blob + at) != 1) {
        goto out;
    }
    at += 4;
    if (!get_string(blob, len, &at, &s, &slen) || /* public key */
        !get_string(blob, len, &at, &s, &slen)) { /* private section */
        goto out;
    }
    n = 8; /* check ints */
    if (slen < n || get_u32(s) != get_u32(s + 4) ||
        !get_string(s, slen, &n, &pub, &pub_len) || /* key type */
        pub_len != 11 || memcmp(pub, "ssh-ed25519", 11) != 0 ||
        !get_string(s, slen, &n, &pub, &pub_len) || pub_len != 32 ||
        !get_string(s, slen, &n, &priv, &priv_len) || priv_len != 64) {
        goto out;
    }
    pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, priv, 32);
    /* the seed must give the public key the certificate was checked for */
    if (pkey != NULL &&
        (EVP_PKEY_get_raw_public_key(pkey, check, &check_len) != 1 ||
         check_len != 32 || memcmp(check, pub, 32) != 0)) {
        EVP_PKEY_free(pkey);
        pkey = NULL;
    }
out:
    if (blob != NULL) {
        explicit_bzero(blob, len);
        free(blob);
    }
    if (text != NULL) {
        explicit_bzero(text, strlen(text));
        ssh_string_free_char(text);
    }
    return pkey;
}

static bool
write_all(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return false;
        }
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static bool
read_all(int fd, unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t r = recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return false;
        }
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/** The reply to one request, written into out (large enough); its length. */
static size_t
answer(struct sshcore_cert_agent *a,
       const unsigned char *req,
       size_t len,
       unsigned char *out)
{
    static const char comment[] = "sshcore certificate";
    size_t at = 1, n = 4, key_len, data_len, sig_len = 64;
    const unsigned char *key, *data;
    EVP_MD_CTX *ctx = NULL;
    unsigned char sig[64];
    bool ok;

    if (len >= 1 && req[0] == AGENTC_REQUEST_IDENTITIES) {
        out[n++] = AGENT_IDENTITIES_ANSWER;
        put_u32(out + n, 1);
        n += 4;
        put_u32(out + n, (uint32_t)a->blob_len);
        memcpy(out + n + 4, a->blob, a->blob_len);
        n += 4 + a->blob_len;
        put_u32(out + n, sizeof(comment) - 1);
        memcpy(out + n + 4, comment, sizeof(comment) - 1);
        n += 4 + sizeof(comment) - 1;
        put_u32(out, (uint32_t)(n - 4));
        return n;
    }
    if (len >= 1 && req[0] == AGENTC_SIGN_REQUEST &&
        get_string(req, len, &at, &key, &key_len) &&
        get_string(req, len, &at, &data, &data_len) && key_len == a->blob_len &&
        memcmp(key, a->blob, key_len) == 0) {
        ctx = EVP_MD_CTX_new();
        ok = ctx != NULL &&
             EVP_DigestSignInit(ctx, NULL, NULL, NULL, a->pkey) == 1 &&
             EVP_DigestSign(ctx, sig, &sig_len, data, data_len) == 1 &&
             sig_len == 64;
        EVP_MD_CTX_free(ctx);
        if (ok) {
            /* string signature = string "ssh-ed25519", string sig */
            out[n++] = AGENT_SIGN_RESPONSE;
            put_u32(out + n, 4 + 11 + 4 + 64);
            put_u32(out + n + 4, 11);
            memcpy(out + n + 8, "ssh-ed25519", 11);
            put_u32(out + n + 19, 64);
            memcpy(out + n + 23, sig, 64);
            n += 23 + 64;
            put_u32(out, (uint32_t)(n - 4));
            return n;
        }
    }
    put_u32(out, 1);
    out[4] = AGENT_FAILURE;
    return 5;
}

static void *
serve(void *arg)
{
    struct sshcore_cert_agent *a = arg;
    unsigned char head[4];
    unsigned char *req = NULL;
    unsigned char *out = malloc(a->blob_len + 256);
    uint32_t len;

    while (out != NULL && read_all(a->serve_fd, head, 4)) {
        len = get_u32(head);
        if (len == 0 || len > AGENT_MAX_MESSAGE ||
            (req = malloc(len)) == NULL || !read_all(a->serve_fd, req, len) ||
            !write_all(a->serve_fd, out, answer(a, req, len, out))) {
            break;
        }
        free(req);
        req = NULL;
    }
    free(req);
    free(out);
    return NULL;
}

sshcore_cert_agent *
sshcore__cert_agent_start(ssh_session session, ssh_key cert, ssh_key key)
{
    struct sshcore_cert_agent *a = calloc(1, sizeof(*a));
    char *b64 = NULL;
    int fds[2];

    if (a == NULL) {
        return NULL;
    }
    a->lib_fd = a->serve_fd = -1;
    a->pkey = ed25519_pkey(key);
    if (a->pkey == NULL || ssh_pki_export_pubkey_base64(cert, &b64) != SSH_OK ||
        b64 == NULL || (a->blob_len = decode_base64_text(b64, &a->blob)) == 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
        goto fail;
    }
    ssh_string_free_char(b64);
    b64 = NULL;
    a->lib_fd = fds[0];
    a->serve_fd = fds[1];
    if (pthread_create(&a->thread, NULL, serve, a) != 0) {
        goto fail;
    }
    if (ssh_set_agent_socket(session, a->lib_fd) != SSH_OK) {
        shutdown(a->lib_fd, SHUT_RDWR);
        pthread_join(a->thread, NULL);
        goto fail;
    }
    return a;
fail:
    if (b64 != NULL) {
        ssh_string_free_char(b64);
    }
    if (a->lib_fd >= 0) {
        close(a->lib_fd);
        close(a->serve_fd);
    }
    EVP_PKEY_free(a->pkey);
    free(a->blob);
    free(a);
    return NULL;
}

void
sshcore__cert_agent_stop(ssh_session session, sshcore_cert_agent *a)
{
    if (a == NULL) {
        return;
    }
    /* libssh forgets our socket (without closing it); a later agent method
     * connects to the real agent again */
    (void)ssh_set_agent_socket(session, SSH_INVALID_SOCKET);
    shutdown(a->lib_fd, SHUT_RDWR); /* the thread reads EOF and ends */
    pthread_join(a->thread, NULL);
    close(a->lib_fd);
    close(a->serve_fd);
    EVP_PKEY_free(a->pkey);
    free(a->blob);
    free(a);
}

/* ------------------------------------------------------------------------ */
/* The agent sockets of authentication                                       */
/* ------------------------------------------------------------------------ */

static atomic_int force_cert_agent;

bool
sshcore__cert_agent_forced(void)
{
    return atomic_load(&force_cert_agent) != 0;
}

void
sshcore_testing_force_cert_agent(int on)
{
    atomic_store(&force_cert_agent, on != 0);
}

/**
 * Frees what the current method holds: its key, the in-process agent of its
 * certificate, and the agent socket it handed libssh. libssh would keep an
 * agent socket it opened itself until ssh_free, and a socket set later would
 * replace it without closing it, so the core opens every agent socket itself
 * and takes it back from libssh (ssh_set_agent_socket with no socket: libssh
 * forgets it, closing nothing) before closing it.
 */
void
sshcore__auth_release(sshcore_conn *conn)
{
    if (conn->setup->cert_agent != NULL) {
        sshcore__cert_agent_stop(conn->session, conn->setup->cert_agent);
        conn->setup->cert_agent = NULL;
    }
    if (conn->setup->agent_fd >= 0) {
        if (conn->session != NULL) {
            (void)ssh_set_agent_socket(conn->session, SSH_INVALID_SOCKET);
        }
        close(conn->setup->agent_fd);
        conn->setup->agent_fd = -1;
    }
    if (conn->setup->key != NULL) {
        ssh_key_free(conn->setup->key);
        conn->setup->key = NULL;
    }
}

/**
 * Connects to the agent at `path` (the method's socket, else SSH_AUTH_SOCK)
 * and hands the socket to libssh; false with errno set when it cannot.
 */
bool
sshcore__agent_connect(sshcore_conn *conn, const char *path)
{
    struct sockaddr_un addr;
    int fd = -1;

    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(addr.sun_path)) {
        errno = ENAMETOOLONG;
        return false;
    }
    memcpy(addr.sun_path, path, strlen(path));
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return false;
    }
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 ||
        ssh_set_agent_socket(conn->session, fd) != SSH_OK) {
        int saved = errno;
        close(fd);
        errno = saved;
        return false;
    }
    conn->setup->agent_fd = fd;
    return true;
}
