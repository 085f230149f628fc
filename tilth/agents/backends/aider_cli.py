"""aider 0.86.2 as a CLI agent: its command line, and how a run went as read from its plain output.

aider has no structured output. Everything it says goes to stdout as plain lines (with
`--no-pretty`): its banner, the model's reply, a `Tokens: ...` line after each exchange with the
model, what it did with the reply (`Applied edit to notes.txt`) and its errors. The reply is read
back as the text between aider's last status line and the last `Tokens:` line.

Facts this relies on, observed against a Chat Completions stub (docs/cli-agents.md §3b):
- `--message-file F` sends one message, applies the reply, and exits 0.
- An API error is retried by aider itself with a doubling delay (0.25 s up to 32 s, about 64 s
  in all; no flag changes it), the OpenAI SDK retrying each attempt twice more. When aider gives
  up it prints the error and **still exits 0**: the run failed when its output ends in an error.
- `--no-git`: aider leaves git to tilth. With git on it writes the repository's config (a user
  name and email when none is set: refused in the sandbox, where git metadata is read-only, and
  a change to the user's repository outside it) and `git add`s the files it creates;
  `--no-auto-commits --no-dirty-commits --no-gitignore` stay as a second line of defence.
- The chat and input histories go to /dev/null and the repo map is off by default: each would
  otherwise write a file (`.aider.chat.history.md`, `.aider.tags.cache.v4/`) into the worktree.
- `--chat-mode ask` answers without editing anything, whatever the reply contains.
"""

from __future__ import annotations

import re
from typing import Any

from tilth.agents.backends.agent_stream import AgentReport, Limit, Step, cut

AIDER_ENV = ("OPENAI_API_KEY", "OPENAI_API_BASE", "OPENAI_ORGANIZATION", "ANTHROPIC_API_KEY",
             "OPENROUTER_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY", "AIDER_", "LITELLM_")
"""Variables (or prefixes, ending in `_`) aider reads: the provider endpoints and keys litellm
looks for, aider's own `AIDER_<FLAG>` settings, and litellm's switches. Not OPENAI_BASE_URL
(Codex's): litellm prefers it to OPENAI_API_BASE and `--openai-api-base`, so one set for Codex
would send aider elsewhere."""

AIDER_DEFAULT_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": "1000"}
"""Defaults for a run: litellm otherwise fetches its price table from GitHub on every start, and
with no terminal aider's console wraps every line at 80 columns, the reply included."""

DEFAULT_FLAGS = ("--map-tokens", "0", "--no-suggest-shell-commands")
"""Before the user's arguments, which may change them (a repo map writes its cache into the worktree)."""

ENFORCED_FLAGS = (
    "--yes-always", "--no-git", "--no-auto-commits", "--no-dirty-commits", "--no-gitignore",
    "--chat-history-file", "/dev/null", "--input-history-file", "/dev/null",
    "--no-pretty", "--no-fancy-input", "--no-stream",
    "--no-check-update", "--no-show-release-notes", "--no-analytics", "--no-show-model-warnings", "--no-detect-urls",
)
"""After the user's arguments, so they win: no prompt, no commit, nothing written into the
worktree but the edits, plain output with the provider's token counts (`--no-stream`), and no
update check, release notes, analytics, browser or web page fetch."""

READ_ONLY_FLAGS = ("--chat-mode", "ask")


def aider_argv(binary: str, prompt_file: str, extra_args: list[str], read_only: bool) -> list[str]:
    """One run of aider on the prompt in `prompt_file`, in the current directory (the worktree).
    `extra_args` (the model, files to add, ...) go between aider's defaults and the flags tilth
    needs; `read_only` (evaluator, learner): aider answers and edits nothing."""
    argv = [binary, *DEFAULT_FLAGS, *extra_args, *ENFORCED_FLAGS]
    if read_only:
        argv += READ_ONLY_FLAGS
    return [*argv, "--message-file", prompt_file]


_TOKENS = re.compile(r"^Tokens: (?P<sent>[\d.]+k?) sent(?:, [\d.]+k? cache (?:write|hit))*, "
                     r"(?P<received>[\d.]+k?) received\.(?P<rest>.*)$")
_COST = re.compile(r"Cost: \$(?P<message>[\d.]+) message, \$(?P<session>[\d.]+) session\.")
_MODEL = re.compile(r"^(?:Main model|Model): (?P<model>\S+) with \S+ edit format")
_API_ERROR = re.compile(r"^litellm\.(?P<kind>[A-Za-z]+): ")
# Whole lines aider prints itself, each ending its banner or an exchange; a reply starts after
# the last of them. Anchored on both ends so that a reply's own lines are not mistaken for them.
_STATUS = re.compile("|".join((
    r"^Aider v\d+\.\d+\.\d+\S*$",
    r"^(?:Main model|Model): \S+ with \S+ edit format.*$",
    r"^(?:Weak|Editor) model: \S+.*$",
    r"^Git repo: (?:.+ with [\d,]+ files|none)$",
    r"^Repo-map: (?:using \d+ tokens, \w+ refresh|disabled.*)$",
    r"^Added \S.* to the chat(?: \(read-only\))?\.$",
    r"^Restored previous conversation history\.$",
    r"^Tokens: .* received\..*$",
    r"^Cost: \$[\d.]+ message, \$[\d.]+ session\.$",
    r"^Applied edit to \S.*$",
    r"^Retrying in [\d.]+ seconds\.\.\.$",
    r"^Detected dumb terminal, disabling fancy input and pretty output\.$",
)))
_OUT_OF_CREDIT = "Insufficient credits with the API provider"


