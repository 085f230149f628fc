"""`python -m tilth.dispatch`: one RQ worker, started by `tilth worker`."""

from tilth.core.terminal import guard_std_streams
from tilth.dispatch.workers import work_here

guard_std_streams()  # `tilth worker`'s terminal: nothing from a job or the broker reaches it raw
raise SystemExit(work_here())
