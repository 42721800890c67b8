"""What `sshkit-bench --only=serve` measures in a real headless Chromium and beside it.

Modes (each prints one JSON object on its last line):

  keys   A keystroke's round trip into one agent's tmux pane, three ways, in turns:
         the page of `agent-sessions serve` (its terminal socket), webssh (xterm.js over
         tornado and paramiko: what people install for a web SSH terminal) in the same
         headless Chromium, and `ssh -tt host tmux attach`. In the browser the time is
         taken in the page itself: from the socket's send of the key to the first message
         that holds the agent's answer (each socket wrapped before the page's scripts run).
         The agent answers each key with a line `k<count>;` never seen before, so a redraw
         cannot stand in for it.
  load   The board's first load, and a task page's: the bytes of the page and of what it
         loads (the Resource Timing API's transferSize, the cache off), and the board's
         first socket message.
  board  Listens to the board's socket and writes, for each message, when it came and
         each agent's state, as JSON lines to --file, until --seconds pass.
"""
import argparse
import json
import os
import select
import subprocess
import sys
import time

WRAP_SOCKETS = r"""
(function () {
  var W = window.WebSocket;
  window.__tx = []; window.__rx = [];
  function Wrapped(url, protocols) {
    var ws = protocols === undefined ? new W(url) : new W(url, protocols);
    var send = ws.send.bind(ws);
    ws.send = function (d) { window.__tx.push(performance.now()); return send(d); };
    ws.addEventListener('message', function (e) {
      var t = performance.now();
      if (typeof e.data === 'string') { window.__rx.push([t, e.data]); return; }
      if (e.data instanceof ArrayBuffer) { window.__rx.push([t, new TextDecoder().decode(e.data)]); return; }
      if (e.data && e.data.text) { e.data.text().then(function (s) { window.__rx.push([t, s]); }); }
    });
    return ws;
  }
  Wrapped.prototype = W.prototype;
  ['CONNECTING', 'OPEN', 'CLOSING', 'CLOSED'].forEach(function (k) { Wrapped[k] = W[k]; });
  window.WebSocket = Wrapped;
})();
"""


def browser(profile, width=1280, height=900):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=%d,%d" % (width, height), "--user-data-dir=" + profile):
        options.add_argument(arg)
    options.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    driver.set_page_load_timeout(30)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WRAP_SOCKETS})
    return driver


def wait_for(what, seconds=30.0, every=0.05):
    end = time.time() + seconds
    while time.time() < end:
        try:
            v = what()
            if v:
                return v
        except Exception:
            pass
        time.sleep(every)
    return None


def pair(driver, url, code):
    from selenium.webdriver.common.by import By
    driver.get(url + "/pair#code=" + code)
    driver.find_element(By.ID, "name").send_keys("bench")
    driver.find_element(By.CSS_SELECTOR, "#pair button").click()
    if not wait_for(lambda: driver.current_url.rstrip("/") == url.rstrip("/")):
        raise RuntimeError("pairing failed")


class BrowserTerminal:
    """A terminal page whose sockets are wrapped: a key typed, the answer's time."""

    def __init__(self, driver, focus_css):
        self.driver = driver
        self.focus_css = focus_css

    def focus(self):
        from selenium.webdriver.common.by import By
        self.driver.find_element(By.CSS_SELECTOR, self.focus_css).click()

    def round_trip(self, key, answer, timeout=5.0):
        d = self.driver
        tx0 = d.execute_script("return window.__tx.length")
        rx0 = d.execute_script("return window.__rx.length")
        # the key pressed as a person presses it: down (its keydown, keypress and input
        # events at once), and up only once the answer came; Selenium's send_keys would
        # land its later events inside the time measured
        press = {"key": key, "code": "Key" + key.upper(), "windowsVirtualKeyCode": ord(key.upper())}
        d.execute_cdp_cmd("Input.dispatchKeyEvent", dict(press, type="keyDown", text=key, unmodifiedText=key))
        try:
            return self._answer(tx0, rx0, answer, timeout)
        finally:
            d.execute_cdp_cmd("Input.dispatchKeyEvent", dict(press, type="keyUp"))

    def _answer(self, tx0, rx0, answer, timeout):
        d = self.driver
        end = time.time() + timeout
        while time.time() < end:
            got = d.execute_script("""
                var tx = window.__tx.slice(arguments[0]), rx = window.__rx.slice(arguments[1]);
                if (!tx.length) return null;
                for (var i = 0; i < rx.length; i++) {
                  if (rx[i][1].indexOf(arguments[2]) >= 0) return rx[i][0] - tx[0];
                }
                return null;""", tx0, rx0, answer)
            if got is not None:
                return got
            time.sleep(0.002)
        raise RuntimeError("no answer %r within %.0f s" % (answer, timeout))


