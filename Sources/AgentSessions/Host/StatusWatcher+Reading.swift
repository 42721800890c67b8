import Foundation

/// The status watcher's other side: the scripts that start it, write its files and read
/// what it keeps, and the parsing of the lines they print.
extension AgentStatusWatcher {
    /// Makes sure the watcher of the tmux server `$2` runs at version `$1` or newer (the
    /// script of digest `$5`; the same version with another digest is replaced too) with
    /// the rules whose digest is `$3` (`$4`: the session format), and prints what it knows: `N <missing files>` when the
    /// script or the rules must be written first; else `W <running version> <log id>`,
    /// the `S` lines of the states, an `L <session> <unix time>` line per session held by
    /// a usage limit (when it resets) and a `T` line per tmux session (the session format);
    /// with `$6` = `quiet`, only the `N` or `W` line. The watcher starts only when the
    /// server has an agent session, and its first round is waited for (up to 5 s), so the
    /// states printed are current.
    static let ensureScript = #"""
        V=$1; SOCK=$2; SUM=$3; H=$5; W="$HOME/.cache/sshkit-agents/watch/tmux-$SOCK"
        T() { tmux -L "$SOCK" -f /dev/null "$@"; }
        mkdir -p "$W" || exit 1
        need=""
        [ -f "$W/../watcher-$V-$H.sh" ] || need="$need script"
        [ "$(cat "$W/rules.sum" 2>/dev/null)" = "$SUM" ] || need="$need rules"
        if [ -n "$need" ]; then echo "N$need"; exit 0; fi
        if [ ! -f "$W/id" ]; then
            od -An -N8 -tx1 /dev/urandom | tr -d ' \n' > "$W/id.$$" && ln "$W/id.$$" "$W/id" 2>/dev/null; rm -f "$W/id.$$"
        fi
        pid=$(cat "$W/pid" 2>/dev/null); rv=0; rh=
        [ -f "$W/version" ] && read -r rv rh < "$W/version"
        running=0
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && T has-session -t =_sshkit-watch 2>/dev/null; then running=1; fi
        if [ "$running" = 1 ] && { [ "${rv:-0}" -lt "$V" ] || { [ "$rv" = "$V" ] && [ "$rh" != "$H" ]; }; }; then
            # an older watcher ends its round, then this one goes on from its log
            kill -TERM "$pid"; i=0
            while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
            running=0
        fi
        if [ "$running" = 0 ] && T list-sessions -F '#{session_name}' 2>/dev/null | grep -qv '^_sshkit-watch$'; then
            rm -f "$W/ready"
            T kill-session -t =_sshkit-watch 2>/dev/null
            T new-session -d -s _sshkit-watch "exec sh \"\$HOME/.cache/sshkit-agents/watch/watcher-$V-$H.sh\" run $SOCK $H" \; \
                set-option -w -t =_sshkit-watch: remain-on-exit off
            i=0
            while [ ! -f "$W/ready" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
            rv=$V
        fi
        printf 'W %s %s\n' "${rv:-0}" "$(cat "$W/id" 2>/dev/null)"
        [ "$6" = quiet ] && exit 0
        if [ "$running" = 1 ] || [ -f "$W/ready" ]; then
            cat "$W/states" 2>/dev/null
            for f in "$W"/queue/*.limit; do
                [ -f "$f" ] || continue
                n=${f##*/}; read -r at _ < "$f" && printf 'L %s %s\n' "${n%.limit}" "$at"
            done
        fi
        T list-sessions -F "T $4" 2>/dev/null
        exit 0
        """#

    /// Writes stdin to `$1` in the watcher's directory (through a temporary file, so a
    /// reader never sees half of it), and wakes the watcher to read it.
    static let installScript = #"""
        W="$HOME/.cache/sshkit-agents/watch"
        umask 077 && mkdir -p "$(dirname "$W/$1")" && cat > "$W/$1.tmp" && mv -f "$W/$1.tmp" "$W/$1" || exit 1
        [ -z "$2" ] || printf '%s\n' "$2" > "$W/$1.sum"
        pid=$(cat "$(dirname "$W/$1")/pid" 2>/dev/null) && kill -USR1 "$pid" 2>/dev/null
        exit 0
        """#

    /// Follows the event log of tmux server `$3` from after sequence `$1` of log `$2` (from
    /// the start when the log is another one, or was started again; `$1` = `end`: from its
    /// end): first `H <log id> <the sequence reading starts after>`,
    /// then the event lines, then each new one as it is written, and `K` every 10 s so a
    /// dead channel is noticed at both ends (a write to it fails, and the follower ends).
    static let readerScript = #"""
        W="$HOME/.cache/sshkit-agents/watch/tmux-$3"; from=$1
        mkdir -p "$W" && : >> "$W/events" || exit 1
        if [ ! -f "$W/id" ]; then
            od -An -N8 -tx1 /dev/urandom | tr -d ' \n' > "$W/id.$$" && ln "$W/id.$$" "$W/id" 2>/dev/null; rm -f "$W/id.$$"
        fi
        id=$(cat "$W/id")
        first() { head -n 1 "$1" 2>/dev/null | cut -d ' ' -f 1; }
        f1=$(first "$W/events"); f0=$(first "$W/events.1")
        last=$(tail -n 1 "$W/events" | cut -d ' ' -f 1)
        [ -n "$last" ] || last=$(tail -n 1 "$W/events.1" 2>/dev/null | cut -d ' ' -f 1)
        if [ "$from" = end ]; then from=${last:-0}; else [ "$2" = "$id" ] || from=0; fi
        [ "${last:-0}" -ge "$from" ] || from=0
        printf 'H %s %s\n' "$id" "$from"
        trap '' PIPE
        start=1
        if [ -n "$f0" ] && { [ -z "$f1" ] || [ "$from" -lt $((f1 - 1)) ]; }; then
            s=$((from - f0 + 2)); [ "$s" -ge 1 ] || s=1
            tail -n +"$s" "$W/events.1"
        elif [ -n "$f1" ]; then
            start=$((from - f1 + 2)); [ "$start" -ge 1 ] || start=1
        fi
        tail -n +"$start" -F "$W/events" 2>/dev/null &
        tp=$!
        while kill -0 "$tp" 2>/dev/null; do
            sleep 10
            printf 'K\n' 2>/dev/null || break
        done
        kill "$tp" 2>/dev/null
        exit 0
        """#

    /// One state or event line's fields after the prefix: the session, the status.
    static func status(state: Substring, source: Substring, rule: Substring, since: Substring, question: String) -> AgentStatus? {
        let activity: AgentActivity
        switch state {
        case "starting": activity = .starting
        case "working": activity = .working
        case "waiting": activity = .waitingForInput
        case "done": activity = .done
        case "idle": activity = .idle
        case "stopped": activity = .stopped
        case "lost": activity = .lost
        default:
            guard state.hasPrefix("exited:"), let code = Int32(state.dropFirst(7)) else { return nil }
            activity = .exited(code)
        }
        let src: AgentStatus.Source
        switch source {
        case "hook": src = .hook
        case "screen": src = .screen
        case "process": src = .process
        default: return nil
        }
        return AgentStatus(activity: activity, source: src, since: Date(timeIntervalSince1970: Double(since) ?? 0),
                           question: question.isEmpty ? nil : question, rule: rule == "-" ? nil : String(rule))
    }

    /// A state line: `S <session> <state> <source> <rule> <since> <activity> <screen
    /// class> <its rule> <candidate> <changed> <hook events before the question> [question]`.
    static func parseState(_ line: Substring) -> (session: String, status: AgentStatus)? {
        let f = line.split(separator: " ", maxSplits: 12, omittingEmptySubsequences: false)
        guard f.count >= 12, f[0] == "S",
              let s = status(state: f[2], source: f[3], rule: f[4], since: f[5], question: f.count > 12 ? String(f[12]) : "")
        else { return nil }
        return (String(f[1]), s)
    }

    /// An event line: `<seq> <time> <session> <state> <source> <rule> <question>`.
    static func parseEvent(_ line: Substring) -> (sequence: Int, session: String, status: AgentStatus)? {
        let f = line.split(separator: " ", maxSplits: 6, omittingEmptySubsequences: false)
        guard f.count >= 6, let seq = Int(f[0]),
              let s = status(state: f[3], source: f[4], rule: f[5], since: f[1], question: f.count > 6 ? String(f[6]) : "")
        else { return nil }
        return (seq, String(f[2]), s)
    }
}
