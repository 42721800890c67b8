#!/usr/bin/env bash
# Test users whose login shells are the shells the quoting proof runs every remote
# command through (Reliability part 7). sshd runs an exec request as `SHELL -c COMMAND`
# with argv[0] the shell's base name, so:
#   sshkit-q-sh       bash started as "sh" (POSIX mode)
#   sshkit-q-dash     dash (Debian's /bin/sh)
#   sshkit-q-bash     bash
#   sshkit-q-zsh      zsh
#   sshkit-q-mksh     mksh
#   sshkit-q-busybox  busybox started as "sh" (its ash)
# Made once per machine, under a lock; no password (key authentication only, through
# the fixture's AuthorizedKeysFile). Prints "user<TAB>shell" per line. Needs root.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "test-shell-users.sh: needs root" >&2; exit 1; }
links=/usr/local/lib/sshkit-test
users=(
    "sshkit-q-sh $links/bash-posix/sh /bin/bash"
    "sshkit-q-dash /usr/bin/dash"
    "sshkit-q-bash /bin/bash"
    "sshkit-q-zsh /usr/bin/zsh"
    "sshkit-q-mksh /usr/bin/mksh"
    "sshkit-q-busybox $links/busybox/sh /bin/busybox"
)
(
    flock 9
    for entry in "${users[@]}"; do
        read -r user shell target <<<"$entry"
        if [ -n "${target:-}" ]; then
            [ -x "$target" ] || { echo "test-shell-users.sh: $target missing (scripts/install-deps.sh)" >&2; exit 1; }
            mkdir -p "$(dirname "$shell")"
            ln -sfn "$target" "$shell"
        fi
        [ -x "$shell" ] || { echo "test-shell-users.sh: $shell missing (scripts/install-deps.sh)" >&2; exit 1; }
        if ! id "$user" >/dev/null 2>&1; then
            useradd --create-home --home-dir "/var/lib/$user" --shell "$shell" "$user"
        fi
        [ "$(getent passwd "$user" | cut -d: -f7)" = "$shell" ] || usermod --shell "$shell" "$user"
        printf '%s\t%s\n' "$user" "$shell"
    done
) 9>/var/lib/sshkit-q-users.lock
