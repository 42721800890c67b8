#!/usr/bin/env python3
"""A scripted OpenAI-compatible model server for the agent-sessions tests.

Real agent CLIs (Mistral Vibe, Kimi, Hermes) are pointed at it through their own config
files (scripts/agents/configure-agents.sh), so that they do real work with no model
service: write a file through their own write tool, run a command through their own
shell tool, answer.

    fake-model-server.py PORT [--idle SECONDS] [--log FILE] [--delay SECONDS]

Binds 127.0.0.1:PORT (0 = any free port) and prints the port alone on the first line of
stdout. Exits after SECONDS (default 900) without a request, and on SIGTERM/SIGINT.
Standard library only (runs on Debian 12's Python 3.11).

Endpoints (with or without the /v1 prefix):
    GET  /v1/models
    POST /v1/chat/completions      streaming (SSE, tool-call deltas) and non-streaming
    GET  /health                   "ok"

The script, when the request offers tools:
  * a turn that ends with the user's message (no tool result yet) answers with one tool
    call: by default the agent's own write tool (found in the request's `tools` by name:
    write_file / WriteFile / write / create_file …) writing `hello.txt` with the content
    `hello from the model`, relative to the agent's working directory (made absolute when
    the tool asks for absolute paths; the directory is read from the system prompt);
  * a turn that ends with a tool result answers with the text `done: wrote hello.txt`
    (`done: ran CMD` after a command).
Directives in the user's message change the script:
    file: NAME       write NAME instead of hello.txt
    content: TEXT    write TEXT (to the end of the line) instead of `hello from the model`
    run: CMD         call the agent's shell tool (bash / Shell / terminal …) with CMD instead
    slow: SECONDS    wait that long before answering (to watch the "working" screen)
    say: TEXT        answer TEXT with no tool call
    calls: NAME JSON | NAME JSON | …
                     call these tools one after another (an MCP tool is found by the end of
                     its name: `start_task` is also `agent-sessions_start_task` or
                     `mcp__agent-sessions__start_task`), each with its JSON arguments, one
                     per turn; after the last one's result, answer `lead: ` and that result
                     on one line
Without tools in the request (titles, summaries) the answer is plain text.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL_ID = "fake-model"
DEFAULT_FILE = "hello.txt"
DEFAULT_CONTENT = "hello from the model"

# names of the write and shell tools of the agents we know, best first; then patterns
WRITE_NAMES = ["write_file", "WriteFile", "write", "Write", "create_file", "file_write", "writeFile"]
SHELL_NAMES = ["bash", "Bash", "Shell", "shell", "terminal", "run_shell_command", "execute_command", "run_command"]
WRITE_RE = re.compile(r"write|create.*file", re.I)
SHELL_RE = re.compile(r"bash|shell|terminal|command|exec", re.I)

# where agents say their working directory in the system prompt
CWD_PATTERNS = [
    re.compile(r"working directory is `([^`]+)`", re.I),   # Kimi
    re.compile(r"^Absolute path: (/\S+)", re.M),               # Vibe 3
    re.compile(r"working directory(?: is|:)\s*['\"`]?(/[^\s'\"`]+)", re.I),
    re.compile(r"\bcwd(?: is|:|=)\s*['\"`]?(/[^\s'\"`]+)", re.I),
    re.compile(r"<cwd>\s*(/[^<\s]+)\s*</cwd>", re.I),
    re.compile(r"current directory(?: is|:)\s*['\"`]?(/[^\s'\"`]+)", re.I),
]

state = {"last": time.monotonic(), "requests": 0}
state_lock = threading.Lock()
log_lock = threading.Lock()
args = None


def text_of(content) -> str:
    """The text of a message's content (a string or a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict):
                out.append(str(part.get("text") or ""))
            else:
                out.append(str(part))
        return "\n".join(out)
    return str(content)


def directive(text: str, name: str) -> str | None:
    m = re.search(r"(?im)^\s*" + re.escape(name) + r":[ \t]*(.+?)\s*$", text)
    if m is None:
        m = re.search(r"(?i)\b" + re.escape(name) + r":[ \t]*([^\n]+?)\s*$", text, re.M)
    return m.group(1) if m else None


def tool_name(tool: dict) -> str:
    fn = tool.get("function") if isinstance(tool, dict) else None
    return str((fn or tool or {}).get("name") or "")


