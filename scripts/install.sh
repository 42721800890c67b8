#!/usr/bin/env bash
# Installs agent-sessions and the ssh-like tools (ssh-exec, ssh-shell, ssh-sftp, ssh-forward,
# ssh-fleet, known-hosts) the way command-line tools are installed:
#
#   bash scripts/install.sh [--prefix DIR]      # /usr/local as root, ~/.local otherwise
#   bash scripts/install.sh --uninstall [--prefix DIR]
#
# - a release build with the Swift runtime linked in (--static-swift-stdlib), stripped, so the tools
#   keep working when the toolchain moves; `--version` names the commit it was built from;
# - a man page per tool and subcommand, made from the tools' own argument definitions by
#   swift-argument-parser's manual generator (the tool behind its generate-manual plugin);
# - bash, zsh and fish completions, where those shells look for them under the prefix.
#
# Every file it puts there is listed in PREFIX/share/sshkit/installed-files; --uninstall
# removes exactly those (and the directories it leaves empty), nothing else.
# --from DIR installs the binaries already built in DIR (a `swift build --show-bin-path`)
# instead of building them: for packagers and the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=(agent-sessions ssh-exec ssh-shell ssh-sftp ssh-forward ssh-fleet known-hosts)

usage() { echo "usage: bash scripts/install.sh [--prefix DIR] [--uninstall] [--from BUILD-DIR]" >&2; exit 64; }
if [ "$(id -u)" = 0 ]; then prefix=/usr/local; else prefix="$HOME/.local"; fi
uninstall=0
from=
while [ $# -gt 0 ]; do
    case "$1" in
    --prefix) [ $# -ge 2 ] || usage; prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#--prefix=}; shift ;;
    --from) [ $# -ge 2 ] || usage; from=$2; shift 2 ;;
    --uninstall) uninstall=1; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) usage ;;
    esac
done
case "$prefix" in /*) ;; *) prefix="$PWD/$prefix" ;; esac
prefix=${prefix%/}
manifest="$prefix/share/sshkit/installed-files"

if [ "$uninstall" = 1 ]; then
    if [ ! -f "$manifest" ]; then
        echo "install.sh: nothing was installed under $prefix (no $manifest)" >&2
        exit 1
    fi
    n=0
    while IFS= read -r f; do
        case "$f" in "$prefix"/*) ;; *) echo "install.sh: skipped $f: not under $prefix" >&2; continue ;; esac
        if [ -e "$f" ] || [ -L "$f" ]; then rm -f -- "$f"; n=$((n + 1)); fi
        # the directories it made, once empty
        d=$(dirname -- "$f")
        while [ "$d" != "$prefix" ] && rmdir -- "$d" 2>/dev/null; do d=$(dirname -- "$d"); done
    done < "$manifest"
    rm -f -- "$manifest"
    d="$prefix/share/sshkit"
    while [ "$d" != "$prefix" ] && rmdir -- "$d" 2>/dev/null; do d=$(dirname -- "$d"); done
    echo "removed $n files from $prefix"
    exit 0
fi

if [ -z "$from" ]; then
    # linked in with the Swift runtime, Foundation's networking (the notifications' HTTP)
    # needs libcurl's development files
    if ! pkg-config --exists libcurl 2>/dev/null; then
        echo "install.sh: libcurl's development files are missing: apt-get install libcurl4-openssl-dev (or run scripts/install-deps.sh)" >&2
        exit 1
    fi
    commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo "a source tree")
    if git rev-parse --git-dir >/dev/null 2>&1 && ! git diff --quiet HEAD -- Sources Examples Package.swift 2>/dev/null; then
        commit="$commit with local changes"
    fi
    echo "install.sh: building the tools (release, Swift runtime linked in)"
    swift build -c release --static-swift-stdlib -Xcc "-DSSHKIT_BUILD_COMMIT=\"$commit\""
    from=$(swift build -c release --static-swift-stdlib --show-bin-path)
fi
for t in "${tools[@]}"; do
    [ -x "$from/$t" ] || { echo "install.sh: $from/$t is missing: build the tools first" >&2; exit 1; }
done

# the manual generator of swift-argument-parser (the package this one depends on)
parser=.build/checkouts/swift-argument-parser
[ -d "$parser" ] || swift package resolve
echo "install.sh: building swift-argument-parser's manual generator"
swift build -c release --package-path "$parser" --scratch-path .build/tools --product generate-manual >/dev/null
generator=$(swift build -c release --package-path "$parser" --scratch-path .build/tools --show-bin-path)/generate-manual

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$prefix/share/sshkit"
: > "$work/installed"
put() { # put MODE SOURCE DESTINATION
    if [ "$1" = 0755 ]; then install -D -s -m "$1" "$2" "$3"; else install -D -m "$1" "$2" "$3"; fi
    printf '%s\n' "$3" >> "$work/installed"
}
for t in "${tools[@]}"; do
    put 0755 "$from/$t" "$prefix/bin/$t"
    mkdir -p "$work/man/$t"
    "$generator" "$from/$t" --multi-page --output-directory "$work/man/$t" >/dev/null
    for page in "$work/man/$t"/*.1; do
        [ -f "$page" ] || { echo "install.sh: no man page was made for $t" >&2; exit 1; }
        put 0644 "$page" "$prefix/share/man/man1/$(basename "$page")"
    done
    "$from/$t" --generate-completion-script bash > "$work/$t.bash"
    "$from/$t" --generate-completion-script zsh > "$work/_$t"
    "$from/$t" --generate-completion-script fish > "$work/$t.fish"
    put 0644 "$work/$t.bash" "$prefix/share/bash-completion/completions/$t"
    put 0644 "$work/_$t" "$prefix/share/zsh/site-functions/_$t"
    put 0644 "$work/$t.fish" "$prefix/share/fish/vendor_completions.d/$t.fish"
done
# an earlier install's files that this one did not put back go too
if [ -f "$manifest" ]; then
    sort -u "$work/installed" > "$work/now"
    sort -u "$manifest" | comm -23 - "$work/now" | while IFS= read -r old; do
        case "$old" in "$prefix"/*) rm -f -- "$old" ;; esac
    done
fi
sort -u "$work/installed" > "$manifest"
echo "installed $(wc -l < "$manifest" | tr -d ' ') files under $prefix: ${tools[*]} in $prefix/bin, their man pages and completions"
case ":$PATH:" in *":$prefix/bin:"*) ;; *) echo "note: $prefix/bin is not on your PATH" ;; esac
"$prefix/bin/agent-sessions" --version | sed 's/^/agent-sessions /'
