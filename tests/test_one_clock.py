"""One clock: every read of the wall clock goes through `tilth/core/clock.py` (`utc_now`, and
`local_now`/`wall` built on it), so time can be held still at one seam. A module that reads it
itself (`datetime.now()`, `time.time()`, `date.today()`, ...) fails here; `time.monotonic()`
measures durations and is not the wall clock."""

from __future__ import annotations

import ast
from pathlib import Path

import tilth

ROOT = Path(tilth.__file__).parent

ALLOWED = {
    "core/clock.py": "the clock itself",
    "agents/price_library.py": "runs as `python -I <file>`, a child process that imports nothing of tilth",
}
TIME_READS = {"time", "time_ns"}
"""`time` functions that read the wall clock whatever their arguments."""
TIME_NOW_BY_DEFAULT = {"localtime": 0, "gmtime": 0, "ctime": 0, "asctime": 0, "strftime": 1}
"""`time` functions that read the wall clock when called with this many arguments (no time given)."""
NOW_METHODS = {"now", "utcnow", "today"}


def wall_clock_reads(source: str, name: str = "<source>") -> list[str]:
    """`line: what` for every direct read of the wall clock in the source, aliases followed."""
    tree = ast.parse(source, name)
    modules: dict[str, str] = {}  # local name -> "time" | "datetime"
    classes: set[str] = set()  # local names of datetime.datetime and datetime.date
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update({a.asname or a.name: a.name for a in node.names if a.name in ("time", "datetime")})
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            found += [f"{node.lineno}: from time import {a.name}" for a in node.names
                      if a.name in TIME_READS or a.name in TIME_NOW_BY_DEFAULT]
        elif isinstance(node, ast.ImportFrom) and node.module == "datetime":
            classes.update(a.asname or a.name for a in node.names if a.name in ("datetime", "date"))

    def is_module(node: ast.expr, module: str) -> bool:
        return isinstance(node, ast.Name) and modules.get(node.id) == module

    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        owner, what = node.value, f"{node.lineno}: {ast.unparse(node)}"
        if is_module(owner, "time") and node.attr in TIME_READS:
            found.append(what)
        elif node.attr in NOW_METHODS and (
                (isinstance(owner, ast.Name) and owner.id in classes)
                or (isinstance(owner, ast.Attribute) and owner.attr in ("datetime", "date")
                    and is_module(owner.value, "datetime"))):
            found.append(what)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and is_module(node.func.value, "time") and node.func.attr in TIME_NOW_BY_DEFAULT
                and len(node.args) + len(node.keywords) <= TIME_NOW_BY_DEFAULT[node.func.attr]):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_detector_sees_each_way_of_reading_the_wall_clock() -> None:
    reads = [
        "import time\ntime.time()", "import time as t\nstamp = t.time_ns()", "from time import time",
        "import time\ntime.strftime('%H')", "import time\ntime.localtime()",
        "from datetime import datetime\ndatetime.now()", "from datetime import datetime as dt\ndt.utcnow()",
        "from datetime import date\ndate.today()", "import datetime\ndatetime.datetime.now(datetime.timezone.utc)",
        "import datetime as d\nd.date.today()", "import time\nclock = time.time",
    ]
    for source in reads:
        assert wall_clock_reads(source), f"not seen as a wall-clock read: {source!r}"
    durations = ["import time\ntime.monotonic()", "import time\ntime.sleep(1)",
                 "import time\ntime.strftime('%H', time.gmtime(0))", "from datetime import datetime\n"
                 "datetime.fromisoformat('2026-01-01')", "from tilth.core.clock import utc_now\nutc_now()"]
    for source in durations:
        assert not wall_clock_reads(source), f"seen as a wall-clock read: {source!r}"


def test_only_core_clock_reads_the_wall_clock() -> None:
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative not in ALLOWED:
            offenders += [f"tilth/{relative}:{read}" for read in wall_clock_reads(path.read_text(), str(path))]
    assert not offenders, ("read the wall clock through tilth/core/clock.py (utc_now, local_now, wall), "
                           "not directly:\n" + "\n".join(offenders))
    for relative in ALLOWED:
        assert (ROOT / relative).is_file(), f"tilth/{relative} is gone: drop it from ALLOWED"
