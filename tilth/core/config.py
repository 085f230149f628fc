"""The settings: every field with its type, default, bounds and meaning (`Settings`), and the names its values use.

Each field's env var is `TILTH_<FIELD>` (`env_name`); `core/settings_load.py` reads them in (defaults,
then config.toml, then the environment), `views/settings_shown.py` shows them for `tilth config`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tilth.core.dispatching import Dispatch
from tilth.core.errors import BadInput

PRESETS = {
    "openai": "https://api.openai.com/v1",
    "openrouter": "https://openrouter.ai/api/v1",
    "ollama": "http://localhost:11434/v1",
    "vllm": "http://localhost:8000/v1",
    "llamacpp": "http://localhost:8080/v1",
}
SECRET_FIELDS = ("api_key", "evaluator_api_key")
DEFAULT_SECRET_PATTERNS = (
    # Model provider keys (OpenAI project keys, Anthropic, OpenRouter): detect-secrets knows only the
    # legacy OpenAI form (`...T3BlbkFJ...`); every other format is its detectors' (store/secret_scan.py).
    r"sk-[A-Za-z0-9_-]{20,}",
)


class Price(BaseModel):
    """`[prices.<model>]` in config.toml: overrides the price library (`agents/pricing.py`) for that model.
    An unknown key is an error, so a misspelt rate is never silently ignored."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    prompt: float = Field(ge=0)
    """USD per million prompt tokens not read from a cache."""
    completion: float = Field(ge=0)
    """USD per million completion tokens."""
    cached_prompt: float | None = Field(None, ge=0)
    """USD per million prompt tokens read from the provider's prompt cache; the prompt rate when unset."""
    cache_write: float | None = Field(None, ge=0)
    """USD per million prompt tokens written to the provider's prompt cache; the prompt rate when unset."""


AgentBackend = Literal["openai", "claude", "codex", "aider", "command",
                       "copilot", "gemini", "qwen", "opencode"]
CLI_BACKENDS = ("claude", "codex", "aider", "command",
                "copilot", "gemini", "qwen", "opencode")


MAX_COUNT = 10**12
"""The largest whole number a setting takes: past it a count means nothing, and past 2**63 it
cannot even be written into session.json."""


