"""sessions/<id>/answers/<task>.jsonl: a parked task's questions and a person's answers.

One flushed JSONL line per event, oldest first:

    {"kind": "question", "iter": 3, "asked_by": "worker"|"evaluator"|"stall breaker", "question": "...", "context": "...", "at": ...}
    {"kind": "answer", "iter": 3, "text": "...", "at": ..., "id": ..., "by": "cli"|"dashboard"|"unknown"}

`iter` is the ledger iteration that asked; an answer names the question it answers by it. A task
is parked on its last question; that question is answered once an answer line with the same
`iter` exists. The runner writes questions (at most one per `iter`), `tilth answer` writes answers;
no line is ever rewritten, so whether a parked task may go on is read from the file alone (the
runner, `tilth status` and the supervisor agree without sharing anything else).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from tilth.core.clock import iso
from tilth.store.actors import known_actor
from tilth.store.events import document
from tilth.store.jsonio import append_jsonl, read_jsonl

document(
    {
        "task_answered": ("a parked task's question has an answer (`tilth answer`): the task is pending again "
                          "and its attempts start over (its PARKED placeholder leaves the branch when it runs again, "
                          "`placeholder_taken`); data: question, by (who answered: cli|dashboard, also when a "
                          "runner or a dispatched session's worker takes the answer at a task boundary; unknown: "
                          "an answer through the broker whose `by` is none of these; runner: an answer recorded "
                          "without who gave it; `answer` in journals before tilth/actions)", "question by"),
    }
)

MAX_ANSWER_CHARS = 8000


@dataclass(frozen=True)
class Asked:
    iter: int
    asked_by: str
    question: str
    context: str
    at: str
    answer: str | None = None
    """The person's answer (the last one given for this question), None while open."""
    answered_at: str | None = None
    answered_by: str | None = None
    """Who gave that answer (`store/actors`: cli, dashboard or unknown), None when its line does not say."""


def answers_dir(session_dir: Path) -> Path:
    return session_dir / "answers"


def answers_path(session_dir: Path, task_id: str) -> Path:
    return answers_dir(session_dir) / f"{task_id}.jsonl"


def exchanges(session_dir: Path, task_id: str) -> list[Asked]:
    """Every question asked about the task with its answer, oldest first."""
    asked: dict[int, Asked] = {}
    for row in read_jsonl(answers_path(session_dir, task_id)):
        n = row.get("iter")
        if type(n) is not int:
            continue
        if row.get("kind") == "question" and isinstance(row.get("question"), str) and n not in asked:
            asked[n] = Asked(n, str(row.get("asked_by") or "worker"), row["question"], str(row.get("context") or ""),
                             str(row.get("at") or ""))
        elif row.get("kind") == "answer" and isinstance(row.get("text"), str) and n in asked:
            q = asked[n]
            asked[n] = Asked(q.iter, q.asked_by, q.question, q.context, q.at, row["text"], str(row.get("at") or ""),
                             known_actor(row["by"]) if "by" in row else None)
    return list(asked.values())


def last_question(session_dir: Path, task_id: str) -> Asked | None:
    found = exchanges(session_dir, task_id)
    return found[-1] if found else None


def record_question(session_dir: Path, task_id: str, iteration: int, asked_by: str, question: str,
                    context: str) -> None:
    """Once per iteration: a recovery that parks again finds the line already there."""
    if any(q.iter == iteration for q in exchanges(session_dir, task_id)):
        return
    answers_dir(session_dir).mkdir(exist_ok=True)
    append_jsonl(answers_path(session_dir, task_id), {"kind": "question", "iter": iteration, "asked_by": asked_by,
                                                      "question": question, "context": context, "at": iso()})


def record_answer(session_dir: Path, task_id: str, iteration: int, text: str, answer_id: str | None = None,
                  by: str | None = None) -> str:
    """`answer_id` given (an answer relayed through the broker): written once, however often relayed.
    `by`: who answered (kept as `known_actor` reads it)."""
    if answer_id is not None and any(row.get("id") == answer_id for row in read_jsonl(answers_path(session_dir, task_id))):
        return answer_id
    answers_dir(session_dir).mkdir(exist_ok=True)
    answer_id = answer_id or secrets.token_hex(4)
    append_jsonl(answers_path(session_dir, task_id), {"kind": "answer", "iter": iteration,
                                                      "text": text[:MAX_ANSWER_CHARS], "at": iso(), "id": answer_id,
                                                      **({} if by is None else {"by": known_actor(by)})})
    return answer_id


def is_answered(session_dir: Path, task_id: str) -> bool:
    """The task's last question has an answer (a parked task with one may go on)."""
    last = last_question(session_dir, task_id)
    return last is not None and last.answer is not None


def same_question(a: str, b: str) -> bool:
    return " ".join(a.casefold().split()) == " ".join(b.casefold().split())

