"""The function-tool schemas offered to the model, in Chat Completions format."""

from __future__ import annotations

from typing import Any


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required},
    }}


STR = {"type": "string"}
INT = {"type": "integer"}

READ_FILE = _tool("read_file", "Read a text file of the repository, with line numbers.",
                  {"path": STR, "offset": {**INT, "description": "first line, 1-based"},
                   "limit": {**INT, "description": "number of lines"}}, ["path"])
WRITE_FILE = _tool("write_file", "Create or overwrite a file with the given content.",
                   {"path": STR, "content": STR}, ["path", "content"])
EDIT_FILE = _tool("edit_file", "Replace the one occurrence of `old` in a file with `new`.",
                  {"path": STR, "old": STR, "new": STR}, ["path", "old", "new"])
LIST_FILES = _tool("list_files", "List repository files, optionally filtered by a glob such as '*.py'.",
                   {"pattern": STR}, [])
GREP = _tool("grep", "Search file contents with a regular expression.", {"pattern": STR, "path": STR}, ["pattern"])
BASH = _tool("bash", "Run a shell command in the repository root; returns its output and exit code.",
             {"command": STR, "timeout": {**INT, "description": "seconds"}}, ["command"])
NOTE_WRITE = _tool("note_write", "Save a scratch note for later tasks (kept outside the repository). "
                                  "Start it with a one-line summary.", {"name": STR, "text": STR}, ["name", "text"])
NOTE_READ = _tool("note_read", "Read one of your scratch notes.", {"name": STR}, ["name"])

CRITERIA = {"type": "array", "items": {"type": "object", "properties": {"criterion": STR, "evidence": STR},
                                       "required": ["criterion", "evidence"]}}
SUBMIT_CASE = _tool("submit_case", "Finish your turn: summarise the change and give evidence for every "
                                   "acceptance criterion.",
                    {"summary": STR, "criteria": CRITERIA, "uncertainties": {"type": "array", "items": STR}},
                    ["summary", "criteria"])
CATEGORIES = ["none", "acceptance_gap", "weak_test", "half_finished", "scope_creep", "spec_violation",
              "check_failed", "other"]
NEEDS_HUMAN = _tool("needs_human", "End your turn without a case because the task cannot go on without a "
                                   "person's decision (which API to keep, a missing credential, an ambiguous "
                                   "criterion). The task waits for the answer; your edits are kept for the retry. "
                                   "Use it only for what the repository and the task cannot tell you.",
                    {"question": {**STR, "description": "one question a person can answer"},
                     "context": {**STR, "description": "what you found and the options you see"}},
                    ["question", "context"])
SUBMIT_VERDICT = _tool("submit_verdict", "Finish the review with your decision. needs_human (with question) only "
                                         "when the criteria cannot be judged without a person's decision.",
                       {"verdict": {"type": "string", "enum": ["accept", "reject", "needs_human"]},
                        "category": {"type": "string", "enum": CATEGORIES}, "concern": STR,
                        "evidence": {"type": "array", "items": STR}, "next_step": STR, "question": STR},
                       ["verdict", "category", "concern", "evidence", "next_step"])

WORKER_TOOLS = [READ_FILE, WRITE_FILE, EDIT_FILE, LIST_FILES, GREP, BASH, NOTE_WRITE, NOTE_READ, SUBMIT_CASE,
                NEEDS_HUMAN]
EVALUATOR_TOOLS = [READ_FILE, LIST_FILES, GREP, SUBMIT_VERDICT]

LINES = {"type": "array", "items": STR}
ASK_USER = _tool("ask_user", "Ask the person who wants this work one question; returns their answer. "
                             "Ask only what the repository cannot tell you.", {"question": STR}, ["question"])
PLAN_TASK = {"type": "object", "properties": {
    "id": {**STR, "description": "T-001, T-002, ... in order"}, "title": STR, "description": STR,
    "acceptance_criteria": {"type": "array", "items": {"anyOf": [STR, {
        "type": "object", "properties": {"text": STR, "verify": {**STR, "description": "a shell command, run in "
                                                                   "the repository, that exits 0 when it holds"}},
        "required": ["text", "verify"]}]},
        "description": "concrete, checkable statements (a command and what it prints, a file and what it "
                       "contains); {text, verify} when a command proves it"}},
    "required": ["id", "title", "description", "acceptance_criteria"]}
SUBMIT_PLAN = _tool("submit_plan", "Finish the interview with the plan: tasks in the order they should be done, "
                                   "each small enough for one commit.",
                    {"tasks": {"type": "array", "items": PLAN_TASK}, "tldr": STR, "scope_notes": LINES,
                     "blockers": LINES, "open_questions": LINES}, ["tasks", "tldr"])

PREP_TOOLS = [READ_FILE, LIST_FILES, GREP, ASK_USER, SUBMIT_PLAN]
