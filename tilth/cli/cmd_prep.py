"""`tilth prep --repo PATH "goal"`: the planning interview. The model reads the repository
(read-only), asks questions on the terminal (or from `--answers FILE`, or nobody:
`--no-questions`) and submits a plan; this writes `prd.json`, `seed-meta.json` and the
question/answer record `interview.md` to the output dir, each atomically. The tool loop is
`agents/backends/interview.py`; this module is the terminal, the answers file and the files.
"""

from __future__ import annotations

import argparse
import sys

from tilth.cli.stderr import say
from tilth.core.errors import BadInput

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (~5 ms of a cold start)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from tilth.agents.backends.interview import Exchange, Interview, Plan

PROMPT = "answer> "
DEFAULT_MAX_STEPS = 40


class TerminalAnswers:
    """Each question on stdout, its answer one line from stdin (empty: no answer)."""

    label = "terminal"

    def __init__(self) -> None:
        self.closed = False
        self.asked = 0

    def __call__(self, question: str) -> str | None:
        self.asked += 1
        print(f"\nQuestion {self.asked}: {question}", flush=True)
        if self.closed:
            print("(stdin is closed: recorded as an open question)", flush=True)
            return None
        try:
            return input(PROMPT)
        except EOFError:
            self.closed = True
            print("\n(stdin closed: this and later questions are recorded as open questions)", flush=True)
            return None


class FileAnswers:
    """Answers from a file, in order; an object {question: answer} first answers a question it names."""

    label = "answers file"

    def __init__(self, path: Path):
        self.path = path
        self.left = read_answers(path)
        self.asked = 0

    def __call__(self, question: str) -> str | None:
        self.asked += 1
        key = _key(question)
        named = [i for i, (asked, _) in enumerate(self.left) if asked == key]
        answer = self.left.pop(named[0] if named else 0)[1] if self.left else None
        shown = answer if answer is not None else f"(none left in {self.path}: recorded as an open question)"
        print(f"\nQuestion {self.asked}: {question}\n{PROMPT}{shown}", flush=True)
        return answer


class NoAnswers:
    label = "nobody"

    def __init__(self) -> None:
        self.asked = 0

    def __call__(self, question: str) -> None:
        self.asked += 1
        print(f"\nQuestion {self.asked}: {question}\n(not asked: recorded as an open question)", flush=True)
        return None


def _key(question: str) -> str:
    return " ".join(question.split()).casefold()


def read_answers(path: Path) -> list[tuple[str | None, str]]:
    """(normalised question or None, answer), in order, from a JSON list of strings, a JSON object
    {question: answer}, or plain text with one answer per line (blank lines skipped)."""
    import orjson

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"--answers {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"--answers {path}: cannot read it as UTF-8 text ({exc})") from None
    stripped = text.strip()
    if stripped[:1] in ("[", "{"):
        try:
            data = orjson.loads(stripped)
        except orjson.JSONDecodeError as exc:
            raise BadInput(f"--answers {path}: looks like JSON but is not valid ({exc}); give a JSON list of "
                           "strings, a JSON object {question: answer}, or one answer per line") from None
        if isinstance(data, list) and all(isinstance(a, str) for a in data):
            return [(None, a) for a in data]
        if isinstance(data, dict) and all(isinstance(a, str) for a in data.values()):
            return [(_key(q), a) for q, a in data.items()]
        raise BadInput(f"--answers {path}: a JSON answers file is a list of strings or an object whose values "
                       "are strings")
    return [(None, line.strip()) for line in text.splitlines() if line.strip()]


def choose_answerer(args: argparse.Namespace) -> TerminalAnswers | FileAnswers | NoAnswers:
    from pathlib import Path

    if args.answers and args.no_questions:
        raise BadInput("--answers and --no-questions contradict each other; pass one")
    if args.answers:
        return FileAnswers(Path(args.answers).expanduser())
    if args.no_questions:
        return NoAnswers()
    if not sys.stdin.isatty():
        say("stdin is not a terminal and no --answers was given: questions are recorded as open questions "
            "(as with --no-questions)")
        return NoAnswers()
    return TerminalAnswers()


