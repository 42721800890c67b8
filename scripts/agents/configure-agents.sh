#!/usr/bin/env bash
# Points the real agent CLIs of one user at the scripted model server
# (scripts/agents/fake-model-server.py) on 127.0.0.1:PORT.
#
#   configure-agents.sh HOME PORT [OWNER]
#
# Writes, under HOME (created if missing; chowned to OWNER, user or user:group, when given):
#   .vibe/config.toml, .vibe/.env                               Mistral Vibe 3.x
#   .kimi/config.toml                                           kimi-cli 1.51
#   .hermes/config.yaml, .hermes/.env                           Hermes Agent 0.19
# Each file is rewritten whole, so running it again (another port) is safe. The model is
# called `fake-model`, the key `sk-sshkit-fake`. Update checks and telemetry are off
# (there is no network to reach), so nothing blocks the first screen.
#
# Also usable as a library: `source configure-agents.sh` defines configure_agents.
set -euo pipefail

configure_agents() {
    local home=$1 port=$2 owner=${3:-}
    [ -n "$home" ] && [ -n "$port" ] || { echo "usage: configure-agents.sh HOME PORT [OWNER]" >&2; return 2; }
    case "$port" in *[!0-9]*) echo "configure-agents.sh: PORT must be a number" >&2; return 2 ;; esac
    local base="http://127.0.0.1:$port/v1" key=sk-sshkit-fake
    mkdir -p "$home/.vibe" "$home/.kimi" "$home/.hermes"
    chmod 700 "$home/.vibe" "$home/.kimi" "$home/.hermes"

    # --- Mistral Vibe: a `generic` (OpenAI-compatible) provider, the key named by
    # api_key_env_var and kept in ~/.vibe/.env (Vibe loads that file itself)
    cat >"$home/.vibe/config.toml" <<EOF
active_model = "fake"
enable_telemetry = false
enable_update_checks = false
enable_auto_update = false
enable_notifications = false

[session_logging]
generate_titles = false

[[providers]]
name = "sshkit-fake"
api_base = "$base"
api_key_env_var = "SSHKIT_FAKE_API_KEY"
api_style = "openai"
backend = "generic"

[[models]]
name = "fake-model"
provider = "sshkit-fake"
alias = "fake"
temperature = 0.0
max_context_length = 131072
EOF
    printf 'SSHKIT_FAKE_API_KEY=%s\n' "$key" >"$home/.vibe/.env"
    chmod 600 "$home/.vibe/.env"

    # --- Kimi (kimi-cli 1.51): an `openai_legacy` provider (Chat Completions)
    cat >"$home/.kimi/config.toml" <<EOF
default_model = "fake"
default_thinking = false
telemetry = false

[providers.sshkit-fake]
type = "openai_legacy"
base_url = "$base"
api_key = "$key"

[models.fake]
provider = "sshkit-fake"
model = "fake-model"
max_context_size = 131072
EOF
    chmod 600 "$home/.kimi/config.toml"

    # --- Hermes Agent: a custom OpenAI-compatible endpoint (model.base_url); the same in
    # .env (OPENAI_BASE_URL/OPENAI_API_KEY) so its first-run guard sees a provider
    cat >"$home/.hermes/config.yaml" <<EOF
model:
  default: fake-model
  provider: custom
  base_url: $base
  api_key: $key
EOF
    printf 'OPENAI_BASE_URL=%s\nOPENAI_API_KEY=%s\n' "$base" "$key" >"$home/.hermes/.env"
    chmod 600 "$home/.hermes/.env" "$home/.hermes/config.yaml"

    if [ -n "$owner" ]; then
        chown -R "$owner" "$home/.vibe" "$home/.kimi" "$home/.hermes"
    fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    configure_agents "$@"
fi
