/*
 * sshcore_auth_key.c - a key method's key, on the worker: the file's
 * permissions checked as ssh checks them, the key imported (its passphrase
 * asked for when it is encrypted and none was given), its certificate
 * attached.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "sshcore_internal.h"

/**
 * Like ssh(1): a private key file of ours that others may read or write is
 * refused (OpenSSH's "UNPROTECTED PRIVATE KEY FILE"), before anything reads it.
 * libssh itself does not look. Returns false (the method is unusable) then.
 */
static bool
key_file_permissions_ok(sshcore_conn *conn, const sshcore_auth_method *m)
{
    struct stat st;
    char detail[400];
    const char *path = m->secret;

    if (path == NULL || stat(path, &st) != 0 || st.st_uid != geteuid() ||
        (st.st_mode & 077) == 0) {
        return true; /* a missing file fails in the import, with its own text */
    }
    snprintf(detail,
             sizeof(detail),
             "%s: permissions %04o are too open: a private key must not be "
             "accessible to others "
             "(chmod 600), as ssh requires",
             path,
             (unsigned)(st.st_mode & 07777));
    sshcore__auth_method_unusable(conn,
                                  m,
                                  SSHCORE_E_PRIVATE_KEY,
                                  NULL,
                                  0,
                                  detail);
    return false;
}

/**
 * libssh asks this for the passphrase of an encrypted key imported without
 * one: it only notes that the key is encrypted (the passphrase is asked for
 * with the worker free, see ask_passphrase) and declines.
 */
static int
note_encrypted(const char *prompt,
               char *buf,
               size_t len,
               int echo,
               int verify,
               void *userdata)
{
    (void)prompt;
    (void)echo;
    (void)verify;
    if (buf != NULL && len > 0) {
        buf[0] = '\0';
    }
    *(bool *)userdata = true;
    return -1;
}

/**
 * ASK_PASSPHRASE: asks the caller for the key's passphrase through the kbdint
 * callback (one prompt, `passphrase` set) and waits in
 * SSHCORE_PHASE_ANSWER_WAIT; the reply lands in
 * conn->setup->prompted_passphrase, or skips the key.
 */
static void
ask_passphrase(sshcore_conn *conn, const sshcore_auth_method *m)
{
    char prompt[600];
    const char *path = m->kind == SSHCORE_AUTH_KEY_FILE ? m->secret : NULL;

    /* ssh's wording (sshconnect2.c) */
    if (path != NULL) {
        snprintf(prompt,
                 sizeof(prompt),
                 conn->setup->passphrase_attempts == 0
                     ? "Enter passphrase for key '%s': "
                     : "Bad passphrase, try again for %s: ",
                 path);
    } else {
        snprintf(prompt,
                 sizeof(prompt),
                 "%s",
                 conn->setup->passphrase_attempts == 0
                     ? "Enter passphrase for the key: "
                     : "Bad passphrase, try again: ");
    }
    sshcore__auth_ask_caller_once(conn,
                                  prompt,
                                  true,
                                  path,
                                  conn->setup->passphrase_attempts + 1);
}

/**
 * Loads the method's private key (and its certificate) into conn->setup->key.
 * Returns false when the method is unusable (handled by method_unusable), or
 * when the key's passphrase is being asked for (the worker waits for it).
 */
