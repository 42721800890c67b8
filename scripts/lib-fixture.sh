# Shared by test-sshd.sh and test-dropbear.sh (sourced, not run).

# Prints a random free port on 127.0.0.1: nothing answers a connect on it (bounded tries).
# Below Linux's ephemeral range (32768-60999): a port there can be the local end of some
# outgoing connection, which no connect reveals but which makes sshd's bind fail. And
# below 20000: remote forwards with port 0 pick from 20000-32767 (SSHKit's range), and
# sshd's "localhost" bind of such a port succeeds on ::1 alone when a fixture holds it on
# 127.0.0.1, so a forward could reach a fixture's sshd instead of its own target.
free_port() {
    local candidate
    for _ in $(seq 1 100); do
        candidate=$((10000 + RANDOM % 10000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "no free port found" >&2
    return 1
}
