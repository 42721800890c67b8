#!/usr/bin/env bash
# README command 1: install, build, start a throwaway sshd on 127.0.0.1, and run
# the example binaries against it. Everything is removed again at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
swift build --product ssh-exec
swift build --product known-hosts
swift build --product ssh-shell
swift build --product ssh-sftp
swift build --product ssh-forward
swift build --product agent-sessions
bin=$(swift build --show-bin-path)

dir=$(mktemp -d /tmp/sshkit-demo.XXXXXX)
agents=; repo=
cleanup() {
    tmux -S "$dir/tmux.sock" kill-server 2>/dev/null || true
    if [ -n "$repo" ]; then
        runuser -u "$SSHKIT_TEST_USER" -- tmux -L agent-sessions kill-server 2>/dev/null || true
        rm -rf "$repo" "$agents"
    fi
    bash scripts/test-sshd.sh stop "$dir"
    rm -rf "$dir"
}
trap cleanup EXIT
bash scripts/test-sshd.sh start "$dir" >/dev/null
# shellcheck disable=SC1091
. "$dir/env"
echo "throwaway sshd on 127.0.0.1:$SSHKIT_TEST_PORT, host key $SSHKIT_TEST_FP_ED25519"

run() { echo; echo "\$ $*"; "$@"; }
common=(--host 127.0.0.1 --port "$SSHKIT_TEST_PORT" --user "$SSHKIT_TEST_USER"
        --fingerprint "$SSHKIT_TEST_FP_ED25519" --fingerprint "$SSHKIT_TEST_FP_ECDSA" --fingerprint "$SSHKIT_TEST_FP_RSA")

echo; echo "== known-hosts: scan the server's host keys (no authentication), record them hashed"
run "$bin/known-hosts" scan 127.0.0.1 -p "$SSHKIT_TEST_PORT"
run "$bin/known-hosts" add --file "$dir/known_hosts" 127.0.0.1 -p "$SSHKIT_TEST_PORT"
run "$bin/known-hosts" check --file "$dir/known_hosts" 127.0.0.1 -p "$SSHKIT_TEST_PORT"

echo; echo "== exec: key authentication, pinned host key"
run "$bin/ssh-exec" "${common[@]}" -n --key "$dir/id_ed25519" -- 'echo "hello from $(uname -n) as $(id -un)"'
echo; echo "== exec: standard input goes to the command (then EOF), like ssh host cmd"
echo "\$ printf 'one\\ntwo\\n' | ssh-exec ... -- 'tr a-z A-Z'"
printf 'one\ntwo\n' | "$bin/ssh-exec" "${common[@]}" --key "$dir/id_ed25519" -- 'tr a-z A-Z'
echo; echo "== exec: password authentication, stderr and the exit status pass through"
set +e
SSHKIT_PASSWORD=$SSHKIT_TEST_PASSWORD run "$bin/ssh-exec" "${common[@]}" -n --password-from-env -- 'echo to stderr >&2; exit 3'
echo "(exit status $?)"
echo; echo "== exec: a wrong pinned fingerprint is refused before authentication"
run "$bin/ssh-exec" --host 127.0.0.1 --port "$SSHKIT_TEST_PORT" --user "$SSHKIT_TEST_USER" \
    -n --key "$dir/id_ed25519" --fingerprint SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA -- true
echo "(exit status $?)"
set -e

echo; echo "== ssh-shell: the login shell on a remote terminal (here fed from a pipe; run it in a"
echo "   terminal for raw mode, Ctrl-C and window resizes, like ssh -t)"
echo "\$ printf 'tty; stty size; echo \$TERM; exit 5\\n' | ssh-shell ..."
set +e
printf 'tty; stty size; echo $TERM; exit 5\n' | TERM=xterm-256color "$bin/ssh-shell" "${common[@]}" --key "$dir/id_ed25519" \
    | tr -d '\r' | grep -v '^$' | tail -n 5
echo "(exit status ${PIPESTATUS[1]})"
set -e

echo; echo "== ssh-sftp: make a directory, upload (atomically), list, download, compare, remove"
work=$(runuser -u "$SSHKIT_TEST_USER" -- mktemp -d /tmp/sshkit-demo-sftp.XXXXXX)
head -c 5000000 /dev/urandom > "$dir/payload"
key=(--key "$dir/id_ed25519")
run "$bin/ssh-sftp" "${common[@]}" "${key[@]}" mkdir -p "$work/inbox"
run "$bin/ssh-sftp" "${common[@]}" "${key[@]}" put "$dir/payload" "$work/inbox/payload.bin"
run "$bin/ssh-sftp" "${common[@]}" "${key[@]}" ls "$work/inbox"
run "$bin/ssh-sftp" "${common[@]}" "${key[@]}" get "$work/inbox/payload.bin" "$dir/payload.back"
run cmp "$dir/payload" "$dir/payload.back" && echo "(identical, $(stat -c %s "$dir/payload.back") bytes)"
run "$bin/ssh-sftp" "${common[@]}" "${key[@]}" rm "$work/inbox/payload.bin"
rm -rf "$work"

