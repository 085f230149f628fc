"""The final review: when a run ends with tasks done, the evaluator reviews the session's whole diff
against the base and the whole plan (duplicated code across tasks, leftovers, inconsistencies
between tasks). Its findings go to the journal (`final_review`), report.md and the PR body;
with `final_review_tasks` they also become follow-up tasks of the plan, once per session.
Best effort: an evaluator that fails, or a spend/token cap that trips during the review, loses only
the review. A run that ends with a failed task gets none (the session ends failed; the review waits for
a run that ends with every task through)."""

from __future__ import annotations

from pathlib import Path

from tilth.agents.backends.chat import ProviderError
from tilth.agents.confinement import Confinement
from tilth.agents.accounting import CapReached
from tilth.agents.protocol import FINAL_REVIEW_ID, AgentFailed, Backend, EvaluationJob, UsageLimited
from tilth.core.config import Settings
from tilth.git.gitops import range_patch
from tilth.run.context import Sources, assemble
from tilth.run.outcomes import Workspace
from tilth.store.events import EventLog, document
from tilth.store.ledger import Case, Verdict
from tilth.store.prd import Task, TaskStatus, add_tasks, load_current_plan

document({"final_review": ("the evaluator reviewed the session's whole diff against the base and the whole plan; "
                           "data: head (the commit reviewed), backend, verdict, concern, findings (one line each), error "
                           "(when the evaluator failed or a cap tripped), tasks_added (follow-up task ids, with "
                           "final_review_tasks)", "head backend verdict concern findings error tasks_added")})

ASK = ("You are reviewing a whole session of work at once: every task of the plan below was done by a separate "
       "worker, one commit each, and each was accepted on its own. Review the combined diff against the base for "
       "what no single review could see: code duplicated across tasks, leftovers (debug output, TODOs, dead or "
       "commented-out code, stray files), and inconsistencies between tasks (names, behaviour, docs that disagree "
       "with the code). Accept when there is nothing worth a follow-up; otherwise reject, with one finding per "
       "evidence item (each naming the file and what to do).")


def reviewed_heads(events: EventLog) -> tuple[set[str], bool]:
    """The commits already reviewed, and whether a review already added follow-up tasks."""
    reviews = [e for e in events.read() if e.get("type") == "final_review"]
    return ({str(e["data"].get("head")) for e in reviews},
            any(e["data"].get("tasks_added") for e in reviews))


def findings_of(verdict: Verdict) -> list[str]:
    if verdict.accepted:
        return []
    found = [" ".join(e.split()) for e in verdict.evidence if e.strip()]
    return found or [" ".join((verdict.concern or verdict.question or "(no finding given)").split())]


def review_session(ws: Workspace, backend: Backend, settings: Settings, sources: Sources,
                   sandbox: Confinement) -> list[str]:
    """Review the branch once per head; the ids of the follow-up tasks added (none unless asked)."""
    plan = load_current_plan(ws.paths.prd)
    head = str(ws.repo.head.target)
    seen, added_before = reviewed_heads(ws.events)
    if not settings.final_review or head in seen or not any(t.status == TaskStatus.done for t in plan) \
            or any(t.status == TaskStatus.failed for t in plan) or head == ws.record.base_commit:
        return []
    patch = range_patch(ws.repo, ws.record.base_commit, head)
    rows = "\n".join(f"- {t.id} ({t.status.value}): {t.title}\n" + "\n".join(f"  - {c}" for c in t.criterion_texts)
                     for t in plan)
    task = Task(id=FINAL_REVIEW_ID, title="Final review of the session", description=ASK,
                acceptance_criteria=["no duplicated code, leftovers or inconsistencies across the session's tasks"])
    prompt = assemble(sources, "final_review", task, None, [
        ("ask", ASK, 2000), ("plan", "The plan:\n" + rows, max(settings.plan_chars, 4000)),
        ("diff", f"The session's whole diff against the base {ws.record.base_commit[:7]}:\n" + (patch or "(none)"),
         settings.diff_chars)])
    job = EvaluationJob(ws.record.id, task, 1, Path(ws.record.worktree), prompt,
                        Case(summary="The whole session, for the final review."), patch, "", [], ws.events, [], sandbox)
    try:
        verdict = backend.evaluator.evaluate(job)
    except (ProviderError, AgentFailed, UsageLimited, CapReached) as exc:
        ws.events.emit("final_review", head=head, backend=backend.name, verdict=None, concern="", findings=[],
                       error=str(exc), tasks_added=[])
        return []
    found = findings_of(verdict)
    added = []
    if found and settings.final_review_tasks and not added_before:
        added = add_tasks(ws.paths.prd, [
            {"title": f"Follow up the final review: {f[:80]}", "description": f"The final review of session "
             f"{ws.record.id} found: {f}", "acceptance_criteria": [f"The finding is addressed: {f}"]} for f in found],
            prefix="REVIEW-")
    ws.events.emit("final_review", head=head, backend=backend.name, verdict=verdict.verdict,
                   concern=" ".join(verdict.concern.split()), findings=found, error=None, tasks_added=added)
    return added
