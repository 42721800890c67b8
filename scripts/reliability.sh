#!/usr/bin/env bash
# The reliability suite (issue 15): every part at full size, then one table of figures.
#
#   bash scripts/reliability.sh            # full run (tens of minutes)
#   bash scripts/reliability.sh --quick    # the reduced sizes CI runs with the test suite
#   SSHKIT_RELIABILITY_SEED=N bash scripts/reliability.sh   # replay a run's random choices
#
# Parts so far: the fault matrix (FaultProxy between the client and sshd), misbehaving
# servers, the cancellation storm and its regressions, leaks and churn, the quoting proof,
# the security checks. The figures go to .build/reliability/report.tsv and are printed as
# a Markdown table (Docs/Reliability.md shows the latest full run).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
for a in "$@"; do
    case "$a" in
        --quick) quick=1 ;;
        *) echo "usage: $0 [--quick]" >&2; exit 64 ;;
    esac
done
bash scripts/install-deps.sh
swift build --build-tests
mkdir -p .build/reliability
report=.build/reliability/report.tsv
: > "$report"
export SSHKIT_RELIABILITY_REPORT="$PWD/$report"
[ "$quick" = 1 ] || export SSHKIT_RELIABILITY=full
suites='FaultMatrixTests|MisbehavingServerTests|CancellationStormTests|CancellationRegressionTests|ChurnTests|CoreMisuseTests|QuotingProofTests|SecurityTests'
status=0
swift test --skip-build --no-parallel --filter "$suites" 2>&1 | tee .build/reliability/test.log | grep -E '^(RELIABILITY|✔|✘) ' || true
grep -q '^✘' .build/reliability/test.log && status=1
grep -q 'Test run with .* passed' .build/reliability/test.log || status=1
echo
echo "## Reliability figures ($(date -u +%Y-%m-%d), $([ "$quick" = 1 ] && echo reduced || echo full) run, seed in the table)"
echo
echo "| part | figure | value | goal |"
echo "|---|---|---|---|"
awk -F'\t' '{ printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4 }' "$report"
exit $status
