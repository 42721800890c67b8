#!/usr/bin/env bash
# Makes a Debian package of agent-sessions and the ssh-like tools:
#
#   bash scripts/package-deb.sh [--out DIR] [--from BUILD-DIR]
#
# agent-sessions_<version>_<arch>.deb (in DIR, default .build/deb) holds what
# scripts/install.sh puts under /usr: the binaries with the Swift runtime linked in (so a
# machine without a Swift toolchain runs them), stripped; their man pages (gzipped) and
# bash, zsh and fish completions where Debian's shells read them. Its dependencies are the
# system libraries the binaries load, with the versions they need, as dpkg-shlibdeps reads
# them (libssh, OpenSSL, SQLite, zlib, curl, glibc). lintian checks it; an error fails.
# Needs dpkg-dev and lintian (apt-get install dpkg-dev lintian).
set -euo pipefail
cd "$(dirname "$0")/.."
out=.build/deb
from=
while [ $# -gt 0 ]; do
    case "$1" in
    --out) [ $# -ge 2 ] || { echo "usage: bash scripts/package-deb.sh [--out DIR] [--from BUILD-DIR]" >&2; exit 64; }; out=$2; shift 2 ;;
    --from) [ $# -ge 2 ] || { echo "usage: bash scripts/package-deb.sh [--out DIR] [--from BUILD-DIR]" >&2; exit 64; }; from=$2; shift 2 ;;
    *) echo "usage: bash scripts/package-deb.sh [--out DIR] [--from BUILD-DIR]" >&2; exit 64 ;;
    esac
done
for tool in dpkg-deb dpkg-shlibdeps lintian; do
    command -v "$tool" >/dev/null || { echo "package-deb.sh: $tool is missing: apt-get install dpkg-dev lintian" >&2; exit 1; }
done
version=$(sed -n 's/^#define SSHKIT_VERSION "\(.*\)"$/\1/p' Sources/CBuildInfo/include/sshkit_build.h)
[ -n "$version" ] || { echo "package-deb.sh: no SSHKIT_VERSION in Sources/CBuildInfo/include/sshkit_build.h" >&2; exit 1; }
arch=$(dpkg --print-architecture)
name=agent-sessions
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root

# what install.sh puts, under /usr
bash scripts/install.sh --prefix "$root/usr" ${from:+--from "$from"} >/dev/null
rm -rf "$root/usr/share/sshkit"   # install.sh's list: dpkg keeps its own
# Debian's zsh reads vendor completions from here
mkdir -p "$root/usr/share/zsh/vendor-completions"
mv "$root"/usr/share/zsh/site-functions/* "$root/usr/share/zsh/vendor-completions/"
rmdir "$root/usr/share/zsh/site-functions"
gzip -9n "$root"/usr/share/man/man1/*.1
# bash sources a completion: no #! line
sed -i '1{/^#!/d}' "$root"/usr/share/bash-completion/completions/*
for f in "$root"/usr/bin/*; do
    strip --strip-unneeded --remove-section=.comment --remove-section=.note "$f"
done
find "$root" -type d -exec chmod 0755 {} +
find "$root/usr/share" -type f -exec chmod 0644 {} +

doc=$root/usr/share/doc/$name
mkdir -p "$doc"
cat > "$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: SSHKit for Linux (agent-sessions)
Comment: Built from $(git rev-parse --short=12 HEAD 2>/dev/null || echo "a source tree") of the project's repository.
 The binaries link the Swift runtime and Foundation statically (Apache-2.0 with the
 Runtime Library Exception, swift.org), and swift-argument-parser, swift-log and GRDB.

Files: *
Copyright: 2025-2026 the SSHKit for Linux developers
License: not-yet-chosen
 The project has not chosen a license yet; until it does, all rights are reserved by
 its authors.
EOF
{
    printf '%s (%s) unstable; urgency=medium\n\n' "$name" "$version"
    printf '  * Built from the project'"'"'s repository.\n\n'
    printf ' -- SSHKit for Linux developers <sshkit@example.org>  %s\n' "$(date -R)"
} | gzip -9n > "$doc/changelog.gz"   # a native package: changelog.gz
chmod 0644 "$doc"/*

# the libraries the binaries load, with the versions they need
mkdir -p "$work/shlibs/debian"
printf 'Source: %s\n\nPackage: %s\nArchitecture: any\n' "$name" "$name" > "$work/shlibs/debian/control"
depends=$(cd "$work/shlibs" && dpkg-shlibdeps -O "$root"/usr/bin/* 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "package-deb.sh: dpkg-shlibdeps found no dependency" >&2; exit 1; }

mkdir -p "$root/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<EOF
Package: $name
Version: $version
Architecture: $arch
Maintainer: SSHKit for Linux developers <sshkit@example.org>
Installed-Size: $size
Depends: $depends
Section: net
Priority: optional
Description: coding agents on your SSH hosts, and ssh-like tools in Swift
 agent-sessions runs command-line coding agents (Claude Code, Codex, Gemini,
 Vibe, Kimi, Hermes and others) in git worktrees on the machines you reach over
 SSH, inside a private tmux on each host so that they outlive the connection,
 with a cockpit, notifications, queues, attempts and the landing of their work.
 .
 Also the ssh-like tools built on the same library: ssh-exec, ssh-shell,
 ssh-sftp, ssh-forward, ssh-fleet and known-hosts, which read your OpenSSH
 configuration.
EOF
mkdir -p "$out"
deb="$out/${name}_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
# errors fail the package; warnings are printed
lintian --fail-on error "$deb" || { echo "package-deb.sh: lintian reports errors (above)" >&2; exit 1; }
echo "$deb"
echo "depends: $depends"