def _count(text: str) -> int:
    """aider's own rounding undone as far as it goes: `1.2k` is 1200, `12k` is 12000."""
    return round(float(text[:-1]) * 1000) if text.endswith("k") else int(text)


class AiderUsage:
    """aider's usage as it prints it, line by line: each `Tokens:` line is one exchange with the
    model (its counts summed), the `Cost: ... session.` figure on it or on the line after is the
    run's cost so far. Fed every stdout line live as `{"text": line}` (`Launch.plain_output`), so
    the spend cap counts aider while it runs; `read_aider_output` reads the whole output with it."""

    def __init__(self) -> None:
        self._report = AgentReport()
        self.rounded = False
        """A count was printed rounded (`1.2k`)."""
        self._cost_lines = 0

    def feed(self, event: dict[str, Any]) -> list[Step]:
        self.line(str(event.get("text", "")))
        return []

    def line(self, line: str) -> bool:
        """Take one line; whether it was a `Tokens:` line."""
        report = self._report
        if report.model is None and (model := _MODEL.match(line)):
            report.model = model["model"]
        if tokens := _TOKENS.match(line):
            report.prompt_tokens = (report.prompt_tokens or 0) + _count(tokens["sent"])
            report.completion_tokens = (report.completion_tokens or 0) + _count(tokens["received"])
            report.turns = (report.turns or 0) + 1
            self.rounded = self.rounded or tokens["sent"].endswith("k") or tokens["received"].endswith("k")
            self._cost_lines = 2  # this line and the next, where a narrow console wraps it
        if self._cost_lines and (cost := _COST.search(line)):
            report.cost_usd = float(cost["session"])
        self._cost_lines = max(0, self._cost_lines - 1)
        return tokens is not None

    def report(self) -> AgentReport:
        return self._report


def read_aider_output(stdout: str, stderr: str, exit_code: int) -> AgentReport:
    """How one aider run went, from its plain stdout/stderr and exit code.

    Tokens are summed over the `Tokens:` lines, which aider rounds (`1.2k`); the cost is its last
    `... session.` figure, printed only when it knows the model's price. The run failed when it
    exited non-zero, when its output ends in an API error (aider exits 0 then), or when no reply
    arrived; it ended on a limit only when that final error is a rate limit or out of credit."""
    lines = [line.rstrip() for line in stdout.splitlines()]
    usage = AiderUsage()
    last_tokens = None
    for index, line in enumerate(lines):
        if usage.line(line):
            last_tokens = index
    report = usage.report()
    report.events = len(lines)
    if last_tokens is not None:
        report.final_text = _reply_before(lines, last_tokens)
        if usage.rounded:
            report.extra["tokens_rounded"] = True

    after = lines[last_tokens + 1:] if last_tokens is not None else lines
    failure = _last_api_error(after)
    if failure is not None:
        kind, message = failure
        report.is_error, report.error = True, message
        if kind == "RateLimitError" or _OUT_OF_CREDIT in message:
            report.limit = Limit(message)
    elif exit_code != 0 or last_tokens is None:
        report.is_error = True
        reason = f"aider exited with {exit_code}" if exit_code != 0 else "aider got no reply from the model"
        said = _last_words(stderr.splitlines() + lines)
        report.error = cut(f"{reason}: {said}" if said else reason)
    return report


def _reply_before(lines: list[str], tokens_index: int) -> str | None:
    start = 0
    for index in range(tokens_index - 1, -1, -1):
        if _STATUS.match(lines[index]):
            start = index + 1
            break
    text = "\n".join(lines[start:tokens_index]).strip()
    return text or None


def _last_words(lines: list[str]) -> str | None:
    """The last line naming an error, else the last line with words (not aider's `>` prompt)."""
    said = [line for line in lines if line.strip().strip(">").strip() and not _STATUS.match(line)]
    errors = [line for line in said if "error" in line.lower()]
    last = errors or said
    return last[-1] if last else None


def _last_api_error(lines: list[str]) -> tuple[str, str] | None:
    """The last API error aider printed, with the lines its console wrapped it onto and its own
    explanation after it, as (litellm's exception name, one line)."""
    for index in range(len(lines) - 1, -1, -1):
        if error := _API_ERROR.match(lines[index]):
            said = []
            for line in lines[index:]:
                if not line.strip() or _STATUS.match(line):
                    break
                said.append(line)
            return error["kind"], cut(" ".join(said))
    return None
