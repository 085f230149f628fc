"""The dashboard's one stylesheet and two small scripts, inlined in every page (no external
asset, no build step). The scripts only place what the server sent: HTML fragments the server
rendered and escaped (`web/pages.py`) by element id, and log lines as text nodes."""

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0 1.5em 2em;color:#222;background:#fafafa}
h1{font-size:1.3em;margin:.8em 0 .3em} h2{font-size:1.05em;margin:1.4em 0 .4em}
a{color:#0550ae;text-decoration:none} a:hover{text-decoration:underline}
table{border-collapse:collapse;background:#fff} th,td{padding:.25em .6em;border-bottom:1px solid #e3e3e3;
text-align:left;vertical-align:top} th{font-weight:600;background:#f0f0f0}
.num{text-align:right;font-variant-numeric:tabular-nums}
.bar{display:inline-block;width:8em;height:.7em;background:#e6e6e6;border-radius:3px;vertical-align:middle;
overflow:hidden;margin-right:.4em} .bar>span{display:block;height:100%;background:#2da44e}
.bar.hot>span{background:#d29922} .bar.over>span{background:#cf222e}
.state-running,.status-done,.v-accept{color:#1a7f37;font-weight:600}
.state-failed,.state-crashed,.status-failed,.v-reject{color:#cf222e;font-weight:600}
.state-stopped,.state-paused,.status-in_progress{color:#9a6700;font-weight:600}
.state-queued{color:#0969da} .state-archived,.muted{color:#6e7781}
.error{color:#cf222e} .meters div{margin:.2em 0}
pre{background:#fff;border:1px solid #e3e3e3;padding:.6em;overflow:auto;white-space:pre-wrap;word-break:break-word}
#log{height:24em;font-size:12.5px} #report pre,#transcript pre{max-height:36em} .diff{font-size:12.5px;white-space:pre}
.add{background:#e6ffec;color:#116329} .del{background:#ffebe9;color:#a40e26} .hunk{color:#8250df}
.meta{color:#6e7781} .file{font-weight:600;background:#f0f0f0}
.attempt{background:#fff;border:1px solid #e3e3e3;border-radius:4px;padding:.4em .6em;margin:.3em 0}
.ledger-task{margin:.6em 0} .panel{margin:.2em 0 0 1em;font-size:.95em}
.grid{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:0 2em}
@media (max-width:900px){.grid{grid-template-columns:minmax(0,1fr)}}
#live{font-size:.85em;color:#6e7781;margin-left:.6em}
"""

SESSIONS_JS = """
const live = document.getElementById("live");
function follow(url, onState) {
  const es = new EventSource(url);
  es.onopen = () => { live.textContent = "live"; };
  es.onerror = () => { live.textContent = "reconnecting\u2026"; };
  es.addEventListener("state", (e) => {
    const parts = JSON.parse(e.data);
    for (const [id, html] of Object.entries(parts)) {
      const el = document.getElementById(id);
      if (!el) continue;
      const open = [...el.querySelectorAll("details[open][id]")].map((d) => d.id);
      el.innerHTML = html;
      for (const id2 of open) { const d = document.getElementById(id2); if (d) d.open = true; }
    }
    if (onState) onState(parts);
  });
  return es;
}
follow(document.body.dataset.state);
"""

SESSION_JS = """
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
