import Foundation
import Hummingbird
import NIOCore

/// The pages, their script and style, and xterm.js: all served by the tool itself, never
/// from elsewhere. xterm.js is Debian's build (node-xterm, CommonJS modules), joined once
/// into one script the browser can load.
struct ServeAssets: Sendable {
    /// Files a page may load before its device is paired.
    static let open: Set<String> = ["app.css", "pair.js"]

    static let contentSecurityPolicy =
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        + "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

    private let files: [String: (type: String, body: String)]

    init(xtermDirectory: String) {
        var files: [String: (String, String)] = [
            "app.css": ("text/css; charset=utf-8", Self.css),
            "app.js": ("text/javascript; charset=utf-8", Self.appScript),
            "board.js": ("text/javascript; charset=utf-8", Self.boardScript),
            "task.js": ("text/javascript; charset=utf-8", Self.taskScript),
            "pair.js": ("text/javascript; charset=utf-8", Self.pairScript),
        ]
        if let bundle = Self.bundleXterm(xtermDirectory) {
            files["xterm.js"] = ("text/javascript; charset=utf-8", bundle)
        }
        if let css = try? String(contentsOfFile: xtermDirectory + "/xterm.css", encoding: .utf8) {
            files["xterm.css"] = ("text/css; charset=utf-8", css)
        }
        self.files = files
    }

    var hasTerminal: Bool { files["xterm.js"] != nil }

    func response(_ name: String) -> Response {
        guard let file = files[name] else {
            let hint = name.hasPrefix("xterm") ? "xterm.js is not installed here (Debian: apt-get install node-xterm)" : "no such file"
            return ServeServer.error(.notFound, code: "notFound", hint)
        }
        return Response(status: .ok, headers: [.contentType: file.type, .cacheControl: "no-cache",
                                               .init("X-Content-Type-Options")!: "nosniff"],
                        body: .init(byteBuffer: ByteBuffer(string: file.body)))
    }

    /// Joins the CommonJS modules under `directory` (tests left out) into one script that
    /// defines `window.Terminal`: each module in a function, `require` resolving paths
    /// relative to the module that asks.
    static func bundleXterm(_ directory: String) -> String? {
        guard let walker = FileManager.default.enumerator(atPath: directory) else { return nil }
        var modules: [(String, String)] = []
        for case let path as String in walker where path.hasSuffix(".js") && !path.hasSuffix(".test.js") {
            guard let text = try? String(contentsOfFile: directory + "/" + path, encoding: .utf8) else { continue }
            modules.append((String(path.dropLast(3)), text))
        }
        guard modules.contains(where: { $0.0 == "public/Terminal" }) else { return nil }
        var out = """
            (function () {
            'use strict';
            var defs = {}, cache = {};
            function resolve(from, name) {
              if (name.charAt(0) !== '.') return name;
              var parts = from.split('/'); parts.pop();
              name.split('/').forEach(function (p) {
                if (p === '..') parts.pop(); else if (p !== '.') parts.push(p);
              });
              var path = parts.join('/');
              return defs[path] ? path : path + '/index';
            }
            function load(path) {
              if (cache[path]) return cache[path].exports;
              var module = { exports: {} };
              cache[path] = module;
              defs[path](module.exports, function (n) { return load(resolve(path, n)); }, module);
              return module.exports;
            }

            """
        for (path, text) in modules.sorted(by: { $0.0 < $1.0 }) {
            let source = text.replacingOccurrences(of: "//# sourceMappingURL=", with: "// map: ")
            out += "defs[\(ServeServer.quoted(path))] = function (exports, require, module) {\n\(source)\n};\n"
        }
        out += "var xt = load('public/Terminal');\nwindow.Terminal = xt.Terminal || xt;\n})();\n"
        return out
    }

    // MARK: pages

    static func page(title: String, body: String, scripts: [String], styles: [String] = []) -> String {
        """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1, viewport-fit=cover">
        <meta name="color-scheme" content="dark light">
        <title>\(title)</title>
        <link rel="stylesheet" href="/static/app.css">
        \(styles.map { "<link rel=\"stylesheet\" href=\"/static/\($0)\">" }.joined(separator: "\n"))
        </head>
        <body>
        \(body)
        \(scripts.map { "<script src=\"/static/\($0)\"></script>" }.joined(separator: "\n"))
        </body>
        </html>
        """
    }

