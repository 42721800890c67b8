import Foundation
import SSHKit

/// The status watcher that lives on a host: a POSIX `sh` script (with `tmux` and `awk`,
/// nothing else) run in the engine's own tmux server, in a session of its own, so it
/// survives the laptop, the connection and the tool like the agents do.
///
/// Each second it lists the server's panes in one `tmux` call; only when something moved
/// (output, a title, an attached client, an ended program), or a hook woke it (`SIGUSR1`),
/// it captures the screens that changed (one more `tmux` call for all of them) and one
/// `awk` program combines the sources: the process (an ended pane), the agents' hooks
/// (the status files they append to), and the screen rules (`AgentScreenRules`). The
/// current state of each session is in `states`; every change is appended to `events`
/// as a numbered line, `<seq> <unix time> <session> <state> <source> <rule> <question>`,
/// which the laptop follows over one channel (`AgentHost.statusEvents`). It ends 30 s
/// after the last agent did; the engine starts it again with the next agent.
///
/// At each end of a turn, question and exit it keeps the agent's screen in
/// `results/SESSION` (30 days), so what an agent last said outlives its session and whoever
/// asked for the work (`ChatHandle.lastTurn`).
///
/// It also drains the prompt queues (`AgentHost.enqueue`): a session's next queued prompt is
/// pasted, then Enter, when its agent is idle or done and the prompt sent before started a
/// turn, so a queue goes on while nobody is connected. For an agent set to continue after
/// a usage limit (`AgentHost.setContinueAfterLimit`), it reads the reset time from the
/// limit's message and types `continue` once, a while after it.
///
/// Its files are under `~/.cache/sshkit-agents/watch/tmux-<socket>/` (one watcher per
/// tmux server), the script itself in `watch/`. `version` orders releases: a
/// newer tool stops an older watcher at the end of a round (`SIGTERM` is taken between
/// rounds) and starts its own, which goes on numbering from the log, so no event is lost
/// or numbered twice; an older tool leaves a newer watcher alone.
enum AgentStatusWatcher {
    /// Raised with every change of the script (a test pins the script's digest to it).
    static let version = 7

    /// The tmux session the watcher runs in (not a PTY id, so never taken for an agent).
    static let sessionName = "_sshkit-watch"

    /// The watchers' directory, relative to the home directory: the scripts, and a
    /// directory `tmux-<socket>` per tmux server.
    static let directory = "\(AgentLauncher.directory)/watch"

    /// The directory of the watcher of tmux server `socket`, relative to the home directory.
    static func directory(socket: String) -> String { "\(directory)/tmux-\(socket)" }

    /// The script's file name: its version and the start of its digest (a build with a
    /// changed script never runs an older file of the same version).
    static let scriptName = "watcher-\(version)-\(scriptDigest).sh"

    static let scriptDigest = String(CoreDigest.sha256(Array(script.utf8)).map { String(format: "%02x", $0) }.joined().prefix(12))

