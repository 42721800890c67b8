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
agents=; repo=; origin=; model=; served=
cleanup() {
    [ -z "$model" ] || kill "$model" 2>/dev/null || true
    [ -z "$served" ] || kill "$served" 2>/dev/null || true
    tmux -S "$dir/tmux.sock" kill-server 2>/dev/null || true
    if [ -n "$repo" ]; then
        runuser -u "$SSHKIT_TEST_USER" -- tmux -L agent-sessions kill-server 2>/dev/null || true
        rm -rf "$repo" "$agents"
    fi
    [ -z "$origin" ] || rm -rf "$origin" "$origin.bundle"
    bash scripts/test-sshd.sh stop "$dir"
    rm -rf "$dir"
}
trap cleanup EXIT
bash scripts/test-sshd.sh start "$dir" >/dev/null
# shellcheck disable=SC1091
. "$dir/env"
echo "throwaway sshd on 127.0.0.1:$SSHKIT_TEST_PORT, host key $SSHKIT_TEST_FP_ED25519"

run() { echo; echo "\$ $*"; "$@"; }

echo; echo "== known-hosts: scan the server's host keys (no authentication), record them hashed"
run "$bin/known-hosts" scan 127.0.0.1 -p "$SSHKIT_TEST_PORT"
run "$bin/known-hosts" add --file "$dir/known_hosts" 127.0.0.1 -p "$SSHKIT_TEST_PORT"
run "$bin/known-hosts" check --file "$dir/known_hosts" 127.0.0.1 -p "$SSHKIT_TEST_PORT"

# the example tools read an OpenSSH setup, as ssh does: here a config file of the demo's
# own (-F) with a host alias, its key and that known_hosts file
cat > "$dir/config" <<CONFIG
Host demo demo-password
    HostName 127.0.0.1
    Port $SSHKIT_TEST_PORT
    User $SSHKIT_TEST_USER
    IdentitiesOnly yes
    UserKnownHostsFile $dir/known_hosts
    GlobalKnownHostsFile /dev/null
Host demo
    IdentityFile $dir/id_ed25519
Host demo-password
    IdentityFile $dir/no-key
    KbdInteractiveAuthentication no
CONFIG
echo; echo "== the demo's ssh_config ($dir/config):"; sed 's/^/  | /' "$dir/config"
export SSH_AUTH_SOCK=   # the demo's keys only, not your agent's
cfg=(-F "$dir/config")

echo; echo "== exec: like ssh demo cmd (key authentication, the host key checked against known_hosts)"
run "$bin/ssh-exec" "${cfg[@]}" -n demo 'echo "hello from $(uname -n) as $(id -un)"'
echo; echo "== exec: standard input goes to the command (then EOF), like ssh host cmd"
echo "\$ printf 'one\\ntwo\\n' | ssh-exec -F config demo tr a-z A-Z"
printf 'one\ntwo\n' | "$bin/ssh-exec" "${cfg[@]}" demo tr a-z A-Z
echo; echo "== exec: the password asked for (here answered by an SSH_ASKPASS program); stderr and the exit status pass through"
printf '#!/bin/sh\necho "(askpass was asked: $1)" >&2\ncat %s/password\n' "$dir" > "$dir/askpass"
printf '%s\n' "$SSHKIT_TEST_PASSWORD" > "$dir/password"; chmod 700 "$dir/askpass"; chmod 600 "$dir/password"
set +e
SSH_ASKPASS=$dir/askpass SSH_ASKPASS_REQUIRE=force run "$bin/ssh-exec" "${cfg[@]}" -n demo-password 'echo to stderr >&2; exit 3'
echo "(exit status $?)"
echo; echo "== exec: a host whose key is not in known_hosts is refused when nobody can be asked (BatchMode)"
run "$bin/ssh-exec" "${cfg[@]}" -o BatchMode=yes -o UserKnownHostsFile=/dev/null -n demo true
echo "(exit status $?)"
echo; echo "== exec: a host key that changed is refused"
echo "[127.0.0.1]:$SSHKIT_TEST_PORT $(cut -d' ' -f1,2 "$dir/id_ed25519.pub")" > "$dir/wrong_known_hosts"
run "$bin/ssh-exec" "${cfg[@]}" -o UserKnownHostsFile="$dir/wrong_known_hosts" -n demo true
echo "(exit status $?)"
set -e
echo; echo "== exec on a terminal (a local tmux here): an unknown host key is shown and asked about, as ssh asks"
: > "$dir/new_known_hosts"
tmux -S "$dir/tmux.sock" new-session -d -s prompt -x 110 -y 10 \
    "'$bin/ssh-exec' -F '$dir/config' -o UserKnownHostsFile='$dir/new_known_hosts' demo 'echo accepted and ran'; sleep 30"
