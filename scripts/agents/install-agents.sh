#!/usr/bin/env bash
# Installs the real Python-based coding agents the agent-sessions tests drive, where a
# non-root test user (sshkit-test, logging in over ssh) can run them:
#
#   /opt/sshkit-python   a Python >= 3.12 of its own (mistral-vibe and kimi-cli need it;
#                        Debian 12 has 3.11), copied from root's pyenv with its RUNPATH
#                        made relative, or a system python3.12+ when there is one
#   /opt/sshkit-vibe     venv: mistral-vibe==$VIBE_VERSION   (binary: bin/vibe)
#   /opt/sshkit-kimi     venv: kimi-cli==$KIMI_VERSION       (binary: bin/kimi)
#   /opt/sshkit-hermes   venv: hermes-agent (installed by scripts/install-deps.sh; not here)
#
# Idempotent: a finished step leaves a marker and is skipped next time; a failed venv is
# removed so the next run starts it again. Needs root (or sudo), PyPI, and Debian's
# packages (patchelf). Where no Python >= 3.12 is found, it gets one as a Debian 12 user
# would: uv from PyPI (in a venv of Debian's Python) and `uv python install 3.12`, which
# downloads a build from GitHub. Exits non-zero with one line naming what to install when
# none can be had: Debian 12's suites have none (apt-cache policy python3.12 python3.13: no
# candidate), PyPI ships no interpreter, and a machine that does not reach GitHub gets no uv
# build either.
#
# Environment: SSHKIT_PYTHON=/path/to/python3.12+ picks the source interpreter;
# SSHKIT_AGENTS_PREFIX=/opt changes where everything goes (for trying it out).
set -euo pipefail

VIBE_VERSION=3.0.2  # 3.0.3 pins certifi==2026.10.19, which PyPI no longer serves
# 1.51.0 is the last real kimi-cli: 1.52.0 is a deprecation stub that, run with no
# arguments, downloads and runs the Kimi Code installer without asking.
KIMI_VERSION=1.51.0

prefix=${SSHKIT_AGENTS_PREFIX:-/opt}
py_dir=$prefix/sshkit-python
vibe_venv=$prefix/sshkit-vibe
kimi_venv=$prefix/sshkit-kimi

SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
say() { echo "install-agents: $*"; }
die() { echo "install-agents: error: $*" >&2; exit 1; }

# --- 1. a Python >= 3.12 that every user can run ------------------------------------

# py_ok PYTHON: a working CPython >= 3.12 with ssl, sqlite3, venv and ensurepip, and without
# the bug of early 3.12 releases (3.12.1 has it) that breaks kimi-cli at start ("TypeError: super(type, obj): obj
# must be an instance or subtype of type" from a generic frozen slots dataclass)
py_ok() {
    [ -x "$1" ] && "$1" -c 'import sys, ssl, sqlite3, venv, ensurepip, ctypes
if sys.version_info < (3, 12): sys.exit(1)
from dataclasses import dataclass
@dataclass(frozen=True, slots=True, kw_only=True)
class C[F]:
    name: str
C[int](name="x")' >/dev/null 2>&1
}

find_source_python() {
    local c v
    if [ -n "${SSHKIT_PYTHON:-}" ]; then
        echo "$SSHKIT_PYTHON"; return
    fi
    # system interpreters first (stdlib under /usr, already world-readable), then pyenv
    # builds (root's home is 0700 on these machines, so those get copied)
    for v in 3.13 3.12 3.14; do
        for c in /usr/bin/python$v /usr/local/bin/python$v; do
            py_ok "$c" && { echo "$c"; return; }
        done
    done
    local roots=("${PYENV_ROOT:-}" /root/.pyenv /usr/local/pyenv /opt/pyenv)
    for v in 3.13 3.12 3.14; do
        for r in "${roots[@]}"; do
            [ -n "$r" ] && [ -d "$r/versions" ] || continue
            # the newest patch release of this minor version
            for c in $(ls -d "$r"/versions/"$v".* 2>/dev/null | sort -V -r); do
                py_ok "$c/bin/python$v" && { echo "$c/bin/python$v"; return; }
            done
        done
    done
    return 1
}

