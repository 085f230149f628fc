"""`make bench` (`python -m bench [NAME ...]`): every benchmark, or the named ones, one table
each. A benchmark is a module here with `main() -> int`; run one alone with its options as
`python -m bench.NAME --help`."""

import importlib
import sys

BENCHMARKS = ("overhead", "status_scale", "cold_start", "supervisor", "prompt_growth", "start_latency", "dispatch",
              "sandbox_cost", "secret_scan", "prompt_cache", "parallel", "lanes_cpu", "forecast", "ci_fix")

exit_code = 0
for name in sys.argv[1:] or BENCHMARKS:
    module = importlib.import_module(f"bench.{name}")
    sys.argv = [f"python -m bench.{name}"]
    exit_code |= module.main() or 0
    print()
raise SystemExit(exit_code)