def tool_params(tool: dict) -> dict:
    fn = tool.get("function") or tool
    p = fn.get("parameters") or fn.get("input_schema") or {}
    return p if isinstance(p, dict) else {}


def pick_tool(tools: list, names: list, pattern: re.Pattern, avoid: re.Pattern | None = None):
    by_name = {tool_name(t): t for t in tools}
    for n in names:
        if n in by_name:
            return by_name[n]
    for t in tools:
        n = tool_name(t)
        if pattern.search(n) and not (avoid and avoid.search(n)):
            return t
    return None


def find_cwd(messages: list) -> str | None:
    for m in messages:
        if m.get("role") not in ("system", "developer", "user"):
            continue
        text = text_of(m.get("content"))
        for pat in CWD_PATTERNS:
            hit = pat.search(text)
            if hit:
                return hit.group(1).rstrip(".,;:)")
    return None


def fill_arguments(params: dict, wanted: dict) -> dict:
    """Arguments for a tool: `wanted` maps roles (path, content, command) to values;
    each property is matched to a role by its name; other required properties get a
    plausible value from their schema."""
    props = params.get("properties") or {}
    required = params.get("required") or []
    out = {}
    roles = {
        "path": re.compile(r"^(file_?path|path|filename|file_?name|file|target_file|absolute_path)$", re.I),
        "content": re.compile(r"^(content|contents|text|file_text|data|body)$", re.I),
        "command": re.compile(r"^(command|cmd|script|commands)$", re.I),
    }
    for name, schema in props.items():
        for role, pat in roles.items():
            if role in wanted and pat.match(name):
                out[name] = wanted[role]
                break
    for name in required:
        if name in out:
            continue
        schema = props.get(name) or {}
        if "enum" in schema and schema["enum"]:
            out[name] = schema["enum"][0]
        elif "default" in schema:
            out[name] = schema["default"]
        else:
            t = schema.get("type")
            out[name] = {"boolean": True, "integer": 60, "number": 60, "array": [], "object": {}}.get(t, "")
    if not out and wanted:  # a tool with no schema: guess the common names
        out = {{"path": "path", "content": "content", "command": "command"}[k]: v for k, v in wanted.items()}
    return out


def plan_reply(body: dict):
    """(text, tool_call or None, delay) for one request."""
    messages = body.get("messages") or []
    tools = body.get("tools") or []
    last_user = ""
    last_user_index = -1
    for i, m in enumerate(messages):
        if m.get("role") == "user":
            last_user, last_user_index = text_of(m.get("content")), i
    delay = args.delay
    slow = directive(last_user, "slow")
    if slow:
        try:
            delay = float(slow.split()[0])
        except ValueError:
            pass
    if not tools:
        return ("hello from the fake model" if last_user_index < 0 else "Fake model answer"), None, delay
    chain = directive(last_user, "calls")
    if chain:
        return chained_call(chain, tools, messages[last_user_index + 1:], delay)
    say = directive(last_user, "say")
    command = directive(last_user, "run")
    name = directive(last_user, "file") or DEFAULT_FILE
    after_tool = any(m.get("role") == "tool" for m in messages[last_user_index + 1:])
    if say:
        return say, None, delay
    if after_tool:
        return (f"done: ran {command}" if command else f"done: wrote {name}"), None, delay
    if command:
        tool = pick_tool(tools, SHELL_NAMES, SHELL_RE, avoid=re.compile(r"background|output|stop|kill", re.I))
        if tool is None:
            return "no shell tool offered", None, delay
        arguments = fill_arguments(tool_params(tool), {"command": command})
    else:
        tool = pick_tool(tools, WRITE_NAMES, WRITE_RE, avoid=re.compile(r"todo|memory|note", re.I))
        if tool is None:
            return "no write tool offered", None, delay
        content = directive(last_user, "content") or DEFAULT_CONTENT
        path = name
        if not os.path.isabs(path):
            cwd = find_cwd(messages)
            if cwd:
                path = os.path.join(cwd, path)
        arguments = fill_arguments(tool_params(tool), {"path": path, "content": content + "\n"})
    call = {"id": "call_" + uuid.uuid4().hex[:24], "type": "function",
            "function": {"name": tool_name(tool), "arguments": json.dumps(arguments)}}
    return "", call, delay


