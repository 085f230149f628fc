"""How long a person waits for the commands that do almost nothing: `tilth --help`,
`tilth --version` and `tilth status` on a home without sessions. Each is a fresh
interpreter, so the table also shows `python -c pass`, the interpreter's own start, which no
change to tilth can remove. Targets (issue 40): `tilth --help` under 100 ms, `--version` and
`tilth status` on an empty home under 150 ms (median; the max is shown). The commands run as an
installed tilth does, from compiled `.pyc` files: the warm-up writes them even where
PYTHONDONTWRITEBYTECODE is set (it is dropped for the timed runs; without them every module is
compiled from source on every start, about twice the time).

    python -m bench.cold_start [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = {"python -m tilth --help": 0.100, "tilth --help (console script)": 0.100, "tilth --version": 0.150,
            "tilth status (empty home)": 0.150}


def wall(argv: list[str], env: dict[str, str]) -> float:
    began = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - began


def cases(home: Path) -> list[tuple[str, list[str], bool]]:
    """(label, argv, held to the target); the floor row is shown but not judged."""
    python = sys.executable
    rows = [("python -c pass (floor)", [python, "-c", "pass"], False),
            ("python -m tilth --help", [python, "-m", "tilth", "--help"], True)]
    script = Path(python).parent / "tilth"  # the console script, when tilth is installed in this venv
    if script.is_file() and os.access(script, os.X_OK):
        rows.append(("tilth --help (console script)", [str(script), "--help"], True))
    rows += [("tilth --version", [python, "-m", "tilth", "--version"], True),
             ("tilth status (empty home)", [python, "-m", "tilth", "status"], True)]
    if (home / "sessions").is_dir():
        raise AssertionError(f"{home} is not empty")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cold_start")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("TILTH_") and k != "PYTHONDONTWRITEBYTECODE"},
               "TILTH_HOME": str(home)}
        rows = cases(home)
        for _, argv, _ in rows:  # warm the page cache and the .pyc files before timing
            wall(argv, env)
        times: dict[str, list[float]] = {label: [] for label, _, _ in rows}
        for _ in range(args.runs):  # interleaved, so a burst of load elsewhere hits every row alike
            for label, argv, _ in rows:
                times[label].append(wall(argv, env))
    print(f"{'cold start':<32} {'median ms':>10} {'max ms':>8} {'target':>7}")
    missed = False
    for label, _, judged in rows:
        median, worst, limit = statistics.median(times[label]), max(times[label]), TARGET_S.get(label) if judged else None
        over = "" if limit is None else "  OVER" if median >= limit else "  (max over)" if worst >= limit else ""
        missed |= over == "  OVER"
        target = f"{limit * 1000:.0f}" if limit is not None else "-"
        print(f"{label:<32} {median * 1000:>10.0f} {worst * 1000:>8.0f} {target:>7}{over}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
