#!/usr/bin/env bash
# Reliability part 5: the test suite under the sanitizers.
#
#   bash scripts/sanitizers.sh                  # thread, then address (+undefined for C)
#   bash scripts/sanitizers.sh thread           # one kind: thread | address | leak
#   SSHKIT_SANITIZER_FILTER='Churn|Misuse' bash scripts/sanitizers.sh leak
#
# Each kind builds the package and its tests into a scratch path of its own
# (.build-tsan, .build-asan) and runs the tests serially there; the C core, libssh's
# callers and the Swift layer are all instrumented (libssh itself is the system's, not
# instrumented). Reports are counted from the log; a kind fails on any report that the
# suppression files in scripts/sanitizers/ do not cover. `leak` runs LeakSanitizer
# (through AddressSanitizer) over the churn and misuse suites by default and counts the
# leaks whose stacks reach the package's code. Logs: <scratch>/sanitizer-<kind>.log.
set -euo pipefail
cd "$(dirname "$0")/.."
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(thread address)
supp="$PWD/scripts/sanitizers"
bash scripts/install-deps.sh
status=0
for kind in "${kinds[@]}"; do
    filter=${SSHKIT_SANITIZER_FILTER:-}
    case $kind in
    thread)
        flags=(--sanitize=thread)
        scratch=.build-tsan
        export TSAN_OPTIONS="suppressions=$supp/tsan.supp halt_on_error=0 second_deadlock_stack=1 history_size=4"
        pattern='WARNING: ThreadSanitizer'
        ;;
    address)
        # swiftc has no UBSan on Linux (Swift traps on overflow and bounds by itself):
        # UndefinedBehaviorSanitizer instruments the C core, its runtime comes with ASan's
        flags=(--sanitize=address -Xcc -fsanitize=undefined)
        scratch=.build-asan
        export ASAN_OPTIONS="detect_leaks=0 detect_stack_use_after_return=0 abort_on_error=0"
        export UBSAN_OPTIONS="print_stacktrace=1 suppressions=$supp/ubsan.supp"
        pattern='ERROR: AddressSanitizer|runtime error:'
        ;;
    leak)
        flags=(--sanitize=address -Xcc -fsanitize=undefined) # the address build, shared
        scratch=.build-asan
        export ASAN_OPTIONS="detect_leaks=1 detect_stack_use_after_return=0"
        export LSAN_OPTIONS="suppressions=$supp/lsan.supp print_suppressions=1"
        filter=${filter:-ChurnTests|CoreMisuseTests}
        pattern='ERROR: LeakSanitizer'
        ;;
    *) echo "usage: $0 [thread|address|leak]..." >&2; exit 64 ;;
    esac
    echo "== $kind: building into $scratch"
    swift build --build-tests "${flags[@]}" --scratch-path "$scratch"
    log="$scratch/sanitizer-$kind.log"
    args=(--testing-library swift-testing --no-parallel)
    [ -n "$filter" ] && args+=(--filter "$filter")
    echo "== $kind: running the tests${filter:+ matching $filter} (log: $log)"
    set +e
    "$scratch/debug/SSHKitPackageTests.xctest" "${args[@]}" > "$log" 2>&1
    rc=$?
    set -e
    reports=$(grep -cE "$pattern" "$log" || true)
    if [ "$kind" = leak ]; then
        # leaks whose stack reaches the package's own code (a frame in Sources/, or the C core)
        reports=$(awk '/^(Direct|Indirect) leak/{block=$0; next} block!="" && /^ *#[0-9]/{block=block"\n"$0; next}
                       block!=""{print block; print "----"; block=""}' "$log" \
                  | awk 'BEGIN{RS="----"} /\/Sources\/|sshcore_/{n++} END{print n+0}')
    fi
    passed=$(grep -cE '^✔ Test run with .* passed' "$log" || true)
    echo "== $kind: exit $rc, tests passed: $([ "$passed" -gt 0 ] && echo yes || echo no), reports: $reports"
    grep -E "$pattern|^✘" "$log" | head -20 || true
    if [ "$reports" -gt 0 ] || [ "$passed" -eq 0 ]; then status=1; fi
done
exit $status
