"""`python -m tilth.dispatch.worker_process`: one RQ worker, started by `tilth worker`."""

from tilth.dispatch.workers import work_here

raise SystemExit(work_here())