echo; echo "== ssh-forward: -L, -D and -R at once (like ssh -N), each reaching this sshd's own port"
echo "\$ ssh-forward ... -L 0:127.0.0.1:$SSHKIT_TEST_PORT -D 0 -R 0:127.0.0.1:$SSHKIT_TEST_PORT &"
"$bin/ssh-forward" "${common[@]}" "${key[@]}" -L "0:127.0.0.1:$SSHKIT_TEST_PORT" -D 0 \
    -R "0:127.0.0.1:$SSHKIT_TEST_PORT" > "$dir/forward.out" &
fpid=$!
for _ in $(seq 1 100); do grep -q '^ready' "$dir/forward.out" && break; sleep 0.1; done
cat "$dir/forward.out"
port_of() { grep "^$1 " "$dir/forward.out" | head -1 | awk '{print $2}' | sed 's/.*://'; }
lport=$(port_of local); dport=$(port_of socks); rport=$(port_of remote)
echo "\$ (the first line from 127.0.0.1:$lport: the forward reaches sshd's banner)"
timeout 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$lport; head -1 <&3"
echo "\$ curl --socks5-hostname 127.0.0.1:$dport telnet://127.0.0.1:$SSHKIT_TEST_PORT (through the SOCKS proxy)"
timeout 10 curl -s --max-time 5 --socks5-hostname "127.0.0.1:$dport" "telnet://127.0.0.1:$SSHKIT_TEST_PORT" < /dev/null | head -1 || true
echo "\$ ssh-exec ... -- read from 127.0.0.1:$rport on the server (back through -R)"
"$bin/ssh-exec" "${common[@]}" -n "${key[@]}" -- "timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/$rport; head -1 <&3'"
kill -TERM "$fpid"
wait "$fpid" && echo "(ssh-forward stopped on SIGTERM, exit status 0)"

echo; echo "== agent-sessions: a coding agent in a git worktree inside tmux on the server, over SSH"
echo "   (the agent is a stand-in: a shell script that writes its prompt to a file and answers"
echo "   each line typed to it; real agents are set up the same way, see Docs/Guide-Agent-Sessions-CLI.md)"
agents=$(mktemp -d /tmp/sshkit-demo-agents.XXXXXX); chmod 755 "$agents"
cat > "$agents/demo-agent" <<'AGENT'
#!/bin/sh
for last in "$@"; do :; done
echo "demo agent in $(pwd)"
printf '%s\n' "$last" > notes.md
while :; do printf 'READY> '; IFS= read -r line || exit 0; echo "got: $line"; printf '%s\n' "$line" >> notes.md; done
AGENT
chmod 755 "$agents/demo-agent"
repo=$(runuser -u "$SSHKIT_TEST_USER" -- mktemp -d /tmp/sshkit-demo-repo.XXXXXX)
runuser -u "$SSHKIT_TEST_USER" -- sh -c "cd '$repo' && git init -q -b main && echo '# app' > README.md && git add . &&
    git -c user.name=Demo -c user.email=demo@example.com commit -q -m 'first commit'"
ashome="$dir/agent-home"
mkdir -p "$ashome/.config/agent-sessions"
printf '{"searchPath": ["%s"], "providers": {"claude": {"binary": "demo-agent"}}}\n' "$agents" \
    > "$ashome/.config/agent-sessions/config.json"
as() { echo; printf '$ agent-sessions'; printf ' %q' "$@"; echo; env -u SSH_AUTH_SOCK HOME="$ashome" "$bin/agent-sessions" "$@"; }
as hosts add demo "$SSHKIT_TEST_USER@127.0.0.1:$SSHKIT_TEST_PORT" --key "$dir/id_ed25519"
as hosts list
as projects add demo "$repo" --name app
as agents demo
as tasks new app "Add a greeting" --agent claude --prompt "write a greeting"
id=$(HOME="$ashome" "$bin/agent-sessions" tasks list --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"][:8])')
as send "$id" "and a farewell"
sleep 1
as status

echo; echo "== agent-sessions attach, in a terminal (a local tmux here); then the SSH connection is killed"
tmux -S "$dir/tmux.sock" new-session -d -s demo -x 100 -y 12 \
    "env -u SSH_AUTH_SOCK HOME='$ashome' '$bin/agent-sessions' attach $id --reconnect-timeout 60; sleep 30"
screen() { tmux -S "$dir/tmux.sock" capture-pane -p -t demo | grep -v '^$' | sed 's/^/  | /'; }
sleep 2; screen
echo "\$ pkill -KILL -f 'sshd: $SSHKIT_TEST_USER'   (the server side of the connection dies)"
pkill -KILL -f "sshd: $SSHKIT_TEST_USER" || true
sleep 3
echo "(agent-sessions noticed, reconnected and reattached; typing goes to the same agent:)"
tmux -S "$dir/tmux.sock" send-keys -t demo "typed after the drop" Enter
sleep 1; screen
echo "(Ctrl-] detaches; the agent keeps running)"
tmux -S "$dir/tmux.sock" send-keys -t demo C-]
sleep 1; screen
as log "$id" -n 4
as diff "$id" --stat
set +e
as tasks delete "$id"
echo "(exit status $?: the worktree holds uncommitted work)"
set -e
as tasks delete "$id" --force
as status
