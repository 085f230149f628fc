"""The supervisor behind `tilth start` without --foreground: one per $TILTH_HOME.

One job per module:
  process.py      the process: daemon.lock, signals (a flag), ready pipe, orderly stop
  supervisor.py   `tick(now)` makes every decision; scheduler, watcher and child exits
                  only call it
  queue.py        pure decisions: which queued sessions are due, how many slots are free,
                  when a crashed session is resumed by itself (and when that gives up)
  transitions.py  session.json state changes made outside a runner, under the session lock
  children.py     one `tilth run` child per running session
  watcher.py      watchfiles on sessions/ -> a tick within a second
  control.py      the client side: daemon.lock/pid/log, start detached, stop, status
  revive.py       a dead supervisor with work waiting is started again (`tilth status`)
  unit.py         a systemd user unit: printed, installed and enabled, uninstalled

Importing this package stays light (no model SDK): the supervisor's memory is the budget.
"""
