"""Plans written for other tools, read into tilth's prd.json: for `tilth import`, `tilth start
--prd` and `tilth plan check`. Every format becomes a list of task dicts that `store/prd.parse_plan`
then validates exactly as `tilth start` validates a prd.json.

Formats, told apart by shape (never by file name alone):
- tilth's own prd.json: a JSON array of tasks (passed through untouched);
- a Ralph prd.json: a JSON object with `userStories` ({id, title, description,
  acceptanceCriteria, priority, passes, notes}); ordered by `priority` (ascending, stable),
  `passes: true` is `done`, notes are appended to the description (the worker sees them);
  each of `verificationCommands` (or `verification_commands`) becomes a criterion
  ``{"text": "`<command>` exits 0", "verify": "<command>"}`` that tilth runs itself (in every format, a
  criterion written ``text (verify: `command`)`` carries its command the same way);
- a GitHub issue export (`gh issue list --json number,title,body[,state]`): a JSON array of
  objects with `number`; id `GH-<number>`, ordered by number; criteria from a
  `## Acceptance criteria` section, else the body's task-list items (`- [ ]`); a CLOSED issue is `done`;
- a markdown checklist: `- [ ] title` lines (`- [x]` is done, `- [ ] T-7: title` names its id),
  each with indented `- criterion` bullets; other indented lines are its description;
- a directory of markdown task files, ordered by file name: front matter (`id`, `title`,
  optional `status`, `depends_on`), a `## Description` section and `## Acceptance criteria` bullets.

Only text is parsed and dicts built; the one module that knows the formats is this one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from tilth.core.errors import BadInput
from tilth.store.prd import MAX_BYTES, TASK_ID_PATTERN, parse_plan

_ID = re.compile(TASK_ID_PATTERN)
_BOX = re.compile(r"^(?P<indent>[ \t]*)[-*+][ \t]+\[(?P<mark>[ xX])\][ \t]*(?P<text>.*)$")
_VERIFY = re.compile(r"^(?P<text>.*?)\s*\(verify:\s*`(?P<command>[^`]+)`\)\s*$")
_BULLET = re.compile(r"^(?P<indent>[ \t]*)(?:[-*+]|\d+[.)])[ \t]+(?:\[[ xX]\][ \t]*)?(?P<text>.+)$")
_NAMED = re.compile(r"^(?P<id>[A-Za-z][A-Za-z0-9_.]*-[0-9]+)[ \t]*[:\-–—][ \t]*(?P<title>.+)$")
_HEADING = re.compile(r"^#{1,6}[ \t]+(?P<text>.+?)[ \t#]*$")


@dataclass
class Imported:
    data: bytes
    """The plan as tilth's prd.json (validated)."""
    fmt: str
    """`tilth`, `ralph`, `gh`, `checklist` or `feature-dir`."""
    said: str
    """One line saying what was read, e.g. `read a Ralph prd.json (5 user stories)`."""
    count: int