    static let boardPage = page(title: "agent-sessions", body: """
        <header><h1>agent-sessions</h1><button id="notify" class="small">Notify me</button>
        <span id="live" class="dot" title="live"></span></header>
        <main>
        <p id="message" class="message" role="status"></p>
        <p id="hosts" class="hosts"></p>
        <section id="board" aria-live="polite"><p class="empty">Loading the board…</p></section>
        </main>
        """, scripts: ["app.js", "board.js"])

    static let taskPage = page(title: "task · agent-sessions", body: """
        <header><a href="/" class="back" aria-label="the board">‹</a><h1 id="title">task</h1></header>
        <main class="task">
        <p id="meta" class="meta"></p>
        <nav id="agents" class="agents"></nav>
        <div id="question" class="question" hidden></div>
        <div id="terminal" class="terminal"></div>
        <form id="send" class="send" autocomplete="off">
          <input id="line" name="line" placeholder="Send a line to the agent" aria-label="a line to send">
          <button type="submit">Send</button>
        </form>
        <div class="actions">
          <button data-action="stop">Stop</button>
          <button data-action="resume">Resume</button>
          <button data-action="commit">Commit</button>
          <button data-action="push">Push</button>
          <button id="show-diff">Diff</button>
        </div>
        <p id="message" class="message" role="status"></p>
        <section id="diff" class="diff" hidden></section>
        </main>
        """, scripts: ["app.js", "xterm.js", "task.js"], styles: ["xterm.css"])

    static let pairPage = page(title: "pair · agent-sessions", body: """
        <header><h1>Pair this device</h1></header>
        <main class="pair">
        <p>On the machine that runs <code>agent-sessions serve</code>, run <code>agent-sessions serve pair</code>
        and type the code it shows (or scan its QR code).</p>
        <form id="pair" autocomplete="off">
          <label>Code <input id="code" name="code" autocapitalize="characters" spellcheck="false" required></label>
          <label>This device's name <input id="name" name="name" placeholder="my phone"></label>
          <button type="submit">Pair</button>
        </form>
        <p id="message" class="message" role="status"></p>
        </main>
        """, scripts: ["pair.js"])

    // MARK: style and scripts

    static let css = """
        :root { --bg: #111418; --fg: #e6e6e6; --dim: #9aa0a6; --card: #1b2027; --accent: #f0b429; --bad: #ef5350;
                --ok: #66bb6a; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
        @media (prefers-color-scheme: light) { :root { --bg: #fafafa; --fg: #1d1d1f; --dim: #5f6368; --card: #fff; } }
        * { box-sizing: border-box; }
        body { margin: 0; background: var(--bg); color: var(--fg); font-size: 16px; }
        header { display: flex; align-items: center; gap: .5rem; padding: .75rem 1rem; position: sticky; top: 0;
                 background: var(--bg); border-bottom: 1px solid #0003; z-index: 2; }
        header h1 { font-size: 1.1rem; margin: 0; flex: 1; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
        .back { color: var(--fg); text-decoration: none; font-size: 1.6rem; line-height: 1; padding: 0 .5rem 0 0; }
        main { padding: .75rem 1rem 2rem; max-width: 60rem; margin: 0 auto; }
        .dot { width: .6rem; height: .6rem; border-radius: 50%; background: var(--dim); }
        .dot.on { background: var(--ok); }
        .hosts { color: var(--dim); font-size: .85rem; margin: 0 0 .5rem; }
        .hosts .down { color: var(--bad); }
        .row { display: block; background: var(--card); border-radius: .6rem; padding: .7rem .8rem; margin: 0 0 .6rem;
               color: inherit; text-decoration: none; border-left: .25rem solid transparent; }
        .row.needs { border-left-color: var(--accent); }
        .row .title { font-weight: 600; display: block; overflow-wrap: anywhere; }
        .row .where { color: var(--dim); font-size: .85rem; display: block; margin-top: .15rem; }
        .row .agents { display: flex; flex-wrap: wrap; gap: .35rem; margin-top: .4rem; }
        .chip { font-size: .8rem; padding: .1rem .45rem; border-radius: .8rem; background: #0003; }
        .chip.waiting, .chip.done { background: var(--accent); color: #111; }
        .chip.working, .chip.starting { background: #2e7d32; color: #fff; }
        .row .error { color: var(--bad); font-size: .85rem; display: block; }
        .empty { color: var(--dim); }
        .meta { color: var(--dim); font-size: .85rem; margin: 0 0 .5rem; overflow-wrap: anywhere; }
        .agents button { margin: 0 .3rem .3rem 0; }
        .agents button[aria-pressed="true"] { outline: 2px solid var(--accent); }
        .terminal { background: #000; border-radius: .4rem; padding: .25rem; height: 55vh; min-height: 14rem; overflow: hidden; }
        .question { background: var(--card); border-left: .25rem solid var(--accent); padding: .5rem .7rem; margin: 0 0 .5rem;
                    white-space: pre-wrap; }
        .question .answers { display: flex; flex-wrap: wrap; gap: .4rem; margin-top: .4rem; white-space: normal; }
        .send { display: flex; gap: .4rem; margin: .6rem 0; }
        .send input { flex: 1; min-width: 0; }
        input, button { font: inherit; padding: .55rem .7rem; border-radius: .45rem; border: 1px solid #8884;
                        background: var(--card); color: var(--fg); }
        button { cursor: pointer; min-height: 2.75rem; }
        button.small { min-height: 2.2rem; padding: .3rem .6rem; font-size: .85rem; }
        .actions { display: flex; flex-wrap: wrap; gap: .4rem; }
        .message { min-height: 1.2rem; color: var(--dim); }
        .message.bad { color: var(--bad); }
        .diff .file { background: var(--card); border-radius: .4rem; margin: .4rem 0; padding: .4rem .6rem; }
        .diff pre { overflow-x: auto; font-size: .8rem; margin: .3rem 0 0; }
        .pair form { display: grid; gap: .7rem; max-width: 22rem; }
        .pair label { display: grid; gap: .25rem; }
        code { background: #0003; padding: 0 .25rem; border-radius: .2rem; }
        """

