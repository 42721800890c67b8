#!/usr/bin/env bash
# README command 2: install what the tests need, build, run the whole test suite.
# The tests start their own sshd instances on 127.0.0.1 (random ports, throwaway
# keys, a test user with a random password), so they need root, as in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# the C core is laid out by .clang-format (libssh's style, braces always)
bash scripts/format-c.sh --check
swift build --build-tests
# the API documentation (DocC catalogues of SSHKit and ServerTransport) builds without a
# warning: every public symbol documented, every link resolved
swift package generate-documentation --target SSHKit --target ServerTransport --warnings-as-errors
# the Debian package, made as a packager makes it (a release build with the Swift runtime
# linked in, lintian without errors); PackageTests installs it, runs it and removes it
rm -f .build/deb/agent-sessions_*.deb
bash scripts/package-deb.sh --out .build/deb
# Three runs (Docs/TestFixture.md, "Tiers"). First the tests that need the machine to
# themselves (they count this process's fds, threads, sockets or memory), one at a time;
# then the suites tagged `paced` (they depend on timing under load: the cockpit in a
# terminal, the watchers), one at a time; then the rest, two at once (SSHKIT_TEST_WIDTH
# sets another width). The width is Swift Testing's experimental setting; the toolchain is
# pinned (6.3.1). A paced suite is a top-level `@Suite(..., .paced ...)` line followed by
# its `struct`, as TierTests checks; its type names are read from the sources here.
paced=$(find Tests -name '*.swift' -exec awk '
    /^@Suite\(.*\.paced[,)]/ { want = 1; next }
    want && /^struct / { sub(/^struct /, ""); sub(/[^A-Za-z0-9_].*/, ""); print; want = 0 }
' {} + | sort | paste -sd'|' -)
if [ -z "$paced" ]; then
    echo "scripts/test.sh: no paced suite found in Tests/" >&2
    exit 1
fi
status=0
# each run that fails says so by name, with the test process's exit status
failed() {
    status=$2
    echo "scripts/test.sh: the $1 run failed (exit $2)" >&2
}
swift test --skip-build --no-parallel --filter /Exclusive/ || failed exclusive $?
SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=1 \
    swift test --skip-build --filter "\\.($paced)/" --skip /Exclusive/ || failed paced $?
SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SSHKIT_TEST_WIDTH:-2}" \
    swift test --skip-build --skip "/Exclusive/|\\.($paced)/" || failed parallel $?
exit $status
