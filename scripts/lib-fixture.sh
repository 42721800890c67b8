# Shared by test-sshd.sh and test-dropbear.sh (sourced, not run).

# Prints a random free port on 127.0.0.1: nothing answers a connect on it (bounded tries).
free_port() {
    local candidate
    for _ in $(seq 1 100); do
        candidate=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "no free port found" >&2
    return 1
}
