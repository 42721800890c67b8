#!/usr/bin/env bash
# A throwaway dropbear server on 127.0.0.1 for interop tests (same test user as test-sshd.sh).
#
#   scripts/test-dropbear.sh prepare DIR   -> keys and DIR/dropbear.env; the caller runs
#       /usr/sbin/dropbear -F -E -m -w -p 127.0.0.1:$DROPBEAR_PORT -r DIR/dropbear_ed25519 ...
#
# Dropbear reads public keys only from the user's ~/.ssh/authorized_keys: the fixture's
# id_ed25519.pub is appended there once (under the fixture lock).
set -euo pipefail
# shellcheck source=lib-fixture.sh
. "$(dirname "$0")/lib-fixture.sh"
cmd=${1:?usage: test-dropbear.sh prepare DIR}
dir=${2:?usage: test-dropbear.sh prepare DIR}
[ "$cmd" = prepare ] || { echo "unknown command $cmd" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
command -v /usr/sbin/dropbear >/dev/null || { echo "test-dropbear.sh: dropbear missing (apt-get install dropbear-bin)" >&2; exit 1; }

bash "$here/test-sshd.sh" prepare "$dir" >/dev/null   # user, password, user keys
user=${SSHKIT_TEST_USER:-sshkit-test}

for t in ed25519 ecdsa rsa; do
    if [ ! -f "$dir/dropbear_$t" ]; then
        if [ "$t" = rsa ]; then size=(-s 3072); else size=(); fi
        dropbearkey -t "$t" "${size[@]}" -f "$dir/dropbear_$t" >/dev/null 2>&1
    fi
    dropbearkey -y -f "$dir/dropbear_$t" | grep -E '^(ssh-|ecdsa-)' > "$dir/dropbear_$t.pub"
done

home=$(getent passwd "$user" | cut -d: -f6)
(
    flock 9
    install -d -m 700 -o "$user" -g "$user" "$home/.ssh"
    touch "$home/.ssh/authorized_keys"
    grep -qxF "$(cat "$dir/id_ed25519.pub")" "$home/.ssh/authorized_keys" || cat "$dir/id_ed25519.pub" >> "$home/.ssh/authorized_keys"
    chown "$user:$user" "$home/.ssh/authorized_keys"
    chmod 600 "$home/.ssh/authorized_keys"
) 9>"/var/lib/$user.lock"

port=$(free_port)

fp() { ssh-keygen -lf "$1" | awk '{print $2}'; }
cat > "$dir/dropbear.env" <<ENV
DROPBEAR_PORT=$port
DROPBEAR_FP_ED25519=$(fp "$dir/dropbear_ed25519.pub")
DROPBEAR_FP_ECDSA=$(fp "$dir/dropbear_ecdsa.pub")
DROPBEAR_FP_RSA=$(fp "$dir/dropbear_rsa.pub")
ENV
cat "$dir/dropbear.env"