# A Python >= 3.12 from uv (PyPI), installed under $prefix/sshkit-uv-python; its path, or
# failure (uv could not be installed, or its Python could not be downloaded).
python_from_uv() {
    local venv=$prefix/sshkit-uv dir=$prefix/sshkit-uv-python c
    if [ ! -x "$venv/bin/uv" ]; then
        $SUDO /usr/bin/python3 -m venv "$venv" >/dev/null 2>&1 \
            && $SUDO "$venv/bin/pip" install --quiet --disable-pip-version-check uv >/dev/null 2>&1 \
            || { $SUDO rm -rf "$venv"; return 1; }
    fi
    $SUDO env UV_PYTHON_INSTALL_DIR="$dir" "$venv/bin/uv" python install 3.12 >/dev/null 2>&1 || return 1
    $SUDO chmod -R a+rX "$dir"
    for c in "$dir"/cpython-3.12*/bin/python3.12; do
        py_ok "$c" && { echo "$c"; return 0; }
    done
    return 1
}

ensure_patchelf() {
    command -v patchelf >/dev/null && return
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends patchelf >/dev/null
    command -v patchelf >/dev/null || die "patchelf is needed to relocate the copied Python (apt-get install patchelf)"
}

# Copies the installation that holds PYTHON (bin/pythonX.Y, lib/libpythonX.Y.so*,
# lib/pythonX.Y) to $py_dir, leaving out its tests and site-packages, and rewrites each
# ELF file's RUNPATH that pointed into the source tree to an $ORIGIN-relative one, so
# the copy finds its own libpython without reading the (0700) source home.
copy_python() {
    local src_py=$1 src ver tmp f rp rel dir
    src=$(cd "$(dirname "$src_py")/.." && pwd)
    ver=$("$src_py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    [ -d "$src/lib/python$ver" ] || die "$src_py: no $src/lib/python$ver (not a prefix install?)"
    tmp=$py_dir.tmp.$$
    $SUDO rm -rf "$tmp"
    $SUDO mkdir -p "$tmp/bin" "$tmp/lib"
    $SUDO cp -a "$src/bin/python$ver" "$tmp/bin/"
    $SUDO cp -a "$src"/lib/libpython* "$tmp/lib/" 2>/dev/null || true  # absent in a static build
    [ -d "$src/include" ] && $SUDO cp -a "$src/include" "$tmp/"
    # the standard library without its tests, site-packages empty (pip comes from ensurepip)
    (cd "$src/lib" && $SUDO tar -cf - --exclude="python$ver/test" --exclude="python$ver/site-packages/*" \
        --exclude='__pycache__' "python$ver") | (cd "$tmp/lib" && $SUDO tar -xf -)
    $SUDO mkdir -p "$tmp/lib/python$ver/site-packages"
    $SUDO ln -s "python$ver" "$tmp/bin/python3"
    $SUDO ln -s "python$ver" "$tmp/bin/python"
    ensure_patchelf
    while IFS= read -r f; do
        rp=$(patchelf --print-rpath "$f" 2>/dev/null) || continue
        case "$rp" in *"$src"*) ;; *) continue ;; esac
        dir=$(dirname "$f"); rel=$(realpath --relative-to="$dir" "$tmp/lib")
        [ "$rel" = . ] && rel='$ORIGIN' || rel="\$ORIGIN/$rel"
        $SUDO patchelf --set-rpath "$rel" "$f"
    done < <(find "$tmp/bin" "$tmp/lib" -type f \( -name 'python3*' -o -name '*.so*' \) ! -name '*.py')
    $SUDO chmod -R a+rX "$tmp"
    # bytecode for the stdlib, so a user who cannot write here does not recompile it each run
    $SUDO "$tmp/bin/python$ver" -m compileall -q -j 0 "$tmp/lib/python$ver" >/dev/null 2>&1 || true
    $SUDO chmod -R a+rX "$tmp"
    echo "source=$src_py version=$("$tmp/bin/python$ver" -c 'import platform; print(platform.python_version())')" \
        | $SUDO tee "$tmp/.sshkit-python" >/dev/null
    $SUDO rm -rf "$py_dir"
    $SUDO mv "$tmp" "$py_dir"
}

