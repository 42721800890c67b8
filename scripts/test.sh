#!/usr/bin/env bash
# README command 2: install what the tests need, build, run the whole test suite.
# The tests start their own sshd instances on 127.0.0.1 (random ports, throwaway
# keys, a test user with a random password), so they need root, as in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
swift build --build-tests
# --no-parallel: the leak tests count the whole process's fds and threads.
swift test --skip-build --no-parallel
