"""The dashboard's one stylesheet, two small scripts and its icon, inlined (no external asset, no
build step). The scripts only place what the server sent: HTML fragments the server rendered and
escaped (`web/pages.py`) by element id (keeping what the person is typing), log lines as text
nodes, and an action's one sentence as text; a form is sent in the background and the live stream
shows what it changed."""

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0 1.5em 2em;color:#222;background:#fafafa;overflow-wrap:break-word}
h1{font-size:1.3em;margin:.8em 0 .3em} h2{font-size:1.05em;margin:1.4em 0 .4em}
a{color:#0550ae;text-decoration:none} a:hover{text-decoration:underline}
table{border-collapse:collapse;background:#fff} th,td{padding:.25em .6em;border-bottom:1px solid #e3e3e3;
text-align:left;vertical-align:top} th{font-weight:600;background:#f0f0f0}
.num{text-align:right;font-variant-numeric:tabular-nums}
.bar{display:inline-block;width:8em;height:.7em;background:#e6e6e6;border-radius:3px;vertical-align:middle;
overflow:hidden;margin-right:.4em} .bar>span{display:block;height:100%;background:#2da44e}
.bar.hot>span{background:#d29922} .bar.over>span{background:#cf222e}
.status-done,.v-accept{color:#1a7f37;font-weight:600} .status-failed,.v-reject{color:#cf222e;font-weight:600}
.status-in_progress{color:#9a6700;font-weight:600} .status-parked{color:#8250df;font-weight:600} .muted{color:#6e7781}
.badge{display:inline-block;padding:0 .5em;border-radius:1em;font-weight:600;font-size:.9em;border:1px solid}
.badge.state-running{color:#1a7f37;background:#dafbe1} .badge.state-running::before{content:"\\25CF  ";animation:pulse 1.5s infinite}
.badge.state-waiting{color:#8250df;background:#fbefff} .badge.state-waiting::before{content:"? "}
.badge.state-paused,.badge.state-stopped{color:#9a6700;background:#fff8c5} .badge.state-queued{color:#0969da;background:#ddf4ff}
.badge.state-failed,.badge.state-crashed,.badge.state-unreadable{color:#cf222e;background:#ffebe9}
.badge.state-failed::before,.badge.state-crashed::before{content:"\\2715  "}
.badge.state-done{color:#57606a;background:#f6f8fa} .badge.state-done::before{content:"\\2713  "}
.badge.state-archived{color:#6e7781;background:#fff}
@keyframes pulse{50%{opacity:.3}}
.needs{list-style:none;padding:0;margin:0} .need{background:#fff;border:1px solid #e3e3e3;border-left:4px solid #8250df;
border-radius:4px;padding:.5em .7em;margin:.4em 0} .need.state-failed,.need.state-crashed,.need.state-unreadable{border-left-color:#cf222e}
.need.state-paused{border-left-color:#d29922} .q-text{font-weight:600;margin:.2em 0} .context{font-size:.95em}
.question{background:#fbefff;border:1px solid #d8b9ff;border-radius:4px;padding:.5em .7em;margin:.5em 0}
.question.answered{background:#dafbe1;border-color:#aceebb}
form.act{margin:.4em 0} form.act label{display:block;font-size:.9em;color:#57606a}
textarea,input[type=password]{width:100%;box-sizing:border-box;font:inherit;padding:.3em;border:1px solid #d0d7de;border-radius:4px}
button,.button{font:inherit;padding:.25em .9em;border:1px solid #d0d7de;border-radius:4px;background:#f6f8fa;
color:#24292f;cursor:pointer;display:inline-block;margin-top:.3em} button.danger{color:#cf222e}
.buttons form{display:inline-block;margin-right:.5em} #acted{min-height:1.2em;margin:.3em 0;color:#0969da}
#acted.error{color:#cf222e} .wide{max-width:100%;overflow-x:auto}
.md{background:#fff;border:1px solid #e3e3e3;padding:.2em .8em;overflow:auto} .md pre{white-space:pre-wrap}
.task-detail{margin:.3em 0} .task-detail .md{border:0;padding:0 .5em}
.error{color:#cf222e} .meters div{margin:.2em 0}
pre{background:#fff;border:1px solid #e3e3e3;padding:.6em;overflow:auto;white-space:pre-wrap;word-break:break-word}
#log{height:24em;font-size:12.5px} #report pre,#transcript .md{max-height:36em} #report pre{white-space:pre}
.diff{font-size:12.5px;white-space:pre}
.add{background:#e6ffec;color:#116329} .del{background:#ffebe9;color:#a40e26} .hunk{color:#8250df}
.meta{color:#6e7781} .file{font-weight:600;background:#f0f0f0}
.attempt{background:#fff;border:1px solid #e3e3e3;border-radius:4px;padding:.4em .6em;margin:.3em 0}
.ledger-task{margin:.6em 0} .panel{margin:.2em 0 0 1em;font-size:.95em}
.grid{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:0 2em}
@media (max-width:900px){.grid{grid-template-columns:minmax(0,1fr)}}
@media (max-width:600px){body{margin:0 .6em 1em} .narrow-hide,.receipt{display:none} th,td{padding:.2em .35em}
.bar{width:3em}}
#live{font-size:.85em;color:#6e7781;margin-left:.6em}
"""

SESSIONS_JS = """
const live = document.getElementById("live");
function follow(url, onState) {
  const es = new EventSource(url);
  es.onopen = () => { live.textContent = "live"; };
  es.onerror = () => { live.textContent = "reconnecting\u2026"; };
  const fresh = document.createElement("template");
  es.addEventListener("state", (e) => {
    const parts = JSON.parse(e.data);
    for (const [id, html] of Object.entries(parts)) {
      const el = document.getElementById(id);
      if (!el) continue;
      fresh.innerHTML = html;  // the stream's first message repeats the page: a part as shown is left alone,
      if (fresh.innerHTML === el.innerHTML) continue;  // so a click or typing in it is never cut off
      document.body.dataset.replaced = ((document.body.dataset.replaced || "") + " " + id).trim();
      const open = [...el.querySelectorAll("details[open][id]")].map((d) => d.id);
      const typed = [...el.querySelectorAll("textarea[id]")].filter((t) => t.value).map((t) => [t.id, t.value]);
      el.innerHTML = html;
      for (const id2 of open) { const d = document.getElementById(id2); if (d) d.open = true; }
      for (const [id2, value] of typed) { const t = document.getElementById(id2); if (t) t.value = value; }
    }
    if (onState) onState(parts);
    document.body.dataset.synced = String(Number(document.body.dataset.synced || 0) + 1);
  });
  return es;
}
follow(document.body.dataset.state);
"""

SESSION_JS = """
const acted = document.getElementById("acted");
document.addEventListener("submit", async (ev) => {
  const form = ev.target;
  if (!form.classList.contains("act") || !acted) return;
  ev.preventDefault();
  acted.className = ""; acted.textContent = "sending\u2026";
  try {
    const r = await fetch(form.action, {method: "POST", body: new URLSearchParams(new FormData(form)),
                                        headers: {"Accept": "application/json"}});
    const said = await r.json();
    acted.className = said.ok ? "" : "error";
    acted.textContent = said.ok ? said.what : said.error;
    if (said.ok) for (const t of form.querySelectorAll("textarea")) t.value = "";
  } catch (err) { acted.className = "error"; acted.textContent = "not sent: " + err; }
});
const log = document.getElementById("log");
if (log && document.body.dataset.log) {
  const es = new EventSource(document.body.dataset.log);
  es.addEventListener("reset", () => { log.textContent = ""; });
  es.addEventListener("lines", (e) => {
    const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    for (const line of JSON.parse(e.data)) log.appendChild(document.createTextNode(line + "\\n"));
    while (log.childNodes.length > 2000) log.removeChild(log.firstChild);
    if (atEnd) log.scrollTop = log.scrollHeight;
  });
}
"""

FAVICON = (b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
           b'fill="#1a7f37"/><path d="M3 11h10M3 8h7M3 5h4" stroke="#fff" stroke-width="2" stroke-linecap="round"/></svg>')
"""A furrowed field: tilth's icon, an SVG (what /favicon.ico serves)."""
