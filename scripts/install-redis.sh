#!/usr/bin/env bash
# Install the broker the dispatch tests and benchmark run: Debian's redis-server. Each test starts
# its own redis-server on a free loopback port with its own data directory (tests/redis_server.py),
# so only the binary is needed.
#
# Usage: scripts/install-redis.sh
# Log:   ${TILTH_CACHE:-$HOME/.cache/tilth}/install-redis.log
#
# Nothing is done when redis-server is on PATH (or at /usr/bin/redis-server). Prints one line saying
# what it did; exits non-zero with a message on failure.
#
# Debian's package starts a system redis on 127.0.0.1:6379 where an init system runs (systemd, or
# the sysv script when invoke-rc.d allows it; in a container without one it usually does not). That
# is left alone: it does not conflict with the tests, which never use 6379. Stop it with
# `systemctl disable --now redis-server` if you do not want it.
set -euo pipefail

die() { echo "install-redis: error: $*" >&2; exit 1; }

version() {
    local v
    v=$("$1" --version 2>/dev/null | sed -n 's/.* v=\([0-9.]*\).*/\1/p' | head -n 1 || true)
    echo "redis-server${v:+ $v}"
}

found=$(command -v redis-server 2>/dev/null || true)
if [ -z "$found" ] && [ -x /usr/bin/redis-server ]; then found=/usr/bin/redis-server; fi
if [ -n "$found" ]; then
    echo "install-redis: $(version "$found") already at $found"
    exit 0
fi

command -v apt-get >/dev/null 2>&1 || die "no redis-server and no apt-get to install it"
[ "$(id -u)" -eq 0 ] || die "no redis-server (apt-get install redis-server, as root)"

CACHE_ROOT=${TILTH_CACHE:-$HOME/.cache/tilth}
mkdir -p "$CACHE_ROOT" 2>/dev/null || die "cannot create $CACHE_ROOT"
LOG="$CACHE_ROOT/install-redis.log"
: >"$LOG"
start=$SECONDS
{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; } >>"$LOG" 2>&1 \
    || { tail -n 30 "$LOG" >&2; die "apt-get install redis-server failed (full log: $LOG)"; }
found=$(command -v redis-server 2>/dev/null || true)
[ -n "$found" ] || die "apt-get installed redis-server but it is not on PATH (full log: $LOG)"
echo "install-redis: $(version "$found") installed at $found in $((SECONDS - start))s"
