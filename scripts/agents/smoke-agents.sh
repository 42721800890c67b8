#!/usr/bin/env bash
# End-to-end check of the real agent CLIs, as a non-root user, in tmux, against the
# scripted model server: each agent is started in a fresh git repository in auto-approve
# mode, given "please write the file", and must write hello.txt ("hello from the model")
# through its own write tool and then show "done: wrote hello.txt".
#
#   smoke-agents.sh [USER] [AGENT...]      AGENT: vibe kimi hermes (default: all installed)
#
# USER defaults to sshkit-test when it exists, else a temporary user that is removed at
# the end. The user's own ~/.vibe, ~/.kimi and ~/.hermes are not touched: the agents run
# with HOME set to a scratch directory. Needs root (setpriv). Prints "N passed, N failed".
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ "$(id -u)" = 0 ] || { echo "smoke-agents.sh: run as root" >&2; exit 2; }

user=${1:-}
[ $# -gt 0 ] && shift
agents=("$@")
[ ${#agents[@]} -gt 0 ] || agents=(vibe kimi hermes)
made_user=
if [ -z "$user" ]; then
    if id sshkit-test >/dev/null 2>&1; then user=sshkit-test; else
        user=sshkit-agsmoke$$; useradd -M -d /nonexistent -s /bin/bash "$user"; made_user=$user
    fi
fi

scratch=$(mktemp -d /tmp/agents-smoke.XXXXXX)
chmod 755 "$scratch"
home=$scratch/home
mkdir -p "$home"
chown -R "$user:" "$home"
socket=agents-smoke-$$
server_pid=

# setpriv execs (runuser forks and outlives a killed child by 2 s), so "${run_as[@]}" CMD &
# leaves the program itself in $!
run_as=(setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups env -i HOME="$home" USER="$user"
        LOGNAME="$user" PATH=/usr/local/bin:/usr/bin:/bin TERM=xterm-256color LANG=C.UTF-8 KIMI_CLI_NO_AUTO_UPDATE=1)
as_user() { "${run_as[@]}" "$@"; }
tm() { as_user tmux -L "$socket" "$@"; }

cleanup() {
    tm kill-server >/dev/null 2>&1 || true
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$scratch"
    [ -n "$made_user" ] && userdel "$made_user" 2>/dev/null || true
}
trap cleanup EXIT

# the model server, as the user, on a free port of 127.0.0.1
"${run_as[@]}" /usr/bin/python3 "$here/fake-model-server.py" 0 --idle 600 --log "$home/requests.jsonl" \
    >"$scratch/server.out" 2>"$scratch/server.err" &
server_pid=$!
for _ in $(seq 50); do [ -s "$scratch/server.out" ] && break; sleep 0.1; done
port=$(head -1 "$scratch/server.out")
[ -n "$port" ] || { echo "smoke-agents.sh: the model server did not start: $(cat "$scratch/server.err")" >&2; exit 1; }
bash "$here/configure-agents.sh" "$home" "$port" "$user:"

# wait_for SESSION SECONDS PATTERN: until the screen matches PATTERN (grep -E)
wait_for() {
    local s=$1 t=$2 pat=$3 i
    for ((i = 0; i < t * 2; i++)); do
        tm capture-pane -p -t "$s" 2>/dev/null | grep -Eq "$pat" && return 0
        sleep 0.5
    done
    return 1
}
# stop_session SESSION: kill the tmux session and wait for the agent's processes to go (Hermes
# takes several seconds after the SIGHUP; anything left after 20 s gets SIGTERM, by pid)
stop_session() {
    local pane pids p i
    pane=$(tm display -p -t "$1" '#{pane_pid}' 2>/dev/null) || true
    pids=$pane
    [ -n "$pane" ] && pids="$pane $(ps -o pid= --ppid "$pane" 2>/dev/null | tr '\n' ' ')"
    tm kill-session -t "$1" 2>/dev/null || true
    for ((i = 0; i < 40; i++)); do
        p=; for x in $pids; do kill -0 "$x" 2>/dev/null && p="$p $x"; done
        [ -z "$p" ] && return 0
        sleep 0.5
    done
    echo "$1: still running 20 s after kill-session:$p (sending SIGTERM)"
    kill $p 2>/dev/null || true
}
type_prompt() { tm send-keys -t "$1" -l "$2"; sleep 0.3; tm send-keys -t "$1" Enter; }

passed=0 failed=0
for agent in "${agents[@]}"; do
    case $agent in
        vibe)   bin=/opt/sshkit-vibe/bin/vibe;     cmd="$bin --auto-approve 'please write the file'"; ready= ;;
        kimi)   bin=/opt/sshkit-kimi/bin/kimi;     cmd="$bin --yolo"; ready='── input' ;;
        hermes) bin=/opt/sshkit-hermes/bin/hermes; cmd="$bin --yolo"; ready='^❯|Type your message' ;;
        *) echo "smoke-agents.sh: unknown agent $agent" >&2; exit 2 ;;
    esac
    if [ ! -x "$bin" ]; then echo "skip: $agent ($bin is not installed)"; continue; fi
    repo=$home/repo-$agent
    as_user bash -c "mkdir -p '$repo' && cd '$repo' && git init -q && git -c user.email=t@t -c user.name=t commit -q --allow-empty -m init"
    start=$(date +%s)
    tm new-session -d -s "$agent" -x 120 -y 40 -c "$repo" "$cmd; echo AGENT-EXITED=\$?; sleep 3600"
    ok=1
    if [ -n "$ready" ]; then
        wait_for "$agent" 90 "$ready" || { ok=0; echo "$agent: no ready screen"; }
        [ $ok = 1 ] && type_prompt "$agent" "please write the file"
    fi
    [ $ok = 1 ] && { wait_for "$agent" 90 'done: wrote hello.txt' || { ok=0; echo "$agent: no 'done: wrote hello.txt' on screen"; }; }
    if [ $ok = 1 ] && [ "$(cat "$repo/hello.txt" 2>/dev/null)" != "hello from the model" ]; then
        ok=0; echo "$agent: hello.txt missing or wrong"
    fi
    if [ $ok = 1 ]; then
        passed=$((passed + 1)); echo "ok: $agent ($(( $(date +%s) - start )) s, $(as_user "$bin" --version 2>&1 | head -1))"
    else
        failed=$((failed + 1)); echo "--- $agent screen:"; tm capture-pane -p -t "$agent" 2>/dev/null | grep -v '^ *$' | tail -25
    fi
    stop_session "$agent"
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