bool
sshcore__auth_load_key(sshcore_conn *conn, const sshcore_auth_method *m)
{
    char detail[400];
    const char *where = m->kind == SSHCORE_AUTH_KEY_FILE
                            ? (m->secret != NULL ? m->secret : "")
                            : "key given in memory";
    ssh_key cert = NULL;
    bool matches;
    int irc;
    /* a passphrase of the caller's, else one asked for */
    bool asks =
        m->passphrase == NULL && (m->flags & SSHCORE_AUTH_ASK_PASSPHRASE) != 0;
    const char *passphrase = m->passphrase != NULL
                                 ? m->passphrase
                                 : conn->setup->prompted_passphrase;
    bool encrypted = false;
    ssh_auth_callback probe = passphrase == NULL ? note_encrypted : NULL;
    unsigned tries = m->attempts > 0 ? m->attempts : 3;

    if (m->kind == SSHCORE_AUTH_KEY_FILE && !key_file_permissions_ok(conn, m)) {
        return false;
    }
    if (m->kind == SSHCORE_AUTH_KEY_FILE) {
        irc = ssh_pki_import_privkey_file(m->secret != NULL ? m->secret : "",
                                          passphrase,
                                          probe,
                                          &encrypted,
                                          &conn->setup->key);
    } else {
        irc = ssh_pki_import_privkey_base64(m->secret != NULL ? m->secret : "",
                                            passphrase,
                                            probe,
                                            &encrypted,
                                            &conn->setup->key);
    }
    if ((irc != SSH_OK || conn->setup->key == NULL) && asks &&
        (encrypted || conn->setup->prompted_passphrase != NULL)) {
        /* encrypted: ask; a wrong answer: ask again, as ssh does */
        if (conn->setup->prompted_passphrase != NULL) {
            conn->setup->passphrase_attempts++;
            sshcore__wipe_secret(&conn->setup->prompted_passphrase);
        }
        ssh_key_free(conn->setup->key);
        conn->setup->key = NULL;
        if (conn->setup->passphrase_attempts < tries) {
            ask_passphrase(conn, m);
            return false;
        }
    }
    sshcore__wipe_secret(
        &conn->setup->prompted_passphrase); /* the key is loaded, or not */
    if (irc != SSH_OK || conn->setup->key == NULL) {
        /* the import functions do not set the session's error text */
        if (conn->setup->passphrase_attempts > 0) {
            snprintf(detail,
                     sizeof(detail),
                     "%s: wrong passphrase (asked %u times)",
                     where,
                     tries);
        } else {
            snprintf(detail,
                     sizeof(detail),
                     encrypted ? "%s: encrypted, and no passphrase was given"
                               : "%s: unreadable, unsupported format, or wrong "
                                 "passphrase",
                     where);
        }
        sshcore__auth_method_unusable(conn,
                                      m,
                                      SSHCORE_E_PRIVATE_KEY,
                                      m->kind == SSHCORE_AUTH_KEY_FILE
                                          ? "ssh_pki_import_privkey_file"
                                          : "ssh_pki_import_privkey_base64",
                                      irc,
                                      detail);
        return false;
    }
    if (m->certificate == NULL) {
        return true;
    }
    irc = ssh_pki_import_cert_file(m->certificate, &cert);
    if (irc != SSH_OK || cert == NULL) {
        snprintf(detail,
                 sizeof(detail),
                 "%s: certificate unreadable or not an OpenSSH certificate",
                 m->certificate);
        sshcore__auth_method_unusable(conn,
                                      m,
                                      SSHCORE_E_PRIVATE_KEY,
                                      "ssh_pki_import_cert_file",
                                      irc,
                                      detail);
        return false;
    }
    matches = sshcore__cert_matches_key(cert, conn->setup->key);
    irc = matches ? ssh_pki_copy_cert_to_privkey(cert, conn->setup->key)
                  : SSH_ERROR;
    if ((irc != SSH_OK || sshcore__cert_agent_forced()) && matches &&
        ssh_key_type(conn->setup->key) == SSH_KEYTYPE_ED25519) {
        /* libssh 0.11.0-0.11.3: ssh_key_cmp(cert, key) refuses every Ed25519
         * pair (fixed upstream in 0.11.4), so the certificate cannot be
         * attached; ssh_userauth_agent gets it from an agent of ours */
        conn->setup->cert_agent =
            sshcore__cert_agent_start(conn->session, cert, conn->setup->key);
        irc = conn->setup->cert_agent != NULL ? SSH_OK : SSH_ERROR;
    }
    ssh_key_free(cert);
    if (irc != SSH_OK) {
        snprintf(detail,
                 sizeof(detail),
                 "%s: certificate is not for the key %s",
                 m->certificate,
                 where);
        sshcore__auth_method_unusable(conn,
                                      m,
                                      SSHCORE_E_PRIVATE_KEY,
                                      "ssh_pki_copy_cert_to_privkey",
                                      irc,
                                      detail);
        return false;
    }
    return true;
}