def read_plan(path: Path) -> Imported:
    """Any plan tilth reads, as a valid prd.json; BadInput naming the file and the problem. A
    directory holding a prd.json (as `tilth prep` writes one) is read as that file."""
    from tilth.cli.inputs import plan_file

    path = plan_file(path)
    if path.is_dir():
        return _checked(path, "feature-dir", *_feature_dir(path))
    raw = _read(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    value = _json(text) if text is not None else None
    if isinstance(value, dict) and "userStories" in value:
        return _checked(path, "ralph", *_ralph(path, value))
    if isinstance(value, list) and value and all(isinstance(i, dict) and "number" in i for i in value) \
            and not any("acceptance_criteria" in i for i in value):
        return _checked(path, "gh", *_gh(path, value))
    if value is _NOT_JSON and text is not None and (
            path.suffix.lower() in (".md", ".markdown", ".txt")
            or (text.lstrip()[:1] not in ("[", "{") and any(_BOX.match(line) for line in text.splitlines()))):
        return _checked(path, "checklist", *_checklist(path, text))
    tasks = parse_plan(raw, str(path))  # tilth's own format, or its usual one-line error
    return Imported(raw, "tilth", f"read a tilth prd.json ({_n(len(tasks), 'task')})", len(tasks))


_NOT_JSON = object()


def _json(text: str) -> object:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _read(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise BadInput(f"cannot read plan {path}: {exc.strerror}") from None
    if len(data) > MAX_BYTES:
        raise BadInput(f"plan {path} is more than the limit of {MAX_BYTES // 2**20} MiB; split it into several plans")
    return data


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _checked(path: Path, fmt: str, tasks: list[dict[str, Any]], said: str) -> Imported:
    if not tasks:
        raise BadInput(f"{path}: {said} with no tasks in it; add at least one")
    data = json.dumps(tasks, indent=2, ensure_ascii=False).encode() + b"\n"
    parse_plan(data, f"{path} (read as {_FORMAT_NAMES[fmt]})")
    return Imported(data, fmt, f"read {said}", len(tasks))


_FORMAT_NAMES = {"ralph": "a Ralph prd.json", "gh": "a GitHub issue export", "checklist": "a markdown checklist",
                 "feature-dir": "a directory of markdown task files"}


def _task(task_id: str, title: str, description: str, criteria: list[str], done: bool,
          verify: Sequence[str] = (), **extra: Any) -> dict[str, Any]:
    task = {"id": task_id, "title": title.strip(), "description": description.strip(),
            "acceptance_criteria": [_criterion(c.strip()) for c in criteria if c.strip()]
            + [{"text": f"`{v.strip()}` exits 0", "verify": v.strip()} for v in verify if v.strip()],
            "status": "done" if done else "pending"}
    task.update({k: v for k, v in extra.items() if v})
    return task


def _criterion(text: str) -> str | dict[str, Any]:
    """``text (verify: `command`)`` carries its command (every format; what interview.md writes)."""
    found = _VERIFY.match(text)
    if found is None or not found["text"].strip() or not found["command"].strip():
        return text
    return {"text": found["text"].strip(), "verify": found["command"].strip()}


# --- Ralph ---------------------------------------------------------------------------------

def _ralph(path: Path, value: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    stories = value["userStories"]
    if not isinstance(stories, list):
        raise BadInput(f"{path}: userStories must be a list of stories, got {type(stories).__name__}")
    keyed = []
    for n, story in enumerate(stories, 1):
        if not isinstance(story, dict):
            raise BadInput(f"{path}: user story #{n} is not an object")
        priority = story.get("priority")
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, (int, float))):
            raise BadInput(f"{path}: user story #{n} ({story.get('id', '?')}): priority must be a number, "
                           f"got {priority!r}")
        criteria = story.get("acceptanceCriteria") or []
        if isinstance(criteria, str):
            criteria = [criteria]
        if not isinstance(criteria, list) or not all(isinstance(c, str) for c in criteria):
            raise BadInput(f"{path}: user story #{n} ({story.get('id', '?')}): acceptanceCriteria must be a list "
                           "of strings")
        verify = story.get("verificationCommands", story.get("verification_commands")) or []
        if isinstance(verify, str):
            verify = [verify]
        if not isinstance(verify, list) or not all(isinstance(v, str) for v in verify):
            raise BadInput(f"{path}: user story #{n} ({story.get('id', '?')}): verificationCommands must be a list "
                           "of shell commands (strings)")
        description = str(story.get("description") or "")
        notes = story.get("notes")
        if isinstance(notes, str) and notes.strip():
            description = f"{description.strip()}\n\nNotes: {notes.strip()}"
        task = _task(str(story.get("id") or f"US-{n:03d}"), str(story.get("title") or ""), description, criteria,
                     story.get("passes") is True, verify)
        keyed.append(((0, priority) if priority is not None else (1, 0), task))
    tasks = [task for _, task in sorted(keyed, key=lambda pair: pair[0])]
    return tasks, f"a Ralph prd.json ({_n(len(tasks), 'user story').replace('storys', 'stories')})"


# --- GitHub issues --------------------------------------------------------------------------

def _gh(path: Path, issues: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    tasks = []
    for issue in sorted(issues, key=lambda i: i["number"] if isinstance(i["number"], int) else 0):
        number = issue["number"]
        if isinstance(number, bool) or not isinstance(number, int):
            raise BadInput(f"{path}: an issue's number must be an integer, got {number!r}")
        body = issue.get("body") or ""
        if not isinstance(body, str):
            raise BadInput(f"{path}: issue #{number}: body must be text")
        description, criteria = _split_criteria(body.replace("\r\n", "\n"))
        if not criteria:
            raise BadInput(f"{path}: issue #{number} has no acceptance criteria: give its body an "
                           "`## Acceptance criteria` section of bullets or `- [ ]` task-list items")
        state = str(issue.get("state") or "").upper()
        tasks.append(_task(f"GH-{number}", str(issue.get("title") or ""), description or str(issue.get("title") or ""),
                           criteria, state == "CLOSED"))
    return tasks, f"a GitHub issue export ({_n(len(tasks), 'issue')})"


def _sections(text: str) -> list[tuple[str, list[str]]]:
    """(heading in lower case, its lines); the text before any heading has heading ""."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    in_fence = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        heading = None if in_fence else _HEADING.match(line)
        if heading and line.startswith("##"):
            sections.append((heading["text"].strip().lower().rstrip(":"), []))
        else:
            sections[-1][1].append(line)
    return sections


def _is_criteria_heading(heading: str) -> bool:
    return heading in ("acceptance criteria", "acceptance", "criteria", "definition of done")


def _bullets(lines: list[str]) -> list[str]:
    """Bullet items (continuation lines joined), task-list boxes stripped."""
    items: list[str] = []
    for line in lines:
        bullet = _BULLET.match(line)
        if bullet:
            items.append(bullet["text"].strip())
        elif items and line.strip() and line[:1] in " \t":
            items[-1] += " " + line.strip()
    return items


def _split_criteria(body: str) -> tuple[str, list[str]]:
    """(description, criteria): a criteria section's bullets, else every `- [ ]` item in the body."""
    sections = _sections(body)
    chosen = [lines for heading, lines in sections if _is_criteria_heading(heading)]
    if chosen:
        rest = [("## " + heading if heading else "", lines) for heading, lines in sections
                if not _is_criteria_heading(heading)]
        description = "\n".join(part for heading, lines in rest for part in ([heading] if heading else []) + lines)
        return description.strip(), [c for lines in chosen for c in _bullets(lines)]
    lines = body.splitlines()
    criteria = [m["text"].strip() for line in lines if (m := _BOX.match(line)) and m["text"].strip()]
    description = "\n".join(line for line in lines if not _BOX.match(line))
    return description.strip(), criteria


# --- markdown checklist ----------------------------------------------------------------------

def _checklist(path: Path, text: str) -> tuple[list[dict[str, Any]], str]:
    items: list[dict[str, Any]] = []
    top: int | None = None
    for number, line in enumerate(text.splitlines(), 1):
        box = _BOX.match(line)
        indent = len(box["indent"].expandtabs(4)) if box else 0
        if box and (top is None or indent <= top):
            top = indent
            title = box["text"].strip()
            if not title:
                raise BadInput(f"{path}:{number}: a checklist item with no title")
            named = _NAMED.match(title)
            task_id = named["id"] if named and _ID.match(named["id"]) else f"T-{len(items) + 1}"
            items.append({"line": number, "id": task_id, "title": named["title"] if named else title,
                          "done": box["mark"] in "xX", "criteria": [], "description": []})
        elif items and line.strip() and len(line) - len(line.lstrip()) > (top or 0):
            bullet = _BULLET.match(line)
            if bullet:
                items[-1]["criteria"].append(bullet["text"].strip())
            else:
                items[-1]["description"].append(line.strip())
    if not items:
        raise BadInput(f"{path}: no checklist items found; write one `- [ ] title` line per task, "
                       "with indented `- criterion` bullets under it")
    tasks = []
    for item in items:
        if not item["criteria"]:
            raise BadInput(f"{path}:{item['line']}: `{item['title']}` has no acceptance criteria; indent "
                           "`- criterion` bullets under it")
        tasks.append(_task(item["id"], item["title"], "\n".join(item["description"]) or item["title"],
                           item["criteria"], item["done"]))
    return tasks, f"a markdown checklist ({_n(len(tasks), 'item')})"


# --- a directory of markdown task files ------------------------------------------------------

def _front_matter(path: Path, text: str) -> tuple[dict[str, str], str]:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            break
    else:
        raise BadInput(f"{path}: front matter opened with `---` is never closed")
    fields = {}
    for number, line in enumerate(lines[1:end], 2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise BadInput(f"{path}:{number}: front matter lines are `key: value`, got {line.strip()!r}")
        fields[key.strip().lower()] = value.strip().strip("'\"")
    return fields, "\n".join(lines[end + 1:])


def _id_list(path: Path, value: str) -> list[str]:
    ids = [part.strip().strip("'\"") for part in value.strip().strip("[]").split(",") if part.strip()]
    for dep in ids:
        if not _ID.match(dep):
            raise BadInput(f"{path}: depends_on names {dep!r}, which is not a task id")
    return ids


def _feature_dir(path: Path) -> tuple[list[dict[str, Any]], str]:
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in (".md", ".markdown"))
    if not files:
        raise BadInput(f"{path}: a directory with neither a prd.json nor markdown task files (*.md) in it")
    tasks = []
    for file in files:
        try:
            text = _read(file).decode("utf-8").replace("\r\n", "\n")
        except UnicodeDecodeError:
            raise BadInput(f"{file}: not UTF-8 text") from None
        fields, body = _front_matter(file, text)
        sections = _sections(body)
        title = fields.get("title") or next((m["text"] for line in sections[0][1] if (m := _HEADING.match(line))), "")
        if not title:
            raise BadInput(f"{file}: no title: add `title:` to its front matter or a `# Title` line")
        task_id = fields.get("id") or file.stem
        if not _ID.match(task_id):
            raise BadInput(f"{file}: no usable id: add `id: F-1` (letters, digits, `.`, `_`, `-`) to its front matter")
        described = [lines for heading, lines in sections if heading in ("description", "context", "summary")]
        if described:
            description = "\n".join(line for lines in described for line in lines)
        else:
            description = "\n".join(line for line in sections[0][1] if not _HEADING.match(line))
        criteria = [c for heading, lines in sections if _is_criteria_heading(heading) for c in _bullets(lines)]
        if not criteria:
            raise BadInput(f"{file}: no acceptance criteria: add an `## Acceptance criteria` section of `- ` bullets")
        status = fields.get("status", "").lower()
        tasks.append(_task(task_id, title, description or title, criteria, status in ("done", "true", "passes"),
                           depends_on=_id_list(file, fields.get("depends_on", "")),
                           allow_empty=fields.get("allow_empty", "").lower() == "true"))
    return tasks, f"a directory of markdown task files ({_n(len(tasks), 'file')})"
