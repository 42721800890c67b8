#!/usr/bin/env python3
"""A throwaway asyncssh SSH server on 127.0.0.1 for the interop tests.

    asyncssh-server.py DIR AUTHORIZED_KEYS

Listens on 127.0.0.1 with a free port and a fresh Ed25519 host key, accepts the
public keys in AUTHORIZED_KEYS, serves SFTP rooted at DIR/root and runs exec
requests with /bin/sh -c in DIR/root. When it listens it writes DIR/env with
ASYNCSSH_PORT and ASYNCSSH_FP (the host key's SHA256 fingerprint). It exits on
SIGTERM (the test stops it by PID) and by itself after an hour at the latest.
"""
import asyncio
import logging
import os
import signal
import sys

import asyncssh

LIFETIME_S = 3600


async def run_command(process: asyncssh.SSHServerProcess, root: str) -> None:
    command = process.command
    if command is None:
        process.stderr.write("this server runs commands only\n")
        process.exit(1)
        return
    child = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", command, cwd=root,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    await process.redirect(stdin=child.stdin)

    async def copy(source: asyncio.StreamReader, sink: asyncssh.SSHWriter) -> None:
        while chunk := await source.read(65536):
            sink.write(chunk)
            await sink.drain()

    # both outputs are copied to their end before the exit status goes out; asyncssh's
    # own output redirection can still be writing when the process exits, and its
    # write to the closed channel then ends the whole connection
    await asyncio.gather(copy(child.stdout, process.stdout), copy(child.stderr, process.stderr))
    status = await child.wait()
    process.exit(status if status >= 0 else 128 - status)


async def main() -> None:
    directory, authorized = sys.argv[1], sys.argv[2]
    # warnings and errors (a handler's exception, a dropped connection's reason) go to
    # stderr, which the test keeps in DIR/server.log
    logging.basicConfig(level=logging.DEBUG if os.environ.get("ASYNCSSH_DEBUG") else logging.INFO,
                        stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if os.environ.get("ASYNCSSH_DEBUG"):
        asyncssh.set_debug_level(2)
    root = os.path.join(directory, "root")
    os.makedirs(root, exist_ok=True)
    host_key = asyncssh.generate_private_key("ssh-ed25519")

    server = await asyncssh.listen(
        "127.0.0.1", 0,
        server_host_keys=[host_key],
        authorized_client_keys=authorized,
        process_factory=lambda p: run_command(p, root),
        sftp_factory=lambda chan: asyncssh.SFTPServer(chan, chroot=root.encode()),
        allow_scp=False,
        encoding=None)
    port = server.sockets[0].getsockname()[1]
    fingerprint = host_key.get_fingerprint("sha256")
    tmp = os.path.join(directory, "env.tmp")
    with open(tmp, "w") as f:
        f.write(f"ASYNCSSH_PORT={port}\nASYNCSSH_FP={fingerprint}\n")
    os.rename(tmp, os.path.join(directory, "env"))

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    try:
        await asyncio.wait_for(stop.wait(), LIFETIME_S)
    except asyncio.TimeoutError:
        pass
    server.close()


if __name__ == "__main__":
    asyncio.run(main())