class RawSocket:
    """The page's terminal socket without a browser (websocket-client): where the time goes."""

    def __init__(self, url, chat, cookie):
        import websocket
        self.ws = websocket.create_connection(
            url.replace("http://", "ws://") + "/api/chats/%s/terminal?cols=120&rows=40" % chat,
            header=["Cookie: " + cookie], origin=url, timeout=10)
        self.ws.sock.setsockopt(__import__("socket").IPPROTO_TCP, __import__("socket").TCP_NODELAY, 1)

    def read_until(self, needle, timeout):
        end = time.time() + timeout
        while time.time() < end:
            m = self.ws.recv()
            if needle in (m if isinstance(m, str) else m.decode("utf-8", "replace")):
                return time.perf_counter()
        raise RuntimeError("socket: no %r within %.0f s" % (needle, timeout))

    def round_trip(self, key, answer, timeout=5.0):
        t0 = time.perf_counter()
        self.ws.send_binary(key.encode())
        return (self.read_until(answer, timeout) - t0) * 1000

    def end(self):
        self.ws.close()


class SSHTerminal:
    """`ssh -tt host tmux attach`: a key written, the answer read."""

    def __init__(self, args):
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  env=dict(os.environ, TERM="xterm-256color"))
        self.buf = b""

    def read_until(self, needle, timeout):
        end = time.time() + timeout
        while time.time() < end:
            if needle in self.buf:
                self.buf = self.buf[self.buf.index(needle) + len(needle):]
                return time.perf_counter()
            r, _, _ = select.select([self.p.stdout], [], [], max(0.0, end - time.time()))
            if r:
                chunk = os.read(self.p.stdout.fileno(), 65536)
                if not chunk:
                    break
                self.buf += chunk
        raise RuntimeError("ssh: no %r within %.0f s; it said %r" % (needle, timeout, self.buf[-300:]))

    def round_trip(self, key, answer, timeout=5.0):
        self.buf = b""
        t0 = time.perf_counter()
        os.write(self.p.stdin.fileno(), key.encode())
        t1 = self.read_until(answer.encode(), timeout)
        return (t1 - t0) * 1000

    def end(self):
        try:
            self.p.stdin.close()
        except Exception:
            pass
        self.p.terminate()
        try:
            self.p.wait(5)
        except subprocess.TimeoutExpired:
            self.p.kill()


