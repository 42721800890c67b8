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
        // a Vibe-like screen with no hooks: its idle prompt is a line ">" (Vibe's idle rule),
        // and each answer comes at once, so a turn starts and ends between two looks
        "fake-quick": #"""
            #!/bin/sh
            n=0
            while :; do
                printf '>\n'
                IFS= read -r line || exit 0
                n=$((n + 1))
                echo "answer $n: $line"
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
        // runs the hooks it was given as each agent documents them: Claude's settings file
        // (--settings), Gemini CLI's or Qwen Code's system-defaults settings file (named by
        // GEMINI_CLI_SYSTEM_DEFAULTS_PATH, QWEN_CODE_SYSTEM_DEFAULTS_PATH), with the event's
        // JSON on the hook's standard input; a hook that prints anything (Gemini shows it to
        // the model) or fails ends the agent with 9
        "fake-hooked": #"""
            #!/usr/bin/env python3
            import json, os, subprocess, sys
            args = sys.argv[1:]
            if "--settings" in args:
                flavor, path = "claude", args[args.index("--settings") + 1]
            elif os.environ.get("GEMINI_CLI_SYSTEM_DEFAULTS_PATH"):
                flavor, path = "gemini", os.environ["GEMINI_CLI_SYSTEM_DEFAULTS_PATH"]
            elif os.environ.get("QWEN_CODE_SYSTEM_DEFAULTS_PATH"):
                flavor, path = "qwen", os.environ["QWEN_CODE_SYSTEM_DEFAULTS_PATH"]
            else:
                flavor, path = "none", None
            settings = json.load(open(path)) if path else {"hooks": {}}
            events = {
                "claude": {"start": ["SessionStart"], "work": ["UserPromptSubmit", "PreToolUse"], "ask": ["Notification"], "done": ["Stop"], "fail": []},
                "gemini": {"start": ["SessionStart"], "work": ["BeforeAgent", "BeforeTool"], "ask": ["Notification"], "done": ["AfterAgent"], "fail": []},
                "qwen": {"start": ["SessionStart"], "work": ["UserPromptSubmit", "PreToolUse"], "ask": ["PermissionRequest"], "done": ["Stop"], "fail": ["StopFailure"]},
                "none": {"start": [], "work": [], "ask": [], "done": [], "fail": []},
            }[flavor]
            def fire(step):
                for event in events[step]:
                    for group in settings["hooks"].get(event, []):
                        for hook in group["hooks"]:
                            if flavor != "claude" and not (hook.get("type") == "command" and hook.get("name") and isinstance(hook.get("timeout"), int)):
                                print("BAD HOOK", hook, flush=True); sys.exit(9)
                            data = json.dumps({"session_id": "s1", "hook_event_name": event, "cwd": os.getcwd(),
                                               "notification_type": "ToolPermission"})
                            r = subprocess.run(["/bin/sh", "-c", hook["command"]], input=data.encode(), capture_output=True)
                            if r.returncode != 0 or r.stdout or r.stderr:
                                print("HOOK FAILED", r, flush=True); sys.exit(9)
            fire("start")
            print("ready", flavor, flush=True)
            for line in sys.stdin:
                line = line.strip()
                if line == "work":
                    fire("work"); print("working on it", flush=True)
                elif line == "ask":
                    fire("ask"); print("Allow this? (y/n)", flush=True)
                elif line == "done":
                    fire("done"); print("done.", flush=True)
                elif line == "fail":
                    fire("fail"); print("the model's API failed", flush=True)
                elif line == "quit":
                    sys.exit(3)
            """#,
        // Claude Code's hooks around whole turns: each line typed is a prompt, a turn of
        // 1.5 s between its UserPromptSubmit and its Stop, numbered on the screen; `limit`
        // and `limit-no-time` print a usage limit's message instead, which `continue` clears
        "fake-turns": #"""
            #!/usr/bin/env python3
            import json, subprocess, sys, time
            args = sys.argv[1:]
            settings = json.load(open(args[args.index("--settings") + 1]))
            def fire(event):
                for group in settings["hooks"].get(event, []):
                    for hook in group["hooks"]:
                        subprocess.run(["/bin/sh", "-c", hook["command"]], input=b"{}", capture_output=True)
            fire("SessionStart")
            print("ready", flush=True)
            n = 0
            for line in sys.stdin:
                line = line.strip()
                if not line:
                    continue
                if line == "limit":
                    # Claude's usage-limit message with its reset time, 3 s ahead
                    fire("UserPromptSubmit")
                    print(f"Claude AI usage limit reached|{int(time.time()) + 3}", flush=True)
                    continue
                if line == "limit-no-time":
                    fire("UserPromptSubmit")
                    print("5-hour limit reached - resets whenever", flush=True)
                    continue
                if line == "continue":
                    # the limit's message goes, as Claude redraws its screen
                    print("\033[2J\033[H", end="", flush=True)
                n += 1
                fire("UserPromptSubmit")
                print(f"turn {n}: {line}", flush=True)
                time.sleep(1.5)
                fire("Stop")
                print(f"end of turn {n}", flush=True)
            """#,
        // OpenCode as its plugins see it: loads each `file://` plugin listed in
        // OPENCODE_CONFIG_CONTENT as an ES module (as Bun does; Node needs the .mjs name),
        // refuses a module with an export that is not a function, and calls their hooks:
        // `chat.message` and `tool.execute.before` for a prompt, events for the rest, and a
        // sub-agent's session (one with a parent) that ends on its own
        "fake-opencode": #"""
            #!/usr/bin/env node
            const fs = require("node:fs"), os = require("node:os"), path = require("node:path"), readline = require("node:readline");
            (async () => {
                const config = JSON.parse(process.env.OPENCODE_CONFIG_CONTENT || "{}");
                const hooks = [];
                for (const spec of config.plugin || []) {
                    const file = decodeURIComponent(new URL(spec).pathname);
                    const copy = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "fake-opencode-")), path.basename(file, ".js") + ".mjs");
                    fs.copyFileSync(file, copy);
                    const mod = await import(copy);
                    for (const [name, fn] of Object.entries(mod)) {
                        if (typeof fn !== "function") { console.log("Plugin export is not a function:", name); process.exit(9); }
                        hooks.push(await fn({ client: {}, directory: process.cwd(), worktree: process.cwd(), $: undefined }));
                    }
                }
                const event = (type, properties) => hooks.forEach((h) => h.event && h.event({ event: { type, properties } }));
                const call = (name, input) => hooks.forEach((h) => h[name] && h[name](input, {}));
                const main = "ses_main", sub = "ses_sub";
                event("session.created", { info: { id: main } });
                console.log("ready opencode", hooks.length);
                const rl = readline.createInterface({ input: process.stdin });
                for await (const raw of rl) {
                    const line = raw.trim();
                    if (line === "work") {
                        call("chat.message", { sessionID: main }); event("session.status", { sessionID: main, status: { type: "busy" } });
                        call("tool.execute.before", { tool: "bash", sessionID: main, callID: "c1" }); console.log("working on it");
                    } else if (line === "sub") {
                        event("session.created", { info: { id: sub, parentID: main } });
                        call("chat.message", { sessionID: sub }); event("session.status", { sessionID: sub, status: { type: "idle" } });
                        event("session.idle", { sessionID: sub }); console.log("a sub-agent finished");
                    } else if (line === "ask") {
                        event("permission.asked", { id: "p1", sessionID: main, permission: "bash" }); console.log("Allow this? (y/n)");
                    } else if (line === "done") {
                        event("session.status", { sessionID: main, status: { type: "idle" } }); event("session.idle", { sessionID: main }); console.log("done.");
                    } else if (line === "quit") {
                        process.exit(3);
                    }
                }
            })();
            """#,
        // a dev server on the task's port, serving its worktree
        "fake-devserver": #"""
            #!/bin/sh
            echo "serving on ${PORT:-no port}"
            exec python3 -m http.server "$PORT" --bind 127.0.0.1
            """#,
        // prints numbered lines as fast as it can, forever
        "fake-flood": #"""
            #!/bin/sh
            i=0
            while :; do i=$((i + 1)); echo "flood $i"; done
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
