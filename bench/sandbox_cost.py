"""What confinement costs per command: `true` through `tools/shell.run_command` bare (no process
limit), with the process limit (`agent_max_processes`: a pids cgroup or RLIMIT_NPROC), and behind
the bubblewrap sandbox as a session runs it (the system view, the private home, the network
namespace of `agent_network = on` entered through nsenter, the limit). Median milliseconds of each,
and the sandbox's cost over the bare command. Target: the sandbox adds at most 15 ms. The network
namespace's helper (pasta) is attached once per tilth process, before the runs: its one-time cost
is printed apart.

    python -m bench.sandbox_cost [--runs 200]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import os
import tempfile
import time
from pathlib import Path

from tilth.agents.bounds import DEFAULT_MAX_PROCESSES, in_force
from tilth.agents.sandbox import bwrap_works, wrap
from tilth.agents.confinement import agent_env, host_sockets, toolchain_dirs
from tilth.agents.netbox import netbox
from tilth.agents.tools.shell import run_command

TARGET_MS = 15.0


def median_ms(runs: int, worktree: Path, wrapper: list[str], max_processes: int) -> float:
    env = agent_env()
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        result = run_command("true", worktree, env=env, wrapper=wrapper, max_processes=max_processes)
        times.append((time.perf_counter() - began) * 1000)
        assert result.exit_code == 0 and result.stopped is None, result
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sandbox_cost")
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    if not bwrap_works():
        print("sandbox cost: bubblewrap cannot run here (apt-get install bubblewrap)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        worktree = Path(tmp) / "repo"
        worktree.mkdir()
        subprocess.run(["git", "init", "-q", str(worktree)], check=True)
        home, agent_home = Path(tmp) / "home", Path(tmp) / "home" / "agent-homes" / "s1"
        agent_home.mkdir(parents=True)
        user_home = Path(os.environ.get("HOME", "/root"))
        exposed = tuple(toolchain_dirs(os.environ.get("PATH", ""), [user_home, home]))
        began = time.perf_counter()
        box = netbox()
        attach_ms = (time.perf_counter() - began) * 1000
        # What a session's commands run behind: its network namespace, private home, exposed toolchains,
        # masked sockets.
        wrapper = wrap("bwrap", worktree, home, agent_home=agent_home, expose=exposed,
                       git_common=worktree / ".git", hide=tuple(host_sockets()), enter_net=tuple(box.prefix))
        median_ms(10, worktree, wrapper, DEFAULT_MAX_PROCESSES)  # warm caches
        rows = {"bare": ([], 0), "limited": ([], DEFAULT_MAX_PROCESSES), "bwrap": (wrapper, 0),
                "sandboxed": (wrapper, DEFAULT_MAX_PROCESSES)}
        times: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(5):  # interleaved, so a busy moment on the machine hits every row alike
            for name, (prefix, limit) in rows.items():
                times[name].append(median_ms(max(1, args.runs // 5), worktree, prefix, limit))
    ms = {name: statistics.median(values) for name, values in times.items()}
    overhead = ms["sandboxed"] - ms["bare"]
    print(f"{'`true` per command (' + str(args.runs) + ' runs each, median ms)':<52} {'ms':>8} {'target':>8}")
    print(f"{'bare (no sandbox, no process limit)':<52} {ms['bare']:>8.2f}")
    print(f"{'process limit only (' + in_force(DEFAULT_MAX_PROCESSES) + ')':<52} {ms['limited']:>8.2f}")
    print(f"{'netns + bwrap (no process limit)':<52} {ms['bwrap']:>8.2f}")
    print(f"{'sandboxed as a session runs it (' + box.method + ' netns + bwrap + limit)':<52} {ms['sandboxed']:>8.2f}")
    print(f"{'sandbox overhead (sandboxed - bare)':<52} {overhead:>8.2f} {TARGET_MS:>8.1f}"
          f"{'' if overhead <= TARGET_MS else '  OVER'}")
    print(f"{'network namespace made once per process (' + box.method + ')':<52} {attach_ms:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
