/// The pages and their style: small HTML shells the scripts fill in. Everything a record
/// holds (a title, an agent's question) is put in as text by the scripts, never as markup.
extension ServeAssets {
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
        <header><h1>agent-sessions</h1><a href="/new" class="button small" id="new-task">New task</a>
        <button id="notify" class="small">Notify me</button>
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
          <button data-action="pr">Pull request</button>
          <button data-action="merge">Merge</button>
          <button id="show-diff">Diff</button>
          <button id="open-port" hidden>Open port</button>
          <button id="add-chat">Add agent</button>
        </div>
        <p id="message" class="message" role="status"></p>
        <p id="link" class="link" hidden></p>
        <form id="chat-form" class="stack" autocomplete="off" hidden>
          <label>Agent <select id="chat-agent" name="agent" required></select></label>
          <label>Its first prompt <textarea id="chat-prompt" name="prompt" rows="3"></textarea></label>
          <button type="submit">Start it in this worktree</button>
        </form>
        <section id="attempts" class="attempts" hidden>
          <h2>Attempts</h2>
          <div id="attempt-rows"></div>
          <form id="check" class="send" autocomplete="off">
            <input id="check-command" placeholder="A check to run in each, e.g. make test" aria-label="a check to run in each attempt">
            <button type="submit">Run</button>
          </form>
        </section>
        <section id="diff" class="diff" hidden></section>
        </main>
        """, scripts: ["app.js", "xterm.js", "task.js"], styles: ["xterm.css"])

    static let newTaskPage = page(title: "new task · agent-sessions", body: """
        <header><a href="/" class="back" aria-label="the board">‹</a><h1>New task</h1></header>
        <main>
        <form id="new" class="stack" autocomplete="off">
          <label>Project <select id="project" name="project" required></select></label>
          <p id="project-note" class="meta"></p>
          <label>Title <input id="title" name="title" required placeholder="Fix the flaky login test"></label>
          <label>Agent <select id="agent" name="agent" required></select></label>
          <label>Its first prompt <textarea id="prompt" name="prompt" rows="5"></textarea></label>
          <label>Attempts <input id="attempts" name="attempts" type="number" min="1" max="8" value="1"
            aria-describedby="attempts-note"></label>
          <p id="attempts-note" class="meta">Above 1: that many agents try the same work, each in its own worktree; compare them and keep one.</p>
          <label class="check"><input id="auto" type="checkbox"> Let the agent act without asking</label>
          <button type="submit">Start</button>
        </form>
        <p id="message" class="message" role="status"></p>
        </main>
        """, scripts: ["app.js", "new.js"])

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

    // MARK: style

    static let css = """
        :root { --bg: #111418; --fg: #e6e6e6; --dim: #9aa0a6; --card: #1b2027; --accent: #f0b429; --bad: #ef5350;
                --ok: #66bb6a; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
        @media (prefers-color-scheme: light) { :root { --bg: #fafafa; --fg: #1d1d1f; --dim: #5f6368; --card: #fff; } }
        * { box-sizing: border-box; }
        [hidden] { display: none !important; }
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
        .terminal .xterm-rows span { white-space: pre; }
        .question { background: var(--card); border-left: .25rem solid var(--accent); padding: .5rem .7rem; margin: 0 0 .5rem;
                    white-space: pre-wrap; }
        .question .answers { display: flex; flex-wrap: wrap; gap: .4rem; margin-top: .4rem; white-space: normal; }
        .send { display: flex; gap: .4rem; margin: .6rem 0; }
        .send input { flex: 1; min-width: 0; }
        input, button { font: inherit; padding: .55rem .7rem; border-radius: .45rem; border: 1px solid #8884;
                        background: var(--card); color: var(--fg); }
        button { cursor: pointer; min-height: 2.75rem; }
        .small { min-height: 2.2rem; padding: .3rem .6rem; font-size: .85rem; }
        .actions { display: flex; flex-wrap: wrap; gap: .4rem; }
        .message { min-height: 1.2rem; color: var(--dim); }
        .message.bad { color: var(--bad); }
        .diff .file { background: var(--card); border-radius: .4rem; margin: .4rem 0; padding: .4rem .6rem; }
        .diff pre { overflow-x: auto; font-size: .8rem; margin: .3rem 0 0; }
        .pair form { display: grid; gap: .7rem; max-width: 22rem; }
        .stack { display: grid; gap: .6rem; margin: .6rem 0; max-width: 36rem; }
        .stack label { display: grid; gap: .25rem; }
        .stack label.check { display: flex; align-items: center; gap: .5rem; }
        select, textarea { font: inherit; padding: .55rem .7rem; border-radius: .45rem; border: 1px solid #8884;
                           background: var(--card); color: var(--fg); width: 100%; }
        a.button { display: inline-flex; align-items: center; color: var(--fg); background: var(--card); text-decoration: none;
                   border: 1px solid #8884; border-radius: .45rem; }
        .link a { color: var(--accent); overflow-wrap: anywhere; }
        .attempts h2 { font-size: 1rem; margin: 1rem 0 .4rem; }
        .attempt { background: var(--card); border-radius: .5rem; padding: .5rem .7rem; margin: 0 0 .5rem; }
        .attempt.current { outline: 1px solid var(--accent); }
        .attempt .head { display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; }
        .attempt .head strong { flex: 1; }
        .attempt .facts { color: var(--dim); font-size: .85rem; }
        .attempt .pass { color: var(--ok); }
        .attempt .fail { color: var(--bad); }
        .attempt pre { font-size: .75rem; overflow-x: auto; margin: .3rem 0 0; }
        .pair label { display: grid; gap: .25rem; }
        code { background: #0003; padding: 0 .25rem; border-radius: .2rem; }
        """
}
