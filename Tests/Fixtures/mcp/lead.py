"""An MCP client nobody here wrote (the Python `mcp` SDK from PyPI) driving
`agent-sessions mcp` as a lead agent would: it lists the tools, starts a task, waits for it
(asking to be told how the wait goes), reads its diff once the test has changed a file in the
worktree (a line on this script's stdin says so), lands it and stops it. Each step prints
one JSON line: {"step": ..., "error": bool, "text": ...}.

Usage: lead.py AGENT_SESSIONS HOME PROJECT AGENT
"""
import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def say(step, error=False, text="", **more):
    print(json.dumps({"step": step, "error": bool(error), "text": text, **more}), flush=True)


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


async def main():
    binary, home, project, agent = sys.argv[1:5]
    params = StdioServerParameters(command=binary, args=["mcp"],
                                   env={"HOME": home, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            say("tools", text=json.dumps(sorted(t.name for t in tools.tools)))

            async def call(step, name, arguments, **options):
                r = await session.call_tool(name, arguments, **options)
                say(step, r.is_error, text_of(r))
                return r

            await call("started", "start_task", {"project": project, "title": "From a lead", "agent": agent,
                                                 "prompt": "make notes"})
            told = []

            async def progress(done, total, message):
                told.append(message)

            r = await session.call_tool("wait_for_task", {"task": "From a lead", "timeout_seconds": 60},
                                        progress_callback=progress)
            say("waited", r.is_error, text_of(r), progress=told)
            # the test writes the worker's file, then a line here
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            await call("diff", "task_diff", {"task": "From a lead"})
            await call("landed", "land_task", {"task": "From a lead", "message": "Notes from the worker"})
            await call("stopped", "stop_task", {"task": "From a lead"})
            await call("bad", "start_task", {"project": project, "title": 5, "agent": agent})


asyncio.run(main())
