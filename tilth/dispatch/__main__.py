"""`python -m tilth.dispatch`: one RQ worker, started by `tilth worker`."""

from tilth.dispatch.workers import work_here

raise SystemExit(work_here())
