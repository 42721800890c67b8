#!/usr/bin/env bash
# Installs the system packages SSHKit builds against and tests with (Debian/Ubuntu).
set -euo pipefail
packages=(libssh-dev libssl-dev pkg-config openssh-server openssh-client dropbear-bin ssh-audit procps iproute2 iptables tmux curl sqlite3 libsqlite3-dev git python3 python3-venv
          zsh mksh busybox  # the shells of the quoting proof (Reliability part 7)
          netcat-openbsd socat  # ProxyCommand tests (nc and socat as ssh users run them)
          nodejs  # the stand-in for OpenCode that loads the engine's status plugin
          clang-format-16  # the C core's layout check (scripts/format-c.sh --check)
          libcurl4-openssl-dev  # a release build with the Swift runtime linked in (scripts/install.sh)
          node-xterm qrencode  # agent-sessions serve: the terminal on its page, the pairing QR code
          chromium chromium-driver  # the page's tests, in a real headless browser
          dpkg-dev lintian  # the Debian package (scripts/package-deb.sh) and its test
          systemd)  # systemd-analyze verify reads the service units the command writes
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# asyncssh's server for the interop tests (PyPI)
if ! python3 -c 'import asyncssh' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore 'asyncssh>=2.14' \
        || python3 -m pip install --quiet 'asyncssh>=2.14'
fi
# a real coding agent for the agent-sessions tests: Hermes (PyPI), in a virtualenv of
# Debian's Python that the fixture's test user can run (pip's default here may be root's)
hermes_venv=/opt/sshkit-hermes
if [ ! -x "$hermes_venv/bin/hermes" ]; then
    $SUDO /usr/bin/python3 -m venv "$hermes_venv"
    $SUDO "$hermes_venv/bin/pip" install --quiet --disable-pip-version-check 'hermes-agent==0.19.0'
    $SUDO chmod -R a+rX "$hermes_venv"
fi
# an MCP client nobody here wrote, for the tests of agent-sessions mcp: the protocol's
# Python SDK (PyPI), in a virtualenv of Debian's Python
mcp_venv=/opt/sshkit-mcp-client
if [ ! -x "$mcp_venv/bin/python" ] || ! "$mcp_venv/bin/python" -c 'import mcp' 2>/dev/null; then
    $SUDO /usr/bin/python3 -m venv "$mcp_venv"
    $SUDO "$mcp_venv/bin/pip" install --quiet --disable-pip-version-check 'mcp==2.3.0' \
        || echo "warning: the Python mcp SDK could not be installed; the test of a real MCP client will fail" >&2
    $SUDO chmod -R a+rX "$mcp_venv"
fi
# Selenium (PyPI) drives the headless Chromium of the page's tests; http_ece (PyPI), Web
# Push encryption nobody here wrote, decrypts what the page's server sends
browser_venv=/opt/sshkit-browser
if [ ! -x "$browser_venv/bin/python" ] || ! "$browser_venv/bin/python" -c 'import selenium, http_ece' 2>/dev/null; then
    $SUDO /usr/bin/python3 -m venv "$browser_venv"
    $SUDO "$browser_venv/bin/pip" install --quiet --disable-pip-version-check 'selenium==4.27.1' 'http_ece==1.2.1' \
        || echo "warning: Selenium or http_ece could not be installed; the tests of the page will fail" >&2
    $SUDO chmod -R a+rX "$browser_venv"
fi
# the real coding agents that need Python 3.12 or newer (Mistral Vibe, Kimi): a Python of
# their own in /opt/sshkit-python and one virtualenv each. A failure is reported and the
# tests of those agents then fail saying what is missing; they never skip.
bash "$(dirname "$0")/agents/install-agents.sh" \
    || echo "warning: the real Vibe and Kimi agents could not be installed (see above); their tests will fail" >&2
echo "system packages: ok (libssh $(pkg-config --modversion libssh), asyncssh $(python3 -c 'import asyncssh; print(asyncssh.__version__)'), $("$hermes_venv/bin/hermes" --version 2>/dev/null | head -1))"