def chained_call(chain: str, tools: list, since_user: list, delay: float):
    """The next call of a `calls:` chain, or the answer after its last result."""
    steps = [step.strip() for step in chain.split(" | ") if step.strip()]
    results = [m for m in since_user if m.get("role") == "tool"]
    if len(results) >= len(steps):
        last = " ".join(text_of(results[-1].get("content")).split()) if results else ""
        return "lead: " + last[:4000], None, delay
    name, _, raw = steps[len(results)].partition(" ")
    tool = next((t for t in tools if tool_name(t) == name), None) or next(
        (t for t in tools if re.search(r"[_.:-]" + re.escape(name) + "$", tool_name(t))), None)
    if tool is None:
        return f"no tool {name} offered (offered: {', '.join(tool_name(t) for t in tools)})", None, delay
    try:
        arguments = json.loads(raw) if raw.strip() else {}
    except ValueError as e:
        return f"calls: the arguments of {name} are not JSON: {e}", None, delay
    call = {"id": "call_" + uuid.uuid4().hex[:24], "type": "function",
            "function": {"name": tool_name(tool), "arguments": json.dumps(arguments)}}
    return "", call, delay


def usage() -> dict:
    return {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-model/1"

    def log_message(self, fmt, *a):  # quiet; requests go to --log
        pass

    def touch(self):
        with state_lock:
            state["last"] = time.monotonic()
            state["requests"] += 1

    def send_json(self, code: int, obj) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def route(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        return path[3:] if path.startswith("/v1/") or path == "/v1" else path

    def do_GET(self):
        self.touch()
        r = self.route()
        if r == "/models":
            self.send_json(200, {"object": "list", "data": [
                {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "sshkit"}]})
        elif r in ("/health", ""):
            self.send_json(200, {"status": "ok"})
        else:
            self.send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self):
        self.touch()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self.send_json(400, {"error": {"message": "bad json", "type": "invalid_request_error"}})
            return
        r = self.route()
        if r != "/chat/completions":
            self.send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        text, call, delay = plan_reply(body)
        if args.log:
            with log_lock, open(args.log, "a", encoding="utf-8") as f:
                f.write(json.dumps({"time": time.time(), "path": self.path, "request": body,
                                    "reply": {"text": text, "tool_call": call}}) + "\n")
        if delay > 0:
            time.sleep(delay)
        model = body.get("model") or MODEL_ID
        cid = "chatcmpl-" + uuid.uuid4().hex[:24]
        created = int(time.time())
        finish = "tool_calls" if call else "stop"
        if not body.get("stream"):
            message = {"role": "assistant", "content": text or None}
            if call:
                message["tool_calls"] = [call]
            self.send_json(200, {"id": cid, "object": "chat.completion", "created": created, "model": model,
                                 "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                                 "usage": usage()})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def chunk(delta: dict, finish_reason=None, extra: dict | None = None):
            obj = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
            if extra:
                obj.update(extra)
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            self.wfile.flush()

        try:
            chunk({"role": "assistant", "content": ""})
            if text:
                words = re.findall(r"\S+\s*", text) or [text]
                for w in words:
                    chunk({"content": w})
            if call:
                a = call["function"]["arguments"]
                chunk({"tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                                       "function": {"name": call["function"]["name"], "arguments": ""}}]})
                step = max(1, len(a) // 3)
                for i in range(0, len(a), step):
                    chunk({"tool_calls": [{"index": 0, "function": {"arguments": a[i:i + step]}}]})
            include_usage = (body.get("stream_options") or {}).get("include_usage")
            chunk({}, finish, None if include_usage else {"usage": usage()})
            if include_usage:
                obj = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                       "choices": [], "usage": usage()}
                self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass


def main() -> int:
    global args
    p = argparse.ArgumentParser(description="scripted OpenAI-compatible model server (127.0.0.1 only)")
    p.add_argument("port", type=int, help="port on 127.0.0.1; 0 picks a free one")
    p.add_argument("--idle", type=float, default=900, help="exit after this many seconds without a request")
    p.add_argument("--log", help="append each request and the scripted reply as JSON lines here")
    p.add_argument("--delay", type=float, default=0, help="seconds to wait before each answer")
    args = p.parse_args()

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def watchdog():
        while True:
            time.sleep(min(5.0, max(0.5, args.idle / 10)))
            with state_lock:
                idle = time.monotonic() - state["last"]
            if idle > args.idle:
                print(f"fake-model-server: idle for {int(idle)} s, exiting", file=sys.stderr, flush=True)
                stop()
                return

    threading.Thread(target=watchdog, daemon=True).start()
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
