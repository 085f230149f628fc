#!/usr/bin/env bash
# Install the real CLI coding agents that the integration tests run against local stub servers:
#   - Claude Code and Codex (pinned npm packages) into one npm prefix
#   - Copilot CLI and Gemini CLI (pinned npm packages) into the same prefix; Copilot's package cache
#     (~235 MB it unpacks on first run) under ${XDG_CACHE_HOME:-$HOME/.cache}/tilth/copilot
#   - aider (pinned PyPI package) into its own venv
#   - Qwen Code and OpenCode (pinned npm packages) into the same npm prefix, npm's cache beside it
#
# Usage: scripts/install-cli-agents.sh
# Where: ${TILTH_AGENT_CACHE:-$HOME/.cache/tilth/npm}/node_modules/.bin/{claude,codex,qwen,opencode}
#        ${TILTH_AIDER_VENV:-$HOME/.cache/tilth/aider-venv}/bin/aider
#
# Anything already installed at the pinned version is left alone. Node and npm come from apt
# when missing (CI is a fresh Debian). Prints one line saying what is installed where; exits
# non-zero with a message on failure.
set -euo pipefail

CLAUDE_CODE_VERSION=2.1.330
CODEX_VERSION=0.169.0
AIDER_VERSION=0.86.2
COPILOT_VERSION=1.0.102
GEMINI_CLI_VERSION=0.61.0
QWEN_CODE_VERSION=0.24.4
OPENCODE_VERSION=1.18.33

die() { echo "install-cli-agents: error: $*" >&2; exit 1; }

CACHE=${TILTH_AGENT_CACHE:-$HOME/.cache/tilth/npm}
AIDER_VENV=${TILTH_AIDER_VENV:-$HOME/.cache/tilth/aider-venv}
CLAUDE="$CACHE/node_modules/.bin/claude"
CODEX="$CACHE/node_modules/.bin/codex"
AIDER="$AIDER_VENV/bin/aider"
COPILOT="$CACHE/node_modules/.bin/copilot"
GEMINI="$CACHE/node_modules/.bin/gemini"
COPILOT_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/tilth/copilot
QWEN="$CACHE/node_modules/.bin/qwen"
OPENCODE="$CACHE/node_modules/.bin/opencode"

mkdir -p "$CACHE" 2>/dev/null || die "cannot create $CACHE"
LOG="$CACHE/install-cli-agents.log"
: >"$LOG"
fail() { tail -n 30 "$LOG" >&2; die "$* (full log: $LOG)"; }

# `<binary> --version` mentions the pinned version; a missing or broken binary is not installed.
has_version() { local said; [ -x "$1" ] && said=$("$1" --version 2>/dev/null) && [[ $said == *"$2"* ]]; }

start=$SECONDS
did=""

if ! has_version "$CLAUDE" "$CLAUDE_CODE_VERSION" || ! has_version "$CODEX" "$CODEX_VERSION"; then
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        command -v apt-get >/dev/null 2>&1 || die "need node and npm to install the CLI agents"
        [ "$(id -u)" -eq 0 ] || die "need node and npm (apt-get install nodejs npm, as root)"
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm; } \
            >>"$LOG" 2>&1 || fail "apt-get install nodejs npm failed"
    fi
    # Claude Code's postinstall may be skipped by npm's allowScripts; bin/claude.exe is the
    # real binary either way, so the version check below is what decides.
    npm install --prefix "$CACHE" --no-audit --no-fund \
        "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@openai/codex@$CODEX_VERSION" >>"$LOG" 2>&1 \
        || fail "npm install of claude-code $CLAUDE_CODE_VERSION and codex $CODEX_VERSION failed"
    has_version "$CLAUDE" "$CLAUDE_CODE_VERSION" || fail "installed, but '$CLAUDE --version' does not say $CLAUDE_CODE_VERSION"
    has_version "$CODEX" "$CODEX_VERSION" || fail "installed, but '$CODEX --version' does not say $CODEX_VERSION"
    did="installed"
fi

if ! has_version "$GEMINI" "$GEMINI_CLI_VERSION" || \
   ! XDG_CACHE_HOME=$COPILOT_CACHE has_version "$COPILOT" "$COPILOT_VERSION"; then
    command -v npm >/dev/null 2>&1 || die "need node and npm to install the Copilot and Gemini CLIs"
    npm install --prefix "$CACHE" --no-audit --no-fund \
        "@github/copilot@$COPILOT_VERSION" "@google/gemini-cli@$GEMINI_CLI_VERSION" >>"$LOG" 2>&1 \
        || fail "npm install of copilot $COPILOT_VERSION and gemini-cli $GEMINI_CLI_VERSION failed"
    # its first run unpacks its package into XDG_CACHE_HOME: tilth points it at the same cache
    XDG_CACHE_HOME=$COPILOT_CACHE has_version "$COPILOT" "$COPILOT_VERSION" \
        || fail "installed, but '$COPILOT --version' does not say $COPILOT_VERSION"
    has_version "$GEMINI" "$GEMINI_CLI_VERSION" || fail "installed, but '$GEMINI --version' does not say $GEMINI_CLI_VERSION"
    did="installed"
fi

if ! has_version "$AIDER" "$AIDER_VERSION"; then
    [ -x "$AIDER_VENV/bin/python" ] || python3 -m venv "$AIDER_VENV" >>"$LOG" 2>&1 \
        || fail "python3 -m venv $AIDER_VENV failed (on Debian: apt-get install python3-venv)"
    "$AIDER_VENV/bin/python" -m pip install --quiet --disable-pip-version-check "aider-chat==$AIDER_VERSION" >>"$LOG" 2>&1 \
        || fail "pip install aider-chat==$AIDER_VERSION into $AIDER_VENV failed"
    has_version "$AIDER" "$AIDER_VERSION" || fail "installed, but '$AIDER --version' does not say $AIDER_VERSION"
    did="installed"
fi

# Qwen Code and OpenCode (Chat Completions agents): one more npm install into the same prefix.
if ! has_version "$QWEN" "$QWEN_CODE_VERSION" || ! has_version "$OPENCODE" "$OPENCODE_VERSION"; then
    command -v npm >/dev/null 2>&1 || die "need node and npm to install qwen-code and opencode"
    npm install --prefix "$CACHE" --cache "$(dirname "$CACHE")/npm-cache" --no-audit --no-fund --save-exact \
        "@qwen-code/qwen-code@$QWEN_CODE_VERSION" "opencode-ai@$OPENCODE_VERSION" >>"$LOG" 2>&1 \
        || fail "npm install of qwen-code $QWEN_CODE_VERSION and opencode $OPENCODE_VERSION failed"
    has_version "$QWEN" "$QWEN_CODE_VERSION" || fail "installed, but '$QWEN --version' does not say $QWEN_CODE_VERSION"
    has_version "$OPENCODE" "$OPENCODE_VERSION" || fail "installed, but '$OPENCODE --version' does not say $OPENCODE_VERSION"
    did="installed"
fi

if [ -n "$did" ]; then how="installed in $((SECONDS - start))s"; else how="already there"; fi
echo "install-cli-agents: claude-code $CLAUDE_CODE_VERSION, codex $CODEX_VERSION," \
     "copilot $COPILOT_VERSION and gemini-cli $GEMINI_CLI_VERSION in $CACHE," \
     "aider $AIDER_VERSION in $AIDER_VENV ($how)"
echo "install-cli-agents: qwen-code $QWEN_CODE_VERSION and opencode $OPENCODE_VERSION in $CACHE"
