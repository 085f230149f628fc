"""The dashboard is the person's alone: a real `tilth serve` with its defaults, logged into through the
one-time link it prints (in Debian's chromium through Playwright), and what anyone else on the machine
can send it: another local user (root's dashboard, the attack run as nobody through setpriv) and an
agent's command in the bubblewrap sandbox, which shares the host's loopback. The in-process matrix of
cookies, Origins and CSRF tokens is tests/test_dashboard_hardening.py's."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Sandbox, make_repo, task
from test_dashboard import Served, browser, fetch, served  # noqa: F401  (fixtures)
from test_confinement_home import require_bwrap
from tilth.store.dashboard_secret import DashboardSecret
from users import User, outside_tmp

QUESTION = "Keep the v1 API or move every caller to v2?"
ANSWER = "Move to v2 and keep a thin v1 shim."
ASKS = {"write": {"partial.py": "# half done\n"}, "needs_human": {"question": QUESTION, "context": "v1 has 3 callers"}}
SID = "mine-7f3"

ATTACK = r"""
import http.cookiejar, json, os, re, sys, urllib.error, urllib.request

url, sid, secret, logins = sys.argv[1:5]
browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))


def go(path, data=None, headers={}):
    request = urllib.request.Request(url.rstrip("/") + path, data=data, headers=headers)
    try:
        with browser.open(request, timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


out = {"api": go("/api/sessions"), "page": go(f"/s/{sid}", headers={"Accept": "text/html"})}
found = re.search(r'name="csrf" value="([^"]+)"', out["page"][1])
form = {"Origin": url.rstrip("/"), "Content-Type": "application/x-www-form-urlencoded"}
csrf = found.group(1) if found else ""
out["note"] = go(f"/s/{sid}/note", f"csrf={csrf}&text=planted".encode(), form)
out["answer"] = go(f"/s/{sid}/answer", f"csrf={csrf}&task=T-001&text=planted".encode(), form)
for name, read in (("secret", lambda: open(secret).read()), ("logins", lambda: os.listdir(logins))):
    try:
        out[name] = read()
    except OSError as exc:
        out[name] = type(exc).__name__
print(json.dumps(out))
"""
"""What an attacker sends, keeping cookies as a browser does: the session list, a session page (and its
CSRF token, were there one), a note and an answer with the dashboard's own Origin, and a look at the
secret and the unused login links."""


def parked(sandbox: Sandbox, sid: str = SID) -> Path:
    """A session whose one task asked a question (it ended `waiting`): its answers file."""
    result = sandbox.start(sid, [task("T-001", "API choice")], {"tasks": {"T-001": [ASKS, {"write": {"a.py": "1\n"}}]}})
    assert result.returncode == 5, result.stdout + result.stderr
    return sandbox.session_dir(sid) / "answers" / "T-001.jsonl"


def refused_everything(out: dict, secret: DashboardSecret) -> None:
    """Every request reached the dashboard (an unreachable one fails the script) and got nothing."""
    assert out["api"][0] == 401 and SID not in out["api"][1], out["api"]
    assert out["page"][0] == 401 and QUESTION not in out["page"][1] and "csrf" not in out["page"][1]
    assert out["note"][0] in (401, 403) and out["answer"][0] in (401, 403), out
    assert secret.value().decode() not in json.dumps(out)


@pytest.fixture
def machine_home():
    """A repository and a TILTH_HOME under /var/tmp, every directory open to others (0755, as a home
    often is), so only the dashboard's own file modes keep its secret; no process of it outlives the test."""
    from supervised import kill_tree, processes_with_env

    base = outside_tmp("tilth-dashboard-")
    base.chmod(0o755)
    home = base / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILTH_")}
    env.update({"TILTH_HOME": str(home), "PYTHONUNBUFFERED": "1"})
    try:
        yield Sandbox(base, make_repo(base / "repo"), home, env)
    finally:
        for pid in processes_with_env(f"TILTH_HOME={home}"):
            kill_tree(pid)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.browser
def test_a_person_logs_in_with_the_printed_link_and_answers_a_parked_question(sandbox, served, browser):  # noqa: F811
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    answers = parked(sandbox)
    asked = answers.read_text()
    server = served()
    link = server.login_url  # as `tilth serve` printed it
    page = browser.new_page()
    page.goto(link)
    assert page.url == server.url, "the link leaves the address bar for the first page"
    expect(page.locator(f'tr[data-session="{SID}"] .state')).to_have_text("waiting")

    page.goto(f"{server.url}s/{SID}")
    expect(page.locator("body[data-synced]")).to_have_count(1)  # the live stream's first message, the page again:
    replaced = (page.locator("body").get_attribute("data-replaced") or "").split()
    assert "questions" not in replaced and "act" not in replaced, replaced  # a click in them is never cut off
    page.locator("#answer-T-001").fill(ANSWER)
    page.get_by_role("button", name="answer").click()
    expect(page.locator("#acted")).to_contain_text("answer recorded for T-001")
    expect(page.locator("#acted")).not_to_have_class("error")
    answered = [json.loads(line) for line in answers.read_text()[len(asked):].splitlines()]
    assert [(a["kind"], a["text"], a["by"]) for a in answered] == [("answer", ANSWER, "dashboard")]

    other = browser.new_page()  # another browser with the same link: it worked once
    other.goto(link)
    expect(other.locator("body")).to_contain_text("used already")
    other.goto(server.url)
    expect(other.locator("body")).to_contain_text("tilth serve --login")
    assert SID not in other.content()
    assert other.request.get(f"{server.url}api/sessions").status == 401
    assert other.request.post(f"{server.url}s/{SID}/note", form={"text": "planted"}).status in (401, 403)
    assert not (sandbox.session_dir(SID) / "inbox.jsonl").exists()


@pytest.mark.slow
def test_another_local_user_gets_nothing_from_roots_dashboard_nor_its_secret(machine_home):
    user = User("unprivileged")  # skips unless root with setpriv
    answers = parked(machine_home)
    asked, inbox = answers.read_text(), machine_home.session_dir(SID) / "inbox.jsonl"
    server = Served(machine_home)
    try:
        secret = DashboardSecret(machine_home.home)
        assert stat.S_IMODE(secret.file.stat().st_mode) == 0o600 and stat.S_IMODE(secret.dir.stat().st_mode) == 0o700
        attack = subprocess.run([*user.prefix, user.python, "-c", ATTACK, server.url, SID, str(secret.file),
                                 str(secret.logins)], capture_output=True, text=True, timeout=60, cwd="/")
        assert attack.returncode == 0, attack.stderr
        out = json.loads(attack.stdout)
        refused_everything(out, secret)
        assert out["secret"] == "PermissionError" and out["logins"] == "PermissionError"
        minted = subprocess.run([*user.prefix, user.python, "-m", "tilth", "serve", "--login"], capture_output=True,
                                text=True, timeout=60, cwd="/", env=machine_home.env)
        assert minted.returncode == 2 and "login?once=" not in minted.stdout, minted.stdout
        assert len(minted.stderr.strip().splitlines()) == 1 and "permission denied" in minted.stderr, minted.stderr
        assert answers.read_text() == asked and not inbox.exists(), "nothing the attacker sent changed anything"

        # The same requests with the owner's login go through: what stopped them is the login alone.
        _, page, _ = server.get(f"/s/{SID}")  # logged in through the printed link
        csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        status, _, _ = fetch(f"{server.url}s/{SID}/note", {"Cookie": server.cookie, "Origin": server.url.rstrip("/")},
                             f"csrf={csrf}&text=mine".encode())
        assert status == 303 and '"by":"dashboard"' in inbox.read_text().replace(" ", "")
    finally:
        server.stop()


@pytest.mark.bwrap
def test_an_agents_command_reaches_the_dashboard_but_not_its_secret(machine_home):
    """As the worker's bash runs it: bubblewrap with $TILTH_HOME hidden and the host's network (loopback
    included) in reach."""
    require_bwrap()
    from tilth.agents.confinement import binary_prefix
    from tilth.agents.sandbox import wrap

    parked(machine_home)
    server = Served(machine_home)
    try:
        secret = DashboardSecret(machine_home.home)
        worktree = machine_home.root / "worktree"
        worktree.mkdir()
        python = (Path(sys.prefix), *binary_prefix(sys.executable))  # this venv, as a toolchain on PATH is
        confined = wrap("bwrap", worktree, machine_home.home, expose=tuple(dict.fromkeys(python)))
        attack = subprocess.run([*confined, sys.executable, "-c", ATTACK, server.url, SID, str(secret.file),
                                 str(secret.logins)], capture_output=True, text=True, timeout=60)
        assert attack.returncode == 0, attack.stderr
        out = json.loads(attack.stdout)
        refused_everything(out, secret)
        assert out["secret"] == "FileNotFoundError" and out["logins"] == "FileNotFoundError", "TILTH_HOME is hidden"
    finally:
        server.stop()
