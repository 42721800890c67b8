#!/usr/bin/env bash
# Lays out the C core with the project's .clang-format (libssh's style, braces always).
#   bash scripts/format-c.sh           # rewrite the files in place
#   bash scripts/format-c.sh --check   # fail, listing the files, if one is not laid out
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=$(command -v clang-format-16 || true)
if [ -z "$fmt" ]; then
    echo "format-c.sh: clang-format-16 is missing (apt-get install clang-format-16)" >&2
    exit 2
fi
files=$(ls Sources/SSHCore/*.c Sources/SSHCore/*.h Sources/SSHCore/include/*.h \
           Sources/CTransportSupport/*.c Sources/CTransportSupport/include/*.h)
if [ "${1:-}" = "--check" ]; then
    bad=0
    for f in $files; do
        if ! "$fmt" --style=file:.clang-format "$f" | cmp -s - "$f"; then
            echo "not laid out by .clang-format: $f" >&2
            bad=1
        fi
    done
    exit $bad
fi
"$fmt" --style=file:.clang-format -i $files
