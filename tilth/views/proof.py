"""What was proved: per task, each acceptance criterion with ✓/✗, its verify command and exit status
on the last attempt (or that it rests on the evaluator's judgement alone), every check of the last
attempt by command with its result (passing ones too), each rejection (attempt, category, concern;
bounded), the final review's findings, and the checks that were already failing on the base commit.
Markdown lines for report.md and the PR description."""

from __future__ import annotations

from tilth.views.tally import SessionTally


def proof_lines(t: SessionTally) -> list[str]:
    """Nothing when no criterion of the session has a command, no check ran, no attempt was rejected,
    no final review ran and no check failed before the session."""
    lines: list[str] = []
    if any(c.command for task in t.tasks for c in task.criteria):
        lines += ["Acceptance criteria (✓/✗: the command tilth ran on the last attempt and its exit status; "
                  "·: no command, the evaluator's judgement alone):"]
        for task in t.tasks:
            if task.criteria:
                lines.append(f"- {task.id} ({task.shown_outcome})")
                lines += [f"  - {c.mark} {' '.join(c.text.split())}: {c.status}" for c in task.criteria]
    if any(task.check_runs for task in t.tasks):
        lines += ["Checks on each task's last attempt (the commands tilth ran itself and their exit status):"]
        lines += [f"- {task.id} ({task.shown_outcome}): " + "; ".join(c.said for c in task.check_runs)
                  for task in t.tasks if task.check_runs]
    if any(task.rejected for task in t.tasks):
        lines += ["Rejections (attempt: category: concern; tilth's own refusals and the evaluator's):"]
        for task in t.tasks:
            if task.rejected:
                lines.append(f"- {task.id} ({task.shown_outcome})")
                lines += [f"  - {said}" for said in task.rejected]
    if t.final_review is not None:
        if t.final_review_error:
            lines.append(f"Final review of the whole diff: not done ({t.final_review_error})")
        elif not t.final_review:
            lines.append("Final review of the whole diff: no findings"
                         + (f" ({t.final_review_concern})" if t.final_review_concern else ""))
        else:
            lines.append("Final review of the whole diff (the evaluator, across every task):")
            lines += [f"- {finding}" for finding in t.final_review]
    if t.failing_before:
        lines += ["Failing before this session (on the base commit; not blamed on any task, not blocking):"]
        lines += [f"- {check}" for check in t.failing_before]
    return lines