def transcript(goal: str, repo: str, head: str | None, interview: Interview, started: str, ended: str,
               answered_by: str, plan: Plan | None, error: str | None) -> str:
    meter = interview.meter
    tokens = f"{meter.tokens:,}" + ("" if not meter.unknown_usage_calls else "+ (some calls reported none)")
    lines = [f"# Interview: {' '.join(goal.split())[:100]}", "",
             f"- goal: {goal.strip()}", f"- repository: {repo}" + (f" (HEAD {head})" if head else ""),
             f"- model: {interview.model}", f"- started: {started}", f"- ended: {ended}",
             f"- model calls: {interview.model_calls}, tokens: {tokens}", f"- answered by: {answered_by}", ""]
    lines += ["## Questions and answers", ""]
    if not interview.exchanges:
        lines += ["(the model asked no questions)", ""]
    for number, exchange in enumerate(interview.exchanges, 1):
        lines += [f"### Q{number}. {exchange.question}", "", _quote(exchange), ""]
    if error is not None:
        lines += ["## No plan", "", error, ""]
    if plan is not None:
        lines += ["## Plan", "", plan.tldr, ""]
        for task in plan.tasks:
            lines += [f"### {task['id']}: {task.get('title', '')}", ""]
            if str(task.get("description") or "").strip():
                lines += [str(task["description"]).strip(), ""]
            lines += ["Acceptance criteria:", *[f"- {c['text']} (verify: `{c['verify']}`)" if isinstance(c, dict) else f"- {c}"
                                              for c in task["acceptance_criteria"]], ""]
        for heading, rows in (("Scope notes", plan.scope_notes), ("Blockers", plan.blockers),
                              ("Open questions", plan.open_questions)):
            lines += [f"## {heading}", "", *([f"- {row}" for row in rows] or ["(none)"]), ""]
    return "\n".join(lines)


def _quote(exchange: Exchange) -> str:
    from tilth.agents.backends.interview import NO_ANSWER

    if exchange.answer is None:
        return f"*{NO_ANSWER}*"
    return "\n".join(f"> {line}" if line else ">" for line in exchange.answer.splitlines())


def warnings(tasks: list[dict[str, Any]]) -> list[str]:
    """`tilth plan check`'s warnings about a valid plan (vague criteria, tasks too large, ...)."""
    import orjson

    from tilth.cli.plan_check import lint
    from tilth.store.prd import parse_plan

    return [str(w) for w in lint(parse_plan(orjson.dumps(tasks), "the submitted plan"))]


