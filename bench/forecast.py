"""How good is `tilth plan cost`? Leave one recorded session out, forecast it from the others
(`views/forecast.py`, exactly as `tilth plan cost` and `tilth start` do), and compare with what
it really cost: the hit rate (the true cost inside the $low–$high range) and the median error of
the median.

The recorded sessions are a TILTH_HOME's (`--home`, e.g. your own ~/.tilth), or, by default,
`--sessions` synthetic ones: copies of one real (scripted) session given a plan of random shape
(1-6 tasks, 1-6 criteria, descriptions of 40-2,000 characters) and a journal whose model calls cost
what such a task tends to (more criteria and longer descriptions cost more, lognormal noise,
an occasional second attempt), under two model settings.

    python -m bench.forecast [--home DIR] [--sessions 40] [--seed 1]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import statistics
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson

from bench.status_scale import real_session
from tilth.store.home import all_session_ids, session_paths
from tilth.store.prd_peek import peek_plan
from tilth.store.rollup import load_rollup
from tilth.store.session_peek import peek_session
from tilth.views.forecast import FINISHED, forecast, history, models_key

MODELS = ("gpt-4o-mini", "claude-sonnet-4-5")
SCALE = {"gpt-4o-mini": 0.004, "claude-sonnet-4-5": 0.06}
"""A one-criterion, 200-character task's typical cost (USD) per model."""


def synthetic(home: Path, template: Path, count: int, rng: random.Random) -> None:
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for n in range(count):
        target = home / "sessions" / f"rec-{n:03d}"
        shutil.copytree(template, target, ignore=shutil.ignore_patterns("session.lock", "summary.json"))
        model = MODELS[n % len(MODELS)]
        record = orjson.loads((target / "session.json").read_bytes())
        record["id"], record["state"] = target.name, "done"
        record["backend"]["name"] = "openai"
        record["settings"].update(worker_backend="openai", evaluator_backend="openai", evaluators=[],
                                  worker_model=model, evaluator_model=model)
        (target / "session.json").write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2))
        plan: list[dict] = []
        events: list[dict] = []
        stamp = (start + timedelta(days=n)).strftime("%Y-%m-%dT%H:%M:%S.000Z")

        def ev(kind: str, task: str | None, _into: list[dict] = events, _ts: str = stamp, **data) -> None:
            _into.append({"ts": _ts, "type": kind, "task": task, "iter": 1, "data": data})

        ev("session_started", None, backend="openai")
        for t in range(rng.randint(1, 6)):
            tid, criteria, size = f"T-{t + 1}", rng.randint(1, 6), int(math.exp(rng.uniform(math.log(40), math.log(2000))))
            plan.append({"id": tid, "title": f"Task {t + 1}", "description": "x" * size,
                         "acceptance_criteria": [f"c{c}" for c in range(criteria)], "status": "done"})
            ev("task_started", tid)
            cost = SCALE[model] * criteria ** 0.7 * (size / 200) ** 0.4 * rng.lognormvariate(0, 0.4)
            cost *= 2 if rng.random() < 0.15 else 1  # a second attempt
            ev("model_call", tid, role="worker", model=model, prompt_tokens=1000, completion_tokens=100,
               total_tokens=1100, usage_known=True, cost_usd=round(cost, 6), cost_source="price_table")
            ev("task_done", tid, sha="0" * 40)
        ev("session_end", None, state="done")
        (target / "prd.json").write_bytes(orjson.dumps(plan))
        (target / "events.jsonl").write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))


def measure(home: Path) -> tuple[int, int, list[float], int]:
    """(sessions forecast, hits, relative errors of the median, sessions with too little history)."""
    hits, errors, short, tried = 0, [], 0, 0
    for sid in all_session_ids(home):
        paths = session_paths(sid, home)
        record = peek_session(paths)
        rollup = load_rollup(paths.events)
        if record.backend.name == "scripted" or rollup.state not in FINISHED:
            continue
        true = rollup.totals.cost_usd
        tasks = [t for t in peek_plan(paths.prd) if rollup.tasks.get(t.id) and rollup.tasks[t.id].status in FINISHED]
        if not tasks or true <= 0:
            continue
        pending = [t.__class__(**{**t.__dict__, "status": "pending"}) for t in tasks]
        guess = forecast(history(home, leave_out={sid}), models_key(record.settings), pending)
        if not guess.known:
            short += 1
            continue
        tried += 1
        hits += guess.low <= true <= guess.high
        errors.append(abs(guess.median - true) / true)
    return tried, hits, errors, short


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.forecast")
    parser.add_argument("--home", type=Path, help="a TILTH_HOME with recorded sessions (default: synthetic ones)")
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = args.home
        if home is None:
            root = Path(tmp)
            env = {**{k: v for k, v in os.environ.items() if not k.startswith("TILTH_")},
                   "TILTH_HOME": str(root / "home"), "TILTH_SANDBOX": "off"}
            template = real_session(root, env, "template")
            home = root / "home"
            synthetic(home, template, args.sessions, random.Random(args.seed))
            shutil.rmtree(template)
        tried, hits, errors, short = measure(home)
    where = str(args.home) if args.home else f"{args.sessions} synthetic sessions, 2 models"
    print(f"forecast, leave one session out ({where})")
    if not tried:
        print(f"  no session could be forecast ({short} with too little history of their models)")
        return 0
    print(f"  {'sessions forecast':<28}{tried:>8}" + (f"  ({short} more with too little history)" if short else ""))
    print(f"  {'true cost inside the range':<28}{hits / tried:>8.0%}  (range: 5th-95th percentile)")
    print(f"  {'median error of the median':<28}{statistics.median(errors):>8.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