for _ in $(seq 1 50); do tmux -S "$dir/tmux.sock" capture-pane -p -t prompt | grep -q 'fingerprint])?' && break; sleep 0.1; done
tmux -S "$dir/tmux.sock" send-keys -t prompt yes Enter
for _ in $(seq 1 50); do tmux -S "$dir/tmux.sock" capture-pane -p -t prompt | grep -q 'accepted and ran' && break; sleep 0.1; done
tmux -S "$dir/tmux.sock" capture-pane -p -t prompt | grep -v '^$' | sed 's/^/  | /'
tmux -S "$dir/tmux.sock" kill-session -t prompt
echo "(recorded in new_known_hosts: $(cut -d' ' -f1,2 "$dir/new_known_hosts"))"

echo; echo "== ssh-shell: the login shell on a remote terminal (here fed from a pipe; run it in a"
echo "   terminal for raw mode, Ctrl-C and window resizes, like ssh -t)"
echo "\$ printf 'tty; stty size; echo \$TERM; exit 5\\n' | ssh-shell -F config demo"
set +e
printf 'tty; stty size; echo $TERM; exit 5\n' | TERM=xterm-256color "$bin/ssh-shell" "${cfg[@]}" demo \
    | tr -d '\r' | grep -v '^$' | tail -n 5
echo "(exit status ${PIPESTATUS[1]})"
set -e

echo; echo "== ssh-sftp: copies like scp (host:path), operations like sftp's batch mode"
work=$(runuser -u "$SSHKIT_TEST_USER" -- mktemp -d /tmp/sshkit-demo-sftp.XXXXXX)
head -c 5000000 /dev/urandom > "$dir/payload"
run "$bin/ssh-sftp" "${cfg[@]}" demo mkdir -p "$work/inbox"
run "$bin/ssh-sftp" "${cfg[@]}" "$dir/payload" "demo:$work/inbox/payload.bin"
run "$bin/ssh-sftp" "${cfg[@]}" demo ls "$work/inbox"
run "$bin/ssh-sftp" "${cfg[@]}" "demo:$work/inbox/payload.bin" "$dir/payload.back"
run cmp "$dir/payload" "$dir/payload.back" && echo "(identical, $(stat -c %s "$dir/payload.back") bytes)"
run "$bin/ssh-sftp" "${cfg[@]}" demo rm "$work/inbox/payload.bin"
rm -rf "$work"

echo; echo "== ssh-forward: -L, -D and -R at once (like ssh -N), each reaching this sshd's own port"
echo "\$ ssh-forward -F config -L 0:127.0.0.1:$SSHKIT_TEST_PORT -D 0 -R 0:127.0.0.1:$SSHKIT_TEST_PORT demo &"
"$bin/ssh-forward" "${cfg[@]}" -L "0:127.0.0.1:$SSHKIT_TEST_PORT" -D 0 \
    -R "0:127.0.0.1:$SSHKIT_TEST_PORT" demo > "$dir/forward.out" &
fpid=$!
for _ in $(seq 1 100); do grep -q '^ready' "$dir/forward.out" && break; sleep 0.1; done
cat "$dir/forward.out"
port_of() { grep "^$1 " "$dir/forward.out" | head -1 | awk '{print $2}' | sed 's/.*://'; }
lport=$(port_of local); dport=$(port_of socks); rport=$(port_of remote)
echo "\$ (the first line from 127.0.0.1:$lport: the forward reaches sshd's banner)"
timeout 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$lport; head -1 <&3"
echo "\$ curl --socks5-hostname 127.0.0.1:$dport telnet://127.0.0.1:$SSHKIT_TEST_PORT (through the SOCKS proxy)"
timeout 10 curl -s --max-time 5 --socks5-hostname "127.0.0.1:$dport" "telnet://127.0.0.1:$SSHKIT_TEST_PORT" < /dev/null | head -1 || true
echo "\$ ssh-exec -F config demo ... (read from 127.0.0.1:$rport on the server: back through -R)"
"$bin/ssh-exec" "${cfg[@]}" -n demo "timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/$rport; head -1 <&3'"
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
cat > "$ashome/.config/agent-sessions/config.json" <<JSON
{"searchPath": ["$agents"], "providers": {"claude": {"binary": "demo-agent"}},
 "notifications": {"hold": 1, "channels": [{"type": "terminal"},
   {"type": "command", "command": ["/bin/sh", "-c", "cat >> '$dir/notifications.jsonl'"]}]}}
JSON
as() { echo; printf '$ agent-sessions'; printf ' %q' "$@"; echo; env -u SSH_AUTH_SOCK HOME="$ashome" "$bin/agent-sessions" "$@"; }
# the host as ssh knows it: a Host entry of an ssh configuration, added by its name
mkdir -p -m 700 "$ashome/.ssh"
cat > "$dir/ssh_config" <<CONF
Host demo
  HostName 127.0.0.1
  Port $SSHKIT_TEST_PORT
  User $SSHKIT_TEST_USER
  IdentityFile $dir/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $ashome/.ssh/known_hosts