def cmd_prep(args: argparse.Namespace) -> int:
    from pathlib import Path

    import orjson

    from tilth.agents.backends.interview import Interview, tasks_without_criteria
    from tilth.cli.inputs import repository
    from tilth.cli.liveness import waiting
    from tilth.core.clock import iso, utc_now
    from tilth.core.settings_load import load_settings
    from tilth.views.figures import plural
    from tilth.git.worktrees import open_source_repo
    from tilth.store.events import EventLog
    from tilth.store.home import tilth_home
    from tilth.store.jsonio import write_atomic
    from tilth.store.redaction import register_secret, scan_for_secrets
    from tilth.store.seed_meta import SeedMeta, seed_meta_path, write_seed_meta

    goal = args.goal.strip()
    if not goal:
        raise BadInput("the goal is empty; say what you want done, e.g. tilth prep --repo . \"add a --json flag\"")
    if args.max_steps < 1:
        raise BadInput(f"--max-steps {args.max_steps}: give at least 1")
    settings = load_settings(tilth_home())
    if not settings.base_url:
        raise BadInput("tilth prep needs a model: set TILTH_BASE_URL (a URL or a preset) and TILTH_WORKER_MODEL "
                       "(or TILTH_PREP_MODEL)")
    if not settings.endpoint("prep")[2]:
        raise BadInput("no model for the interview: set TILTH_PREP_MODEL or TILTH_WORKER_MODEL")
    register_secret(settings.api_key)
    scan_for_secrets()
    repo = open_source_repo(repository(args.repo))
    root = Path(repo.workdir).resolve()
    head = str(repo.head.target)
    out = Path(args.out).expanduser() if args.out else Path.cwd() / f"prep-{utc_now().strftime('%Y%m%d-%H%M%S')}"
    if out.exists() and not out.is_dir():
        raise BadInput(f"--out {out} is a file; pass a directory")
    if (out / "prd.json").exists():
        raise BadInput(f"{out} already holds a prd.json; pass --out a new directory")
    answerer = choose_answerer(args)
    out.mkdir(parents=True, exist_ok=True)

    events = EventLog(out / "prep-events.jsonl")
    interview = Interview(settings, events, root, answerer, args.max_steps,
                          progress=lambda line: print(f"  ({line})", file=sys.stderr, flush=True), review=warnings,
                          waiting=waiting)
    print(f"prep: interviewing {interview.model} about {root} (HEAD {head[:12]}); output: {out}", flush=True)
    started = iso()
    record = out / "interview.md"
    try:
        plan = interview.run(goal, head)
        missing = tasks_without_criteria(list[object](plan.tasks))
        if missing:  # the interview refuses such a plan already; never write one either way
            raise BadInput(f"refusing to write a plan with tasks without acceptance criteria: {', '.join(missing)}")
    except BaseException as exc:
        error = str(exc) if isinstance(exc, Exception) and str(exc) else type(exc).__name__
        write_atomic(record, transcript(goal, str(root), head, interview, started, iso(), answerer.label, None,
                                        f"No plan was written: {error}").encode())
        raise
    ended = iso()
    meta = SeedMeta(interviewer_model=interview.model, started_at=started, ended_at=ended,
                    tokens=interview.meter.tokens, tokens_known=not interview.meter.unknown_usage_calls,
                    tldr=plan.tldr, open_questions=plan.open_questions, blockers=plan.blockers,
                    scope_notes=plan.scope_notes, goal=goal, repo=str(root), head=head,
                    model_calls=interview.model_calls, questions=len(interview.exchanges),
                    answered_by=answerer.label)
    write_atomic(out / "prd.json", orjson.dumps(plan.tasks, option=orjson.OPT_INDENT_2) + b"\n")
    write_seed_meta(seed_meta_path(out), meta)
    write_atomic(record, transcript(goal, str(root), head, interview, started, ended, answerer.label, plan,
                                    None).encode())
    print(f"\nplan: {out / 'prd.json'} ({plural(len(plan.tasks), 'task')}); interview: {record}", flush=True)
    if plan.open_questions or plan.blockers:
        print(f"open questions: {len(plan.open_questions)}, blockers: {len(plan.blockers)} "
              f"(in {seed_meta_path(out).name}; every worker sees them)", flush=True)
    print(f"next: tilth start --repo {args.repo or root} --seed {out}", flush=True)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    prep = sub.add_parser("prep", help="interview: the model reads the repository, asks you questions and writes "
                                       "a plan (prd.json, seed-meta.json, interview.md) for `tilth start`")
    prep.add_argument("goal", help="what you want done, in a sentence or a paragraph")
    prep.add_argument("--repo", help="the git repository (its working tree is read, never written; default: the one "
                                      "holding the current directory)")
    prep.add_argument("--out", metavar="DIR", help="where the plan goes (default: ./prep-<timestamp>)")
    prep.add_argument("--answers", metavar="FILE", help="answer the questions from FILE, in order: a JSON list of "
                                                        "strings, a JSON object {question: answer}, or one answer "
                                                        "per line")
    prep.add_argument("--no-questions", action="store_true",
                      help="ask nothing; each question the model has is recorded as an open question")
    prep.add_argument("--max-steps", type=int, default=DEFAULT_MAX_STEPS, metavar="N",
                      help=f"model calls the interview may make before it gives up (default {DEFAULT_MAX_STEPS})")
    prep.set_defaults(handler=cmd_prep)
