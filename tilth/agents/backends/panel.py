"""An evaluator panel: several evaluators (any backends) judge the same case and diff, each in
its own fresh context, and a policy decides. `all`: every member must accept. `majority`: more
than half must. The decision carries every member's verdict with its name (the ledger keeps
them, and a retrying worker sees each concern)."""

from __future__ import annotations

from tilth.agents.protocol import EvaluationJob, Evaluator
from tilth.store.ledger import Verdict


class Panel:
    def __init__(self, members: list[tuple[str, Evaluator]], policy: str):
        self.members, self.policy = members, policy

    def evaluate(self, job: EvaluationJob) -> Verdict:
        verdicts = [evaluator.evaluate(job).model_copy(update={"evaluator": name, "panel": []})
                    for name, evaluator in self.members]
        return decide(verdicts, self.policy)


def decide(verdicts: list[Verdict], policy: str) -> Verdict:
    """A member that needs a person's answer parks the task whatever the others say: the question
    is one only a person can settle, and the answer reaches every member next time."""
    if asking := next((v for v in verdicts if v.parks), None):
        return Verdict(verdict="needs_human", category="evaluator_question", question=asking.question,
                       concern=f"{asking.evaluator}: {asking.concern}".rstrip(": "), panel=verdicts)
    accepts = sum(v.accepted for v in verdicts)
    needed = len(verdicts) if policy == "all" else len(verdicts) // 2 + 1
    tally = f"{accepts} of {len(verdicts)} evaluators accepted ({policy} needed)"
    if accepts >= needed:
        return Verdict(verdict="accept", category="", concern="", evidence=[tally], panel=verdicts)
    rejecting = [v for v in verdicts if not v.accepted]
    concern = " | ".join(f"{v.evaluator}: {v.concern or v.category or 'rejected'}" for v in rejecting)
    next_step = " | ".join(f"{v.evaluator}: {v.next_step}" for v in rejecting if v.next_step)
    return Verdict(verdict="reject", category=rejecting[0].category or "panel_rejected", concern=concern,
                   evidence=[tally], next_step=next_step, panel=verdicts)
