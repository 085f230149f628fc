"""Fresh contexts: the text each worker, evaluator and self-improvement call starts from,
assembled from files channel by channel, each channel under its own budget.

Each assembly emits one `memory_load` event per channel and one `prompt_assembled` event
referring to the whole prompt, which goes to prompts.jsonl (`store/prompts.py`). The worker
never sees harness mechanics: no session file names, no session directory, no status fields,
no token counts.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

import pygit2

from tilth.agents.checks import CheckResult
from tilth.agents.failing_tests import head_lines, how_it_failed
from tilth.agents.guard import tests_first
from tilth.agents.verify import verifies_block
from tilth.core.config import Settings
from tilth.core.errors import BadInput
from tilth.run.conventions import conventions_text
from tilth.store.answers import exchanges
from tilth.store.events import EventLog, document
from tilth.store.home import SessionPaths
from tilth.store.kb import KnowledgeBase
from tilth.store.inbox import taken_for
from tilth.store.ledger import Case, LedgerEntry, VerifyResult, refused_landing
from tilth.store.prd import Task
from tilth.store.progress import read_progress
from tilth.store.prompts import append_prompt
from tilth.store.redaction import redact_text
from tilth.store.seed_meta import SeedMeta, load_seed_meta, seed_meta_path
from tilth.store.progress_summary import SummarySettings, current_summary

document(
    {
        "memory_load": ("one context channel was loaded; data: role, channel, present, chars, truncated",
                        "role channel present chars truncated"),
        "prompt_assembled": ("a fresh context's full text was assembled and written to prompts.jsonl; data: role, "
                             "prompt_offset (the byte offset of its line there), prompt_chars",
                             "role prompt_offset prompt_chars"),
    }
)

TASK_CHARS = 20_000
DIFF_HEADING = ("The diff against the branch, test files first (tilth's guard refuses tests removed or newly skipped; "
                "an assertion loosened in place is yours to judge):\n")
EVIDENCE_CHARS = 800
"""A prior verdict's evidence in the worker's prompt: whole lines (a failing check's quotes the lines
naming its failing tests, and the verdict's concern names them all)."""


@dataclass(frozen=True)
class Sources:
    """Where a session's channels come from."""

    paths: SessionPaths
    repo: pygit2.Repository
    settings: Settings
    events: EventLog

    @property
    def notes(self) -> KnowledgeBase:
        return KnowledgeBase(self.paths.dir / "kb")


def cap(text: str, limit: int, channel: str) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    marker = f"\n[... {channel} truncated: {len(text) - limit} more characters not shown ...]"
    return text[:limit].rstrip() + marker, True


def task_block(task: Task) -> str:
    criteria = "\n".join(f"- {c.text}" + (f" (tilth runs `{c.verify}`; it must exit 0)" if c.verify else "")
                         for c in task.criteria)
    return f"Task {task.id}: {task.title}\n\n{task.description.strip()}\n\nAcceptance criteria:\n{criteria}"


def plan_prose(plan: list[Task], current: Task, limit: int) -> str:
    """Every task as one line, the current one marked; a long plan shows a window around it,
    cut from the side farther from the current task (the later side on a tie) until it fits."""
    header = ("The whole plan, for context only: work on the current task (marked ->) and nothing else; "
              "later tasks will be done separately.")
    lines = [f"{'->' if t.id == current.id else '  '} {t.id}: {t.title}" for t in plan]
    n, at = len(lines), next((i for i, t in enumerate(plan) if t.id == current.id), 0)
    prefix = list(accumulate((len(line) for line in lines), initial=0))

    def window(cut: int) -> tuple[int, int]:
        """(lo, hi) after `cut` lines are cut: from the farther side until both are even, then alternately."""
        left, right = at, n - 1 - at
        if cut <= abs(left - right):
            return (cut, n) if left > right else (0, n - cut)
        cut -= abs(left - right)
        even = min(left, right)
        return at - (even - cut // 2), at + (even - (cut + 1) // 2) + 1

    def size(cut: int) -> int:  # len(render(*window(cut))) without building it
        lo, hi = window(cut)
        markers = (len(f"   [... {lo} earlier tasks not shown ...]") + 1 if lo else 0) + \
                  (len(f"   [... {n - hi} later tasks not shown ...]") + 1 if hi < n else 0)
        return len(header) + 1 + prefix[hi] - prefix[lo] + (hi - lo - 1) + markers

    def render(lo: int, hi: int) -> str:
        shown = ([f"   [... {lo} earlier tasks not shown ...]"] if lo else []) + lines[lo:hi]
        shown += [f"   [... {n - hi} later tasks not shown ...]"] if hi < n else []
        return header + "\n" + "\n".join(shown)

    # size() falls with every cut except where a side's marker first appears, so the first
    # cut that fits is found by bisection within each stretch between those points.
    last = max(n - 1, 0)
    appear = sorted({bisect_left(range(last + 1), True, key=lambda c: window(c)[0] > 0),
                     bisect_left(range(last + 1), True, key=lambda c: window(c)[1] < n)} - {0})
    for lo_cut, hi_cut in zip([0, *appear], [*(a - 1 for a in appear), last]):
        if lo_cut <= hi_cut and size(hi_cut) <= limit:
            return render(*window(bisect_left(range(lo_cut, hi_cut + 1), True, key=lambda c: size(c) <= limit)
                                  + lo_cut))
    return render(*window(last))


def journal_or_summary(src: Sources) -> str:
    s = src.settings
    lines = read_progress(src.paths.progress)[-s.journal_lines:] if s.journal_lines else []
    if not lines:
        return "Recent outcomes: none yet; this is the first task of the session."
    rows = [f"- {line.task} {line.outcome} ({line.iterations} attempt(s)): {line.title}" for line in lines]
    journal = "Recent outcomes:\n" + "\n".join(rows)
    summary = current_summary(src.paths, SummarySettings(s.summary_recent_tasks, s.summary_learnings, s.summary_table_rows))
    if len(journal) > len(summary):
        return summary.strip()
    return newest_within(rows, s.journal_chars, "Recent outcomes:")


def newest_within(rows: list[str], limit: int, header: str) -> str:
    """The newest rows that fit the budget, oldest first, with a marker for what was left out."""
    kept: list[str] = []
    used = len(header) + 60
    for row in reversed(rows):
        if used + len(row) + 1 > limit and kept:
            break
        kept.append(row)
        used += len(row) + 1
    marker = [f"[... {len(rows) - len(kept)} earlier outcomes not shown ...]"] if len(kept) < len(rows) else []
    return "\n".join([header, *marker, *reversed(kept)])


def prior_verdicts(history: list[LedgerEntry]) -> str:
    if not history:
        return ""
    rows = []
    for entry in history:
        v = entry.verdict
        evidence = head_lines("; ".join(v.evidence), EVIDENCE_CHARS)
        rows.append(f"- attempt {entry.iter}: {v.verdict} ({v.category or 'no category'}). "
                    f"Concern: {v.concern or '-'} Next step: {v.next_step or '-'}"
                    + (f" Evidence: {evidence}" if evidence else "") + (f" Question: {v.question}" if v.question else ""))
        rows += [f"  - {member.evaluator}: {member.verdict} ({member.category or 'no category'}). "
                 f"Concern: {member.concern or '-'} Next step: {member.next_step or '-'}" for member in v.panel]
    return "The reviewer's previous verdicts on this task:\n" + "\n".join(rows)


def session_seed(src: Sources) -> SeedMeta | None:
    """The interview record the session was started with (None: none, or no longer readable)."""
    try:
        return load_seed_meta(seed_meta_path(src.paths.dir))
    except BadInput:
        return None


def human_notes(src: Sources, task: Task) -> str:
    """The notes a person left (`tilth note`) that the runner has taken, for this task or all;
    the newest are kept within the channel's budget, the oldest counted."""
    notes = taken_for(src.paths.dir, task.id)
    if not notes:
        return ""
    kept: list[str] = []
    used = 0
    for note in reversed(notes):
        row = f"- [{note.at}] " + (f"(for {note.task}) " if note.task else "") + note.text
        if kept and used + len(row) + 1 > src.settings.human_notes_chars:
            break
        kept.append(row)
        used += len(row) + 1
    dropped = [f"[... {len(notes) - len(kept)} earlier notes not shown ...]"] if len(kept) < len(notes) else []
    return "\n".join(["Notes from the person running this session (follow them; newest last):", *dropped,
                      *reversed(kept)])


def answers_given(src: Sources, task: Task) -> str:
    """The questions asked about this task that a person answered (`tilth answer`), newest kept."""
    answered = [a for a in exchanges(src.paths.dir, task.id) if a.answer is not None]
    if not answered:
        return ""
    rows = [f"- Question (attempt {a.iter}, asked by the {a.asked_by}): {a.question}\n  Answer: {a.answer}"
            for a in answered]
    return newest_within(rows, src.settings.answers_chars,
                         "A person answered these questions about this task (their answer decides; newest last):")


def seed_block(seed: SeedMeta) -> str:
    """The curated slice of the planning interview: TL;DR, scope notes, blockers, open questions."""
    parts = ["Background from the interview that produced this plan (context, not extra work):"]
    if seed.tldr.strip():
        parts.append(f"In short: {seed.tldr.strip()}")
    for heading, rows in (("Scope notes", seed.scope_notes), ("Blockers", seed.blockers),
                          ("Open questions (undecided: if your task depends on one, choose the simplest "
                           "reasonable answer and say so in your case)", seed.open_questions)):
        if rows:
            parts.append(f"{heading}:\n" + "\n".join(f"- {row}" for row in rows))
    return "\n".join(parts) if len(parts) > 1 else ""


def notes_index(notes: KnowledgeBase) -> str:
    rows = notes.index()
    if not rows:
        return ""
    return ("Your notes from earlier work (note_read to open one; they may be stale, the code is the source "
            "of truth):\n" + "\n".join(f"- {row}" for row in rows))


def case_block(case: Case | None) -> str:
    if case is None:
        return "The worker ended its turn without making a case."
    rows = [f"- {c.criterion}: {c.evidence}" for c in case.criteria]
    doubts = [f"- {u}" for u in case.uncertainties] or ["- none stated"]
    return "The worker's case:\n" + case.summary + "\n" + "\n".join(rows) + "\nUncertainties:\n" + "\n".join(doubts)


def checks_block(checks: list[CheckResult], failing_before: Sequence[str] = ()) -> str:
    """The checks' results, their failing tests named (newly failing, or failing on the base commit
    too); those in `failing_before` failed the same way on the base commit."""
    if not checks:
        return ""
    rows = []
    for c in checks:
        result = how_it_failed(c, status="timed out" if c.exit_code is None else f"exit code {c.exit_code}")
        before = " (failed the same way on the base commit, before this session: not this task's doing)" \
            if c.command in failing_before else ""
        rows.append(f"$ {c.command}  -> {result}{before}\n{c.output_tail.rstrip()}")
    return ("Checks run on the working tree (a failing check means the task cannot be accepted, unless it "
            "failed the same way before this session):\n" + "\n\n".join(rows))


def assemble(src: Sources, role: str, task: Task, iteration: int | None,
             channels: list[tuple[str, str, int]]) -> str:
    """`channels` go in the order given: what stays the same from task to task first (conventions,
    seed), what changes per task or attempt last, so a provider's prefix cache serves the start."""
    parts = []
    for name, text, limit in channels:
        shown, truncated = cap(text, limit, name)
        src.events.emit("memory_load", task.id, iteration, role=role, channel=name, present=bool(text),
                        chars=len(shown), truncated=truncated)
        if shown:
            parts.append(shown)
    prompt = redact_text("\n\n".join(parts) + "\n")  # the diff, checks and notes may carry a secret
    offset = append_prompt(src.paths.prompts, task.id, iteration, role, prompt)
    src.events.emit("prompt_assembled", task.id, iteration, role=role, prompt_offset=offset, prompt_chars=len(prompt))
    return prompt


def retry_text(src: Sources, task: Task, history: list[LedgerEntry]) -> str:
    """What the worktree holds for a retry, as it is: a lane made again on the new head after a refused
    landing, or after interrupted work that could not be applied, holds none of the earlier edits."""
    if (refusal := refused_landing(src.paths.ledger_dir, task.id)) is not None:
        return ("Your accepted change did not land on the session branch, so this worktree is a clean checkout of the "
                "current session head (the other tasks' work included); none of your earlier edits are in it. "
                f"{refusal.verdict.concern} {refusal.verdict.next_step}")
    if history and history[-1].verdict.category == "partial_conflict":
        return "None of your earlier edits are in the working tree: it holds the current session head."
    return ("Your earlier edits for this task are still in the working tree; continue from them and address "
            "the reviewer's concerns.") if history else ""


def worker_prompt(src: Sources, task: Task, plan: list[Task], iteration: int, history: list[LedgerEntry]) -> str:
    s = src.settings
    retry = retry_text(src, task, history)
    return assemble(src, "worker", task, iteration, [
        ("conventions", conventions_text(src.repo, s.context_files), s.conventions_chars),
        *([("seed", seed_block(seed), s.seed_chars)] if (seed := session_seed(src)) else []),
        ("plan", plan_prose(plan, task, s.plan_chars), max(s.plan_chars, 1000)),
        ("notes", notes_index(src.notes), s.kb_index_chars),
        ("journal", journal_or_summary(src), s.journal_chars),
        *([("human notes", told, s.human_notes_chars)] if (told := human_notes(src, task)) else []),
        *([("answers", given, s.answers_chars)] if (given := answers_given(src, task)) else []),
        ("task", task_block(task), TASK_CHARS),
        ("verdicts", prior_verdicts(history), s.ledger_chars),
        ("retry", retry, 2000),
    ])


def evaluator_prompt(src: Sources, task: Task, iteration: int, case: Case | None, diff: str,
                     history: list[LedgerEntry], checks: list[CheckResult], verifies: Sequence[VerifyResult] = (),
                     failing_before: Sequence[str] = ()) -> str:
    s = src.settings
    return assemble(src, "evaluator", task, iteration, [
        ("conventions", conventions_text(src.repo, s.context_files), s.conventions_chars),
        ("task", task_block(task), TASK_CHARS),
        *([("human notes", told, s.human_notes_chars)] if (told := human_notes(src, task)) else []),
        *([("answers", given, s.answers_chars)] if (given := answers_given(src, task)) else []),
        ("case", case_block(case), TASK_CHARS),
        ("diff", DIFF_HEADING + (tests_first(diff) or "(no changes)"), s.diff_chars),
        ("checks", checks_block(checks, failing_before), TASK_CHARS),
        ("verified criteria", verifies_block(list(verifies)), TASK_CHARS),
        ("verdicts", prior_verdicts(history), s.ledger_chars),
    ])


def learning_prompt(src: Sources, task: Task, outcome: str, history: list[LedgerEntry]) -> str:
    s = src.settings
    last = history[-1] if history else None
    result = f"Outcome: {outcome}." + (f"\n{case_block(last.case)}" if last else "")
    ask = ("Did this task surface anything durable about this codebase that would help future tasks "
           "(conventions, gotchas, commands that work)? Reply with at most 5 lines starting with '- ', "
           "or NONE if nothing is worth keeping.")
    return assemble(src, "self_improvement", task, None, [
        ("conventions", conventions_text(src.repo, s.context_files), s.conventions_chars),
        ("task", task_block(task), TASK_CHARS),
        ("outcome", result, TASK_CHARS),
        ("verdicts", prior_verdicts(history), s.ledger_chars),
        ("ask", ask, 1000),
    ])