    /// The screen rules applied to one screen, in awk: the watcher's `round.awk` and the
    /// look at a plain terminal's screen (`lookScript`) share it, so the rules have one
    /// implementation, the one the host runs. The rules are `R_n` and `R_prov`, `R_kind`,
    /// `R_id`, `R_pat` by index; `classify(pty, prov, title)` reads `w/screens/PTY` and sets
    /// `C_cls` (waiting, limit, working, idle, quiet, blank), `C_rule`, `C_q`, `C_changed`.
    static let classifierAwk: String = #"""
function trim(s) { sub(/^[ \t│┃|>]+/, "", s); sub(/[ \t│┃|]+$/, "", s); return s }
function ruleapplies(i, prov) { return R_prov[i] == prov || R_prov[i] == "*" }
# classify the captured screen of pty: C_cls C_rule C_q, and C_changed when the screen
# (without ignored lines) differs from the last one
function classify(pty, prov, ttl,   f, line, n, i, j, k, kinds, region, text, prev, first, found) {
    f = w "/screens/" pty; n = 0; text = ""
    while ((getline line < f) > 0) {
        sub(/[ \t]+$/, "", line)
        if (line == "") continue
        ign = 0
        for (i = 1; i <= R_n; i++) if (R_kind[i] == "ignore" && ruleapplies(i, prov) && line ~ R_pat[i]) { ign = 1; break }
        L[++n] = line; LI[n] = ign
        if (!ign) text = text line "\n"
    }
    close(f)
    prev = ""
    while ((getline line < (f ".last")) > 0) prev = prev line "\n"
    close(f ".last")
    C_changed = (text != prev)
    if (C_changed) { printf "%s", text > (f ".last"); close(f ".last") }
    C_cls = ""; C_rule = "-"; C_q = ""
    if (n == 0) { C_cls = "blank"; return }
    region = 15
    for (i = 1; i <= R_n; i++) if (R_kind[i] == "lines" && ruleapplies(i, prov)) region = R_pat[i] + 0
    first = n - region + 1; if (first < 1) first = 1
    split("waiting limit working idle", kinds, " ")
    for (k = 1; k <= 4 && C_cls == ""; k++) {
        for (i = 1; i <= R_n && C_cls == ""; i++) {
            if (R_kind[i] == ("title-" kinds[k]) && ruleapplies(i, prov) && ttl ~ R_pat[i]) { C_cls = kinds[k]; C_rule = R_id[i]; C_q = trim(ttl) }
        }
        for (i = 1; i <= R_n && C_cls == ""; i++) {
            if (R_kind[i] != kinds[k] || !ruleapplies(i, prov)) continue
            for (j = n; j >= first; j--) if (!LI[j] && L[j] ~ R_pat[i]) { C_cls = kinds[k]; C_rule = R_id[i]; C_q = trim(L[j]); break }
        }
    }
    if (C_cls == "waiting") {
        found = 0
        for (i = 1; i <= R_n && !found; i++) {
            if (R_kind[i] != "question" || !ruleapplies(i, prov)) continue
            for (j = n; j >= first; j--) if (L[j] ~ R_pat[i]) { C_q = trim(L[j]); found = 1; break }
        }
    }
    if (C_cls == "") C_cls = "quiet"
}
"""#

    /// One look at a screen with the rules, on the host: `sh -c lookScript sh RULES PROVIDER`
    /// with the screen on standard input prints `class TAB rule TAB question`.
    static let lookScript: String = #"""
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
mkdir "$d/screens" && printf '%s' "$1" > "$d/rules" && cat > "$d/screens/s" || exit 1
cat > "$d/look.awk" <<'SSHKIT_AWK'
\#(classifierAwk)
{ split($0, r, "\t"); if (r[2] != "") { R_n++; R_prov[R_n] = r[1]; R_kind[R_n] = r[2]; R_id[R_n] = r[3]; R_pat[R_n] = r[4] } }
END { classify("s", prov, ""); printf "%s\t%s\t%s\n", C_cls, C_rule, C_q }
SSHKIT_AWK
awk -v w="$d" -v prov="$2" -f "$d/look.awk" "$d/rules"
"""#

    /// The script, run as `sh watcher-<version>-<digest>.sh run <socket> <digest>`.
    static let script: String = #"""
# sshkit-agents status watcher (POSIX sh, tmux, awk): run SOCKET DIGEST
# Follows the agent sessions of the engine's tmux server SOCKET, keeps each one's state
# in $W/states and appends each change to $W/events as a numbered line.
V=\#(version)
D="$HOME/.cache/sshkit-agents"
W="$D/watch/tmux-$2"
S="$D/status"
SOCK=$2
mkdir -p "$W/screens" "$W/seen" "$W/results" "$S" || exit 1
cd "$W" || exit 1
# results are kept 30 days
find results -type f -mtime +30 -exec rm -f {} + 2>/dev/null
cat > plan.awk <<'SSHKIT_AWK'
# plan.awk states panes panes.new: the sessions whose screen to look at this round:
# new ones, ones whose line changed (output, title, a client), ones not yet settled, and
# ones with output in the last 2 s (tmux's activity time is in whole seconds: output in
# the second of the last look moves nothing)
FILENAME == ARGV[1] { if ($1 == "S") { known[$2] = 1; settled[$2] = ($8 == $10) } next }
FILENAME == ARGV[2] { old[$1] = $0; next }
$1 != ":c" && $2 == "0" && (!($1 in known) || old[$1] != $0 || !settled[$1] || now - $4 <= 2) { print $1 }
SSHKIT_AWK
cat > round.awk <<'SSHKIT_AWK'
# round.awk rules states panes capture.list: the new states (after an `H pending live seq
# limited` line), and a line per change in $W/round.events
\#(classifierAwk)
function readhook(pty,   f, line, n, parts) {
    f = status "/" pty; H_ev = ""; H_ts = 0; H_q = ""; H_n = 0
    while ((getline line < f) > 0) {
        n = split(line, parts, " ")
        if (n >= 2 && parts[1] ~ /^[0-9]+$/) {
            H_ts = parts[1]; H_ev = parts[2]; H_q = line; H_n++
            sub(/^[0-9]+ [^ ]+ ?/, "", H_q)
        }
    }
    close(f)
}
function hookstate(ev) {
    if (ev == "prompt" || ev == "tool" || ev == "answered") return "working"
    if (ev == "notification" || ev == "approval") return "waiting"
    if (ev == "start" || ev == "stop" || ev == "failure") return "idle"
    return ""
}
function readseen(pty,   f, line, t) {
    f = w "/seen/" pty; t = 0
    while ((getline line < f) > 0) if (line ~ /^[0-9]+$/) t = line
    close(f)
    return t
}
function emit(pty, st, src, rule, q) {
    seq++
    print seq " " now " " pty " " st " " src " " rule " " q > (w "/round.events")
}
FILENAME == ARGV[1] {
    # rules: provider TAB kind TAB id TAB pattern
    split($0, r, "\t")
    if (r[2] != "") { R_n++; R_prov[R_n] = r[1]; R_kind[R_n] = r[2]; R_id[R_n] = r[3]; R_pat[R_n] = r[4] }
    next
}
FILENAME == ARGV[2] {
    if ($1 != "S") next
    p = $2; known[p] = 1
    P_state[p] = $3; P_src[p] = $4; P_rule[p] = $5; P_since[p] = $6; P_act[p] = $7
    P_scls[p] = $8; P_srule[p] = $9; P_ccls[p] = $10; P_chg[p] = $11; P_hmark[p] = $12
    q = $0; for (i = 1; i <= 12; i++) sub(/^[^ ]* /, "", q); P_q[p] = (NF > 12 ? q : "")
    next
}
FILENAME == ARGV[3] {
    # the clients first (tmux 3.2 and later): `:c SESSION WORD`, c11 for a follower
    if ($1 == ":c") { clients = 1; if ($3 != "c11") people[$2]++; next }
    present[$1] = 1; dead[$1] = $2; dstatus[$1] = $3; act[$1] = $4; size[$1] = $6
    attached[$1] = clients ? people[$1] + 0 : $5
    t = $0; for (i = 1; i <= 6; i++) sub(/^[^ ]* /, "", t); title[$1] = (NF > 6 ? t : "")
    order[++npanes] = $1
    next
}
FILENAME == ARGV[4] { captured[$1] = 1; next }
END {
    pending = 0
    printf "" > (w "/round.events")
    # each window's size and when it last changed (w/sizes): an agent redraws when its window
    # is resized (a client attaching at another size, a preview laying it out at its own),
    # and that redraw, for 2 s after the change, is not the agent at work
    f = w "/sizes"
    while ((getline line < f) > 0) { split(line, z, " "); oldsize[z[1]] = z[2]; resized[z[1]] = z[3] + 0 }
    close(f)
    for (x = 1; x <= npanes; x++) {
        p = order[x]
        if ((p in oldsize) && oldsize[p] != size[p]) resized[p] = now
        # (written over in place: a file cut short by a crash only forgets the sizes)
        printf "%s %s %d\n", p, size[p], resized[p] + 0 > f
    }
    close(f)
    for (x = 1; x <= npanes; x++) {
        p = order[x]
        prov = p; if (match(p, /-(main|chat)-/)) prov = substr(p, 1, RSTART - 1)
        state = P_state[p]; src = P_src[p]; rule = P_rule[p]; since = P_since[p]; q = P_q[p]
        scls = (p in known) ? P_scls[p] : "-"; srule = (p in known) ? P_srule[p] : "-"
        ccls = (p in known) ? P_ccls[p] : "-"; chg = (p in known) ? P_chg[p] : act[p]; hmark = (p in known) ? P_hmark[p] : 0
        sq = (scls == "waiting" || scls == "limit") ? q : ""
        readhook(p)
        hs = hookstate(H_ev)
        if (p in captured) {
            classify(p, prov, title[p])
            if (C_changed && (p in known) && now - resized[p] > 2) chg = now
            c = C_cls
            # the hook events written before a question appeared are older than it; a
            # question on the screen while the latest hook says waiting is that hook's
            if ((c == "waiting" || c == "limit") && ((ccls != c && scls != c) || hs == "waiting")) hmark = H_n
            # a new class counts once seen twice in a row (a screen caught mid-redraw),
            # at once on the first look
            if (scls == "-" || c == scls || c == ccls) { scls = c; srule = C_rule; sq = C_q }
            ccls = c
            if (c == scls) ccls = c
        }
        if (ccls != scls) pending = 1
        # the state, from the best source
        nq = ""
        if (dead[p] == "1") {
            ds = dstatus[p]; sub(/^s/, "", ds)
            f = status "/" p ".exit"; if ((getline line < f) > 0 && line ~ /^[0-9]+$/) ds = line; close(f)
            if (ds !~ /^[0-9]+$/) ds = 0
            ns = "exited:" ds; nsrc = "process"; nrule = "pane-dead"
        } else {
            # a question the screen showed after the hook that said waiting (the state was
            # the screen's), and shows no longer, was answered: no agent has a hook for
            # that, so the watcher writes it to the hooks' log, as `answered`
            if (hs == "waiting" && state == "waiting" && src == "screen" && scls != "waiting" && scls != "limit") {
                f = status "/" p; printf "%s answered\n", now >> f; close(f)
                H_ev = "answered"; H_ts = now; H_q = ""; H_n++; hs = "working"
            }
            if ((scls == "waiting" || scls == "limit") && (H_n <= hmark || hs == "")) {
                ns = "waiting"; nsrc = "screen"; nrule = srule; nq = (scls == "limit" ? "usage limit: " : "") sq
            } else if (hs == "waiting") {
                ns = "waiting"; nsrc = "hook"; nrule = H_ev; nq = H_q
            } else if (hs != "") {
                ns = hs; nsrc = (H_ev == "answered" ? "screen" : "hook"); nrule = H_ev
                # a turn interrupted without its end hook: the screen's own idle rule,
                # and nothing new for a while, say it ended
                if (hs == "working" && scls == "idle") {
                    if (now - chg >= 5 && now - H_ts >= 5) { ns = "idle"; nsrc = "screen"; nrule = srule } else pending = 1
                }
            } else if (scls == "working" || scls == "idle") {
                ns = scls; nsrc = "screen"; nrule = srule
            } else if (scls == "quiet") {
                # no rule matched: a screen that changed in the last moments is working
                if (now - chg < 3) { ns = "working"; pending = 1 } else ns = "idle"
                nsrc = "screen"; nrule = (state == "" || (state == "working" && rule == "activity")) ? "activity" : "quiet"
            } else {
                ns = "starting"; nsrc = "process"; nrule = "-"
            }
            # done: a turn ended (after work, or after a question was answered) and nobody
            # looked since (attached, read its log, sent something)
            if (ns == "idle") {
                seen = readseen(p)
                if (((state == "working" && rule != "activity") || state == "waiting" || state == "done") && attached[p] == "0" \
                    && !(state == "done" && seen >= since)) ns = "done"
            }
            if (ns == "working" && state == "done" && nsrc == "screen" && nrule == "quiet") { ns = "done" }
        }
        if (ns == "done" && state == "done") { nsrc = src; nrule = rule }
        if (ns != state) {
            if (ns != state) since = now
            emit(p, ns, nsrc, nrule, nq)
        }
        if (ns == "waiting") q = nq; else q = ""
        if (ns == "waiting" && q ~ /^usage limit: /) limited++
        out[x] = "S " p " " ns " " nsrc " " nrule " " since " " act[p] " " scls " " srule " " ccls " " chg " " (hmark + 0) (q == "" ? "" : " " q)
        seenp[p] = 1
    }
    live = 0
    for (x = 1; x <= npanes; x++) if (dead[order[x]] != "1") live++
    # sessions that went away: stopped by the engine (its mark), else lost; one whose task
    # was deleted (the mark says so) is forgotten once its end is told (w/forget.list)
    printf "" > (w "/forget.list")
    for (p in known) {
        if (p in seenp) continue
        f = status "/" p ".stopped"; line = ""
        if ((getline line < f) >= 0) {
            if (P_state[p] !~ /^(exited|stopped|lost)/) emit(p, "stopped", "process", "stopped", "")
            if (line == "deleted") print p > (w "/forget.list")
        } else if (P_state[p] !~ /^(exited|stopped|lost)/) emit(p, "lost", "process", "gone", "")
        close(f)
    }
    close(w "/forget.list")
    close(w "/round.events")
    print "H " (pending ? 1 : 0) " " live " " seq " " (limited + 0)
    for (x = 1; x <= npanes; x++) print out[x]
}
SSHKIT_AWK
stop=0
wake=0
trap 'stop=1' TERM INT HUP
# a hook's signal ends the pause: the trap kills the pause's sleep itself, for a signal
# handled between the check below and `wait` would not interrupt the wait
sp=
trap 'wake=1; [ -z "$sp" ] || kill "$sp" 2>/dev/null' USR1
printf '%s\n' "$$" > pid.tmp && mv -f pid.tmp pid
printf '%s %s\n' "$V" "$3" > version
: >> events
: >> panes
[ -f states ] || : > states
quiet=0
first=1
tick=0
recent=0
pending=1
live=0
limited=0
old=
# the last event's number and the log's length, read once: then kept here, round by round
seq=$(tail -n 1 events | cut -d ' ' -f 1)
[ -n "$seq" ] || seq=$(tail -n 1 events.1 2>/dev/null | cut -d ' ' -f 1)
seq=${seq:-0}
nev=$(wc -l < events)
# the exit status after an `s`: tmux leaves it empty when it did not record one, and an
# empty field would shift the ones after it
F='#{session_name} #{pane_dead} #{?pane_dead,s#{pane_dead_status},-} #{window_activity} #{session_attached} #{window_width}x#{window_height} #{pane_title}'
# tmux 3.2 and later filter the list themselves: one process a round while nothing moves.
# The clients come first, a line each: a screen's follower (read-only, its size ignored:
# the cockpit's preview) is not someone who looked
if tmux -L "$SOCK" -f /dev/null list-panes -a -f 1 -F x >/dev/null 2>&1; then
    panes() {
        tmux -L "$SOCK" -f /dev/null list-clients -F ':c #{client_session} c#{client_readonly}#{m:*ignore-size*,#{client_flags}}' \; \
            list-panes -a -f '#{!=:#{session_name},_sshkit-watch}' -F "$F" 2>/dev/null
    }
else
    panes() { tmux -L "$SOCK" -f /dev/null list-panes -a -F "$F" 2>/dev/null | grep -v '^_sshkit-watch '; }
fi
# The prompt queues, queue/SESSION/NAME (names in the order they go): a session's next
# prompt is pasted, then Enter, when its agent is idle or done and the prompt sent before
# started a turn: the agent was seen busy since, or its hook log grew and ends with the end
# of a turn, or its screen changed after the send and has been still for 3 s (a turn too
# quick to be seen busy between two looks). queue/SESSION.sent holds the hook log's length
# at the send, whether the agent was seen busy since, the time of the send and the time of
# the screen's last change then (a change seen in the second of the send is after it when
# that time moved: times are whole seconds);
# queue/SESSION.why what holds the next prompt back (a word and its detail); queue/sent.log
# a line per prompt sent.
hold() {
    hw=; [ ! -f "queue/$1.why" ] || read -r hw < "queue/$1.why"
    [ "$hw" = "$2" ] || printf '%s\n' "$2" > "queue/$1.why"
}
drain() {
    for q in queue/*/; do
        [ -d "$q" ] || continue
        p=${q#queue/}; p=${p%/}
        # the first prompt (a glob lists names in order): an empty queue costs no process
        next=
        for f in "$q"a-* "$q"b-*; do
            case "$f" in *.tmp) ;; *) [ ! -f "$f" ] || { next=${f##*/}; break; } ;; esac
        done
        if [ -z "$next" ] && [ ! -f "queue/$p.sent" ]; then rm -f "queue/$p.why"; continue; fi
        if ! line=$(grep "^S $p " states); then
            if grep -q "^$p " panes; then hold "$p" unseen; else hold "$p" "ended gone"; fi
            continue
        fi
        read -r _ _ st _ _ _ _ _ _ _ chg _ <<SSHKIT_LINE