CONF
as hosts add demo -F "$dir/ssh_config"
as hosts list
as hosts doctor demo
as projects add demo "$repo" --name app
as agents demo
as tasks new app "Add a greeting" --agent claude --prompt "write a greeting"
id=$(HOME="$ashome" "$bin/agent-sessions" tasks list --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["tasks"][0]["id"][:8])')
as send "$id" "and a farewell"
sleep 1
as status

echo; echo "== agent-sessions watch: told when an agent needs you (the host's watcher reads its screen;"
echo "   here a command channel keeps each notification as JSON, beside the terminal's OSC 9/777 and bell)"
echo "\$ agent-sessions watch &"
env -u SSH_AUTH_SOCK HOME="$ashome" "$bin/agent-sessions" watch > "$dir/watch.out" 2>&1 &
wpid=$!
for _ in $(seq 1 100); do grep -q following "$dir/watch.out" && break; sleep 0.1; done
as send "$id" "Shall I add a test too? (y/n)"
for _ in $(seq 1 150); do [ -s "$dir/notifications.jsonl" ] && break; sleep 0.1; done
tr -d '\007' < "$dir/watch.out" | sed 's/\x1b[^\x07]*//g' | grep -v '^$' | sed 's/^/  | /'
echo "(the notification as the command channel got it:)"
python3 -c 'import json,sys; e=json.loads(open(sys.argv[1]).readline()); print("  |", {k: e[k] for k in ("host", "agent", "state", "source", "question")})' "$dir/notifications.jsonl"
kill -INT "$wpid"; wait "$wpid" || true
as status --explain "$id"
as send "$id" "y"

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

echo; echo "== the cockpit: agent-sessions alone, on a terminal (a local tmux pane here, 110x16)"
tmux -S "$dir/tmux.sock" new-session -d -s cockpit -x 110 -y 16 \
    "env -u SSH_AUTH_SOCK HOME='$ashome' '$bin/agent-sessions'; sleep 30"
cockpit() { tmux -S "$dir/tmux.sock" capture-pane -p -t cockpit | sed 's/ *$//' | sed 's/^/  | /'; }
# until the host has answered (the list first comes from the store, then from the host)
for _ in $(seq 1 100); do
    tmux -S "$dir/tmux.sock" capture-pane -p -t cockpit | grep -q 'READY>' \
        && ! tmux -S "$dir/tmux.sock" capture-pane -p -t cockpit | grep -q 'asking the hosts' && break
    sleep 0.1
done
cockpit
echo "(tab: the task's diff in the pane)"
tmux -S "$dir/tmux.sock" send-keys -t cockpit Tab
for _ in $(seq 1 50); do tmux -S "$dir/tmux.sock" capture-pane -p -t cockpit | grep -qE ' files?, [+]' && break; sleep 0.1; done
cockpit | head -8
tmux -S "$dir/tmux.sock" send-keys -t cockpit q
set +e
as tasks delete "$id"
echo "(exit status $?: the worktree holds uncommitted work)"
set -e

echo; echo "== landing the work: committed, pushed to a bare origin on the server, fetched into a clone here, merged"
origin=$(runuser -u "$SSHKIT_TEST_USER" -- mktemp -d /tmp/sshkit-demo-origin.XXXXXX)
runuser -u "$SSHKIT_TEST_USER" -- sh -c "git -C '$repo' config user.name Demo && git -C '$repo' config user.email demo@example.com &&
    git init -q --bare -b main '$origin' && git -C '$repo' remote add origin '$origin' &&
    git -C '$repo' push -q origin main && git -C '$repo' bundle create -q '$origin.bundle' main && chmod 644 '$origin.bundle'"
clone="$dir/clone"
git clone -q -b main "$origin.bundle" "$clone"
echo "(a clone of the project on this machine: $clone)"
as tasks commit "$id" -m "A greeting and a farewell"
as tasks push "$id"
set +e
as tasks pr "$id"
echo "(exit status $?: no gh on the server, and the origin is a path, not a forge; with either, the pull request or its page)"
set -e
as tasks fetch "$id" --into "$clone"
branch=$(git -C "$clone" for-each-ref --format='%(refname:short)' 'refs/heads/emdash/*' | head -n 1)
echo "\$ git -C $clone log --oneline -2 $branch"
git -C "$clone" log --oneline -2 "$branch" | sed 's/^/  | /'
as tasks merge "$id"
as tasks delete "$id"
as status

