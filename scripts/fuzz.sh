#!/usr/bin/env bash
# Reliability part 6: libFuzzer over the parsers and validators of untrusted input.
#
#   bash scripts/fuzz.sh                      # every target, a fixed number of runs each
#   bash scripts/fuzz.sh socks sftp-reply     # some targets
#   SSHKIT_FUZZ_RUNS=N bash scripts/fuzz.sh   # runs per target (default 200,000; the quoting
#                                             # target runs /bin/sh per input: 5,000)
#
# Builds Fuzz/Sources/sshkit-fuzz with libFuzzer and AddressSanitizer into .build-fuzz,
# starts each target from its seed corpus (Fuzz/Corpus/TARGET, committed) in a scratch
# copy, and prints one table: runs, crashes, timeouts (10 s per input), corpus size,
# executions per second. Inputs that crashed are kept in .build-fuzz/work/TARGET/artifacts;
# `swift build && .build/debug/sshkit-fuzz TARGET FILE` replays one without libFuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
all=(known-hosts socks sftp-reply terminal-modes environment quoting ssh-config)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
bash scripts/install-deps.sh
# a fresh build each time (14 s): SwiftPM does not rebuild when only -Xswiftc flags change.
# swiftc instruments for coverage only when asked (-sanitize=fuzzer alone left the Swift
# modules blind, and libFuzzer found nothing new); C targets get it from -fsanitize=fuzzer
rm -rf .build-fuzz
swift build --product sshkit-fuzz --sanitize=fuzzer --sanitize=address -Xswiftc -DSSHKIT_FUZZ \
    -Xswiftc -sanitize-coverage=edge,inline-8bit-counters,pc-table,trace-cmp --scratch-path .build-fuzz
bin=.build-fuzz/debug/sshkit-fuzz
status=0
echo
echo "## Fuzzing ($(date -u +%Y-%m-%d), libFuzzer, AddressSanitizer)"
echo
echo "| target | runs | crashes | timeouts | corpus (inputs) | exec/s |"
echo "|---|---|---|---|---|---|"
for t in "${targets[@]}"; do
    runs=${SSHKIT_FUZZ_RUNS:-200000}
    [ "$t" = quoting ] && runs=${SSHKIT_FUZZ_QUOTING_RUNS:-5000}
    work=.build-fuzz/work/$t
    rm -rf "$work"
    mkdir -p "$work/corpus" "$work/artifacts"
    cp Fuzz/Corpus/"$t"/* "$work/corpus/"
    set +e
    # leak checking off: the Swift runtime's caches outlive an input on purpose
    ASAN_OPTIONS=detect_leaks=0 SSHKIT_FUZZ_TARGET=$t "$bin" -runs="$runs" -timeout=10 -max_len=4096 \
        -detect_leaks=0 -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" > "$work/log" 2>&1
    rc=$?
    set -e
    crashes=$(find "$work/artifacts" -name 'crash-*' -o -name 'oom-*' | wc -l)
    timeouts=$(find "$work/artifacts" -name 'timeout-*' | wc -l)
    done_runs=$(awk '/stat::number_of_executed_units/{print $2}' "$work/log")
    speed=$(awk '/stat::average_exec_per_sec/{print $2}' "$work/log")
    [ "${speed:-0}" = 0 ] && speed="> ${done_runs:-0}" # finished within a second
    corpus=$(find "$work/corpus" -type f | wc -l)
    echo "| $t | ${done_runs:-?} | $crashes | $timeouts | $corpus | ${speed:-?} |"
    if [ "$rc" -ne 0 ] || [ "$crashes" -gt 0 ] || [ "$timeouts" -gt 0 ]; then
        status=1
        grep -E "invariant violated|ERROR: |SUMMARY" "$work/log" | head -5 >&2 || true
    fi
done
exit $status
