/*
 * sshcore_keys.c - key helpers that need no connection: a certificate checked
 * against its key (libssh 0.10 does not), SHA-256 fingerprints, HMAC-SHA1 for
 * hashed known_hosts entries, and the plain digests the Swift layers use.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "sshcore_internal.h"

/** Decodes base64 into a new buffer; returns its length, or -1. */
static long
decode_base64(const char *text, unsigned char **out)
{
    size_t len = strlen(text);
    long n;
    unsigned char *buf = NULL;

    *out = NULL;
    if (len == 0 || len % 4 != 0 || len > (1u << 20)) {
        return -1;
    }
    buf = malloc(len);
    if (buf == NULL) {
        return -1;
    }
    n = EVP_DecodeBlock(buf, (const unsigned char *)text, (int)len);
    if (n < 0) {
        free(buf);
        return -1;
    }
    n -= (text[len - 1] == '=') +
         (text[len - 2] == '='); /* DecodeBlock counts the padding */
    *out = buf;
    return n;
}

/** Skips one SSH string (uint32 length, bytes); returns the new offset or -1.
 */
static long
skip_string(const unsigned char *blob, long len, long at)
{
    unsigned long n;

    if (at < 0 || at + 4 > len) {
        return -1;
    }
    n = ((unsigned long)blob[at] << 24) | ((unsigned long)blob[at + 1] << 16) |
        ((unsigned long)blob[at + 2] << 8) | (unsigned long)blob[at + 3];
    if (n > (unsigned long)(len - at - 4)) {
        return -1;
    }
    return at + 4 + (long)n;
}

/**
 * Whether `cert` certifies the public half of `key`: the certificate blob
 * (type, nonce, then the key's own fields) carries the same fields as the key's
 * plain blob (type, fields). libssh 0.10's ssh_pki_copy_cert_to_privkey does
 * not check.
 */
bool
sshcore__cert_matches_key(ssh_key cert, ssh_key key)
{
    char *cert_b64 = NULL;
    char *key_b64 = NULL;
    unsigned char *cert_blob = NULL;
    unsigned char *key_blob = NULL;
    long cert_len;
    long key_len;
    long cert_at;
    long key_at;
    bool ok = false;

    if (ssh_pki_export_pubkey_base64(cert, &cert_b64) != SSH_OK ||
        ssh_pki_export_pubkey_base64(key, &key_b64) != SSH_OK) {
        goto out;
    }
    cert_len = decode_base64(cert_b64, &cert_blob);
    key_len = decode_base64(key_b64, &key_blob);
    if (cert_len < 0 || key_len < 0) {
        goto out;
    }
    cert_at =
        skip_string(cert_blob,
                    cert_len,
                    skip_string(cert_blob, cert_len, 0)); /* type, nonce */
    key_at = skip_string(key_blob, key_len, 0);           /* type */
    ok = cert_at >= 0 && key_at >= 0 && key_len - key_at > 0 &&
         cert_len - cert_at >= key_len - key_at &&
         memcmp(cert_blob + cert_at,
                key_blob + key_at,
                (size_t)(key_len - key_at)) == 0;
out:
    ssh_string_free_char(cert_b64);
    ssh_string_free_char(key_b64);
    free(cert_blob);
    free(key_blob);
    return ok;
}

int
sshcore_key_fingerprint_sha256(const char *type,
                               const char *base64,
                               char *out,
                               size_t out_len)
{
    ssh_key key = NULL;
    unsigned char *hash = NULL;
    size_t hlen = 0;
    char *fp = NULL;
    enum ssh_keytypes_e kt = ssh_key_type_from_name(type);
    int rc = SSHCORE_E_INVALID_ARGUMENT;

    if (out_len > 0) {
        out[0] = '\0';
    }
    if (kt == SSH_KEYTYPE_UNKNOWN ||
        ssh_pki_import_pubkey_base64(base64, kt, &key) != SSH_OK) {
        goto out;
    }
    if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen) !=
        0) {
        goto out;
    }
    fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen);
    if (fp == NULL) {
        goto out;
    }
    sshcore__copy_str(out, out_len, fp);
    rc = SSHCORE_E_OK;
out:
    if (fp != NULL) {
        ssh_string_free_char(fp);
    }
    if (hash != NULL) {
        ssh_clean_pubkey_hash(&hash);
    }
    ssh_key_free(key);
    return rc;
}

int
sshcore_hmac_sha1(const uint8_t *key,
                  size_t key_len,
                  const uint8_t *data,
                  size_t data_len,
                  uint8_t *out)
{
    unsigned int len = 20;

    if (HMAC(EVP_sha1(), key, (int)key_len, data, data_len, out, &len) ==
            NULL ||
        len != 20) {
        return SSHCORE_E_SYSTEM;
    }
    return SSHCORE_E_OK;
}

int
sshcore_digest(int sha256, const uint8_t *data, size_t len, uint8_t *out)
{
    unsigned int n = 0;
    unsigned int want = sha256 ? 32 : 20;

    if (EVP_Digest(data,
                   len,
                   out,
                   &n,
                   sha256 ? EVP_sha256() : EVP_sha1(),
                   NULL) != 1 ||
        n != want) {
        return SSHCORE_E_SYSTEM;
    }
    return SSHCORE_E_OK;
}