echo; echo "== agents that start agents: a lead agent starts a worker on the host through agent-sessions mcp"
echo "   (the lead is the real Kimi CLI, its model a small scripted server here, so it does real work;"
echo "   the settings make each start wait for your yes: see Docs/Guide-Agents-That-Start-Agents.md)"
kimi=/opt/sshkit-kimi/bin/kimi
python3 scripts/agents/fake-model-server.py 0 --idle 300 > "$dir/model.out" 2>&1 &
model=$!
for _ in $(seq 1 100); do [ -s "$dir/model.out" ] && break; sleep 0.1; done
bash scripts/agents/configure-agents.sh "$ashome" "$(head -n 1 "$dir/model.out")"
python3 - "$ashome/.config/agent-sessions/config.json" <<'PY'
import json, sys
path = sys.argv[1]
settings = json.load(open(path))
settings["mcp"] = {"agents": ["claude"], "maxRunning": 2, "ask": True, "askSeconds": 120}
json.dump(settings, open(path, "w"), indent=1)
PY
echo "(the settings' mcp: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["mcp"])' "$ashome/.config/agent-sessions/config.json"))"
as mcp install --for kimi --binary "$kimi"
mkdir -p "$dir/lead"
ask='calls: start_task {"project": "app", "title": "Write the changelog", "agent": "claude", "prompt": "write the changelog"}'
ask="$ask"' | wait_for_task {"task": "Write the changelog", "timeout_seconds": 60} | task_result {"task": "Write the changelog", "lines": 4}'
echo "\$ kimi --quiet --yolo -p '$ask' &"
env -u SSH_AUTH_SOCK HOME="$ashome" KIMI_SHARE_DIR="$ashome/.kimi" KIMI_CLI_NO_AUTO_UPDATE=1 \
    "$kimi" --quiet --yolo -w "$dir/lead" -p "$ask" > "$dir/lead.out" 2>&1 &
lead=$!
for _ in $(seq 1 300); do
    env -u SSH_AUTH_SOCK HOME="$ashome" "$bin/agent-sessions" mcp requests --json 2>/dev/null | grep -q '"id"' && break
    sleep 0.2
done
as mcp requests
request=$(env -u SSH_AUTH_SOCK HOME="$ashome" "$bin/agent-sessions" mcp requests --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
as mcp allow "$request"
wait "$lead" || true
echo "(the lead's answer, the worker's result it collected:)"
python3 - "$dir/lead.out" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
start = text.find("lead: ")
if start < 0:
    print("  | " + text.strip().replace("\n", "\n  | "))
    sys.exit(0)
result, end = json.JSONDecoder().raw_decode(text[start + 6:].strip())
after = text[start + 6:].strip()[end:].strip()
turn = result.get("lastTurn") or {}
print("  | the worker %s on %s: %s" % (result["agents"][0]["agent"], result["host"], turn.get("state")))
for line in (turn.get("screen") or "").splitlines():
    print("  |   " + line)
print("  | files: %s" % ", ".join(f["path"] for f in result.get("files", [])))
for line in after.splitlines():
    print("  | " + line)
PY
as mcp log

echo; echo "== every agent from a phone: agent-sessions serve, a device paired, the board in a headless Chromium"
echo "   (see Docs/Guide-From-Your-Phone.md for reaching it from elsewhere)"
echo "\$ agent-sessions serve --listen 127.0.0.1:0 &"
rm -f "$ashome/.local/share/agent-sessions/serve/address"
env -u SSH_AUTH_SOCK HOME="$ashome" "$bin/agent-sessions" serve --listen 127.0.0.1:0 > "$dir/serve.out" 2>&1 &
served=$!
for _ in $(seq 1 100); do [ -s "$ashome/.local/share/agent-sessions/serve/address" ] && break; sleep 0.1; done
sed 's/^/  | /' "$dir/serve.out"
as serve pair
code=$(env -u SSH_AUTH_SOCK HOME="$ashome" "$bin/agent-sessions" serve pair --quiet)
shots="${TMPDIR:-/tmp}/sshkit-demo-serve"
rm -rf "$shots"
echo "\$ (headless Chromium at 390x844 opens the link, pairs with a new code, shows the board)"
/opt/sshkit-browser/bin/python Tests/Browser/serve_page.py --board-only --url "$(cat "$ashome/.local/share/agent-sessions/serve/address")" \
    --code "$code" --title "Write the changelog" --out "$shots" > "$dir/browser.out" 2>&1 || true
python3 - "$dir/browser.out" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        step = json.loads(line)
    except ValueError:
        continue
    if step.get("step") == "board":
        print("  | the board's row: " + (step.get("text") or "(none)").replace("\n", " / "))
    if step.get("step") == "error":
        print("  | the browser failed: " + step.get("error", ""))
PY
echo "(its screenshot: $shots/board.png; the pairing page: $shots/pair.png)"
as serve devices
kill "$served"; wait "$served" 2>/dev/null || true; served=
as tasks delete "Write the changelog" --force