    /// What the pages share: requests to the server, a line of text, the live socket.
    static let appScript = """
        'use strict';
        window.app = {
          el: function (tag, cls, text) {
            var e = document.createElement(tag);
            if (cls) e.className = cls;
            if (text !== undefined && text !== null) e.textContent = String(text);
            return e;
          },
          request: async function (method, path, body) {
            var init = { method: method, headers: {}, credentials: 'same-origin' };
            if (body !== undefined) { init.headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
            var r = await fetch(path, init);
            var data = null;
            try { data = await r.json(); } catch (e) { data = null; }
            if (r.status === 401) { location.href = '/pair'; }
            if (!r.ok) { var err = new Error((data && data.message) || ('HTTP ' + r.status)); err.status = r.status; throw err; }
            return data;
          },
          socket: function (path) {
            return new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + path);
          },
          say: function (text, bad) {
            var m = document.getElementById('message');
            if (!m) return;
            m.textContent = text;
            m.className = 'message' + (bad ? ' bad' : '');
          }
        };
        """

    static let boardScript = """
        'use strict';
        (function () {
          var el = app.el;
          function render(view) {
            var board = document.getElementById('board');
            board.replaceChildren();
            var hosts = document.getElementById('hosts');
            hosts.replaceChildren();
            view.hosts.forEach(function (h, i) {
              if (i) hosts.append(' · ');
              var s = el('span', h.error ? 'down' : '', h.name + (h.error ? ' (unreachable)' : ''));
              if (h.error) s.title = h.error;
              hosts.append(s);
            });
            if (!view.rows.length) { board.append(el('p', 'empty', 'No tasks yet.')); return; }
            view.rows.forEach(function (row) {
              var a = el('a', 'row' + (row.needsYou ? ' needs' : ''));
              a.href = '/t/' + encodeURIComponent(row.id);
              a.dataset.task = row.id;
              a.append(el('span', 'title', row.title));
              a.append(el('span', 'where', [row.host, row.project, row.branch].filter(Boolean).join(' · ')
                + (row.filesChanged ? ' · ' + row.filesChanged + ' changed' : '')));
              if (row.hostError) a.append(el('span', 'error', 'host unreachable: ' + row.hostError));
              var agents = el('span', 'agents');
              row.agents.forEach(function (ag) {
                agents.append(el('span', 'chip ' + ag.state.split(' ')[0], ag.provider + ': ' + ag.state));
              });
              a.append(agents);
              board.append(a);
            });
          }
          function live() {
            var ws = app.socket('/api/board/live');
            var dot = document.getElementById('live');
            ws.onopen = function () { dot.classList.add('on'); };
            ws.onmessage = function (m) { render(JSON.parse(m.data)); };
            ws.onclose = function (e) {
              dot.classList.remove('on');
              if (e.code === 1008) { location.href = '/pair'; return; }
              setTimeout(live, 2000);
            };
          }
          // Web Push: the browser subscribes with the server's key; the server keeps it for this device
          function key(b64) {
            var s = atob(b64.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((b64.length + 3) % 4));
            return Uint8Array.from(s, function (c) { return c.charCodeAt(0); });
          }
          document.getElementById('notify').onclick = async function () {
            try {
              if (!('serviceWorker' in navigator) || !('PushManager' in window)) throw new Error('this browser cannot be told (no Web Push)');
              var reg = await navigator.serviceWorker.register('/sw.js');
              if ((await Notification.requestPermission()) !== 'granted') throw new Error('notifications are not allowed for this page');
              var k = await app.request('GET', '/api/push/key');
              var sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key(k.publicKey) });
              var j = sub.toJSON();
              var r = await app.request('POST', '/api/push/subscribe', { endpoint: j.endpoint, keys: j.keys });
              app.say(r.message);
            } catch (e) { app.say(e.message, true); }
          };
          app.request('GET', '/api/board').then(render).catch(function (e) {
            document.getElementById('board').replaceChildren(el('p', 'empty', e.message));
          });
          live();
        })();
        """

