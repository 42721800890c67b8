#!/usr/bin/env bash
# Installs the system packages SSHKit builds against and tests with (Debian/Ubuntu).
set -euo pipefail
packages=(libssh-dev libssl-dev pkg-config openssh-server openssh-client dropbear-bin procps iproute2 iptables tmux curl sqlite3)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# asyncssh's server for the interop tests (PyPI)
if ! python3 -c 'import asyncssh' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore 'asyncssh>=2.14' \
        || python3 -m pip install --quiet 'asyncssh>=2.14'
fi
echo "system packages: ok (libssh $(pkg-config --modversion libssh), asyncssh $(python3 -c 'import asyncssh; print(asyncssh.__version__)'))"
