#!/usr/bin/env bash
# Docs/StateMachines.md's transition tables, generated from the core's transition lists
# (Sources/SSHCore/include/sshcore_fsm.h). With --write the doc is rewritten in place;
# without, the script fails when the doc differs from what it would write.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
doc="$root/Docs/StateMachines.md"
cc="$(command -v clang || echo /opt/swift/usr/bin/clang)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$cc" -std=c11 -Wall -Werror -I "$root/Sources/SSHCore/include" \
    "$root/scripts/state-tables.c" "$root/Sources/SSHCore/sshcore_fsm.c" -o "$work/state-tables"
"$work/state-tables" < "$doc" > "$work/doc.md"
if [[ "${1:-}" == "--write" ]]; then
    cp "$work/doc.md" "$doc"
elif ! diff -u "$doc" "$work/doc.md"; then
    echo "Docs/StateMachines.md differs from the transition lists: bash scripts/state-tables.sh --write" >&2
    exit 1
fi