    static let taskScript = """
        'use strict';
        (function () {
          var el = app.el;
          var id = decodeURIComponent(location.pathname.split('/').pop());
          var term = null, ws = null, chat = null;
          function fit() {
            if (!term || !term._core || !term._core.renderer) return null;
            var box = document.getElementById('terminal');
            var d = term._core.renderer.dimensions;
            if (!d || !d.actualCellWidth) return null;
            var cols = Math.max(20, Math.floor((box.clientWidth - 8) / d.actualCellWidth));
            var rows = Math.max(5, Math.floor((box.clientHeight - 8) / d.actualCellHeight));
            if (cols !== term.cols || rows !== term.rows) term.resize(cols, rows);
            return { cols: cols, rows: rows };
          }
          function connect(chatID) {
            if (ws) ws.close();
            chat = chatID;
            var box = document.getElementById('terminal');
            box.replaceChildren();
            if (!window.Terminal) { box.append(el('p', 'empty', 'xterm.js is not installed where serve runs (node-xterm).')); return; }
            term = new Terminal({ cursorBlink: true, fontSize: 13, scrollback: 5000 });
            term.open(box);
            var size = fit() || { cols: 80, rows: 24 };
            ws = app.socket('/api/chats/' + encodeURIComponent(chatID) + '/terminal?cols=' + size.cols + '&rows=' + size.rows);
            ws.binaryType = 'arraybuffer';
            var decoder = new TextDecoder();
            ws.onmessage = function (m) {
              if (typeof m.data === 'string') {
                try { var e = JSON.parse(m.data); if (e.error) app.say(e.error, true); } catch (x) {}
                return;
              }
              term.write(decoder.decode(new Uint8Array(m.data), { stream: true }));
            };
            ws.onclose = function (e) { if (e.code === 1008) { location.href = '/pair'; } };
            var encoder = new TextEncoder();
            term.on('data', function (d) { if (ws.readyState === 1) ws.send(encoder.encode(d)); });
            window.addEventListener('resize', function () {
              var s = fit();
              if (s && ws.readyState === 1) ws.send(JSON.stringify(s));
            });
          }
          // the terminal's text, line by line (what a test reads)
          app.screenText = function () {
            if (!term || !term._core) return '';
            var b = term._core.buffer, out = [];
            for (var i = 0; i < b.lines.length; i++) out.push(b.translateBufferLineToString(i, true));
            return out.join('\\n');
          };
          function load() {
            return app.request('GET', '/api/tasks/' + encodeURIComponent(id)).then(function (t) {
              document.getElementById('title').textContent = t.title;
              document.title = t.title + ' · agent-sessions';
              document.getElementById('meta').textContent = t.branch + (t.archived ? ' · archived' : '');
              var nav = document.getElementById('agents');
              nav.replaceChildren();
              var q = document.getElementById('question');
              q.hidden = true;
              t.agents.forEach(function (a) {
                var b = el('button', '', a.provider + ': ' + a.state);
                b.dataset.chat = a.id;
                b.setAttribute('aria-pressed', String(a.id === chat));
                b.onclick = function () { connect(a.id); load(); };
                nav.append(b);
                if (a.needsYou && a.question && a.id === (chat || t.agents[0].id)) {
                  q.replaceChildren(el('span', '', a.provider + ' asks: ' + a.question));
                  var answers = el('div', 'answers');
                  (a.choices || []).forEach(function (c) {
                    var b = el('button', '', c.label);
                    b.dataset.keys = c.keys;
                    b.onclick = function () {
                      app.request('POST', '/api/chats/' + encodeURIComponent(a.id) + '/answer', { question: a.questionKey, keys: c.keys })
                        .then(function (r) { app.say(r.message); load(); })
                        .catch(function (e) { app.say(e.message, true); load(); });
                    };
                    answers.append(b);
                  });
                  q.append(answers);
                  q.hidden = false;
                }
              });
              if (!chat && t.agents.length) { connect(t.agents[0].id); load(); }
              return t;
            }).catch(function (e) { app.say(e.message, true); });
          }
          document.getElementById('send').onsubmit = function (ev) {
            ev.preventDefault();
            var line = document.getElementById('line');
            if (!chat || !line.value) return;
            app.request('POST', '/api/chats/' + encodeURIComponent(chat) + '/send', { text: line.value })
              .then(function (r) { line.value = ''; app.say(r.message); })
              .catch(function (e) { app.say(e.message, true); });
          };
          document.querySelectorAll('[data-action]').forEach(function (b) {
            b.onclick = function () {
              var action = b.dataset.action;
              app.say(action + '…');
              app.request('POST', '/api/tasks/' + encodeURIComponent(id) + '/' + action, {})
                .then(function (r) { app.say(r.message); load(); if (action === 'resume' && chat) connect(chat); })
                .catch(function (e) { app.say(e.message, true); });
            };
          });
          document.getElementById('show-diff').onclick = function () {
            var box = document.getElementById('diff');
            box.hidden = false;
            box.replaceChildren(el('p', 'empty', 'Reading the changes…'));
            app.request('GET', '/api/tasks/' + encodeURIComponent(id) + '/diff').then(function (files) {
              box.replaceChildren();
              if (!files.length) box.append(el('p', 'empty', 'No changes.'));
              files.forEach(function (f) {
                var d = el('details', 'file');
                var s = el('summary', '', f.path + (f.untracked ? ' (new)' : ' +' + (f.added || 0) + ' −' + (f.removed || 0)));
                d.append(s);
                d.ontoggle = function () {
                  if (!d.open || d.dataset.loaded) return;
                  d.dataset.loaded = '1';
                  app.request('GET', '/api/tasks/' + encodeURIComponent(id) + '/patch?path=' + encodeURIComponent(f.path))
                    .then(function (p) { d.append(el('pre', '', p.patch + (p.truncated ? '\\n…' : ''))); })
                    .catch(function (e) { d.append(el('p', 'message bad', e.message)); });
                };
                box.append(d);
              });
            }).catch(function (e) { box.replaceChildren(el('p', 'message bad', e.message)); });
          };
          load();
          setInterval(load, 5000);
        })();
        """