if [ -f "$py_dir/.sshkit-python" ] && py_ok "$py_dir/bin/python3"; then
    python=$py_dir/bin/python3
    say "python: $($python -V) at $py_dir (already there)"
else
    if [ -n "${SSHKIT_PYTHON:-}" ] && ! py_ok "$SSHKIT_PYTHON"; then
        die "SSHKIT_PYTHON=$SSHKIT_PYTHON is not a working Python >= 3.12 (and without the slots-dataclass bug of early 3.12 releases, which 3.12.1 has)"
    fi
    if ! src_py=$(find_source_python); then
        say "python: no Python >= 3.12 here; trying uv's (uv from PyPI, its Python from GitHub)"
        src_py=$(python_from_uv) || die "no Python >= 3.12: none in /usr/bin, /usr/local/bin or pyenv, and \
uv could not download one; install one (uv python install 3.12, or python3.12 from your distribution) and set \
SSHKIT_PYTHON=/path/to/python3.12, then run this again"
    fi
    case "$src_py" in
        /usr/bin/*) python=$src_py; say "python: using the system's $src_py" ;;
        *) say "python: copying $src_py to $py_dir"; copy_python "$src_py"; python=$py_dir/bin/python3 ;;
    esac
    py_ok "$python" || die "$python does not work after the copy"
fi

# --- 2. the agents' virtualenvs -------------------------------------------------------

# make_venv DIR BINARY REQUIREMENT CONSTRAINTS: DIR/bin/BINARY from REQUIREMENT (name==version), unless
# a finished install of that exact requirement is already there.
make_venv() {
    local dir=$1 bin=$2 req=$3 constraints=$4
    local stamp="$req python-$("$python" -c 'import platform; print(platform.python_version())')"
    if [ -x "$dir/bin/$bin" ] && [ "$(cat "$dir/.sshkit-installed" 2>/dev/null)" = "$stamp" ] \
        && "$dir/bin/python" -c 'import sys' 2>/dev/null; then
        say "$req: already in $dir"; return
    fi
    say "$req: installing into $dir"
    $SUDO rm -rf "$dir"
    $SUDO "$python" -m venv "$dir" || { $SUDO rm -rf "$dir"; die "creating the venv $dir failed"; }
    local pip=("$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir --prefer-binary)
    # the dependency versions this script was tried with (pip freeze of a good install), so
    # that a later release of a loosely pinned dependency does not change what is tested;
    # when one of them is no longer served, install without them
    local ok=0
    if [ -f "$constraints" ]; then
        if $SUDO "${pip[@]}" -c "$constraints" "$req"; then ok=1; else say "$req: retrying without $constraints"; fi
    fi
    if [ "$ok" = 0 ] && $SUDO "${pip[@]}" "$req"; then ok=1; fi
    if [ "$ok" = 0 ]; then
        $SUDO rm -rf "$dir"
        die "installing $req into $dir failed"
    fi
    $SUDO chmod -R a+rX "$dir"
    echo "$stamp" | $SUDO tee "$dir/.sshkit-installed" >/dev/null
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
make_venv "$vibe_venv" vibe "mistral-vibe==$VIBE_VERSION" "$here/vibe-constraints.txt"
make_venv "$kimi_venv" kimi "kimi-cli==$KIMI_VERSION" "$here/kimi-constraints.txt"

# --- 3. check -------------------------------------------------------------------------
# (--version of each; kimi-cli 1.52.0, the stub, would print a deprecation notice)
kimi_v=$("$kimi_venv/bin/kimi" --version 2>&1 | head -1)
case "$kimi_v" in *"no longer maintained"*|*1.52*) die "$kimi_venv holds the kimi-cli deprecation stub: $kimi_v" ;; esac
say "ok: $($python -V), vibe $("$vibe_venv/bin/vibe" --version 2>&1 | head -1), $kimi_v"
