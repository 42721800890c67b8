#!/usr/bin/env bash
# A throwaway OpenSSH server on 127.0.0.1 for the tests, the demo and the benchmarks.
#
#   scripts/test-sshd.sh start DIR [extra sshd_config lines...]   -> starts sshd, writes DIR/env
#   scripts/test-sshd.sh prepare DIR [extra lines...]  -> the same without starting sshd (the
#                                    caller runs: /usr/sbin/sshd -D -e -f DIR/sshd_config)
#   scripts/test-sshd.sh stop DIR
#
# start: ensures the test user (default sshkit-test, login shell /bin/sh, a clean
# home) exists with a random password (made once per machine), makes host keys and user keys in
# DIR (Ed25519/ECDSA/RSA; OpenSSH and PEM formats; with and without a
# passphrase), picks a free port and starts sshd bound to 127.0.0.1 only.
# SSHKIT_LISTEN_ADDRESS=10.213.x.y (prepare only) binds it instead to the address of a
# network namespace the calling test created; the test runs sshd inside that namespace.
# Needs root (sshd with password and PAM authentication, useradd, chpasswd).
set -euo pipefail
# shellcheck source=lib-fixture.sh
. "$(dirname "$0")/lib-fixture.sh"

cmd=${1:?usage: test-sshd.sh start|stop DIR}
dir=${2:?usage: test-sshd.sh start|stop DIR}
shift 2
user=${SSHKIT_TEST_USER:-sshkit-test}
passphrase=sshkit-passphrase

stop() {
    if [ -f "$dir/sshd.pid" ]; then
        pid=$(cat "$dir/sshd.pid")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$dir/sshd.pid"
    fi
}

case "$cmd" in
stop) stop; exit 0 ;;
start|prepare) ;;
*) echo "unknown command $cmd" >&2; exit 2 ;;
esac

[ "$(id -u)" = 0 ] || { echo "test-sshd.sh: needs root (run the tests as root, as CI does)" >&2; exit 1; }
command -v /usr/sbin/sshd >/dev/null || { echo "test-sshd.sh: /usr/sbin/sshd missing (apt-get install openssh-server)" >&2; exit 1; }

# The user and its random password are made once per machine, under a lock, so
# that fixtures started at the same time (parallel tests, the demo, benchmarks)
# agree on the password. It is kept root-only in /var/lib/$user.password.
pwfile="/var/lib/$user.password"
(
    flock 9
    if ! id "$user" >/dev/null 2>&1; then
        useradd --create-home --home-dir "/var/lib/$user" --shell /bin/sh "$user"
        rm -f "$pwfile"
    fi
    if [ ! -s "$pwfile" ]; then
        (umask 077; head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 20 > "$pwfile.new")
        echo "$user:$(cat "$pwfile.new")" | chpasswd
        mv "$pwfile.new" "$pwfile"
    fi
) 9>"/var/lib/$user.lock"
password=$(cat "$pwfile")

mkdir -p "$dir" /run/sshd
chmod 755 "$dir"
keygen() { ssh-keygen -q "$@" -C sshkit-test </dev/null >/dev/null; }
for t in ed25519 ecdsa rsa; do
    [ -f "$dir/host_$t" ] || keygen -t "$t" -N '' -f "$dir/host_$t"
done
[ -f "$dir/id_ed25519" ] || keygen -t ed25519 -N '' -f "$dir/id_ed25519"
[ -f "$dir/id_ed25519_pass" ] || keygen -t ed25519 -N "$passphrase" -f "$dir/id_ed25519_pass"
[ -f "$dir/id_ecdsa_pem" ] || keygen -t ecdsa -m PEM -N '' -f "$dir/id_ecdsa_pem"
[ -f "$dir/id_rsa_pem_pass" ] || keygen -t rsa -b 3072 -m PEM -N "$passphrase" -f "$dir/id_rsa_pem_pass"
[ -f "$dir/id_rsa" ] || keygen -t rsa -b 3072 -N '' -f "$dir/id_rsa"
[ -f "$dir/id_unauthorized" ] || keygen -t ed25519 -N '' -f "$dir/id_unauthorized"
cat "$dir/id_ed25519.pub" "$dir/id_ed25519_pass.pub" "$dir/id_ecdsa_pem.pub" \
    "$dir/id_rsa_pem_pass.pub" "$dir/id_rsa.pub" > "$dir/authorized_keys"
