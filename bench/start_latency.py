"""How long `tilth start` takes to hand a session to the supervisor and return: the first
start (which also starts the supervisor) and later ones (supervisor already up). Target: a
person gets their prompt back in under 2 s.

    python -m bench.start_latency [--runs 10]
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

import orjson

from bench.supervisor import make_repo

TARGET_S = 2.0


def tilth(env: dict[str, str], *args: str) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tilth", *args], env=env, check=True, capture_output=True)
    return time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.start_latency")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        repo = make_repo(root / "repo")
        plan = root / "prd.json"
        plan.write_bytes(orjson.dumps([{"id": "T-1", "title": "One", "description": "d", "acceptance_criteria": ["x"]}]))
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("TILTH_")}, "TILTH_HOME": str(root / "home"),
               "TILTH_SANDBOX": "off"}
        start = ["start", "--repo", str(repo), "--prd", str(plan), "--backend", "scripted"]
        try:
            first = tilth(env, *start, "--id", "first")
            later = [tilth(env, *start, "--id", f"s{i}") for i in range(args.runs)]
        finally:
            subprocess.run([sys.executable, "-m", "tilth", "daemon", "stop", "--timeout", "60"], env=env,
                           capture_output=True)
    rows = [("first start (starts the supervisor)", first), ("later starts, median", statistics.median(later)),
            ("later starts, max", max(later))]
    print(f"{'tilth start':<40} {'seconds':>8} {'target':>8}")
    for name, value in rows:
        print(f"{name:<40} {value:>8.2f} {TARGET_S:>8.1f}{'' if value < TARGET_S else '  OVER'}")
    return 0
