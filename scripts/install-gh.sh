#!/usr/bin/env bash
# Install the forge CLI the `tilth follow` tests drive: Debian's gh (2.23), run against a local server
# that speaks GitHub's API (tests/fake_github.py), so only the binary is needed.
#
# Usage: scripts/install-gh.sh
# Log:   ${TILTH_CACHE:-$HOME/.cache/tilth}/install-gh.log
#
# Nothing is done when gh is on PATH (or at /usr/bin/gh). Prints one line saying what it did; exits
# non-zero with a message on failure.
set -euo pipefail

die() { echo "install-gh: error: $*" >&2; exit 1; }

version() {
    local v
    v=$("$1" --version 2>/dev/null | sed -n 's/^gh version \([0-9.]*\).*/\1/p' | head -n 1 || true)
    echo "gh${v:+ $v}"
}

found=$(command -v gh 2>/dev/null || true)
if [ -z "$found" ] && [ -x /usr/bin/gh ]; then found=/usr/bin/gh; fi
if [ -n "$found" ]; then
    echo "install-gh: $(version "$found") already at $found"
    exit 0
fi

command -v apt-get >/dev/null 2>&1 || die "no gh and no apt-get to install it"
[ "$(id -u)" -eq 0 ] || die "no gh (apt-get install gh, as root)"

CACHE_ROOT=${TILTH_CACHE:-$HOME/.cache/tilth}
mkdir -p "$CACHE_ROOT" 2>/dev/null || die "cannot create $CACHE_ROOT"
LOG="$CACHE_ROOT/install-gh.log"
: >"$LOG"
start=$SECONDS
{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gh; } >>"$LOG" 2>&1 \
    || { tail -n 30 "$LOG" >&2; die "apt-get install gh failed (full log: $LOG)"; }
found=$(command -v gh 2>/dev/null || true)
[ -n "$found" ] || die "apt-get installed gh but it is not on PATH (full log: $LOG)"
echo "install-gh: $(version "$found") installed at $found in $((SECONDS - start))s"