chmod 644 "$dir/authorized_keys" "$dir"/*.pub

stop
port=$(free_port)
# a test that runs sshd inside a network namespace it made binds to that namespace's address
listen=${SSHKIT_LISTEN_ADDRESS:-127.0.0.1}
case $listen in
127.0.0.1 | 10.213.*) ;;
*) echo "SSHKIT_LISTEN_ADDRESS must be 127.0.0.1 or a test namespace address (10.213.x.x)" >&2; exit 2 ;;
esac
: > "$dir/sshd_config"
# sshd keeps the first value of most keywords but the last of a few (MaxStartups,
# for one): a default line is left out when the caller gave that keyword. A caller's
# Subsystem line replaces the default sftp one (sshd rejects a second definition),
# e.g. "Subsystem other /bin/false" for a server without SFTP.
given=" "
for line in "$@"; do
    echo "$line" >> "$dir/sshd_config"
    given+="$(printf '%s' "${line%% *}" | tr '[:upper:]' '[:lower:]') "
done
defaults=(
    "Port $port"
    "ListenAddress $listen"
    "HostKey $dir/host_ed25519"
    "HostKey $dir/host_ecdsa"
    "HostKey $dir/host_rsa"
    "PidFile $dir/sshd.pid.unused"
    "AuthorizedKeysFile $dir/authorized_keys"
    "StrictModes no"
    "UsePAM yes"
    "PasswordAuthentication yes"
    "KbdInteractiveAuthentication yes"
    "PubkeyAuthentication yes"
    "PermitRootLogin no"
    "AllowUsers $user"
    "MaxSessions 64"
    "MaxStartups 100:30:200"
    "MaxAuthTries 20"
    "LogLevel VERBOSE"
    "AcceptEnv SSHKIT_*"
    "Subsystem sftp internal-sftp"
)
for line in "${defaults[@]}"; do
    keyword=$(printf '%s' "${line%% *}" | tr '[:upper:]' '[:lower:]')
    case $keyword in
        # these accumulate: the caller's lines add to the defaults
        port | listenaddress | hostkey | allowusers | acceptenv) ;;
        *) [[ "$given" == *" $keyword "* ]] && continue ;;
    esac
    echo "$line" >> "$dir/sshd_config"
done

/usr/sbin/sshd -t -f "$dir/sshd_config"
if [ "$cmd" = start ]; then
    /usr/sbin/sshd -D -e -f "$dir/sshd_config" >>"$dir/sshd.log" 2>&1 &
    echo $! > "$dir/sshd.pid"
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
        kill -0 "$(cat "$dir/sshd.pid")" 2>/dev/null || { cat "$dir/sshd.log" >&2; exit 1; }
        sleep 0.05
    done
fi

fp() { ssh-keygen -lf "$1" | awk '{print $2}'; }
cat > "$dir/env" <<ENV
SSHKIT_TEST_HOST=$listen
SSHKIT_TEST_PORT=$port
SSHKIT_TEST_PID=$(cat "$dir/sshd.pid" 2>/dev/null || echo 0)
SSHKIT_TEST_USER=$user
SSHKIT_TEST_PASSWORD=$password
SSHKIT_TEST_PASSPHRASE=$passphrase
SSHKIT_TEST_DIR=$dir
SSHKIT_TEST_FP_ED25519=$(fp "$dir/host_ed25519.pub")
SSHKIT_TEST_FP_ECDSA=$(fp "$dir/host_ecdsa.pub")
SSHKIT_TEST_FP_RSA=$(fp "$dir/host_rsa.pub")
ENV
chmod 600 "$dir/env"
cat "$dir/env"
