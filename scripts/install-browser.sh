#!/usr/bin/env bash
# Install the browser the dashboard test drives: Debian's chromium, run by Playwright for Python
# with executable_path=/usr/bin/chromium (Playwright's own browser download is never used).
#
# Usage: scripts/install-browser.sh
# Log:   ${TILTH_CACHE:-$HOME/.cache/tilth}/install-browser.log
#
# Nothing is done when /usr/bin/chromium is there. Prints one line saying what it did; exits
# non-zero with a message on failure.
set -euo pipefail

CHROMIUM=/usr/bin/chromium

die() { echo "install-browser: error: $*" >&2; exit 1; }

if [ -x "$CHROMIUM" ]; then
    echo "install-browser: $($CHROMIUM --version 2>/dev/null || echo chromium) already at $CHROMIUM"
    exit 0
fi

command -v apt-get >/dev/null 2>&1 || die "no $CHROMIUM and no apt-get to install it"
[ "$(id -u)" -eq 0 ] || die "no $CHROMIUM (apt-get install chromium, as root)"

CACHE_ROOT=${TILTH_CACHE:-$HOME/.cache/tilth}
mkdir -p "$CACHE_ROOT" 2>/dev/null || die "cannot create $CACHE_ROOT"
LOG="$CACHE_ROOT/install-browser.log"
: >"$LOG"
start=$SECONDS
{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >>"$LOG" 2>&1 \
    || { tail -n 30 "$LOG" >&2; die "apt-get install chromium failed (full log: $LOG)"; }
[ -x "$CHROMIUM" ] || die "apt-get installed chromium but $CHROMIUM is missing (full log: $LOG)"
echo "install-browser: $($CHROMIUM --version 2>/dev/null || echo chromium) installed at $CHROMIUM in $((SECONDS - start))s"
