import Foundation

/// Small scripts that behave like agent CLIs in the ways the engine depends on,
/// installed in a directory every test user can read (the "host" is this machine).
enum FakeAgents {
    static let scripts: [String: String] = [
        // a TUI that prints how it was started, then answers each line it reads
        "fake-tui": #"""
            #!/bin/sh
            printf 'ARGS:'; for a in "$@"; do printf ' [%s]' "$a"; done; printf '\n'
            printf 'ENV FOO=[%s]\n' "${FOO:-}"
            printf 'CWD %s\n' "$(pwd)"
            esc=$(printf '\033')
            while :; do
                printf 'READY> '
                IFS= read -r line || exit 0
                case "$line" in *"$esc[200~"*) echo "PASTE-START" ;; esac
                case "$line" in *"$esc[201~"*) echo "PASTE-END" ;; esac
                case "$line" in
                    quit) echo bye; exit 0 ;;
                    exit\ *) exit "${line#exit }" ;;
                    box) printf 'BOX \342\224\214\342\224\200\342\224\220 \342\240\277 END\n'; continue ;;
                esac
                echo "got: $line"
            done
            """#,
        // prints a numbered line every 100 ms, forever
        "fake-ticker": #"""
            #!/bin/sh
            i=0
            while :; do i=$((i + 1)); echo "tick $i"; sleep 0.1; done
            """#,
        // Claude Code's transcript rules: --session-id on an existing transcript fails as
        // "already in use", --resume on a missing one as "No conversation found"
        "fake-claude": #"""
            #!/bin/sh
            dir="${CLAUDE_CONFIG_DIR:-$HOME/.claude}/projects/$(pwd | sed 's/[^A-Za-z0-9]/-/g')"
            mode=none; id=
            while [ $# -gt 0 ]; do
                case "$1" in
                    --session-id) mode=new; id=$2; shift 2 ;;
                    --resume) mode=resume; id=$2; shift 2 ;;
                    -c|-r) mode=continue; shift ;;
                    *) shift ;;
                esac
            done
            case $mode in
                new)
                    if [ -e "$dir/$id.jsonl" ]; then echo "Error: Session ID $id is already in use."; exit 1; fi
                    mkdir -p "$dir" && echo '{}' > "$dir/$id.jsonl" && echo "NEW SESSION $id" ;;
                resume)
                    if [ ! -e "$dir/$id.jsonl" ]; then echo "No conversation found with session ID: $id"; exit 1; fi
                    echo "RESUMED $id" ;;
                continue) echo "CONTINUED THE LATEST" ;;
                none) echo "NO SESSION FLAGS" ;;
            esac
            exec sleep 300
            """#,
        // Codex's thread table: a fresh start records a thread for its directory
        "fake-codex": #"""
            #!/bin/sh
            db="${CODEX_HOME:-$HOME/.codex}/state_5.sqlite"
            mkdir -p "$(dirname "$db")"
            # WAL and a busy timeout, as Codex has them: a snapshot being taken must not make the insert fail
            sqlite3 "$db" ".timeout 5000" "PRAGMA journal_mode=WAL;" "CREATE TABLE IF NOT EXISTS threads (id TEXT PRIMARY KEY, cwd TEXT, created_at INTEGER, updated_at INTEGER, archived INTEGER DEFAULT 0);" >/dev/null
            if [ "$1" = resume ]; then echo "RESUMED $2"; exec sleep 300; fi
            sleep 0.5
            id="thread-$(date +%s%N)"; now=$(date +%s)
            sqlite3 "$db" ".timeout 5000" "INSERT INTO threads VALUES ('$id', '$(pwd)', $now, $now, 0);" || { echo "INSERT FAILED"; exit 1; }
            echo "STARTED $id"
            exec sleep 300
            """#,
        // runs the hooks of a Claude settings file (--settings) as Claude would
        "fake-hooked": #"""
            #!/usr/bin/env python3
            import json, subprocess, sys
            args = sys.argv[1:]
            settings = json.load(open(args[args.index("--settings") + 1])) if "--settings" in args else {"hooks": {}}
            def fire(event):
                for group in settings["hooks"].get(event, []):
                    for hook in group["hooks"]:
                        subprocess.run(["/bin/sh", "-c", hook["command"]], check=True)
            fire("SessionStart")
            print("ready", flush=True)
            for line in sys.stdin:
                line = line.strip()
                if line == "work":
                    fire("UserPromptSubmit"); fire("PreToolUse"); print("working on it", flush=True)
                elif line == "ask":
                    fire("Notification"); print("Allow this? (y/n)", flush=True)
                elif line == "done":
                    fire("Stop"); print("done.", flush=True)
                elif line == "quit":
                    sys.exit(3)
            """#,
        // ends at once with status 7
        "fake-exit": #"""
            #!/bin/sh
            echo "exiting with 7"
            exit 7
            """#,
        // a line drawn with a cursor movement inside it: "ready now" on the screen only
        "fake-drawn": #"""
            #!/bin/sh
            sleep 1.5
            printf 'ready\033[1Cnow\n'
            exec sleep 600
            """#,
    ]

    /// The directory with every fake (made once per test process).
    static let directory: String = {
        let dir = "/tmp/sshkit-fake-agents-\(getpid())"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                 attributes: [.posixPermissions: 0o755])
        for (name, text) in scripts {
            let path = dir + "/" + name
            FileManager.default.createFile(atPath: path, contents: Data((text + "\n").utf8),
                                           attributes: [.posixPermissions: 0o755])
        }
        ServerRegistry.dirs.withLock { _ = $0.insert(dir) }
        return dir
    }()

    /// A directory with executables named as given (each prints its name and exits),
    /// for detection tests.
    static func binaries(_ names: [String]) -> String {
        let dir = "/tmp/sshkit-fake-bins-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                 attributes: [.posixPermissions: 0o755])
        for name in names {
            FileManager.default.createFile(atPath: dir + "/" + name, contents: Data("#!/bin/sh\necho \(name)\n".utf8),
                                           attributes: [.posixPermissions: 0o755])
        }
        ServerRegistry.dirs.withLock { _ = $0.insert(dir) }
        return dir
    }
}