def keys(a):
    from selenium.webdriver.common.by import By
    profile = os.path.join(a.out, "keys")
    results = {"page": [], "webssh": [], "ssh -tt": [], "socket": []}
    page = browser(profile + "-page")
    web = browser(profile + "-webssh")
    ssh = raw = None
    try:
        pair(page, a.url, a.code)
        page.get(a.url + "/t/" + a.task)
        if not wait_for(lambda: "ECHO-READY" in page.execute_script("return app.screenText ? app.screenText() : ''")):
            raise RuntimeError("the page's terminal did not show the agent")
        # webssh: the form filled as a user does (the key pasted as a file), then tmux attach
        web.get(a.webssh)
        web.find_element(By.NAME, "hostname").send_keys("127.0.0.1")
        web.find_element(By.NAME, "port").send_keys(str(a.ssh_port))
        web.find_element(By.NAME, "username").send_keys(a.user)
        web.find_element(By.NAME, "privatekey").send_keys(a.key)
        web.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        if not wait_for(lambda: web.execute_script("return window.__rx.length") > 0, 30):
            raise RuntimeError("webssh did not log in")
        from selenium.webdriver.common.action_chains import ActionChains
        web.find_element(By.CSS_SELECTOR, "#terminal .xterm").click()
        time.sleep(0.5)
        ActionChains(web).send_keys("exec tmux -L %s attach -t '=%s'\n" % (a.socket, a.session)).perform()
        if not wait_for(lambda: web.execute_script(
                "return window.__rx.some(function (m) { return m[1].indexOf('ECHO-READY') >= 0; })"), 30):
            raise RuntimeError("webssh did not attach")
        ssh = SSHTerminal(["ssh", "-tt", "-i", a.key, "-p", str(a.ssh_port), "-o", "StrictHostKeyChecking=no",
                           "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "BatchMode=yes",
                           "%s@127.0.0.1" % a.user, "tmux -L %s attach -t '=%s'" % (a.socket, a.session)])
        ssh.read_until(b"ECHO-READY", 20)
        cookie = "; ".join("%s=%s" % (c["name"], c["value"]) for c in page.get_cookies())
        import urllib.request
        with urllib.request.urlopen(urllib.request.Request(a.url + "/api/tasks/" + a.task, headers={"Cookie": cookie})) as r:
            chat = json.loads(r.read())["agents"][0]["id"]
        raw = RawSocket(a.url, chat, cookie)
        raw.read_until("ECHO-READY", 20)
        terms = {"page": BrowserTerminal(page, "#terminal .xterm"),
                 "webssh": BrowserTerminal(web, "#terminal .xterm"), "ssh -tt": ssh, "socket": raw}
        for t in (terms["page"], terms["webssh"]):
            t.focus()
        # each key is answered with k<count>; the count is the agent's, shared by the three
        count = a.count_from
        order = ["page", "webssh", "ssh -tt", "socket"]
        for block in range(a.blocks):
            for name in order[block % 4:] + order[:block % 4]:
                if name in ("page", "webssh"):
                    terms[name].focus()
                for _ in range(a.per_block):
                    count += 1
                    results[name].append(terms[name].round_trip("x", "k%d;" % count))
                    time.sleep(0.03)
    finally:
        if ssh:
            ssh.end()
        if raw:
            raw.end()
        page.quit()
        web.quit()
    print(json.dumps({"keys": results, "count": count}), flush=True)


def load(a):
    from selenium.webdriver.common.by import By
    driver = browser(os.path.join(a.out, "load"), 390, 844)
    try:
        pair(driver, a.url, a.code)
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
        out = {}
        for name, path, ready in (("board", "/", "#board a.row"), ("task", "/t/" + a.task, "#terminal .xterm")):
            driver.get(a.url + path)
            wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, ready))
            time.sleep(1.0)
            out[name] = driver.execute_script("""
                var nav = performance.getEntriesByType('navigation')[0];
                var res = performance.getEntriesByType('resource');
                var first = window.__rx.length ? window.__rx[0][1].length : 0;
                return { page: nav.transferSize, resources: res.map(function (r) { return [r.name, r.transferSize]; }),
                         total: nav.transferSize + res.reduce(function (s, r) { return s + r.transferSize; }, 0),
                         firstSocketMessage: first, rows: document.querySelectorAll('#board a.row').length };""")
        # the first message of each socket as it crosses the wire, permessage-deflate offered
        # as Chromium offers it (the page's own counts are of the message as read)
        cookie = "; ".join("%s=%s" % (c["name"], c["value"]) for c in driver.get_cookies())
        import urllib.request
        with urllib.request.urlopen(urllib.request.Request(a.url + "/api/tasks/" + a.task, headers={"Cookie": cookie})) as r:
            chat = json.loads(r.read())["agents"][0]["id"]
        out["board"]["firstSocketWire"] = first_message_on_the_wire(a.url, "/api/board/live", cookie)
        out["task"]["firstSocketWire"] = first_message_on_the_wire(a.url, "/api/chats/%s/terminal?cols=45&rows=30" % chat, cookie)
        print(json.dumps({"load": out}), flush=True)
    finally:
        driver.quit()


