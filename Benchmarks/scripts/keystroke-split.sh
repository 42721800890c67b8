#!/bin/bash
# Where a keystroke's time goes on each client. Runs `sshkit-bench --only=agents` and, during its
# keystroke workload, records the system calls of the engine's connection worker and of the
# OpenSSH ControlMaster that carries `ssh -tt` (perf's raw_syscalls tracepoints: no counters
# needed, so it works on a VM). Prints, per client, the medians of
#   out: the poll that reported the key -> the socket write that sends it
#   in:  the poll that reported the answer -> the terminal write that shows it
# and the steps in between. Needs perf and python3; run as root from anywhere, after
# `swift build -c release --product sshkit-bench`.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bench="$here/.build/release/sshkit-bench"
[ -x "$bench" ] || { echo "build the benchmark first: cd $here && swift build -c release --product sshkit-bench" >&2; exit 2; }
command -v perf >/dev/null || { echo "perf is not installed (apt-get install linux-perf)" >&2; exit 2; }
work=$(mktemp -d)
bench_pid=""
cleanup() {
    [ -n "$bench_pid" ] && kill "$bench_pid" 2>/dev/null && wait "$bench_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

"$bench" --only=agents >"$work/bench.out" 2>&1 &
bench_pid=$!
for _ in $(seq 1 1200); do
    grep -q "task creation done" "$work/bench.out" && break
    kill -0 "$bench_pid" 2>/dev/null || { cat "$work/bench.out" >&2; exit 1; }
    sleep 0.25
done
sleep 1.5 # both clients attached, keys flowing
worker=""
for t in /proc/$bench_pid/task/*; do
    if [ "$(cat "$t/comm")" = "sshcore:127.0.0" ]; then worker=${t##*/}; fi
done
master=""
for p in $(pgrep -x ssh); do
    if ! tr '\0' ' ' <"/proc/$p/cmdline" | grep -q -- " -tt "; then master=$p; fi
done
[ -n "$worker" ] && [ -n "$master" ] || { echo "no worker ($worker) or ControlMaster ($master) found" >&2; exit 1; }
# the ControlMaster's fds: its TCP socket to sshd, and the terminal (the mux client's stdin and
# stdout, passed to it)
sock_ssh=$(ss -tnpH | grep "pid=$master," | sed 's/.*fd=\([0-9]*\).*/\1/' | head -1)
ptys_ssh=$(for f in /proc/$master/fd/*; do if readlink "$f" | grep -q '^/dev/pts/'; then echo "${f##*/}"; fi; done | tr '\n' ' ')
perf record -q -e raw_syscalls:sys_enter,raw_syscalls:sys_exit -t "$worker" -o "$work/engine.data" -- sleep 4 >/dev/null 2>&1 &
perf record -q -e raw_syscalls:sys_enter,raw_syscalls:sys_exit -p "$master" -o "$work/ssh.data" -- sleep 4 >/dev/null 2>&1 &
wait %2 %3
perf script -i "$work/engine.data" -F time,event,trace >"$work/engine.txt" 2>/dev/null
perf script -i "$work/ssh.data" -F time,event,trace >"$work/ssh.txt" 2>/dev/null
wait "$bench_pid" || true
bench_pid=""
grep -i "keystroke" "$work/bench.out" | grep -v done || true

python3 - "$work" "$sock_ssh" "$ptys_ssh" <<'PY'
import re, statistics, sys
work, sock_ssh, ptys_ssh = sys.argv[1], int(sys.argv[2]), {int(x) for x in sys.argv[3].split()}
NAMES = {0: "read", 1: "write", 7: "poll", 39: "getpid", 44: "sendto", 45: "recvfrom", 54: "setsockopt",
         271: "ppoll", 318: "getrandom", 16: "ioctl"}
POLLS = (7, 271)

def events(path):
    out = []
    for line in open(path):
        m = re.match(r'\s*([\d.]+):\s+raw_syscalls:sys_(enter|exit): NR (\d+) ?(.*)', line)
        if not m:
            continue
        t, kind, nr, rest = float(m.group(1)) * 1e6, m.group(2), int(m.group(3)), m.group(4)
        args = rest.strip('()').split(', ') if kind == 'enter' else []
        out.append((t, kind, nr, [int(a, 16) for a in args if a]))
    return out

def blocking(nr, args):
    return nr in POLLS and (nr == 271 or args[2] != 0)

def paths(ev, is_tty_read, is_sock_send, is_sock_read, is_tty_write):
    """Per key: the system calls from a blocking poll's return to the send (out), or to the
    terminal write (in), as (name, microseconds since the previous call returned)."""
    out, inn = [], []
    seq = None  # after a blocking poll returned: [kind or None, steps]
    prev_exit = None
    pending_block = False
    for t, kind, nr, args in ev:
        if kind == 'exit':
            prev_exit = t
            # a poll that may have waited starts a path, unless one is under way (OpenSSH
            # polls for POLLOUT between reading the key and sending it)
            if nr in POLLS and pending_block and (seq is None or seq[0] is None):
                seq = [None, []]
            continue
        if nr in POLLS:
            pending_block = blocking(nr, args)
        if seq is None or prev_exit is None:
            continue
        if len(seq[1]) > 12:
            seq = None
            continue
        fd = args[0] if args else -1
        seq[1].append((NAMES.get(nr, str(nr)), t - prev_exit))
        if seq[0] is None:
            seq[0] = 'out' if is_tty_read(nr, args) else 'in' if is_sock_read(nr, fd) else None
        elif seq[0] == 'out' and is_sock_send(nr, fd):
            out.append(seq[1]); seq = None
        elif seq[0] == 'in' and is_tty_write(nr, fd):
            inn.append(seq[1]); seq = None
    return out, inn

def report(name, seqs):
    shapes = {}
    for s in seqs:
        shapes.setdefault(tuple(x[0] for x in s), []).append([x[1] for x in s])
    shape, rows = max(shapes.items(), key=lambda kv: len(kv[1]))
    med = [statistics.median(col) for col in zip(*rows)]
    steps = ", ".join(f"{n} +{m:.0f}" for n, m in zip(shape, med))
    print(f"  {name}: {sum(med):.0f} us ({len(rows)} of {len(seqs)} keys took this path: {steps})")

engine_events = events(f"{work}/engine.txt")
# the engine's socket: where its worker sends; its terminal: what it reads in 64 KiB (the
# wake-up eventfd is read 8 bytes at a time)
sends = [a[0] for _, k, nr, a in engine_events if k == 'enter' and nr == 44]
sock_engine = max(set(sends), key=sends.count)
engine = paths(engine_events,
               lambda nr, args: nr == 0 and args[0] != sock_engine and args[2] > 8,
               lambda nr, fd: nr == 44 and fd == sock_engine,
               lambda nr, fd: nr == 45 and fd == sock_engine,
               lambda nr, fd: nr == 1)
ssh = paths(events(f"{work}/ssh.txt"),
            lambda nr, args: nr == 0 and args[0] in ptys_ssh,
            lambda nr, fd: nr == 1 and fd == sock_ssh,
            lambda nr, fd: nr == 0 and fd == sock_ssh,
            lambda nr, fd: nr == 1 and fd in ptys_ssh)
print("from the poll that reported it, medians (each step: time since the previous system call returned)")
print("key out, terminal -> socket:")
report("engine (SSHKit worker)", engine[0])
report("ssh -tt (ControlMaster)", ssh[0])
print("answer in, socket -> terminal:")
report("engine (SSHKit worker)", engine[1])
report("ssh -tt (ControlMaster)", ssh[1])
PY
