"""A stand-in for a browser's push service, for the Web Push test of `agent-sessions serve`.

It makes a subscription as a browser would (a P-256 key pair and a 16-byte secret), prints it
as one JSON line ({"step": "subscription", ...}), then takes push messages on
http://127.0.0.1:PORT/push/<id>. Each message is checked as a push service and a browser
would: the VAPID JWT's ES256 signature with the key in the Authorization header, its
audience and expiry; then the body is decrypted with http_ece (PyPI, RFC 8291's reference
implementation in Python), with the subscription's private key and secret. Each message
prints one JSON line ({"step": "push", ...}). A path given by --gone answers 410, as a
push service does for a subscription that ended. It stops after --seconds.
"""
import argparse
import base64
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import http_ece
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64u(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64u(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def say(step, **fields):
    fields["step"] = step
    print(json.dumps(fields), flush=True)


def check_vapid(header, audience):
    """What is wrong with an Authorization header, or None."""
    if not header or not header.startswith("vapid "):
        return "no vapid authorization"
    parts = dict(p.strip().split("=", 1) for p in header[len("vapid "):].split(","))
    token, key = parts.get("t", ""), parts.get("k", "")
    try:
        head, claims, signature = token.split(".")
        public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64u(key))
        raw = unb64u(signature)
        der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
        public.verify(der, (head + "." + claims).encode(), ec.ECDSA(hashes.SHA256()))
    except (ValueError, InvalidSignature) as e:
        return "bad signature: %r" % e
    c = json.loads(unb64u(claims))
    if c.get("aud") != audience:
        return "audience %r, not %r" % (c.get("aud"), audience)
    if not (time.time() < c.get("exp", 0) <= time.time() + 24 * 3600):
        return "expiry out of range"
    if not str(c.get("sub", "")).startswith(("mailto:", "https:")):
        return "no subject"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--gone", default="gone")
    a = ap.parse_args()

    private = ec.generate_private_key(ec.SECP256R1())
    public = private.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    auth = os.urandom(16)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            audience = "http://127.0.0.1:%d" % self.server.server_address[1]
            if self.path.endswith("/" + a.gone):
                self.send_response(410)
                self.end_headers()
                say("gone", path=self.path)
                return
            problem = check_vapid(self.headers.get("Authorization"), audience)
            try:
                plain = http_ece.decrypt(body, private_key=private, auth_secret=auth, version="aes128gcm")
                payload = json.loads(plain)
            except Exception as e:  # what the test reports
                payload, problem = None, problem or ("cannot decrypt: %r" % e)
            self.send_response(201 if problem is None else 400)
            self.end_headers()
            say("push", path=self.path, payload=payload, problem=problem,
                encoding=self.headers.get("Content-Encoding"), ttl=self.headers.get("TTL"), size=len(body))

    server = HTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    say("subscription", endpoint="http://127.0.0.1:%d/push/%s" % (port, b64u(os.urandom(6))),
        gone="http://127.0.0.1:%d/push/%s" % (port, a.gone), p256dh=b64u(public), auth=b64u(auth))
    threading.Timer(a.seconds, server.shutdown).start()
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