    /// The service worker: shows a push as a notification; tapping it opens the task.
    static let serviceWorker = """
        'use strict';
        self.addEventListener('push', function (e) {
          var d = {};
          try { d = e.data.json(); } catch (x) { d = {}; }
          var title = (d.agent || 'An agent') + (d.state === 'done' ? ' is done' : ' needs you');
          var url = typeof d.url === 'string' && d.url.indexOf('/t/') === 0 ? d.url : '/';
          e.waitUntil(self.registration.showNotification(title, {
            body: (d.title || '') + (d.host ? ' · ' + d.host : ''), tag: d.task || 'agent-sessions', data: { url: url } }));
        });
        self.addEventListener('notificationclick', function (e) {
          e.notification.close();
          var url = (e.notification.data && e.notification.data.url) || '/';
          e.waitUntil(self.clients.matchAll({ type: 'window' }).then(function (list) {
            for (var i = 0; i < list.length; i++) {
              if (new URL(list[i].url).pathname === url && 'focus' in list[i]) return list[i].focus();
            }
            return self.clients.openWindow(url);
          }));
        });
        """

    static let pairScript = """
        'use strict';
        (function () {
          var code = document.getElementById('code');
          var m = /[#&]code=([A-Za-z0-9-]+)/.exec(location.hash);
          if (m) code.value = m[1];
          document.getElementById('pair').onsubmit = async function (ev) {
            ev.preventDefault();
            var msg = document.getElementById('message');
            var r = await fetch('/api/pair', { method: 'POST', credentials: 'same-origin',
              headers: { 'Content-Type': 'application/json' },
              body: JSON.stringify({ code: code.value, name: document.getElementById('name').value }) });
            var data = {};
            try { data = await r.json(); } catch (e) {}
            msg.textContent = data.message || ('HTTP ' + r.status);
            msg.className = 'message' + (r.ok ? '' : ' bad');
            if (r.ok) { location.href = '/'; }
          };
        })();
        """
}
