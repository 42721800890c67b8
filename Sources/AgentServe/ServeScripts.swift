/// The pages' scripts. Plain ES2017, no build step, no framework: each page is a few
/// requests and a socket, and everything from a record is set as text (`textContent`).
extension ServeAssets {
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
          var encoder = new TextEncoder();
          // a plain printable key goes out from its keydown, which is then cancelled: the
          // browser goes on to no keypress and no text input for it, and the echo does not
          // wait behind that work (about half the round trip, measured in headless Chromium).
          // Keys with a modifier, named keys (Enter, arrows), dead keys and an IME's keys
          // take xterm.js's own way.
          document.getElementById('terminal').addEventListener('keydown', function (e) {
            if (!term || !ws || ws.readyState !== 1) return;
            if (e.key.length !== 1 || e.ctrlKey || e.altKey || e.metaKey || e.isComposing || e.keyCode === 229) return;
            ws.send(encoder.encode(e.key));
            e.preventDefault();
            e.stopPropagation();
            if (term.hasSelection()) term.clearSelection();
            term.scrollToBottom();
          }, true);
          window.addEventListener('resize', function () {
            var s = fit();
            if (s && ws && ws.readyState === 1) ws.send(JSON.stringify(s));
          });
          // xterm 3.8's DOM renderer draws a span per cell: a whole screen of 120 by 40 is about
          // 5,000 elements, some 30 ms of the page's thread at each scroll in headless Chromium,
          // and a keystroke's echo that lands behind it waits. A run of printable ASCII cells
          // that look the same is one span here, as wide as its cells (its text keeps its
          // spaces: `white-space: pre` in the page's style); any other character, and the
          // cursor's cell, is still a span of its own, so the grid stays where xterm.js puts it.
          // Nothing else in the page reads the spans (no link addon, whose hover would).
          function joinRuns(t) {
            var r = t._core && t._core.renderer, f = r && r._rowFactory;
            if (!f || typeof f.createRow !== 'function' || f.createRow.length !== 6) return;
            f.createRow = function (line, isCursorRow, cursorStyle, cursorX, cellWidth, cols) {
              var out = document.createDocumentFragment(), text = '', kind = null, cells = 0;
              function flush() {
                if (!cells) return;
                var s = document.createElement('span');
                if (kind) s.className = kind;
                if (cells > 1) s.style.width = (cells * cellWidth) + 'px';
                s.textContent = text;
                out.appendChild(s);
                text = ''; kind = null; cells = 0;
              }
              for (var x = 0, col = 0; x < line.length && col < cols; x++) {
                var cell = line.get(x), attr = cell[0], ch = cell[1], width = cell[2];
                if (width === 0) continue;
                // the classes xterm.js gives the cell: inverse swaps the colours, bold
                // brightens the first eight
                var flags = attr >> 18, bg = attr & 0x1ff, fg = (attr >> 9) & 0x1ff, c = '';
                if (flags & 8) { var swap = bg; bg = fg; fg = swap; if (fg === 256) fg = 0; if (bg === 257) bg = 15; }
                if (flags & 1) { if (fg < 8) fg += 8; c += ' xterm-bold'; }
                if (flags & 64) c += ' xterm-italic';
                if (fg !== 257) c += ' xterm-fg-' + fg;
                if (bg !== 256) c += ' xterm-bg-' + bg;
                var cursor = isCursorRow && x === cursorX;
                var plain = width === 1 && !cursor && ch.length === 1 && ch >= ' ' && ch <= '~';
                if (plain && cells && c === kind) { text += ch; cells++; col++; continue; }
                flush();
                if (plain) { kind = c; text = ch; cells = 1; col++; continue; }
                if (cursor) c += ' xterm-cursor xterm-cursor-' + (cursorStyle === 'bar' || cursorStyle === 'underline' ? cursorStyle : 'block');
                var s = document.createElement('span');
                if (c) s.className = c;
                if (width > 1) s.style.width = (cellWidth * width) + 'px';
                s.textContent = ch || ' ';
                out.appendChild(s);
                col += width;
              }
              flush();
              return out;
            };
          }
          function connect(chatID) {
            if (ws) ws.close();
            chat = chatID;
            var box = document.getElementById('terminal');
            box.replaceChildren();
            if (!window.Terminal) { box.append(el('p', 'empty', 'xterm.js is not installed where serve runs (node-xterm).')); return; }
            // the DOM renderer: with it the page takes a keystroke's echo sooner than with
            // xterm 3.8's canvas (measured in headless Chromium), and a phone's text stays sharp
            term = new Terminal({ cursorBlink: true, fontSize: 13, scrollback: 5000, rendererType: 'dom' });
            term.open(box);
            joinRuns(term);
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
            term.on('data', function (d) { if (ws.readyState === 1) ws.send(encoder.encode(d)); });
          }
          // the terminal's text, line by line (what a test reads)
          app.screenText = function () {
            if (!term || !term._core) return '';
            var b = term._core.buffer, out = [];
            for (var i = 0; i < b.lines.length; i++) out.push(b.translateBufferLineToString(i, true));
            return out.join('\\n');
          };
          var task = null, attemptsShown = false;
          function load() {
            return app.request('GET', '/api/tasks/' + encodeURIComponent(id)).then(function (t) {
              task = t;
              document.getElementById('title').textContent = t.title;
              document.getElementById('open-port').hidden = !t.port || t.archived;
              if (t.attempt && !attemptsShown) {
                attemptsShown = true;
                document.getElementById('attempts').hidden = false;
                loadAttempts();
              }
              document.title = t.title + ' · agent-sessions';
              document.getElementById('meta').textContent = [t.branch, t.attempt ? 'attempt ' + t.attempt : null,
                t.port ? 'PORT ' + t.port : null, t.archived ? 'archived' : null].filter(Boolean).join(' · ');
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
          function showLink(text, url) {
            var p = document.getElementById('link');
            var a = el('a', '', text);
            a.href = url;
            a.target = '_blank';
            a.rel = 'noopener noreferrer';
            p.replaceChildren(a);
            p.hidden = false;
          }
          document.querySelectorAll('[data-action]').forEach(function (b) {
            b.onclick = function () {
              var action = b.dataset.action;
              app.say(action + '…');
              app.request('POST', '/api/tasks/' + encodeURIComponent(id) + '/' + action, {})
                .then(function (r) {
                  app.say(r.message);
                  if (r.url && /^https?:\\/\\//.test(r.url)) showLink(r.url, r.url);
                  load();
                  if (action === 'resume' && chat) connect(chat);
                })
                .catch(function (e) { app.say(e.message, true); });
            };
          });
          // the task's port: forwarded to the machine serve runs on, linked on the page's host name
          document.getElementById('open-port').onclick = function () {
            app.request('POST', '/api/tasks/' + encodeURIComponent(id) + '/port', {}).then(function (r) {
              app.say(r.message);
              var url = location.protocol + '//' + location.hostname + ':' + r.localPort + '/';
              showLink('Open ' + url, url);
            }).catch(function (e) { app.say(e.message, true); });
          };
          // another agent in the task's worktree
          document.getElementById('add-chat').onclick = function () {
            var form = document.getElementById('chat-form');
            form.hidden = !form.hidden;
            if (form.hidden || !task) return;
            var select = document.getElementById('chat-agent');
            app.request('GET', '/api/projects').then(function (ps) {
              var p = ps.filter(function (x) { return x.id === task.project; })[0];
              select.replaceChildren();
              ((p && p.agents) || []).forEach(function (a) {
                var o = el('option', '', a.name);
                o.value = a.id;
                select.append(o);
              });
              if (p && p.hostError) app.say(p.hostError, true);
            }).catch(function (e) { app.say(e.message, true); });
          };
          document.getElementById('chat-form').onsubmit = function (ev) {
            ev.preventDefault();
            var body = { agent: document.getElementById('chat-agent').value, prompt: document.getElementById('chat-prompt').value };
            app.request('POST', '/api/tasks/' + encodeURIComponent(id) + '/chats', body).then(function (r) {
              app.say(r.message);
              document.getElementById('chat-form').hidden = true;
              document.getElementById('chat-prompt').value = '';
              if (r.chat) connect(r.chat);
              load();
            }).catch(function (e) { app.say(e.message, true); });
          };
          // the attempts of this work side by side, a check in each, one kept
          function renderAttempts(list) {
            var box = document.getElementById('attempt-rows');
            box.replaceChildren();
            list.forEach(function (a) {
              var d = el('div', 'attempt' + (a.id === id ? ' current' : ''));
              d.dataset.attempt = a.label;
              var head = el('div', 'head');
              var name = el('strong', '', a.label);
              head.append(name, el('span', 'chip ' + a.state.split(' ')[0], (a.agent || '?') + ': ' + a.state));
              if (a.id !== id) {
                var open = el('a', 'button small', 'Open');
                open.href = '/t/' + encodeURIComponent(a.id);
                head.append(open);
              }
              if (!a.archived) {
                var pick = el('button', 'small', 'Keep this one');
                pick.onclick = function () {
                  if (!confirm('Keep ' + a.label + ' and archive the others?')) return;
                  app.request('POST', '/api/tasks/' + encodeURIComponent(id) + '/pick', { attempt: a.label, others: 'archive' })
                    .then(function (r) { app.say(r.message); location.href = '/t/' + encodeURIComponent(r.task); })
                    .catch(function (e) { app.say(e.message, true); });
                };
                head.append(pick);
              }
              d.append(head);
              var facts = [a.host];
              if (a.filesChanged !== null && a.filesChanged !== undefined) {
                facts.push(a.filesChanged + ' files, +' + (a.linesAdded || 0) + ' −' + (a.linesRemoved || 0));
              }
              if (a.secondsToDone !== null && a.secondsToDone !== undefined) facts.push('done after ' + a.secondsToDone + ' s');
              if (a.archived) facts.push('archived');
              d.append(el('div', 'facts', facts.join(' · ')));
              if (a.problem) d.append(el('div', 'fail', a.problem));
              if (a.check) {
                var c = a.check;
                d.append(el('div', c.passed ? 'pass' : 'fail', (c.passed ? 'check passed' : c.timedOut ? 'check timed out'
                  : 'check failed (exit ' + c.exitCode + ')') + ' in ' + c.seconds.toFixed(1) + ' s'));
                if (!c.passed && c.output) d.append(el('pre', '', c.output));
              }
              box.append(d);
            });
          }
          function loadAttempts() {
            return app.request('GET', '/api/tasks/' + encodeURIComponent(id) + '/attempts').then(renderAttempts)
              .catch(function (e) { app.say(e.message, true); });
          }
          document.getElementById('check').onsubmit = function (ev) {
            ev.preventDefault();
            var cmd = document.getElementById('check-command').value;
            if (!cmd) return;
            app.say('running ' + cmd + ' in each attempt…');
            app.request('POST', '/api/tasks/' + encodeURIComponent(id) + '/attempts/check', { text: cmd }).then(function (list) {
              renderAttempts(list);
              var passed = list.filter(function (a) { return a.check && a.check.passed; }).length;
              app.say(passed + ' of ' + list.length + ' passed');
            }).catch(function (e) { app.say(e.message, true); });
          };
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

    /// The new task page: a project, the agents its host has, a title and a prompt, and
    /// how many attempts.
    static let newTaskScript = """
        'use strict';
        (function () {
          var el = app.el, projects = [];
          var project = document.getElementById('project'), agent = document.getElementById('agent');
          function agents() {
            var p = projects.filter(function (x) { return x.id === project.value; })[0];
            agent.replaceChildren();
            document.getElementById('project-note').textContent = p && p.hostError ? p.host + ': ' + p.hostError
              : p && !p.agents.length ? 'No agent is installed on ' + p.host + '.' : '';
            ((p && p.agents) || []).forEach(function (a) {
              var o = el('option', '', a.name);
              o.value = a.id;
              agent.append(o);
            });
          }
          project.onchange = agents;
          app.request('GET', '/api/projects').then(function (list) {
            projects = list;
            if (!list.length) app.say('No projects yet: agent-sessions projects add HOST PATH', true);
            list.forEach(function (p) {
              var o = el('option', '', p.name + ' · ' + p.host);
              o.value = p.id;
              project.append(o);
            });
            agents();
          }).catch(function (e) { app.say(e.message, true); });
          document.getElementById('new').onsubmit = function (ev) {
            ev.preventDefault();
            var button = ev.target.querySelector('button');
            button.disabled = true;
            app.say('starting…');
            app.request('POST', '/api/tasks', {
              project: project.value, title: document.getElementById('title').value, agent: agent.value,
              prompt: document.getElementById('prompt').value,
              attempts: parseInt(document.getElementById('attempts').value, 10) || 1,
              autoApprove: document.getElementById('auto').checked
            }).then(function (r) {
              app.say(r.message);
              location.href = '/t/' + encodeURIComponent(r.task);
            }).catch(function (e) { button.disabled = false; app.say(e.message, true); });
          };
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
