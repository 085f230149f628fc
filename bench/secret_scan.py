"""What redaction costs per KB of text once detect-secrets' detectors are on (`store/secret_scan.py`,
`store/redaction.py`): the detectors alone on source code, on command output and on JSONL events,
and `redact` as jsonio calls it (registered keys, the default pattern, the detectors; JSON string by
string), and `secrets_in` as the commit gate calls it on a change's added lines (with the base64 and
hex blobs decoded and scanned, `store/encoded.py`, and without) on those texts and a lock file full of
base64 integrity hashes. The one-off import of detect-secrets (paid once by a runner) is its own row.

    python -m bench.secret_scan [--kb 256] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]


def source_text(kb: int) -> str:
    code = "".join(p.read_text() for p in sorted((ROOT / "tilth").rglob("*.py")))
    return (code * (kb * 1024 // len(code) + 1))[: kb * 1024]


def output_text(kb: int) -> str:
    lines = [f"tests/test_mod{i % 97}.py::test_case_{i} PASSED [{i % 100:3d}%]  sha {i * 7919:040x}\n"
             for i in range(kb * 16)]
    return "".join(lines)[: kb * 1024]


def events_text(kb: int) -> str:
    out, i = [], 0
    while sum(map(len, out)) < kb * 1024:
        out.append(orjson.dumps({"ts": "2026-01-01T00:00:00.000Z", "type": "tool_call", "task": "T-1", "iter": 1,
                                 "data": {"role": "worker", "name": "bash", "ok": True, "result": output_text(1)}})
                   .decode() + "\n")
        i += 1
    return "".join(out)


def lock_text(kb: int) -> str:
    import base64
    import hashlib

    lines = [f'    "node_modules/pkg{i}": {{"version": "1.0.{i}", "integrity": "sha512-'
             f'{base64.b64encode(hashlib.sha512(str(i).encode()).digest()).decode()}"}},\n' for i in range(kb * 8)]
    return "".join(lines)[: kb * 1024]


def timed(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def import_seconds() -> float:
    code = "import time; t = time.perf_counter(); from tilth.store.secret_scan import load; load(); " \
           "print(time.perf_counter() - t)"
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.secret_scan")
    parser.add_argument("--kb", type=int, default=256)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    from tilth.store import redaction, secret_scan

    secret_scan.load()
    redaction.register_patterns([r"sk-[A-Za-z0-9_-]{20,}"])
    redaction.scan_for_secrets()
    texts = {"source code": source_text(args.kb), "command output": output_text(args.kb),
             "events.jsonl": events_text(args.kb), "lock file": lock_text(args.kb)}
    print(f"secret scanning, {args.kb} KB per text, median of {args.runs} runs")
    print(f"{'what':<34} {'text':<16} {'ms/KB':>8} {'MB/s':>7}")
    print(f"{'import detect-secrets (once)':<34} {'':<16} {import_seconds() * 1000:>7.0f}ms {'':>7}")
    for label, text in texts.items():
        kb = len(text) / 1024
        for what, fn in (("find_secrets (detectors)", lambda t=text: secret_scan.find_secrets(t)),
                         ("redact (as jsonio writes)", lambda t=text: redaction.redact(t.encode())),
                         ("secrets_in, commit gate (decoding)", lambda t=text: redaction.secrets_in(t, encoded=True)),
                         ("secrets_in, without decoding", lambda t=text: redaction.secrets_in(t))):
            seconds = timed(fn, args.runs)
            print(f"{what:<34} {label:<16} {seconds * 1000 / kb:>8.2f} {kb / 1024 / seconds:>7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