class Settings(BaseModel):
    # inf and nan are refused: a timeout or cap must be a number (JSON would record them as null).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    max_iterations_per_task: int = Field(5, ge=1, le=100)
    """Worker+evaluator rounds a task gets (per run) before it becomes a FAILED placeholder."""
    max_attempts_per_task_total: int = Field(15, ge=1, le=10_000)
    """Attempts a task gets over all runs of the session (each resume gives it max_iterations_per_task more, up
    to this); then it fails without another until this is raised and the session resumed."""
    stall_after: int = Field(3, ge=0, le=100)
    """Rejections in a row for the same reason (same category and a concern that says the same thing, or the
    worker's diff unchanged) after which a task stops early and parks with a question built from the concern;
    dependent tasks wait, the others go on. 0 (or 1) turns the stall breaker off."""
    stop_on_failure: bool = False
    """End the session at the first FAILED placeholder (for a plan that is a strict sequence). By
    default the other tasks go on: only the tasks that depend on a failed one (`depends_on`) wait.
    Replaces `continue_after_failure` (still read: `stop_on_failure = not continue_after_failure`)."""
    max_parallel_sessions: int = Field(2, ge=1, le=1000)
    """How many sessions the supervisor (`tilth daemon`) runs at once; the rest wait queued."""
    parallel_tasks: int = Field(1, ge=1, le=32)
    """Tasks of one plan that run at once (`--parallel N`), each in its own worktree, landing on the session
    branch through the merge queue (docs/parallel.md); 1 runs them one after another."""
    max_agent_lanes: int = Field(8, ge=1, le=1000)
    """The ceiling on parallel-task lanes running at once across every session of this `$TILTH_HOME` (each lane
    runs one agent process at a time); a lane past it waits for one to end (docs/parallel.md)."""
    check_slots: int = Field(0, ge=0, le=1024)
    """Checks and verify commands that run at once in one session's lanes and merge queue (CPU-bound test suites
    share the cores); 0: as many as the cores this process may use (its CPU affinity and cgroup `cpu.max`)."""
    lane_min_free_mb: int = Field(200, ge=0)
    """Free disk (MiB) under `$TILTH_HOME` that must remain before a parallel task's worktree is made; below it
    the lane waits for a running one to end, and with none running the session stops."""
    journal_lines: int = Field(30, ge=0)
    """How many recent progress lines each fresh worker context sees."""
    journal_chars: int = Field(1200, ge=0)
    """Budget of the journal channel (or the progress summary that replaces it): about 300 tokens;
    the newest outcomes are kept and a marker counts the rest."""
    ledger_entries: int = Field(5, ge=0)
    """How many of the task's previous verdicts the evaluator (and a retrying worker) sees."""
    ledger_chars: int = Field(6000, ge=0)
    """Budget of the previous-verdicts channel."""
    context_files: list[str] = Field(default_factory=lambda: ["AGENTS.md", "CLAUDE.md"])
    """Convention files read from the branch HEAD, first listed first (env: comma-separated)."""
    conventions_chars: int = Field(8000, ge=0)
    """Combined budget of the convention files."""
    plan_chars: int = Field(3000, ge=0)
    """Budget of the plan-as-prose channel; long plans show a window around the current task."""
    kb_index_chars: int = Field(500, ge=0)
    """Budget of the notes index channel."""
    seed_chars: int = Field(1500, ge=0)
    """Budget of the seed channel: the `tilth prep` interview's TL;DR, scope notes, blockers and open
    questions, shown to every worker of a session started from a prep output."""
    human_notes_chars: int = Field(2000, ge=0)
    """Budget of the `human notes` channel (`tilth note`): the newest notes are kept."""
    answers_chars: int = Field(4000, ge=0)
    """Budget of the `answers` channel: a parked task's questions and a person's answers (`tilth answer`),
    in that task's prompts; the newest are kept."""
    diff_chars: int = Field(60_000, ge=0)
    """Budget of the diff the evaluator sees."""
    summary_recent_tasks: int = Field(3, ge=0)
    """Task outcomes described in detail in the progress summary."""
    summary_learnings: int = Field(15, ge=0)
    """Key learnings the progress summary keeps (newest first, de-duplicated)."""
    summary_table_rows: int = Field(20, ge=0)
    """Rows of the progress summary's task table (unfinished tasks first)."""
    self_improvement: bool = True
    """After each task, ask the worker model for durable learnings (proposed, never auto-merged)."""

    base_url: str | None = None
    """OpenAI-compatible endpoint, or a preset name: openai, openrouter, ollama, vllm, llamacpp."""
    api_key: str | None = None
    """Key for base_url; local servers need none. Never written to any session file."""
    worker_model: str | None = None
    """Model name the worker uses; required with base_url."""
    evaluator_model: str | None = None
    """Model for the evaluator; defaults to worker_model."""
    prep_model: str | None = None
    """Model the `tilth prep` interview uses, at the worker's endpoint; defaults to worker_model."""
    evaluator_base_url: str | None = None
    """A separate endpoint (or preset) for the evaluator; defaults to base_url."""
    evaluator_api_key: str | None = None
    """Key for evaluator_base_url; defaults to api_key."""
    stream: bool = False
    """Ask for streamed completions."""
    worker_tool_choice: str = "auto"
    """`auto`, `required`, or comma-separated tool names forced step by step (the last repeats), for
    servers whose `auto` is unreliable, e.g. `write_file,submit_case` with a small llama.cpp model."""
    evaluator_tool_choice: str = "auto"
    """As worker_tool_choice, for the evaluator (e.g. `submit_verdict`)."""
    worker_max_steps: int = Field(40, ge=1)
    """Model calls one worker turn may make before it counts as ending without a case."""
    evaluator_max_steps: int = Field(12, ge=1)
    """Model calls one evaluator turn may make (tool use plus verdict retries)."""
    verdict_retries: int = Field(2, ge=0)
    """Times an unparseable verdict is sent back with the error before it is recorded as parse_failed."""
    max_tokens: int | None = Field(None, ge=1)
    """Completion token limit per model call (the provider's default when unset)."""
    stop_grace_s: float = Field(120.0, ge=0)
    """Seconds `tilth daemon stop` lets running sessions finish their iteration; then they are killed
    (kill -9 is safe: they end `stopped` and `tilth resume` continues from their edits)."""
    auto_resume_attempts: int = Field(3, ge=0, le=100)
    """Times in a row the supervisor resumes a crashed supervised session by itself (its runner died:
    OOM, kill -9) before leaving it `crashed` for `tilth resume`; 0 turns auto-resume off. The count
    starts again when a resumed run ends a task and at every `tilth resume`."""
    auto_resume_backoff_s: float = Field(30.0, ge=0)
    """Seconds the supervisor waits before the first auto-resume of a crashed session; doubled for
    each further attempt, up to `auto_resume_backoff_max_s`."""
    auto_resume_backoff_max_s: float = Field(900.0, ge=0)
    """Upper bound on the wait before any one auto-resume."""
    requeue_forgotten: bool = True
    """With `[dispatch]`: the supervisor looks every `maintenance_s` whether the broker came back empty
    (restarted without persistence) and, if so, does `tilth resume --forgotten` by itself: finished
    sessions registered again as their record on the remote shows them, unfinished ones queued. A
    `tilth worker` does the same for the sessions whose record on the remote it pushed last itself."""
    follow_pr: bool = False
    """The supervisor follows every open pull request tilth opened (`tilth follow ID --once` as its child,
    one at a time, every follow_poll_s per PR). Off by default: following runs agents and pushes to the
    forge unattended, which `tilth pr` alone never asked for."""
    follow_poll_s: float = Field(60.0, gt=0)
    """Seconds between two polls of one followed pull request (with jitter of 10%); `tilth follow`'s
    default `--poll`."""
    request_timeout: float = Field(300.0, gt=0)
    """Seconds one HTTP request to the model may take."""
    max_retries: int = Field(6, ge=0)
    """Retries of one model call on 429, 5xx, timeouts, connection errors and empty replies."""
    retry_base_delay: float = Field(1.0, ge=0)
    """First backoff delay in seconds; doubles per retry, with jitter."""
    retry_max_delay: float = Field(60.0, ge=0)
    """Upper bound on any single wait, Retry-After included."""
    preflight: bool = True
    """`tilth start` with the `openai` backend first asks each model endpoint for its model list
    (one short request, no retries) and refuses to create anything when it is unreachable, rejects
    the key or does not know the model."""
    sandbox: Literal["auto", "bwrap", "off"] = "auto"
    """Confine the agent's commands: `auto` (bubblewrap when it works here), `bwrap` (required), `off`."""
    agent_network: Literal["on", "off"] = "on"
    """Network for the agent's commands under bubblewrap: `on` (the internet through a network namespace of
    their own, not the host's loopback services nor its abstract sockets, where pasta or slirp4netns works;
    `tilth doctor` says which; pushes are still refused by read-only refs), `off` (a network namespace with
    only its own loopback). tilth's own model calls are made outside the sandbox either way."""
    agent_host_ports: list[Annotated[int, Field(ge=1, le=65535)]] = Field(default_factory=list)
    """With agent_network = on: ports on the host's loopback the agent's commands may connect to all the same
    (a database the project's tests need); a CLI agent's loopback endpoint is added by itself (env:
    comma-separated)."""
    worker_backend: AgentBackend = "openai"
    """Who does the worker's turns: `openai` (tilth's own tool loop over the model endpoint), `claude`
    (Claude Code), `codex` (Codex CLI), `aider`, `copilot` (Copilot CLI), `gemini` (Gemini CLI), `qwen` (Qwen
    Code), `opencode` (OpenCode), or `command` (any CLI agent, `worker_command`)."""
    evaluator_backend: AgentBackend = "openai"
    """Who judges each attempt, from the same choices (a CLI evaluator runs read-only)."""
    evaluators: list[AgentBackend] = Field(default_factory=list)
    """An evaluator panel, e.g. `claude,openai` (env: comma-separated): each judges the same case and
    diff in its own fresh context and `evaluator_policy` decides; replaces evaluator_backend when set."""
    evaluator_policy: Literal["all", "majority"] = "all"
    """How a panel decides: `all` accept, or a strict `majority` of accepts."""
    worker_fallback: AgentBackend | None = None
    """A backend (with its own `<name>_args`) that takes over the worker's turns when the worker backend reports a
    usage limit that lifts more than fallback_after_s from now (a limit that says no time: when
    usage_limit_backoff_s is more), instead of pausing; the worker backend is tried again once that time passed."""
    evaluator_fallback: AgentBackend | None = None
    """The same for the evaluator (one evaluator; a panel has none)."""
    fallback_after_s: float = Field(900.0, ge=0)
    """How far away a usage limit's reset must be for a fallback to take over; a nearer one pauses as before."""
    worker_command: str | None = None
    """For worker_backend = command: the agent's command line, split like a shell line; `{prompt_file}`
    becomes a file holding the prompt, which also arrives on stdin."""
    evaluator_command: str | None = None
    """For a `command` evaluator: as worker_command; the agent ends by printing the JSON verdict."""
    claude_bin: str = "claude"
    """The Claude Code binary: a path, or a name found on PATH."""
    codex_bin: str = "codex"
    """The Codex CLI binary: a path, or a name found on PATH."""
    aider_bin: str = "aider"
    """The aider binary: a path, or a name found on PATH."""
    claude_args: str = ""
    """Extra arguments for every Claude Code run, split like a shell line (e.g. `--model sonnet`)."""
    codex_args: str = ""
    """Extra arguments for every Codex run, split like a shell line (e.g. `-m gpt-5.5 -c model_provider=...`)."""
    aider_args: str = ""
    """Extra arguments for every aider run, split like a shell line (e.g. `--model openai/gpt-4o-mini`)."""
    copilot_bin: str = "copilot"
    """The Copilot CLI binary (`@github/copilot`): a path, or a name found on PATH."""
    copilot_args: str = ""
    """Extra arguments for every Copilot CLI run, split like a shell line (e.g. `--model gpt-5.4`)."""
    gemini_bin: str = "gemini"
    """The Gemini CLI binary (`@google/gemini-cli`): a path, or a name found on PATH."""
    gemini_args: str = ""
    """Extra arguments for every Gemini CLI run, split like a shell line (e.g. `-m gemini-2.5-pro`)."""
    qwen_bin: str = "qwen"
    """The Qwen Code binary: a path, or a name found on PATH."""
    qwen_args: str = ""
    """Extra arguments for every Qwen Code run, split like a shell line (e.g. `--max-session-turns 40`)."""
    opencode_bin: str = "opencode"
    """The OpenCode binary: a path, or a name found on PATH."""
    opencode_args: str = ""
    """Extra arguments for every OpenCode run (`opencode run`), split like a shell line."""
    agent_timeout_s: float = Field(1800.0, gt=0)
    """Wall-clock limit of one CLI agent run; it and every process it started are then killed."""
    agent_pass_env: list[str] = Field(default_factory=list)
    """Environment variables the agent's commands (and a CLI agent) get besides the allowlist (PATH, HOME,
    LANG, LC_*, TERM, TZ, ...) and a CLI agent's own endpoint and key variables; their values are redacted
    from every session file (env: comma-separated)."""
    sandbox_expose: list[str] = Field(default_factory=list)
    """Paths under your home directory or TILTH_HOME the sandboxed agent may read all the same (the
    toolchains on PATH and the agent's binary are exposed already) (env: comma-separated)."""
    usage_limit_backoff_s: float = Field(300.0, ge=0)
    """When an agent hits a usage limit without saying when it lifts: the first pause, doubled for each
    pause in a row (a task ending starts again), up to usage_limit_backoff_max_s."""
    usage_limit_backoff_max_s: float = Field(18000.0, ge=0)
    """Upper bound on one pause for a usage limit (also caps a reset time an agent gives)."""
    notify: list[str] = Field(default_factory=list)
    """Where to tell a person that a session ended, a task failed or a cap tripped: apprise URLs
    (`ntfy://`, `slack://`, `mailto://`, `json://host/path`, ...; env: comma-separated)."""
    pr_max_followups: int = Field(6, ge=0)
    """Follow-up tasks (CI fixes, review batches, rebase fixes) `tilth follow` makes for one pull request before
    it waits for a person; the session's spend, token and wall-clock caps hold over them too."""
    pr_reviewers: list[str] = Field(default_factory=list)
    """GitHub logins whose review comments on a followed PR become work even without write access to the
    repository (those with admin, maintain or write permission are heeded already; env: comma-separated)."""
    script_runs_keep: int = Field(500, ge=0)
    """Script artifacts (`sessions/<id>/runs/run-<id>/`) kept per session; the oldest go first; 0 writes none."""
    agent_max_processes: int = Field(512, ge=0)
    """Processes one agent command, check or CLI agent run may have at once (a pids cgroup where tilth can
    make one, else RLIMIT_NPROC, which counts all of the user's processes and never binds root); 0: no limit."""
    tool_timeout: float = Field(300.0, gt=0)
    """Default and maximum seconds for one bash tool call or check command."""
    checks: list[str] = Field(default_factory=list)
    """Commands run in the worktree before each evaluation; a failing one blocks acceptance (unless it
    already failed at the base commit for the same tests: docs/formats.md, "Proof of done")."""
    final_review: bool = True
    """When a run ends with tasks done and none failed, the evaluator reviews the session's whole diff and plan;
    its findings go to report.md and the PR body (one more evaluator call per run that ends with new commits).
    False turns it off."""
    final_review_tasks: bool = False
    """Turn the final review's findings into follow-up tasks (`REVIEW-<n>`) of the plan, once per session."""
    verify_timeout_s: float = Field(300.0, gt=0)
    """Seconds one acceptance criterion's `verify` command may run; past that it counts as failed."""
    protected_paths: list[str] = Field(default_factory=list)
    """Globs of paths an attempt may not touch (besides CI configuration: `.github/workflows/`,
    `.gitlab-ci.yml`, `.ci/`), unless its task's `may_change` allows them (`protected_path`) (env: comma-separated)."""
    max_spend_usd: float | None = Field(None, gt=0)
    """Stop the session (resumably) once its recorded model cost reaches this (more than 0: a cap of 0 would
    stop every session at once)."""
    max_wall_clock_s: float | None = Field(None, gt=0)
    """Stop the run (resumably) after this many seconds."""
    max_tokens_total: int | None = Field(None, ge=1)
    """Stop the session (resumably) once its model calls have used this many tokens (input and output, over
    every run); needs no price."""
    max_evaluator_calls_per_task: int | None = Field(None, ge=1)
    """Stop the session (resumably) once a task's evaluator has made this many model calls."""
    secret_patterns: list[str] = Field(default_factory=list)
    """Regular expressions whose matches are redacted from every session file, in addition to the
    built-in ones for common key formats (env: one per line)."""
    dispatch: Dispatch | None = None
    """`[dispatch]`: run sessions on `tilth worker` machines through a broker (`core/dispatching.py`)."""
    prices: dict[str, Price] = Field(default_factory=dict)
    """Per-model USD prices per million tokens (`prompt`, `completion`, `cached_prompt`, `cache_write`), used
    when the provider reports no cost; they override the price library's (genai-prices) for that model."""

    @field_validator("*")
    @classmethod
    def _counts_bounded(cls, value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_COUNT:
            raise ValueError(f"{value} is too large (at most {MAX_COUNT:,})")
        return value

    @field_validator("secret_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except (re.error, OverflowError, RecursionError) as exc:
                raise ValueError(f"secret pattern {pattern!r} is not a valid regular expression ({exc})") from None
        return patterns

    def evaluator_backends(self) -> list[str]:
        """The evaluators in force: the panel, else the one evaluator_backend."""
        return list(self.evaluators) or [self.evaluator_backend]

    def uses_model_endpoint(self) -> bool:
        """Some role runs tilth's own `openai` loop, so base_url and worker_model are needed."""
        return self.worker_backend == "openai" or "openai" in self.evaluator_backends()

    def endpoint(self, role: str) -> tuple[str, str, str]:
        """(base_url, api_key, model) for `worker`, `evaluator` or `prep`, presets expanded."""
        if role == "evaluator":
            url = self.evaluator_base_url or self.base_url
            key = self.evaluator_api_key or self.api_key
            model = self.evaluator_model or self.worker_model
        else:
            url, key, model = self.base_url, self.api_key, self.worker_model
            if role == "prep":
                model = self.prep_model or model
        return PRESETS.get(url or "", url or ""), key or "not-needed", model or ""

    def require_model(self) -> None:
        """The endpoint and model of each role tilth's own loop plays are set."""
        roles = [role for role, backend in (("worker", self.worker_backend), ("evaluator", "openai"))
                 if backend == "openai" and (role == "worker" or "openai" in self.evaluator_backends())]
        if roles == ["evaluator"]:
            if not self.evaluator_base_url and not self.base_url:
                raise BadInput("the openai evaluator has no model endpoint: set TILTH_EVALUATOR_BASE_URL or "
                               "TILTH_BASE_URL (a URL or one of " + ", ".join(PRESETS) + ")")
            if not self.evaluator_model and not self.worker_model:
                raise BadInput("the openai evaluator has no model: set TILTH_EVALUATOR_MODEL (for example gpt-4o-mini)")
        elif roles:
            if not self.base_url:
                raise BadInput("no model endpoint: set TILTH_BASE_URL (a URL or one of " + ", ".join(PRESETS) + ")")
            if not self.worker_model:
                raise BadInput("no worker model: set TILTH_WORKER_MODEL (for example gpt-4o-mini)")
        for role in roles:
            url = self.endpoint(role)[0]
            if url in (PRESETS["openai"], PRESETS["openrouter"]) and self.endpoint(role)[1] == "not-needed":
                variable = "TILTH_EVALUATOR_API_KEY or TILTH_API_KEY" if role == "evaluator" else "TILTH_API_KEY"
                raise BadInput(f"{url} needs an API key: set {variable}")


def env_name(field: str) -> str:
    """The environment variable of a setting: `TILTH_MAX_SPEND_USD` for `max_spend_usd`."""
    return "TILTH_" + field.upper()
