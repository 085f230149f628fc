"""The actions a person takes on a session, one function each, the same for a local session and a
dispatched one: `tilth answer/note/stop/resume/start` and the dashboard call these and only print or
show the `Acted` they return. Each submodule is imported when its action is called (the CLI's cold start)."""

from __future__ import annotations

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from tilth.actions.acted import Acted
    from tilth.actions.answering import answer_question
    from tilth.actions.noting import leave_note
    from tilth.actions.resuming import resume_session
    from tilth.actions.starting import start_session
    from tilth.actions.stopping import stop_session

WHERE = {"Acted": "acted", "answer_question": "answering", "leave_note": "noting", "resume_session": "resuming",
         "start_session": "starting", "stop_session": "stopping"}

__all__ = ["Acted", "answer_question", "leave_note", "resume_session", "start_session", "stop_session"]


def __getattr__(name: str) -> object:
    if name not in WHERE:
        raise AttributeError(f"module 'tilth.actions' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"tilth.actions.{WHERE[name]}"), name)