def first_message_on_the_wire(url, path, cookie):
    """The bytes of a socket's first message as sent (its frames' heads and payloads), with
    permessage-deflate offered: [bytes, whether it came compressed]."""
    import base64
    import socket
    host, port = url.replace("http://", "").rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    try:
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
                   "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
                   "Origin: %s\r\nCookie: %s\r\n\r\n" % (path, host, port, base64.b64encode(os.urandom(16)).decode(),
                                                        url, cookie)).encode())
        buf = b""

        def need(n):
            nonlocal buf
            while len(buf) < n:
                chunk = s.recv(65536)
                if not chunk:
                    raise RuntimeError("%s: closed after %d bytes" % (path, len(buf)))
                buf += chunk
        while b"\r\n\r\n" not in buf:
            need(len(buf) + 1)
        head, buf = buf.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 101"):
            raise RuntimeError("%s: %r" % (path, head[:200]))
        total, compressed = 0, False
        while True:
            need(2)
            fin, rsv1, n, off = buf[0] & 0x80, buf[0] & 0x40, buf[1] & 0x7f, 2
            if n == 126:
                need(4)
                n, off = int.from_bytes(buf[2:4], "big"), 4
            elif n == 127:
                need(10)
                n, off = int.from_bytes(buf[2:10], "big"), 10
            need(off + n)
            compressed = compressed or bool(rsv1)
            total += off + n
            buf = buf[off + n:]
            if fin:
                return [total, compressed]
    finally:
        s.close()


def pair_by_hand(url, code):
    """Pairs as the page does (POST /api/pair from its own origin): the device's cookie."""
    import urllib.request
    req = urllib.request.Request(url + "/api/pair", data=json.dumps({"code": code, "name": "bench board"}).encode(),
                                 headers={"Content-Type": "application/json", "Origin": url}, method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.headers["Set-Cookie"].split(";")[0]


def board(a):
    import websocket  # websocket-client, which Selenium brings
    cookie = a.cookie or pair_by_hand(a.url, a.code)
    ws = websocket.create_connection(a.url.replace("http://", "ws://") + "/api/board/live",
                                     header=["Cookie: " + cookie], origin=a.url, timeout=5)
    end = time.time() + a.seconds
    n = 0
    with open(a.file, "w") as f:
        while time.time() < end:
            try:
                m = ws.recv()
            except websocket.WebSocketTimeoutException:
                continue
            at = time.time()
            view = json.loads(m)
            # each task's main agent's state, by the task's title
            states = {row["title"]: row["agents"][0]["state"] for row in view["rows"] if row["agents"]}
            f.write(json.dumps({"at": at, "bytes": len(m), "states": states}) + "\n")
            f.flush()
            n += 1
    ws.close()
    print(json.dumps({"messages": n}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["keys", "load", "board"])
    ap.add_argument("--url", required=True)
    ap.add_argument("--code")
    ap.add_argument("--cookie")
    ap.add_argument("--out", default="/tmp/sshkit-bench-serve")
    ap.add_argument("--task")
    ap.add_argument("--session")
    ap.add_argument("--socket")
    ap.add_argument("--webssh")
    ap.add_argument("--ssh-port", type=int)
    ap.add_argument("--user")
    ap.add_argument("--key")
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--per-block", type=int, default=20)
    ap.add_argument("--count-from", type=int, default=0)
    ap.add_argument("--file")
    ap.add_argument("--seconds", type=float, default=60)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    {"keys": keys, "load": load, "board": board}[a.mode](a)


if __name__ == "__main__":
    sys.exit(main())