$line
SSHKIT_LINE
        n=0; [ ! -f "$S/$p" ] || n=$(wc -l < "$S/$p")
        if [ -f "queue/$p.sent" ]; then
            sn=; busy=; at=; c0=; read -r sn busy at c0 < "queue/$p.sent"
            case "$st" in
            working|waiting|starting) [ "$busy" = 1 ] || printf '%s 1 %s %s\n' "$sn" "$at" "$c0" > "queue/$p.sent"; hold "$p" "$st"; continue ;;
            idle|done)
                ev=$(tail -n 1 "$S/$p" 2>/dev/null | cut -d ' ' -f 2)
                if [ "$busy" = 1 ] || { [ "$n" -gt "${sn:-0}" ] && case "$ev" in stop|start|failure) true ;; *) false ;; esac; } \
                    || { [ -n "$at" ] && { [ "${chg:-0}" -gt "$at" ] || { [ "${chg:-0}" -eq "$at" ] && [ "$chg" != "${c0:-}" ]; }; } \
                         && [ $(($(date +%s) - chg)) -ge 3 ]; }; then
                    rm -f "queue/$p.sent"
                else
                    hold "$p" "turn $at"; continue
                fi ;;
            *) hold "$p" "ended $st"; continue ;;
            esac
        fi
        case "$st" in idle|done) ;; *) hold "$p" "${st%%:*}"; continue ;; esac
        [ -n "$next" ] || continue
        mv -f "$q$next" "queue/$p.sending" || continue
        if tmux -L "$SOCK" -f /dev/null load-buffer -b sshkit-q "queue/$p.sending" \; \
            paste-buffer -p -r -d -b sshkit-q -t "=$p:" >/dev/null 2>&1; then
            sleep 0.2
            tmux -L "$SOCK" -f /dev/null send-keys -t "=$p:" Enter >/dev/null 2>&1
            ts=$(date +%s)
            printf '%s 0 %s %s\n' "$n" "$ts" "${chg:-0}" > "queue/$p.sent"
            printf '%s %s %s\n' "$ts" "$p" "$next" >> queue/sent.log
            rm -f "queue/$p.sending" "queue/$p.why"
        else
            # not pasted (the session went away): the prompt stays first in its queue
            mv -f "queue/$p.sending" "$q$next"
            hold "$p" "unpasted"
        fi
    done
}
# The reset time a usage-limit message names, as a Unix time (GNU date reads the time):
# Claude's "limit reached|<unix time>", "resets 3pm", "resets Dec 1, 2pm (America/Chicago)",
# Codex's "try again at 3:05 PM." or "try again in 2 hours 5 minutes", Gemini's "resets at
# 3:05 PM". A time of day more than an hour past is tomorrow's.
resetat() {
    case "$1" in *"limit reached|"[0-9]*) printf '%s\n' "${1##*|}" | tr -cd '0-9'; echo; return 0 ;; esac
    tz=$(printf '%s\n' "$1" | sed -n 's/.*(\([A-Za-z_+-]*\(\/[A-Za-z_+-]*\)*\)).*/\1/p')
    rel=$(printf '%s\n' "$1" | sed -n 's/.*[Tt]ry again in \([0-9][0-9a-z ]*[a-z]\).*/\1/p')
    if [ -n "$rel" ]; then date -d "now + $rel" +%s 2>/dev/null; return; fi
    when=$(printf '%s\n' "$1" | sed -n -e 's/.*[Rr]esets\( at\)\{0,1\} \([^()]*\).*/\2/p' -e 's/.*[Tt]ry again at \([^()]*\).*/\1/p' \
        | head -n 1 | sed -e 's/\([0-9]\)\(st\|nd\|rd\|th\)/\1/g' -e 's/,//g' -e 's/[.]* *$//')
    [ -n "$when" ] || return 1
    if [ -n "$tz" ]; then at=$(TZ="$tz" date -d "$when" +%s 2>/dev/null); else at=$(date -d "$when" +%s 2>/dev/null); fi
    [ -n "$at" ] || return 1
    [ "$at" -ge $(($(date +%s) - 3600)) ] || at=$((at + 86400))
    printf '%s\n' "$at"
}
# A session held by a usage limit has its reset time in queue/SESSION.limit (then "sent"
# once "continue" went), read from the limit's message; the file goes when the limit does.
# For a session whose agent is to go on after a limit (queue/SESSION.continue, which holds
# the seconds to wait after the reset), "continue" is typed once, that long after it.
limits() {
    grep '^S [^ ]* waiting ' states | while read -r _ p _ _ _ _ _ _ _ _ _ _ q; do
        case "$q" in "usage limit: "*) ;; *) continue ;; esac
        [ ! -f "queue/$p.limit" ] || continue
        at=$(resetat "${q#usage limit: }") || continue
        [ -n "$at" ] && mkdir -p queue && printf '%s\n' "$at" > "queue/$p.limit"
    done
    for l in queue/*.limit; do
        [ -f "$l" ] || continue
        p=${l#queue/}; p=${p%.limit}
        grep -q "^S $p waiting .* usage limit: " states || { rm -f "$l"; continue; }
        [ -f "queue/$p.continue" ] || continue
        read -r at sent < "$l"
        [ -z "$sent" ] || continue
        read -r wait < "queue/$p.continue"
        [ "$(date +%s)" -ge $((at + ${wait:-60})) ] || continue
        printf '%s sent\n' "$at" > "$l"
        tmux -L "$SOCK" -f /dev/null send-keys -t "=$p:" -l continue >/dev/null 2>&1 && sleep 0.2 \
            && tmux -L "$SOCK" -f /dev/null send-keys -t "=$p:" Enter >/dev/null 2>&1 \
            && printf '%s %s continue\n' "$(date +%s)" "$p" >> queue/sent.log
    done
}
while [ "$stop" = 0 ]; do
    new=$(panes)
    tick=$((tick + 1))
    if [ "$first" = 0 ] && [ "$wake" = 0 ] && [ $((tick % 30)) != 0 ] && [ "$recent" = 0 ] && [ "$pending" = 0 ] \
        && [ "$new" = "$old" ]; then
        :
    else
        wake=0
        first=0
        old=$new
        [ -z "$new" ] || printf '%s\n' "$new" > panes.new
        [ -n "$new" ] || : > panes.new
        now=$(date +%s)
        awk -v now="$now" -f plan.awk states panes panes.new > capture.list
        mv -f panes.new panes
        if [ -s capture.list ]; then
            set --
            while read -r name; do
                set -- "$@" capture-pane -t "=$name:" -b "sshkit-w" \; save-buffer -b "sshkit-w" "$W/screens/$name" \; delete-buffer -b "sshkit-w" \;
            done < capture.list
            tmux -L "$SOCK" -f /dev/null "$@" >/dev/null 2>&1
        fi
        last=$seq
        awk -v seq="$seq" -v now="$now" -v status="$S" -v w="$W" -f round.awk rules states panes capture.list > states.tmp
        read -r _ pending live seq limited < states.tmp
        # (a round that failed numbers nothing)
        case "$seq" in ''|*[!0-9]*) seq=$last; : > round.events ;; esac
        if [ "$seq" != "$last" ]; then
            # the last screen at each end of a turn, question and exit, kept for whoever asks
            # later (results/SESSION: `<state> <unix time>`, then the screen), written before
            # the state, so a reader who sees the state finds its screen
            while read -r _ t p st _; do
                case "$st" in done|waiting|idle|exited:*) ;; *) continue ;; esac
                [ -f "screens/$p" ] || continue
                { printf '%s %s\n' "$st" "$t"; cat "screens/$p"; } > "results/$p.tmp" && mv -f "results/$p.tmp" "results/$p"
            done < round.events
            cat round.events >> events
            nev=$((nev + seq - last))
        fi
        mv -f states.tmp states
        # a deleted task's sessions, their end told: their files go
        if [ -s forget.list ]; then
            while read -r p; do
                case "$p" in ''|*[!A-Za-z0-9_-]*) continue ;; esac
                rm -rf -- "$S/$p" "$S/$p".* "screens/$p" "screens/$p".* "results/$p" "seen/$p" "queue/$p" "queue/$p".*
            done < forget.list
        fi
        [ -f ready ] || : > ready
        recent=0
        [ -s capture.list ] && recent=1
        # a long log is cut in two: the reader follows the file by name
        if [ "$nev" -gt 4000 ]; then mv -f events events.1 && : > events; nev=0; fi
    fi
    [ ! -d queue ] || drain
    # (a glob costs no process: with no limit held and none noted, no look at all)
    hl=0; for l in queue/*.limit; do [ ! -f "$l" ] || hl=1; break; done
    [ "${limited:-0}" = 0 ] && [ "$hl" = 0 ] || limits
    # the watcher ends when no agent has run for a while
    if [ "${live:-0}" -gt 0 ]; then quiet=0; else quiet=$((quiet + 1)); fi
    [ "$quiet" -lt 30 ] || break
    # a hook's signal during the round cuts the pause (one during the pause ends it)
    sleep 1 &
    sp=$!
    [ "$wake" = 0 ] || kill "$sp" 2>/dev/null
    wait "$sp" 2>/dev/null
    sp=
done
rm -f pid
"""#

    /// The digest of the rules as the host keeps them (`ensureScript`'s `$3`).
    static func rulesDigest(_ rules: AgentScreenRules) -> String {
        CoreDigest.sha256(Array(rules.hostText.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}
